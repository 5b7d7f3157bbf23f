// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s

// kvpipe.warpgroup_wait: wgmma.wait_group N, then each fragment passes
// through an empty inline-asm statement that reads and writes its registers
// ("=f,...,0,1,..."), so that no use of the accumulators is scheduled above
// the wait.

// CHECK-LABEL: func.func @wait_two
//  CHECK-SAME: (%[[S:[^:]*]]: vector<4xf32>, %[[O:[^:]*]]: vector<2xf32>)
//       CHECK:   nvvm.wgmma.wait.group.sync.aligned 1
//       CHECK:   %[[S0:.*]] = llvm.extractelement %[[S]][%{{.*}} : i32] : vector<4xf32>
//       CHECK:   %[[S1:.*]] = llvm.extractelement %[[S]][%{{.*}} : i32] : vector<4xf32>
//       CHECK:   %[[S2:.*]] = llvm.extractelement %[[S]][%{{.*}} : i32] : vector<4xf32>
//       CHECK:   %[[S3:.*]] = llvm.extractelement %[[S]][%{{.*}} : i32] : vector<4xf32>
//       CHECK:   %[[PS:.*]] = llvm.inline_asm has_side_effects "", "=f,=f,=f,=f,0,1,2,3" %[[S0]], %[[S1]], %[[S2]], %[[S3]] : (f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
//       CHECK:   %[[X0:.*]] = llvm.extractvalue %[[PS]][0]
//       CHECK:   %[[X3:.*]] = llvm.extractvalue %[[PS]][3]
//       CHECK:   %[[V0:.*]] = llvm.insertelement %[[X0]], %{{.*}}[%{{.*}} : i32] : vector<4xf32>
//       CHECK:   %[[V3:.*]] = llvm.insertelement %[[X3]], %{{.*}}[%{{.*}} : i32] : vector<4xf32>
//       CHECK:   %[[O0:.*]] = llvm.extractelement %[[O]][%{{.*}} : i32] : vector<2xf32>
//       CHECK:   %[[O1:.*]] = llvm.extractelement %[[O]][%{{.*}} : i32] : vector<2xf32>
//       CHECK:   %[[PO:.*]] = llvm.inline_asm has_side_effects "", "=f,=f,0,1" %[[O0]], %[[O1]] : (f32, f32) -> !llvm.struct<(f32, f32)>
//       CHECK:   %[[Y0:.*]] = llvm.extractvalue %[[PO]][0]
//       CHECK:   %[[Y1:.*]] = llvm.extractvalue %[[PO]][1]
//       CHECK:   %[[W0:.*]] = llvm.insertelement %[[Y0]], %{{.*}}[%{{.*}} : i32] : vector<2xf32>
//       CHECK:   %[[W1:.*]] = llvm.insertelement %[[Y1]], %[[W0]][%{{.*}} : i32] : vector<2xf32>
//       CHECK:   return %[[V3]], %[[W1]] : vector<4xf32>, vector<2xf32>
func.func @wait_two(%s: vector<4xf32>, %o: vector<2xf32>) -> (vector<4xf32>, vector<2xf32>) {
  %r:2 = kvpipe.warpgroup_wait %s, %o {pending = 1} : vector<4xf32>, vector<2xf32>
  return %r#0, %r#1 : vector<4xf32>, vector<2xf32>
}

// CHECK-LABEL: func.func @wait_all
//       CHECK:   nvvm.wgmma.wait.group.sync.aligned 0
//   CHECK-NOT:   llvm.inline_asm
//       CHECK:   return
func.func @wait_all() {
  kvpipe.warpgroup_wait {pending = 0}
  return
}

// CHECK-LABEL: func.func @wait_max
//       CHECK:   nvvm.wgmma.wait.group.sync.aligned 7
func.func @wait_max() {
  kvpipe.warpgroup_wait {pending = 7}
  return
}

// The chain the attention consumer uses: mma, then wait, then read.
// CHECK-LABEL: func.func @mma_then_wait
//       CHECK:   %[[D:.*]] = nvvm.wgmma.mma_async
//       CHECK:   nvvm.wgmma.commit.group.sync.aligned
//       CHECK:   nvvm.wgmma.wait.group.sync.aligned 0
//       CHECK:   llvm.inline_asm has_side_effects "", "=f,=f,=f,=f,0,1,2,3"
//       CHECK:   return
func.func @mma_then_wait(%a: memref<64x64xbf16, #gpu.address_space<workgroup>>,
                         %b: memref<8x64xbf16, #gpu.address_space<workgroup>>) -> vector<4xf32> {
  %d = kvpipe.warpgroup_mma %a, %b : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<8x64xbf16, #gpu.address_space<workgroup>> -> vector<4xf32>
  %r = kvpipe.warpgroup_wait %d {pending = 0} : vector<4xf32>
  return %r : vector<4xf32>
}
