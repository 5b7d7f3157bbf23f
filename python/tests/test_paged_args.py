"""The paged K/V cache: flash_attn_with_kvcache's block_table checks, raised
before any launch, kernels.py's page_size, and the paged kernel's arguments
(CPU-only: tensor-like fakes stand in for torch)."""

import pytest

import kvpipe
from fakes import FakeTensor
from kvpipe import cuda, flash_attn, kernels, launch, paged, tma


def q(b=2, s=1, h=8, d=128, **kw):
    return FakeTensor((b, s, h, d), **kw)


def paged_cache(pages=10, page=16, h=2, d=128, dv=None, **kw):
    return (FakeTensor((pages, page, h, d), **kw),
            FakeTensor((pages, page, h, dv if dv is not None else d), **kw))


def table(b=2, n=4, **kw):
    return FakeTensor((b, n), dtype=kw.pop("dtype", "int32"), **kw)


def call(**overrides):
    k_cache, v_cache = paged_cache()
    args = dict(q=q(), k_cache=k_cache, v_cache=v_cache, block_table=table())
    args.update(overrides)
    return flash_attn.flash_attn_with_kvcache(**args)


@pytest.mark.parametrize("overrides,error,match", [
    # block_table: dtype, rank, batch, device, width.
    ({"block_table": table(dtype="float32")}, TypeError, "block_table must have dtype i32"),
    ({"block_table": FakeTensor((2, 4), dtype="uint8")}, TypeError, "block_table"),
    ({"block_table": FakeTensor((2,), dtype="int32")}, ValueError, "block_table.*rank 2"),
    ({"block_table": table(b=3)}, ValueError,
     "block_table must have shape \\(batch, max_num_blocks_per_seq\\) with batch = 2"),
    ({"block_table": table(device="cpu")}, ValueError, "block_table must be on a cuda device"),
    ({"block_table": table(n=0)}, ValueError, "block_table must have at least one page"),
    ({"block_table": [[0, 1], [2, 3]]}, TypeError, "block_table must be a tensor"),
    # The page size of the cache.
    ({"k_cache": FakeTensor((10, 8, 2, 128)), "v_cache": FakeTensor((10, 8, 2, 128))},
     ValueError, "k_cache's page size .* must be one of \\(16, 32, 64, 128, 256\\), got 8"),
    ({"k_cache": FakeTensor((10, 48, 2, 128)), "v_cache": FakeTensor((10, 48, 2, 128))},
     ValueError, "got 48"),
    # k_cache / v_cache consistency.
    ({"v_cache": FakeTensor((10, 32, 2, 128))}, ValueError,
     "v_cache must have k_cache's pages, page size and heads"),
    ({"v_cache": FakeTensor((9, 16, 2, 128))}, ValueError, "v_cache must have"),
    ({"v_cache": FakeTensor((10, 16, 2, 128), dtype="float16")}, ValueError,
     "v_cache must have k_cache's dtype"),
    ({"k_cache": FakeTensor((10, 16, 2)), "v_cache": FakeTensor((10, 16, 2))}, ValueError,
     "k_cache.*rank 4"),
    # The table's rows must hold the longest sequence (+ the appended keys).
    ({"cache_seqlens": 65}, ValueError,
     "block_table's rows hold 4 pages of 16 keys \\(64\\), fewer than cache_seqlens \\+ "
     "seqlen_new = 65"),
    ({"cache_seqlens": 63, "k": FakeTensor((2, 2, 2, 128)), "v": FakeTensor((2, 2, 2, 128))},
     ValueError, "fewer than cache_seqlens \\+ seqlen_new = 65"),
    ({"cache_seqlens": -1}, ValueError, "cache_seqlens must be non-negative"),
    ({"cache_seqlens": FakeTensor((2,), dtype="int64")}, TypeError, "cache_seqlens"),
    ({"cache_seqlens": FakeTensor((3,), dtype="int32")}, ValueError,
     "cache_seqlens must be an int32 tensor of shape \\(2,\\)"),
    ({"cache_seqlens": 2.5}, TypeError, "cache_seqlens must be None, an int or an int32 tensor"),
    # Appends.
    ({"k": FakeTensor((2, 1, 2, 128))}, ValueError, "k and v must be given together"),
    ({"k": FakeTensor((2, 1, 2, 128)), "v": FakeTensor((2, 1, 2, 128))}, ValueError,
     "cache_seqlens is required with k and v"),
    ({"k": FakeTensor((2, 1, 3, 128)), "v": FakeTensor((2, 1, 3, 128)), "cache_seqlens": 5},
     ValueError, "k must be \\(batch, seqlen_new, nheads_k, headdim\\) = \\(2, 1, 2, 128\\)"),
    ({"k": FakeTensor((2, 1, 2, 128)), "v": FakeTensor((2, 2, 2, 128)), "cache_seqlens": 5},
     ValueError, "v must be"),
    # What stays unsupported with a block table too.
    ({"cache_batch_idx": FakeTensor((2,), dtype="int32")}, NotImplementedError,
     "cache_batch_idx"),
    ({"window_size": 3}, TypeError, "window_size"),
])
def test_paged_kvcache_argument_errors(overrides, error, match):
    with pytest.raises(error, match=match):
        call(**overrides)


