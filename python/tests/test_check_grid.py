"""The check's grid and the kernels it needs, on the CPU: what
`compile --for-check` fills the cache with must be what `check` launches."""

from kvpipe import check, kernels


def case(**kw):
    base = dict(dtype="bf16", head_dim=128, causal=True, batch=1, heads_q=2, heads_kv=2,
                seq_q=100, seq_kv=300)
    base.update(kw)
    return check.Case(**base)


def test_kernel_configs_follow_attention_impls_choice():
    configs = check.kernel_configs([
        case(alignment="bottom_right"),                       # bottom-right causal
        case(alignment="bottom_right", seq_q=1),              # decode: the plain kernel
        case(causal=False, alignment="bottom_right"),         # no mask: top-left kernel
        case(causal=False, window=(64, 3)),                   # a window
        case(causal=True, window=(-1, 7)),                    # causal alone: no window
    ], with_kvcache=False)
    assert [(c["causal"], c["mask_alignment"], c["sliding_window"]) for c in configs] == [
        (True, "bottom_right", False),
        (False, "top_left", False),    # the decode case and the unmasked one: one kernel
        (False, "top_left", True),
        (True, "top_left", False),
    ]
    assert all(c["kv_lengths"] is False for c in configs)


def test_kernel_configs_include_the_kv_cache_kernels():
    configs = check.kernel_configs([], with_kvcache=True)
    assert configs and all(c["kv_lengths"] for c in configs)


def test_the_grid_covers_masks_and_head_dims():
    grid = check.default_grid()
    assert any(c.alignment == "bottom_right" and c.seq_q > c.seq_kv for c in grid)
    assert any(c.window[0] >= 0 and c.window[1] >= 0 for c in grid)
    assert {c.head_dim for c in grid} >= {64, 96, 128, 192, 256}
    assert any(c.value_head_dim == 128 and c.head_dim == 192 for c in grid)


def test_random_grid_is_reproducible_and_draws_masks():
    a, b = check.random_grid(60, 3), check.random_grid(60, 3)
    assert a == b
    assert any(c.alignment == "bottom_right" for c in a)
    assert any(c.window != (-1, -1) for c in a)


