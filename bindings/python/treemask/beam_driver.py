"""The driver side of an exact constrained beam search over an engine that
scores one step of many beams at a time and returns, for each beam, the
log-probabilities of its best allowed next tokens (vLLM with treemask's
beam rows: :mod:`treemask.vllm.beam`; its OpenAI server:
:mod:`treemask.vllm.client`).

The step itself is treemask's own (:class:`treemask.Beam`, the step of
:func:`treemask.hf.beam_search`), run on sparse rows: each live beam's row
holds the engine's returned log-probabilities at their tokens and ``-inf``
everywhere else, with ``log_probs=True`` (no normalizer). That gives the
same hypotheses and scores as the dense step whenever each beam's returned
tokens include its B best allowed continuations: a request's B winners are
among the B best of each beam, and a candidate that is ``-inf`` is never
selected. So the pinned semantics come for free: finished hypotheses carry
over with their score and compete in the B slots, ties go to the lower beam
then the lower token, and when fewer than B candidates exist the remaining
slots are dead (``-inf``).

Over a string set the step merges candidates that spell the same string
(treemask.h's beam step): a beam's B best candidates can then hold fewer
than B distinct strings (tokens with the same bytes, several stop tokens),
and a winner can lie further down its list. The exactness argument holds
again with "its B best distinct hypotheses" in place of "its B best
continuations": :meth:`BeamSearchState.more_candidates` names the beams
whose returned candidates hold fewer, with how many log-probabilities to
ask for again, and :meth:`BeamSearchState.step` refuses a step that needs
them (its result could differ from the dense step's).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import threading
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _buffers
from .beam import Beam, initial_ends, initial_scores
from .errors import InvalidArgumentError, InvalidStateError
from .trie import STATE_ROOT, STATE_TERMINATED, Trie

__all__ = ["BeamSearchState", "EngineMismatchError", "Candidates", "NEG_INF_FLOOR"]

#: Candidates of one beam: (token, log-probability) pairs as the engine
#: returned them (any order; duplicates allowed; -inf entries ignored).
Candidates = Iterable[Tuple[int, float]]

#: Log-probabilities at or below this are -inf: vLLM's OpenAI server sends
#: -9999.0 for -inf (JSON has no infinity), and no float32 softmax of a real
#: row comes near it.
NEG_INF_FLOOR = -9999.0


class EngineMismatchError(InvalidStateError):
    """The engine's answer for a beam is not what a beam row of this trie
    can produce: a token the trie does not allow there, a value that is not
    a log-probability, or fewer candidates than the beam has allowed
    tokens. The engine's treemask plugin is not active for the request, or
    it constrains to another trie."""


class BeamSearchState:
    """n_requests searches of width B over one trie, advanced one step at a
    time from the candidates an engine returns for the live beams.

    Slots are request-major (slot ``r * B + b``). A slot is *live* (needs the
    engine) while it is neither finished nor dead; at the first step only
    slot ``r * B`` of each request is (all beams start identical: scores
    ``[0, -inf, ...]``, as :func:`treemask.hf.beam_search`).
    """

    def __init__(self, trie: Trie, n_requests: int, beam_width: int) -> None:
        if not isinstance(trie, Trie):
            raise InvalidArgumentError("trie must be a treemask.Trie, got %s" % type(trie).__name__)
        beam_width = _buffers.positive_int(beam_width, "beam_width")
        self.trie = trie
        self.n_requests = n_requests
        self.beam_width = B = beam_width
        self.states = np.full(n_requests * B, STATE_ROOT, dtype=np.uint32)
        self.scores = initial_scores(n_requests, B)
        # Where each finished slot's string ended (a string set's step merges
        # finished strings by it; written STATE_FAILED for token paths).
        self.ends = initial_ends(n_requests, B)
        self.tokens: List[List[int]] = [[] for _ in range(n_requests * B)]
        self.steps = 0
        self._beam = Beam(B)
        self._rows = _rows_buffer(B, trie.vocab_size)
        self._words = trie.bitmask_words

    def live_slots(self) -> List[int]:
        """The slots the engine must score this step, ascending."""
        return np.flatnonzero((self.states != STATE_TERMINATED) & (self.scores > -np.inf)).tolist()

    def done(self) -> bool:
        return not bool(((self.states != STATE_TERMINATED) & (self.scores > -np.inf)).any())

    def step(self, returned: Mapping[int, Candidates]) -> None:
        """One step: ``returned[slot]`` holds the engine's candidates for each
        slot of :meth:`live_slots` (its B best allowed continuations at
        least, with their log-probabilities). Raises EngineMismatchError
        when they cannot come from a beam row of this trie."""
        B = self.beam_width
        live = self.live_slots()
        missing = [s for s in live if s not in returned]
        if missing:
            raise InvalidArgumentError("no candidates for live slot %d" % missing[0])
        checked, short = self._checked(live, returned)
        if short:
            slot = min(short)
            raise InvalidArgumentError(
                "the candidates returned for beam %d hold %d distinct strings, fewer than the beam width %d and"
                " fewer than its state allows: the step could differ from the exact one; ask the engine again"
                " for the slots more_candidates() names" % (slot, short[slot][0], B))
        was_finished = self.states == STATE_TERMINATED
        rows = self._rows
        for r in range(self.n_requests):
            first = r * B
            live_here = [s for s in range(first, first + B) if s in checked]
            if not live_here:
                # Nothing live: its finished hypotheses stay as they are (a
                # step would carry them over in the same order).
                continue
            states = self.states[first:first + B]
            scores = self.scores[first:first + B]
            ends = self.ends[first:first + B]
            try:
                for slot in live_here:
                    tokens, values = checked[slot]
                    rows[slot - first, tokens] = values
                parents, chosen = self._beam.step_states(self.trie, states, rows, scores, ends=ends, log_probs=True)
            finally:
                for slot in live_here:
                    rows[slot - first, checked[slot][0]] = -np.inf
            old = self.tokens[first:first + B]
            for i in range(B):
                p = int(parents[i])
                if p < 0:
                    self.tokens[first + i] = []
                elif was_finished[first + p]:
                    self.tokens[first + i] = old[p]  # carried over: no token appended
                else:
                    self.tokens[first + i] = old[p] + [int(chosen[i])]
        self.steps += 1

    def more_candidates(self, returned: Mapping[int, Candidates], limit: Optional[int] = None) -> Dict[int, int]:
        """Before :meth:`step`: the live slots whose returned candidates are
        too few for an exact step, each with how many log-probabilities to
        ask the engine for instead (``{}``: step now). Only a string set can
        need more (module docstring): a beam whose list is cut (its state
        allows more tokens) and holds fewer than B distinct hypotheses.
        ``limit``: the most the engine gives (vLLM's ``max_logprobs``);
        :class:`InvalidStateError` when a slot already has that many and
        still needs more. Raises :class:`EngineMismatchError` as
        :meth:`step` does."""
        live = self.live_slots()
        missing = [s for s in live if s not in returned]
        if missing:
            raise InvalidArgumentError("no candidates for live slot %d" % missing[0])
        _, short = self._checked(live, returned)
        out: Dict[int, int] = {}
        for slot, (distinct, have, allowed) in sorted(short.items()):
            want = min(allowed, 2 * max(have, 1))
            if limit is not None:
                if have >= limit:
                    raise InvalidStateError(
                        "beam %d: the engine's %d log-probabilities hold %d distinct strings, fewer than the beam"
                        " width %d (its vocabulary spells one string with several tokens, or the trie has several"
                        " stop tokens): raise the engine's max_logprobs (--max-logprobs) to %d or more"
                        % (slot, have, distinct, self.beam_width, want))
                want = min(want, limit)
            out[slot] = want
        return out

    def _checked(self, live: Sequence[int], returned: Mapping[int, Candidates]
                 ) -> Tuple[Dict[int, Tuple[np.ndarray, np.ndarray]], Dict[int, Tuple[int, int, int]]]:
        """Per live slot its finite candidates as (tokens, values) arrays,
        after checking that a beam row of this trie produced them; and for a
        string set, the slots short of candidates as {slot: (distinct
        hypotheses, candidates, allowed tokens)}."""
        out: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        slots: List[int] = []
        tokens: List[int] = []
        for slot in live:
            best: Dict[int, float] = {}
            for t, v in returned[slot]:
                v = float(v)
                if v <= NEG_INF_FLOOR:
                    continue
                if not (v <= 1e-4) or not 0 <= int(t) < self.trie.vocab_size:  # NaN, +x, or a foreign id
                    raise EngineMismatchError(
                        "the engine returned %r for token %d of beam %d: not a log-probability of an allowed"
                        " token (is treemask's vLLM plugin loaded, and the engine in logprobs_mode"
                        " processed_logits?)" % (v, int(t), slot))
                best[int(t)] = v
            tok = np.fromiter(best.keys(), dtype=np.int32, count=len(best))
            val = np.fromiter(best.values(), dtype=np.float32, count=len(best))
            out[slot] = (tok, val)
            slots.extend([slot] * len(best))
            tokens.extend(best)
        nexts = np.empty(0, dtype=np.uint32)
        if tokens:
            nexts = self.states[np.array(slots, dtype=np.int64)].copy()
            accepted = self.trie.advance_states(nexts, np.array(tokens, dtype=np.int32))
            if not accepted.all():
                i = int(np.flatnonzero(~accepted)[0])
                raise EngineMismatchError(
                    "the engine returned token %d for beam %d (after %s), which the trie does not allow there:"
                    " the request was not constrained by this trie (is treemask's vLLM plugin loaded?)"
                    % (tokens[i], slots[i], self.tokens[slots[i]]))
        # Every beam offers min(B, its allowed tokens): fewer means the
        # engine masked with another trie (or cut the list).
        bitmask = np.zeros((len(live), self._words), dtype=np.int32)
        self.trie.fill_states(self.states[np.array(live, dtype=np.int64)], bitmask)
        allowed = _popcount_rows(bitmask)
        short: Dict[int, Tuple[int, int, int]] = {}
        at = 0
        for i, slot in enumerate(live):
            have = out[slot][0].size
            want = min(self.beam_width, int(allowed[i]))
            if have < want:
                raise EngineMismatchError(
                    "the engine returned %d candidates for beam %d, whose state allows %d (want >= %d): it"
                    " constrains with another trie, or asked for fewer log-probabilities than the beam width"
                    % (have, slot, int(allowed[i]), want))
            if self.trie.is_string_set and have < int(allowed[i]):
                # A cut list: exact only with B distinct hypotheses in it (a
                # stop token's next state is TERMINATED: the string ends here).
                distinct = len(set(nexts[at:at + have].tolist()))
                if distinct < self.beam_width:
                    short[slot] = (distinct, have, int(allowed[i]))
            at += have
        return out, short

    def results(self, n_return: int) -> List[List[Tuple[List[int], float]]]:
        """Per request its best ``n_return`` hypotheses, best first, as
        (generated tokens, cumulative log-probability); dead slots are left
        out, so a request whose trie has fewer hypotheses gets fewer."""
        B = self.beam_width
        out = []
        for r in range(self.n_requests):
            hyps = []
            for slot in range(r * B, r * B + min(n_return, B)):
                score = float(self.scores[slot])
                if score > -np.inf:
                    hyps.append((list(self.tokens[slot]), score))
            out.append(hyps)
        return out


_local = threading.local()


def _rows_buffer(beam_width: int, vocab_size: int) -> np.ndarray:
    """This thread's (B, vocab) float32 rows of -inf (cached: 30 MB at B = 50
    over a 151,936-token vocabulary). A step writes the engine's values into
    one request's rows and resets them before it returns, O(B * B)."""
    cache = getattr(_local, "rows", None)
    if cache is None:
        cache = _local.rows = {}
    key = (beam_width, vocab_size)
    rows = cache.get(key)
    if rows is None:
        cache.clear()  # one size at a time
        rows = cache[key] = np.full(key, -np.inf, dtype=np.float32)
    return rows


def _popcount_rows(bitmask: np.ndarray) -> np.ndarray:
    """The set bits of each int32 row."""
    count = getattr(np, "bitwise_count", None)  # numpy >= 2.0
    if count is not None:
        return count(bitmask.view(np.uint32)).sum(axis=1, dtype=np.int64)
    return np.unpackbits(bitmask.view(np.uint8), axis=1).sum(axis=1, dtype=np.int64)
