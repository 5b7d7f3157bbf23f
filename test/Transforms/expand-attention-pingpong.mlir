// RUN: kvpipe-opt %s -split-input-file --kvpipe-expand-attention --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s -split-input-file --kvpipe-expand-attention --kvpipe-verify-protocol -o /dev/null

// With `pingpong`, the consumer warpgroups take turns issuing their wgmmas:
// each waits at its own named barrier (4 + consumer index, 256 threads: its
// own 128 plus the 128 of the warpgroup before it) after its K slot is full,
// issues S_j = Q K_j^T and O += P_{j-1} V_{j-1}, then arrives at the next
// warpgroup's barrier and runs its softmax while the other's GEMMs execute.
// Consumer 0 opens the cycle by arriving at its own barrier.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @two {head_dim = 128 : i64, element_type = bf16, causal = false, pingpong = true}
}

// CHECK-LABEL: gpu.func @two(
//   CHECK-DAG:   %[[N256:.*]] = arith.constant 256 : i32
//   CHECK-DAG:   %[[ID4:.*]] = arith.constant 4 : i32
//       CHECK:   nvvm.setmaxregister increase 240
//       CHECK:   %[[CONSUMER:.*]] = arith.subi %{{.*}}, %c1 : index
//       CHECK:   %[[FIRST:.*]] = arith.cmpi eq, %[[CONSUMER]], %c0
//       CHECK:   scf.if %[[FIRST]] {
//  CHECK-NEXT:     nvvm.barrier.arrive id = %[[ID4]] number_of_threads = %[[N256]]
// The wait for Q.
//       CHECK:   kvpipe.consumer_wait
// Block 0: its S alone, bracketed by the turn.
//       CHECK:   kvpipe.consumer_wait
//       CHECK:   %[[OWN:.*]] = arith.addi %{{.*}}, %c3 : index
//       CHECK:   %[[OWN32:.*]] = arith.index_cast %[[OWN]] : index to i32
//       CHECK:   nvvm.barrier id = %[[OWN32]] number_of_threads = %[[N256]]
//       CHECK:   kvpipe.warpgroup_mma
//       CHECK:   arith.remui %{{.*}}, %c2 : index
//       CHECK:   nvvm.barrier.arrive id = %{{.*}} number_of_threads = %[[N256]]
//       CHECK:   kvpipe.warpgroup_wait
// Steady state: both GEMMs inside one turn, the softmax after it.
//       CHECK:   scf.for
//       CHECK:     kvpipe.consumer_wait
//       CHECK:     nvvm.barrier id = %[[OWN32]] number_of_threads = %[[N256]]
//       CHECK:     kvpipe.warpgroup_mma
//       CHECK:     kvpipe.consumer_wait
//       CHECK:     kvpipe.warpgroup_mma {{.*}} {transpose_b}
//       CHECK:     nvvm.barrier.arrive id = %{{.*}} number_of_threads = %[[N256]]
//       CHECK:     kvpipe.warpgroup_wait %{{.*}} {pending = 1 : i64}
//       CHECK:     math.exp2
//       CHECK:     kvpipe.warpgroup_wait %{{.*}} {pending = 0 : i64}
// The last P V takes a turn too, so that every warpgroup takes as many.
//       CHECK:   kvpipe.consumer_wait
//       CHECK:   nvvm.barrier id = %[[OWN32]] number_of_threads = %[[N256]]
//       CHECK:   kvpipe.warpgroup_mma {{.*}} {transpose_b}
//       CHECK:   nvvm.barrier.arrive
// The epilogue's own barrier (1 + consumer index, 128 threads).
//       CHECK:   nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32

// -----

// Three consumer warpgroups pass the turn round the cycle 0 -> 1 -> 2 -> 0;
// without overlap, each GEMM issue is a turn of its own.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @three {head_dim = 64 : i64, element_type = f16, causal = true, pingpong = true, overlap_softmax = false}
}

// CHECK-LABEL: gpu.func @three(
//       CHECK:   nvvm.barrier.arrive id = %{{.*}} number_of_threads = %{{.*}}
//       CHECK:   scf.for
//       CHECK:     kvpipe.consumer_wait
//       CHECK:     nvvm.barrier id
//       CHECK:     kvpipe.warpgroup_mma
//       CHECK:     arith.remui %{{.*}}, %c3 : index
//       CHECK:     nvvm.barrier.arrive
//       CHECK:     math.exp2
//       CHECK:     kvpipe.consumer_wait
//       CHECK:     nvvm.barrier id
//       CHECK:     kvpipe.warpgroup_mma {{.*}} {transpose_b}
//       CHECK:     nvvm.barrier.arrive
//       CHECK:     kvpipe.warpgroup_wait
