// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" | FileCheck %s --check-prefix=SKELETON
// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=scheduled" | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx abi-file=%t.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=ABI < %t.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

// `tile_table`: the persistent kernel's last parameter is the host's table
// of tiles (kvpipe.tile's `schedule`), and every role's loop takes round r's
// tile from entry r * gridDim.x + blockIdx.x of it instead of the closed-form
// snake: the first entry loaded before the loop, the next one at the start of
// each tile's work, the loop running while the entry is a tile. The protocol
// checker proves the kernel (--kvpipe-to-ptx, strict: every role loads the
// same entries of a read-only parameter) and ptxas assembles it without
// spills (without the softmax levers it spills one register once per CTA,
// at the entry).

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @table {head_dim = 64 : i64, element_type = bf16, causal = true, persistent = true, q_stages = 2 : i64, tensor_row_sums = true, mask_bits = true, late_pv_retire = true, tile_table = true}
}

// SKELETON-LABEL: gpu.func @table(
//  SKELETON-SAME:   %[[TABLE:[^:]*]]: !llvm.ptr<1>) kernel
//       SKELETON:   kvpipe.tile in(%{{.*}}, %{{.*}}, %{{.*}}) schedule(%[[TABLE]])

// CHECK-LABEL: gpu.func @table(
//  CHECK-SAME:   %[[TABLE:[^:]*]]: !llvm.ptr<1>) kernel
// Each role (the producer first):
//       CHECK:   %[[CTAS:.*]] = gpu.grid_dim x
//  CHECK-NEXT:   %[[CTA:.*]] = gpu.block_id x
//  CHECK-NEXT:   %[[ZERO:.*]] = arith.constant 0 : index
//  CHECK-NEXT:   %[[BASE0:.*]] = arith.muli %[[ZERO]], %[[CTAS]] : index
//  CHECK-NEXT:   %[[AT0:.*]] = arith.addi %[[BASE0]], %[[CTA]] : index
//  CHECK-NEXT:   %[[AT0_64:.*]] = arith.index_cast %[[AT0]] : index to i64
//  CHECK-NEXT:   %[[ADDR0:.*]] = llvm.getelementptr %[[TABLE]][%[[AT0_64]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
//  CHECK-NEXT:   %[[ENTRY0:.*]] = llvm.load %[[ADDR0]] : !llvm.ptr<1> -> i32
//  CHECK-NEXT:   %[[FIRST:.*]] = arith.index_cast %[[ENTRY0]] : i32 to index
//  CHECK-NEXT:   scf.while (%[[ROUND:.*]] = %[[ZERO]], %[[TILE:.*]] = %[[FIRST]], %{{.*}}) : (index, index,
//  CHECK-NEXT:     %[[EXISTS:.*]] = arith.cmpi ult, %[[TILE]], %[[NTILES:.*]] : index
//  CHECK-NEXT:     scf.condition(%[[EXISTS]]) %[[ROUND]], %[[TILE]],
//       CHECK:   } do {
//  CHECK-NEXT:   ^bb0(%[[R:[^:]*]]: index, %[[T:[^:]*]]: index,
//  CHECK-NEXT:     %[[ONE:.*]] = arith.constant 1 : index
//  CHECK-NEXT:     %[[NEXT_ROUND:.*]] = arith.addi %[[R]], %[[ONE]] : index
//  CHECK-NEXT:     %[[BASE:.*]] = arith.muli %[[NEXT_ROUND]], %[[CTAS]] : index
//  CHECK-NEXT:     %[[AT:.*]] = arith.addi %[[BASE]], %[[CTA]] : index
//  CHECK-NEXT:     %[[AT_64:.*]] = arith.index_cast %[[AT]] : index to i64
//  CHECK-NEXT:     %[[ADDR:.*]] = llvm.getelementptr %[[TABLE]][%[[AT_64]]]
//  CHECK-NEXT:     %[[ENTRY:.*]] = llvm.load %[[ADDR]] : !llvm.ptr<1> -> i32
//  CHECK-NEXT:     %[[NEXT:.*]] = arith.index_cast %[[ENTRY]] : i32 to index
//  CHECK-NEXT:     %[[YZ:.*]] = arith.divui %[[T]], %{{.*}} : index
//       CHECK:     scf.yield %[[NEXT_ROUND]], %[[NEXT]],
// ... and the consumers, from the same table.
//       CHECK:   gpu.grid_dim x
//       CHECK:   llvm.getelementptr %[[TABLE]]
//       CHECK:   scf.while

// ABI:      "param_kinds": {
// ABI:        "tile_table": "pointer"
// ABI:      "params": [
// ABI:        "batch",
// ABI-NEXT:   "tile_table"
// ABI-NEXT: ],
// ABI:      "tile_table": true
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
