"""TMA descriptors (kvpipe.tma): validation, the conversion to the driver's
innermost-first order, what reaches cuTensorMapEncodeTiled, and -- on a GPU --
a real TMA copy through an encoded descriptor."""

import ctypes
import sys

import pytest

from kvpipe import cuda, tma

from needs import HAVE_BINDINGS, gpu, gpu_available, needs_bindings  # noqa: F401

# A (B, H, S, D) = (2, 16, 4096, 128) bf16 tensor, contiguous, and a 64 x 64 tile.
PTR = 0x7F00_0000_0000
DIMS = (2, 16, 4096, 128)
STRIDES = (16 * 4096 * 128 * 2, 4096 * 128 * 2, 128 * 2)
BOX = (1, 1, 64, 64)


def good(**overrides):
    """The arguments of a valid bf16 encoding, with some replaced."""
    args = dict(ptr=PTR, dtype="bf16", global_dims=DIMS, global_strides_bytes=STRIDES,
                box_dims=BOX, swizzle=128)
    args.update(overrides)
    return args


def test_tiled_args_are_innermost_first():
    args = tma.tiled_args(**good())
    assert args.rank == 4 and args.address == PTR
    assert args.global_dims == (128, 4096, 16, 2)
    assert args.global_strides == (256, 4096 * 256, 16 * 4096 * 256)
    assert args.box_dims == (64, 64, 1, 1)
    assert args.elem_strides == (1, 1, 1, 1)
    assert args.data_type == "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"
    assert args.swizzle == "CU_TENSOR_MAP_SWIZZLE_128B"
    assert args.l2_promotion == "CU_TENSOR_MAP_L2_PROMOTION_L2_128B"
    assert args.oob_fill == "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"
    assert args.interleave == "CU_TENSOR_MAP_INTERLEAVE_NONE"


def test_tiled_args_options():
    # The innermost stride may be given when it is the element size.
    assert tma.tiled_args(**good(global_strides_bytes=STRIDES + (2,))).global_strides == \
        tma.tiled_args(**good()).global_strides
    args = tma.tiled_args(**good(elem_strides=(1, 2, 4, 8), l2_promotion="none",
                                 oob_fill="nan", swizzle=0, box_dims=(1, 1, 64, 256)))
    assert args.elem_strides == (8, 4, 2, 1)
    assert args.box_dims == (256, 64, 1, 1)
    assert args.l2_promotion == "CU_TENSOR_MAP_L2_PROMOTION_NONE"
    assert args.oob_fill == "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"
    assert args.swizzle == "CU_TENSOR_MAP_SWIZZLE_NONE"
    assert tma.tiled_args(**good(dtype="u8", box_dims=(1, 1, 64, 128))).data_type == \
        "CU_TENSOR_MAP_DATA_TYPE_UINT8"
    assert tma.tiled_args(**good(dtype="f32", box_dims=(1, 1, 64, 32))).data_type == \
        "CU_TENSOR_MAP_DATA_TYPE_FLOAT32"
    # Limits are inclusive where the driver's are.
    tma.tiled_args(**good(global_dims=(2, 16, 2**32, 128)))
    tma.tiled_args(ptr=PTR, dtype="f16", global_dims=(64,), global_strides_bytes=(),
                   box_dims=(64,), swizzle=128)


