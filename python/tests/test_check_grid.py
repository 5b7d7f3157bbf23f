"""The check's grid and the kernels it needs, on the CPU: what
`compile --for-check` fills the cache with must be what `check` launches."""

from kvpipe import check


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
