// RUN: kvpipe-opt %s --canonicalize | FileCheck %s

// The fragment ops have no side effects (only the shuffles they lower to
// communicate, and those are convergent only within the op): unused ones are
// erased. The warp roles have the effects of what their regions do: roles
// that synchronise or write stay.

// CHECK-LABEL: func.func @dead(
func.func @dead(%s: vector<64xf32>, %x: f32) {
  // CHECK-NOT: kvpipe.fragment
  // CHECK-NOT: kvpipe.quad_sum
  %m = kvpipe.fragment_row_max %s[0] : vector<64xf32>
  %l = kvpipe.fragment_row_sum %s[1] : vector<64xf32>
  %q = kvpipe.quad_sum %x : f32
  %r = kvpipe.fragment_rescale %s, %x, %x : vector<64xf32>
  %e = kvpipe.fragment_exp2 %s, %x, %x, %x : vector<64xf32>
  // CHECK: kvpipe.warp_roles
  // CHECK: gpu.barrier
  kvpipe.warp_roles producer registers(24) {
  } consumers(2) registers(240) {
  ^bb0(%c: index):
    gpu.barrier
  }
  return
}
