"""kvpipe.sinks' formulas on the CPU with torch: the rescale of a kernel's
output and log-sum-exp (padded layouts and packed batches) and the sinks'
gradient, against float32 softmax with a sink column (check._sink_softmax,
the GPU checks' reference); the kernels themselves are checked on the GPU
(check --mods --backward, check --paged, check --varlen)."""

import math

import pytest

from kvpipe import check, sinks
from needs import HAVE_TORCH

pytestmark = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (CPU is enough)")

B, H, SQ, SK, D = 2, 4, 7, 9, 16


def _attention_without_sinks(scores, v, torch):
    """(o, lse) as the kernels give them: a row without keys O = 0, lse +inf."""
    lse = torch.logsumexp(scores, dim=-1)
    o = torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v
    empty = torch.isneginf(lse)
    return o.masked_fill(empty[..., None], 0.0), lse.masked_fill(empty, math.inf)


def _inputs(torch):
    torch.manual_seed(0)
    scores = torch.randn(B, H, SQ, SK)
    scores[0, 1, 2, :] = -math.inf      # a row without keys: the sink alone
    scores[1, :, 3, 4:] = -math.inf
    return scores, torch.randn(B, H, SK, D), torch.randn(H)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_apply_sinks_gives_the_softmax_with_a_sink_column(layout):
    import torch

    scores, v, s = _inputs(torch)
    ref, lse_ref = check._sink_softmax(scores, s[None, :, None, None], v, torch)
    o, lse = _attention_without_sinks(scores, v, torch)
    if layout == "bshd":
        o = o.transpose(1, 2).contiguous()
    got, got_lse = sinks.apply_sinks(o, lse, s, layout)
    assert got is o  # in place
    if layout == "bshd":
        got = got.transpose(1, 2)
    assert torch.allclose(got, ref, atol=1e-6) and torch.allclose(got_lse, lse_ref, atol=1e-6)
    assert torch.equal(got[0, 1, 2], torch.zeros(D)) and float(got_lse[0, 1, 2]) == float(s[1])


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_sink_gradient_is_autograds(layout):
    import torch

    scores, v, s = _inputs(torch)
    s = s.clone().requires_grad_()
    ref, lse = check._sink_softmax(scores, s[None, :, None, None], v, torch)
    do = torch.randn_like(ref)
    expected = torch.autograd.grad((ref * do).sum(), s)[0]
    o, dout = ref.detach(), do
    if layout == "bshd":
        o, dout = o.transpose(1, 2), do.transpose(1, 2)
    got = sinks.sink_gradient(o, dout, lse.detach(), s.detach(), layout)
    assert torch.allclose(got, expected, atol=1e-6)


def test_packed_rows_after_the_last_sequence_stay_as_they_were():
    import torch

    torch.manual_seed(1)
    total, rows = SQ + 3, SQ
    o, lse, s = torch.randn(total, H, D), torch.randn(H, total), torch.randn(H)
    lse[:, 0] = math.inf  # a row without keys
    o[0] = 0.0
    before_o, before_lse = o.clone(), lse.clone()
    sinks.apply_sinks_packed(o, lse, s, torch.tensor(rows))
    assert torch.equal(o[rows:], before_o[rows:]) and torch.equal(lse[:, rows:],
                                                                  before_lse[:, rows:])
    factor = torch.sigmoid(before_lse[:, 1:rows] - s[:, None])
    assert torch.allclose(o[1:rows], before_o[1:rows] * factor.transpose(0, 1)[..., None])
    assert torch.allclose(lse[:, 1:rows], torch.logaddexp(before_lse[:, 1:rows], s[:, None]))
    assert torch.equal(o[0], torch.zeros(H, D)) and torch.equal(lse[:, 0], s)
