"""Bitmask helpers and logits masking, for numpy arrays and torch tensors.

The layout is xgrammar's: int32 words, shape ``(batch, ceil(vocab_size /
32))``, token t is bit ``t % 32`` of word ``t // 32``, 1 = allowed. Masks made
by xgrammar, llguidance or outlines work here and the other way round.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, Sequence, Tuple

import numpy as np

from . import _buffers
from ._ffi import ffi, lib
from .errors import InvalidArgumentError, UnsupportedError, last_error, raise_status

__all__ = [
    "get_bitmask_shape",
    "allocate_token_bitmask",
    "reset_token_bitmask",
    "apply_token_bitmask_inplace",
    "cuda_available",
    "cpu_kernel_isa",
]


def get_bitmask_shape(batch_size: int, vocab_size: int) -> Tuple[int, int]:
    """``(batch_size, ceil(vocab_size / 32))``."""
    if batch_size < 0 or vocab_size < 0:
        raise InvalidArgumentError("batch_size %d and vocab_size %d must be >= 0" % (batch_size, vocab_size))
    return (batch_size, (vocab_size + 31) // 32)


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> np.ndarray:
    """A numpy int32 bitmask of :func:`get_bitmask_shape` filled with -1 (every
    token allowed). ``treemask.torch.allocate_token_bitmask`` returns a torch
    tensor instead."""
    return np.full(get_bitmask_shape(batch_size, vocab_size), -1, dtype=np.int32)


def reset_token_bitmask(bitmask: Any) -> None:
    """Sets every word of a numpy or torch bitmask to -1 (all allowed)."""
    if isinstance(bitmask, np.ndarray) or _buffers.torch_tensor_module(bitmask) is not None:
        bitmask.fill(-1) if isinstance(bitmask, np.ndarray) else bitmask.fill_(-1)
        return
    raise InvalidArgumentError("reset_token_bitmask: want a numpy.ndarray or torch.Tensor, got %s"
                               % _buffers.describe(bitmask))


def cuda_available() -> bool:
    """True iff libtreemask was built with CUDA and a usable device is present."""
    return bool(lib.treemask_cuda_available())


def cpu_kernel_isa() -> str:
    """The instruction set of the CPU apply kernel: "avx2" or "scalar"."""
    return ffi.string(lib.treemask_cpu_kernel_isa()).decode("ascii")


class _Logits:
    """What the apply kernels need to know about a logits array."""

    __slots__ = ("pointer", "dtype", "n_rows", "row_stride", "width", "device", "torch", "one_dim")
    pointer: Any
    dtype: int
    n_rows: int
    row_stride: int
    width: int
    device: Any
    torch: Any
    one_dim: bool


def _logits_view(logits: Any, writable: bool = True) -> _Logits:
    view = _Logits()
    torch = _buffers.torch_tensor_module(logits)
    view.torch = torch
    if torch is not None:
        name = str(logits.dtype).replace("torch.", "")
        shape, strides = tuple(logits.shape), tuple(logits.stride())
        view.device = logits.device
        itemsize = logits.element_size()
    elif isinstance(logits, np.ndarray):
        name = logits.dtype.name
        shape = logits.shape
        itemsize = logits.dtype.itemsize
        strides = tuple(s // itemsize if s % itemsize == 0 else -1 for s in logits.strides)
        view.device = None
        if writable and not logits.flags.writeable:
            raise InvalidArgumentError("logits: the array is read-only")
    else:
        raise InvalidArgumentError("logits: want a numpy.ndarray or torch.Tensor, got %s"
                                   % _buffers.describe(logits))
    if name not in _buffers.DTYPE_CODES:
        raise InvalidArgumentError("logits: want float32, float16 or bfloat16, got %s"
                                   % _buffers.describe(logits))
    view.dtype = _buffers.DTYPE_CODES[name]
    view.one_dim = len(shape) == 1
    if len(shape) == 1:
        shape, strides = (1, *shape), (shape[0], *strides)
    if len(shape) != 2:
        raise InvalidArgumentError("logits: want 1 or 2 dimensions, got %s" % _buffers.describe(logits))
    view.n_rows, view.width = shape
    # An empty array's strides mean nothing (numpy gives (0, 0)): 0 rows is
    # an empty batch, which every caller handles as one.
    if view.width and view.n_rows and strides[1] != 1:
        raise InvalidArgumentError("logits: the vocab dimension must be contiguous (stride 1), got strides %s"
                                   % (strides,))
    view.row_stride = strides[0] if view.n_rows > 1 else view.width
    if view.n_rows > 1 and view.row_stride < view.width:
        raise InvalidArgumentError("logits: rows overlap (row stride %d < width %d)"
                                   % (view.row_stride, view.width))
    if torch is not None:
        view.pointer = logits.data_ptr()
    elif logits.flags.c_contiguous:
        view.pointer = ffi.from_buffer(logits)
    else:
        view.pointer = logits.__array_interface__["data"][0]
    return view


def _bitmask_view(bitmask: Any):
    """(pointer, n_rows, bitmask_row_words, device) of a bitmask on any device."""
    torch = _buffers.torch_tensor_module(bitmask)
    if torch is not None and bitmask.device.type != "cpu":
        if bitmask.dtype != torch.int32:
            raise InvalidArgumentError("bitmask: want dtype int32, got %s" % _buffers.describe(bitmask))
        if not bitmask.is_contiguous():
            raise InvalidArgumentError("bitmask: %s is not contiguous" % _buffers.describe(bitmask))
        if bitmask.dim() not in (1, 2):
            raise InvalidArgumentError("bitmask: want 1 or 2 dimensions, got %s" % _buffers.describe(bitmask))
        n_rows, words = (1, bitmask.shape[0]) if bitmask.dim() == 1 else tuple(bitmask.shape)
        return bitmask.data_ptr(), n_rows, words, bitmask.device
    pointer, n_rows, words = _buffers.int32_rows(bitmask, writable=False)
    return pointer, n_rows, words, bitmask.device if torch is not None else None


def apply_token_bitmask_inplace(logits: Any, bitmask: Any, *, vocab_size: Optional[int] = None,
                                indices: Optional[Sequence[int]] = None, n_threads: int = 1) -> None:
    """Sets ``logits[r, t] = -inf`` wherever bit t of bitmask row r is 0, and
    for every column at or past ``vocab_size``.

    Args:
        logits: float32 / float16 / bfloat16, shape ``(rows, width)`` or
            ``(width,)``; a numpy array or a torch tensor (CPU or CUDA). Rows
            may be strided (a slice of a wider buffer); the vocab dimension
            must be contiguous.
        bitmask: int32, shape ``(rows, words)`` or ``(words,)``, on the same
            device as ``logits`` (numpy counts as CPU). Bits at or above
            ``vocab_size`` are ignored.
        vocab_size: default ``min(width, 32 * words)`` (xgrammar's rule).
        indices: only these rows are masked; index i masks logits row i
            with bitmask row i, so both must have it, but (as in xgrammar)
            logits and bitmask may then have different row counts. Without
            indices both must have the same number of rows.
        n_threads: CPU only: up to this many threads (the caller's and
            ``n_threads - 1`` from a pool created on first use) split the
            rows, each taking at least 1 MiB of logits. Masking is bound by
            memory bandwidth, which one core does not saturate on most
            machines. The result is the same for any value.

    CPU arrays go through treemask's CPU kernel (AVX2 where available); CUDA
    tensors through its CUDA kernel on the tensor's current stream. Nothing
    is ever copied between devices: a bitmask on another device than the
    logits is an error, and so is a CUDA tensor when this libtreemask has no
    usable CUDA (:func:`cuda_available`).
    """
    calls = _cuda_calls  # set by the first CUDA call
    if calls is not None and indices is None and n_threads == 1 and isinstance(logits, calls.tensor) \
            and logits.is_cuda and _apply_cuda_fast(calls.torch, logits, bitmask, vocab_size):
        return
    if n_threads != 1:
        n_threads = _buffers.thread_count(n_threads)
    torch = _buffers.torch_tensor_module(logits)
    if torch is not None and indices is None and logits.is_cuda and _apply_cuda_fast(torch, logits, bitmask,
                                                                                         vocab_size):
        return
    n_threads = _buffers.thread_count(n_threads)
    view = _logits_view(logits)
    mask_pointer, mask_rows, words, vocab_size = _check_apply(view, bitmask, vocab_size, indices)
    if view.n_rows == 0 or view.width == 0:
        return
    if view.device is None or view.device.type == "cpu":
        _apply_cpu(view, mask_pointer, mask_rows, words, vocab_size, indices, n_threads)
    else:
        _apply_cuda(logits, view, mask_pointer, mask_rows, words, vocab_size, indices)


class _CudaCalls:
    """What the CUDA fast path looks up once per process: the dtype codes by
    torch dtype object, and torch's own C accessors of the current device and
    of a device's current stream (a Stream object and a device guard cost
    microseconds per call)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.tensor = torch.Tensor
        self.int32 = torch.int32
        self.dtypes = {torch.float32: lib.TREEMASK_F32, torch.float16: lib.TREEMASK_F16,
                       torch.bfloat16: lib.TREEMASK_BF16}
        self.get_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
        self.raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) \
            or (lambda index: torch.cuda.current_stream(index).cuda_stream)


