"""The CUDA runtime (kvpipe.cuda) and the tensor checks (kvpipe._tensors).

Most tests run on CPU: argument packing is read back through ctypes, and the
driver entry points that need a GPU are replaced by fakes that record what
they were given. The tests marked ``gpu`` load and launch real kernels
(hand-written PTX) and run only where torch sees a GPU.
"""

import ctypes
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from fakes import FakeDevice, FakeDtype, FakeTensor  # noqa: F401

from kvpipe import cuda
from kvpipe._tensors import check_tensor, dtype_name, element_size

from needs import HAVE_BINDINGS, gpu, gpu_available, needs_bindings  # noqa: F401


# ---------------------------------------------------------------------------
# Kernel arguments


def _read_params(params_address: int, sizes) -> list:
    """The bytes each entry of a void*[] kernelParams array points to."""
    array = (ctypes.c_void_p * len(sizes)).from_address(params_address)
    return [ctypes.string_at(array[i], size) for i, size in enumerate(sizes)]


def test_pack_args_points_at_each_arguments_bytes():
    desc = bytes(range(128))
    args = [cuda.TensorMapArg(desc), cuda.PtrArg(0xDEAD_BEEF_0000), cuda.I32Arg(-7),
            cuda.I64Arg(-(2**40) - 3), cuda.F32Arg(1.5)]
    params = cuda.pack_args(args)
    assert len(params) == 5
    got = _read_params(ctypes.addressof(params), [128, 8, 4, 8, 4])
    assert got == [
        desc,
        struct.pack("<Q", 0xDEAD_BEEF_0000),
        struct.pack("<i", -7),
        struct.pack("<q", -(2**40) - 3),
        struct.pack("<f", 1.5),
    ]
    assert [bytes(a) for a in args] == got
    assert [a.size for a in args] == [128, 8, 4, 8, 4]


def test_tensor_map_arg_is_64_byte_aligned():
    for _ in range(8):  # different allocations, different raw alignments
        assert cuda.TensorMapArg(b"\x01" * 128).address % 64 == 0


def test_ptr_arg_takes_data_ptr():
    class HasDataPtr:
        def data_ptr(self):
            return 0x7F00_0000_1000

    assert bytes(cuda.PtrArg(HasDataPtr())) == struct.pack("<Q", 0x7F00_0000_1000)


@pytest.mark.parametrize("make, value, error, match", [
    (cuda.TensorMapArg, b"\0" * 64, ValueError, "128 bytes of a CUtensorMap, got 64"),
    (cuda.PtrArg, -1, ValueError, r"PtrArg must be in \[0, "),
    (cuda.PtrArg, 2**64, ValueError, "PtrArg must be in"),
    (cuda.I32Arg, 2**31, ValueError, r"I32Arg must be in \[-2147483648, 2147483647\]"),
    (cuda.I32Arg, 1.0, TypeError, "I32Arg must be an int, got float"),
    (cuda.I32Arg, True, TypeError, "I32Arg must be an int, got bool"),
    (cuda.I64Arg, 2**63, ValueError, "I64Arg must be in"),
    (cuda.F32Arg, "1.0", TypeError, "F32Arg must be a float, got str"),
])
def test_bad_argument_values(make, value, error, match):
    with pytest.raises(error, match=match):
        make(value)


def test_pack_args_rejects_untyped_values():
    with pytest.raises(TypeError, match=r"args\[1\] must be a kernel argument .* got int"):
        cuda.pack_args([cuda.I32Arg(1), 5])


