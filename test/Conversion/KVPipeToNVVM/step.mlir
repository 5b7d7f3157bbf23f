// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s

// kvpipe.step: index + 1; when it reaches kv_stages, index = 0 and the phase
// flips (xor 1). The barrier pointer is carried unchanged. kvpipe.index and
// kvpipe.phase read the state.

!p = !kvpipe.pipeline<kv_stages = 3, qk_stages = 2, producers = 1, consumers = 2>

// CHECK-LABEL: func.func @step
//  CHECK-SAME: (%[[P:.*]]: !llvm.struct<(ptr<3>, i32, i32)>) -> !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   %[[BARS:.*]] = llvm.extractvalue %[[P]][0]
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %[[P]][1]
//       CHECK:   %[[PHASE:.*]] = llvm.extractvalue %[[P]][2]
//       CHECK:   %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   %[[NEXT:.*]] = llvm.add %[[IDX]], %[[ONE]] : i32
// The wrap is at kv_stages (3), not at kv_stages * qk_stages.
//       CHECK:   %[[KV:.*]] = llvm.mlir.constant(3 : i32) : i32
//       CHECK:   %[[WRAP:.*]] = llvm.icmp "eq" %[[NEXT]], %[[KV]] : i32
//       CHECK:   %[[ONE2:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   %[[FLIP:.*]] = llvm.xor %[[PHASE]], %[[ONE2]] : i32
//       CHECK:   %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
//       CHECK:   %[[NIDX:.*]] = llvm.select %[[WRAP]], %[[ZERO]], %[[NEXT]] : i1, i32
//       CHECK:   %[[NPHASE:.*]] = llvm.select %[[WRAP]], %[[FLIP]], %[[PHASE]] : i1, i32
//       CHECK:   %[[U:.*]] = llvm.mlir.undef : !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   %[[S0:.*]] = llvm.insertvalue %[[BARS]], %[[U]][0]
//       CHECK:   %[[S1:.*]] = llvm.insertvalue %[[NIDX]], %[[S0]][1]
//       CHECK:   %[[S2:.*]] = llvm.insertvalue %[[NPHASE]], %[[S1]][2]
//       CHECK:   return %[[S2]]
func.func @step(%p: !p) -> !p {
  %q = kvpipe.step %p : !p
  return %q : !p
}

// CHECK-LABEL: func.func @index_phase
//  CHECK-SAME: (%[[P:.*]]: !llvm.struct<(ptr<3>, i32, i32)>) -> (index, i1)
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %[[P]][1] : !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   %[[IDX64:.*]] = llvm.zext %[[IDX]] : i32 to i64
//       CHECK:   %[[I:.*]] = builtin.unrealized_conversion_cast %[[IDX64]] : i64 to index
//       CHECK:   %[[PH:.*]] = llvm.extractvalue %[[P]][2] : !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   %[[B:.*]] = llvm.trunc %[[PH]] : i32 to i1
//       CHECK:   return %[[I]], %[[B]] : index, i1
func.func @index_phase(%p: !p) -> (index, i1) {
  %i = kvpipe.index %p : !p
  %ph = kvpipe.phase %p : !p
  return %i, %ph : index, i1
}

// A one-slot ring flips the phase on every step.
// CHECK-LABEL: func.func @one_slot
//       CHECK:   %[[NEXT:.*]] = llvm.add
//       CHECK:   %[[KV:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   llvm.icmp "eq" %[[NEXT]], %[[KV]] : i32
func.func @one_slot(%p: !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>)
    -> !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1> {
  %q = kvpipe.step %p : !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
  return %q : !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
}
