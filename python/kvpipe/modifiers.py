"""Score and mask modifiers: FlexAttention's ``score_mod`` and ``mask_mod``
as IR regions of ``kvpipe.attention_kernel`` (docs/modifiers.md).

``kvpipe.attention(q, k, v, score_mod=fn, mask_mod=fn)`` takes FlexAttention's
callbacks::

    def score_mod(score, b, h, q_idx, kv_idx): ...   # -> the new score
    def mask_mod(b, h, q_idx, kv_idx): ...           # -> True to keep the key

and traces them, once per call, into the regions of the kernel's declaration:
the arguments are symbolic scalars (:class:`Value`) on which ``+ - * / // %``,
comparisons, ``& | ~`` (on booleans), ``abs``, ``torch.where``,
``torch.tanh``, ``torch.exp``, ``torch.log``, ``torch.sqrt``,
``torch.sigmoid``, ``torch.minimum``, ``torch.maximum`` and indexing a tensor
by index values record ``arith``/``math`` ops. ``score`` is the scaled score
(``scale * q . k``, as FlexAttention's). Tensors the callbacks index become
auxiliary kernel parameters (read as float32, or int32 for integer tensors,
flattened row-major); each call passes them anew, so their values may change
between calls without recompiling. The kernel is cached by the traced IR.

Python's ``and``, ``or``, ``not`` and ``if`` cannot be traced (use ``&``,
``|``, ``~`` and ``torch.where``).

The library below builds the common modifiers (each returns a callback):
:func:`soft_cap`, :func:`alibi`, :func:`relative_bias`, :func:`causal`,
:func:`sliding_window`, :func:`prefix_lm`, :func:`document`, and
:func:`and_masks` / :func:`compose_scores` to combine them.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import struct
import sys
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

__all__ = ["Value", "TracedModifiers", "TraceError", "trace", "soft_cap", "alibi",
           "relative_bias", "causal", "sliding_window", "prefix_lm", "document",
           "and_masks", "or_masks", "compose_scores", "where", "maximum", "minimum", "load"]


class TraceError(TypeError):
    """A modifier callback did something the tracer cannot record."""


# Element types of scalars: f32 (scores), index (indices, integers) and i1.
_F32, _INDEX, _I1 = "f32", "index", "i1"


class _Recorder:
    """The ops of one region being traced, and the auxiliary tensors shared
    by the regions of one call."""

    def __init__(self, aux: "_AuxTensors", kind: str) -> None:
        self.lines: List[str] = []
        self.count = 0
        self.aux = aux
        #: "score_mod" or "mask_mod": which region the ops are recorded in.
        self.kind = kind
        self.constants: Dict[Tuple[str, str], "Value"] = {}

    def emit(self, text: str, type_: str) -> "Value":
        name = f"%{self.count}"
        self.count += 1
        self.lines.append(f"    {name} = {text}")
        return Value(self, name, type_)

    def constant(self, value: Any, type_: str) -> "Value":
        if type_ == _F32:
            literal = _f32_literal(float(value))
        elif type_ == _I1:
            literal = "true" if value else "false"
        else:
            literal = str(int(value))
        key = (literal, type_)
        found = self.constants.get(key)
        if found is None:
            found = self.emit(f"arith.constant {literal} : {type_}", type_)
            self.constants[key] = found
        return found


def _f32_literal(value: float) -> str:
    if math.isfinite(value):
        return format(value, ".9e")
    # inf and nan as the f32 bit pattern.
    return "0x" + struct.pack(">f", value).hex().upper()


class _AuxTensors:
    """Tensors indexed by the callbacks, numbered in the order first seen."""

    def __init__(self) -> None:
        self.tensors: List[Any] = []
        self.types: List[str] = []
        #: The tensors (numbers) the score_mod reads: those with a gradient.
        self.score_mod_reads: set = set()

    def number(self, tensor: Any) -> int:
        for i, known in enumerate(self.tensors):
            if known is tensor:
                return i
        dtype = str(getattr(tensor, "dtype", ""))
        if "float" in dtype or "bfloat" in dtype or "half" in dtype:
            element = "f32"
        elif "int" in dtype or "bool" in dtype:
            element = "i32"
        else:
            raise TraceError(f"a modifier indexes a tensor of dtype {dtype or type(tensor)}: "
                             "only float and integer tensors can be read")
        self.tensors.append(tensor)
        self.types.append(element)
        return len(self.tensors) - 1


def _shape(tensor: Any) -> Tuple[int, ...]:
    return tuple(int(s) for s in tensor.shape)


class Value:
    """A traced scalar: an SSA value of the region being recorded."""

    # Below torch's priority, so that ``tensor[value]`` and ``torch.tanh(value)``
    # come here through __torch_function__.
    __array_priority__ = 1000

    def __init__(self, recorder: _Recorder, name: str, type_: str) -> None:
        self._r, self.name, self.type = recorder, name, type_

    def __repr__(self) -> str:
        return f"<traced {self.type} {self.name}>"

    def __bool__(self) -> bool:
        raise TraceError("a traced value has no truth value while tracing a modifier: use "
                         "&, |, ~ and torch.where instead of and, or, not and if")

    def __index__(self) -> int:
        raise TraceError("a traced index cannot be used as a Python int")

    # Conversions.
    def _lift(self, other: Any) -> "Value":
        if isinstance(other, Value):
            if other._r is not self._r:
                raise TraceError("a value of another modifier is used in this one")
            return other
        if isinstance(other, bool):
            return self._r.constant(other, _I1)
        if isinstance(other, int):
            return self._r.constant(other, _INDEX)
        if isinstance(other, float):
            return self._r.constant(other, _F32)
        raise TraceError(f"cannot use {type(other).__name__} {other!r} in a modifier")

    def _as(self, type_: str) -> "Value":
        if self.type == type_:
            return self
        if self.type == _INDEX and type_ == _F32:
            i32 = self._r.emit(f"arith.index_cast {self.name} : index to i32", "i32")
            return self._r.emit(f"arith.sitofp {i32.name} : i32 to f32", _F32)
        if self.type == _I1 and type_ == _INDEX:
            return self._r.emit(f"arith.index_cast {self._r.emit(f'arith.extui {self.name} : i1 to i32', 'i32').name} : i32 to index", _INDEX)
        if self.type == _I1 and type_ == _F32:
            return self._r.emit(f"arith.uitofp {self.name} : i1 to f32", _F32)
        raise TraceError(f"cannot use a {self.type} value as {type_}")

    def _pair(self, other: Any, reverse: bool = False) -> Tuple["Value", "Value", str]:
        other = self._lift(other)
        if isinstance(other, Value) and other.type == _F32 and self.type != _F32:
            a, b = self._as(_F32), other
        elif self.type == _F32 and other.type != _F32:
            a, b = self, other._as(_F32)
        elif self.type == _I1 and other.type == _INDEX:
            a, b = self._as(_INDEX), other
        elif self.type == _INDEX and other.type == _I1:
            a, b = self, other._as(_INDEX)
        else:
            a, b = self, other
        if reverse:
            a, b = b, a
        return a, b, a.type

    def _binary(self, other: Any, float_op: str, int_op: Optional[str],
                reverse: bool = False, bool_op: Optional[str] = None) -> "Value":
        a, b, type_ = self._pair(other, reverse)
        if type_ == _F32:
            op = float_op
        elif type_ == _I1:
            op = bool_op
        else:
            op = int_op
        if op is None:
            raise TraceError(f"this operator does not apply to {type_} values in a modifier")
        return self._r.emit(f"{op} {a.name}, {b.name} : {type_}", type_)

    def __add__(self, o): return self._binary(o, "arith.addf", "arith.addi")
    def __radd__(self, o): return self._binary(o, "arith.addf", "arith.addi", True)
    def __sub__(self, o): return self._binary(o, "arith.subf", "arith.subi")
    def __rsub__(self, o): return self._binary(o, "arith.subf", "arith.subi", True)
    def __mul__(self, o): return self._binary(o, "arith.mulf", "arith.muli")
    def __rmul__(self, o): return self._binary(o, "arith.mulf", "arith.muli", True)

    def __truediv__(self, o):
        return self._as(_F32)._binary(o, "arith.divf", None)

    def __rtruediv__(self, o):
        return self._as(_F32)._binary(o, "arith.divf", None, True)

    def __floordiv__(self, o): return self._binary(o, "arith.divf", "arith.floordivsi")
    def __rfloordiv__(self, o): return self._binary(o, "arith.divf", "arith.floordivsi", True)
    def __mod__(self, o): return self._binary(o, "arith.remf", "arith.remsi")
    def __rmod__(self, o): return self._binary(o, "arith.remf", "arith.remsi", True)
    def __and__(self, o): return self._binary(o, None, "arith.andi", bool_op="arith.andi") \
        if self.type != _F32 else self._fail("&")
    __rand__ = __and__
    def __or__(self, o): return self._binary(o, None, "arith.ori", bool_op="arith.ori") \
        if self.type != _F32 else self._fail("|")
    __ror__ = __or__

    def _fail(self, op: str) -> "Value":
        raise TraceError(f"{op} does not apply to f32 values in a modifier")

    def __invert__(self):
        if self.type != _I1:
            raise TraceError("~ applies to booleans (comparisons) in a modifier")
        return self._r.emit(f"arith.xori {self.name}, {self._r.constant(True, _I1).name} : i1",
                            _I1)

    def __neg__(self):
        if self.type == _F32:
            return self._r.emit(f"arith.negf {self.name} : f32", _F32)
        return self._r.constant(0, _INDEX) - self

    def __abs__(self):
        if self.type == _F32:
            return self._r.emit(f"math.absf {self.name} : f32", _F32)
        # max(x, -x): math.absi has no lowering for index.
        return _min_max(False, self, -self)

    def _compare(self, other: Any, float_pred: str, int_pred: str) -> "Value":
        a, b, type_ = self._pair(other)
        if type_ == _F32:
            return self._r.emit(f"arith.cmpf {float_pred}, {a.name}, {b.name} : f32", _I1)
        if type_ == _I1:
            a, b = a._as(_INDEX), b._as(_INDEX)
        return self._r.emit(f"arith.cmpi {int_pred}, {a.name}, {b.name} : index", _I1)

    def __lt__(self, o): return self._compare(o, "olt", "slt")
    def __le__(self, o): return self._compare(o, "ole", "sle")
    def __gt__(self, o): return self._compare(o, "ogt", "sgt")
    def __ge__(self, o): return self._compare(o, "oge", "sge")
    def __eq__(self, o): return self._compare(o, "oeq", "eq")  # type: ignore[override]
    def __ne__(self, o): return self._compare(o, "une", "ne")  # type: ignore[override]
    __hash__ = None  # type: ignore[assignment]

    # Methods torch tensors have.
    def abs(self): return abs(self)
    def tanh(self): return _unary("tanh", self)
    def exp(self): return _unary("exp", self)
    def log(self): return _unary("log", self)
    def sqrt(self): return _unary("sqrt", self)
    def sigmoid(self): return _unary("sigmoid", self)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if name == "__getitem__":
            return load(args[0], args[1])
        if name in _UNARY:
            return _unary(name, args[0])
        if name == "abs":
            return abs(args[0])
        if name == "where":
            return where(*args, **kwargs)
        if name in ("minimum", "maximum", "min", "max") and len(args) == 2:
            return _min_max(name.startswith("min"), args[0], args[1])
        if name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
                    "__truediv__", "__rtruediv__", "add", "sub", "mul", "div"):
            raise TraceError(f"a tensor is used in arithmetic in a modifier ({name}): index it "
                             "with the traced indices instead (tensor[h], tensor[q_idx])")
        raise TraceError(f"torch.{name} is not supported in a modifier (supported: "
                         "tanh, exp, log, sqrt, sigmoid, abs, where, minimum, maximum, and "
                         "indexing a tensor by indices)")


_UNARY = {"tanh": "math.tanh", "exp": "math.exp", "log": "math.log", "sqrt": "math.sqrt"}


def _unary(name: str, x: Any) -> Value:
    if not isinstance(x, Value):
        raise TraceError(f"{name} of a non-traced value {x!r} in a modifier")
    x = x._as(_F32)
    if name == "sigmoid":
        one = x._r.constant(1.0, _F32)
        return one / (one + _unary("exp", -x))
    return x._r.emit(f"{_UNARY[name]} {x.name} : f32", _F32)


def _min_max(is_min: bool, a: Any, b: Any) -> Value:
    value = a if isinstance(a, Value) else b
    x, y, type_ = value._pair(b if value is a else a)
    if type_ == _F32:
        op = "arith.minimumf" if is_min else "arith.maximumf"
    else:
        op = "arith.minsi" if is_min else "arith.maxsi"
    return value._r.emit(f"{op} {x.name}, {y.name} : {type_}", type_)


def maximum(a: Any, b: Any) -> Value:
    """``torch.maximum`` on traced scalars (either may be a Python number)."""
    return _min_max(False, a, b)


def minimum(a: Any, b: Any) -> Value:
    """``torch.minimum`` on traced scalars (either may be a Python number)."""
    return _min_max(True, a, b)


def where(condition: Any, a: Any, b: Any) -> Value:
    """``torch.where`` on traced scalars: ``a`` where ``condition`` else ``b``."""
    if not isinstance(condition, Value) or condition.type != _I1:
        raise TraceError("torch.where's condition must be a traced comparison in a modifier")
    r = condition._r
    x, y, type_ = (a if isinstance(a, Value) else r.constant(a, _F32 if isinstance(a, float)
                                                             else _INDEX))._pair(b)
    return r.emit(f"arith.select {condition.name}, {x.name}, {y.name} : {type_}", type_)


def load(tensor: Any, index: Any) -> Value:
    """``tensor[index]``: an element of a tensor read by the kernel (an
    auxiliary parameter). ``index`` holds one traced index or Python int per
    dimension of ``tensor`` (non-negative)."""
    if isinstance(tensor, _View):
        base, prefix = tensor.tensor, tensor.prefix
    else:
        base, prefix = tensor, ()
    items = index if isinstance(index, tuple) else (index,)
    recorder = next((i._r for i in items if isinstance(i, Value)), None)
    for i in items:
        if isinstance(i, Value) and i.type != _INDEX:
            raise TraceError(f"a tensor is indexed by a {i.type} value in a modifier: indices "
                             "must be integers (b, h, q_idx, kv_idx and integer arithmetic)")
        if not isinstance(i, Value) and (isinstance(i, bool) or not isinstance(i, int)):
            raise TraceError(f"a tensor is indexed by {i!r} in a modifier: only traced indices "
                             "and Python ints")
        if not isinstance(i, Value) and i < 0:
            raise TraceError(f"negative index {i} into a tensor in a modifier")
    if recorder is None:
        raise TraceError("a tensor is indexed by Python ints only in a modifier: index it "
                         "with at least one traced value (or read it before the call)")
    items = prefix + items
    shape = _shape(base)
    if len(items) > len(shape):
        raise TraceError(f"a tensor of shape {shape} is indexed with {len(items)} indices")
    if len(items) < len(shape):
        return _View(base, items)  # type: ignore[return-value]
    # Row-major offset of the element in the tensor made contiguous.
    offset: Any = 0
    stride = 1
    for i, extent in reversed(list(zip(items, shape))):
        term = i * stride if stride != 1 else i
        offset = term if isinstance(offset, int) and offset == 0 else offset + term
        stride *= extent
    if not isinstance(offset, Value):
        offset = recorder.constant(offset, _INDEX)
    number = recorder.aux.number(base)
    if recorder.kind == "score_mod":
        recorder.aux.score_mod_reads.add(number)
    element = recorder.aux.types[number]
    value = recorder.emit(f"kvpipe.aux_load {number}[{offset.name}] : {element}", element)
    if element == "i32":
        return recorder.emit(f"arith.index_cast {value.name} : i32 to index", _INDEX)
    return Value(recorder, value.name, _F32)


@dataclasses.dataclass
class _View:
    """A tensor indexed in its leading dimensions (``table[h]``)."""

    tensor: Any
    prefix: tuple

    def __getitem__(self, index: Any) -> Value:
        return load(self, index)


@dataclasses.dataclass
class TracedModifiers:
    """The regions of a kernel declaration and the tensors they read."""

    #: The regions' text, as it follows the declaration's attributes.
    ir: str
    #: Element types of the auxiliary tensors ("f32" or "i32"), in order.
    aux_types: Tuple[str, ...]
    #: The tensors themselves (``aux<i>``), as the callbacks indexed them.
    aux_tensors: List[Any]
    has_score_mod: bool
    has_mask_mod: bool
    #: The tensors (numbers) the score_mod reads: the ones with a gradient
    #: (a mask_mod's reads have none: the mask is piecewise constant).
    score_mod_reads: FrozenSet[int] = frozenset()


_SCORE_ARGS = (("score", _F32), ("b", _INDEX), ("h", _INDEX), ("q_idx", _INDEX),
               ("kv_idx", _INDEX))


def _mentions_value(items: Any) -> bool:
    return any(isinstance(i, Value) or (isinstance(i, (tuple, list)) and _mentions_value(i))
               for i in items)


def _torch_mode() -> Any:
    """With torch loaded, a TorchFunctionMode sending the torch calls that
    involve traced values here: ``tensor[h]`` on a plain tensor does not
    consult its index's ``__torch_function__`` (FlexAttention intercepts
    indexing with a mode too, TransformGetItemToIndex). Without torch, no
    mode: fakes index through :func:`load`."""
    global _trace_mode_class
    torch = sys.modules.get("torch")
    if torch is None:
        return contextlib.nullcontext()
    if _trace_mode_class is None:  # (a class made once: making one costs microseconds)
        from torch.overrides import TorchFunctionMode

        class _TraceMode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if _mentions_value(args) or _mentions_value(kwargs.values()):
                    return Value.__torch_function__(func, types, args, kwargs)
                return func(*args, **kwargs)

        _trace_mode_class = _TraceMode
    return _trace_mode_class()


_trace_mode_class: Any = None


def _trace_region(kind: str, fn: Callable[..., Any], aux: _AuxTensors) -> str:
    recorder = _Recorder(aux, kind)
    args = _SCORE_ARGS if kind == "score_mod" else _SCORE_ARGS[1:]
    values = [Value(recorder, f"%{name}", type_) for name, type_ in args]
    try:
        with _torch_mode():
            result = fn(*values)
    except TraceError:
        raise
    except TypeError as exc:
        raise TraceError(f"{kind} could not be traced: {exc}") from exc
    want = _F32 if kind == "score_mod" else _I1
    if isinstance(result, bool) and kind == "mask_mod":
        result = recorder.constant(result, _I1)
    elif isinstance(result, (int, float)) and not isinstance(result, bool) and \
            kind == "score_mod":
        result = recorder.constant(float(result), _F32)
    if not isinstance(result, Value):
        raise TraceError(f"{kind} must return a traced {'score' if want == _F32 else 'boolean'}"
                         f", got {type(result).__name__}")
    if kind == "score_mod" and result.type != _F32:
        result = result._as(_F32)
    if result.type != want:
        raise TraceError(f"{kind} must return a boolean (a comparison), got a {result.type} "
                         "value")
    header = ", ".join(f"%{name}: {type_}" for name, type_ in args)
    body = "\n".join(recorder.lines)
    return (f"{kind} {{\n  ^bb0({header}):\n" + (body + "\n" if body else "")
            + f"    kvpipe.yield {result.name} : {want}\n  }}")


def trace(score_mod: Optional[Callable[..., Any]] = None,
          mask_mod: Optional[Callable[..., Any]] = None) -> Optional[TracedModifiers]:
    """Traces FlexAttention-style callbacks into the regions of a kernel
    declaration; None when neither is given.

    Raises:
        TypeError: a callback that is not callable (naming the argument).
        TraceError: the callback did something the tracer cannot record.
    """
    for name, fn in (("score_mod", score_mod), ("mask_mod", mask_mod)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be a callable, got {type(fn).__name__}")
    if score_mod is None and mask_mod is None:
        return None
    signature = _call_signature(score_mod, mask_mod)
    if signature is not None:
        key, tensors = signature
        found = _library_traces.get(key)
        if found is not None:  # (first in, first out past the bound: no reordering,
            template, positions = found  # which another thread's eviction could race)
            return dataclasses.replace(template, aux_tensors=[tensors[i] for i in positions])
    aux = _AuxTensors()
    regions = []
    if score_mod is not None:
        regions.append(_trace_region("score_mod", score_mod, aux))
    if mask_mod is not None:
        regions.append(_trace_region("mask_mod", mask_mod, aux))
    traced = TracedModifiers(" ".join(regions), tuple(aux.types), list(aux.tensors),
                             score_mod is not None, mask_mod is not None,
                             frozenset(aux.score_mod_reads))
    if signature is not None:
        positions = [next((i for i, t in enumerate(tensors) if t is read), None)
                     for read in aux.tensors]
        if None not in positions:  # (every tensor read is one the signature names)
            _library_traces[key] = (dataclasses.replace(traced, aux_tensors=[]), positions)
            if len(_library_traces) > _MAX_LIBRARY_TRACES:
                _library_traces.popitem(last=False)
    return traced


#: Traces of the library's modifiers (``_library``) by call signature, with
#: the positions of the tensors they read among the signature's: a decode
#: step with flash-attn's ``softcap=`` / ``alibi_slopes=`` traces once, not
#: on every call (which cost as much host time as the launch). Insertion
#: order: the oldest goes past the bound.
_library_traces: "collections.OrderedDict[Any, Any]" = collections.OrderedDict()
_MAX_LIBRARY_TRACES = 64


def _library(fn: Callable[..., Any], key: Tuple[Any, ...], *tensors: Any) -> Callable[..., Any]:
    """Marks a modifier of this library: its regions depend only on ``key``
    (hashable: its parameters) and on the shapes and dtypes of ``tensors``,
    the ones it may index, so that ``trace`` reuses the regions of an equal
    signature over the new call's tensors. A user's callback has no such
    signature (it may capture anything) and is traced on every call."""
    fn.__kvpipe_signature__ = (key, tensors)  # type: ignore[attr-defined]
    return fn


def _signature(fn: Optional[Callable[..., Any]]) -> Optional[Tuple[Any, Tuple[Any, ...]]]:
    if fn is None:
        return ((), ())
    return getattr(fn, "__kvpipe_signature__", None)


def _call_signature(score_mod: Optional[Callable[..., Any]],
                    mask_mod: Optional[Callable[..., Any]]) -> Optional[Tuple[Any, Any]]:
    """The cache key of a trace of library modifiers, and the tensors they
    may read; None where either callback is not the library's. The key
    holds each tensor's shape and dtype (the regions index by the shape and
    load by the dtype) and which of them are the same tensor (read once)."""
    score, mask = _signature(score_mod), _signature(mask_mod)
    if score is None or mask is None:
        return None
    tensors = score[1] + mask[1]
    try:
        described = tuple((_shape(t), str(t.dtype),
                           next(i for i, u in enumerate(tensors) if u is t)) for t in tensors)
    except (AttributeError, TypeError):
        return None
    return (score[0], mask[0], described), tensors


def _library_combination(name: str, fn: Callable[..., Any],
                         parts: Sequence[Callable[..., Any]]) -> Callable[..., Any]:
    """``fn``, a combination of ``parts``, marked as the library's where
    every part is (its key names the parts' keys in order)."""
    signatures = [getattr(part, "__kvpipe_signature__", None) for part in parts]
    if None in signatures:
        return fn
    return _library(fn, (name,) + tuple(key for key, _ in signatures),
                    *(t for _, tensors in signatures for t in tensors))


#: What the internal ``_traced`` arguments of kvpipe.attention's layers
#: default to: the callee traces the callbacks itself. (None is a trace: no
#: modifiers.)
UNTRACED = object()


def trace_unless_traced(traced: Any, score_mod: Optional[Callable[..., Any]],
                        mask_mod: Optional[Callable[..., Any]]) -> Optional[TracedModifiers]:
    """``traced`` where a caller passed its trace down, else
    ``trace(score_mod, mask_mod)``: the callbacks run once per call."""
    return trace(score_mod, mask_mod) if traced is UNTRACED else traced


def check_same_modifiers(forward_ir: Optional[str], forward_aux: Tuple[Any, ...],
                         score_mod: Optional[Callable[..., Any]],
                         mask_mod: Optional[Callable[..., Any]]) -> Optional[TracedModifiers]:
    """Raises RuntimeError unless the callbacks trace, at backward time, to
    the forward's regions over the same auxiliary tensors: the backward
    traces them again, and a captured Python value or tensor replaced in
    between would give the gradient of another function. (A captured tensor
    changed in place is caught by autograd itself: the forward saves them.)
    Returns the new trace, for the backward's launch."""
    if forward_ir is None:
        return None
    again = trace(score_mod, mask_mod)
    same = (again is not None and again.ir == forward_ir
            and len(again.aux_tensors) == len(forward_aux)
            and all(a.data_ptr() == b.data_ptr() and tuple(a.shape) == tuple(b.shape)
                    and tuple(a.stride()) == tuple(b.stride()) and a.dtype == b.dtype
                    for a, b in zip(again.aux_tensors, forward_aux)))
    if not same:
        raise RuntimeError("kvpipe.attention: score_mod/mask_mod trace differently in the "
                           "backward than in the forward (a value or tensor they capture was "
                           "replaced in between): the gradient would not be that of the "
                           "forward")
    return again


# ---------------------------------------------------------------------------
# The library.
# ---------------------------------------------------------------------------

def soft_cap(cap: float, approximate: bool = True) -> Callable[..., Any]:
    """Logit soft-capping (Gemma 2, Grok; flash-attn's ``softcap``):
    ``cap * tanh(score / cap)`` of the scaled score. ``approximate``: the
    hardware tanh (``tanh.approx.f32``, relative error below 2^-10.9, as
    FA3's), marked ``fastmath<afn>`` in the IR; else libdevice's tanhf."""
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not cap > 0 \
            or not math.isfinite(cap):
        raise ValueError(f"soft_cap's cap must be a positive finite number, got {cap!r}")
    cap = float(cap)

    def score_mod(score, b, h, q_idx, kv_idx):
        x = score * (1.0 / cap)
        if approximate:
            return x._r.emit(f"math.tanh {x.name} fastmath<afn> : f32", _F32) * cap
        return _unary("tanh", x) * cap

    return _library(score_mod, ("soft_cap", cap, approximate))


def alibi(slopes: Any, shift: Any = 0, kv_lengths: Any = None) -> Callable[..., Any]:
    """ALiBi: ``score - slope * |q_idx + shift - kv_idx|``.

    ``slopes``: float tensor ``(H_q,)`` or ``(B, H_q)``. ``shift``: where the
    diagonal is, an int (compiled into the kernel) or an int tensor ``(1,)``
    read at run time, so that one kernel serves every length: flash-attn's
    ``alibi_slopes`` is ``shift = seqlen_k - seqlen_q``. ``kv_lengths``: an
    int tensor ``(B,)`` added to the shift per batch (flash-attn's
    ``cache_seqlens``: ``shift = -seqlen_q`` with ``kv_lengths`` the key
    counts)."""
    per_batch = len(_shape(slopes)) == 2
    if not isinstance(shift, int) and len(_shape(shift)) != 1:
        raise ValueError(f"alibi's shift must be an int or a (1,) int tensor, got shape "
                         f"{_shape(shift)}")

    def score_mod(score, b, h, q_idx, kv_idx):
        slope = slopes[b, h] if per_batch else slopes[h]
        distance = q_idx - kv_idx
        if isinstance(shift, int):
            if shift:
                distance = distance + shift
        else:
            distance = distance + shift[_zero(q_idx)]
        if kv_lengths is not None:
            distance = distance + kv_lengths[b]
        return score - slope * abs(distance)

    tensors = (slopes,) + (() if isinstance(shift, int) else (shift,)) + (
        () if kv_lengths is None else (kv_lengths,))
    return _library(score_mod, ("alibi", shift if isinstance(shift, int) else None,
                                kv_lengths is not None), *tensors)


def _zero(like: Value) -> Value:
    """The index constant 0 of the region ``like`` belongs to."""
    return like._r.constant(0, _INDEX)


def relative_bias(table: Any, max_distance: int) -> Callable[..., Any]:
    """A learned relative-position bias: ``score + table[h, clamp(kv - q,
    -max_distance, max_distance) + max_distance]``, ``table`` float ``(H_q,
    2 * max_distance + 1)`` (T5/Swin-style, without buckets)."""
    if isinstance(max_distance, bool) or not isinstance(max_distance, int) or max_distance < 0:
        raise ValueError(f"relative_bias's max_distance must be a non-negative int, got "
                         f"{max_distance!r}")
    shape = _shape(table)
    if len(shape) != 2 or shape[1] != 2 * max_distance + 1:
        raise ValueError(f"relative_bias's table must be (heads, {2 * max_distance + 1}), got "
                         f"{shape}")

    def score_mod(score, b, h, q_idx, kv_idx):
        d = _min_max(True, _min_max(False, kv_idx - q_idx, -max_distance), max_distance)
        return score + table[h, d + max_distance]

    return _library(score_mod, ("relative_bias", max_distance), table)


def causal(offset: int = 0) -> Callable[..., Any]:
    """The causal mask: query i keeps keys ``<= i + offset``."""
    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx <= (q_idx + offset if offset else q_idx)
    return _library(mask_mod, ("causal", offset))


def sliding_window(left: int, right: int = 0, offset: int = 0) -> Callable[..., Any]:
    """Query i keeps the keys in ``[i + offset - left, i + offset + right]``
    (flash-attn's ``window_size``; ``right=0`` is a causal window)."""
    for name, value in (("left", left), ("right", right)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"sliding_window's {name} must be a non-negative int, got {value!r}")

    def mask_mod(b, h, q_idx, kv_idx):
        d = kv_idx - q_idx
        return (d >= offset - left) & (d <= offset + right)
    return _library(mask_mod, ("sliding_window", left, right, offset))


def prefix_lm(prefix: int) -> Callable[..., Any]:
    """Prefix-LM: every query sees the first ``prefix`` keys, and the rest
    causally."""
    if isinstance(prefix, bool) or not isinstance(prefix, int) or prefix < 0:
        raise ValueError(f"prefix_lm's prefix must be a non-negative int, got {prefix!r}")

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) | (kv_idx < prefix)
    return _library(mask_mod, ("prefix_lm", prefix))


