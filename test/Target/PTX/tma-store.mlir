// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// The attention epilogue: each thread of the warpgroup writes its 64x64
// bf16 fragment into the 128B-swizzled shared tile (stmatrix), the
// writes are made visible to the async proxy and the warpgroup synchronises,
// then one thread stores the tile with a TMA bulk-group copy and waits for it.

!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: .entry epilogue(
// CHECK: .param .align 64 .b8 epilogue_param_0[128]
// CHECK: .shared .align 1024 .b8 {{.*}}[8192];
// 32 elements per thread: 16 pairs, four stmatrix.x4 (8x8 matrices).
// CHECK-COUNT-4: stmatrix.sync.aligned.m8n8.x4.shared.b16 [{{%rd[0-9]+}}], {{[{]}}{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}};
// CHECK-NOT: stmatrix
// CHECK-NOT: st.shared
// CHECK: fence.proxy.async.shared::cta;
// CHECK: bar.sync 0;
// Coordinates innermost first: column 0, row, head.
// CHECK-DAG: ld.param.b32 [[HEAD:%r[0-9]+]], [epilogue_param_1];
// CHECK-DAG: ld.param.b32 [[ROW:%r[0-9]+]], [epilogue_param_2];
// CHECK-DAG: mov.b32 [[ZERO:%r[0-9]+]], 0;
// CHECK: cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [{{%rd[0-9]+}}, {[[ZERO]], [[ROW]], [[HEAD]]}], [{{.*}}];
// CHECK: cp.async.bulk.commit_group;
// CHECK: cp.async.bulk.wait_group 0;
// CHECK: ret;

module attributes {gpu.container_module} {
gpu.module @epilogue {
  gpu.func @epilogue(%map: !map, %head: index, %row: index, %o: memref<128xf32>)
      workgroup(%t : !tile {llvm.align = 1024 : i64}) kernel {
    %c0 = arith.constant 0 : index
    %tid = gpu.thread_id x
    %x = memref.load %o[%tid] : memref<128xf32>
    %v = vector.broadcast %x : f32 to vector<32xf32>
    %h = arith.truncf %v : vector<32xf32> to vector<32xbf16>
    kvpipe.store_fragment %h, %t : vector<32xbf16>, !tile
    nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
    gpu.barrier
    %elected = arith.cmpi eq, %tid, %c0 : index
    scf.if %elected {
      kvpipe.tma_store %t, %map[%head, %row, %c0] : !tile, !map
      nvvm.cp.async.bulk.commit.group
      nvvm.cp.async.bulk.wait_group 0
    }
    gpu.return
  }
}
}
