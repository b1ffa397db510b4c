"""PyTorch interop: bitmasks as tensors, and the device-resident trie whose
advance + fill step and exact beam step run on the GPU with no host round
trip.

Importing this module imports torch; the rest of the package never does.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Union

import torch

from . import _buffers
from ._ffi import ffi, lib
from .bitmask import apply_token_bitmask_inplace, cuda_available, get_bitmask_shape, reset_token_bitmask
from .errors import InvalidArgumentError, UnsupportedError, raise_status
from .failure_policy import LIBRARY_DEFAULT, failure_policy_code
from .trie import STATE_FAILED, STATE_ROOT, STATE_TERMINATED, Trie

__all__ = [
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "get_bitmask_shape",
    "reset_token_bitmask",
    "DeviceTrie",
    "STATE_ROOT",
    "STATE_TERMINATED",
    "STATE_FAILED",
]


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

    Raises UnsupportedError when this libtreemask has no usable CUDA.
    """

    __slots__ = ("_ptr", "device", "vocab_size", "bitmask_words", "_workspace", "__weakref__")

    def __init__(self, trie: Trie, device: Union[torch.device, str, int, None] = None) -> None:
        if not isinstance(trie, Trie):
            raise InvalidArgumentError("trie must be a treemask.Trie, got %s" % type(trie).__name__)
        if not cuda_available():
            raise UnsupportedError("DeviceTrie needs CUDA: this libtreemask was built without it or finds no"
                                   " usable device (treemask.cuda_available() is False)")
        dev = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
        if dev.type != "cuda":
            raise InvalidArgumentError("DeviceTrie: device %s is not a CUDA device" % dev)
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        out = ffi.new("treemask_cuda_trie **")
        with torch.cuda.device(dev):
            stream = torch.cuda.current_stream(dev).cuda_stream
            status = lib.treemask_cuda_trie_upload(trie._ptr, ffi.cast("void *", stream), out)
        if status:
            raise_status(status)
        self._ptr = ffi.gc(out[0], lib.treemask_cuda_trie_free)
        self.device = dev
        self.vocab_size = trie.vocab_size
        self.bitmask_words = trie.bitmask_words
        # beam_step's scratch, one per CUDA stream: two threads stepping on
        # two streams at once must not share one (the kernels of both would
        # write it concurrently); on one stream the stream orders them.
        self._workspace: Dict[int, torch.Tensor] = {}

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
        with torch.cuda.device(self.device):
            stream = torch.cuda.current_stream(self.device).cuda_stream
            status = lib.treemask_cuda_trie_advance_fill_bitmask(
                self._ptr, states_ptr, tokens_ptr, n, failure_policy_code(failure_policy), accepted_ptr,
                ffi.cast("int32_t *", mask_ptr), bitmask.shape[1], ffi.cast("void *", stream))
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
        with torch.cuda.device(self.device):
            stream = torch.cuda.current_stream(self.device).cuda_stream
            status = lib.treemask_cuda_trie_advance_mask_logits(
                self._ptr, states_ptr, tokens_ptr, n, failure_policy_code(failure_policy), accepted_ptr,
                ffi.cast("void *", logits.data_ptr()), dtype, row_stride, logits.shape[1],
                ffi.cast("void *", stream))
        if status:
            raise_status(status)

    def _logits_rows(self, logits: torch.Tensor, n: int) -> Tuple[int, int]:
        """(dtype code, row stride) of n logits rows on this trie's device,
        the vocab dimension contiguous; the library checks the width."""
        if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or logits.shape[0] != n:
            raise InvalidArgumentError("logits: want a 2-D tensor with %d rows, got %s"
                                       % (n, _buffers.describe(logits)))
        if logits.device != self.device:
            raise InvalidArgumentError("logits: %s is not on %s" % (_buffers.describe(logits), self.device))
        name = str(logits.dtype).replace("torch.", "")
        if name not in _buffers.DTYPE_CODES:
            raise InvalidArgumentError("logits: want float32, float16 or bfloat16, got %s"
                                       % _buffers.describe(logits))
        if logits.shape[1] > 1 and logits.stride(1) != 1:
            raise InvalidArgumentError("logits: the vocab dimension must be contiguous")
        return _buffers.DTYPE_CODES[name], logits.stride(0) if n > 1 else logits.shape[1]

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
        if not isinstance(beam_width, int) or isinstance(beam_width, bool) or beam_width < 1:
            raise InvalidArgumentError("beam_width must be an int >= 1, got %r" % (beam_width,))
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
        with torch.cuda.device(self.device):
            stream = torch.cuda.current_stream(self.device).cuda_stream
            workspace = self._workspace.get(stream)
            if workspace is None or workspace.numel() < need[0]:
                # Allocated on this stream; a dict store is atomic under the GIL.
                workspace = torch.empty(max(int(need[0]), 8), dtype=torch.uint8, device=self.device)
                self._workspace[stream] = workspace
            status = lib.treemask_cuda_beam_step(
                self._ptr, n_requests, beam_width, lg, states_ptr, scores_ptr, parents_ptr, tokens_ptr,
                ffi.cast("void *", workspace.data_ptr()), workspace.numel(), self._counter(n_bad_rows),
                ffi.cast("void *", stream))
        if status:
            raise_status(status)
        return parents, tokens, scores

    def topk(self, states: torch.Tensor, logits: torch.Tensor, k: int, *, log_probs: bool = False,
             n_bad_rows: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per state the k best allowed tokens by log-probability on the
        device (``treemask_cuda_trie_topk_states``): ``(tokens int32 (n, k),
        scores float32 (n, k), counts int32 (n,))``, entries past
        ``counts[i]`` are token -1, score -inf; the rules of
        :func:`treemask.topk_states`."""
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise InvalidArgumentError("k must be an int >= 0, got %r" % (k,))
        n = states.numel() if isinstance(states, torch.Tensor) else -1
        states_ptr = ffi.cast("const uint32_t *", _device_array(states, "states", _STATE_DTYPES, self.device, n))
        lg = self._logits(logits, n, log_probs)
        tokens = torch.full((n, k), -1, dtype=torch.int32, device=self.device)
        scores = torch.full((n, k), float("-inf"), dtype=torch.float32, device=self.device)
        counts = torch.zeros(n, dtype=torch.int32, device=self.device)
        with torch.cuda.device(self.device):
            stream = torch.cuda.current_stream(self.device).cuda_stream
            status = lib.treemask_cuda_trie_topk_states(
                self._ptr, states_ptr, n, lg, k, ffi.cast("int32_t *", tokens.data_ptr()),
                ffi.cast("float *", scores.data_ptr()), ffi.cast("int32_t *", counts.data_ptr()),
                self._counter(n_bad_rows), ffi.cast("void *", stream))
        if status:
            raise_status(status)
        # Entries past counts[i] read as token -1, score -inf (as on the CPU).
        valid = torch.arange(k, device=self.device)[None, :] < counts[:, None]
        tokens = torch.where(valid, tokens, torch.full_like(tokens, -1))
        scores = torch.where(valid, scores, torch.full_like(scores, float("-inf")))
        return tokens, scores, counts

    def __repr__(self) -> str:
        return "<treemask.torch.DeviceTrie vocab_size=%d device=%s>" % (self.vocab_size, self.device)
