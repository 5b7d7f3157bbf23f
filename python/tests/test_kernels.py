"""compile_attention and the kernel cache (no GPU needed)."""

import json
import os
import stat

import pytest

import kvpipe
from kvpipe import kernels


def _no_compiler(backend=None, required=True):
    return None


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_compile_produces_ptx_and_abi(compiler, cache):
    k = kvpipe.compile_attention(head_dim=64, dtype="bf16", causal=True)
    assert k.name == "kvpipe_attention_d64_bf16_causal"
    assert f".entry {k.name}(" in k.ptx
    for instruction in ("wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait",
                        "setmaxnreg"):
        assert instruction in k.ptx
    assert k.abi["head_dim"] == 64 and k.abi["causal"] is True
    assert k.abi["threads"] == 128 * (1 + k.abi["consumer_warpgroups"])
    assert k.abi["dynamic_shared_memory"] <= 227 * 1024
    assert k.abi["params"][:4] == ["q_map", "k_map", "v_map", "o_map"]
    entries = list(cache.iterdir())
    assert len(entries) == 1 and (entries[0] / "kernel.ptx").is_file()
    assert json.loads((entries[0] / "meta.json").read_text())["compiler_version"]


def test_tuning_reaches_the_kernel(compiler, cache):
    k = kvpipe.compile_attention(64, "f16", False, block_n=64, kv_stages=4)
    assert k.abi["block_n"] == 64 and k.abi["kv_stages"] == 4
    assert "block_n64" in k.name and "kv_stages4" in k.name
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in k.ptx


def test_exp2_emulation_reaches_the_softmax(compiler, cache):
    # 2 of every 8 exponentials on the FMA pipe: fewer ex2.approx in the PTX
    # (the softmax's 64 per thread and block, unrolled twice).
    plain = kvpipe.compile_attention(64, "bf16", False)
    k = kvpipe.compile_attention(64, "bf16", False, exp2_emulation=2)
    assert "exp2_emulation2" in k.name and "exp2_emulation = 2" in k.config.declaration()
    assert 0 < k.ptx.count("ex2.approx") < plain.ptx.count("ex2.approx")
    with pytest.raises(ValueError, match=r"exp2_emulation .* must be an int in \[0, 8\], got 9"):
        kvpipe.compile_attention(64, "bf16", False, exp2_emulation=9)


def test_rescale_threshold_reaches_the_softmax(compiler, cache):
    # The default (8) keeps a row's maximum until a block passes it by 2^8
    # and skips O's rescale where a warp's factors are all 1: a vote in the
    # PTX; -1 rescales in every iteration, without a vote.
    default = kvpipe.compile_attention(128, "bf16", False)
    every = kvpipe.compile_attention(128, "bf16", False, rescale_threshold=-1)
    exact = kvpipe.compile_attention(128, "bf16", False, rescale_threshold=0)
    assert "rescale_thresholdm1" in every.name
    assert "rescale_threshold = -1 : i64" in every.config.declaration()
    assert "vote.sync.any" in default.ptx and "vote.sync.any" in exact.ptx
    assert "vote.sync.any" not in every.ptx
    with pytest.raises(ValueError, match=r"rescale_threshold .* must be an int in \[-1, 15\], "
                                         r"got 16"):
        kvpipe.compile_attention(128, "bf16", False, rescale_threshold=16)


def test_tensor_row_sums_reaches_the_kernel(compiler, cache):
    # O += P [V | 1]: the PV wgmma is 8 columns wider (n72 at head dim 64,
    # n136 at 128) and the softmax adds no row sums; its V slots hold a block
    # of ones more (shared memory in the ABI).
    plain = kvpipe.compile_attention(64, "bf16", False)
    k = kvpipe.compile_attention(64, "bf16", False, tensor_row_sums=True)
    assert "tensor_row_sums" in k.name and "tensor_row_sums = true" in k.config.declaration()
    assert "m64n72k16" in k.ptx and "m64n72k16" not in plain.ptx
    assert k.abi["dynamic_shared_memory"] == plain.abi["dynamic_shared_memory"] + 2 * 128 * 64 * 2
    wide = kvpipe.compile_attention(128, "f16", True, tensor_row_sums=True)
    assert "m64n136k16" in wide.ptx
    with pytest.raises(ValueError, match="tensor_row_sums"):
        kvpipe.compile_attention(64, "bf16", False, tensor_row_sums=2)


