"""check --models on the CPU: its layers run on the kernels, its kernel list
(compile --for-check --models) is what its cases load, and what the flash-attn
drop-in traces at run time is what the list was traced with."""

import math

import pytest

from fakes import FakeTensor
from kvpipe import check_models, kernels, modifiers
from kvpipe.check_models import MODEL_CASES, MODELS, ModelCase
from kvpipe.check_modifiers import _flash_score_mod
from needs import HAVE_TORCH


def test_every_layer_runs_on_a_kernel_head_dim_pair():
    for name, layer in MODELS.items():
        assert layer.heads_q % layer.heads_kv == 0, name
        pair = (layer.head_dim, layer.v_dim)
        assert pair in kernels.HEAD_DIM_PAIRS or kernels.padded_head_dims(*pair), name


def test_every_case_names_a_model_and_an_interface():
    assert {case.model for case in MODEL_CASES} == set(MODELS)
    for case in MODEL_CASES:
        assert case.api in ("attention", "flash_attn"), case.name
        # The ALiBi layers go through flash_attn_func's alibi_slopes.
        assert not case.layer.alibi or case.api == "flash_attn", case.name


def test_the_kernel_list_holds_each_cases_kernels():
    listed = check_models.model_kernel_configs()
    assert len(listed) == len({repr(sorted(c.items())) for c in listed})  # no repeats
    for case in MODEL_CASES:
        configs = check_models.case_kernel_configs(case)
        assert configs and all(c in listed for c in configs), case.name
        forward = [c for c in configs if not c.get("backward")]
        backward = [c for c in configs if c.get("backward")]
        assert forward, case.name
        assert len(backward) == int(case.train), case.name
        layer = case.layer
        for c in forward:
            assert c["sliding_window"] == (layer.window != (-1, -1)), case.name
            assert c.get("sinks", False) == layer.sinks, case.name
            assert ("modifiers" in c) == bool(layer.softcap or layer.alibi), case.name
        for c in backward:  # the backward family reads the lse: no sinks of its own
            assert "sinks" not in c, case.name


def test_padded_layers_list_the_kernels_of_the_pair_they_run_as():
    by_model = {case.model: case for case in MODEL_CASES}
    for model, pair in (("phi-2", (96, 96)), ("sd-1.5/d40", (64, 64)),
                        ("sd-1.5/d160", (192, 192)), ("vit-h-14", (96, 96))):
        for config in check_models.case_kernel_configs(by_model[model]):
            assert (config["head_dim"], config.get("value_head_dim") or config["head_dim"]) \
                == pair, model


class IndexableFake(FakeTensor):
    """A fake tensor that a score_mod can index, as it indexes a torch tensor."""

    def __getitem__(self, index):
        return modifiers.load(self, index)


def test_the_flash_attn_trace_is_the_listed_one():
    # What flash_attn_func traces for Gemma 2's soft-cap and BLOOM's ALiBi
    # (equal lengths: the diagonal's shift compiled in) is what the kernel
    # list traced with shape-only slopes.
    from kvpipe.flash_attn import _score_mod

    for softcap, heads in ((50.0, 16), (0.0, 32)):
        alibi = not softcap
        slopes = IndexableFake((heads,), dtype="float32") if alibi else None
        q = FakeTensor((1, 2048, heads, 128))
        at_run_time = modifiers.trace(_score_mod(softcap, slopes, q, 2048))
        listed = modifiers.trace(_flash_score_mod(softcap, alibi, True, slopes_shape=(heads,)))
        assert at_run_time.ir == listed.ir
        assert at_run_time.aux_types == listed.aux_types


def test_the_large_cases_exceed_32_bit_element_offsets():
    for case in check_models.LARGE_CASES:
        if case.kind == "prefill":
            elements = case.heads_q * case.seq * case.head_dim
        else:
            elements = case.seq * 16 * case.heads_kv * case.head_dim
        assert elements > 2 ** 31, case.name


def test_model_cases_name_their_settings():
    case = ModelCase("gemma-2-27b/local", 1, 4400, 4400, api="flash_attn", train=True)
    assert case.name == "gemma-2-27b/local flash_attn train bf16 d128 H32/16 B1 4400x4400"
    assert math.isclose(case.layer.softmax_scale, 1 / 12)
    assert ModelCase("mistral-7b-v0.1", 1, 512, 4700, api="flash_attn").alignment == \
        "bottom_right"
    assert ModelCase("mistral-7b-v0.1", 1, 512, 4700).alignment == "top_left"


@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
def test_alibi_slopes_follow_the_paper(monkeypatch):
    import torch

    monkeypatch.setattr(torch, "tensor", lambda data, **kw: list(data))
    slopes = check_models._slopes(8, torch)
    assert slopes == [2.0 ** -(i + 1) for i in range(8)]
    # 12 heads: the 8 of n = 8, then every other one of n = 16.
    slopes = check_models._slopes(12, torch)
    assert slopes[:8] == [2.0 ** -(i + 1) for i in range(8)]
    assert slopes[8:] == [2.0 ** -(0.5 * (2 * i + 1)) for i in range(4)]
