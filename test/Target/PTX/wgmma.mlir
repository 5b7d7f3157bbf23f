// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// The two matrix products of attention on one warpgroup, to PTX:
// S = Q K^T (SS: Q [64][64] and K [128][64] K-major from shared memory) and
// O = P V (RS: P = bf16(S) from registers, V [128][128] row-major, i.e.
// MN-major B with imm-trans-b = 1), then O += P V accumulating, each group
// retired with wait_group 0.

!q = memref<64x64xbf16, #gpu.address_space<workgroup>>
!k = memref<128x64xbf16, #gpu.address_space<workgroup>>
!v = memref<2x128x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: .entry wgmma(
// CHECK: wgmma.fence.sync.aligned;
// SS: K/16 = 4 instructions, the first with scale-d = 0 (immediate).
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, {{%rd[0-9]+}}, {{%rd[0-9]+}}, {{.*}}
// CHECK: wgmma.commit_group.sync.aligned;
// CHECK: wgmma.wait_group.sync.aligned 0;
// RS: 8 instructions (K = 128) with four b32 A registers, imm-trans-b = 1.
// CHECK: wgmma.fence.sync.aligned;
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, {{{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}}, {{%rd[0-9]+}}, p, 1, 1, 1;
// CHECK: wgmma.commit_group.sync.aligned;
// CHECK: wgmma.fence.sync.aligned;
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// CHECK: wgmma.commit_group.sync.aligned;
// CHECK: wgmma.wait_group.sync.aligned 0;
// CHECK: ret;

module attributes {gpu.container_module} {
gpu.module @wgmma {
  gpu.func @wgmma(%out: memref<128x64xf32>)
      workgroup(%sq : !q {llvm.align = 1024 : i64},
                %sk : !k {llvm.align = 1024 : i64},
                %sv : !v {llvm.align = 1024 : i64}) kernel {
    %s = kvpipe.warpgroup_mma %sq, %sk : !q, !k -> vector<64xf32>
    %s1 = kvpipe.warpgroup_wait %s {pending = 0} : vector<64xf32>
    %p = arith.truncf %s1 : vector<64xf32> to vector<64xbf16>
    %o = kvpipe.warpgroup_mma %p, %sv {transpose_b} : vector<64xbf16>, !v -> vector<64xf32>
    %o1 = kvpipe.warpgroup_mma %p, %sv, %o {transpose_b} : vector<64xbf16>, !v -> vector<64xf32>
    %o2 = kvpipe.warpgroup_wait %o1 {pending = 0} : vector<64xf32>
    %tid = gpu.thread_id x
    %c0 = arith.constant 0 : index
    %x = vector.extract %o2[0] : f32 from vector<64xf32>
    %y = vector.extract %o2[63] : f32 from vector<64xf32>
    %z = arith.addf %x, %y : f32
    memref.store %z, %out[%tid, %c0] : memref<128x64xf32>
    gpu.return
  }
}
}
