"""Turning numpy arrays, torch tensors and Python sequences into C pointers.

Nothing here copies a caller's output buffer: a bitmask or logits array is
checked (dtype, device, contiguity, shape) and handed to C by address, or
rejected with an error that says what to change. Input lists (tokens,
indices, label ids) are converted to small temporary arrays.

torch is never imported here: a tensor is recognised only when the caller's
process already imported torch.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import sys
from typing import Any, Tuple

import numpy as np

from ._ffi import ffi
from .errors import BufferTooSmallError, InvalidArgumentError, OutOfRangeError, raise_status

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

# treemask_dtype values for each logits dtype name (numpy and torch spell
# them the same way; numpy has bfloat16 only through ml_dtypes).
DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2}


def torch_tensor_module(x: Any):
    """The torch module if x is a torch.Tensor, else None."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return torch
    return None


def describe(x: Any) -> str:
    torch = torch_tensor_module(x)
    if torch is not None:
        return "torch.Tensor(dtype=%s, shape=%s, device=%s)" % (
            str(x.dtype).replace("torch.", ""), tuple(x.shape), x.device)
    if isinstance(x, np.ndarray):
        return "numpy.ndarray(dtype=%s, shape=%s)" % (x.dtype, x.shape)
    return type(x).__name__


def sized_result(ctype: str, query, result_type):
    """``result_type`` (a NamedTuple) filled from a sized result struct
    (``treemask_trie_stats``, ``treemask_matcher_counters``): ``query(out)``
    is the C call that writes ``*out``, up to its ``struct_size``."""
    out = ffi.new(ctype + " *")
    out.struct_size = ffi.sizeof(ctype)
    status = query(out)
    if status:
        raise_status(status)
    return result_type(*(int(getattr(out, f)) for f in result_type._fields))