def test_arg_layout_packs_each_argument_where_its_pointer_points():
    layout = cuda.ArgLayout(["i32", "tensor_map", "pointer", "i32", "i64", "f32", "tensor_map"])
    # Natural alignment, tensor maps on 64 bytes: the PTX parameter space's.
    assert layout.offsets == (0, 64, 192, 200, 208, 216, 256)
    assert layout.tensor_maps == (1, 6) and layout.pointers == (2,)
    first, second = bytes(range(128)), bytes(range(128, 256))
    values = [-7, first, 0xDEAD_BEEF_0000, 2**31 - 1, -(2**40) - 3, 1.5, second]
    packed = layout.pack(values)
    assert packed.address % 8 == 0
    reference = [cuda.I32Arg(-7), cuda.TensorMapArg(first), cuda.PtrArg(0xDEAD_BEEF_0000),
                 cuda.I32Arg(2**31 - 1), cuda.I64Arg(-(2**40) - 3), cuda.F32Arg(1.5),
                 cuda.TensorMapArg(second)]
    assert _read_params(packed.address, layout.sizes) == [bytes(a) for a in reference]
    pointers = (ctypes.c_void_p * len(values)).from_address(packed.address)
    assert pointers[1] % 64 == 0 and pointers[6] % 64 == 0  # (as alignas(64) CUtensorMap)
    # Item i is argument i as its KernelArg (for inspection).
    assert [type(a) for a in packed] == [type(a) for a in reference]
    assert [bytes(a) for a in packed] == [bytes(a) for a in reference]
    # Each pack has its own buffer: an earlier one is not overwritten.
    later = layout.pack([1, second, 2, 3, 4, 5.0, first])
    assert _read_params(packed.address, layout.sizes) == [bytes(a) for a in reference]
    assert bytes(later[1]) == second


@pytest.mark.parametrize("kind, value, error, match", [
    ("pointer", -1, ValueError, r"PtrArg must be in \[0, "),
    ("i32", 2**31, ValueError, r"I32Arg must be in \[-2147483648, 2147483647\]"),
    ("i32", 1.0, TypeError, "I32Arg must be an int, got float"),
    ("i64", 2**63, ValueError, "I64Arg must be in"),
    ("f32", "1.0", TypeError, "F32Arg must be a float, got str"),
    ("tensor_map", b"\0" * 64, ValueError, "128 bytes of a CUtensorMap, got 64"),
])
def test_arg_layout_refuses_what_the_kernel_args_refuse(kind, value, error, match):
    with pytest.raises(error, match=match):
        cuda.ArgLayout(["i32", kind]).pack([0, value])


def test_arg_layout_stores_floats_past_f32_as_ctypes_does():
    packed = cuda.ArgLayout(["f32"]).pack([1e39])
    assert bytes(packed[0]) == bytes(cuda.F32Arg(1e39)) == struct.pack("<f", float("inf"))


def test_arg_layout_errors():
    with pytest.raises(ValueError, match=r"kinds must be among .* got \['u8'\]"):
        cuda.ArgLayout(["i32", "u8"])
    with pytest.raises(ValueError, match=r"2 arguments \(i32, f32\), got 1"):
        cuda.ArgLayout(["i32", "f32"]).pack([1])


# ---------------------------------------------------------------------------
# Launch configuration


def test_launch_config_normalises_to_3d():
    assert cuda.launch_config(132, (384,)) == ((132, 1, 1), (384, 1, 1))
    assert cuda.launch_config((4, 16, 2), (32, 4, 2)) == ((4, 16, 2), (32, 4, 2))


@pytest.mark.parametrize("grid, block, match", [
    ((), 128, r"grid must have 1 to 3 dimensions, got \(\)"),
    ((1, 1, 1, 1), 128, "grid must have 1 to 3 dimensions"),
    ((0,), 128, r"grid.x must be in \[1, 2147483647\], got 0"),
    ((4, -1), 128, r"grid.y must be in \[1, 65535\], got -1"),
    ((1, 1, 65536), 128, r"grid.z must be in \[1, 65535\], got 65536"),
    (2.5, 128, "grid must be an int or a tuple"),
    ((2, 2.0), 128, r"grid.y must be a positive int, got 2.0"),
    (1, (1025,), r"block.x must be in \[1, 1024\], got 1025"),
    (1, (1, 1, 65), r"block.z must be in \[1, 64\], got 65"),
    (1, (32, 32, 2), r"block=\(32, 32, 2\) has 2048 threads; at most 1024"),
])
def test_launch_config_rejects(grid, block, match):
    with pytest.raises(ValueError, match=match):
        cuda.launch_config(grid, block)


def test_launch_config_uses_the_kernels_thread_limit():
    with pytest.raises(ValueError, match="has 512 threads; at most 384"):
        cuda.launch_config(1, 512, max_threads_per_block=384)