def test_prefill_plan_picks_persistent_kernels_for_short_causal_sequences():
    from kvpipe.plans import prefill_plan

    def plan(d, causal=True, sq=1024, skv=None, alignment="top_left", window=False,
             lengths=False, mods=False, dv=None, tuning=None):
        return prefill_plan(d, dv or d, causal, alignment, window, lengths, mods, sq,
                            skv or sq, dict(tuning or {}))

    levers = {"tensor_row_sums": True, "mask_bits": True, "late_pv_retire": True}
    mask_levers = {"mask_bits": True, "late_pv_retire": True}
    # The persistent kernels take Q's ring of two slots where it fits (at
    # head dim 128 instead of the row sums' ones).
    ring = {"persistent": True, "q_stages": 2}
    assert plan(64) == {"consumer_warpgroups": 2, **ring, **levers}
    assert plan(64, sq=4096) == {**ring, **levers}
    # Past 4k persistent again, the tiles in the host's balanced table.
    table = {**ring, "tile_table": True, **mask_levers}
    assert plan(64, sq=4097) == table == plan(64, sq=100, skv=16384)
    assert plan(128, sq=2048) == {**ring, **mask_levers}
    long_tiles = {"consumer_warpgroups": 3, "block_n": 80, **levers}
    assert plan(128, sq=4097) == long_tiles and plan(128, sq=100, skv=16384) == long_tiles
    assert plan(128, causal=False) == {**ring, **mask_levers}
    assert plan(128, causal=False, sq=1025) == long_tiles
    assert plan(128, causal=False, sq=100, skv=8192) == long_tiles
    # Non-causal at head dim 64: persistent with Q's ring at every length, up
    # to 4k the last Q block's idle warpgroups skipped, past it the row sums.
    skip = {**ring, "skip_idle_warpgroups": True, **mask_levers}
    assert plan(64, causal=False) == skip == plan(64, causal=False, sq=4096)
    assert plan(64, causal=False, sq=4097) == {**ring, **levers}
    assert plan(64, causal=False, sq=100, skv=16384) == {**ring, **levers}
    assert plan(96, causal=False) == {**ring, **mask_levers}
    assert plan(96, causal=False, sq=1025) == {}
    # Only the plain kernels, the windows and the modifiers: what the caller
    # chose, the other masks, KV lengths and other head dims keep their
    # defaults.
    assert plan(64, tuning={"block_n": 64}) == {"block_n": 64}
    for kwargs in ({"causal": False}, {"lengths": True}, {"window": True, "lengths": True},
                   {"window": True, "tuning": {"block_n": 64}}):
        if kwargs != {"causal": False}:
            assert plan(64, sq=4100, **kwargs) == kwargs.get("tuning", {}), kwargs
    # Bottom-right causal (fewer queries than keys): the chunked-prefill
    # plan, by the keys' length.
    bottom = {"alignment": "bottom_right"}
    assert plan(64, sq=2048, skv=8192, **bottom) == table
    assert plan(64, sq=1000, skv=4096, **bottom) == {}
    assert plan(128, sq=2048, skv=16384, **bottom) == mask_levers == plan(128, sq=5, skv=99,
                                                                         **bottom)
    assert plan(96, sq=2048, skv=8192, **bottom) == {}
    # Modifiers: the softmax levers, the separable bias, its key term on the
    # tensor cores and the K/V loop from its origin at head dims 64 and 128,
    # and at 128 the plain kernels' 192 x 80 tiles and the static
    # row maximum, with any mask, window and length; not with KV lengths,
    # nor over the caller's tuning.
    # Causal top-left without a window at head dim 128 adds a persistent grid
    # over the host's tile table (plans.MODIFIER_CAUSAL_PLAN).
    separable = {"separable_bias": True, "separable_bias_mma": True, "bias_origin_first": True}
    table_grid = {"persistent": True, "tile_table": True}
    for kwargs in ({}, {"causal": False}, {"alignment": "bottom_right"}, {"window": True},
                   {"sq": 16384}, {"sq": 100, "skv": 9000}):
        causal_top_left = (kwargs.get("causal", True) and "alignment" not in kwargs
                           and "window" not in kwargs)
        assert plan(128, mods=True, **kwargs) == {**long_tiles, **separable,
                                                   "static_row_max": True,
                                                   **(table_grid if causal_top_left else {})}, kwargs
        assert plan(64, mods=True, **kwargs) == {**levers, **separable}, kwargs
    assert plan(128, mods=True, lengths=True) == {}
    assert plan(128, mods=True, tuning={"block_n": 64}) == {"block_n": 64}
    # At 96, 192 and 256: the mask levers, the separable bias from its
    # origin and the static row maximum (the bias's k-step at 96 only), with
    # any mask; V's head dim other than Q's keeps the defaults.
    other = {**mask_levers, "separable_bias": True, "bias_origin_first": True,
             "static_row_max": True}
    for kwargs in ({}, {"causal": False}, {"window": True}, {"sq": 16384}):
        assert plan(96, mods=True, **kwargs) == {**other, "separable_bias_mma": True}, kwargs
        assert plan(192, mods=True, **kwargs) == other == plan(256, mods=True, **kwargs)
    assert plan(192, mods=True, dv=128) == {}
    # Sliding windows: the softmax levers at head dims 64 and 128, the mask
    # levers at 96, 192 and 256, at any length and alignment, causal or not.
    for d in (64, 128, 96, 192, 256):
        for kwargs in ({}, {"causal": False}, {"alignment": "bottom_right"}, {"sq": 16384}):
            assert plan(d, window=True, **kwargs) == (
                levers if d in (64, 128) else mask_levers), (d, kwargs)
    assert plan(192, window=True, dv=128) == {}
    assert plan(96) == {"consumer_warpgroups": 2, **ring, **mask_levers}
    assert plan(96, sq=2048) == {} and plan(256) == {} and plan(192, dv=128) == {}
    assert plan(192) == {"persistent": True, "block_n": 64}
    assert plan(192, sq=2048) == {"persistent": True, "block_n": 80, **mask_levers}
    assert plan(192, causal=False) == {"persistent": True, "block_n": 80, **mask_levers}
    assert plan(192, sq=2049) == mask_levers == plan(192, causal=False, sq=1025)