def test_paged_kvcache_q_is_checked_against_the_cache():
    # Past flash_attn's checks, paged_attention's: these need torch only
    # after the checks, so they raise here.
    k_cache, v_cache = paged_cache()
    with pytest.raises(ValueError, match="must be a multiple of k_cache's heads"):
        paged.paged_attention(q(h=3), k_cache, v_cache, table(), FakeTensor((2,), dtype="int32"))
    with pytest.raises(ValueError, match="k_cache's head dim must equal q's \\(64\\)"):
        paged.paged_attention(q(d=64), k_cache, v_cache, table(),
                              FakeTensor((2,), dtype="int32"))
    with pytest.raises(TypeError, match="same dtype, got torch.float16 and torch.bfloat16"):
        paged.paged_attention(q(dtype="float16"), k_cache, v_cache, table(),
                              FakeTensor((2,), dtype="int32"))
    with pytest.raises(ValueError, match="kv_lengths must have shape \\(2,\\)"):
        paged.paged_attention(q(), k_cache, v_cache, table(), FakeTensor((4,), dtype="int32"))
    with pytest.raises(TypeError, match="kv_lengths must have dtype i32"):
        paged.paged_attention(q(), k_cache, v_cache, table(),
                              FakeTensor((2,), dtype="float32"))
    with pytest.raises(ValueError, match="block_table must have shape"):
        paged.paged_attention(q(b=3), k_cache, v_cache, table(), FakeTensor((3,), dtype="int32"))
    # Attention sinks: one float logit per query head.
    with pytest.raises(ValueError, match="sinks must have shape \\(H_q,\\) = \\(4,\\)"):
        paged.paged_attention(q(h=4), k_cache, v_cache, table(),
                              FakeTensor((2,), dtype="int32"),
                              sinks=FakeTensor((2,), dtype="float32"))
    with pytest.raises(TypeError, match="sinks must have dtype"):
        paged.paged_attention(q(h=4), k_cache, v_cache, table(),
                              FakeTensor((2,), dtype="int32"),
                              sinks=FakeTensor((4,), dtype="int32"))


def test_page_size_in_the_kernel_configuration():
    config = kernels.AttentionConfig.make(128, "bf16", True, kv_lengths=True, page_size=16,
                                          mask_alignment="bottom_right")
    assert config.kernel_name.endswith("_kvlengths_page16")
    assert "page_size = 16 : i64" in config.declaration()
    assert "kv_lengths = true" in config.declaration()
    plain = kernels.AttentionConfig.make(128, "bf16", True, kv_lengths=True)
    assert "page" not in plain.kernel_name and "page_size" not in plain.declaration()
    with pytest.raises(ValueError, match="page_size must be one of"):
        kernels.AttentionConfig.make(128, "bf16", True, kv_lengths=True, page_size=24)
    with pytest.raises(ValueError, match="page_size needs kv_lengths=True or varlen=True"):
        kernels.AttentionConfig.make(128, "bf16", True, page_size=64)
    with pytest.raises(TypeError, match="page_size must be an int"):
        kernels.AttentionConfig.make(128, "bf16", True, kv_lengths=True, page_size="16")


@pytest.mark.parametrize("page,d,block_n,box_rows", [
    (16, 128, 128, 16), (256, 128, 128, 128), (32, 96, 96, 32), (128, 256, 64, 64)])