def positive_int(value: Any, what: str) -> int:
    """``value`` as an int >= 1 (a count of threads, beams, requests or
    tokens), or InvalidArgumentError naming it: the one place this rule and
    its message are written."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise InvalidArgumentError("%s must be an int >= 1, got %r" % (what, value))
    return int(value)


def thread_count(value: Any, what: str = "n_threads") -> int:
    """A thread count: an int >= 1."""
    return positive_int(value, what)


def int_array(values: Any, dtype: type, what: str, lo: int, hi: int) -> np.ndarray:
    """values (a sequence, numpy array or CPU tensor of integers) as a
    C-contiguous 1-D array of dtype; every value must lie in [lo, hi]."""
    torch = torch_tensor_module(values)
    if torch is not None:
        if values.device.type != "cpu":
            raise InvalidArgumentError(
                "%s: %s is not on the CPU; copy it explicitly with .cpu()" % (what, describe(values)))
        values = values.numpy()
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError("%s: not a sequence of integers (%s)" % (what, e)) from None
    if arr.ndim != 1:
        if arr.ndim == 0 or arr.size != 0:
            raise InvalidArgumentError("%s: want a 1-D sequence of integers, got shape %s"
                                       % (what, arr.shape))
        arr = arr.reshape(0)
    if arr.size == 0:
        return np.zeros(0, dtype=dtype)
    if arr.dtype.kind not in "iub":
        # Python ints beyond int64, strings, floats: find the first offender.
        items = values if isinstance(values, (list, tuple)) else arr.reshape(-1).tolist()
        for i, v in enumerate(items):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise _at(InvalidArgumentError("%s[%d] = %r is not an integer" % (what, i, v)), i)
            if not lo <= v <= hi:
                raise _at(OutOfRangeError("%s[%d] = %d is outside [%d, %d]" % (what, i, v, lo, hi)), i)
        raise InvalidArgumentError("%s: want integers, got dtype %s" % (what, arr.dtype))
    if arr.dtype != dtype:
        if arr.dtype.kind == "u" and arr.dtype.itemsize == 8:
            out_of_range = arr > np.uint64(hi)
        else:
            wide = arr.astype(np.int64, copy=False)
            out_of_range = (wide < lo) | (wide > hi)
        if out_of_range.any():
            bad = int(np.flatnonzero(out_of_range)[0])
            raise _at(OutOfRangeError("%s[%d] = %d is outside [%d, %d]" % (what, bad, int(arr[bad]), lo, hi)), bad)
        arr = arr.astype(dtype)
    return np.ascontiguousarray(arr)


def _at(error, index: int):
    """error with the offending element's index attached (for callers that
    rephrase it in their own coordinates)."""
    error.index = index
    return error


def int32_array(values: Any, what: str) -> np.ndarray:
    return int_array(values, np.int32, what, INT32_MIN, INT32_MAX)


def int64_array(values: Any, what: str) -> np.ndarray:
    return int_array(values, np.int64, what, -(2**63), 2**63 - 1)


def host_buffer(arr: np.ndarray, ctype: str):
    """A cdata pointer to a C-contiguous numpy array (kept alive by the caller)."""
    return ffi.from_buffer(ctype, arr)


def int32_rows(bitmask: Any, what: str = "bitmask", writable: bool = True) -> Tuple[Any, int, int]:
    """(pointer, n_rows, bitmask_row_words) of a CPU int32 bitmask: a C-contiguous
    numpy array or torch tensor of 1 (one row) or 2 dimensions."""
    torch = torch_tensor_module(bitmask)
    if torch is not None:
        if bitmask.dtype != torch.int32:
            raise InvalidArgumentError("%s: want dtype int32, got %s" % (what, describe(bitmask)))
        if bitmask.device.type != "cpu":
            raise InvalidArgumentError(
                "%s: %s is not on the CPU; fill a CPU bitmask (pinned for a fast copy) and move it"
                " explicitly" % (what, describe(bitmask)))
        if not bitmask.is_contiguous():
            raise InvalidArgumentError("%s: %s is not contiguous" % (what, describe(bitmask)))
        shape = tuple(bitmask.shape)
        pointer = ffi.cast("int32_t *", bitmask.data_ptr())
    elif isinstance(bitmask, np.ndarray):
        if bitmask.dtype != np.int32:
            raise InvalidArgumentError("%s: want dtype int32, got %s" % (what, describe(bitmask)))
        if not bitmask.flags.c_contiguous:
            raise InvalidArgumentError("%s: %s is not C-contiguous" % (what, describe(bitmask)))
        if writable and not bitmask.flags.writeable:
            raise InvalidArgumentError("%s: the array is read-only" % what)
        shape = bitmask.shape
        pointer = ffi.from_buffer("int32_t[]", bitmask, require_writable=writable)
    else:
        raise InvalidArgumentError(
            "%s: want a numpy.ndarray or torch.Tensor of int32, got %s" % (what, describe(bitmask)))
    if len(shape) == 2:
        return pointer, shape[0], shape[1]
    if len(shape) == 1:
        return pointer, 1, shape[0]
    raise InvalidArgumentError("%s: want 1 or 2 dimensions, got shape %s" % (what, shape))


def bitmask_row(bitmask: Any, index: int, words_needed: int):
    """(pointer to row `index`, words in the row) after the checks of
    int32_rows and a row-length check."""
    pointer, n_rows, words = int32_rows(bitmask)
    if not 0 <= index < n_rows:
        raise OutOfRangeError("index %d is outside the bitmask's %d rows" % (index, n_rows))
    if words < words_needed:
        raise BufferTooSmallError(
            "bitmask rows have %d words, the trie's vocab_size needs %d" % (words, words_needed))
    return pointer + index * words, words


def exclusive(cls, lock_attr: str = "_busy", also: Tuple[str, ...] = ()):
    """Wraps every public method and property of cls (and of the treemask
    mixins it defines them in; never a base class of another package, such
    as an engine's processor interface) and the methods named in ``also``
    (``__call__``) so that two threads using one object at once get
    InvalidStateError instead of corrupting its state: each call takes the
    object's lock without blocking. The lock is reentrant, so a method may
    call another of the same object. An int argument too large for its C
    type (cffi's OverflowError) becomes OutOfRangeError, so every error is a
    treemask.Error."""
    import functools

    from .errors import InvalidStateError, OutOfRangeError

    def guard(name, fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            lock = getattr(self, lock_attr)
            if not lock.acquire(False):
                raise InvalidStateError(
                    "%s.%s: this object is being used by another thread right now; a %s serves one thread"
                    " at a time (give each thread its own, e.g. with clone())"
                    % (type(self).__name__, name, type(self).__name__))
            try:
                return fn(self, *args, **kwargs)
            except OverflowError as e:
                raise OutOfRangeError("%s.%s: an argument is out of range (%s)"
                                      % (type(self).__name__, name, e)) from None
            finally:
                lock.release()
        return wrapper

    for klass in cls.__mro__:
        if klass is object or "_exclusive_wrapped" in vars(klass) \
                or not klass.__module__.startswith(__name__.rsplit(".", 1)[0] + "."):
            continue
        for name, value in list(vars(klass).items()):
            if name.startswith("_") and name not in also:
                continue
            if isinstance(value, property) and value.fget is not None:
                wrapped = property(guard(name, value.fget), value.fset and guard(name, value.fset), None,
                                   value.__doc__)
            elif callable(value) and not isinstance(value, (staticmethod, classmethod, type)):
                wrapped = guard(name, value)
            else:
                continue
            setattr(klass, name, wrapped)
        klass._exclusive_wrapped = True
    return cls