def test_skip_idle_warpgroups_reaches_the_kernel(compiler, cache):
    # A warpgroup without rows drains the K/V slots and the turns pass among
    # the others: the ping-pong's next consumer is a select, not a remainder.
    k = kvpipe.compile_attention(64, "bf16", False, skip_idle_warpgroups=True)
    assert "skip_idle_warpgroups = true" in k.config.declaration()
    plain = kvpipe.compile_attention(64, "bf16", False)
    assert k.ptx != plain.ptx and k.abi["threads"] == plain.abi["threads"]
    with pytest.raises(kvpipe.CompilerError, match="skip_idle_warpgroups' needs 2 or 3"):
        kvpipe.compile_attention(128, "bf16", False, consumer_warpgroups=1,
                                 skip_idle_warpgroups=True)


def test_mask_bits_reaches_the_mask(compiler, cache):
    # Bit masks of 32 keys: shifts of all-ones words in the masked blocks.
    k = kvpipe.compile_attention(64, "bf16", True, mask_bits=True)
    plain = kvpipe.compile_attention(64, "bf16", True)
    assert "mask_bits = true" in k.config.declaration()
    assert "shr.u32" in k.ptx and k.ptx.count("selp.f32") < plain.ptx.count("selp.f32")


def test_late_pv_retire_reaches_the_loop(compiler, cache):
    # The retire of P V after the rescale's vote: a wait_group 0 after the
    # vote in the PTX, none between the row maximum and the vote.
    k = kvpipe.compile_attention(64, "bf16", False, late_pv_retire=True)
    assert "late_pv_retire = true" in k.config.declaration()
    loop = k.ptx[k.ptx.index("wgmma.wait_group.sync.aligned \t1;"):]
    assert loop.index("vote.sync.any") < loop.index("wgmma.wait_group.sync.aligned \t0;")
    plain = kvpipe.compile_attention(64, "bf16", False)
    loop = plain.ptx[plain.ptx.index("wgmma.wait_group.sync.aligned \t1;"):]
    assert loop.index("wgmma.wait_group.sync.aligned \t0;") < loop.index("vote.sync.any")


def test_q_stages_reaches_the_kernel(compiler, cache):
    # Q's ring of two slots: one Q tile more of shared memory (16 KiB at
    # head dim 64 with two consumer warpgroups), and the compiler names what
    # it needs (a persistent kernel) and what does not fit (D 128 with the
    # row sums' ones).
    tuning = dict(consumer_warpgroups=2, persistent=True)
    ring = kvpipe.compile_attention(64, "bf16", True, q_stages=2, **tuning)
    one = kvpipe.compile_attention(64, "bf16", True, **tuning)
    assert "q_stages = 2" in ring.config.declaration()
    assert (ring.abi["dynamic_shared_memory"] - one.abi["dynamic_shared_memory"]
            == 128 * 64 * 2)
    with pytest.raises(kvpipe.CompilerError, match="'q_stages' = 2 needs 'persistent'"):
        kvpipe.compile_attention(64, "bf16", True, q_stages=2)
    with pytest.raises(kvpipe.CompilerError, match="lower 'kv_stages', 'q_stages' or "
                                                   "'block_n'"):
        kvpipe.compile_attention(128, "bf16", True, q_stages=2, persistent=True,
                                 tensor_row_sums=True)


def test_tile_table_reaches_the_kernel(compiler, cache):
    # The host's table of tiles: the persistent kernel's last parameter, a
    # pointer, and an ABI entry the launchers read; refused one tile per CTA.
    table = kvpipe.compile_attention(64, "bf16", True, persistent=True, q_stages=2,
                                     tile_table=True)
    plain = kvpipe.compile_attention(64, "bf16", True, persistent=True, q_stages=2)
    assert "tile_table = true" in table.config.declaration()
    assert table.abi["params"] == plain.abi["params"] + ["tile_table"]
    assert table.abi["param_kinds"]["tile_table"] == "pointer"
    assert table.abi["tile_table"] and not plain.abi["tile_table"]
    with pytest.raises(kvpipe.CompilerError, match="'tile_table' needs 'persistent'"):
        kvpipe.compile_attention(64, "bf16", True, tile_table=True)


def test_cache_hit_does_not_recompile(compiler, cache, monkeypatch):
    first = kvpipe.compile_attention(128, "bf16", False)
    calls = []
    monkeypatch.setattr(kernels, "_compile", lambda *a: calls.append(a))
    second = kvpipe.compile_attention(128, "bf16", False)
    assert calls == [] and second.ptx == first.ptx


