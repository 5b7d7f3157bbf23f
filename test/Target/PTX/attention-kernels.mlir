// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o %t.mlir
// RUN: FileCheck %s < %t.ptx
// RUN: FileCheck %s --check-prefix=BINARY < %t.mlir
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// The eight declarations (head dim 64/128 x bf16/f16 x causal or not) lower
// to PTX that ptxas assembles for sm_90a, with the Hopper machinery in place
// and without spills.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_full {head_dim = 64 : i64, element_type = bf16, causal = false}
  kvpipe.attention_kernel @d64_bf16_causal {head_dim = 64 : i64, element_type = bf16, causal = true}
  kvpipe.attention_kernel @d64_f16_full {head_dim = 64 : i64, element_type = f16, causal = false}
  kvpipe.attention_kernel @d64_f16_causal {head_dim = 64 : i64, element_type = f16, causal = true}
  kvpipe.attention_kernel @d128_bf16_full {head_dim = 128 : i64, element_type = bf16, causal = false}
  kvpipe.attention_kernel @d128_bf16_causal {head_dim = 128 : i64, element_type = bf16, causal = true}
  kvpipe.attention_kernel @d128_f16_full {head_dim = 128 : i64, element_type = f16, causal = false}
  kvpipe.attention_kernel @d128_f16_causal {head_dim = 128 : i64, element_type = f16, causal = true}
}

// BINARY: gpu.binary @kernels

// CHECK: .target sm_90a
// CHECK-LABEL: .entry d64_bf16_full(
// CHECK-COUNT-4: .param .align 64 .b8 d64_bf16_full_param_{{[0-3]}}[128]
// Head dim 64: three consumer warpgroups (512 threads, 32/160 registers).
// CHECK: .maxntid 512, 1, 1
// CHECK-DAG: setmaxnreg.dec.sync.aligned.u32 32
// CHECK-DAG: setmaxnreg.inc.sync.aligned.u32 160
// CHECK-DAG: cp.async.bulk.tensor.4d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// CHECK-DAG: mbarrier.arrive.expect_tx.shared.b64
// CHECK-DAG: mbarrier.try_wait.parity
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK-DAG: cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group
// CHECK-DAG: ex2.approx
// CHECK-LABEL: .entry d64_bf16_causal(
// CHECK-LABEL: .entry d64_f16_full(
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// CHECK-LABEL: .entry d64_f16_causal(
// CHECK-LABEL: .entry d128_bf16_full(
// Head dim 128: two consumer warpgroups (384 threads, 24/240 registers).
// CHECK: .maxntid 384, 1, 1
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK-DAG: setmaxnreg.dec.sync.aligned.u32 24
// CHECK-DAG: setmaxnreg.inc.sync.aligned.u32 240
// CHECK-LABEL: .entry d128_bf16_causal(
// CHECK-LABEL: .entry d128_f16_full(
// CHECK-LABEL: .entry d128_f16_causal(
// CHECK-DAG: setmaxnreg
// CHECK-DAG: cp.async.bulk.tensor
// CHECK-DAG: mbarrier.try_wait
// CHECK-DAG: wgmma.mma_async

// No spills, no ignored setmaxnreg (C7508), in any of the eight.
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS-NOT: setmaxnreg' ignored
// PTXAS-COUNT-8: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS-NOT: warning
