"""Tensor-like stand-ins for torch tensors, for CPU-only tests of argument checks."""

import sys
import types


class ReachedTorch(Exception):
    """The torch stand-in's first use: the call got past its argument checks."""


def torch_stand_in(monkeypatch) -> None:
    """Puts a stand-in for torch in ``sys.modules`` for the test: the fakes
    are no ``torch.Tensor`` (the eager path is taken) and any other use of
    torch raises ReachedTorch. kvpipe imports torch inside its functions,
    after the checks, so a test can assert that valid arguments reach the
    launch the same way with or without torch installed."""

    class Torch(types.ModuleType):
        class Tensor:
            pass

        def __getattr__(self, name):
            raise ReachedTorch(name)

    monkeypatch.setitem(sys.modules, "torch", Torch("torch"))


class FakeDevice:
    def __init__(self, type_: str):
        self.type = type_

    def __str__(self):
        return self.type


class FakeDtype:
    """Prints like a torch dtype, which is all that kvpipe looks at."""

    def __init__(self, name: str):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


class FakeTensor:
    SIZES = {"bfloat16": 2, "float16": 2, "float32": 4, "uint8": 1, "int32": 4}

    def __init__(self, shape, strides=None, dtype="bfloat16", device="cuda", ptr=0x10000):
        self.shape = tuple(shape)
        if strides is None:  # contiguous
            strides, step = [], 1
            for extent in reversed(self.shape):
                strides.insert(0, step)
                step *= extent
        self._strides = tuple(strides)
        self.dtype = FakeDtype(dtype)
        self.device = FakeDevice(device)
        self._ptr = ptr

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._ptr

    def element_size(self):
        return self.SIZES[self.dtype.name]
