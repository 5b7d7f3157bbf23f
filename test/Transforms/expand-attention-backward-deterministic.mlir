// RUN: kvpipe-opt %s --kvpipe-expand-attention | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx abi-file=%t.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=ABI < %t.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

// Deterministic mode: at head dim 64 the consumer warpgroups take turns by
// Q block (the one with i % 2 == its index computes and adds all of dQ),
// and that addition waits for the CTA's turn on the Q block's counter
// (below) with an acquire load and passes the turn on with a release add,
// both at GPU scope; the preprocess zeroes the counters. The family checks
// in strict protocol mode (inside --kvpipe-to-ptx) and assembles without
// spills.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @fa_bwd {head_dim = 64 : i64, element_type = bf16, causal = true, backward = true, deterministic = true}
}

// CHECK-LABEL: gpu.func @fa_bwd_preprocess(
// CHECK-SAME: %{{.*}}: !llvm.ptr<1>) kernel
// CHECK: llvm.store %{{.*}}, %{{.*}} : i32, !llvm.ptr<1>
// CHECK-LABEL: gpu.func @fa_bwd(
// CHECK-SAME: %[[SEM:.*]]: !llvm.ptr<1>) kernel
// Causal: the K/V blocks in reverse blockIdx.x order, so that a CTA only
// waits for CTAs that started no later (the turns descend, below).
// CHECK: %[[NKV:.*]] = arith.ceildivui %{{.*}}, %c128 : index
// CHECK-NEXT: %[[LASTKV:.*]] = arith.subi %[[NKV]], %c1 : index
// CHECK-NEXT: %[[KVB:.*]] = arith.subi %[[LASTKV]], %block_id_x : index
// CHECK: arith.muli %[[KVB]], %c128{{.*}} : index
// Causal: K/V block n's turn at Q block i is m - n, m the last K/V block
// reaching the Q block, min((i * 64 + 63) / 128, ceil(seq_kv / 128) - 1).
// The dS buffer's parity, then the turn-taking one.
// CHECK: arith.remui %{{.*}}, %c2{{.*}} : index
// CHECK: %[[PARITY:.*]] = arith.remui %{{.*}}, %c2{{.*}} : index
// CHECK-NEXT: %[[MINE:.*]] = arith.cmpi eq, %[[PARITY]], %{{.*}} : index
// CHECK-NEXT: scf.if %[[MINE]] {
// CHECK: %[[BLOCKS:.*]] = arith.ceildivui %{{.*}}, %c128{{.*}} : index
// CHECK-NEXT: %[[LASTBLOCK:.*]] = arith.subi %[[BLOCKS]], %c1{{.*}} : index
// CHECK: %[[ROW:.*]] = arith.muli %{{.*}}, %c64{{.*}} : index
// CHECK-NEXT: %[[LASTQ:.*]] = arith.addi %[[ROW]], %c63{{.*}} : index
// CHECK-NEXT: %[[REACH:.*]] = arith.divui %[[LASTQ]], %c128{{.*}} : index
// CHECK-NEXT: %[[M:.*]] = arith.minui %[[REACH]], %[[LASTBLOCK]] : index
// CHECK-NEXT: %[[ORDER:.*]] = arith.subi %[[M]], %[[KVB]] : index
// CHECK-NEXT: %[[TURN:.*]] = arith.index_cast %[[ORDER]] : index to i32
// CHECK: scf.while
// CHECK: llvm.load %{{.*}} atomic syncscope("device") acquire {{.*}} : !llvm.ptr<1> -> i32
// CHECK: arith.cmpi ne, %{{.*}}, %[[TURN]] : i32
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
