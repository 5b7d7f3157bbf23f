// The backward of packed sequences (`varlen = true` with `backward = true`,
// docs/backward.md "Packed sequences"): the skeleton of the three kernels,
// the strict protocol checker, the PTX and ptxas (no spill past 8 bytes at
// 128 and 256).
// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @vb {head_dim = 128 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>, backward = true, varlen = true}
  kvpipe.attention_kernel @vb256 {head_dim = 256 : i64, element_type = f16, causal = false, backward = true, varlen = true}
  kvpipe.attention_kernel @vb192 {head_dim = 192 : i64, value_head_dim = 128 : i64, element_type = bf16, causal = false, sliding_window = true, backward = true, varlen = true}
}

// The preprocess takes the offsets and total_q last; a block past its
// sequence's rows (the grid is sized by the longest) does nothing, and the
// padded rows of (head, sequence) start at head * round_up(total_q + 64 B,
// 64) + floor((cu_seqlens_q[b] + 64 b) / 64) * 64.
// CHECK-LABEL: gpu.func @vb_preprocess(
// CHECK-SAME: %[[PCU:arg14]]: !llvm.ptr<1>, %[[PTOTAL:arg15]]: i32)
// CHECK-SAME: params = ["o", "do", "lse", "delta", "lse_log2", "dq_accum", "o_stride_b", "o_stride_h", "o_stride_s", "do_stride_b", "do_stride_h", "do_stride_s", "seq_q", "heads_q", "cu_seqlens_q", "total_q"]
// CHECK-SAME: varlen = true
// CHECK: %[[Z:.*]] = gpu.block_id  z
// CHECK: llvm.getelementptr %[[PCU]]
// CHECK: %[[BATCHES:.*]] = gpu.grid_dim  z
// CHECK: arith.muli %[[BATCHES]], %c64
// CHECK: %[[INSIDE:.*]] = arith.cmpi ult
// CHECK-NEXT: scf.if %[[INSIDE]] {

// The main kernel: dK and dV are pointers (predicated stores, no TMA
// store), the offsets and totals follow `batch`, the K/V rows and Q/dO rows
// are the sequence's first plus the block's in batch 0 of the maps, and a
// K/V block past the sequence's keys visits no Q block.
// CHECK-LABEL: gpu.func @vb(
// CHECK-SAME: %arg3: !kvpipe.tensor_map<{{[^>]*}}>, %arg4: !llvm.ptr<1>, %arg5: !llvm.ptr<1>,
// CHECK-SAME: %[[CUQ:arg16]]: !llvm.ptr<1>, %[[CUK:arg17]]: !llvm.ptr<1>, %arg18: i32, %arg19: i32)
// CHECK-SAME: params = ["q_map", "k_map", "v_map", "do_map", "dk", "dv", "lse_log2", "delta", "dq_accum", "seq_q", "seq_kv", "heads_per_kv_head", "scale_log2", "scale", "heads_q", "batch", "cu_seqlens_q", "cu_seqlens_k", "total_q", "total_kv"]
// CHECK: llvm.getelementptr %[[CUQ]]
// CHECK: llvm.getelementptr %[[CUK]]
// CHECK: %[[STARTK:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK: %[[SEQKV:.*]] = arith.subi %{{.*}}, %[[STARTK]] : index
// CHECK: %[[KVROW0:.*]] = arith.muli %block_id_x, %c128 : index
// CHECK: %[[KEYS:.*]] = arith.cmpi ult, %[[KVROW0]], %[[SEQKV]] : index
// CHECK: arith.select %[[KEYS]]
// A K/V block past its sequence's keys has no work: its CTA leaves before
// it makes its barriers.
// CHECK: scf.if %[[KEYS]] {
// CHECK: gpu.grid_dim  z
// CHECK: kvpipe.create
// CHECK: %[[KVROW:.*]] = arith.addi %[[STARTK]], %[[KVROW0]] : index
// CHECK: kvpipe.tma_load %arg1[%c0, %{{.*}}, %[[KVROW]], %c0]
// CHECK: kvpipe.tma_load %arg0[%c0, %block_id_y,
// CHECK-NOT: kvpipe.tma_store
// CHECK: vector.load {{.*}} vector<8xbf16>
// CHECK: scf.if
// CHECK: llvm.store {{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK-NOT: kvpipe.tma_store
// CHECK: kvpipe.consumer_release

// The postprocess: a block past its sequence's rows does nothing.
// CHECK-LABEL: gpu.func @vb_postprocess(
// CHECK-SAME: !llvm.ptr<1>, %arg9: i32)
// CHECK-SAME: params = ["dq_accum", "dq", "dq_stride_b", "dq_stride_h", "dq_stride_s", "seq_q", "heads_q", "scale", "cu_seqlens_q", "total_q"]
// CHECK: %[[IN:.*]] = arith.cmpi ult
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK: gpu.grid_dim  z

// The split-head families (192/128 with a window, 256) store their column
// blocks the same way.
// CHECK-LABEL: gpu.func @vb256(
// CHECK-NOT: kvpipe.tma_store
// CHECK: llvm.store {{.*}} : vector<8xf16>, !llvm.ptr<1>
// CHECK-LABEL: gpu.func @vb192(
// CHECK-SAME: window_left
// CHECK-NOT: kvpipe.tma_store
// CHECK: llvm.store {{.*}} : vector<8xbf16>, !llvm.ptr<1>

// PTX-DAG: .entry vb_preprocess(
// PTX-DAG: .entry vb(
// PTX-DAG: .entry vb_postprocess(
// PTX-DAG: .entry vb256(
// PTX-DAG: .entry vb192(
// PTX-DAG: st.global.v4.b32

// (192/128 with a window spills about as much as the dense family with a
// window, 192/232 bytes: not checked here.)
// PTXAS: Function properties for vb256{{$}}
// PTXAS-NEXT: {{[08]}} bytes stack frame, {{[08]}} bytes spill stores, {{[08]}} bytes spill loads
// PTXAS: Function properties for vb{{$}}
// PTXAS-NEXT: {{[08]}} bytes stack frame, {{[08]}} bytes spill stores, {{[08]}} bytes spill loads
