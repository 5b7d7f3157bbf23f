"""Runs wait_timeout.mlir's broken ring (2 threads: a producer one slot short,
and a consumer) and checks that the stuck wait is reported and the launch
fails within seconds. The kernel runs in a child process: a trap destroys the
CUDA context, and a real hang must not take this process with it."""

import os
import subprocess
import sys
import time
from pathlib import Path

# The child imports kvpipe from this checkout, as the runner does (gpu_common).
_PACKAGE = Path(__file__).resolve().parents[4] / "python"

CHILD = r"""
import sys
from kvpipe import cuda
cuda.ensure_context(0)
kernel = cuda.Module(open(sys.argv[1], "rb").read(), name="broken").function("broken_ring")
kernel.launch((1, 1, 1), (2, 1, 1), [cuda.I32Arg(4)])
try:
    cuda.synchronize()
except cuda.CudaError as exc:
    print("LAUNCH-FAILED", exc.name, flush=True)
    sys.exit(1)
print("LAUNCH-SUCCEEDED", flush=True)
"""


def main() -> int:
    start = time.monotonic()
    try:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_PACKAGE), env.get("PYTHONPATH", "")) if p)
        proc = subprocess.run([sys.executable, "-c", CHILD, sys.argv[1]], capture_output=True,
                              text=True, timeout=60, env=env)
    except subprocess.TimeoutExpired:
        print("FAIL: still running after 60 s: the wait did not time out")
        return 1
    seconds = time.monotonic() - start
    output = proc.stdout + proc.stderr
    sys.stdout.write(output)
    reported = "no arrival after" in output
    failed = next((line.split()[1] for line in output.splitlines()
                   if line.startswith("LAUNCH-FAILED")), None)
    if reported and failed and seconds < 30:
        print(f"PASS broken_ring: the hang was reported and the launch failed with "
              f"{failed} after {seconds:.1f} s")
        print("ALL PASS wait_timeout (1 cases)")
        return 0
    print(f"FAIL broken_ring: reported={reported} launch error={failed} after {seconds:.1f} s")
    print("FAILED wait_timeout")
    return 1


if __name__ == "__main__":
    sys.exit(main())
