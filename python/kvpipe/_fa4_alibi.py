"""ALiBi for FlashAttention-4 (``flash_attn.cute``, 4.0.0b36), for ``bench
--mods``: its ``score_mod`` and ``score_mod_bwd`` are CuTe DSL callbacks,
compiled into FA4's kernels. Imported only where FA4 is (it needs the CUTLASS
DSL, on the GPU machine after ../shared/peers/fa4.sh).

FA4 calls them as ``score_mod(score, b_idx, h_idx, q_idx=, kv_idx=,
seqlen_info=, aux_tensors=)`` and ``score_mod_bwd(grad, score, b_idx, h_idx,
q_idx=, kv_idx=, seqlen_info=, aux_tensors=)`` (flash_attn/cute/softmax.py,
``call_score_mod`` and ``call_score_mod_bwd``; the keyword names matter),
with TensorSSA vectors of the scaled scores and their indices, one element
at a time when aux tensors are given (``vec_size`` 1, flash_fwd.py and
flash_bwd_sm90.py). The slopes are ``aux_tensors[0]``, read as FA4's own
tests read a per-head tensor (tests/cute/score_mod_definitions.py,
``score_mod_dual_buffer``). Defined at module level, once: FA4 keys its
compiled kernels by the callables' source and captures.
"""

import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import math as mlir_math


@cute.jit
def alibi(score, b_idx, h_idx, q_idx, kv_idx, seqlen_info, aux_tensors):
    """``score - slopes[h] * |q_idx - kv_idx|`` (kvpipe.modifiers.alibi)."""
    slopes = aux_tensors[0]
    head = cute.make_rmem_tensor(1, cutlass.Int32)
    head.store(h_idx)
    slope = cute.make_rmem_tensor(1, slopes.element_type)
    slope[0] = slopes[head[0]]
    diff = q_idx - kv_idx
    distance = cute.TensorSSA(mlir_math.absi(diff), diff.shape, diff.dtype)
    return score - slope.load().to(cutlass.Float32) * distance.to(cutlass.Float32)


@cute.jit
def alibi_bwd(grad, score, b_idx, h_idx, q_idx, kv_idx, seqlen_info, aux_tensors):
    """The score's gradient through ``alibi``: the bias does not depend on
    the score, so it passes unchanged."""
    return grad