# ---------------------------------------------------------------------------
# Launching, against a fake cuLaunchKernel


@pytest.fixture
def fake_launch(monkeypatch):
    """Replaces cuLaunchKernel; records each call with the bytes of its arguments."""
    drv = cuda.driver()
    calls = []
    state = {"result": drv.CUresult.CUDA_SUCCESS, "sizes": ()}

    def launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        # Read the arguments now: their storage only has to live until the call returns.
        calls.append({"f": f, "grid": (gx, gy, gz), "block": (bx, by, bz), "shared": shared,
                      "stream": stream, "extra": extra,
                      "args": _read_params(params, state["sizes"])})
        return (state["result"],)

    monkeypatch.setattr(drv, "cuLaunchKernel", launch)
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # stream None -> 0
    return calls, state


@needs_bindings
def test_launch_passes_configuration_and_argument_bytes(fake_launch):
    calls, state = fake_launch
    state["sizes"] = (128, 8, 4)
    kernel = cuda.Kernel("handle", "attn", param_sizes=(128, 8, 4))
    desc = bytes(range(128, 256))
    kernel.launch((132, 2), 384, [cuda.TensorMapArg(desc), cuda.PtrArg(0x1000), cuda.I32Arg(9)],
                  shared_mem=1024, stream=0x55)
    assert calls == [{"f": "handle", "grid": (132, 2, 1), "block": (384, 1, 1), "shared": 1024,
                      "stream": 0x55, "extra": 0,
                      "args": [desc, struct.pack("<Q", 0x1000), struct.pack("<i", 9)]}]


@needs_bindings
def test_packed_launch_checks_the_layout_once(fake_launch):
    calls, state = fake_launch
    state["sizes"] = (128, 8, 4)
    kernel = cuda.Kernel("handle", "attn", param_sizes=(128, 8, 4))
    layout = cuda.ArgLayout(["tensor_map", "pointer", "i32"])
    desc = bytes(range(128, 256))
    kernel.launch((132, 2), 384, layout.pack([desc, 0x1000, 9]), shared_mem=1024, stream=0x55)
    kernel.launch((132, 2), 384, layout.pack([desc, 0x2000, 10]), shared_mem=1024, stream=0x55)
    assert [c["args"] for c in calls] == [
        [desc, struct.pack("<Q", 0x1000), struct.pack("<i", 9)],
        [desc, struct.pack("<Q", 0x2000), struct.pack("<i", 10)]]
    assert kernel._checked_layouts == {layout}
    # A layout whose sizes are not the kernel's is refused, before the launch.
    with pytest.raises(TypeError, match=r"argument 2 of kernel 'attn' is 4 bytes, got I64Arg"):
        kernel.launch(1, 1, cuda.ArgLayout(["tensor_map", "pointer", "i64"]).pack(
            [desc, 0, 0]))
    assert len(calls) == 2


@needs_bindings
def test_launch_stream_kinds(fake_launch):
    calls, _ = fake_launch
    kernel = cuda.Kernel("h", "k", param_sizes=())

    class TorchLikeStream:
        cuda_stream = 0xABC

    for stream in (None, 7, TorchLikeStream(), cuda.driver().CUstream(0x99)):
        kernel.launch(1, 1, [], stream=stream)
    assert [c["stream"] for c in calls] == [0, 7, 0xABC, 0x99]
    with pytest.raises(TypeError, match="stream must be a torch.cuda.Stream.*got str"):
        kernel.launch(1, 1, [], stream="0")


@needs_bindings
def test_launch_checks_arguments_against_the_kernels_parameters(fake_launch):
    calls, _ = fake_launch
    kernel = cuda.Kernel("h", "attn", param_sizes=(128, 8))
    with pytest.raises(ValueError, match=r"kernel 'attn' takes 2 arguments \(sizes \(128, 8\)"):
        kernel.launch(1, 1, [cuda.PtrArg(0)])
    with pytest.raises(TypeError, match=r"argument 1 of kernel 'attn' is 8 bytes, got I32Arg \(4"):
        kernel.launch(1, 1, [cuda.TensorMapArg(bytes(128)), cuda.I32Arg(0)])
    with pytest.raises(ValueError, match="launching kernel 'attn': block.x must be in"):
        kernel.launch(1, 0, [cuda.TensorMapArg(bytes(128)), cuda.PtrArg(0)])
    with pytest.raises(ValueError, match=r"launching kernel 'attn': shared_mem must be in \[0, "):
        kernel.launch(1, 1, [cuda.TensorMapArg(bytes(128)), cuda.PtrArg(0)], shared_mem=-1)
    assert calls == []


