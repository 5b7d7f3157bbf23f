"""The plan's fallback for kernels that spill registers (plans.spill_fallback,
launch._kernel_for): which tuning falls back to which, and that the launcher
loads the fallback only where the planned kernel's local memory is not empty,
with stand-ins for the compiler and the driver."""

import types

import pytest

from kvpipe import launch, plans


def test_three_warpgroups_fall_back_to_the_head_dims_tile_with_the_rest_of_the_tuning():
    # separable_bias_mma's key offsets tile does not fit beside two
    # warpgroups' persistent tiles: the fallback goes without it.
    planned = {"consumer_warpgroups": 3, "block_n": 80, "mask_bits": True,
               "separable_bias": True, "separable_bias_mma": True}
    assert plans.spill_fallback(planned) == {"mask_bits": True, "separable_bias": True}
    assert plans.with_spill_fallback(planned) == (planned, plans.spill_fallback(planned))
    # Nothing smaller planned: no fallback.
    for tuning in ({}, {"consumer_warpgroups": 2, "block_n": 80}, {"persistent": True}):
        assert plans.spill_fallback(tuning) is None
        assert plans.with_spill_fallback(tuning) == (tuning,)


class _Kernel:
    def __init__(self, name, local_bytes):
        self.name, self.local_bytes = name, local_bytes

    def attribute(self, name):
        assert name == "local_size_bytes"
        return self.local_bytes

    def set_max_dynamic_shared_memory(self, nbytes):
        pass


@pytest.fixture
def loader(monkeypatch):
    """compile_attention and cuda.Module stand-ins: a kernel with three
    consumer warpgroups spills ``spills[0]`` bytes; records what was
    compiled."""
    compiled, spills = [], [0]

    def compile_attention(head_dim, dtype, causal, **kwargs):
        tuning = {k: v for k, v in kwargs.items() if k in ("consumer_warpgroups", "block_n",
                                                           "mask_bits")}
        compiled.append(tuning)
        name = f"k{len(compiled)}"
        return types.SimpleNamespace(name=name, image=b"", cubin=b"",
                                     abi={"kernel": name, "dynamic_shared_memory": 0},
                                     tuning=tuning)

    class Module:
        def __init__(self, image, name, device):
            self.name = name

        def function(self, name):
            three = compiled[int(name[1:]) - 1].get("consumer_warpgroups") == 3
            return _Kernel(name, spills[0] if three else 0)

    monkeypatch.setattr(launch.kernels, "compile_attention", compile_attention)
    monkeypatch.setattr(launch.cuda, "Module", Module)
    monkeypatch.setattr(launch, "_loaded", {})
    return compiled, spills


CONFIG = (128, "bf16", False, None, "top_left", False, False)
PLANNED = (("block_n", 80), ("consumer_warpgroups", 3), ("mask_bits", True))
FALLBACK = (("mask_bits", True),)


def test_a_planned_kernel_that_keeps_its_registers_is_launched(loader):
    compiled, spills = loader
    kernel, abi = launch._kernel_for(CONFIG, 0, PLANNED, ("score_mod {}", ()),
                                     spill_fallback=FALLBACK)
    assert abi["kernel"] == "k1" and len(compiled) == 1


def test_a_planned_kernel_that_spills_is_replaced_by_the_fallback_once(loader):
    compiled, spills = loader
    spills[0] = 40
    kernel, abi = launch._kernel_for(CONFIG, 0, PLANNED, ("score_mod {}", ()),
                                     spill_fallback=FALLBACK)
    assert abi["kernel"] == "k2" and compiled[1] == {"mask_bits": True}
    # Remembered under the planned key: no third compilation, the same kernel.
    again = launch._kernel_for(CONFIG, 0, PLANNED, ("score_mod {}", ()),
                               spill_fallback=FALLBACK)
    assert again[1]["kernel"] == "k2" and len(compiled) == 2


def test_a_chosen_tuning_that_spills_is_launched_as_chosen(loader):
    compiled, spills = loader
    spills[0] = 40
    kernel, abi = launch._kernel_for(CONFIG, 0, PLANNED, ("score_mod {}", ()))
    assert abi["kernel"] == "k1" and kernel.attribute("local_size_bytes") == 40


@pytest.mark.parametrize("planned_first", [True, False])
def test_a_planned_and_a_chosen_launch_of_one_tuning_each_get_their_kernel(loader,
                                                                          planned_first):
    # The plan's choice (the fallback) and a caller's choice of the same
    # tuning (the spilling kernel, as chosen) are remembered apart, in
    # either order.
    compiled, spills = loader
    spills[0] = 40
    launches = [("planned", FALLBACK), ("chosen", None)]
    if not planned_first:
        launches.reverse()
    got = {}
    for name, fallback in launches * 2:
        kernel, abi = launch._kernel_for(CONFIG, 0, PLANNED, ("score_mod {}", ()),
                                         spill_fallback=fallback)
        got.setdefault(name, set()).add(kernel.attribute("local_size_bytes"))
    assert got == {"planned": {0}, "chosen": {40}}
    assert len(compiled) == 2