def test_new_compiler_version_recompiles(compiler, cache, monkeypatch):
    kvpipe.compile_attention(64, "bf16", False)
    monkeypatch.setattr(kernels._compiler.Compiler, "identity", lambda self: "another-build")
    k = kvpipe.compile_attention(64, "bf16", False)
    assert k.compiler_version == "another-build"


def test_without_compiler_the_cache_serves(compiler, cache, monkeypatch):
    made = kvpipe.compile_attention(64, "bf16", True)
    monkeypatch.setattr(kernels._compiler, "get_compiler", _no_compiler)
    loaded = kvpipe.compile_attention(64, "bf16", True)
    assert loaded.ptx == made.ptx and loaded.abi == made.abi


def test_without_compiler_or_cache_the_error_names_both(cache, monkeypatch):
    monkeypatch.setattr(kernels._compiler, "get_compiler", _no_compiler)
    with pytest.raises(kvpipe.KernelNotAvailableError) as info:
        kvpipe.compile_attention(128, "f16", True)
    message = str(info.value)
    assert "KVPIPE_OPT" in message and "KVPIPE_CAPI_LIB" in message
    assert "KVPIPE_CACHE_DIR" in message and str(cache) in message


def test_a_refusal_is_cached_for_a_machine_without_compiler(compiler, cache, monkeypatch):
    # The GPU machine has the cache and no compiler: a configuration the
    # compiler refused must raise its CompilerError there too (check --tune
    # skips the head dims a tuning does not fit by it), not a missing kernel.
    with pytest.raises(kvpipe.CompilerError) as first:
        kvpipe.compile_attention(64, "bf16", False, kv_stages=1)
    assert [e["refused"] for e in kernels.cache_entries()] == [True]
    calls = []
    monkeypatch.setattr(kernels, "_compile", lambda *a: calls.append(a))
    with pytest.raises(kvpipe.CompilerError) as again:
        kvpipe.compile_attention(64, "bf16", False, kv_stages=1)
    assert calls == [] and str(again.value) == str(first.value)
    monkeypatch.setattr(kernels._compiler, "get_compiler", _no_compiler)
    with pytest.raises(kvpipe.CompilerError, match="'kv_stages' must be in"):
        kvpipe.compile_attention(64, "bf16", False, kv_stages=1)
    assert kernels.clear_cache() == 1 and kernels.cache_entries() == []


def test_a_refusal_by_another_build_recompiles(compiler, cache, monkeypatch):
    with pytest.raises(kvpipe.CompilerError):
        kvpipe.compile_attention(64, "bf16", False, kv_stages=1)
    monkeypatch.setattr(kernels._compiler.Compiler, "identity", lambda self: "another-build")
    calls = []

    def refuse(*args):
        calls.append(args)
        raise kvpipe.CompilerError("refused again", 1, ["kvpipe-opt"])

    monkeypatch.setattr(kernels, "_compile", refuse)
    with pytest.raises(kvpipe.CompilerError, match="refused again"):
        kvpipe.compile_attention(64, "bf16", False, kv_stages=1)
    assert len(calls) == 1
    assert [e["compiler_version"] for e in kernels.cache_entries()] == ["another-build"]


def test_compiler_rejects_unsupported_tuning(compiler, cache):
    with pytest.raises(kvpipe.CompilerError, match="'kv_stages' must be in \\[2, 8\\], got 1"):
        kvpipe.compile_attention(64, "bf16", False, kv_stages=1)


@pytest.mark.parametrize("args,error,match", [
    ((80, "bf16", False), ValueError, "head_dim must be one of \\(64, 96, 128, 192, 256\\)"),
    ((64, "f32", False), TypeError, "bfloat16 or float16"),
    ((64, "bf16", 1), TypeError, "causal must be a bool"),
])
def test_configuration_errors(args, error, match, cache):
    with pytest.raises(error, match=match):
        kvpipe.compile_attention(*args)


def test_unknown_tuning_attribute(cache):
    with pytest.raises(ValueError, match="unknown tuning attribute 'block_m'"):
        kvpipe.compile_attention(64, "bf16", False, block_m=64)


def test_masks_reach_the_kernel_and_its_abi(compiler, cache):
    k = kvpipe.compile_attention(128, "bf16", True, mask_alignment="bottom_right",
                                 sliding_window=True, kv_lengths=True)
    assert k.name == "kvpipe_attention_d128_bf16_causal_bottom_right_window_kvlengths"
    assert k.abi["mask_alignment"] == "bottom_right"
    assert k.abi["sliding_window"] is True and k.abi["kv_lengths"] is True
    assert k.abi["params"][-3:] == ["window_left", "window_right", "kv_lengths"]
    assert k.abi["param_kinds"]["kv_lengths"] == "pointer"
    assert k.abi["param_kinds"]["window_left"] == "i32"
    # The per-batch length is read from global memory.
    assert "ld.global" in k.ptx


