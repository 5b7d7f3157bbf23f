// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=lowered" | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

// `late_pv_retire`: in the overlapped K/V loop the previous block's P V is
// retired in the arms of the rescale's branch, after its vote, and the V
// slot released after the branch (fragment_rescale's `late_retire`). Before
// the vote ptxas issues the wait at the start of the softmax, which then
// waits for the P V it was meant to run under (docs/performance.md, v15).
// The protocol checker proves the moved release (--kvpipe-to-ptx, strict).

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64 {head_dim = 64 : i64, element_type = bf16, causal = true, late_pv_retire = true}
  kvpipe.attention_kernel @d128_w3 {head_dim = 128 : i64, element_type = bf16, causal = false, consumer_warpgroups = 3 : i64, block_n = 80 : i64, late_pv_retire = true}
}

// The steady loop: the softmax, the vote, the retire in both arms, then the
// V slot's release.
// CHECK-LABEL: gpu.func @d64(
//       CHECK:   scf.for
//       CHECK:     kvpipe.warpgroup_wait %{{.*}} {pending = 1 : i64}
//       CHECK:     math.exp2
//       CHECK:     nvvm.vote.sync any
//  CHECK-NEXT:     scf.if
//  CHECK-NEXT:       kvpipe.warpgroup_wait %{{.*}} {pending = 0 : i64} : vector<32xf32>
//       CHECK:     } else {
//  CHECK-NEXT:       kvpipe.warpgroup_wait %{{.*}} {pending = 0 : i64} : vector<32xf32>
//  CHECK-NEXT:       scf.yield
//  CHECK-NEXT:     }
//  CHECK-NEXT:     kvpipe.consumer_release
//       CHECK:     scf.yield

// CHECK-LABEL: gpu.func @d128_w3(
//       CHECK:     nvvm.vote.sync any
//  CHECK-NEXT:     scf.if
//  CHECK-NEXT:       kvpipe.warpgroup_wait %{{.*}} {pending = 0 : i64} : vector<64xf32>

// PTXAS-COUNT-2: 0 bytes spill stores, 0 bytes spill loads
