// The backward of examples/attention-softcap-window.mlir: the same soft-cap
// score_mod and sliding-window mask_mod on a `backward = true` declaration
// (docs/modifiers.md, "The backward"). The compiler differentiates the
// score_mod (d/ds 50 tanh(s / 50) = 1 - tanh(s / 50)^2, from the region's
// ops), recomputes P from the modified scores with the forward's
// log-sum-exp, and turns the mask's proven shape around: each K/V block
// visits only the Q blocks whose queries keep one of its keys
// (q in [kv, kv + 4095]).
//
//   kvpipe-opt examples/attention-backward-softcap-window.mlir --kvpipe-to-ptx="ptx-file=bwd-softcap-window.ptx abi-file=bwd-softcap-window.json"
gpu.module @gemma_bwd [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @softcap_window_bwd {head_dim = 128 : i64, element_type = bf16, causal = false, backward = true}
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
