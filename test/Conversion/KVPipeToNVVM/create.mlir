// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// kvpipe.create: one shared-memory array of 2 * kv_stages * qk_stages i64
// mbarriers per op (addr_space 3, 8-byte aligned, no initializer), placed in
// the nearest symbol table, and the initial state (barriers, index 0, phase 0).

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!q = !kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>

// CHECK-LABEL: gpu.module @two_pipelines
//   CHECK-DAG: llvm.mlir.global internal @[[G0:__kvpipe_mbarriers_[0-9]+]]() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<4 x i64>
//   CHECK-DAG: llvm.mlir.global internal @[[G1:__kvpipe_mbarriers_[0-9]+]]() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<16 x i64>
//   CHECK-NOT: llvm.mlir.global
// CHECK-LABEL: gpu.func @k
//       CHECK:   %[[A0:.*]] = llvm.mlir.addressof @[[G0]] : !llvm.ptr<3>
//       CHECK:   %[[Z0:.*]] = llvm.mlir.constant(0 : i32) : i32
//       CHECK:   %[[Z1:.*]] = llvm.mlir.constant(0 : i32) : i32
//       CHECK:   %[[U:.*]] = llvm.mlir.undef : !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   %[[S0:.*]] = llvm.insertvalue %[[A0]], %[[U]][0]
//       CHECK:   %[[S1:.*]] = llvm.insertvalue %[[Z0]], %[[S0]][1]
//       CHECK:   %[[S2:.*]] = llvm.insertvalue %[[Z1]], %[[S1]][2]
//       CHECK:   llvm.mlir.addressof @[[G1]] : !llvm.ptr<3>
//       CHECK:   gpu.return %[[S2]], %{{.*}} : !llvm.struct<(ptr<3>, i32, i32)>, !llvm.struct<(ptr<3>, i32, i32)>
gpu.module @two_pipelines {
  gpu.func @k() -> (!p, !q) {
    %p = kvpipe.create : !p
    %q = kvpipe.create : !q
    gpu.return %p, %q : !p, !q
  }
}

// -----

// Two identical creates are two allocations (never merged), and a name taken
// by an existing symbol is skipped.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// CHECK-LABEL: module
//   CHECK-DAG: llvm.mlir.global internal @__kvpipe_mbarriers_1() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<4 x i64>
//   CHECK-DAG: llvm.mlir.global internal @__kvpipe_mbarriers_2() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<4 x i64>
//   CHECK-DAG: llvm.mlir.global internal @__kvpipe_mbarriers_0(0 : i64) {addr_space = 0 : i32} : i64
// CHECK-LABEL: func.func @same_type
//       CHECK:   llvm.mlir.addressof @__kvpipe_mbarriers_1
//       CHECK:   llvm.mlir.addressof @__kvpipe_mbarriers_2
llvm.mlir.global internal @__kvpipe_mbarriers_0(0 : i64) : i64
func.func @same_type() -> (!p, !p) {
  %a = kvpipe.create : !p
  %b = kvpipe.create : !p
  return %a, %b : !p, !p
}

// -----

// Each gpu.module holds its own barriers.

!p = !kvpipe.pipeline<kv_stages = 3, qk_stages = 1, producers = 1, consumers = 1>

// CHECK-LABEL: gpu.module @a
//       CHECK:   llvm.mlir.global internal @__kvpipe_mbarriers_0() {{.*}} : !llvm.array<6 x i64>
//       CHECK:   gpu.func @f
//       CHECK:     llvm.mlir.addressof @__kvpipe_mbarriers_0
// CHECK-LABEL: gpu.module @b
//       CHECK:   llvm.mlir.global internal @__kvpipe_mbarriers_0() {{.*}} : !llvm.array<6 x i64>
//       CHECK:   gpu.func @f
//       CHECK:     llvm.mlir.addressof @__kvpipe_mbarriers_0
gpu.module @a {
  gpu.func @f() -> !p {
    %p = kvpipe.create : !p
    gpu.return %p : !p
  }
}
gpu.module @b {
  gpu.func @f() -> !p {
    %p = kvpipe.create : !p
    gpu.return %p : !p
  }
}

// -----

// The largest ring: 32 slots, 64 barriers.

!p = !kvpipe.pipeline<kv_stages = 8, qk_stages = 4, producers = 1, consumers = 2>

// CHECK-LABEL: module
//       CHECK:   llvm.mlir.global internal @__kvpipe_mbarriers_0() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<64 x i64>
func.func @largest() -> !p {
  %p = kvpipe.create : !p
  return %p : !p
}