def test_paged_kernel_arguments(compiler, tmp_path, monkeypatch, page, d, block_n, box_rows):
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    abi = kvpipe.compile_attention(d, "bf16", True, mask_alignment="bottom_right",
                                   kv_lengths=True, page_size=page).abi
    assert abi["page_size"] == page and abi["block_n"] == block_n
    assert abi["params"][-3:] == ["kv_lengths", "block_table", "max_pages_per_seq"]
    assert abi["param_kinds"]["block_table"] == "pointer"
    assert abi["param_kinds"]["max_pages_per_seq"] == "i32"
    width = 32 if d == 96 else 64
    assert abi["k_map"]["box"] == [1, 1, box_rows, width]
    encoded = []

    def fake_encode(t, box, swizzle, dims_order=None, **kwargs):
        encoded.append((t.data_ptr(), tuple(t.shape), tuple(box), dims_order))
        return bytes(128)

    monkeypatch.setattr(tma, "encode_from_tensor", fake_encode)
    monkeypatch.setattr(launch, "_maps", type(launch._maps)())
    query = q(b=3, s=4, h=8, d=d, ptr=0x100000)
    k_cache = FakeTensor((50, page, 2, d), ptr=0x200000)
    v_cache = FakeTensor((50, page, 2, d), ptr=0x300000)
    out = q(b=3, s=4, h=8, d=d, ptr=0x400000)
    block_table = table(b=3, n=7, ptr=0x500000)
    lengths = FakeTensor((3,), dtype="int32", ptr=0x600000)
    values = paged.kernel_values(query, k_cache, v_cache, out, 0, block_table, lengths,
                                 0.125, (-1, 0), "bshd")
    args = launch.kernel_arguments(abi, values)
    by_name = dict(zip(abi["params"], args))
    # The K/V maps describe the whole cache as (page, head, row, dim): bshd.
    assert encoded[1] == (0x200000, (50, page, 2, d), (1, 1, box_rows, width), (0, 2, 1, 3))
    assert encoded[2][0] == 0x300000
    assert isinstance(by_name["block_table"], cuda.PtrArg)
    assert bytes(by_name["block_table"]) == (0x500000).to_bytes(8, "little")
    assert bytes(by_name["kv_lengths"]) == (0x600000).to_bytes(8, "little")
    assert bytes(by_name["max_pages_per_seq"]) == (7).to_bytes(4, "little")
    # seq_kv is the capacity of a row of the table, which clamps the lengths.
    assert bytes(by_name["seq_kv"]) == (7 * page).to_bytes(4, "little")
    assert bytes(by_name["seq_q"]) == (4).to_bytes(4, "little")
    assert bytes(by_name["batch"]) == (3).to_bytes(4, "little")
    assert bytes(by_name["heads_per_kv_head"]) == (4).to_bytes(4, "little")


def test_the_paged_check_compiles_what_it_launches():
    from kvpipe import check_paged

    cases = check_paged.paged_grid()
    configs = check_paged.kernel_configs(cases)
    assert {c["page_size"] for c in configs} == set(kernels.PAGE_SIZES)
    assert all(c["kv_lengths"] for c in configs)
    # Every case's kernel is among them (no mask: the top-left kernel).
    for case in cases:
        assert any(c["page_size"] == case.page_size and c["head_dim"] == case.head_dim
                   and c["causal"] == case.causal for c in configs)
    # The grid covers what issue 14 asks of it.
    assert {c.seq_q for c in cases} >= {1, 4, 16, 300}
    assert any(1 in c.lengths for c in cases) and max(max(c.lengths) for c in cases) >= 20000
    assert any(c.append for c in cases) and any(c.window != (-1, -1) for c in cases)
    assert {c.alignment for c in cases if c.causal} == {"top_left", "bottom_right"}
    assert any(c.heads_kv == 1 for c in cases) and any(1 < c.heads_kv < c.heads_q
                                                       for c in cases)
    assert {c.head_dim for c in cases} >= {64, 128}
    # Attention sinks in decode (split-KV chosen) and with a window.
    assert any(c.sinks and c.seq_q == 1 and c.num_splits == 0 for c in cases)
    assert any(c.sinks and c.window != (-1, -1) for c in cases)


def test_compile_paged_goes_with_for_check(capsys):
    from kvpipe.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(["compile", "--paged"])
    assert exit_info.value.code == 2
    assert "compile --paged goes with --for-check" in capsys.readouterr().err


def test_bench_paged_compiles_its_kernels_with_the_check():
    from kvpipe import bench_paged, check_paged

    bench = bench_paged.kernel_configs()
    assert {c.get("page_size", 0) for c in bench} == {0, *bench_paged.PAGE_SIZES}
    # The plain paged ones are among the check's (the contiguous one is the
    # kv_lengths kernel of `compile --for-check`); the decode-plan ones pack
    # the 32/8 heads, and split 8 x 32k over the H200's SMs.
    check = check_paged.kernel_configs()
    plain = [c for c in bench if c.get("page_size") and not c.get("pack_gqa")]
    assert plain and all(c in check for c in plain)
    plans = [c for c in bench if c.get("pack_gqa")]
    assert {c["pack_gqa"] for c in plans} == {4}
    assert any(c["split_kv"] for c in plans) and not all(c["split_kv"] for c in plans)
    assert {c.get("page_size", 0) for c in plans} == {0, *bench_paged.PAGE_SIZES}
    # The check runs paged decode kernels too, split and packed.
    assert any(c.get("split_kv") and c.get("page_size") for c in check)