def document(document_ids: Any) -> Callable[..., Any]:
    """Document masking of packed sequences: a query keeps the keys of its
    own document. ``document_ids``: an int tensor ``(S,)`` (or ``(B, S)``)
    giving each position's document; queries and keys share it."""
    per_batch = len(_shape(document_ids)) == 2

    def mask_mod(b, h, q_idx, kv_idx):
        if per_batch:
            return document_ids[b, q_idx] == document_ids[b, kv_idx]
        return document_ids[q_idx] == document_ids[kv_idx]
    return _library(mask_mod, ("document",), document_ids)


def and_masks(*masks: Callable[..., Any]) -> Callable[..., Any]:
    """A mask keeping what every mask keeps (FlexAttention's ``and_masks``)."""
    def mask_mod(b, h, q_idx, kv_idx):
        result = masks[0](b, h, q_idx, kv_idx)
        for m in masks[1:]:
            result = result & m(b, h, q_idx, kv_idx)
        return result
    return _library_combination("and_masks", mask_mod, masks)


def or_masks(*masks: Callable[..., Any]) -> Callable[..., Any]:
    """A mask keeping what any mask keeps (FlexAttention's ``or_masks``)."""
    def mask_mod(b, h, q_idx, kv_idx):
        result = masks[0](b, h, q_idx, kv_idx)
        for m in masks[1:]:
            result = result | m(b, h, q_idx, kv_idx)
        return result
    return _library_combination("or_masks", mask_mod, masks)


def compose_scores(*mods: Callable[..., Any]) -> Callable[..., Any]:
    """``mods[-1](... mods[0](score) ...)``: score modifiers applied in turn
    (soft-cap then ALiBi, as flash-attn orders them)."""
    def score_mod(score, b, h, q_idx, kv_idx):
        for mod in mods:
            score = mod(score, b, h, q_idx, kv_idx)
        return score
    return _library_combination("compose_scores", score_mod, mods)
