// A Gemma-2-style local attention layer: logit soft-capping (score_mod) and
// a causal sliding window of 4096 keys (mask_mod), written as regions of the
// kernel declaration (docs/modifiers.md).
//
// The score_mod receives the scaled score (scale * q.k, FlexAttention's) and
// yields 50 * tanh(s / 50) (`fastmath<afn>`: the hardware's tanh.approx.f32,
// as FA3's soft-cap). The mask_mod keeps key kv for query q when
// 0 <= q - kv <= 4095; the compiler proves that shape (a comparison of the
// indices with constants), so K/V blocks outside every row's window are
// never loaded and blocks inside it for all 64 rows of a warpgroup skip the
// per-element mask. The ABI reports `"mask_mod_shape": "proven"`.
//
//   kvpipe-opt examples/attention-softcap-window.mlir --kvpipe-to-ptx="ptx-file=softcap-window.ptx abi-file=softcap-window.json"
gpu.module @gemma [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @softcap_window {head_dim = 128 : i64, element_type = bf16, causal = false}
  score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %q: index, %kv: index):
    %inv_cap = arith.constant 2.000000e-02 : f32
    %cap = arith.constant 5.000000e+01 : f32
    %x = arith.mulf %score, %inv_cap : f32
    %t = math.tanh %x fastmath<afn> : f32
    %capped = arith.mulf %t, %cap : f32
    kvpipe.yield %capped : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %back = arith.subi %q, %kv : index
    %window = arith.constant 4096 : index
    %keep = arith.cmpi ult, %back, %window : index
    kvpipe.yield %keep : i1
  }
}