@pytest.mark.parametrize("overrides, match", [
    # rank 1..5
    (dict(global_dims=(), global_strides_bytes=(), box_dims=()),
     r"global_dims must have 1 to 5 dimensions, got 0"),
    (dict(global_dims=(1,) * 6, global_strides_bytes=(16,) * 5, box_dims=(1,) * 6),
     r"global_dims must have 1 to 5 dimensions, got 6"),
    # ptr 16-byte aligned
    (dict(ptr=PTR + 8), r"ptr must be 16-byte aligned, got 0x7f0000000008"),
    (dict(ptr=-16), r"ptr must be a device address"),
    # global strides: multiples of 16, below 2**40, one per outer dimension
    (dict(global_strides_bytes=(STRIDES[0], STRIDES[1], 200)),
     r"global_strides_bytes\[2\] must be a multiple of 16 bytes, got 200"),
    (dict(global_strides_bytes=(2**40, STRIDES[1], STRIDES[2])),
     r"global_strides_bytes\[0\] must be in \[0, 2\*\*40\), got 1099511627776"),
    (dict(global_strides_bytes=STRIDES[1:]),
     r"global_strides_bytes \(every dimension but the innermost\) must have 3 entries"),
    (dict(global_strides_bytes=STRIDES + (4,)),
     r"global_strides_bytes\[-1\] .* must be the element size 2 bytes.* got 4"),
    # global dims in [1, 2**32]
    (dict(global_dims=(2, 0, 4096, 128)), r"global_dims\[1\] must be in \[1, 4294967296\], got 0"),
    (dict(global_dims=(2, 16, 2**32 + 1, 128)), r"global_dims\[2\] must be in \[1, 4294967296\]"),
    # box dims in [1, 256], one per dimension
    (dict(box_dims=(1, 1, 0, 64)), r"box_dims\[2\] must be in \[1, 256\], got 0"),
    (dict(box_dims=(1, 1, 257, 64)), r"box_dims\[2\] must be in \[1, 256\], got 257"),
    (dict(box_dims=(1, 64, 64)), r"box_dims must have 4 entries \(one per dimension\), got 3"),
    # innermost box: a multiple of 16 bytes, within the swizzle span
    (dict(box_dims=(1, 1, 64, 4)),
     r"box_dims\[-1\] \* element size must be a multiple of 16 bytes, got 4 \* 2 = 8 bytes"),
    (dict(box_dims=(1, 1, 64, 128)),
     r"at most the swizzle span of 128 bytes \(swizzle=128\), got 128 \* 2 = 256 bytes"),
    (dict(box_dims=(1, 1, 64, 64), swizzle=64),
     r"at most the swizzle span of 64 bytes \(swizzle=64\), got 64 \* 2 = 128 bytes"),
    (dict(box_dims=(1, 1, 64, 32), swizzle=32),
     r"at most the swizzle span of 32 bytes \(swizzle=32\), got 32 \* 2 = 64 bytes"),
    (dict(swizzle=16), r"swizzle must be one of 0, 32, 64, 128, got 16"),
    # element strides in [1, 8]
    (dict(elem_strides=(1, 1, 9, 1)), r"elem_strides\[2\] must be in \[1, 8\], got 9"),
    (dict(elem_strides=(0, 1, 1, 1)), r"elem_strides\[0\] must be in \[1, 8\], got 0"),
    (dict(elem_strides=(1, 1)), r"elem_strides must have 4 entries"),
    # the enums
    (dict(l2_promotion="512B"), r"l2_promotion must be one of 'none', '64B', '128B', '256B'"),
    (dict(oob_fill="one"), r"oob_fill must be one of 'zero', 'nan', got 'one'"),
    (dict(oob_fill="nan", dtype="u8", box_dims=(1, 1, 64, 128)),
     r"oob_fill='nan' needs a floating-point dtype, got u8"),
    (dict(interleave="8B"), r"interleave must be one of 'none', '16B', '32B', got '8B'"),
    (dict(interleave="32B"), r"interleave='32B' needs swizzle=32, got swizzle=128"),
    (dict(interleave="16B", global_dims=(4096, 128), global_strides_bytes=(256,),
          box_dims=(64, 64)), r"interleave='16B' needs rank >= 3, got rank 2"),
])
def test_encode_tiled_rejects(overrides, match):
    with pytest.raises(ValueError, match=match):
        tma.encode_tiled(**good(**overrides))


@pytest.mark.parametrize("overrides, match", [
    (dict(dtype="complex64"), r"unsupported dtype 'complex64'"),
    (dict(global_dims=(2, 16, 4096.0, 128)), r"global_dims\[2\] must be an int, got float"),
    (dict(box_dims=(1, 1, "64", 64)), r"box_dims\[2\] must be an int, got str"),
])
def test_encode_tiled_rejects_types(overrides, match):
    with pytest.raises(TypeError, match=match):
        tma.encode_tiled(**good(**overrides))