def test_plain_kernels_take_no_mask_parameters(compiler, cache):
    k = kvpipe.compile_attention(64, "bf16", False)
    assert k.abi["params"][-1] == "batch"
    assert k.abi["mask_alignment"] == "top_left" and k.abi["sliding_window"] is False


@pytest.mark.parametrize("kwargs,error,match", [
    ({"mask_alignment": "diagonal"}, ValueError, "mask_alignment must be one of"),
    ({"sliding_window": 1}, TypeError, "sliding_window must be a bool"),
    ({"kv_lengths": "yes"}, TypeError, "kv_lengths must be a bool"),
])
def test_mask_configuration_errors(kwargs, error, match, cache):
    with pytest.raises(error, match=match):
        kvpipe.compile_attention(64, "bf16", True, **kwargs)


def test_kv_lengths_with_persistent_is_refused_by_the_compiler(compiler, cache):
    with pytest.raises(kvpipe.CompilerError, match="'kv_lengths' is not supported with "
                                                   "'persistent'"):
        kvpipe.compile_attention(64, "bf16", False, kv_lengths=True, persistent=True)


def test_value_head_dim_reaches_the_declaration(compiler, cache):
    k = kvpipe.compile_attention(192, "bf16", True, value_head_dim=128)
    assert k.name == "kvpipe_attention_d192v128_bf16_causal"
    assert "value_head_dim = 128 : i64" in k.config.declaration()
    assert k.abi["head_dim"] == 192 and k.abi["value_head_dim"] == 128
    # S = Q K^T over 192 columns in 128-key blocks, O of 128 columns.
    assert "m64n128k16" in k.ptx and "m64n192k16" not in k.ptx
    # Equal head dims are the default: same kernel as without the argument.
    same = kvpipe.compile_attention(192, "bf16", True, value_head_dim=192)
    assert same.name == "kvpipe_attention_d192_bf16_causal"
    assert "value_head_dim" not in same.config.declaration()


@pytest.mark.parametrize("head_dim,value_head_dim,error,match", [
    (128, 64, ValueError, "value_head_dim must be one of \\(128\\) with head_dim 128, got 64"),
    (192, 96, ValueError, "value_head_dim must be one of \\(128, 192\\) with head_dim 192"),
    (192, 128.0, TypeError, "value_head_dim must be an int"),
])
def test_unsupported_value_head_dim_names_it(head_dim, value_head_dim, error, match, cache):
    with pytest.raises(error, match=match):
        kvpipe.compile_attention(head_dim, "bf16", False, value_head_dim=value_head_dim)


def test_compiler_names_block_n_that_does_not_fit_head_dim_256(compiler, cache):
    # 128 keys fit the shared memory at head dim 128, not at 256.
    with pytest.raises(kvpipe.CompilerError,
                       match="needs 328704 bytes of shared memory.*'block_n'"):
        kvpipe.compile_attention(256, "bf16", False, block_n=128)


def test_backward_family_compiles_with_three_abis(compiler, cache):
    k = kvpipe.compile_attention(64, "bf16", True, backward=True)
    assert k.name == "kvpipe_attention_bwd_d64_bf16_causal"
    assert "backward = true" in k.config.declaration()
    roles = {abi["role"]: abi for abi in k.abis}
    assert set(roles) == {"preprocess", "main", "postprocess"}
    assert k.abi is roles["main"] or k.abi == roles["main"]
    for abi in k.abis:
        assert f".entry {abi['kernel']}(" in k.ptx
        assert abi["family"] == k.name
    main = roles["main"]
    assert main["params"][:6] == ["q_map", "k_map", "v_map", "do_map", "dk_map", "dv_map"]
    assert main["param_kinds"]["scale"] == "f32" and main["block_n"] == 128
    assert roles["preprocess"]["param_kinds"]["o_stride_s"] == "i64"
    # dQ is accumulated with fp32 atomics; dS is read back transposed.
    assert "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32" in k.ptx
    # The cache keeps every ABI.
    monkeypatch_free = kvpipe.compile_attention(64, "bf16", True, backward=True)
    assert monkeypatch_free.cached and monkeypatch_free.abis == k.abis


