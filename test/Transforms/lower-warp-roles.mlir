// RUN: kvpipe-opt %s --kvpipe-lower-warp-roles | FileCheck %s

// kvpipe.warp_roles becomes a branch on the (warp-uniform) warpgroup id:
// warpgroup 0 lowers its register budget and runs the producer region, the
// others raise theirs and run the consumer region with the consumer index
// (warpgroup - 1) for its argument.

func.func private @produce(index)
func.func private @consume(index)

// CHECK-LABEL: func.func @roles(
//       CHECK:   %[[WG:.*]] = kvpipe.warpgroup_id : index
//       CHECK:   %[[IS_PRODUCER:.*]] = arith.cmpi eq, %[[WG]], %[[C0:.*]] : index
//       CHECK:   scf.if %[[IS_PRODUCER]] {
//  CHECK-NEXT:     nvvm.setmaxregister decrease 24
//  CHECK-NEXT:     %[[TID:.*]] = gpu.thread_id x
//  CHECK-NEXT:     func.call @produce(%[[TID]])
//  CHECK-NEXT:   } else {
//  CHECK-NEXT:     nvvm.setmaxregister increase 240
//  CHECK-NEXT:     %[[C1:.*]] = arith.constant 1 : index
//  CHECK-NEXT:     %[[CONSUMER:.*]] = arith.subi %[[WG]], %[[C1]] : index
//  CHECK-NEXT:     func.call @consume(%[[CONSUMER]])
//  CHECK-NEXT:   }
//   CHECK-NOT:   kvpipe.warp_roles
func.func @roles() {
  kvpipe.warp_roles producer registers(24) {
    %t = gpu.thread_id x
    func.call @produce(%t) : (index) -> ()
  } consumers(2) registers(240) {
  ^bb0(%c: index):
    func.call @consume(%c) : (index) -> ()
  }
  return
}

// Nested in other ops (here a loop), and empty roles.
// CHECK-LABEL: func.func @nested(
//       CHECK:   scf.for
//       CHECK:     kvpipe.warpgroup_id
//       CHECK:     scf.if
//  CHECK-NEXT:       nvvm.setmaxregister decrease 56
//  CHECK-NEXT:     } else {
//  CHECK-NEXT:       nvvm.setmaxregister increase 240
//  CHECK-NEXT:       arith.constant 1
//  CHECK-NEXT:       arith.subi
//  CHECK-NEXT:     }
func.func @nested(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    kvpipe.warp_roles producer registers(56) {
    } consumers(1) registers(240) {
    ^bb0(%c: index):
    }
  }
  return
}
