// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s

// math.exp2 on f32 with fastmath<afn> (the generated softmax's) becomes the
// SFU's ex2.approx.ftz.f32, element by element for vectors; without afn, or
// on f64, it is left to the upstream lowering (libdevice).

// CHECK-LABEL: func.func @scalar
//  CHECK-SAME: (%[[X:.*]]: f32)
//       CHECK:   %[[R:.*]] = llvm.inline_asm "ex2.approx.ftz.f32 $0, $1;", "=f,f" %[[X]] : (f32) -> f32
//       CHECK:   return %[[R]]
func.func @scalar(%x: f32) -> f32 {
  %r = math.exp2 %x fastmath<afn> : f32
  return %r : f32
}

// CHECK-LABEL: func.func @vector
//       CHECK:   llvm.mlir.poison : vector<4xf32>
//   CHECK-COUNT-4:   llvm.inline_asm "ex2.approx.ftz.f32 $0, $1;"
//   CHECK-NOT:   math.exp2
//       CHECK:   return
func.func @vector(%x: vector<4xf32>) -> vector<4xf32> {
  %r = math.exp2 %x fastmath<afn> : vector<4xf32>
  return %r : vector<4xf32>
}

// CHECK-LABEL: func.func @exact
//       CHECK:   math.exp2 %{{.*}} : f32
//       CHECK:   math.exp2 %{{.*}} fastmath<afn> : f64
//   CHECK-NOT:   llvm.inline_asm
func.func @exact(%x: f32, %y: f64) -> (f32, f64) {
  %r = math.exp2 %x : f32
  %s = math.exp2 %y fastmath<afn> : f64
  return %r, %s : f32, f64
}
