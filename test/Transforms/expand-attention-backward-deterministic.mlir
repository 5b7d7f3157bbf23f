// RUN: kvpipe-opt %s --kvpipe-expand-attention | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx abi-file=%t.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=ABI < %t.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

// Deterministic mode: each consumer warpgroup adds its dQ contribution to a
// Q block only in its turn (below), waiting on the Q
// block's counter with an acquire load and passing the turn on with a
// release add, both at GPU scope; the preprocess zeroes the counters. The
// family checks in strict protocol mode (inside --kvpipe-to-ptx) and
// assembles without spills.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @fa_bwd {head_dim = 64 : i64, element_type = bf16, causal = true, backward = true, deterministic = true}
}

// CHECK-LABEL: gpu.func @fa_bwd_preprocess(
// CHECK-SAME: %{{.*}}: !llvm.ptr<1>) kernel
// CHECK: llvm.store %{{.*}}, %{{.*}} : i32, !llvm.ptr<1>
// CHECK-LABEL: gpu.func @fa_bwd(
// CHECK-SAME: %[[SEM:.*]]: !llvm.ptr<1>) kernel
// Causal: K/V block n's turn at Q block i is (m - n) * 2 + consumer, m the
// last K/V block reaching the Q block, min(i * 64 / 128, ceil(seq_kv / 128) - 1).
// CHECK: %[[BLOCKS:.*]] = arith.ceildivui %{{.*}}, %c128{{.*}} : index
// CHECK-NEXT: %[[LASTBLOCK:.*]] = arith.subi %[[BLOCKS]], %c1{{.*}} : index
// CHECK: %[[ROW:.*]] = arith.muli %[[QBLOCK:.*]], %c64{{.*}} : index
// CHECK-NEXT: %[[REACH:.*]] = arith.divui %[[ROW]], %c128{{.*}} : index
// CHECK-NEXT: %[[M:.*]] = arith.minui %[[REACH]], %[[LASTBLOCK]] : index
// CHECK-NEXT: %[[ORDER:.*]] = arith.subi %[[M]], %block_id_x{{[_0-9]*}} : index
// CHECK: %[[TURN0:.*]] = arith.muli %[[ORDER]], %c2{{.*}} : index
// CHECK-NEXT: %[[TURN:.*]] = arith.addi %[[TURN0]], %{{.*}} : index
// CHECK: scf.while
// CHECK: llvm.load %{{.*}} atomic syncscope("device") acquire {{.*}} : !llvm.ptr<1> -> i32
// CHECK: arith.cmpi ne
// CHECK: nvvm.barrier
// Its additions: one bulk reduction, complete (not only read) before the
// turn is passed on.
// CHECK: llvm.inline_asm has_side_effects "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0{{$}}
// CHECK: nvvm.barrier
// CHECK: llvm.inline_asm has_side_effects "red.release.gpu.global.add.s32 [$0], $1;", "l,r,~{memory}"
// CHECK-NOT: llvm.atomicrmw add

// PTX: ld.acquire.gpu.global.{{[bu]}}32
// PTX: red.release.gpu.global.add.s32

// ABI: "deterministic": true
// ABI: "dq_semaphore"

// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
