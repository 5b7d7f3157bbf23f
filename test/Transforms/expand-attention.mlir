// RUN: kvpipe-opt %s --kvpipe-expand-attention | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention="abi-file=%t.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=ABI < %t.json

// The declaration becomes a warp-specialised kernel written with kvpipe
// pipelines: a producer warpgroup streaming K and V through two rings with
// TMA, consumer warpgroups doing S = Q K^T (SS), online softmax, O += P V
// (RS), and a TMA-store epilogue.

// CHECK: module attributes {gpu.container_module}
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @fa_fwd {head_dim = 128 : i64, element_type = bf16, causal = true}
}

// CHECK-LABEL: gpu.func @fa_fwd(
//  CHECK-SAME: %[[Q:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>,
//  CHECK-SAME: %[[K:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>,
//  CHECK-SAME: %[[V:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>,
//  CHECK-SAME: %[[O:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 64, 64], element_type = bf16, swizzle = 128>,
//  CHECK-SAME: %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: f32, %{{.*}}: i32, %{{.*}}: i32) kernel
//  CHECK-SAME: nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
//       CHECK: gpu.dynamic_shared_memory
//       CHECK: %[[PQ:.*]] = kvpipe.create : !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 2>
//       CHECK: %[[PK:.*]] = kvpipe.create : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
//       CHECK: %[[PV:.*]] = kvpipe.create : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
//   CHECK-DAG: kvpipe.init %[[PQ]]
//   CHECK-DAG: kvpipe.init %[[PK]]
//   CHECK-DAG: kvpipe.init %[[PV]]
//       CHECK: kvpipe.warpgroup_id
// Producer: registers given away, one thread issues every copy.
//       CHECK: nvvm.setmaxregister decrease 24
//       CHECK: kvpipe.tma_prefetch_descriptor %[[Q]]
//       CHECK: kvpipe.producer_acquire %[[PQ]]
//  CHECK-COUNT-2: kvpipe.tma_load %[[Q]]
//       CHECK: kvpipe.producer_commit %[[PQ]]
//       CHECK: scf.for {{.*}} iter_args(%[[SK:.*]] = %[[PK]], %[[SV:.*]] = %[[PV]])
//       CHECK:   kvpipe.producer_acquire %[[SK]]
//  CHECK-COUNT-2:   kvpipe.tma_load %[[K]]
//       CHECK:   kvpipe.producer_commit %[[SK]]
//       CHECK:   kvpipe.step %[[SK]]
//       CHECK:   kvpipe.producer_acquire %[[SV]]
//  CHECK-COUNT-2:   kvpipe.tma_load %[[V]]
//       CHECK:   kvpipe.producer_commit %[[SV]]
//       CHECK:   kvpipe.step %[[SV]]
// Consumers: block 0 alone, then S_j = Q K_j^T issued together with
// O += P_{j-1} V_{j-1}; S_j retired first (one group left in flight), its
// softmax overlapping the P V wgmma.
//       CHECK: nvvm.setmaxregister increase 240
//       CHECK: kvpipe.consumer_wait %[[PQ]]
//       CHECK: scf.if
//       CHECK:   kvpipe.consumer_wait %[[PK]]
//       CHECK:   kvpipe.warpgroup_mma %{{.*}}, %{{.*}} : memref<2x64x64xbf16, {{.*}}>, memref<2x128x64xbf16, {{.*}}> -> vector<64xf32>
//       CHECK:   kvpipe.warpgroup_wait {{.*}} {pending = 0 : i64}
//       CHECK:   %[[K1:.*]] = kvpipe.consumer_release %[[PK]]
//       CHECK:   scf.for {{.*}} iter_args(%[[CK:[^ ]*]] = %[[K1]], %[[CV:[^ ]*]] = %[[PV]]
//       CHECK:     kvpipe.consumer_wait %[[CK]]
//       CHECK:     %[[S:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}} : memref<2x64x64xbf16
//       CHECK:     kvpipe.consumer_wait %[[CV]]
//       CHECK:     %[[PVO:.*]] = kvpipe.warpgroup_mma {{.*}} {transpose_b} : vector<64xbf16>, memref<2x128x64xbf16, {{.*}}> -> vector<64xf32>
//       CHECK:     kvpipe.warpgroup_wait %[[S]] {pending = 1 : i64}
//       CHECK:     kvpipe.consumer_release %[[CK]]
// The causal mask compares key columns with query rows, only on the blocks
// that need it.
//       CHECK:     scf.if
//       CHECK:       arith.cmpi sle
//       CHECK:     vector.reduction <maxnumf>
//       CHECK:     gpu.shuffle  xor
//       CHECK:     math.fma
//       CHECK:     math.exp2 {{.*}} : vector<64xf32>
//       CHECK:     arith.truncf {{.*}} : vector<64xf32> to vector<64xbf16>
//       CHECK:     kvpipe.warpgroup_wait %[[PVO]] {pending = 0 : i64}
//       CHECK:     kvpipe.consumer_release %[[CV]]
//       CHECK:   kvpipe.warpgroup_mma {{.*}} {transpose_b}
//       CHECK:   kvpipe.warpgroup_wait {{.*}} {pending = 0 : i64}
//       CHECK:   kvpipe.consumer_release
// Epilogue.
//       CHECK: kvpipe.consumer_release %[[PQ]]
//       CHECK: kvpipe.store_fragment
//       CHECK: nvvm.fence.proxy
//       CHECK: nvvm.barrier
//  CHECK-COUNT-2: kvpipe.tma_store {{.*}}, %[[O]]
//       CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
//       CHECK: math.log2
//       CHECK: llvm.store
//       CHECK: gpu.return

// ABI: "block_m": 128
// ABI: "dynamic_shared_memory": 164864
// ABI: "kernel": "fa_fwd"
// ABI: "kv_stages": 2
// ABI: "pingpong": true
// ABI: "threads": 384