@needs_bindings
def test_remembered_launch_configurations_stay_checked(fake_launch):
    # A configuration validated once is remembered, but only as the same
    # ints: a bool equal to a remembered int, or a list, is validated again.
    calls, _ = fake_launch
    kernel = cuda.Kernel("h", "attn", param_sizes=())
    kernel.launch((1, 2), 128, [], shared_mem=1)
    kernel.launch((1, 2), 128, [], shared_mem=1)
    assert [c["grid"] for c in calls] == [(1, 2, 1), (1, 2, 1)]
    with pytest.raises(TypeError, match="launching kernel 'attn': shared_mem must be an int"):
        kernel.launch((1, 2), 128, [], shared_mem=True)
    grid = [3, 1]
    kernel.launch(grid, 1, [])
    grid[0] = 0
    with pytest.raises(ValueError, match=r"grid.x must be in \[1, "):
        kernel.launch(grid, 1, [])
    assert len(calls) == 3


@needs_bindings
def test_launch_failure_names_kernel_and_configuration(fake_launch):
    _, state = fake_launch
    state["result"] = cuda.driver().CUresult.CUDA_ERROR_INVALID_VALUE
    kernel = cuda.Kernel("h", "attn_fwd", param_sizes=())
    with pytest.raises(cuda.CudaError) as info:
        kernel.launch((132,), (384,), [], shared_mem=100 * 1024, stream=3)
    err = info.value
    assert err.name == "CUDA_ERROR_INVALID_VALUE"
    assert err.code == cuda.driver().CUresult.CUDA_ERROR_INVALID_VALUE
    text = str(err)
    assert "launching kernel 'attn_fwd' with grid=(132, 1, 1), block=(384, 1, 1)" in text
    assert "shared_mem=102400 bytes, stream=0x3" in text
    assert "call set_max_dynamic_shared_memory" in text
    assert text.endswith(err.message) if err.message else text.endswith(err.name)


# ---------------------------------------------------------------------------
# Errors


@needs_bindings
def test_cuda_error_formatting():
    code = cuda.driver().CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    err = cuda.CudaError(code, "running kernel 'k'")
    assert err.code == code and err.name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert err.context == "running kernel 'k'"
    assert str(err).startswith("running kernel 'k': CUDA_ERROR_ILLEGAL_ADDRESS")
    if err.message:  # the description comes from the driver, when there is one
        assert "illegal memory access" in err.message
        assert str(err).endswith(err.message)
    assert str(cuda.CudaError(code)).startswith("CUDA_ERROR_ILLEGAL_ADDRESS")
    assert isinstance(err, RuntimeError)


@needs_bindings
def test_check_unwraps_results():
    ok = cuda.driver().CUresult.CUDA_SUCCESS
    assert cuda.check((ok,)) is None
    assert cuda.check(ok) is None
    assert cuda.check((ok, 5)) == 5
    assert cuda.check((ok, 5, 6)) == (5, 6)
    bad = cuda.driver().CUresult.CUDA_ERROR_NOT_FOUND
    with pytest.raises(cuda.CudaError, match="looking up 'x': CUDA_ERROR_NOT_FOUND"):
        cuda.check((bad, None), "looking up 'x'")


@needs_bindings
def test_missing_driver_library_is_a_cuda_error(monkeypatch):
    def no_driver(*args):
        raise RuntimeError("Failed to dlopen libcuda.so.1")

    monkeypatch.setattr(cuda.driver(), "cuInit", no_driver)
    monkeypatch.setattr(cuda, "_driver_initialised", False)
    with pytest.raises(cuda.DriverNotFoundError, match="libcuda.so.1 could not be loaded") as info:
        cuda.init_driver()
    assert isinstance(info.value, cuda.CudaError) and info.value.code is None
    assert "initialising the CUDA driver" in str(info.value)


