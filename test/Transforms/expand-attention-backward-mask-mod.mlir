// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx abi-file=%t.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=ABI < %t.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// A mask_mod in the backward (docs/modifiers.md): the shape analysis turned
// around gives each K/V block its Q blocks (MaskModShape::buildQueryRange:
// for `q - kv <u 256`, queries [first key, last key + 255]); the region is
// inlined per element of S^T with the query from the column and the key
// from the row, under a uniform branch that skips tiles the shape proves
// fully kept. A mask reading a tensor (document ids) gets the tensor as the
// main kernel's last parameter, and is applied to every tile (the shape
// proves nothing: the branch folds away).

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @window_mod {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true}
  mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %d = arith.subi %q, %kv : index
    %w = arith.constant 256 : index
    %keep = arith.cmpi ult, %d, %w : index
    kvpipe.yield %keep : i1
  }
  kvpipe.attention_kernel @document {head_dim = 128 : i64, element_type = bf16, causal = true, backward = true, aux_types = [i32]}
  mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %dq = kvpipe.aux_load 0[%q] : i32
    %dk = kvpipe.aux_load 0[%kv] : i32
    %keep = arith.cmpi eq, %dq, %dk : i32
    kvpipe.yield %keep : i1
  }
}

// CHECK-LABEL: gpu.func @window_mod(
//  CHECK-SAME:   mask_mod = true
//  CHECK-SAME:   mask_mod_shape = "proven"
//       CHECK:   %[[KV0:.*]] = arith.muli %block_id_x, %c128 : index
//       CHECK:   %[[NQ:.*]] = arith.ceildivui %{{.*}}, %c64 : index
// The last query: the last key (kv0 + 127) + 255, plus one.
//       CHECK:   %[[HI1:.*]] = arith.addi %[[KV0]], %c383 : index
//       CHECK:   %[[HI2:.*]] = arith.maxsi %[[HI1]], %c0 : index
//       CHECK:   %[[HI3:.*]] = arith.ceildivui %[[HI2]], %c64 : index
//       CHECK:   %[[QEND0:.*]] = arith.minui %[[NQ]], %[[HI3]] : index
// The first query: the first key.
//       CHECK:   %[[LO1:.*]] = arith.maxsi %[[KV0]], %c0 : index
//       CHECK:   %[[LO2:.*]] = arith.divui %[[LO1]], %c64 : index
//       CHECK:   %[[QBEGIN:.*]] = arith.minui %[[LO2]], %[[NQ]] : index
//       CHECK:   %[[QEND:.*]] = arith.maxui %[[QEND0]], %[[QBEGIN]] : index
//       CHECK:   kvpipe.warp_roles producer
//       CHECK:     scf.for %{{.*}} = %[[QBEGIN]] to %[[QEND]] step %c1
//       CHECK:   consumers(2)
//       CHECK:     scf.for %{{.*}} = %[[QBEGIN]] to %[[QEND]] step %c1
//       CHECK:       %[[ST:.*]] = kvpipe.warpgroup_wait %{{.*}} {pending = 1 : i64}
// P^T first, in the element type; the masks set it to 0.
//       CHECK:       %[[E:.*]] = math.fma %[[ST]], %{{.*}}, %{{.*}} : vector<32xf32>
//  CHECK-NEXT:       %[[P:.*]] = math.exp2 %[[E]] fastmath<afn> : vector<32xf32>
// P^T rounded two at a time (one cvt.rn.bf16x2 per pair, packedTrunc).
// The high operand is the odd element (cvt.rn.bf16x2's a, the upper half).
//  CHECK-NEXT:       %[[LO:.*]] = vector.extract %[[P]][0] : f32 from vector<32xf32>
//  CHECK-NEXT:       %[[HI:.*]] = vector.extract %[[P]][1] : f32 from vector<32xf32>
//  CHECK-NEXT:       nvvm.convert.f32x2.to.bf16x2 %[[HI]], %[[LO]] {rnd = #nvvm.fp_rnd_mode<rn>} : vector<2xbf16>
//       CHECK:       %[[P16:.*]] = vector.from_elements %{{.*}} : vector<32xbf16>
// The built-in masks (the tails) first, then whether the shape keeps the
// whole tile.
//       CHECK:       %[[TAILS:.*]] = scf.if %{{.*}} -> (vector<32xbf16>) {
//       CHECK:         arith.select %{{.*}}, %[[P16]], %[[ZERO:.*]] : vector<32xi1>, vector<32xbf16>
//       CHECK:       %[[KEPT:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
//       CHECK:       %[[MASKED:.*]] = scf.if %[[KEPT]] -> (vector<32xbf16>) {
//  CHECK-NEXT:         scf.yield %[[TAILS]] : vector<32xbf16>
//  CHECK-NEXT:       } else {
// The region per element: query (column) minus key (row).
//       CHECK:         %[[K0:.*]] = arith.index_cast %{{.*}} : index to i32
//  CHECK-NEXT:         arith.index_cast %{{.*}} : index to i32
//  CHECK-NEXT:         %[[Q0:.*]] = arith.index_cast %{{.*}} : index to i32
//  CHECK-NEXT:         %[[D:.*]] = arith.subi %[[Q0]], %[[K0]] : i32
//       CHECK:         arith.cmpi ult, %[[D]], %c256_i32 : i32
//       CHECK-COUNT-31: arith.cmpi ult, %{{.*}}, %c256_i32 : i32
//       CHECK:         %[[KEEP:.*]] = vector.from_elements %{{.*}} : vector<32xi1>
//  CHECK-NEXT:         %[[SEL:.*]] = arith.select %[[KEEP]], %[[TAILS]], %[[ZERO]] : vector<32xi1>, vector<32xbf16>
//  CHECK-NEXT:         scf.yield %[[SEL]] : vector<32xbf16>
// dV += P^T dO with the masked P^T.
//       CHECK:       kvpipe.warpgroup_mma %[[MASKED]], %{{.*}}, %{{.*}} {transpose_b}

// CHECK-LABEL: gpu.func @document(
//  CHECK-SAME:   %[[AUX0:[^:]*]]: !llvm.ptr<1>) kernel
//  CHECK-SAME:   mask_mod_shape = "unknown"
//  CHECK-SAME:   "batch", "aux0"]
//       CHECK:   consumers(2)
//       CHECK:     scf.for
//       CHECK:       kvpipe.warpgroup_wait %{{.*}} {pending = 1 : i64}
//       CHECK:         llvm.getelementptr %[[AUX0]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
//       CHECK:         llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32

// ABI: "kernel": "window_mod"
// ABI: "role": "main"
// ABI: "mask_mod": true
