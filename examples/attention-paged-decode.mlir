// A decode step against a paged KV cache (vLLM, SGLang, flash-attn's
// `block_table`): what an inference engine asks kvpipe for.
//
// K and V are one cache of pages, (num_pages, page_size, heads_kv,
// head_dim); sequence b's key j is row j % page_size of page
// block_table[b][j / page_size]. The kernel takes kv_lengths (each
// sequence's length, flash-attn's cache_seqlens), block_table (i32) and its
// row stride max_pages_per_seq; causal is aligned bottom-right, so a chunk
// of new queries at the end of each sequence sees its own keys and those
// before. The producer fills each K/V slot page by page: one i32 load of the
// block table per page, one TMA box per page.
//
//   @decode_page16   vLLM's default page (16 rows: 8 boxes per 128-key slot)
//   @decode_page256  pages larger than a slot (one box per slot, two slots
//                    per page)
//
//   kvpipe-opt examples/attention-paged-decode.mlir --kvpipe-to-ptx="ptx-file=paged.ptx abi-file=paged.json"
gpu.module @paged_decode [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @decode_page16 {head_dim = 128 : i64, element_type = bf16,
      causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>,
      kv_lengths = true, page_size = 16 : i64}
  kvpipe.attention_kernel @decode_page256 {head_dim = 128 : i64, element_type = bf16,
      causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>,
      kv_lengths = true, page_size = 256 : i64}
}