@pytest.fixture
def without_bindings(monkeypatch):
    """Makes `import cuda.bindings.driver` fail, as on a machine without cuda-bindings."""
    monkeypatch.setattr(cuda, "_driver_module", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", None)


def test_runtime_without_cuda_bindings(without_bindings):
    with pytest.raises(RuntimeError, match="cuda-bindings is not installed"):
        cuda.driver()
    with pytest.raises(RuntimeError, match="cuda-bindings is not installed"):
        cuda.ensure_context(0)
    with pytest.raises(RuntimeError, match="cuda-bindings is not installed"):
        cuda.Module(".version 8.0\n")
    with pytest.raises(RuntimeError, match="cuda-bindings is not installed"):
        cuda.Kernel("h", "k").launch(1, 1, [])
    # Packing needs only ctypes, and errors still format.
    assert bytes(cuda.I32Arg(3)) == struct.pack("<i", 3)
    assert str(cuda.CudaError(700, "ctx")) == "ctx: CUresult 700"


# ---------------------------------------------------------------------------
# Modules, against a fake driver


def test_module_image_bytes():
    assert cuda.Module._image_bytes(".version 8.0") == (b".version 8.0\0", True)
    assert cuda.Module._image_bytes(b"ptx\0") == (b"ptx\0", True)
    elf = b"\x7fELF\x02\x01" + bytes(10)
    assert cuda.Module._image_bytes(elf) == (elf, False)
    fatbin = b"\x50\xed\x55\xba" + bytes(12)
    assert cuda.Module._image_bytes(fatbin) == (fatbin, False)
    with pytest.raises(TypeError, match="PTX text or cubin bytes, got int"):
        cuda.Module._image_bytes(3)


@needs_bindings
def test_module_jit_failure_reports_the_error_log(monkeypatch):
    drv = cuda.driver()
    seen = {}

    def load(image, count, options, values):
        seen.update(image=image, options=list(options))
        log = values[options.index(drv.CUjit_option.CU_JIT_ERROR_LOG_BUFFER)]
        log[:29] = b"ptxas error: bad instruction\0"
        return (drv.CUresult.CUDA_ERROR_INVALID_PTX, None)

    monkeypatch.setattr(cuda, "ensure_context", lambda device=None: "ctx")
    monkeypatch.setattr(drv, "cuModuleLoadDataEx", load)
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module("not ptx", name="attn_d128")
    assert seen["image"] == b"not ptx\0"
    assert info.value.name == "CUDA_ERROR_INVALID_PTX"
    assert info.value.log == "ptxas error: bad instruction"
    assert str(info.value).startswith(
        "JIT-compiling PTX for module 'attn_d128': CUDA_ERROR_INVALID_PTX")
    assert str(info.value).endswith("\nptxas error: bad instruction")


# ---------------------------------------------------------------------------
# Tensor checks, on fake tensors


def test_dtype_names():
    assert dtype_name(FakeDtype("bfloat16")) == "bf16"
    assert dtype_name("torch.float16") == "f16"
    assert dtype_name("half") == "f16"
    assert dtype_name("f32") == "f32"
    assert element_size("bf16") == 2 and element_size(FakeDtype("float32")) == 4
    with pytest.raises(TypeError, match="unsupported dtype 'complex64'"):
        dtype_name("complex64")


def test_check_tensor_accepts_a_good_tensor():
    q = FakeTensor((2, 16, 128, 64))
    check_tensor("q", q, rank=4, dtype="bf16")
    check_tensor("q", q, rank=(3, 4), dtype=("f16", "bf16"))
    # A bshd tensor seen as bhsd: strided, but TMA-friendly.
    check_tensor("q", FakeTensor((2, 16, 128, 64), strides=(128 * 16 * 64, 64, 16 * 64, 1)),
                 rank=4, dtype=FakeDtype("bfloat16"))


@pytest.mark.parametrize("t, kwargs, error, match", [
    ([1, 2], {}, TypeError, "q must be a tensor, got list"),
    (FakeTensor((2, 3)), {"rank": 4}, ValueError, r"q must have rank 4, got rank 2 \(shape \(2, 3\)\)"),
    (FakeTensor((2, 3)), {"rank": (3, 4)}, ValueError, "q must have rank 3 or 4, got rank 2"),
    (FakeTensor((8,), dtype="float32"), {"dtype": "bf16"}, TypeError,
     "q must have dtype bf16, got f32"),
    (FakeTensor((8,), dtype="float32"), {"dtype": ("bf16", "f16")}, TypeError,
     "q must have dtype bf16 or f16, got f32"),
    (FakeTensor((8,), device="cpu"), {}, ValueError, "q must be on a cuda device, got cpu"),
    (FakeTensor((4, 8), strides=(1, 4)), {}, ValueError,
     r"q must have a contiguous last dimension \(stride 1\), got strides \(1, 4\)"),
    (FakeTensor((4, 12), strides=(12, 1)), {}, ValueError,
     "multiples of 16 bytes in every dimension but the last; dimension 0 has stride 12 "
     "elements = 24 bytes"),
    (FakeTensor((4, 8), ptr=0x10008), {}, ValueError,
     "q's data pointer must be 16-byte aligned, got 0x10008"),
])
def test_check_tensor_rejects(t, kwargs, error, match):
    with pytest.raises(error, match=match):
        check_tensor("q", t, **kwargs)


def test_check_tensor_options():
    # Dimensions of extent 1 may have any stride: they are never stepped through.
    check_tensor("k", FakeTensor((1, 4, 8), strides=(3, 8, 1)))
    check_tensor("k", FakeTensor((4, 1), strides=(8, 7)))
    check_tensor("k", FakeTensor((4, 12), strides=(12, 1)), stride_alignment_bytes=8)
    check_tensor("k", FakeTensor((4, 8), strides=(16, 2)), last_dim_contiguous=False)
    check_tensor("k", FakeTensor((8,), device="cpu"), device=None)
    check_tensor("k", FakeTensor((8,), device="cpu"), device="cpu")


# ---------------------------------------------------------------------------
# On the GPU

# Thread i copies word i of the by-value (grid-constant) descriptor to out;
# thread 0 then copies the three scalars to out[128:148].
ECHO_PTX = r"""
.version 8.0
.target sm_90a
.address_size 64

.visible .entry echo_args(
    .param .align 64 .b8 echo_args_param_0[128],
    .param .u64 echo_args_param_1,
    .param .u32 echo_args_param_2,
    .param .u64 echo_args_param_3,
    .param .f32 echo_args_param_4
)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<2>;
    .reg .pred %p<2>;

    ld.param.u64 %rd1, [echo_args_param_1];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u64 %rd2, echo_args_param_0;
    cvta.param.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.u64 %rd4, %rd2, %rd3;
    ld.u32 %r2, [%rd4];
    add.u64 %rd5, %rd1, %rd3;
    st.global.u32 [%rd5], %r2;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    ld.param.u32 %r3, [echo_args_param_2];
    st.global.u32 [%rd1+128], %r3;
    ld.param.u64 %rd6, [echo_args_param_3];
    st.global.u64 [%rd1+136], %rd6;
    ld.param.f32 %f1, [echo_args_param_4];
    st.global.f32 [%rd1+144], %f1;
DONE:
    ret;
}
"""


@pytest.fixture(scope="module")
def echo_kernel():
    if not gpu_available():
        pytest.skip("needs torch with a CUDA GPU")
    return cuda.Module(ECHO_PTX, name="echo").function("echo_args")


def _echo_values(out):
    """The echo kernel's arguments but the map, as plain values."""
    return [None, out.data_ptr(), -123456, -(2**50) + 5, 0.375]


def _echo_args(out):
    """Arguments for echo_args writing to ``out``, and the 148 bytes it should write."""
    desc = bytes((7 * i + 3) % 256 for i in range(128))
    values = _echo_values(out)
    args = [cuda.TensorMapArg(desc), cuda.PtrArg(values[1]), cuda.I32Arg(values[2]),
            cuda.I64Arg(values[3]), cuda.F32Arg(values[4])]
    # out[132:136] is never written (the u64 is stored 8-byte aligned).
    expected = (desc + struct.pack("<i", -123456) + bytes(4)
                + struct.pack("<q", -(2**50) + 5) + struct.pack("<f", 0.375))
    return args, expected


@gpu
def test_gpu_context_is_torchs():
    import torch

    context = cuda.ensure_context()
    assert int(cuda.check(cuda.driver().cuCtxGetCurrent())) == int(context)
    assert int(cuda.check(cuda.driver().cuCtxGetDevice())) == torch.cuda.current_device()
    assert int(cuda.ensure_context(torch.device("cuda"))) == int(context)


@gpu
def test_gpu_kernel_receives_each_argument(echo_kernel):
    import torch

    assert echo_kernel.param_sizes == (128, 8, 4, 8, 4)
    assert echo_kernel.num_regs > 0
    out = torch.zeros(148, dtype=torch.uint8, device="cuda")
    args, expected = _echo_args(out)
    echo_kernel.launch(1, 32, args)
    cuda.synchronize()
    assert bytes(out.cpu().numpy().tobytes()) == expected


@gpu
def test_gpu_kernel_receives_each_packed_argument(echo_kernel):
    import torch

    out = torch.zeros(148, dtype=torch.uint8, device="cuda")
    args, expected = _echo_args(out)
    layout = cuda.ArgLayout(["tensor_map", "pointer", "i32", "i64", "f32"])
    echo_kernel.launch(1, 32, layout.pack([bytes(args[0])] + _echo_values(out)[1:]))
    cuda.synchronize()
    assert bytes(out.cpu().numpy().tobytes()) == expected


@gpu
def test_gpu_launch_on_a_torch_stream(echo_kernel):
    import torch

    out = torch.zeros(148, dtype=torch.uint8, device="cuda")
    args, expected = _echo_args(out)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        echo_kernel.launch(1, 32, args)  # stream=None: torch's current stream
    echo_kernel.launch(1, 32, args, stream=stream)
    cuda.synchronize(stream)
    assert bytes(out.cpu().numpy().tobytes()) == expected


@gpu
def test_gpu_dynamic_shared_memory_above_48k(echo_kernel):
    import torch

    out = torch.zeros(148, dtype=torch.uint8, device="cuda")
    args, expected = _echo_args(out)
    kernel = cuda.Module(ECHO_PTX, name="echo_smem").function("echo_args")
    with pytest.raises(cuda.CudaError, match="launching kernel 'echo_args'.*set_max_dynamic"):
        kernel.launch(1, 32, args, shared_mem=100 * 1024)
    kernel.set_max_dynamic_shared_memory(100 * 1024)
    assert kernel.attribute("max_dynamic_shared_size_bytes") == 100 * 1024
    with pytest.raises(cuda.CudaError, match=r"to 307200 bytes \(the device allows \d+ bytes "
                                             r"per block.* uses 0: at most \d+ dynamic\)"):
        kernel.set_max_dynamic_shared_memory(300 * 1024)
    kernel.launch(1, 32, args, shared_mem=100 * 1024)
    cuda.synchronize()
    assert bytes(out.cpu().numpy().tobytes()) == expected


@gpu
def test_gpu_jit_error_log():
    broken = ECHO_PTX.replace("ld.param.u32 %r3", "ld.param.u32 %bogus")
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module(broken, name="broken")
    assert info.value.name == "CUDA_ERROR_INVALID_PTX"
    assert "Unknown symbol '%bogus'" in info.value.log
    assert info.value.log in str(info.value)


def _ptxas():
    return shutil.which("ptxas") or next(
        (p for p in ["/usr/local/cuda/bin/ptxas"] if Path(p).exists()), None)


@gpu
def test_gpu_cubin_module(tmp_path):
    import torch

    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("ptxas not found")
    (tmp_path / "echo.ptx").write_text(ECHO_PTX)
    subprocess.run([ptxas, "-arch=sm_90a", str(tmp_path / "echo.ptx"), "-o",
                    str(tmp_path / "echo.cubin")], check=True)
    kernel = cuda.Module((tmp_path / "echo.cubin").read_bytes()).function("echo_args")
    out = torch.zeros(148, dtype=torch.uint8, device="cuda")
    args, expected = _echo_args(out)
    kernel.launch(1, 32, args)
    cuda.synchronize()
    assert bytes(out.cpu().numpy().tobytes()) == expected