_cuda_calls: Optional[_CudaCalls] = None


def _apply_cuda_fast(torch: Any, logits: Any, bitmask: Any, vocab_size: Optional[int]) -> bool:
    """apply_token_bitmask_inplace for the common CUDA call (tensors of a
    supported dtype on one device, vocab dimension contiguous, a contiguous
    int32 bitmask with a row per logits row, no indices) with only the
    checks that decide the arguments; the library checks them again and
    the CUDA state, but takes torch's word that both are memory of the
    device (TREEMASK_CUDA_CALLER_CHECKED_POINTERS: no runtime query per
    pointer, so both must be CUDA tensors of it). Returns False, having done nothing,
    for anything else: the general path then runs and explains what is
    wrong. Every step counts here (one call per decode step; ~1.1 us of
    Python against ~2.6 us for the first form of this path, on a 2-core
    VM, tests/bench/bench_cuda_python.py --host-overhead): one strides
    tuple, no argument tuple, pointers passed as integers to the module's
    shim (a cdata cast costs ~0.3 us each), torch's raw accessors called
    directly."""
    global _cuda_calls
    calls = _cuda_calls
    if calls is None or calls.torch is not torch:
        calls = _cuda_calls = _CudaCalls(torch)
    dtype = calls.dtypes.get(logits.dtype)
    if dtype is None or bitmask.__class__ is not logits.__class__ or bitmask.dtype is not calls.int32 \
            or not bitmask.is_contiguous():
        return False
    shape, strides = logits.shape, logits.stride()
    if len(shape) == 2:
        n_rows, width = shape
        row_stride = strides[0] if n_rows > 1 else width
        column_stride = strides[1]
    elif len(shape) == 1:
        n_rows, width = 1, shape[0]
        row_stride, column_stride = width, strides[0]
    else:
        return False
    mask_shape = bitmask.shape
    if len(mask_shape) == 2:
        mask_rows, words = mask_shape
    elif len(mask_shape) == 1:
        mask_rows, words = 1, mask_shape[0]
    else:
        return False
    index = logits.get_device()
    if (width > 1 and column_stride != 1) or mask_rows != n_rows or bitmask.get_device() != index \
            or not bitmask.is_cuda or row_stride < width:
        return False
    limit = 32 * words
    if vocab_size is None:
        vocab_size = width if width < limit else limit
    elif not 0 < vocab_size <= width or vocab_size > limit:
        return False
    if n_rows == 0 or width == 0:
        return True
    # Both are CUDA tensors of device `index`, made current here: the
    # library may take our word for the pointers (no runtime query per
    # pointer and call: TREEMASK_CUDA_CALLER_CHECKED_POINTERS), and they
    # pass as integers (the module's own shim: no cdata cast per pointer).
    if calls.get_device() == index:
        status = lib.treemask_py_cuda_apply_token_bitmask(
            logits.data_ptr(), dtype, n_rows, row_stride, width, bitmask.data_ptr(), words, mask_rows, vocab_size,
            calls.raw_stream(index))
    else:  # the kernel runs on the current device
        with torch.cuda.device(index):
            status = lib.treemask_py_cuda_apply_token_bitmask(
                logits.data_ptr(), dtype, n_rows, row_stride, width, bitmask.data_ptr(), words, mask_rows,
                vocab_size, calls.raw_stream(index))
    if status:
        _raise_cuda_status(status, logits.device)
    return True