def test_varlen_plan_takes_the_measured_levers_for_plain_launches():
    from kvpipe import check_varlen
    from kvpipe.plans import varlen_plan

    long_tiles = {"consumer_warpgroups": 3, "block_n": 80, "tensor_row_sums": True,
                  "mask_bits": True, "late_pv_retire": True}
    assert varlen_plan(128, 128, True, False, False, {}) == long_tiles
    assert varlen_plan(128, 128, False, False, False, {}) == long_tiles
    assert varlen_plan(64, 64, True, False, False, {}) == {"mask_bits": True,
                                                            "late_pv_retire": True}
    assert varlen_plan(64, 64, False, False, False, {}) == {}
    # The caller's tuning, windows, modifiers and other head dims keep theirs.
    assert varlen_plan(128, 128, True, False, False, {"block_n": 64}) == {"block_n": 64}
    assert varlen_plan(128, 128, True, True, False, {}) == {}
    assert varlen_plan(128, 128, True, False, True, {}) == {}
    assert varlen_plan(192, 128, True, False, False, {}) == {}
    # compile --for-check --varlen compiles the planned kernels.
    configs = check_varlen.kernel_configs()
    assert any(c.get("varlen") and c.get("block_n") == 80 and c["head_dim"] == 128
               for c in configs)


def test_for_check_kernels_follow_the_prefill_plan(monkeypatch):
    configs = check.kernel_configs(with_kvcache=False)
    plain = [c for c in configs if c["causal"] and c["mask_alignment"] == "top_left"
             and not c["sliding_window"] and c["head_dim"] in (64, 128)]
    assert {"consumer_warpgroups": 2, "persistent": True}.items() <= next(
        c for c in plain if c["head_dim"] == 64 and "consumer_warpgroups" in c).items()
    # D 64's persistent kernel on the host's tile table and D 128's
    # long-sequence one are in the grid, through its long cases.
    assert any(c.get("tile_table") for c in plain if c["head_dim"] == 64)
    for causal in (False, True):
        assert any(c.get("consumer_warpgroups") == 3 and c.get("block_n") == 80
                   for c in configs if c["causal"] == causal and c["head_dim"] == 128
                   and c["mask_alignment"] == "top_left" and not c["sliding_window"])
    full = [c for c in configs if not c["causal"] and not c["sliding_window"]
            and c["head_dim"] == 128 and c["value_head_dim"] is None]
    for dtype in ("bf16", "f16"):  # the plan's two non-causal kernels
        assert {c.get("persistent", False) for c in full if c["dtype"] == dtype} == {True, False}
        assert any(c.get("block_n") == 80 for c in full if c["dtype"] == dtype)
    # Tuning given to check replaces the plan, on the cases whose head dims it
    # fits (check.run skips the others: compile --for-check must not fail on
    # them).
    monkeypatch.setattr(check, "_compiles", lambda case, tuning: case.head_dim != 192)
    tuned = check.kernel_configs(with_kvcache=False, tuning={"block_n": 64})
    assert all(c.get("block_n") == 64 and "persistent" not in c for c in tuned
               if c["head_dim"] in (64, 128))
    assert {c["head_dim"] for c in tuned} == {c["head_dim"] for c in configs} - {192}


