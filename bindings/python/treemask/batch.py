"""BatchMatcher: many sequences filled and advanced together in single C calls.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import threading
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

import numpy as np

from . import _buffers
from ._ffi import ffi, lib
from .beam import Beam, BeamStep, DeviceTensorError, _float32_scores, logits_struct
from .errors import InvalidArgumentError, InvalidStateError, OutOfRangeError, UnsupportedError, raise_status
from .matcher import Matcher, _MatcherMethods
from .trie import Trie

__all__ = ["BatchMatcher"]


class _SlotMatcher(_MatcherMethods):
    """The matcher in one slot of a BatchMatcher. It looks the slot up on
    every call, so it stays valid (and always means "whatever is in slot i")
    across set_matcher and reorder; an empty slot raises InvalidStateError."""

    __slots__ = ("_batch", "_slot", "_flag", "_count")

    @property
    def _busy(self):
        # A slot's matcher lives in the batch: one lock for both.
        return self._batch._busy

    def __init__(self, batch: "BatchMatcher", slot: int) -> None:
        self._batch = batch
        self._slot = slot
        self._flag = ffi.new("bool *")
        self._count = ffi.new("size_t *")

    @property
    def _m(self):
        pointer = lib.treemask_batch_get_matcher(self._batch._ptr, self._slot)
        if pointer == ffi.NULL:
            raise InvalidStateError("batch slot %d is empty" % self._slot)
        return pointer

    @property
    def _trie(self):
        trie = self._batch._tries[self._slot]
        if trie is None:
            raise InvalidStateError("batch slot %d is empty" % self._slot)
        return trie

    def __repr__(self) -> str:
        return "<treemask batch slot %d: %s>" % (self._slot, self.debug_string())


class BatchMatcher:
    """A fixed number of slots, each empty or holding a matcher, filled and
    advanced together: one C call fills every row (optionally on worker
    threads, optionally incrementally at O(fanout) per row), one call
    accepts a token per slot, one call reorders slots for beam search.

    Slot i always writes row i of a bitmask of ``n_slots`` rows.
    ``batch[i]`` is the matcher in slot i (every Matcher method works on it
    between batch calls). One thread at a time: a call while another thread
    is inside one raises InvalidStateError (as for Matcher).

    Args:
        matchers: the number of slots (all empty), or an iterable of Matcher
            / None; each matcher is cloned into its slot (the caller keeps
            the original).
        n_threads: worker threads besides the caller's (0 = none; at most 256).
    """

    __slots__ = ("_ptr", "_n", "_n_threads", "_tries", "_bound", "_beams", "_busy", "__weakref__", "_device_tries")

    def __init__(self, matchers: Union[int, Iterable[Optional[Matcher]]], *, n_threads: int = 0) -> None:
        self._busy = threading.RLock()  # concurrent use raises (_buffers.exclusive)
        initial = None
        if isinstance(matchers, (int, np.integer)):
            n_slots = int(matchers)
        else:
            initial = list(matchers)
            n_slots = len(initial)
        # The library checks both ranges and names them; only a value no
        # size_t holds (a negative one) stops here.
        opts = ffi.new("treemask_batch_options *")
        lib.treemask_batch_options_init(opts)
        for name, value in (("n_slots", n_slots), ("n_threads", n_threads)):
            try:
                setattr(opts, name, value)
            except OverflowError:
                raise OutOfRangeError("%s %d is negative or too large" % (name, value)) from None
        out = ffi.new("treemask_batch **")
        status = lib.treemask_batch_create(opts, out)
        if status:
            raise_status(status)
        self._ptr = ffi.gc(out[0], lib.treemask_batch_free)
        self._n = n_slots
        self._n_threads = n_threads
        self._beams: Dict[int, Beam] = {}  # beam_width -> treemask.Beam, so that steps never allocate
        self._device_tries: Dict[Any, Any] = {}  # (trie id, device) -> DeviceTrie, for CUDA logits
        self._tries: List[Optional[Trie]] = [None] * n_slots
        self._bound = None  # keeps the bound buffer alive
        if initial is not None:
            for slot, m in enumerate(initial):
                if m is not None:
                    self.set_matcher(slot, m)

    @property
    def n_slots(self) -> int:
        return self._n

    def __reduce__(self):
        raise UnsupportedError(
            "a treemask.BatchMatcher cannot be pickled: it holds C matchers and worker threads of this process."
            " Send the tries (a Trie pickles by value) and each slot's accepted tokens, and build a BatchMatcher"
            " of Matchers in the receiver")

    def __len__(self) -> int:
        return self._n

    def _check_slot(self, slot: int) -> int:
        if not -self._n <= slot < self._n:
            raise OutOfRangeError("slot %d is outside [0, %d)" % (slot, self._n))
        return slot % self._n

    def __getitem__(self, slot: int) -> _SlotMatcher:
        return _SlotMatcher(self, self._check_slot(slot))

    def set_matcher(self, slot: int, matcher: Optional[Matcher]) -> None:
        """Puts a clone of ``matcher`` in ``slot`` (None empties it)."""
        slot = self._check_slot(slot)
        if matcher is not None and not isinstance(matcher, _MatcherMethods):
            raise InvalidArgumentError("set_matcher: want a treemask.Matcher or None, got %s"
                                       % type(matcher).__name__)
        status = lib.treemask_batch_set_matcher(self._ptr, slot, ffi.NULL if matcher is None else matcher._m)
        if status:
            raise_status(status)
        self._tries[slot] = None if matcher is None else matcher._trie

    def _slot_list(self, slots: Optional[Iterable[int]]):
        if slots is None:
            return None, ffi.NULL, 0
        arr = _buffers.int32_array(slots, "slots")
        return arr, (_buffers.host_buffer(arr, "int32_t[]") if arr.size else ffi.new("int32_t[1]")), arr.size

    def fill_next_token_bitmask(self, bitmask: Any, slots: Optional[Iterable[int]] = None) -> np.ndarray:
        """Writes the rows of the listed slots (default: every non-empty
        slot) of ``bitmask`` (CPU int32, C-contiguous, ``n_slots`` rows) in
        one call, each exactly as Matcher.fill_next_token_bitmask would.
        Returns ``need_apply`` per slot (a numpy bool array of n_slots;
        meaningful for the filled slots)."""
        pointer, n_rows, words = _buffers.int32_rows(bitmask)
        if n_rows != self._n:
            raise InvalidArgumentError("bitmask has %d rows, the batch %d slots" % (n_rows, self._n))
        _keep, slot_ptr, n = self._slot_list(slots)
        need_apply = np.zeros(self._n, dtype=np.bool_)
        status = lib.treemask_batch_fill_next_token_bitmask(
            self._ptr, pointer, words, slot_ptr, n, _buffers.host_buffer(need_apply, "bool[]"))
        if status:
            raise_status(status)
        return need_apply

    def bind_bitmask(self, bitmask: Any) -> None:
        """Binds a CPU int32 bitmask of ``n_slots`` rows for :meth:`fill_bound`
        (None unbinds). The batch keeps a reference to it. Binding again
        forgets what the batch knew about every row."""
        if bitmask is None:
            status = lib.treemask_batch_bind_bitmask(self._ptr, ffi.NULL, 0)
            if status:
                raise_status(status)
            self._bound = None
            return
        pointer, n_rows, words = _buffers.int32_rows(bitmask)
        if n_rows != self._n:
            raise InvalidArgumentError("bitmask has %d rows, the batch %d slots" % (n_rows, self._n))
        status = lib.treemask_batch_bind_bitmask(self._ptr, pointer, words)
        if status:
            raise_status(status)
        self._bound = bitmask

    def fill_bound(self, slots: Optional[Iterable[int]] = None, *, incremental: bool = True) -> np.ndarray:
        """Fills the listed slots' rows of the bound bitmask. Incremental
        (the default) costs O(fanout) per row the batch already wrote: the
        promise is that nothing else wrote those rows since (call
        :meth:`invalidate` otherwise). Returns need_apply per slot."""
        if self._bound is None:
            raise InvalidStateError("fill_bound: no bitmask is bound (call bind_bitmask first)")
        _keep, slot_ptr, n = self._slot_list(slots)
        need_apply = np.zeros(self._n, dtype=np.bool_)
        mode = lib.TREEMASK_FILL_INCREMENTAL if incremental else lib.TREEMASK_FILL_FULL
        status = lib.treemask_batch_fill_bound(self._ptr, slot_ptr, n, mode,
                                               _buffers.host_buffer(need_apply, "bool[]"))
        if status:
            raise_status(status)
        return need_apply

    def invalidate(self, rows: Optional[Iterable[int]] = None) -> None:
        """Forgets what the listed rows (default: all) of the bound bitmask
        hold, so their next fill writes them in full."""
        _keep, row_ptr, n = self._slot_list(rows)
        status = lib.treemask_batch_invalidate(self._ptr, row_ptr, n)
        if status:
            raise_status(status)

    def accept_tokens(self, tokens: Any) -> np.ndarray:
        """Feeds ``tokens[s]`` to slot s for every slot (a negative token: no
        token this step; required for empty slots). ``tokens`` is a
        sequence, numpy array or CPU tensor of ``n_slots`` integers. Returns
        the accepted flags (False only where a token was rejected)."""
        tok = _buffers.int32_array(tokens, "tokens")  # the library checks there is one per slot
        accepted = np.ones(self._n, dtype=np.bool_)
        status = lib.treemask_batch_accept_tokens(self._ptr, _buffers.host_buffer(tok, "int32_t[]"), tok.size,
                                                  _buffers.host_buffer(accepted, "bool[]"))
        if status:
            raise_status(status)
        return accepted

    def reorder(self, src: Sequence[int]) -> None:
        """Beam reordering: slot i takes the state of slot ``src[i]`` (-1
        empties it), all at once. Sources taken several times are cloned
        cheaply."""
        arr = _buffers.int32_array(src, "src")  # the library checks its length and entries
        status = lib.treemask_batch_reorder(self._ptr, _buffers.host_buffer(arr, "int32_t[]"), arr.size)
        if status:
            raise_status(status)
        self._tries = [None if s < 0 else self._tries[s] for s in arr.tolist()]

    def beam_step(self, logits: Any, beam_scores: Any, beam_width: int, *, log_probs: bool = False) -> BeamStep:
        """One constrained beam step over the first ``n_requests * beam_width``
        slots (request-major: slot ``r * beam_width + b``), without
        full-vocabulary masks (section 8 of treemask.h; experimental).

        For each request, the candidates are ``(b, t)`` for every token t
        allowed at slot ``r*B+b`` (its matcher's allowed set, so decoding
        modes apply), scored ``beam_scores[r*B+b] + log_softmax(row)[t]``
        (over the row's whole width, unmasked, as transformers normalizes;
        ``log_probs=True``: the rows hold log-probabilities); a finished
        slot offers only its first stop token with its score unchanged. The
        B best win (higher score, then lower b, then lower t). Slot
        ``r*B+i`` then holds a copy of slot ``r*B+parents[r*B+i]`` that
        accepted ``tokens[r*B+i]``: the caller only reorders its KV cache.
        Where fewer than B candidates exist the rest are ``(-1, -1, -inf)``:
        dead slots, which keep their old matcher and are never selected
        again. Start a search with :func:`treemask.initial_scores`
        (``[0, -inf, ...]`` per request) so the identical initial beams are
        not all filled with the same hypothesis.

        Args:
            logits: (n_requests * beam_width, width) float32 / float16 /
                bfloat16, a numpy array or CPU torch tensor (rows may be
                strided; the vocab dimension contiguous); width >= every
                slot's trie vocab_size. Read, never written. A CUDA tensor
                raises :class:`treemask.DeviceTensorError` (a TypeError)
                naming the device step of the torch adapter,
                :func:`treemask.torch.batch_beam_step` (this core class
                imports no adapter).
            beam_scores: the slots' cumulative scores (float32-convertible,
                n_requests * beam_width); not modified.
            beam_width: B.

        Returns :class:`treemask.BeamStep` (parents int32, tokens int32,
        scores float32): numpy arrays, or torch tensors on the logits'
        device when ``logits`` is a tensor. Uses the batch's threads (one
        ``treemask.Beam`` per beam width is kept, so steps do not allocate
        in C).
        """
        if getattr(getattr(logits, "device", None), "type", "cpu") != "cpu" and \
                _buffers.torch_tensor_module(logits) is not None:
            raise DeviceTensorError(
                "beam_step: %s is on a device; this is the host step: pass logits.cpu(), or step on the device"
                " with treemask.torch.batch_beam_step(batch, logits, beam_scores, beam_width)"
                % _buffers.describe(logits))
        lg, n_rows, _view, torch = logits_struct(logits)  # _view keeps the buffer alive
        lg.log_probs = bool(log_probs)
        if n_rows > self._n:
            raise InvalidArgumentError("logits have %d rows, the batch %d slots" % (n_rows, self._n))
        beam_width = _buffers.positive_int(beam_width, "beam_width")
        scores = _float32_scores(beam_scores, n_rows)
        beam = self._beams.get(beam_width)
        if beam is None:
            beam = self._beams[beam_width] = Beam(beam_width, n_threads=self._n_threads + 1)
        parents, tokens = beam._step_batch(self, n_rows, lg, scores)
        tries = self._tries
        moved = [tries[r - r % beam_width + p] if p >= 0 else tries[r] for r, p in enumerate(parents.tolist())]
        tries[:n_rows] = moved
        if torch is not None:
            return BeamStep(torch.from_numpy(parents), torch.from_numpy(tokens), torch.from_numpy(scores))
        return BeamStep(parents, tokens, scores)

    def __repr__(self) -> str:
        used = sum(t is not None for t in self._tries)
        return "<treemask.BatchMatcher slots=%d used=%d>" % (self._n, used)


_buffers.exclusive(BatchMatcher)
_buffers.exclusive(_SlotMatcher)
