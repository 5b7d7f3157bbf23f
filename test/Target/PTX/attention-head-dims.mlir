// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// The head dims beyond 64 and 128 (docs/performance.md, "Head dims"), with
// their default tiles, lower to PTX that ptxas assembles for sm_90a without
// spills: 96 (three consumer warpgroups, 192 x 112 tiles, 64-byte swizzle),
// 192 (128 x 112), 192 for Q/K with 128 for V (128 x 128), 256 (128 x 80).

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d96_bf16_full {head_dim = 96 : i64, element_type = bf16, causal = false}
  kvpipe.attention_kernel @d96_f16_causal {head_dim = 96 : i64, element_type = f16, causal = true}
  kvpipe.attention_kernel @d192_bf16_full {head_dim = 192 : i64, element_type = bf16, causal = false}
  kvpipe.attention_kernel @d192_f16_causal {head_dim = 192 : i64, element_type = f16, causal = true}
  kvpipe.attention_kernel @d192v128_bf16_full {head_dim = 192 : i64, value_head_dim = 128 : i64, element_type = bf16, causal = false}
  kvpipe.attention_kernel @d192v128_bf16_causal {head_dim = 192 : i64, value_head_dim = 128 : i64, element_type = bf16, causal = true}
  kvpipe.attention_kernel @d256_bf16_full {head_dim = 256 : i64, element_type = bf16, causal = false}
  kvpipe.attention_kernel @d256_f16_causal {head_dim = 256 : i64, element_type = f16, causal = true}
}

// CHECK: .target sm_90a
// Head dim 96: S = Q K^T is m64n112 over K = 96 (six k-steps), O += P V is
// m64n96; 512 threads, 32/160 registers.
// CHECK-LABEL: .entry d96_bf16_full(
// CHECK: .maxntid 512, 1, 1
// CHECK-DAG: setmaxnreg.dec.sync.aligned.u32 32
// CHECK-DAG: setmaxnreg.inc.sync.aligned.u32 160
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n112k16.f32.bf16.bf16
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16
// CHECK-DAG: cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group
// CHECK-LABEL: .entry d96_f16_causal(
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n112k16.f32.f16.f16
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16
// Head dim 192: 384 threads, 24/240 registers, m64n112 and m64n192.
// CHECK-LABEL: .entry d192_bf16_full(
// CHECK: .maxntid 384, 1, 1
// CHECK-DAG: setmaxnreg.dec.sync.aligned.u32 24
// CHECK-DAG: setmaxnreg.inc.sync.aligned.u32 240
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n112k16.f32.bf16.bf16
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16
// CHECK-LABEL: .entry d192_f16_causal(
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n112k16.f32.f16.f16
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16
// (192, 128): S over K = 192, O of 128 columns: both m64n128.
// CHECK-LABEL: .entry d192v128_bf16_full(
// CHECK: .maxntid 384, 1, 1
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK-NOT: m64n192k16
// CHECK-LABEL: .entry d192v128_bf16_causal(
// CHECK-NOT: m64n192k16
// Head dim 256: m64n80 and m64n256 (128 accumulator registers of O).
// CHECK-LABEL: .entry d256_bf16_full(
// CHECK: .maxntid 384, 1, 1
// CHECK-DAG: setmaxnreg.dec.sync.aligned.u32 24
// CHECK-DAG: setmaxnreg.inc.sync.aligned.u32 240
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK-LABEL: .entry d256_f16_causal(
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n80k16.f32.f16.f16
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16

// No spills, no ignored setmaxnreg (C7508), in any of the eight.
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS-NOT: setmaxnreg' ignored
// PTXAS-COUNT-8: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS-NOT: warning
