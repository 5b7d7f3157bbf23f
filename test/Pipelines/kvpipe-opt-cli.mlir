// The command line of kvpipe-opt: what is registered, and that bad input
// and bad options end in an error message and a non-zero exit code (never a
// crash: `not` without --crash fails on a signal).

// RUN: kvpipe-opt --help | FileCheck %s --check-prefix=HELP
// HELP-DAG: --convert-kvpipe-to-nvvm
// HELP-DAG: wait-timeout
// HELP-DAG: --kvpipe-finalize-kernel-abi
// HELP-DAG: --kvpipe-to-ptx
// HELP-DAG: --chip=
// HELP-DAG: --features=
// HELP-DAG: --opt-level=
// HELP-DAG: --format=
// HELP-DAG: --ptx-file=
// HELP-DAG: --toolkit=
// HELP-DAG: --kvpipe-attach-nvvm-target
// HELP-DAG: --kvpipe-dump-ptx

// A valid file: exit code 0, round trip.
// RUN: kvpipe-opt %s | FileCheck %s --check-prefix=OK
// OK: kvpipe.create

// Unknown pass pipeline option.
// RUN: not kvpipe-opt %s --kvpipe-to-ptx="bogus=1" 2>&1 | FileCheck %s --check-prefix=BOGUS
// BOGUS: no such option bogus

// Option values of the wrong type.
// RUN: not kvpipe-opt %s --kvpipe-to-ptx="wait-timeout=soon" 2>&1 | FileCheck %s --check-prefix=TIMEOUT
// TIMEOUT: 'soon' value invalid for {{.*}} argument
// RUN: not kvpipe-opt %s --kvpipe-to-ptx="opt-level=-1" 2>&1 | FileCheck %s --check-prefix=OPT
// OPT: '-1' value invalid for uint argument
// RUN: not kvpipe-opt %s --convert-kvpipe-to-nvvm="wait-timeout=x" 2>&1 | FileCheck %s --check-prefix=PASSOPT
// PASSOPT: 'x' value invalid for {{.*}} argument

// An unknown pass.
// RUN: not kvpipe-opt %s --no-such-pass 2>&1 | FileCheck %s --check-prefix=NOPASS
// NOPASS: Unknown command line argument '--no-such-pass'

// An optimisation level NVPTX does not have.
// RUN: not kvpipe-opt %s --kvpipe-to-ptx="opt-level=9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=O9
// O9: kvpipe-to-ptx: opt-level=9 is not an optimisation level

// A missing input file.
// RUN: not kvpipe-opt %t.does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: cannot open input file '{{.*}}does-not-exist.mlir'

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

module attributes {gpu.container_module} {
gpu.module @m {
  gpu.func @k() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}
}