def test_backward_kernel_configs_hold_the_forward_kernels_the_grid_launches():
    # The backward check runs kvpipe.attention first: for a short causal
    # case that is the prefill plan's kernel, which a cache filled for
    # check --backward alone must hold.
    from kvpipe.plans import prefill_plan

    configs = check.backward_kernel_configs()
    for case in check.backward_grid():
        # Zero-padded head dims (80) launch the kernels of the pair they run as (96).
        dims = case.kernel_dims()
        assert kernels.HEAD_DIMS.count(dims["head_dim"]) == 1
        planned = prefill_plan(dims["head_dim"], dims.get("value_head_dim", dims["head_dim"]),
                               case.causal, "top_left", False, False, False, case.seq_q,
                               case.seq_kv, {})
        assert dict(**dims, dtype=case.dtype, causal=case.causal, **planned) in configs, case
        assert dict(**dims, dtype=case.dtype, causal=case.causal,
                    backward=True) in configs, case
    assert any(case.head_dim == 80 for case in check.backward_grid())
    assert any(c.get("persistent") and c["head_dim"] == 96 and c["dtype"] == "f16"
               for c in configs)
    # check --backward runs its staged-dQ cases with dq_atomics=False (the
    # default above 128 reduces dQ from registers) and some with the
    # statistics read from global memory (shared_statistics=False).
    assert all(case.head_dim > 128 for case in check.staged_dq_cases())
    tuned = check.tuned_backward_cases()
    assert {name for _, tuning in tuned for name in tuning} == set(kernels.BACKWARD_TUNING)
    assert {case.head_dim for case, tuning in tuned if "shared_statistics" in tuning} >= {
        64, 128, 256}
    for case, tuning in tuned:
        dims = dict(head_dim=case.head_dim)
        if case.value_head_dim is not None:
            dims["value_head_dim"] = case.value_head_dim
        assert dict(**dims, dtype=case.dtype, causal=case.causal, backward=True,
                    **tuning) in configs, (case, tuning)


def test_check_tune_compiles_padded_head_dims_as_their_kernels(monkeypatch):
    # check --tune on the grid's zero-padded cases (head dim 80 runs as 96):
    # the tuning is tried on the kernel the case launches, not on 80 (which
    # has none, and raised "head_dim must be one of ..." on the GPU).
    import kvpipe

    asked = []
    monkeypatch.setattr(kvpipe, "compile_attention",
                        lambda *args, **kwargs: asked.append((args, kwargs)))
    monkeypatch.setattr(check, "_compiles_cache", {})
    padded = next(case for case in check.default_grid() if case.head_dim == 80)
    assert check._compiles(padded, {"exp2_emulation": 4})
    (head_dim, _, _), kwargs = asked[0]
    assert head_dim == padded.kernel_dims()["head_dim"] == 96
    assert kwargs["exp2_emulation"] == 4


def test_on_plan_adds_the_tuning_to_the_plans_choice(monkeypatch):
    # check --tune NAME=VALUE --on-plan: the case's prefill-plan tuning plus
    # the lever (without --on-plan the tuning replaces the plan).
    monkeypatch.setattr(check, "_compiles", lambda case, tuning: True)
    short = next(c for c in check.default_grid() if c.head_dim == 64 and c.causal
                 and c.alignment == "top_left" and c.window == (-1, -1) and c.seq_q == c.seq_kv
                 and c.seq_q <= 2048)
    lever = {"skip_idle_warpgroups": True}
    assert check.case_tuning(short, lever, on_plan=True) == {
        "consumer_warpgroups": 2, "persistent": True, "q_stages": 2, "tensor_row_sums": True,
        "mask_bits": True, "late_pv_retire": True, **lever}
    assert check.case_tuning(short, lever) == lever
    configs = check.kernel_configs(with_kvcache=False, tuning=lever, on_plan=True)
    assert all(c["skip_idle_warpgroups"] for c in configs)
    assert any(c.get("persistent") for c in configs)


def test_backward_table_takes_rows_checked_through_autograd_alone():
    # check --mods --backward's attention sink rows have no second column
    # (kvpipe.sinks: through autograd only) and more errors than dQ, dK, dV.
    from kvpipe import check

    rows = [{"case": "c1", "ok": True, "errors": {"dq": 1e-3, "dq_autograd": 2e-3,
                                                  "dk": 1e-3, "dk_autograd": 4e-3,
                                                  "dv": 1e-3, "dv_autograd": 3e-3}},
            {"case": "sinks c2", "ok": False, "errors": {"out": 3e-3, "lse": 1e-3,
                                                        "dq": 2e-3, "dk": 2e-3, "dv": 2e-3,
                                                        "dsinks": 0.5}}]
    lines = check.backward_to_markdown(rows).splitlines()
    assert lines[2] == "| c1 | PASS | 1.00e-03 | 1.00e-03 | 1.00e-03 | 4.00e-03 |"
    assert lines[3] == ("| sinks c2 (out 3.00e-03, lse 1.00e-03, dsinks 5.00e-01) | FAIL | "
                        "2.00e-03 | 2.00e-03 | 2.00e-03 | - |")
    assert "1/2 backward configurations passed" in lines[-1]
