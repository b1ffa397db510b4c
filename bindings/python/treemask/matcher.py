"""Matcher: the decoding state of one sequence (one beam) over a trie.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import threading
from typing import Any, Iterable, List, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _buffers
from ._ffi import ffi, lib
from .errors import InvalidArgumentError, OutOfRangeError, UnsupportedError, raise_status
from .failure_policy import LIBRARY_DEFAULT, failure_policy_code
from .trie import Trie

__all__ = ["Matcher", "MatcherCounters", "ExclusionSet"]


class MatcherCounters(NamedTuple):
    """What one matcher did since it was created (treemask_matcher_counters),
    for export as metrics. A clone starts at zero."""

    n_fills: int  # bitmask rows written (own and batch fills)
    n_accepted_tokens: int  # accepts that advanced the state
    n_rejected_tokens: int  # tokens refused, in every failure policy
    n_fail_closed: int  # rejections that closed or failed the matcher
    n_rolled_back_tokens: int  # accepts undone by rollback
    n_resets: int  # reset() calls


class ExclusionSet:
    """An immutable set of label ids that must not be produced (out-of-stock
    items, items already shown), shared by any number of matchers and
    threads, with no trie rebuild. Ids that no path carries are ignored.
    For a trie without labels the ids are terminal node ids."""

    __slots__ = ("_ptr", "trie")

    def __init__(self, trie: Trie, label_ids: Iterable[int]) -> None:
        ids = _buffers.int64_array(list(label_ids), "label_ids")
        out = ffi.new("treemask_exclusion_set **")
        pointer = _buffers.host_buffer(ids, "int64_t[]") if ids.size else ffi.NULL
        status = lib.treemask_exclusion_set_create(trie._ptr, pointer, ids.size, out)
        if status:
            raise_status(status)
        self._ptr = ffi.gc(out[0], lib.treemask_exclusion_set_free)
        self.trie = trie

    @property
    def n_terminals(self) -> int:
        """How many terminal nodes (label paths) the set bans."""
        return lib.treemask_exclusion_set_n_terminals(self._ptr)

    def __reduce__(self):
        raise UnsupportedError("a treemask.ExclusionSet cannot be pickled (it is a C object of this process):"
                               " send its trie (a Trie pickles by value) and the label ids, and build"
                               " ExclusionSet(trie, label_ids) in the receiver")


def _optional_tokens(values: Optional[Iterable[int]], what: str):
    if values is None:
        return None
    listed = [values] if isinstance(values, (int, np.integer)) else list(values)
    arr = _buffers.int32_array(listed, what)
    return arr if arr.size else None


class _MatcherMethods:
    """Everything a matcher can do, on whatever `_m` resolves to: a matcher
    the Python object owns (Matcher) or one living in a batch slot."""

    __slots__ = ()
    _m: Any
    _trie: Trie

    def __reduce__(self):
        raise UnsupportedError(
            "a treemask.Matcher cannot be pickled: it is a position in a C object of this process. Send its trie"
            " (a Trie pickles by value) and the tokens the matcher accepted, and rebuild it in the receiver:"
            " m = Matcher(trie, <the same options>); m.accept_tokens(tokens)")

    # Per-object scratch for out-parameters, so a step allocates nothing.
    _flag: Any
    _count: Any

    def accept_token(self, token: int) -> bool:
        """Feeds the sampled token. Returns False if it is not allowed (the
        state is then unchanged under the "reject" policy; a rejection is not
        an error and leaves :func:`treemask.last_error` as it was). After
        termination, stop tokens and the pad token are accepted and change
        nothing.

        Raises InvalidStateError in the sticky-error failed state.
        """
        try:
            status = lib.treemask_matcher_accept_token(self._m, token, self._flag)
        except OverflowError:
            raise OutOfRangeError("token %d is not an int32 token id" % token) from None
        if status:
            raise_status(status)
        return bool(self._flag[0])

    def accept_tokens(self, tokens: Iterable[int]) -> int:
        """Accepts ``tokens`` in order until one is not allowed or the sequence
        terminates (speculative decoding); returns how many were accepted.
        ``rollback(n)`` undoes the call."""
        arr = _buffers.int32_array(tokens, "tokens")
        pointer = _buffers.host_buffer(arr, "int32_t[]") if arr.size else ffi.NULL
        status = lib.treemask_matcher_accept_tokens(self._m, pointer, arr.size, self._count)
        if status:
            raise_status(status)
        return int(self._count[0])

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0, *,
                                remaining_tokens: Optional[int] = None) -> bool:
        """Writes the allowed next tokens into row ``index`` of ``bitmask`` (a
        CPU int32 C-contiguous numpy array or torch tensor of shape
        ``(batch, ceil(vocab_size / 32))``; 1-D means one row): every word of
        the row, bit t set iff token t is allowed. Returns ``need_apply``:
        False only if every token is allowed, so masking can be skipped.

        ``remaining_tokens`` applies a length budget to this fill only.
        """
        row, words = _buffers.bitmask_row(bitmask, index, self._trie.bitmask_words)
        if remaining_tokens is None:
            opts = ffi.NULL
        else:
            # Checked here, not left to the library: to it -1 means "the
            # matcher's own budget", which this argument spells None.
            if remaining_tokens < 0:
                raise InvalidArgumentError("remaining_tokens %d must be >= 0" % remaining_tokens)
            budget = ffi.new("treemask_budget_fill_options *")  # experimental extension
            lib.treemask_budget_fill_options_init(budget)
            budget.remaining_tokens = remaining_tokens
            opts = ffi.addressof(budget, "fill")
        status = lib.treemask_matcher_fill_next_token_bitmask(self._m, row, words, opts, self._flag)
        if status:
            raise_status(status)
        return bool(self._flag[0])

    def fill_draft_bitmasks(self, tokens: Sequence[int], bitmask: Any,
                            parents: Optional[Sequence[int]] = None) -> int:
        """Fills the masks of a draft without changing the matcher: row 0 for
        the current state, row i + 1 after draft node i (a chain, or a tree
        given by ``parents``, -1 = the current state). ``bitmask`` needs
        ``len(tokens) + 1`` rows. Returns how many rows are real masks
        (rows after a rejected draft token are all zero)."""
        tok = _buffers.int32_array(tokens, "tokens")
        par_pointer = ffi.NULL
        if parents is not None:
            par = _buffers.int32_array(parents, "parents")
            if par.size != tok.size:
                raise InvalidArgumentError("parents has %d entries for %d tokens" % (par.size, tok.size))
            par_pointer = _buffers.host_buffer(par, "int32_t[]") if par.size else ffi.NULL
        pointer, n_rows, words = _buffers.int32_rows(bitmask)
        status = lib.treemask_matcher_fill_draft_bitmasks(
            self._m, _buffers.host_buffer(tok, "int32_t[]") if tok.size else ffi.NULL, par_pointer, tok.size,
            pointer, n_rows * words, words, self._count)
        if status:
            raise_status(status)
        return int(self._count[0])

    def rollback(self, n: int = 1) -> None:
        """Undoes the last ``n`` accepts that changed the state (termination
        included). Raises OutOfRangeError beyond the history or
        max_rollback_tokens, InvalidStateError when closed or failed."""
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError("rollback: n must be an int, got %s" % type(n).__name__)
        if not 0 <= n < 2**64:
            raise OutOfRangeError("rollback(%d): n must be in [0, 2^64)" % n)
        status = lib.treemask_matcher_rollback(self._m, n)
        if status:
            raise_status(status)

    def reset(self) -> None:
        """Back to the root with an empty history, whatever the state."""
        lib.treemask_matcher_reset(self._m)

    def is_terminated(self) -> bool:
        """True once a stop token (or, with terminate_without_stop_token, a
        leaf) ended the sequence."""
        return bool(lib.treemask_matcher_is_terminated(self._m))

    def can_terminate(self) -> bool:
        """True iff a stop token would terminate now."""
        return bool(lib.treemask_matcher_can_terminate(self._m))

    def is_thinking(self) -> bool:
        """True while inside thinking (think mode)."""
        return bool(lib.treemask_matcher_is_thinking(self._m))

    def _list(self, fn, ctype: str = "int32_t[]") -> List[int]:
        """The (out, cap) -> count list a C query function writes."""
        m = self._m
        n = fn(m, ffi.NULL, 0)
        if n == 0:
            return []
        buf = ffi.new(ctype, n)
        n = min(n, fn(m, buf, n))
        return ffi.unpack(buf, n)

    def next_tokens(self) -> List[int]:
        """The allowed next tokens, ascending (exactly the bits a fill sets)."""
        return self._list(lib.treemask_matcher_next_tokens)

    def next_tokens_into(self, out: np.ndarray) -> int:
        """:meth:`next_tokens` without allocating: writes the first
        ``len(out)`` of them into ``out`` (a writable C-contiguous 1-D numpy
        int32 array) and returns how many there are in all (more than
        ``len(out)`` when they did not fit), for engines that mask a short
        list themselves and a long one with a bitmask."""
        if not isinstance(out, np.ndarray) or out.dtype != np.int32 or out.ndim != 1 \
                or not out.flags.c_contiguous or not out.flags.writeable:
            raise InvalidArgumentError("out: want a writable C-contiguous 1-D numpy int32 array, got %s"
                                       % _buffers.describe(out))
        return int(lib.treemask_matcher_next_tokens(self._m, _buffers.host_buffer(out, "int32_t[]"), out.size))

    def forced_tokens(self) -> List[int]:
        """Jump-forward: the chain of tokens that are the only choice from here
        (stop tokens never included)."""
        return self._list(lib.treemask_matcher_forced_tokens)

    def forced_bytes(self) -> bytes:
        """Jump-forward over a string set (:meth:`Trie.from_strings`): the
        bytes every continuation from here begins with (empty once a string
        may end here, and for a token-path trie). An engine that must feed
        the model its tokenizer's own tokens tokenizes these itself;
        :meth:`forced_tokens` is their longest-match tokenization, cut where
        an allowed token could run past them."""
        m = self._m
        n = lib.treemask_matcher_forced_bytes(m, ffi.NULL, 0)
        if n == 0:
            return b""
        buf = ffi.new("uint8_t[]", n)
        n = min(n, lib.treemask_matcher_forced_bytes(m, buf, n))
        return ffi.unpack(ffi.cast("char *", buf), n)

    def accept_forced_tokens(self) -> List[int]:
        """Accepts the whole :meth:`forced_tokens` chain and returns it."""
        n = lib.treemask_matcher_forced_tokens(self._m, ffi.NULL, 0)
        buf = ffi.new("int32_t[]", max(n, 1))
        status = lib.treemask_matcher_accept_forced_tokens(self._m, buf, n, self._count)
        if status:
            raise_status(status)
        return ffi.unpack(buf, min(n, int(self._count[0])))

    def label_ids(self) -> List[int]:
        """The label ids of the current node (empty unless it is terminal);
        still readable after termination."""
        return self._list(lib.treemask_matcher_label_ids, "int64_t[]")

    def labels(self) -> List[str]:
        """The label strings of :meth:`label_ids` (tries from Trie.from_labels)."""
        return [self._trie.label(i) for i in self.label_ids()]

    def produced_labels(self) -> List[int]:
        """The labels produced so far, in order (multi-label mode), or the ids
        the sequence terminated at."""
        return self._list(lib.treemask_matcher_produced_labels, "int64_t[]")

    def stop_tokens(self) -> List[int]:
        """This matcher's stop tokens (override_stop_tokens or the trie's)."""
        return self._list(lib.treemask_matcher_stop_tokens)

    @property
    def remaining_tokens(self) -> Optional[int]:
        """The length budget left, or None when there is none. Assign an int
        (>= 0) or None to set it."""
        value = lib.treemask_matcher_remaining_tokens(self._m)
        return None if value < 0 else int(value)

    @remaining_tokens.setter
    def remaining_tokens(self, value: Optional[int]) -> None:
        status = lib.treemask_matcher_set_remaining_tokens(self._m, -1 if value is None else value)
        if status:
            raise_status(status)

    @property
    def rollback_depth(self) -> int:
        """How many accepts rollback can undo now."""
        return lib.treemask_matcher_rollback_depth(self._m)

    @property
    def max_rollback_tokens(self) -> int:
        """The max_rollback_tokens this matcher was created with (0 = unlimited)."""
        return lib.treemask_matcher_max_rollback_tokens(self._m)

    @property
    def state(self) -> int:
        """The state-array form of the current state: a node id,
        STATE_TERMINATED or STATE_FAILED (matchers without modes only)."""
        out = ffi.new("uint32_t *")
        status = lib.treemask_matcher_get_state(self._m, out)
        if status:
            raise_status(status)
        return int(out[0])

    @property
    def trie(self) -> Trie:
        return self._trie

    @property
    def counters(self) -> MatcherCounters:
        """Fills, accepted/rejected/rolled-back tokens, fail-closed events and
        resets of this matcher (O(1))."""
        return _buffers.sized_result("treemask_matcher_counters",
                                     lambda out: lib.treemask_matcher_get_counters(self._m, out), MatcherCounters)

    def set_label_filter(self, excluded: Optional[ExclusionSet] = None, banned: Iterable[int] = (),
                         allowed: Optional[Iterable[int]] = None) -> None:
        """Restricts which labels this matcher may produce: none from the
        shared ``excluded`` set or ``banned``, and, if ``allowed`` is given,
        only paths all of whose ids are in it. Prefixes that lead only to
        unavailable labels are never offered. Only before the first accepted
        token; reset and clone keep the filter. All empty removes it."""
        ban = _buffers.int64_array(list(banned), "banned")
        allow = None if allowed is None else _buffers.int64_array(list(allowed), "allowed")
        if excluded is not None and not isinstance(excluded, ExclusionSet):
            raise InvalidArgumentError("excluded must be a treemask.ExclusionSet or None")
        status = lib.treemask_matcher_set_label_filter(
            self._m, excluded._ptr if excluded is not None else ffi.NULL,
            _buffers.host_buffer(ban, "int64_t[]") if ban.size else ffi.NULL, ban.size,
            (_buffers.host_buffer(allow, "int64_t[]") if allow.size else ffi.new("int64_t[1]"))
            if allow is not None else ffi.NULL,
            0 if allow is None else allow.size)
        if status:
            raise_status(status)

    def clone(self) -> "Matcher":
        """An independent copy with the same state, history and options (cheap)."""
        out = ffi.new("treemask_matcher **")
        status = lib.treemask_matcher_clone(self._m, out)
        if status:
            raise_status(status)
        return Matcher._wrap(out[0], self._trie)

    def debug_string(self) -> str:
        """A one-line description for logs (phase, node, path, allowed count...)."""
        n = lib.treemask_matcher_debug_string(self._m, ffi.NULL, 0)
        buf = ffi.new("char[]", n + 1)
        lib.treemask_matcher_debug_string(self._m, buf, n + 1)
        return ffi.string(buf).decode("utf-8", "replace")


class Matcher(_MatcherMethods):
    """Follows one generated sequence (one beam) over a trie.

    Every decode step: :meth:`fill_next_token_bitmask`, mask the logits
    (:func:`treemask.apply_token_bitmask_inplace`), sample, then
    :meth:`accept_token`. One thread at a time; :meth:`clone` is cheap (the
    rollback history is shared copy-on-write). Sharing one matcher between
    threads would corrupt the C library's heap; here every call takes the
    matcher's lock without blocking, so a second thread using it at the same
    moment gets :class:`InvalidStateError` instead (a few hundred ns per
    call).

    Args:
        trie: the :class:`Trie` to follow (kept alive by the matcher).
        failure_policy: what a rejected token does: ``"reject"`` (state
            unchanged, like xgrammar; the default), ``"fail_closed"`` (only
            stop tokens from then on, like RTP-LLM) or ``"sticky_error"``
            (failed until reset); see :mod:`treemask.failure_policy`.
        terminate_without_stop_token: terminate as soon as a leaf is reached.
        max_rollback_tokens: how many accepts rollback may undo (0 = unlimited).
        pad_token: accepted after termination like a stop token.
        label_separator: multi-label mode: the tokens leading from a complete
            label back to the root; ``max_labels`` caps the count (0 = no cap);
            ``leaves_only`` lets sequences end only at leaves.
        think_end_tokens, think_begin_token, start_in_thinking,
            max_thinking_tokens: think mode (free text until the end sequence,
            forced once the budget is spent).
        max_new_tokens: length budget: only branches that end within it are
            offered, so a label is never cut in half while one fits; when
            none fits, the shortest branches are (refuse such a request up
            front, as treemask.vllm does).
        override_stop_tokens: replace the trie's stop tokens for this matcher.
        think_force_end_after_prefix: once a prefix of think_end_tokens is
            emitted naturally, force the rest (RTP-LLM's behaviour; off by
            default, see treemask.h). max_thinking_tokens=0 forces the end at
            once; None is RTP-LLM's <= 0 (no think processor, no budget).

    Raises InvalidArgumentError naming an inconsistent option.
    """

    __slots__ = ("_m", "_trie", "_flag", "_count", "_busy", "__weakref__")

    def __init__(self, trie: Trie, *, failure_policy: Union[str, int] = LIBRARY_DEFAULT,
                 terminate_without_stop_token: bool = False, max_rollback_tokens: int = 0,
                 pad_token: Optional[int] = None, label_separator: Optional[Sequence[int]] = None,
                 max_labels: int = 0, leaves_only: bool = False,
                 think_end_tokens: Optional[Sequence[int]] = None, think_begin_token: Optional[int] = None,
                 start_in_thinking: bool = False, max_thinking_tokens: Optional[int] = None,
                 max_new_tokens: Optional[int] = None,
                 override_stop_tokens: Optional[Sequence[int]] = None,
                 think_force_end_after_prefix: bool = False) -> None:
        if not isinstance(trie, Trie):
            raise InvalidArgumentError("trie must be a treemask.Trie, got %s" % type(trie).__name__)
        # The stable options extended by the (experimental) mode options.
        opts = ffi.new("treemask_mode_options *")
        lib.treemask_mode_options_init(opts)
        opts.matcher.failure_policy = failure_policy_code(failure_policy)
        opts.matcher.terminate_without_stop_token = bool(terminate_without_stop_token)
        if max_rollback_tokens < 0:
            raise InvalidArgumentError("max_rollback_tokens %d must be >= 0" % max_rollback_tokens)
        try:
            opts.matcher.max_rollback_tokens = max_rollback_tokens
        except OverflowError:
            raise OutOfRangeError("max_rollback_tokens %d is out of range" % max_rollback_tokens) from None
        keep = []

        def set_tokens(pointer_field: str, count_field: str, values, what: str) -> None:
            arr = _optional_tokens(values, what)
            if arr is not None:
                keep.append(arr)
                setattr(opts, pointer_field, _buffers.host_buffer(arr, "int32_t[]"))
                setattr(opts, count_field, arr.size)

        try:
            if pad_token is not None:
                opts.matcher.pad_token = pad_token
            set_tokens("label_separator", "n_label_separator", label_separator, "label_separator")
            if max_labels < 0:
                raise InvalidArgumentError("max_labels %d must be >= 0" % max_labels)
            opts.max_labels = max_labels
            opts.leaves_only = bool(leaves_only)
            set_tokens("think_end_tokens", "n_think_end_tokens", think_end_tokens, "think_end_tokens")
            if think_begin_token is not None:
                opts.think_begin_token = think_begin_token
            opts.start_in_thinking = bool(start_in_thinking)
            opts.max_thinking_tokens = -1 if max_thinking_tokens is None else max_thinking_tokens
            opts.think_force_end_after_prefix = bool(think_force_end_after_prefix)
            opts.max_new_tokens = -1 if max_new_tokens is None else max_new_tokens
            set_tokens("override_stop_tokens", "n_override_stop_tokens", override_stop_tokens,
                       "override_stop_tokens")
        except OverflowError as e:
            raise OutOfRangeError("matcher option out of range: %s" % e) from None
        out = ffi.new("treemask_matcher **")
        status = lib.treemask_matcher_create(trie._ptr, ffi.addressof(opts, "matcher"), out)
        if status:
            raise_status(status)
        self._adopt(out[0], trie)

    def _adopt(self, pointer, trie: Trie) -> None:
        self._m = ffi.gc(pointer, lib.treemask_matcher_free)
        self._trie = trie
        self._flag = ffi.new("bool *")
        self._count = ffi.new("size_t *")
        # Taken without blocking by every call: concurrent use raises
        # InvalidStateError instead of corrupting the matcher (_buffers.exclusive).
        self._busy = threading.RLock()

    @classmethod
    def _wrap(cls, pointer, trie: Trie) -> "Matcher":
        self = object.__new__(cls)
        self._adopt(pointer, trie)
        return self

    def __copy__(self) -> "Matcher":
        return self.clone()

    def __repr__(self) -> str:
        return "<treemask.Matcher %s>" % self.debug_string()


_buffers.exclusive(Matcher)
