"""attention_varlen_backward's split into sequences, on the CPU with torch:
the dense backward is replaced by float32 autograd of the masked attention
of the views it receives, so the per-sequence gradients, written into views
of the packed outputs, must equal one autograd of the whole packed batch.
This checks the slicing (rows, the (H, total) log-sum-exp, GQA heads, empty
sequences, rows after the last), the alignment each sequence gets (top-left
where it has as many queries as keys) and the masks; the kernels' own
gradients are checked on the GPU (check --backward, check --varlen)."""

import math

import pytest

from kvpipe import varlen
from needs import HAVE_TORCH

pytestmark = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (CPU is enough)")


def _masked(q, k, v, causal, alignment, window, scale, torch):
    """(1, S, H, D) attention under the sequence's reference mask."""
    from kvpipe import check

    qf, kf, vf = (t[0].transpose(0, 1) for t in (q, k, v))
    group = qf.shape[0] // kf.shape[0]
    kf, vf = kf.repeat_interleave(group, 0), vf.repeat_interleave(group, 0)
    visible = check.reference_mask(qf.shape[1], kf.shape[1], causal, alignment, window,
                                   "cpu", torch)
    out, _ = check._masked_attention(qf, kf, vf, scale, visible, torch)
    return out.transpose(0, 1).unsqueeze(0)


@pytest.mark.parametrize("causal,alignment,window,lengths_q,lengths_k,heads", [
    (True, "bottom_right", (-1, -1), (1, 0, 20, 7, 33), (5, 3, 20, 30, 33), (4, 2)),
    (False, "top_left", (-1, -1), (30, 6, 1), (30, 12, 1), (4, 4)),
    (True, "bottom_right", (8, 0), (13, 25), (40, 25), (6, 2)),
])
def test_per_sequence_gradients_equal_the_whole_batch(monkeypatch, causal, alignment, window,
                                                      lengths_q, lengths_k, heads):
    import torch

    # The split into sequences (the packed way, the default, launches the
    # kernels of the whole batch).
    monkeypatch.setenv(varlen.VARLEN_BACKWARD_ENV, "sequences")
    monkeypatch.setattr(varlen._tensors, "check_tensor", lambda *a, **k: None)
    monkeypatch.setattr(varlen, "check_varlen_inputs", lambda q, k, v, cq, ck, mq, mk: (
        cq.shape[0] - 1, q.shape[0], k.shape[0], q.shape[1], k.shape[1], q.shape[2],
        v.shape[2], mq, mk))
    calls = []

    def dense_backward(q, k, v, o, lse, do, causal=False, scale=None, layout="bhsd", dq=None,
                       dk=None, dv=None, deterministic=None, mask_alignment="top_left",
                       window_size=(-1, -1)):
        assert layout == "bshd" and lse.shape == (1, q.shape[2], q.shape[1])
        calls.append((q.shape[1], k.shape[1], mask_alignment))
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        out = _masked(*leaves, causal, mask_alignment, window_size, scale, torch)
        (out * do).sum().backward()
        for dst, leaf in zip((dq, dk, dv), leaves):
            dst.copy_(leaf.grad.to(dst.dtype))

    monkeypatch.setattr(varlen, "attention_backward", dense_backward)
    torch.manual_seed(0)
    hq, hkv = heads
    starts_q = [0] + list(torch.tensor(lengths_q).cumsum(0).tolist())
    starts_k = [0] + list(torch.tensor(lengths_k).cumsum(0).tolist())
    # Three rows after the last sequence, which belong to none.
    q = torch.randn(starts_q[-1] + 3, hq, 64, dtype=torch.float64)
    k = torch.randn(starts_k[-1], hkv, 64, dtype=torch.float64)
    v = torch.randn(starts_k[-1], hkv, 64, dtype=torch.float64)
    cu_q = torch.tensor(starts_q, dtype=torch.int32)
    cu_k = torch.tensor(starts_k, dtype=torch.int32)
    scale = 1.0 / math.sqrt(64)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = torch.zeros(q.shape[0], hq, 64, dtype=torch.float64)
    for b in range(len(lengths_q)):
        if lengths_q[b] and lengths_k[b]:
            rows_q, rows_k = slice(starts_q[b], starts_q[b + 1]), slice(starts_k[b], starts_k[b + 1])
            out[rows_q] = _masked(leaves[0][rows_q].unsqueeze(0), leaves[1][rows_k].unsqueeze(0),
                                  leaves[2][rows_k].unsqueeze(0), causal, alignment, window,
                                  scale, torch)[0]
    dout = torch.randn_like(out)
    (out * dout).sum().backward()
    lse = torch.zeros(hq, q.shape[0])
    dq, dk, dv = varlen.attention_varlen_backward(q, k, v, out.detach(), lse, dout, cu_q,
                                                  cu_k, causal=causal, scale=scale,
                                                  mask_alignment=alignment,
                                                  window_size=window)
    for got, leaf in zip((dq, dk, dv), leaves):
        torch.testing.assert_close(got, leaf.grad)
    # One call per sequence with queries and keys; top-left where they are
    # as many.
    expected = [(n_q, n_k, "top_left" if n_q == n_k or not (causal or window != (-1, -1))
                 else alignment)
                for n_q, n_k in zip(lengths_q, lengths_k) if n_q and n_k]
    assert calls == expected
