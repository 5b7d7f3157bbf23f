// RUN: kvpipe-opt %s --kvpipe-to-ptx="verify-protocol=false ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}
// A fragment of a pipeline, not a whole protocol: verify-protocol=false.

// A TMA load multicast to the CTAs of a cluster of 2: the destination is
// converted to the cluster shared window and the copy carries the mask.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: .entry multicast(
// CHECK: .reqnctapercluster 2, 1, 1
// CHECK: cvta.to.shared::cluster.u64 [[DST:%rd[0-9]+]],
// CHECK: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [[[DST]]], [{{%rd[0-9]+}}, {{{%r[0-9]+}}, {{%r[0-9]+}}}], [{{.*}}], {{%rs[0-9]+}};
// CHECK: mbarrier.arrive.expect_tx.shared.b64

module attributes {gpu.container_module} {
gpu.module @multicast {
  gpu.func @multicast(%map: !map, %mask: i16)
      workgroup(%t : !tile {llvm.align = 1024 : i64})
      kernel attributes {known_cluster_size = array<i32: 2, 1, 1>} {
    %c0 = arith.constant 0 : index
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.producer_acquire %p : !p
    %b = kvpipe.producer_mbar %p : !p
    kvpipe.tma_load %map[%c0, %c0], %t, %b multicast %mask : !map, !tile
    kvpipe.producer_commit %p : !p
    kvpipe.consumer_wait %p : !p
    gpu.return
  }
}
}
