// Variable-length batches (flash-attn's flash_attn_varlen_func): the
// sequences are packed without padding, sequence b at the query rows
// [cu_seqlens_q[b], cu_seqlens_q[b+1]) and key rows [cu_seqlens_k[b],
// cu_seqlens_k[b+1]); seq_q and seq_kv are the longest sequences (the grid).
//
//   @prefill        causal aligned bottom-right per sequence (a chunk of new
//                   queries at the end of each sequence's keys), GQA by the
//                   runtime heads_per_kv_head
//   @prefill_window the same with a sliding window (runtime window_left /
//                   window_right), head dim 64
//
// The output is written by 16-byte stores predicated on the row being in
// the sequence, never into the next sequence's rows.
//
//   kvpipe-opt examples/attention-varlen.mlir --kvpipe-to-ptx="ptx-file=varlen.ptx abi-file=varlen.json"
gpu.module @serving [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @prefill {head_dim = 128 : i64, element_type = bf16, causal = true,
      mask_alignment = #kvpipe.mask_alignment<bottom_right>, varlen = true}
  kvpipe.attention_kernel @prefill_window {head_dim = 64 : i64, element_type = f16, causal = true,
      mask_alignment = #kvpipe.mask_alignment<bottom_right>, sliding_window = true,
      varlen = true}
}
