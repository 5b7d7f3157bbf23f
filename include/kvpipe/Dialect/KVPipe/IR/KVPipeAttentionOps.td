//===- KVPipeAttentionOps.td - attention kernel declarations -*- tablegen -*-===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPEATTENTIONOPS_TD
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPEATTENTIONOPS_TD

include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.td"
include "mlir/IR/SymbolInterfaces.td"

def KVPipe_AttentionKernelOp : KVPipe_Op<"attention_kernel", [Symbol]> {
  let summary = "declaration of a FlashAttention forward kernel to generate";
  let description = [{
    Declares, inside a `gpu.module`, a FlashAttention forward kernel that
    `--kvpipe-expand-attention` replaces by the generated `gpu.func` of the
    same name, written with kvpipe pipelines, TMA, wgmma and upstream
    dialects:

    ```mlir
    gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
      kvpipe.attention_kernel @fa_fwd {head_dim = 128 : i64, element_type = bf16, causal = true}
    }
    ```

    It computes `O = softmax(scale * Q K^T [+ causal mask]) V` with fp32
    accumulation and the output in the input type, and optionally the fp32
    log-sum-exp of each row, for any `seq_q` and `seq_kv` (tails masked),
    batch and heads in the grid and grouped-query attention. Causal masking
    is top-left aligned (query i sees keys <= i), as torch's `is_causal`.

    Required: `head_dim` (of Q and K: 64, 96, 128, 192 or 256),
    `element_type` (bf16 or f16), `causal`. Optional: `value_head_dim` (of V
    and the output; default `head_dim`, or 128 with `head_dim` = 192, as
    DeepSeek's attention). Optional tuning attributes, with defaults per
    head dim (docs/performance.md, "Head dims"):
    `block_n` (keys per pipeline slot: a multiple of 16 in [32, 256]; by
    default 128, 112 at head dims 96 and 192 but 128 for (192, 128), 80 at
    256), `kv_stages` (slots of
    the K and V rings, >= 2), `consumer_warpgroups` (1, 2 or 3; the Q block has
    64 rows per consumer warpgroup), `producer_registers` and
    `consumer_registers` (the `setmaxnreg` targets of the roles),
    `overlap_softmax` (issue `S_j = Q K_j^T` together with
    `O += P_{j-1} V_{j-1}` and compute the softmax of block j while the
    tensor cores work, FA3's intra-warpgroup pipelining; default true),
    `pingpong` (with two or three consumer warpgroups, named barriers order
    their wgmma issue in turn, so that one warpgroup's softmax runs while
    the tensor cores work on another's GEMMs, FA3's inter-warpgroup
    scheduling; default true with two or more consumer warpgroups),
    `persistent` (one CTA per SM loops over the (Q block, head, batch)
    tiles, so that the next tile's Q load and first K/V blocks overlap the
    current tile's epilogue; the output is staged in a buffer of its own).

    The kernel ABI (parameters, grid, block, shared memory, tensor maps) is
    documented in docs/kernel-abi.md.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$head_dim,
                       TypeAttr:$element_type, BoolAttr:$causal,
                       OptionalAttr<I64Attr>:$value_head_dim,
                       OptionalAttr<I64Attr>:$block_n,
                       OptionalAttr<I64Attr>:$kv_stages,
                       OptionalAttr<I64Attr>:$consumer_warpgroups,
                       OptionalAttr<I64Attr>:$producer_registers,
                       OptionalAttr<I64Attr>:$consumer_registers,
                       OptionalAttr<BoolAttr>:$overlap_softmax,
                       OptionalAttr<BoolAttr>:$pingpong,
                       OptionalAttr<BoolAttr>:$persistent);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
}

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPEATTENTIONOPS_TD
