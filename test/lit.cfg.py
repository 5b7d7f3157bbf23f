# -*- Python -*-
"""lit configuration for the kvpipe test suite.

Features:
  ptxas  -- ptxas was found (PATH or the CUDA toolkit); tests that assemble
            the generated PTX for sm_90a require it.
  gpu    -- a CUDA GPU is configured for execution tests: set
            KVPIPE_ENABLE_GPU_TESTS=ON at configure time or KVPIPE_GPU=1 in
            the environment. Off by default.
  mlir-runner -- mlir-runner and its runtime libraries were found next to
            the LLVM tools: tests that run lowered arithmetic on the CPU.
  sanitizers -- the build is instrumented (KVPIPE_SANITIZERS, scripts/
            sanitize.sh): tests that bound CPU time measure the optimised
            build and do not run.
"""

import os
import shutil

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "KVPIPE"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kvpipe_obj_root, "test")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "Inputs",
                   "outside-project", "runners"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%kvpipe_src_root", config.kvpipe_src_root))
config.substitutions.append(("%kvpipe_obj_root", config.kvpipe_obj_root))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.kvpipe_tools_dir, config.llvm_tools_dir]
# count: for tests that assert how many lines a diagnostic takes.
llvm_config.add_tool_substitutions(["kvpipe-opt", "count"], tool_dirs)

# ptxas: on PATH, or in the CUDA toolkit's bin directory.
ptxas = shutil.which("ptxas")
for candidate in (config.cuda_bin_dir, "/usr/local/cuda/bin"):
    if not ptxas and candidate and os.path.isfile(os.path.join(candidate, "ptxas")):
        ptxas = os.path.join(candidate, "ptxas")
if getattr(config, "kvpipe_sanitizers", ""):
    config.available_features.add("sanitizers")
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))

config.substitutions.append(
    ("%kvpipe_capi_test", os.path.join(config.kvpipe_tools_dir, "kvpipe-capi-test")))

# mlir-runner and its runtime libraries (mlir-22-tools): CPU execution tests
# of lowerings whose arithmetic is checked numerically (the polynomial exp2).
runner_lib_dir = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
runner_libs = [os.path.join(runner_lib_dir, f"libmlir_{name}.so")
               for name in ("c_runner_utils", "runner_utils")]
if (os.path.isfile(os.path.join(config.llvm_tools_dir, "mlir-runner"))
        and all(os.path.isfile(lib) for lib in runner_libs)):
    config.available_features.add("mlir-runner")
    llvm_config.add_tool_substitutions(["mlir-runner"], tool_dirs)
    config.substitutions.append(("%mlir_runner_libs", ",".join(runner_libs)))

python = shutil.which("python3") or "python3"
config.substitutions.append(("%python", python))
config.environment["PYTHONPATH"] = os.pathsep.join(
    p for p in (os.path.join(config.kvpipe_src_root, "python"),
                config.environment.get("PYTHONPATH", "")) if p)

gpu = config.enable_gpu_tests.upper() in ("1", "ON", "TRUE", "YES")
gpu = gpu or os.environ.get("KVPIPE_GPU", "") == "1"
if gpu:
    config.available_features.add("gpu")
    for var in ("CUDA_VISIBLE_DEVICES", "KVPIPE_CACHE_DIR", "KVPIPE_OPT"):
        if var in os.environ:
            config.environment[var] = os.environ[var]
