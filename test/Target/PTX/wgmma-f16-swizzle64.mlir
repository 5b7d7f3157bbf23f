// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// f16 operands in 64-byte (SS) and 32-byte (RS, MN-major B) swizzled tiles,
// and the fragment stored back with the 64-byte swizzle (then read by the
// warpgroup, so that the stores are live), to PTX.

!a = memref<2x64x32xf16, #gpu.address_space<workgroup>>
!b = memref<2x64x32xf16, #gpu.address_space<workgroup>>
!v = memref<4x64x16xf16, #gpu.address_space<workgroup>>
!o = memref<2x64x32xf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: .entry f16_swizzles(
// CHECK: wgmma.fence.sync.aligned;
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// CHECK: wgmma.commit_group.sync.aligned;
// CHECK: wgmma.wait_group.sync.aligned 0;
// CHECK: wgmma.fence.sync.aligned;
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// CHECK: wgmma.commit_group.sync.aligned;
// CHECK: wgmma.wait_group.sync.aligned 0;
// CHECK-COUNT-4: stmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK: ret;

module attributes {gpu.container_module} {
gpu.module @f16 {
  gpu.func @f16_swizzles(%out: memref<128xf16>)
      workgroup(%sa : !a {llvm.align = 1024 : i64}, %sb : !b {llvm.align = 1024 : i64},
                %sv : !v {llvm.align = 1024 : i64}, %so : !o {llvm.align = 1024 : i64}) kernel {
    %s = kvpipe.warpgroup_mma %sa, %sb {swizzle = 64} : !a, !b -> vector<32xf32>
    %s1 = kvpipe.warpgroup_wait %s {pending = 0} : vector<32xf32>
    %p = arith.truncf %s1 : vector<32xf32> to vector<32xf16>
    %o = kvpipe.warpgroup_mma %p, %sv {swizzle = 32, transpose_b} : vector<32xf16>, !v -> vector<32xf32>
    %o1 = kvpipe.warpgroup_wait %o {pending = 0} : vector<32xf32>
    %h = arith.truncf %o1 : vector<32xf32> to vector<32xf16>
    kvpipe.store_fragment %h, %so {swizzle = 64} : vector<32xf16>, !o
    gpu.barrier
    %tid = gpu.thread_id x
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %row = arith.remui %tid, %c64 : index
    %x = memref.load %so[%c0, %row, %c0] : !o
    memref.store %x, %out[%tid] : memref<128xf16>
    gpu.return
  }
}
}
