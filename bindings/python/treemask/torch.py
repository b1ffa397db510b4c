"""PyTorch interop: bitmasks as tensors, and the device-resident trie whose
advance + fill step and exact beam step run on the GPU with no host round
trip.

Importing this module imports torch; the rest of the package never does.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import contextlib
import operator
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np
import torch

from . import _buffers
from ._ffi import ffi, lib
from .beam import BeamStep, _float32_scores, _rows_per_request, check_topk_k, initial_scores
from .bitmask import apply_token_bitmask_inplace, cuda_available, get_bitmask_shape, reset_token_bitmask
from .errors import InternalError, InvalidArgumentError, InvalidStateError, UnsupportedError, last_error, raise_status
from .failure_policy import LIBRARY_DEFAULT, failure_policy_code
from .trie import STATE_FAILED, STATE_ROOT, STATE_TERMINATED, Trie

__all__ = [
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "get_bitmask_shape",
    "reset_token_bitmask",
    "DeviceTrie",
    "DeviceBeam",
    "DeviceRowStates",
    "batch_beam_step",
    "STATE_ROOT",
    "STATE_TERMINATED",
    "STATE_FAILED",
]

# STATE_TERMINATED as an int32 state tensor holds it.
TERMINATED_INT32 = int(np.array([STATE_TERMINATED], dtype=np.uint32).view(np.int32)[0])


# The three places this module meets the CUDA runtime, as functions so that
# the CPU tests can run the wrappers over host memory with the host twins
# (tests/python/host_cuda.py).
def _resolve_device(device: Union[torch.device, str, int, None]) -> torch.device:
    """A CUDA device with its index (default: the current one)."""
    dev = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if dev.type != "cuda":
        raise InvalidArgumentError("device %s is not a CUDA device" % dev)
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


# torch's own C accessors, when this torch has them: a Stream object and a
# device guard cost microseconds per call, which a decode step pays each time.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_get_device = getattr(torch._C, "_cuda_getDevice", None)


_VOID_P = ffi.typeof("void *")  # a cast by type object skips parsing the type
# The flag of the calls whose every pointer is a tensor this module checked
# to be on the trie's device, made current (or a buffer of its own there):
# the library then makes no runtime query per pointer (treemask_cuda.h).
_CALLER_CHECKED = lib.TREEMASK_CUDA_CALLER_CHECKED_POINTERS


# The streams' `void *` by handle: a cdata cast costs ~0.3 us, a dict hit a
# tenth of that, and a process uses a handful of streams (cleared past 256).
_STREAM_POINTERS: dict = {}


def _stream_handle(device: torch.device) -> int:
    """The current stream of `device` as an integer (the module's shims take it so)."""
    return _raw_stream(device.index) if _raw_stream is not None else torch.cuda.current_stream(device).cuda_stream


def _stream(device: torch.device):
    """The current stream of `device` as the C API's `void *`."""
    raw = _stream_handle(device)
    pointer = _STREAM_POINTERS.get(raw)
    if pointer is None:
        if len(_STREAM_POINTERS) >= 256:
            _STREAM_POINTERS.clear()
        pointer = _STREAM_POINTERS[raw] = ffi.cast(_VOID_P, raw)
    return pointer


_NO_GUARD = contextlib.nullcontext()  # reusable: it holds nothing


def _on_device(device: torch.device):
    """A context that makes `device` current (the library checks pointers
    against the current device); nothing to do when it is already."""
    current = _get_device() if _get_device is not None else torch.cuda.current_device()
    return _NO_GUARD if current == device.index else torch.cuda.device(device)


# The logits dtypes by torch dtype object (str(dtype) costs more than the rest
# of a check).
_LOGITS_DTYPES = {getattr(torch, name): code for name, code in _buffers.DTYPE_CODES.items()}


# Top-k counts are size_t in the C API and int64 tensors here.
assert ffi.sizeof("size_t") == 8, "treemask.torch needs a 64-bit size_t"


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> torch.Tensor:
    """A CPU int32 tensor of :func:`get_bitmask_shape` filled with -1 (all
    allowed); pinned when CUDA is available, so a copy to the GPU can be
    asynchronous (as xgrammar does)."""
    return torch.full(get_bitmask_shape(batch_size, vocab_size), -1, dtype=torch.int32,
                      pin_memory=torch.cuda.is_available())


def _device_array(tensor: Any, what: str, dtypes, device: torch.device, n: int):
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError("%s: want a torch.Tensor on %s, got %s" % (what, device, _buffers.describe(tensor)))
    if tensor.device != device:
        raise InvalidArgumentError("%s: %s is not on %s, the device of the trie (treemask never copies between"
                                   " devices)" % (what, _buffers.describe(tensor), device))
    if tensor.dtype not in dtypes:
        raise InvalidArgumentError("%s: want dtype %s, got %s" % (
            what, " or ".join(str(d).replace("torch.", "") for d in dtypes), _buffers.describe(tensor)))
    if not tensor.is_contiguous():
        raise InvalidArgumentError("%s: %s is not contiguous" % (what, _buffers.describe(tensor)))
    if tensor.numel() != n:
        raise InvalidArgumentError("%s: want %d elements, got %s" % (what, n, _buffers.describe(tensor)))
    return tensor.data_ptr()


_STATE_DTYPES = tuple(d for d in (torch.int32, getattr(torch, "uint32", None)) if d is not None)


class DeviceTrie:
    """A trie's arrays in GPU memory, for the fused constrained step: advance
    every row's state by its sampled token and write the next bitmask rows
    (or -inf straight into the logits) in one kernel launch on the current
    stream, with no host synchronisation or allocation, so it can be
    captured in a CUDA graph.

    States live in a device tensor of int32 (or uint32) with one entry per
    row: a node id (0 = the root), or the reserved STATE_TERMINATED
    (0xFFFFFFFE, -2 as int32) / STATE_FAILED (0xFFFFFFFF, -1 as int32).
    Beam reordering is a gather on that tensor. The rules are those of
    :meth:`Trie.advance_states` / :meth:`Trie.fill_states`.

    Args:
        trie: the host trie to copy (once; the upload waits for the stream).
        device: a CUDA device (default: the current one).

    Any number of threads may use one DeviceTrie at once, each on its own
    stream (the device arrays are immutable; :meth:`beam_step` keeps one
    scratch buffer per stream).

    Raises UnsupportedError when this libtreemask has no usable CUDA, and for
    a string-set trie (its masks come from a walk on the host).
    """

    __slots__ = ("_ptr", "device", "vocab_size", "bitmask_words", "_workspace", "__weakref__")

    def __init__(self, trie: Trie, device: Union[torch.device, str, int, None] = None) -> None:
        if not isinstance(trie, Trie):
            raise InvalidArgumentError("trie must be a treemask.Trie, got %s" % type(trie).__name__)
        if trie.is_string_set:
            raise UnsupportedError("DeviceTrie: a string-set trie (Trie.from_strings) cannot be uploaded: the device"
                                   " steps walk token paths only; fill its rows on the host (Matcher,"
                                   " Trie.fill_states) and apply them on the device (apply_token_bitmask_inplace)")
        if not cuda_available():
            raise UnsupportedError("DeviceTrie needs CUDA: this libtreemask was built without it or finds no"
                                   " usable device (treemask.cuda_available() is False)")
        dev = _resolve_device(device)
        out = ffi.new("treemask_cuda_trie **")
        with _on_device(dev):
            status = lib.treemask_cuda_trie_upload(trie._ptr, _stream(dev), out)
        if status:
            raise_status(status)
        self._ptr = ffi.gc(out[0], lib.treemask_cuda_trie_free)
        self.device = dev
        self.vocab_size = trie.vocab_size
        self.bitmask_words = trie.bitmask_words
        # beam_step's scratch and the shape it last served, one per CUDA
        # stream: two threads stepping on two streams at once must not share
        # one (the kernels of both would write it concurrently); on one stream
        # the stream orders them.
        self._workspace: Dict[int, Tuple[torch.Tensor, Tuple[int, int]]] = {}

    def new_states(self, batch_size: int) -> torch.Tensor:
        """A device int32 state tensor with every row at the root."""
        return torch.zeros(batch_size, dtype=torch.int32, device=self.device)

    def _step_args(self, states: torch.Tensor, tokens: Optional[torch.Tensor], accepted: Optional[torch.Tensor]):
        n = states.numel() if isinstance(states, torch.Tensor) else -1
        states_ptr = _device_array(states, "states", _STATE_DTYPES, self.device, n)
        tokens_ptr = ffi.NULL if tokens is None else ffi.cast(
            "const int32_t *", _device_array(tokens, "tokens", (torch.int32,), self.device, n))
        accepted_ptr = ffi.NULL if accepted is None else ffi.cast(
            "uint8_t *", _device_array(accepted, "accepted", (torch.uint8, torch.bool), self.device, n))
        return ffi.cast("uint32_t *", states_ptr), tokens_ptr, n, accepted_ptr

    def advance_fill_bitmask(self, states: torch.Tensor, tokens: Optional[torch.Tensor], bitmask: torch.Tensor, *,
                             failure_policy: Union[str, int] = LIBRARY_DEFAULT,
                             accepted: Optional[torch.Tensor] = None) -> None:
        """One step: ``states`` (updated in place) advance by ``tokens`` (int32,
        one per row, < 0 = no token; None = fill only), then bitmask row r
        receives the allowed set of the new state r. ``accepted`` (optional
        uint8/bool tensor) gets 1 where the token was accepted. All tensors
        on this trie's device; enqueued on its current stream."""
        states_ptr, tokens_ptr, n, accepted_ptr = self._step_args(states, tokens, accepted)
        if not isinstance(bitmask, torch.Tensor) or bitmask.dim() != 2 or bitmask.shape[0] != n:
            raise InvalidArgumentError("bitmask: want a 2-D int32 tensor with %d rows, got %s"
                                       % (n, _buffers.describe(bitmask)))
        mask_ptr = _device_array(bitmask, "bitmask", (torch.int32,), self.device, bitmask.numel())
        with _on_device(self.device):
            status = lib.treemask_cuda_trie_advance_fill_bitmask(
                self._ptr, states_ptr, tokens_ptr, n, failure_policy_code(failure_policy), accepted_ptr,
                ffi.cast("int32_t *", mask_ptr), bitmask.shape[1], _stream(self.device))
        if status:
            raise_status(status)

    def advance_mask_logits(self, states: torch.Tensor, tokens: Optional[torch.Tensor], logits: torch.Tensor, *,
                            failure_policy: Union[str, int] = LIBRARY_DEFAULT,
                            accepted: Optional[torch.Tensor] = None) -> None:
        """The same step writing -inf straight into ``logits`` (float32 /
        float16 / bfloat16, shape ``(rows, width)``, width >= vocab_size,
        vocab dimension contiguous) instead of a bitmask."""
        states_ptr, tokens_ptr, n, accepted_ptr = self._step_args(states, tokens, accepted)
        dtype, row_stride = self._logits_rows(logits, n)
        with _on_device(self.device):
            status = lib.treemask_cuda_trie_advance_mask_logits(
                self._ptr, states_ptr, tokens_ptr, n, failure_policy_code(failure_policy), accepted_ptr,
                ffi.cast("void *", logits.data_ptr()), dtype, row_stride, logits.shape[1], _stream(self.device))
        if status:
            raise_status(status)

    def advance_states(self, states: torch.Tensor, tokens: torch.Tensor, *,
                       failure_policy: Union[str, int] = LIBRARY_DEFAULT,
                       accepted: Optional[torch.Tensor] = None) -> None:
        """The advance alone (:meth:`Trie.advance_states` on the device):
        ``states`` advance by ``tokens`` in place; nothing is filled."""
        if tokens is None:
            raise InvalidArgumentError("tokens: want an int32 tensor, got None")
        states_ptr, tokens_ptr, n, accepted_ptr = self._step_args(states, tokens, accepted)
        with _on_device(self.device):
            status = lib.treemask_cuda_trie_advance_states(
                self._ptr, states_ptr, tokens_ptr, n, failure_policy_code(failure_policy), accepted_ptr,
                _stream(self.device))
        if status:
            raise_status(status)

    def follow_rows(self, tokens: torch.Tensor, states: torch.Tensor, keys: torch.Tensor, *,
                    prev: Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = None,
                    failure_policy: Union[str, int] = LIBRARY_DEFAULT) -> None:
        """The state of every row of ``tokens`` (an int64 tensor ``(rows,
        n)`` whose rows may be strided, e.g. ``input_ids[:, prompt:]``),
        written to ``states`` (int32 / uint32, one per row) with a hash of
        the row to ``keys`` (int64, one per row): on the device, without a
        host round trip, whatever reordering happened since the previous
        call (``treemask_cuda_trie_follow_rows``). ``prev``: the previous
        call's ``(tokens, states, keys)``, its tokens unchanged since; a row
        equal to one of prev's but for its last id takes one trie step from
        that row's state, any other walks from the root."""
        rows = self._token_rows(tokens, states, keys, "")
        before = ffi.NULL if prev is None else self._token_rows(*prev, what="prev ")
        with _on_device(self.device):
            status = lib.treemask_cuda_trie_follow_rows(self._ptr, before, rows, failure_policy_code(failure_policy),
                                                        _stream(self.device))
        if status:
            raise_status(status)

    def _token_rows(self, tokens: torch.Tensor, states: torch.Tensor, keys: torch.Tensor, what: str):
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype != torch.int64:
            raise InvalidArgumentError("%stokens: want a 2-D int64 tensor, got %s" % (what, _buffers.describe(tokens)))
        if tokens.device != self.device:
            raise InvalidArgumentError("%stokens: %s is not on %s" % (what, _buffers.describe(tokens), self.device))
        n_rows, n_tokens = tokens.shape
        if n_tokens > 1 and tokens.stride(1) != 1:
            raise InvalidArgumentError("%stokens: each row's ids must be contiguous" % what)
        rows = ffi.new("treemask_cuda_token_rows *")
        lib.treemask_cuda_token_rows_init(rows)
        rows.tokens = ffi.cast("const int64_t *", tokens.data_ptr())
        rows.n_rows = n_rows
        rows.n_tokens = n_tokens
        rows.row_stride = tokens.stride(0) if n_rows > 1 else n_tokens
        rows.states = ffi.cast("uint32_t *", _device_array(states, what + "states", _STATE_DTYPES, self.device, n_rows))
        rows.keys = ffi.cast("uint64_t *", _device_array(keys, what + "keys", (torch.int64,), self.device, n_rows))
        return rows

    def _logits_rows(self, logits: torch.Tensor, n: int) -> Tuple[int, int]:
        """(dtype code, row stride) of n logits rows on this trie's device,
        the vocab dimension contiguous; the library checks the width."""
        shape = logits.shape if isinstance(logits, torch.Tensor) else ()
        if len(shape) != 2 or shape[0] != n:
            raise InvalidArgumentError("logits: want a 2-D tensor with %d rows, got %s"
                                       % (n, _buffers.describe(logits)))
        if logits.device != self.device:
            raise InvalidArgumentError("logits: %s is not on %s" % (_buffers.describe(logits), self.device))
        code = _LOGITS_DTYPES.get(logits.dtype)
        if code is None:
            raise InvalidArgumentError("logits: want float32, float16 or bfloat16, got %s"
                                       % _buffers.describe(logits))
        strides = logits.stride()
        if shape[1] > 1 and strides[1] != 1:
            raise InvalidArgumentError("logits: the vocab dimension must be contiguous")
        return code, strides[0] if n > 1 else shape[1]

    def _logits(self, logits: torch.Tensor, n: int, log_probs: bool):
        """The treemask_logits of device rows (one per state); they are read,
        never written."""
        dtype, row_stride = self._logits_rows(logits, n)
        lg = ffi.new("treemask_logits *")
        lib.treemask_logits_init(lg)
        lg.data = ffi.cast("const void *", logits.data_ptr())
        lg.dtype = dtype
        lg.n_columns = logits.shape[1]
        lg.row_stride = row_stride
        lg.log_probs = bool(log_probs)
        return lg

    def _counter(self, n_bad_rows: Optional[torch.Tensor]):
        if n_bad_rows is None:
            return ffi.NULL
        return ffi.cast("uint32_t *", _device_array(n_bad_rows, "n_bad_rows", _STATE_DTYPES, self.device, 1))

    def beam_step(self, states: torch.Tensor, logits: torch.Tensor, scores: torch.Tensor, beam_width: int, *,
                  log_probs: bool = False, n_bad_rows: Optional[torch.Tensor] = None,
                  out: Optional[Tuple[torch.Tensor, torch.Tensor]] = None) -> Tuple[torch.Tensor, torch.Tensor,
                                                                                      torch.Tensor]:
        """The exact beam step of :class:`treemask.Beam` on the device
        (``treemask_cuda_beam_step``): normalizer, gather of the allowed
        tokens, top-B per request over beams x candidates, and the states
        advanced, enqueued on the current stream with no host
        synchronisation. ``states`` (int32 or uint32) and ``scores``
        (float32) hold ``n_requests * beam_width`` slots, request-major, and
        are updated in place; ``logits`` has one row per slot (float32,
        float16 or bfloat16; the vocab dimension contiguous; width >=
        vocab_size). Returns ``(parents, tokens, scores)``: int32 device
        tensors (``out`` reuses two, e.g. inside a CUDA graph) and the
        updated ``scores``. The workspace is kept between calls and grows
        only when a larger step needs it.

        A row holding NaN or +inf that a live slot reads cannot fail the
        call: that slot offers no candidate and ``n_bad_rows`` (a device
        int32/uint32 tensor of one element, optional) is incremented;
        fp16/bf16 scores may differ from the CPU's in the last bits (see
        treemask_cuda.h)."""
        beam_width = _buffers.positive_int(beam_width, "beam_width")
        n = states.numel() if isinstance(states, torch.Tensor) else -1
        if n < 0 or n % beam_width:
            raise InvalidArgumentError("states: want n_requests * beam_width (%d) entries, got %s"
                                       % (beam_width, _buffers.describe(states)))
        n_requests = n // beam_width
        states_ptr = ffi.cast("uint32_t *", _device_array(states, "states", _STATE_DTYPES, self.device, n))
        scores_ptr = ffi.cast("float *", _device_array(scores, "scores", (torch.float32,), self.device, n))
        lg = self._logits(logits, n, log_probs)
        if out is None:
            parents = torch.empty(n, dtype=torch.int32, device=self.device)
            tokens = torch.empty(n, dtype=torch.int32, device=self.device)
        else:
            parents, tokens = out
        parents_ptr = ffi.cast("int32_t *", _device_array(parents, "parents", (torch.int32,), self.device, n))
        tokens_ptr = ffi.cast("int32_t *", _device_array(tokens, "tokens", (torch.int32,), self.device, n))
        need = ffi.new("size_t *")
        status = lib.treemask_cuda_beam_workspace_size(n_requests, beam_width, need)
        if status:
            raise_status(status)
        with _on_device(self.device):
            stream = _stream(self.device)
            key = int(ffi.cast("uintptr_t", stream))
            # The workspace's counters are zero between steps of one shape; a
            # new shape starts from a zeroed workspace (treemask_cuda.h).
            # Allocated and zeroed on this stream; a dict store is atomic
            # under the GIL.
            workspace, shape = self._workspace.get(key, (None, (0, 0)))
            if workspace is None or workspace.numel() < need[0]:
                workspace = torch.zeros(max(int(need[0]), 8), dtype=torch.uint8, device=self.device)
            elif shape != (n_requests, beam_width):
                workspace.zero_()
            self._workspace[key] = (workspace, (n_requests, beam_width))
            # Every pointer is a tensor checked to be on this device (and the
            # workspace our own): the library may take our word for them.
            status = lib.treemask_cuda_beam_step_flags(
                self._ptr, n_requests, beam_width, lg, states_ptr, scores_ptr, parents_ptr, tokens_ptr,
                ffi.cast("void *", workspace.data_ptr()), workspace.numel(), self._counter(n_bad_rows),
                _CALLER_CHECKED, _stream(self.device))
        if status:
            raise_status(status)
        return parents, tokens, scores

    def topk(self, states: torch.Tensor, logits: torch.Tensor, k: int, *, log_probs: bool = False,
             n_bad_rows: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per state the k best allowed tokens by log-probability on the
        device (``treemask_cuda_trie_topk_states``): ``(tokens int32 (n, k),
        scores float32 (n, k), counts int64 (n,))``, entries past
        ``counts[i]`` are token -1, score -inf: the contract of
        :func:`treemask.topk_states` (treemask_cuda.h states it for both)."""
        k = check_topk_k(k, self.vocab_size)
        n = states.numel() if isinstance(states, torch.Tensor) else -1
        states_ptr = ffi.cast("const uint32_t *", _device_array(states, "states", _STATE_DTYPES, self.device, n))
        lg = self._logits(logits, n, log_probs)
        # The kernel writes every entry (-1 / -inf past the count), so
        # nothing needs filling first.
        tokens = torch.empty((n, k), dtype=torch.int32, device=self.device)
        scores = torch.empty((n, k), dtype=torch.float32, device=self.device)
        counts = torch.empty(n, dtype=torch.int64, device=self.device)
        self._topk_into(states_ptr, n, lg, k, tokens, scores, counts, n_bad_rows)
        return tokens, scores, counts

    def _topk_into(self, states_ptr, n: int, lg, k: int, tokens: torch.Tensor, scores: torch.Tensor,
                   counts: torch.Tensor, n_bad_rows: Optional[torch.Tensor]) -> None:
        with _on_device(self.device):
            status = lib.treemask_cuda_trie_topk_states(
                self._ptr, states_ptr, n, lg, k, ffi.cast("int32_t *", tokens.data_ptr()),
                ffi.cast("float *", scores.data_ptr()), ffi.cast("size_t *", counts.data_ptr()),
                self._counter(n_bad_rows), _stream(self.device))
        if status:
            raise_status(status)

    def __repr__(self) -> str:
        return "<treemask.torch.DeviceTrie vocab_size=%d device=%s>" % (self.vocab_size, self.device)


def _column_index(start: Any, n_columns: int, generated: torch.Tensor) -> int:
    """``start`` as a column index in [0, n_columns] of ``generated``."""
    try:
        index = operator.index(start)
    except TypeError:
        index = -1
    if isinstance(start, bool) or not 0 <= index <= n_columns:
        raise InvalidArgumentError("start %r: want a column index in [0, %d] of generated (%s)"
                                   % (start, n_columns, _buffers.describe(generated)))
    return index


class _RowSet:
    """One of DeviceRowStates' two buffer sets: the rows' ids, states and
    keys on the device, the ``treemask_cuda_token_rows`` that describes them
    to the C calls, and the pointers a step stores in it (precomputed: a
    cdata cast costs ~0.3 us)."""

    __slots__ = ("ids", "states", "keys", "rows", "tokens_slot", "ids_address", "copy_to")

    def __init__(self, n_rows: int, columns: int, device: torch.device) -> None:
        self.ids = torch.empty((n_rows, columns), dtype=torch.int64, device=device)
        self.states = torch.empty(n_rows, dtype=torch.int32, device=device)
        self.keys = torch.empty(n_rows, dtype=torch.int64, device=device)
        self.rows = rows = ffi.new("treemask_cuda_token_rows *")
        lib.treemask_cuda_token_rows_init(rows)
        rows.n_rows = n_rows
        rows.states = ffi.cast("uint32_t *", self.states.data_ptr())
        rows.keys = ffi.cast("uint64_t *", self.keys.data_ptr())
        self.ids_address = self.ids.data_ptr()
        rows.copy_to = self.copy_to = ffi.cast("int64_t *", self.ids_address)
        rows.copy_stride = columns
        # rows->tokens changes every call: stored through an integer slot
        self.tokens_slot = ffi.cast("uintptr_t *", ffi.addressof(rows, "tokens"))


class DeviceRowStates:
    """The trie state of every row of a batch of growing token rows, kept on
    the device: what a decode loop needs that hands over each row's ids but
    no beam indices (transformers' logits processors; beam search reorders
    and duplicates rows without saying how).

    :meth:`update` takes the rows' generated ids each step and returns their
    states: :meth:`DeviceTrie.follow_rows` over the ids as given, which the
    kernel also copies here (two alternating buffer sets, so the previous
    step's rows stay intact as ``prev`` whatever the loop does with its
    own): a row equal to a previous row but for its last id takes one trie
    step from that row's state, any other row walks from the root.
    :meth:`mask_logits` then writes -inf outside each row's allowed set;
    :meth:`update_mask_logits` does both in one kernel launch, optionally
    as a masked copy (a logits processor's whole step). All enqueue on the
    current stream and never synchronise; the argument structures of the C
    calls are built once per buffer set, so a step costs a few microseconds
    of Python. The buffers grow (doubling the id columns) when a generation
    outgrows them.

    Args:
        trie: the :class:`DeviceTrie` (its device is used).
        failure_policy: what a token the trie does not allow does to its
            row (:mod:`treemask.failure_policy`).

    One thread at a time (the buffers are this object's).
    """

    __slots__ = ("trie", "_policy", "_sets", "_flip", "_prev", "_n_rows", "_columns", "_states")

    def __init__(self, trie: DeviceTrie, *, failure_policy: Union[str, int] = "reject") -> None:
        if not isinstance(trie, DeviceTrie):
            raise InvalidArgumentError("trie must be a treemask.torch.DeviceTrie, got %s" % type(trie).__name__)
        self.trie = trie
        self._policy = failure_policy_code(failure_policy)
        self._sets: Tuple[_RowSet, ...] = ()
        self._flip = 0
        self._prev: Optional[_RowSet] = None  # the set the last update wrote (its rows struct holds its length)
        self._n_rows = -1
        self._columns = 0
        self._states: Optional[Tuple[torch.Tensor, Any]] = None  # the last update's states, as tensor and pointer

    def reset(self) -> None:
        """Forgets the previous rows: the next :meth:`update` walks every
        row from the root (a new generation)."""
        self._prev = None

    def _allocate(self, n_rows: int, n_tokens: int) -> None:
        columns = max(16, n_tokens, 2 * self._columns if n_rows == self._n_rows else 0)
        self._sets = (_RowSet(n_rows, columns, self.trie.device), _RowSet(n_rows, columns, self.trie.device))
        self._n_rows, self._columns = n_rows, columns
        # self._prev keeps the old set (and its memory) for this one update.

    def _next_set(self, generated: torch.Tensor, start: int) -> _RowSet:
        """This call's buffer set, its rows struct reading ``generated[:,
        start:]`` where it can (the kernel copies the ids into the set as it
        reads them: no separate copy), else a copy of it in the set."""
        if not isinstance(generated, torch.Tensor) or generated.dim() != 2 or generated.dtype is not torch.int64:
            raise InvalidArgumentError("generated: want a 2-D int64 tensor of token ids, got %s"
                                       % _buffers.describe(generated))
        dev = self.trie.device
        if generated.device != dev:
            raise InvalidArgumentError("generated: %s is not on %s, the device of the trie (treemask never copies"
                                       " between devices)" % (_buffers.describe(generated), dev))
        n_rows, n_columns = generated.shape
        if start or start.__class__ is not int:  # the common 0 costs one test
            start = _column_index(start, n_columns, generated)
        n_tokens = n_columns - start
        if n_rows != self._n_rows or n_tokens > self._columns:
            self._allocate(n_rows, n_tokens)
        self._flip ^= 1
        chosen = self._sets[self._flip]
        rows = chosen.rows
        rows.n_tokens = n_tokens
        row_stride, column_stride = generated.stride()
        if (n_tokens <= 1 or column_stride == 1) and (n_rows <= 1 or row_stride >= max(n_tokens, 1)):
            # rows->tokens: the first id of generated[:, start:]
            chosen.tokens_slot[0] = generated.data_ptr() + 8 * start * column_stride
            rows.row_stride = row_stride if n_rows > 1 else n_tokens
            rows.copy_to = chosen.copy_to
        else:  # ids not contiguous within a row: copy them, the kernel reads the copy
            chosen.ids.narrow(1, 0, n_tokens).copy_(generated.narrow(1, start, n_tokens))
            chosen.tokens_slot[0] = chosen.ids_address
            rows.row_stride = self._columns
            rows.copy_to = ffi.NULL
        return chosen

    def _finish(self, chosen: _RowSet) -> torch.Tensor:
        """Makes ``chosen`` the rows the next call compares with: their ids
        are then the set's own copy."""
        rows = chosen.rows
        chosen.tokens_slot[0] = chosen.ids_address  # rows->tokens: the set's own copy of the ids
        rows.row_stride = self._columns
        self._prev = chosen
        self._states = (chosen.states, rows.states)
        return chosen.states

    def update(self, generated: torch.Tensor, *, start: int = 0) -> torch.Tensor:
        """The state of every row of ``generated[:, start:]`` (an int64
        tensor ``(rows, n)`` on the trie's device, rows may be strided, e.g.
        transformers' ``input_ids`` with ``start`` its prompt length: no
        slice needed) after its ids: an int32 device tensor of one state per
        row, valid until the next update. One kernel launch
        (``treemask_cuda_trie_follow_rows``, which also copies the ids here
        for the next call to compare with)."""
        chosen = self._next_set(generated, start)
        prev = self._prev
        dev = self.trie.device
        with _on_device(dev):
            status = lib.treemask_cuda_trie_follow_rows(self.trie._ptr, ffi.NULL if prev is None else prev.rows,
                                                        chosen.rows, self._policy, _stream(dev))
        if status:
            raise_status(status)
        return self._finish(chosen)

    def update_mask_logits(self, generated: torch.Tensor, scores: torch.Tensor,
                           out: Optional[torch.Tensor] = None, *, start: int = 0,
                           finished_token: Optional[int] = None) -> torch.Tensor:
        """:meth:`update` and :meth:`mask_logits` in one kernel launch
        (``treemask_cuda_trie_follow_rows_mask_logits``): ``out`` (default:
        ``scores``, in place) receives ``scores`` with -inf outside each
        row's allowed set; masked scores are never read. ``out`` has the
        shape and dtype of ``scores`` and must not overlap it unless it is
        the same tensor. ``finished_token`` (a token id, e.g. the pad id)
        keeps its score in rows whose new state is TERMINATED, besides the
        stop tokens. Returns the states, as :meth:`update` does."""
        trie = self.trie
        if finished_token is None:
            finished_token = -1
        elif not 0 <= finished_token < trie.vocab_size:
            raise InvalidArgumentError("finished_token %d is outside [0, %d)" % (finished_token, trie.vocab_size))
        chosen = self._next_set(generated, start)
        n_rows = self._n_rows
        dtype, row_stride = trie._logits_rows(scores, n_rows)
        if out is None or out is scores:
            target, source, source_stride = scores, 0, 0
        else:
            _, out_stride = trie._logits_rows(out, n_rows)
            if out.dtype is not scores.dtype or out.shape != scores.shape:
                raise InvalidArgumentError("out: want the shape and dtype of scores (%s), got %s"
                                           % (_buffers.describe(scores), _buffers.describe(out)))
            source, source_stride = scores.data_ptr(), row_stride
            target, row_stride = out, out_stride
        prev = self._prev
        dev = trie.device
        with _on_device(dev):
            # The module's shim: the pointers as integers, and every one a
            # tensor checked above (TREEMASK_CUDA_CALLER_CHECKED_POINTERS).
            status = lib.treemask_py_cuda_trie_follow_rows_mask_logits(
                trie._ptr, ffi.NULL if prev is None else prev.rows, chosen.rows, self._policy, source, source_stride,
                target.data_ptr(), dtype, row_stride, target.shape[1], finished_token, _stream_handle(dev))
        if status:
            raise_status(status)
        return self._finish(chosen)

    def mask_logits(self, logits: torch.Tensor) -> None:
        """Sets ``logits[r, t] = -inf`` (float32 / float16 / bfloat16, one
        row per row of the last :meth:`update`, width >= vocab_size, the
        vocab dimension contiguous) for every token t that row r's state
        does not allow, and every column at or past vocab_size
        (:meth:`DeviceTrie.advance_mask_logits` with no tokens)."""
        if self._states is None:
            raise InvalidArgumentError("mask_logits: no states yet (call update first)")
        trie = self.trie
        dtype, row_stride = trie._logits_rows(logits, self._n_rows)
        dev = trie.device
        with _on_device(dev):
            status = lib.treemask_cuda_trie_advance_mask_logits(
                trie._ptr, self._states[1], ffi.NULL, self._n_rows, self._policy, ffi.NULL,
                ffi.cast(_VOID_P, logits.data_ptr()), dtype, row_stride, logits.shape[1], _stream(dev))
        if status:
            raise_status(status)

    def __repr__(self) -> str:
        return "<treemask.torch.DeviceRowStates %d rows on %s>" % (self._n_rows, self.trie.device)


class DeviceBeam:
    """A constrained beam search's state on one CUDA device: the device trie,
    and for ``n_requests * beam_width`` slots (request-major, slot ``r * B +
    b``) the trie states, cumulative scores, the last step's parents and
    tokens, and the step's workspace, all allocated here once.

    :meth:`step` is :meth:`DeviceTrie.beam_step` over those tensors: one
    kernel launch on the current stream that allocates nothing and never
    synchronises, so it can be captured in a CUDA graph and replayed (the
    tensors keep their addresses for the object's lifetime). The rules are
    treemask.h's beam step (``treemask_cuda_beam_step``).

    Args:
        trie: a :class:`treemask.Trie` (uploaded here) or a
            :class:`DeviceTrie` (shared; its device is used).
        n_requests, beam_width: the slots; beam_width <= 1,024.
        device: a CUDA device (default: the current one, or the
            DeviceTrie's).

    Attributes (device tensors, updated in place): ``states`` int32,
    ``scores`` float32 (initially ``treemask.initial_scores``: 0 for beam
    0 of each request, -inf for the others), ``parents`` and ``tokens``
    int32 (-1 for a dead slot), ``n_bad_rows`` int32 (1,): how many live
    slots read a logits row holding NaN or +inf since the last
    :meth:`reset` (such a slot offers nothing; read it when you synchronise
    anyway). A slot is live while its score is above -inf.
    """

    __slots__ = ("trie", "device", "n_requests", "beam_width", "states", "scores", "parents", "tokens",
                 "n_bad_rows", "_initial_scores", "_roots", "_counts", "_workspace", "_step_args", "_lg",
                 "_lg_data", "_layout", "_step_call", "__weakref__")

    def __init__(self, trie: Union[Trie, DeviceTrie], n_requests: int, beam_width: int, *,
                 device: Union[torch.device, str, int, None] = None) -> None:
        n_requests = _buffers.positive_int(n_requests, "n_requests")
        beam_width = _buffers.positive_int(beam_width, "beam_width")
        if isinstance(trie, DeviceTrie):
            if device is not None and _resolve_device(device) != trie.device:
                raise InvalidArgumentError("device %s is not the DeviceTrie's device %s" % (device, trie.device))
            self.trie = trie
        else:
            self.trie = DeviceTrie(trie, device)
        dev = self.device = self.trie.device
        need = ffi.new("size_t *")
        status = lib.treemask_cuda_beam_workspace_size(n_requests, beam_width, need)
        if status:
            raise_status(status)
        n = n_requests * beam_width
        self.n_requests, self.beam_width = n_requests, beam_width
        self.states = torch.zeros(n, dtype=torch.int32, device=dev)
        self._initial_scores = torch.from_numpy(initial_scores(n_requests, beam_width)).to(dev)
        self.scores = self._initial_scores.clone()
        self.parents = torch.full((n,), -1, dtype=torch.int32, device=dev)
        self.tokens = torch.full((n,), -1, dtype=torch.int32, device=dev)
        self.n_bad_rows = torch.zeros(1, dtype=torch.int32, device=dev)
        self._roots = torch.zeros(n_requests, dtype=torch.int32, device=dev)
        self._counts = torch.zeros(n_requests, dtype=torch.int64, device=dev)
        # Zeroed once: each step leaves its counters zero (treemask_cuda.h).
        self._workspace = torch.zeros(max(int(need[0]), 8), dtype=torch.uint8, device=dev)
        self._step_args = (
            ffi.cast("uint32_t *", self.states.data_ptr()), ffi.cast("float *", self.scores.data_ptr()),
            ffi.cast("int32_t *", self.parents.data_ptr()), ffi.cast("int32_t *", self.tokens.data_ptr()),
            ffi.cast("void *", self._workspace.data_ptr()), self._workspace.numel(),
            ffi.cast("uint32_t *", self.n_bad_rows.data_ptr()))
        self._lg = ffi.new("treemask_logits *")
        lib.treemask_logits_init(self._lg)
        # The struct's data pointer as an integer slot: storing a data_ptr()
        # there skips a cdata cast.
        self._lg_data = ffi.cast("uintptr_t *", ffi.addressof(self._lg, "data"))
        self._layout: Any = None  # the last logits checked: (type, dtype, shape, strides, device, rows, log_probs)
        self._step_call = (self.trie._ptr, n_requests, beam_width, self._lg, *self._step_args, _CALLER_CHECKED)

    def _set_logits(self, logits: torch.Tensor, n_rows: int, log_probs: bool):
        """Points the kept treemask_logits at n_rows rows of `logits`. Logits
        laid out as the last ones checked (type, dtype, shape, strides,
        device) and read the same way only have their address stored: a
        decode loop's logits move, their layout does not, and each check and
        struct field costs a fraction of a microsecond per step."""
        log_probs = bool(log_probs)
        layout = (logits.__class__, logits.dtype, logits.shape, logits.stride(), logits.device, n_rows,
                  log_probs) if isinstance(logits, torch.Tensor) else None
        if layout is not None and layout == self._layout:
            self._lg_data[0] = logits.data_ptr()
            return self._lg
        dtype, row_stride = self.trie._logits_rows(logits, n_rows)
        lg = self._lg
        lg.data = ffi.cast("const void *", logits.data_ptr())
        lg.dtype = dtype
        lg.n_columns = logits.shape[1]
        lg.row_stride = row_stride
        lg.log_probs = log_probs
        self._layout = layout
        return lg

    def step(self, logits: torch.Tensor, *, log_probs: bool = False) -> Tuple[torch.Tensor, torch.Tensor,
                                                                               torch.Tensor]:
        """One beam step: ``logits`` holds one row per slot (float32,
        float16 or bfloat16, the vocab dimension contiguous, width >= the
        trie's vocab_size; log-probabilities with ``log_probs``). Updates
        ``states`` and ``scores`` and returns ``(parents, tokens, scores)``:
        these objects' own tensors, not copies. Reorder your KV cache by
        ``r * B + parents`` (dead slots: -1)."""
        self._set_logits(logits, self.n_requests * self.beam_width, log_probs)
        dev = self.device
        with _on_device(dev):
            status = lib.treemask_cuda_beam_step_flags(*self._step_call, _stream(dev))
        if status:
            raise_status(status)
        return self.parents, self.tokens, self.scores

    def start(self, logits: torch.Tensor, *, log_probs: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
        """The first step from one logits row per request (a prompt run once
        per request rather than once per beam): beam b of request r takes
        the b-th best token allowed at the root (:meth:`DeviceTrie.topk`),
        its score and state; a request with fewer allowed tokens than
        beams leaves the rest dead (token -1, score -inf). ``parents`` are
        0 (every beam extends its request's prompt). Returns ``(tokens,
        scores)``. Allocates nothing, never synchronises."""
        lg = self._set_logits(logits, self.n_requests, log_probs)
        roots = ffi.cast("const uint32_t *", self._roots.data_ptr())
        self.trie._topk_into(roots, self.n_requests, lg, self.beam_width, self.tokens, self.scores, self._counts,
                             self.n_bad_rows)
        self.states.zero_()
        self.parents.zero_()
        # -1 (a dead slot) is no token: it stays at the root, with score -inf.
        self.trie.advance_states(self.states, self.tokens)
        return self.tokens, self.scores

    def reset(self) -> None:
        """Back to the initial state (every slot at the root, the initial
        scores), for the next search; enqueued copies, no allocation."""
        self.states.zero_()
        self.scores.copy_(self._initial_scores)
        self.parents.fill_(-1)
        self.tokens.fill_(-1)
        self.n_bad_rows.zero_()

    def finished(self) -> torch.Tensor:
        """A bool tensor per slot: True where the slot can no longer change
        (its hypothesis ended with a stop token, or the slot is dead). The
        search is over when all are; testing that synchronises, this
        method itself does not."""
        return (self.states == TERMINATED_INT32) | ~(self.scores > float("-inf"))

    def __repr__(self) -> str:
        return "<treemask.torch.DeviceBeam %d x %d on %s>" % (self.n_requests, self.beam_width, self.device)


def batch_beam_step(batch: Any, logits: Any, beam_scores: Any, beam_width: Any, *, log_probs: bool = False) -> Any:
    """:meth:`treemask.BatchMatcher.beam_step` on the logits' CUDA device:
    the slots' trie states through :meth:`DeviceTrie.beam_step` (the trie
    uploaded once per trie and device), then the host matchers follow the
    result (one copy of the states up and of parents and tokens down per
    step). Every slot needs a matcher without decoding modes, all of one
    trie. Returns :class:`treemask.BeamStep` of tensors on the logits'
    device. Engines that keep their states on the device call
    DeviceTrie.beam_step directly and never synchronise."""
    from .batch import BatchMatcher

    if not isinstance(batch, BatchMatcher):
        raise InvalidArgumentError("batch must be a treemask.BatchMatcher, got %s" % type(batch).__name__)
    if not batch._busy.acquire(False):
        raise InvalidStateError("batch_beam_step: the BatchMatcher is being used by another thread right now")
    try:
        return _batch_beam_step(batch, logits, beam_scores, beam_width, log_probs)
    finally:
        batch._busy.release()


def _batch_beam_step(batch: Any, logits: Any, beam_scores: Any, beam_width: Any, log_probs: bool) -> Any:
    if logits.dim() != 2:
        raise InvalidArgumentError("logits: want shape (rows, vocab), got %s" % _buffers.describe(logits))
    n_rows = int(logits.shape[0])
    if n_rows > batch._n:
        raise InvalidArgumentError("logits have %d rows, the batch %d slots" % (n_rows, batch._n))
    _rows_per_request(n_rows, beam_width)
    beam_width = int(beam_width)
    tries = batch._tries[:n_rows]
    for slot, trie in enumerate(tries):
        if trie is None:
            raise InvalidStateError("batch slot %d is empty" % slot)
        if trie is not tries[0]:
            raise InvalidArgumentError(
                "slots 0 and %d hold matchers of different tries; the device beam step follows one trie"
                " (pass CPU logits for the host step, which takes any mix)" % slot)
    states = np.empty(n_rows, dtype=np.uint32)
    out = ffi.new("uint32_t *")
    for slot in range(n_rows):
        status = lib.treemask_matcher_get_state(lib.treemask_batch_get_matcher(batch._ptr, slot), out)
        if status:
            raise InvalidArgumentError(
                "slot %d: the device beam step follows plain trie states, and this matcher has decoding"
                " modes (%s); pass CPU logits for the host step" % (slot, last_error()))
        if out[0] == STATE_FAILED:
            raise InvalidStateError("slot %d: its matcher has failed (a failure policy closed it); the"
                                    " device beam step needs live or finished sequences" % slot)
        states[slot] = out[0]
    device = logits.device
    trie = tries[0]
    assert trie is not None  # checked above
    key = (id(trie), str(device))
    dev = batch._device_tries.get(key)
    if dev is None:
        dev = batch._device_tries[key] = DeviceTrie(trie, device)
    states_t = torch.from_numpy(states.view(np.int32)).to(device)
    scores_t = torch.from_numpy(_float32_scores(beam_scores, n_rows)).to(device)
    parents, tokens, scores_t = dev.beam_step(states_t, logits, scores_t, beam_width, log_probs=log_probs)
    # The host matchers follow: slot r*B+i <- slot r*B+parent (a dead slot
    # keeps its own), then accepts its token.
    p = parents.cpu().numpy()
    t = tokens.cpu().numpy()
    src = np.arange(batch._n, dtype=np.int32)
    live = p >= 0
    src[:n_rows] = np.where(live, np.arange(n_rows) - np.arange(n_rows) % beam_width + p, src[:n_rows])
    status = lib.treemask_batch_reorder(batch._ptr, _buffers.host_buffer(src, "int32_t[]"), src.size)
    if status:
        raise_status(status)
    batch._tries = [batch._tries[i] for i in src.tolist()]
    feed = np.full(batch._n, -1, dtype=np.int32)
    feed[:n_rows] = np.where(live, t, -1)
    accepted = np.ones(batch._n, dtype=np.bool_)
    status = lib.treemask_batch_accept_tokens(batch._ptr, _buffers.host_buffer(feed, "int32_t[]"), feed.size,
                                              _buffers.host_buffer(accepted, "bool[]"))
    if status:
        raise_status(status)
    if not accepted.all():
        raise InternalError("the device beam step chose token %d for slot %d, which its matcher rejects"
                            % (int(feed[~accepted][0]), int(np.flatnonzero(~accepted)[0])))
    return BeamStep(parents, tokens, scores_t)