def test_deterministic_backward_family_orders_dq(compiler, cache):
    plain = kvpipe.compile_attention(64, "bf16", True, backward=True)
    k = kvpipe.compile_attention(64, "bf16", True, backward=True, deterministic=True)
    assert k.name == "kvpipe_attention_bwd_d64_bf16_causal_deterministic"
    assert "deterministic = true" in k.config.declaration()
    roles = {abi["role"]: abi for abi in k.abis}
    plain_roles = {abi["role"]: abi for abi in plain.abis}
    for role in ("preprocess", "main"):
        # One more parameter, last, a pointer.
        assert roles[role]["params"] == plain_roles[role]["params"] + ["dq_semaphore"]
        assert roles[role]["param_kinds"]["dq_semaphore"] == "pointer"
        assert roles[role]["deterministic"] is True
        assert plain_roles[role]["deterministic"] is False
    assert roles["postprocess"]["params"] == plain_roles["postprocess"]["params"]
    # The turn is waited for with an acquire load and passed on with a
    # release add, at GPU scope; the plain family has neither.
    assert "ld.acquire.gpu" in k.ptx and "release.gpu" in k.ptx
    assert "ld.acquire.gpu" not in plain.ptx


@pytest.mark.parametrize("args,kwargs,error,match", [
    ((64, "bf16", False), {"deterministic": True}, ValueError,
     "deterministic=True applies to the backward kernels only"),
    ((64, "bf16", False), {"backward": True, "deterministic": 1}, TypeError,
     "deterministic must be a bool"),
    ((64, "bf16", False), {"backward": True, "pingpong": True}, ValueError,
     "tuning attributes \\(pingpong\\) are not supported with backward=True"),
    ((64, "bf16", False), {"backward": 1}, TypeError, "backward must be a bool"),
    ((256, "bf16", False), {"dq_atomics": True}, ValueError,
     "dq_atomics applies to backward=True at head dims above 128"),
    ((128, "bf16", False), {"backward": True, "dq_atomics": True}, ValueError,
     "got backward=True, head_dim=128"),
    ((192, "bf16", True), {"backward": True, "deterministic": True, "dq_atomics": True},
     ValueError, "not with deterministic=True"),
    ((256, "bf16", False), {"backward": True, "dq_atomics": 1}, ValueError,
     "tuning attribute dq_atomics must be a bool"),
    ((128, "bf16", False), {"backward": True, "exp2_emulation": 2}, ValueError,
     r"tuning attributes \(exp2_emulation\) are not supported with backward=True"),
    ((128, "bf16", False), {"shared_statistics": True}, ValueError,
     "shared_statistics applies to backward=True only"),
    ((128, "bf16", False), {"backward": True, "shared_statistics": 1}, ValueError,
     "tuning attribute shared_statistics must be a bool"),
])
def test_backward_configuration_errors(args, kwargs, error, match, cache):
    with pytest.raises(error, match=match):
        kvpipe.compile_attention(*args, **kwargs)


def test_dq_atomics_backward_reduces_dq_from_registers(compiler, cache):
    # The tuning attribute of the backward above head dim 128, on by default:
    # the same ABI, dQ added by vector reductions from registers instead of
    # staged bulk reductions; the staging tiles' 32 KiB at 256 hold a second
    # dO slot instead (the same shared memory, but for the second dO slot's
    # 256-byte delta row).
    staged = kvpipe.compile_attention(256, "bf16", True, backward=True, dq_atomics=False)
    k = kvpipe.compile_attention(256, "bf16", True, backward=True)
    assert k.name == "kvpipe_attention_bwd_d256_bf16_causal"
    assert staged.name == "kvpipe_attention_bwd_d256_bf16_causal_dq_atomics0"
    assert "dq_atomics = false" in staged.config.declaration()
    assert [abi["params"] for abi in k.abis] == [abi["params"] for abi in staged.abis]
    main, staged_main = (next(abi for abi in x.abis if abi["role"] == "main")
                         for x in (k, staged))
    assert staged_main["dynamic_shared_memory"] + 256 == main["dynamic_shared_memory"] == 231424
    assert "red.global.add.v4.f32" in k.ptx and "red.global.add.v4.f32" not in staged.ptx
    main_ptx = k.ptx[k.ptx.index(f".entry {main['kernel']}("):]
    main_ptx = main_ptx[:main_ptx.find(".entry", 1) if ".entry" in main_ptx[1:] else None]
    assert "cp.reduce.async.bulk" not in main_ptx
