// RUN: %python %S/gen_large.py slots 1000 > %t.mlir
// RUN: timeout 300 prlimit --cpu=10 kvpipe-opt %t.mlir --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s --check-prefix=LOADS < %t.ptx
// RUN: FileCheck %s --check-prefix=RELEASES < %t.ptx
// UNSUPPORTED: sanitizers

// Scaling (docs/scaling.md): one pipeline used for 1,000 slots in
// straight-line code, each slot with a TMA load, a wgmma and an elected
// release. The lowering used to be quadratic here (one scf.if per release,
// each split off by scf-to-cf: 24 s and 1.8 GB at 400 slots, out of memory
// at 1,000); the whole of --kvpipe-to-ptx must now take under 10 s of CPU
// time (prlimit: a CPU-time bound does not fail on a busy machine, a
// wall-clock one would). Every operation survives to PTX.

// LOADS-LABEL: .entry slots(
// LOADS-COUNT-1000: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// LOADS-NOT: cp.async.bulk.tensor
// RELEASES-LABEL: .entry slots(
// RELEASES-COUNT-1000: @%p{{[0-9]+}} mbarrier.arrive.shared.b64 _, [%r{{[0-9]+}}];
// RELEASES-NOT: mbarrier.arrive.shared.b64 _
