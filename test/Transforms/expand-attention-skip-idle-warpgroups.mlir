// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=scheduled" | FileCheck %s --check-prefix=SCHED
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

// `skip_idle_warpgroups`: the last Q block of a sequence that is not a
// multiple of the tile's rows leaves its last warpgroups without rows (1024
// queries in 192-row tiles: the sixth tile has 64). Such a warpgroup only
// waits for and releases the tile's K/V slots; the warpgroups with rows take
// the ping-pong turns among themselves (kvpipe.turn_takers: the last passes
// the turn back to consumer 0). The protocol checker proves both branches
// advance the K/V states by the tile's block count (--kvpipe-to-ptx checks
// it in strict mode).

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64 {head_dim = 64 : i64, element_type = bf16, causal = false, skip_idle_warpgroups = true}
  kvpipe.attention_kernel @d128_w3_causal {head_dim = 128 : i64, element_type = bf16, causal = true, consumer_warpgroups = 3 : i64, block_n = 80 : i64, skip_idle_warpgroups = true}
  kvpipe.attention_kernel @d64_persistent {head_dim = 64 : i64, element_type = f16, causal = true, persistent = true, skip_idle_warpgroups = true}
  kvpipe.attention_kernel @d128_no_pingpong {head_dim = 128 : i64, element_type = bf16, causal = false, pingpong = false, skip_idle_warpgroups = true}
}

// CHECK-LABEL: gpu.func @d64(
//  CHECK-SAME:   %[[SEQ_Q:arg[0-9]+]]: i32
//       CHECK:   kvpipe.warp_roles
//       CHECK:   kvpipe.consumer_wait
// The tile's warpgroups with rows: ceil((seq_q - first row) / 64), at most 3.
//       CHECK:   %[[ROWS:.*]] = arith.subi
//       CHECK:   %[[WITH:.*]] = arith.ceildivui %[[ROWS]], %c64 : index
//       CHECK:   %[[ACTIVE:.*]] = arith.minui %[[WITH]], %c3 : index
//  CHECK-NEXT:   kvpipe.turn_takers %[[ACTIVE]]
//  CHECK-NEXT:   %[[IDLE:.*]] = arith.cmpi uge, %{{.*}}, %{{.*}} : index
//  CHECK-NEXT:   %{{.*}}:7 = scf.if %[[IDLE]] -> ({{.*}}vector<32xf32>, f32, f32, f32, f32) {
// Idle: each block's K and V slots waited for and released, nothing else.
//  CHECK-NEXT:     %[[DRAIN:.*]]:2 = scf.for
//  CHECK-NEXT:       kvpipe.consumer_wait
//  CHECK-NEXT:       kvpipe.consumer_release
//  CHECK-NEXT:       kvpipe.consumer_wait
//  CHECK-NEXT:       kvpipe.consumer_release
//  CHECK-NEXT:       scf.yield
//  CHECK-NEXT:     }
//  CHECK-NEXT:     scf.yield %[[DRAIN]]#0, %[[DRAIN]]#1, %cst{{.*}} : {{.*}}vector<32xf32>, f32, f32, f32, f32
//  CHECK-NEXT:   } else {
//       CHECK:     kvpipe.warpgroup_mma
//       CHECK:     kvpipe.warpgroup_mma
//       CHECK:   }
// The Q slot and the epilogue as without the option (an idle warpgroup's
// rows are all past seq_q: its stores are clipped, its O is 0).
//       CHECK:   kvpipe.consumer_release
//       CHECK:   kvpipe.quad_sum

// Scheduled: the turn goes to the next warpgroup with rows, and from the last
// of them back to 0; the marker is consumed.
// SCHED-LABEL: gpu.func @d64(
//   SCHED-NOT:   kvpipe.turn_takers
//       SCHED:   %[[ACTIVE:.*]] = arith.minui
//       SCHED:   kvpipe.warpgroup_mma
//       SCHED:   %[[SUCC:.*]] = arith.addi %{{.*}}, %{{.*}} : index
//       SCHED:   %[[LAST:.*]] = arith.cmpi eq, %[[SUCC]], %[[ACTIVE]] : index
//       SCHED:   arith.select %[[LAST]], %{{.*}}, %[[SUCC]] : index
//   SCHED-NOT:   kvpipe.turn_takers
//       SCHED:   gpu.return

// CHECK-LABEL: gpu.func @d128_w3_causal(
//       CHECK:   kvpipe.turn_takers
//       CHECK:   scf.if
// CHECK-LABEL: gpu.func @d64_persistent(
//       CHECK:   kvpipe.for_each_tile
//       CHECK:   kvpipe.turn_takers
//       CHECK:   scf.if
// Without ping-pong nobody takes turns: no marker.
// CHECK-LABEL: gpu.func @d128_no_pingpong(
//   CHECK-NOT:   kvpipe.turn_takers
//       CHECK:   arith.cmpi uge
//  CHECK-NEXT:   scf.if
//       CHECK:   gpu.return

// Every kernel assembles without spills.
// PTXAS-COUNT-4: 0 bytes spill stores, 0 bytes spill loads