def test_validation_needs_no_cuda_bindings(monkeypatch):
    monkeypatch.setattr(cuda, "_driver_module", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", None)
    with pytest.raises(ValueError, match="ptr must be 16-byte aligned"):
        tma.encode_tiled(**good(ptr=PTR + 4))
    with pytest.raises(RuntimeError, match="cuda-bindings is not installed"):
        tma.encode_tiled(**good())


# ---------------------------------------------------------------------------
# What reaches the driver


@pytest.fixture
def fake_encode(monkeypatch):
    """Replaces cuTensorMapEncodeTiled; records its arguments, answers 128 known bytes."""
    drv = cuda.driver()
    calls = []
    answer = (ctypes.c_uint8 * 128)(*range(100, 228))
    state = {"result": drv.CUresult.CUDA_SUCCESS}

    class FakeTensorMap:
        def getPtr(self):
            return ctypes.addressof(answer)

    def encode(*args):
        calls.append(args)
        return state["result"], FakeTensorMap()

    monkeypatch.setattr(drv, "cuTensorMapEncodeTiled", encode)
    monkeypatch.setattr(cuda, "_driver_initialised", True)  # no cuInit without a driver
    return calls, bytes(answer), state


@needs_bindings
def test_encode_tiled_calls_the_driver_innermost_first(fake_encode):
    calls, answer, _ = fake_encode
    drv = cuda.driver()
    assert tma.encode_tiled(**good()) == answer
    (dtype, rank, ptr, dims, strides, box, elems, interleave, swizzle, l2, oob), = calls
    assert dtype == drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    assert (rank, ptr) == (4, PTR)
    # cuda-bindings insists on its own integer wrappers (plain ints raise TypeError).
    assert all(isinstance(v, drv.cuuint64_t) for v in dims + strides)
    assert all(isinstance(v, drv.cuuint32_t) for v in box + elems)
    assert [int(v) for v in dims] == [128, 4096, 16, 2]
    assert [int(v) for v in strides] == [256, 4096 * 256, 16 * 4096 * 256]
    assert [int(v) for v in box] == [64, 64, 1, 1]
    assert [int(v) for v in elems] == [1, 1, 1, 1]
    assert interleave == drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE
    assert swizzle == drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B
    assert l2 == drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B
    assert oob == drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE


@needs_bindings
def test_encode_tiled_driver_refusal_is_a_cuda_error(fake_encode):
    _, _, state = fake_encode
    state["result"] = cuda.driver().CUresult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(cuda.CudaError, match="encoding a TMA descriptor with TiledArgs.*"
                                             "CUDA_ERROR_INVALID_VALUE") as info:
        tma.encode_tiled(**good())
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE"


@needs_bindings
def test_encode_tiled_reaches_the_real_driver():
    """Valid arguments pass cuda-bindings' own conversions and reach the driver.

    With a driver the encoding succeeds (it is host-side; the address need not
    be mapped); without one, the failure is a CudaError, not a TypeError from
    the bindings or a crash.
    """
    try:
        desc = tma.encode_tiled(**good())
    except cuda.CudaError as exc:
        if gpu_available():
            raise
        assert isinstance(exc, cuda.DriverNotFoundError) or exc.name.startswith("CUDA_ERROR")
    else:
        assert len(desc) == tma.TENSOR_MAP_BYTES and any(desc)


# ---------------------------------------------------------------------------
# encode_from_tensor, on fake tensors


class FakeDevice:
    type = "cuda"


class FakeDtype:
    def __str__(self):
        return "torch.bfloat16"


class FakeTensor:
    """A bf16 CUDA tensor-like object with the given shape and element strides."""

    def __init__(self, shape, strides, ptr=PTR):
        self.shape, self._strides, self._ptr = tuple(shape), tuple(strides), ptr
        self.dtype, self.device = FakeDtype(), FakeDevice()

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._ptr

    def element_size(self):
        return 2


@needs_bindings
def test_encode_from_tensor(fake_encode):
    calls, answer, _ = fake_encode
    # (B, S, H, D) = (2, 4096, 16, 128) contiguous, described as (B, H, S, D).
    t = FakeTensor((2, 4096, 16, 128), (4096 * 16 * 128, 16 * 128, 128, 1))
    assert tma.encode_from_tensor(t, (1, 1, 64, 64), 128, dims_order=(0, 2, 1, 3)) == answer
    dims, strides, box = calls[-1][3:6]
    assert [int(v) for v in dims] == [128, 4096, 16, 2]
    assert [int(v) for v in strides] == [16 * 128 * 2, 128 * 2, 4096 * 16 * 128 * 2]
    assert [int(v) for v in box] == [64, 64, 1, 1]


@needs_bindings
def test_encode_from_tensor_gives_extent_1_dims_a_valid_stride(fake_encode):
    calls, _, _ = fake_encode
    # torch may give extent-1 dimensions any stride; they are never stepped through.
    t = FakeTensor((1, 3, 8), (5, 8, 1))
    tma.encode_from_tensor(t, (1, 3, 8), 0, l2_promotion="none")
    assert [int(v) for v in calls[-1][4]] == [16, 48]  # innermost-first: H, then B


def test_encode_from_tensor_rejects():
    with pytest.raises(ValueError, match=r"t must have a contiguous innermost dimension "
                                         r"\(stride 1\) for TMA, got strides \(1, 4\)"):
        tma.encode_from_tensor(FakeTensor((4, 8), (1, 4)), (4, 8), 0)
    with pytest.raises(ValueError, match=r"dims_order must be a permutation of 0..1, got \(0, 0\)"):
        tma.encode_from_tensor(FakeTensor((4, 8), (8, 1)), (4, 8), 0, dims_order=(0, 0))
    with pytest.raises(ValueError, match=r"contiguous innermost dimension .* \(dims_order \(1, 0\)\)"):
        tma.encode_from_tensor(FakeTensor((4, 8), (8, 1)), (4, 8), 0, dims_order=(1, 0))
    with pytest.raises(ValueError, match=r"global_strides_bytes\[0\] must be a multiple of 16"):
        tma.encode_from_tensor(FakeTensor((4, 12), (12, 1)), (4, 8), 0)
    with pytest.raises(TypeError, match="t must be a tensor, got list"):
        tma.encode_from_tensor([1, 2], (4, 8), 0)


# ---------------------------------------------------------------------------
# On the GPU: a real TMA copy

# CTA (x, y) loads the 64 x 64 box at rows 64x.. of batch y of a 3-d tensor
# map (innermost-first coordinates {0, 64x, y}) into shared memory, then
# copies the shared bytes unchanged to out[y, 64x:64x+64, :]. Parameter 2 is S.
TMA_PTX = r"""
.version 8.0
.target sm_90a
.address_size 64

.visible .entry tma_tile3d(
    .param .align 64 .b8 tma_tile3d_param_0[128],
    .param .u64 tma_tile3d_param_1,
    .param .u32 tma_tile3d_param_2
)
.maxntid 128, 1, 1
{
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .reg .pred %p<4>;
    .shared .align 1024 .b8 tile[8192];
    .shared .align 8 .b64 bar;

    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ctaid.y;
    mov.u64 %rd1, tma_tile3d_param_0;
    cvta.param.u64 %rd1, %rd1;
    mov.u32 %r4, bar;
    mov.u32 %r5, tile;
    shl.b32 %r6, %r2, 6;
    setp.eq.u32 %p1, %r1, 0;
    @!%p1 bra SYNC;
    mbarrier.init.shared::cta.b64 [%r4], 1;
    fence.mbarrier_init.release.cluster;
SYNC:
    bar.sync 0;
    @!%p1 bra WAIT;
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r4], 8192;
    mov.u32 %r7, 0;
    cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r5], [%rd1, {%r7, %r6, %r3}], [%r4];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r4], 0;
    @!%p2 bra WAIT;
    ld.param.u64 %rd2, [tma_tile3d_param_1];
    cvta.to.global.u64 %rd2, %rd2;
    ld.param.u32 %r8, [tma_tile3d_param_2];
    mad.lo.u32 %r9, %r3, %r8, %r6;
    mul.wide.u32 %rd3, %r9, 128;
    add.u64 %rd2, %rd2, %rd3;
    shl.b32 %r10, %r1, 2;
LOOP:
    add.u32 %r11, %r5, %r10;
    ld.shared.u32 %r12, [%r11];
    cvt.u64.u32 %rd4, %r10;
    add.u64 %rd5, %rd2, %rd4;
    st.global.u32 [%rd5], %r12;
    add.u32 %r10, %r10, 512;
    setp.lt.u32 %p3, %r10, 8192;
    @%p3 bra LOOP;
    ret;
}
"""


@gpu
@pytest.mark.parametrize("swizzle", [0, 128])
def test_gpu_tma_copy_of_a_strided_view(swizzle):
    import torch

    batch, seq = 3, 256
    kernel = cuda.Module(TMA_PTX, name="tma_tile3d").function("tma_tile3d")
    torch.manual_seed(0)
    # A non-contiguous (B, S, 64) view: columns 32..95 of a (B, S, 128) tensor.
    x = torch.randn(batch, seq, 128, device="cuda", dtype=torch.bfloat16)[:, :, 32:96]
    out = torch.full((batch, seq, 64), float("nan"), device="cuda", dtype=torch.bfloat16)
    desc = tma.encode_from_tensor(x, (1, 64, 64), swizzle)
    assert kernel.param_sizes == (128, 8, 4) and kernel.max_threads_per_block == 128
    with pytest.raises(ValueError, match="launching kernel 'tma_tile3d': block=256 has 256 "
                                         "threads; at most 128"):  # its .maxntid
        kernel.launch(1, 256, [cuda.TensorMapArg(desc), cuda.PtrArg(out), cuda.I32Arg(seq)])
    kernel.launch((seq // 64, batch), 128,
                  [cuda.TensorMapArg(desc), cuda.PtrArg(out), cuda.I32Arg(seq)])
    cuda.synchronize()
    expected = x
    if swizzle == 128:
        # 128B swizzle: 16-byte chunk c of shared row r lands in chunk c ^ (r % 8).
        chunk = torch.arange(8, device="cuda")
        row = torch.arange(seq, device="cuda") % 8
        source = (chunk[None, :] ^ row[:, None])  # out chunk j holds x chunk j ^ (r % 8)
        expected = x.reshape(batch, seq, 8, 8).gather(
            2, source[None, :, :, None].expand(batch, seq, 8, 8)).reshape(batch, seq, 64)
    assert torch.equal(out, expected)
