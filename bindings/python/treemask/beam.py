"""Constrained beam step and top-k without full-vocabulary masks (experimental).

One call per decode step: per slot one read of its logits row (the
log-softmax normalizer; the row is never written) and a gather of its
allowed tokens, per request an exact top-B over beams x candidates, and
the slots' states reordered and advanced. See section 8 of
``treemask.h`` for the pinned semantics; in short:

- a step holds ``n_requests * beam_width`` slots, request-major (slot
  ``r * B + b``); a candidate ``(b, t)`` scores ``scores[r*B+b] + x[t] -
  logsumexp(x)`` (the unmasked log-softmax over the row's whole width, as
  transformers' beam search normalizes before masking; ``log_probs=True``:
  the rows hold log-probabilities already);
- a finished slot offers only ``(b, first stop token)`` with its score
  unchanged, so finished hypotheses compete by cumulative log-probability;
- the B best win (higher score, then lower b, then lower t); when fewer
  than B exist the rest are ``(parent -1, token -1, score -inf)`` and
  those slots are dead;
- the first step of a search passes scores ``[0, -inf, ..., -inf]`` per
  request (transformers' convention), else the identical initial beams
  would fill every beam with the same hypothesis (:func:`initial_scores`);
- over a string set (:meth:`Trie.from_strings`) the winners are distinct
  strings: candidates whose hypotheses spell the same bytes merge, the
  best kept (a live one is the string spelled so far, a finished one the
  whole string). A finished slot's state is ``STATE_TERMINATED``, which
  does not say which string it was, so the state-array step of a string
  set takes an ``ends`` array beside the states (:func:`initial_ends`),
  where the step records the node each finished string ended at;
  token-path tries never merge.

These functions take CPU logits (numpy arrays, CPU torch tensors); CUDA
tensors raise :class:`DeviceTensorError` (a ``TypeError``) naming the
device path: :meth:`treemask.torch.DeviceTrie.beam_step` and
:meth:`~treemask.torch.DeviceTrie.topk` run the same step on the GPU over
device state tensors, and :meth:`treemask.BatchMatcher.beam_step` routes
CUDA logits there itself.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import threading
from typing import Any, Dict, NamedTuple, Optional, Tuple

import numpy as np

from . import _buffers
from ._ffi import ffi, lib
from .bitmask import _logits_view
from .errors import InvalidArgumentError, UnsupportedError, raise_status
from .trie import STATE_FAILED, Trie, _state_array

__all__ = ["Beam", "BeamStep", "TopK", "DeviceTensorError", "beam_step_states", "topk_states",
           "initial_scores", "initial_ends", "beam_kernel_isa"]


class DeviceTensorError(UnsupportedError, TypeError):
    """Logits on a device (CUDA tensor) given to the host beam step or
    top-k. Move them with ``.cpu()``, or use the device path
    (:class:`treemask.torch.DeviceTrie`'s beam_step and topk)."""


class BeamStep(NamedTuple):
    """One beam step's outputs, one entry per slot (best first within each
    request): the parent beam ``b`` (0 .. B-1, within the request; -1 for a
    dead slot), the token appended and the new cumulative score."""

    parents: Any
    tokens: Any
    scores: Any


class TopK(NamedTuple):
    """Per row the k best allowed tokens (best first, ties to the lower
    token), their log-probabilities, and how many there are (entries past
    ``counts[i]`` hold token -1 and score -inf)."""

    tokens: Any
    scores: Any
    counts: Any


def beam_kernel_isa() -> str:
    """The instruction set of the beam step's normalizer: "avx512", "avx2"
    or "scalar"."""
    return ffi.string(lib.treemask_beam_kernel_isa()).decode("ascii")


def initial_scores(n_requests: int, beam_width: int) -> np.ndarray:
    """The scores of a search's first step: ``[0, -inf, ..., -inf]`` per
    request (float32, ``n_requests * beam_width``)."""
    if n_requests < 0 or beam_width < 1:
        raise InvalidArgumentError("initial_scores: n_requests %d must be >= 0 and beam_width %d >= 1"
                                   % (n_requests, beam_width))
    scores = np.full(n_requests * beam_width, -np.inf, dtype=np.float32)
    scores[::beam_width] = 0.0
    return scores


def initial_ends(n_requests: int, beam_width: int) -> np.ndarray:
    """The ``ends`` of a search's first step (no slot has finished):
    ``STATE_FAILED`` everywhere (uint32, ``n_requests * beam_width``)."""
    if n_requests < 0 or beam_width < 1:
        raise InvalidArgumentError("initial_ends: n_requests %d must be >= 0 and beam_width %d >= 1"
                                   % (n_requests, beam_width))
    return np.full(n_requests * beam_width, STATE_FAILED, dtype=np.uint32)


def logits_struct(logits: Any, what: str = "logits"):
    """(treemask_logits cdata, n_rows, view, torch module or None) of CPU
    logits of shape (rows, width); the row is read, never written."""
    torch = _buffers.torch_tensor_module(logits)
    if torch is not None and logits.device.type != "cpu":
        raise DeviceTensorError(
            "%s: %s is on a device; this is the host step: pass logits.cpu(), or run the step on the device"
            " with treemask.torch.DeviceTrie(trie).beam_step / .topk" % (what, _buffers.describe(logits)))
    if not (torch is not None or isinstance(logits, np.ndarray)):
        raise InvalidArgumentError("%s: want a numpy.ndarray or torch.Tensor of float32, float16 or bfloat16,"
                                   " got %s" % (what, _buffers.describe(logits)))
    if len(logits.shape) != 2:
        raise InvalidArgumentError("%s: want shape (rows, vocab), got %s" % (what, _buffers.describe(logits)))
    view = _logits_view(logits, writable=False)
    lg = ffi.new("treemask_logits *")
    lib.treemask_logits_init(lg)
    lg.data = ffi.cast("const void *", view.pointer)
    lg.dtype = view.dtype
    lg.n_columns = view.width
    lg.row_stride = view.row_stride
    return lg, view.n_rows, view, torch


def _float32_scores(scores: Any, n: int) -> np.ndarray:
    """A fresh float32 copy of scores (sequence, numpy array or CPU tensor) of n entries."""
    torch = _buffers.torch_tensor_module(scores)
    if torch is not None:
        if scores.device.type != "cpu":
            raise DeviceTensorError("beam_scores: %s is on a device; pass beam_scores.cpu()"
                                    % _buffers.describe(scores))
        scores = scores.detach().float().numpy()
    try:
        arr = np.array(scores, dtype=np.float32, copy=True)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError("beam_scores: not a sequence of floats (%s)" % e) from None
    if arr.shape != (n,):
        raise InvalidArgumentError("beam_scores: want shape (%d,) (one per slot), got %s" % (n, arr.shape))
    return arr


def _rows_per_request(n_rows: int, beam_width: Any) -> Tuple[int, int]:
    beam_width = _buffers.positive_int(beam_width, "beam_width")
    if n_rows % beam_width:
        raise InvalidArgumentError("logits have %d rows, not a multiple of beam_width %d (want n_requests *"
                                   " beam_width rows, request-major)" % (n_rows, beam_width))
    return n_rows // beam_width, beam_width


class Beam:
    """What a beam step needs besides the caller's arrays (candidate heaps,
    a worker pool): create one per (beam width, thread count) and reuse it,
    so that steps never allocate in C (its buffers are sized by the first
    step, so a large beam_width costs nothing until used). One thread at a
    time: a call while another thread is inside one raises
    :class:`InvalidStateError` (as for Matcher) instead of corrupting the
    step's buffers.

    Args:
        beam_width: B >= 1.
        n_threads: threads working on one step, the caller's included;
            requests are split between them.
    """

    __slots__ = ("_ptr", "beam_width", "n_threads", "_busy", "__weakref__")

    def __init__(self, beam_width: int, *, n_threads: int = 1) -> None:
        self._busy = threading.RLock()  # concurrent use raises (_buffers.exclusive)
        beam_width = _buffers.positive_int(beam_width, "beam_width")
        n_threads = _buffers.thread_count(n_threads)
        opts = ffi.new("treemask_beam_options *")
        lib.treemask_beam_options_init(opts)
        opts.beam_width = int(beam_width)
        opts.n_threads = n_threads
        out = ffi.new("treemask_beam **")
        status = lib.treemask_beam_create(opts, out)
        if status:
            raise_status(status, "Beam")
        self._ptr = ffi.gc(out[0], lib.treemask_beam_free)
        self.beam_width = int(beam_width)
        self.n_threads = n_threads

    def step_states(self, trie: Trie, states: np.ndarray, logits: Any, scores: np.ndarray, *,
                    ends: Optional[np.ndarray] = None, log_probs: bool = False) -> Tuple[np.ndarray, np.ndarray]:
        """One step over a state array: ``states`` (writable C-contiguous
        numpy uint32, ``n_requests * B``) and ``scores`` (writable
        C-contiguous numpy float32, same length: cumulative scores in, new
        scores out) are updated in place; slot ``r*B+i`` becomes slot
        ``r*B+parent`` advanced by its token. ``logits``: (n_requests * B,
        width) with width >= trie.vocab_size; every column is in the
        normalizer. Returns (parents, tokens), int32 numpy arrays.

        ``ends`` (writable C-contiguous numpy uint32, same length, updated in
        place; start with :func:`initial_ends`): where each finished slot's
        string ended, so that a string set's winners are distinct strings
        across steps (the module docstring). Required for a string set
        (:class:`UnsupportedError` without it); optional for token paths,
        whose steps it does not change (every entry is written
        ``STATE_FAILED``)."""
        if not isinstance(trie, Trie):
            raise InvalidArgumentError("trie must be a treemask.Trie, got %s" % type(trie).__name__)
        lg, n_rows, _view, _ = logits_struct(logits)  # _view keeps the buffer alive
        lg.log_probs = bool(log_probs)
        n_requests, _ = _rows_per_request(n_rows, self.beam_width)
        st = _state_array(states, writable=True)
        if not isinstance(scores, np.ndarray) or scores.dtype != np.float32 or not scores.flags.c_contiguous \
                or not scores.flags.writeable:
            raise InvalidArgumentError("scores: want a writable C-contiguous numpy float32 array (it is updated"
                                       " in place), got %s" % _buffers.describe(scores))
        if st.size != n_rows or scores.size != n_rows:
            raise InvalidArgumentError("states has %d entries and scores %d for %d logits rows"
                                       % (st.size, scores.size, n_rows))
        if ends is None and trie.is_string_set:
            raise UnsupportedError(
                "beam step: a string set's step needs ends=, where each finished string ended, to keep the"
                " winners distinct strings: pass ends=treemask.initial_ends(n_requests, beam_width) at the"
                " first step and the same array after")
        en = None
        if ends is not None:
            if not isinstance(ends, np.ndarray) or ends.dtype != np.uint32 or not ends.flags.c_contiguous \
                    or not ends.flags.writeable:
                raise InvalidArgumentError("ends: want a writable C-contiguous numpy uint32 array (it is updated in"
                                           " place), got %s" % _buffers.describe(ends))
            if ends.size != n_rows:
                raise InvalidArgumentError("ends has %d entries for %d logits rows" % (ends.size, n_rows))
            en = ends
        parents = np.empty(n_rows, dtype=np.int32)
        tokens = np.empty(n_rows, dtype=np.int32)
        if n_rows == 0:
            return parents, tokens
        if en is None:
            status = lib.treemask_beam_step_states(
                self._ptr, trie._ptr, n_requests, lg, ffi.from_buffer("uint32_t[]", st),
                ffi.from_buffer("float[]", scores), ffi.from_buffer("int32_t[]", parents),
                ffi.from_buffer("int32_t[]", tokens))
        else:
            status = lib.treemask_beam_step_strings(
                self._ptr, trie._ptr, n_requests, lg, ffi.from_buffer("uint32_t[]", st),
                ffi.from_buffer("uint32_t[]", en), ffi.from_buffer("float[]", scores),
                ffi.from_buffer("int32_t[]", parents), ffi.from_buffer("int32_t[]", tokens))
        if status:
            raise_status(status, "beam step")
        return parents, tokens

    def __reduce__(self):
        """Pickles by value: a Beam holds only scratch, so the receiver gets
        a new one of the same width and threads."""
        return (_new_beam, (self.beam_width, self.n_threads))

    def _step_batch(self, batch: Any, n_rows: int, lg, scores: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """The batch form: the step over a BatchMatcher's first n_rows slots
        (BatchMatcher.beam_step is its public face, and calls it with the
        logits struct it has made)."""
        n_requests, _ = _rows_per_request(n_rows, self.beam_width)
        parents = np.empty(n_rows, dtype=np.int32)
        tokens = np.empty(n_rows, dtype=np.int32)
        if n_rows == 0:
            return parents, tokens
        status = lib.treemask_beam_step_batch(
            self._ptr, batch._ptr, n_requests, lg, ffi.from_buffer("float[]", scores),
            ffi.from_buffer("int32_t[]", parents), ffi.from_buffer("int32_t[]", tokens))
        if status:
            raise_status(status, "beam step")
        return parents, tokens

    def __repr__(self) -> str:
        return "<treemask.Beam beam_width=%d n_threads=%d>" % (self.beam_width, self.n_threads)


_buffers.exclusive(Beam)


def _new_beam(beam_width: int, n_threads: int) -> Beam:
    return Beam(beam_width, n_threads=n_threads)


_local = threading.local()


def _cached_beam(beam_width: int, n_threads: int) -> Beam:
    """This thread's Beam for (beam_width, n_threads)."""
    cache: Optional[Dict[Tuple[int, int], Beam]] = getattr(_local, "beams", None)
    if cache is None:
        cache = _local.beams = {}
    key = (beam_width, n_threads)
    beam = cache.get(key)
    if beam is None:
        beam = cache[key] = Beam(beam_width, n_threads=n_threads)
    return beam


def beam_step_states(trie: Trie, states: np.ndarray, logits: Any, scores: np.ndarray, beam_width: int, *,
                     ends: Optional[np.ndarray] = None, log_probs: bool = False,
                     n_threads: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    """:meth:`Beam.step_states` with a per-thread cached :class:`Beam` for
    (beam_width, n_threads): ``states``, ``scores`` (and ``ends``, required
    for a string set) are updated in place; returns (parents, tokens)."""
    beam = _cached_beam(_buffers.positive_int(beam_width, "beam_width"), _buffers.thread_count(n_threads))
    return beam.step_states(trie, states, logits, scores, ends=ends, log_probs=log_probs)


def check_topk_k(k: Any, vocab_size: int) -> int:
    """k of the top-k twins (topk_states, DeviceTrie.topk), checked once for
    both: an int in [0, vocab_size]. The outputs are (rows, k): a k past the
    vocabulary only adds padding (no row allows more tokens), and a huge one
    would be an allocation the OOM killer ends."""
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 0:
        raise InvalidArgumentError("k must be an int >= 0, got %r" % (k,))
    if k > vocab_size:
        raise InvalidArgumentError("k %d is more than the trie's vocab_size %d (no row allows more tokens)"
                                   % (k, vocab_size))
    return int(k)


def topk_states(trie: Trie, states: Any, logits: Any, k: int, *, log_probs: bool = False) -> TopK:
    """Per row i the k best tokens allowed at ``states[i]`` by
    log-probability (``x[t] - logsumexp(x)`` over the row's whole width, or
    ``x[t]`` with ``log_probs``), best first, ties to the lower token; for
    sampling engines that only need candidates (top-k / top-p over the
    allowed set). Returns :class:`TopK` of numpy arrays: tokens (n, k)
    int32 and scores (n, k) float32 (-1 / -inf past counts[i]), counts (n,)
    int64. k = 0 gives empty rows and zero counts. The contract, shared with
    :meth:`treemask.torch.DeviceTrie.topk`, is written in treemask.h."""
    if not isinstance(trie, Trie):
        raise InvalidArgumentError("trie must be a treemask.Trie, got %s" % type(trie).__name__)
    k = check_topk_k(k, trie.vocab_size)
    lg, n_rows, _view, _ = logits_struct(logits)  # _view keeps the buffer alive
    lg.log_probs = bool(log_probs)
    st = _state_array(states, writable=False)
    if st.size != n_rows:
        raise InvalidArgumentError("states has %d entries for %d logits rows" % (st.size, n_rows))
    tokens = np.full((n_rows, k), -1, dtype=np.int32)
    scores = np.full((n_rows, k), -np.inf, dtype=np.float32)
    counts = np.zeros(n_rows, dtype=np.uintp)
    if n_rows:
        status = lib.treemask_trie_topk_states(
            trie._ptr, ffi.from_buffer("uint32_t[]", st), n_rows, lg, k, ffi.from_buffer("int32_t[]", tokens),
            ffi.from_buffer("float[]", scores), ffi.from_buffer("size_t[]", counts))
        if status:
            raise_status(status, "topk")
    return TopK(tokens, scores, counts.astype(np.int64))