def _raise_cuda_status(status: int, device: Any) -> None:
    if status == lib.TREEMASK_ERR_UNSUPPORTED:
        raise UnsupportedError(
            "logits are on %s but this libtreemask has no usable CUDA (built without it, or no driver or"
            " device): treemask.cuda_available() is False (%s)" % (device, last_error()))
    raise_status(status)


def apply_token_bitmask(logits: Any, bitmask: Any, *, vocab_size: Optional[int] = None,
                        indices: Optional[Sequence[int]] = None, out: Any = None, n_threads: int = 1) -> Any:
    """:func:`apply_token_bitmask_inplace` out of place: returns a new
    C-contiguous array or tensor (same type, dtype, shape and device) holding
    the masked logits, and leaves ``logits`` unchanged. Rows that
    ``indices`` does not select are copied as they are.

    On the CPU it is one fused pass (treemask_cpu_apply_token_bitmask_out:
    each row is read once, copied and masked while in cache), so it costs
    about what the in-place form costs plus writing the output once. CUDA
    tensors are cloned and then masked in place by treemask's CUDA kernel.

    ``out``: where to write (default: a new array), of the same type, shape,
    dtype and device as ``logits``, not overlapping it. Reusing one saves
    the page faults of a fresh allocation (several ms for 32 x 152k logits).
    ``n_threads``: as for :func:`apply_token_bitmask_inplace` (CPU, without
    indices).
    """
    n_threads = _buffers.thread_count(n_threads)
    view = _logits_view(logits, writable=False)
    mask_pointer, mask_rows, words, vocab_size = _check_apply(view, bitmask, vocab_size, indices)
    torch = view.torch
    if out is not None:
        if type(out) is not type(logits) or tuple(out.shape) != tuple(logits.shape) or out.dtype != logits.dtype \
                or (torch is not None and out.device != logits.device):
            raise InvalidArgumentError("out: want the type, shape, dtype and device of logits (%s), got %s"
                                       % (_buffers.describe(logits), _buffers.describe(out)))
    if torch is not None and view.device.type != "cpu":
        if out is None:
            out = logits.clone(memory_format=torch.contiguous_format)
        else:
            out.copy_(logits)
        apply_token_bitmask_inplace(out, bitmask, vocab_size=vocab_size, indices=indices)
        return out
    if out is not None:
        pass
    elif torch is not None:
        out = torch.empty_like(logits, memory_format=torch.contiguous_format)
    else:
        out = np.empty_like(logits, order="C")
    if view.n_rows == 0 or view.width == 0:
        out[...] = logits
        return out
    out_view = _logits_view(out)
    keep = None if indices is None else _buffers.int32_array(indices, "indices")
    index_pointer = _buffers.host_buffer(keep, "int32_t[]") if keep is not None and keep.size else ffi.NULL
    n_indices = 0 if keep is None else keep.size
    if keep is not None and n_indices == 0:
        out[...] = logits
        return out
    src = ffi.cast("const char *", view.pointer)
    dst = ffi.cast("char *", out_view.pointer)
    mask = ffi.cast("const int32_t *", mask_pointer)
    itemsize = 4 if view.dtype == lib.TREEMASK_F32 else 2
    n_parts = 1 if keep is not None else max(1, min(n_threads, view.n_rows,
                                                     view.n_rows * view.width * itemsize // _MIN_BYTES_PER_THREAD))
    bounds = [view.n_rows * i // n_parts for i in range(n_parts + 1)]

    def part(i: int):
        lo, hi = bounds[i], bounds[i + 1]
        if keep is not None:
            status = lib.treemask_cpu_apply_token_bitmask_out(
                src, dst, view.dtype, view.n_rows, view.row_stride, out_view.row_stride, view.width, mask, words,
                mask_rows, vocab_size, index_pointer, n_indices)
        else:
            status = lib.treemask_cpu_apply_token_bitmask_out(
                src + lo * view.row_stride * itemsize, dst + lo * out_view.row_stride * itemsize, view.dtype,
                hi - lo, view.row_stride, out_view.row_stride, view.width, mask + lo * words, words, hi - lo,
                vocab_size, ffi.NULL, 0)
        return status, (last_error() if status else None)

    _run_parts(n_parts, part)
    return out


def _check_apply(view: _Logits, bitmask: Any, vocab_size: Optional[int], indices):
    """The checks both apply forms share; returns (bitmask pointer, its
    rows, its words per row, the vocab_size to use)."""
    mask_pointer, mask_rows, words, mask_device = _bitmask_view(bitmask)
    logits_device = view.device if view.device is not None and view.device.type != "cpu" else None
    if mask_device is not None and mask_device.type == "cpu":
        mask_device = None
    if logits_device != mask_device:
        raise InvalidArgumentError(
            "logits are on %s but the bitmask is on %s: move one explicitly (treemask never copies"
            " between devices)" % (logits_device or "cpu", mask_device or "cpu"))
    if indices is None and mask_rows != view.n_rows:
        raise InvalidArgumentError("logits have %d rows but the bitmask has %d (without indices every logits"
                                   " row is masked with its bitmask row)" % (view.n_rows, mask_rows))
    if vocab_size is None:
        vocab_size = min(view.width, 32 * words)
    elif not 0 < vocab_size <= view.width:
        raise InvalidArgumentError("vocab_size %d: want 1 .. the logits width %d" % (vocab_size, view.width))
    if vocab_size > 32 * words:
        raise InvalidArgumentError("vocab_size %d needs %d bitmask words per row, the bitmask has %d"
                                   % (vocab_size, (vocab_size + 31) // 32, words))
    return mask_pointer, mask_rows, words, vocab_size


# Each thread of a threaded CPU apply masks at least this many bytes of
# logits: below it, handing work to a thread costs more than it saves.
_MIN_BYTES_PER_THREAD = 1 << 20

_pool: Optional[ThreadPoolExecutor] = None
_pool_size = 0
_pool_lock = threading.Lock()


def _apply_pool(n_workers: int) -> ThreadPoolExecutor:
    """The shared worker pool, grown (never shrunk) to n_workers threads."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < n_workers:
            old = _pool
            _pool, _pool_size = ThreadPoolExecutor(n_workers, thread_name_prefix="treemask-apply"), n_workers
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def _run_parts(n_parts: int, part: Callable[[int], Tuple[int, Optional[str]]]) -> None:
    """Runs part(0) on this thread and part(1 .. n_parts - 1) on the shared
    pool; each returns (status, message). Raises for the first failure."""
    if n_parts == 1:
        results = [part(0)]
    else:
        futures = [_apply_pool(n_parts - 1).submit(part, i) for i in range(1, n_parts)]
        results = [part(0)] + [f.result() for f in futures]
    for status, message in results:
        if status:
            raise_status(status, message=message)


def _apply_cpu(view: _Logits, mask_pointer, mask_rows: int, words: int, vocab_size: int, indices,
               n_threads: int) -> None:
    keep = None
    if indices is not None:
        keep = _buffers.int32_array(indices, "indices")
        if keep.size == 0:
            return
    logits_pointer = ffi.cast("char *", view.pointer)
    mask = ffi.cast("const int32_t *", mask_pointer)
    index_buffer = _buffers.host_buffer(keep, "int32_t[]") if keep is not None else None
    index_base = ffi.cast("const int32_t *", index_buffer) if keep is not None else None
    n_work = keep.size if keep is not None else view.n_rows
    itemsize = 4 if view.dtype == lib.TREEMASK_F32 else 2
    n_parts = max(1, min(n_threads, n_work, n_work * view.width * itemsize // _MIN_BYTES_PER_THREAD))
    if n_parts > 1 and keep is not None and not (keep.min() >= 0 and keep.max() < min(view.n_rows, mask_rows)):
        n_parts = 1  # one call reports the bad index before writing anything
    bounds = [n_work * i // n_parts for i in range(n_parts + 1)]

    def part(i: int):
        """Masks rows (or indices) bounds[i] .. bounds[i + 1]; returns
        (status, message), the message read on the thread that failed."""
        lo, hi = bounds[i], bounds[i + 1]
        if index_base is not None:
            # indices address rows of the whole arrays: same bases, a slice of the list.
            status = lib.treemask_cpu_apply_token_bitmask(
                logits_pointer, view.dtype, view.n_rows, view.row_stride, view.width, mask, words, mask_rows,
                vocab_size, index_base + lo, hi - lo)
        else:
            status = lib.treemask_cpu_apply_token_bitmask(
                logits_pointer + lo * view.row_stride * itemsize, view.dtype, hi - lo, view.row_stride,
                view.width, mask + lo * words, words, hi - lo, vocab_size, ffi.NULL, 0)
        return status, (last_error() if status else None)

    _run_parts(n_parts, part)


def _apply_cuda(logits: Any, view: _Logits, mask_pointer, mask_rows: int, words: int, vocab_size: int,
                indices) -> None:
    torch = view.torch
    with torch.cuda.device(view.device):
        stream = torch.cuda.current_stream(view.device).cuda_stream
        index_pointer, n_indices, keep = ffi.NULL, 0, None
        if indices is not None:
            if _buffers.torch_tensor_module(indices) is not None and indices.device == view.device:
                keep = indices.to(torch.int32).contiguous()
            else:
                # A small host list of row numbers; the kernel needs it on the device.
                keep = torch.as_tensor(_buffers.int32_array(indices, "indices"), device=view.device)
            n_indices = keep.numel()
            if n_indices == 0:
                return
            index_pointer = ffi.cast("const int32_t *", keep.data_ptr())
        status = lib.treemask_cuda_apply_token_bitmask(
            ffi.cast("void *", view.pointer), view.dtype, view.n_rows, view.row_stride, view.width,
            ffi.cast("const int32_t *", mask_pointer), words, mask_rows, vocab_size, index_pointer, n_indices,
            ffi.cast("void *", stream))
        if status:
            _raise_cuda_status(status, view.device)
