"""treemask.beam_driver.BeamSearchState (the step of the vLLM beam search,
fed each beam's top-B allowed log-probabilities as an engine returns them)
against the dense search loop of treemask.hf.beam_search (the full rows
through treemask.Beam), on a pseudo-model whose logits depend only on the
hypothesis: the same hypotheses and scores, on catalogues of one length and
of mixed lengths (items that are prefixes of others, finished hypotheses
carried over, fewer items than beams: dead slots). And the checks that
refuse an answer no treemask beam row could give.

Suite `python`.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import random
import zlib

import numpy as np
import pytest

import treemask
from treemask.beam_driver import BeamSearchState, EngineMismatchError

V = 97
STOP = 96


def logits_of(request, history):
    """The pseudo-model: a row that depends only on the prompt and the
    generated tokens (so both loops see the same rows for a hypothesis)."""
    seed = zlib.crc32(np.array([request, *history], dtype=np.int64).tobytes())
    return np.random.default_rng(seed).normal(0.0, 3.0, V).astype(np.float32)


def log_softmax(x):
    m = x.max()
    return (x - (m + np.log(np.exp(x - m).sum()))).astype(np.float32)


def dense_search(trie, n_requests, B, max_tokens):
    """treemask.hf.beam_search's host loop with pseudo-model logits."""
    beam = treemask.Beam(B)
    states = np.full(n_requests * B, treemask.STATE_ROOT, dtype=np.uint32)
    scores = treemask.initial_scores(n_requests, B)
    tokens = [[] for _ in range(n_requests * B)]
    for _ in range(max_tokens):
        finished = states == treemask.STATE_TERMINATED
        if finished.all():
            break
        logits = np.stack([logits_of(s // B, tokens[s]) for s in range(n_requests * B)])
        parents, chosen = beam.step_states(trie, states, logits, scores)
        old = list(tokens)
        for s in range(n_requests * B):
            p = int(parents[s])
            src = (s // B) * B + p
            tokens[s] = [] if p < 0 else old[src] if finished[src] else [*old[src], int(chosen[s])]
    return [[(tokens[s], float(scores[s])) for s in range(r * B, (r + 1) * B) if scores[s] > -np.inf]
            for r in range(n_requests)]


def engine_answer(search, slot, rng, extra):
    """What vLLM returns for a beam row: its top-B allowed log-probabilities
    (the sampled token again), then -inf at arbitrary tokens when the beam
    allows fewer than B."""
    B = search.beam_width
    m = treemask.Matcher(search.trie)
    assert m.accept_tokens(search.tokens[slot]) == len(search.tokens[slot])
    allowed = m.next_tokens()
    row = log_softmax(logits_of(slot // B, search.tokens[slot]))
    best = sorted(allowed, key=lambda t: (-row[t], t))[:B]
    out = [(t, float(row[t])) for t in best]
    if extra:
        out.append(out[0])  # the sampled token, listed twice
        out += [(rng.randrange(V), float("-inf")) for _ in range(B - len(best))]
        rng.shuffle(out)
    return out


def sparse_search(trie, n_requests, B, max_tokens, extra=True):
    search = BeamSearchState(trie, n_requests, B)
    rng = random.Random(B)
    while search.steps < max_tokens and not search.done():
        search.step({s: engine_answer(search, s, rng, extra) for s in search.live_slots()})
    return search.results(B)


def random_catalogue(seed, n_items, lengths):
    rng = random.Random(seed)
    items = set()
    while len(items) < n_items:
        items.add(tuple(rng.randrange(4, 40) for _ in range(rng.choice(lengths))))
    return treemask.Trie.from_paths(sorted(items), V, [STOP])


def assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert [t for t, _ in g] == [t for t, _ in w]
        np.testing.assert_allclose([s for _, s in g], [s for _, s in w], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("B", [1, 3, 8, 20])
@pytest.mark.parametrize("lengths", [(3,), (1, 2, 3, 4)], ids=["one-length", "mixed-lengths"])
def test_sparse_step_equals_the_dense_search(B, lengths):
    trie = random_catalogue(B * 7 + len(lengths), 60, lengths)
    depth = trie.stats().max_depth
    want = dense_search(trie, 3, B, depth + 1)
    assert_same(sparse_search(trie, 3, B, depth + 1), want)
    # Stopped early: unfinished hypotheses, as the dense loop leaves them.
    assert_same(sparse_search(trie, 3, B, 2, extra=False), dense_search(trie, 3, B, 2))
    for hyps in want:
        assert [s for _, s in hyps] == sorted((s for _, s in hyps), reverse=True), "best first"
        for tokens, _ in hyps:
            m = treemask.Matcher(trie)
            assert m.accept_tokens(tokens) == len(tokens) and m.is_terminated()


def test_prefix_items_finished_early_carry_over_and_dead_slots():
    # "5" and "5 6" are items (5 is terminal and has a child), 3 items in all.
    trie = treemask.Trie.from_paths([[5], [5, 6], [7, 8, 9]], V, [STOP])
    want = dense_search(trie, 2, 8, 4)
    got = sparse_search(trie, 2, 8, 4)
    assert_same(got, want)
    for hyps in got:
        assert sorted(tuple(t) for t, _ in hyps) == sorted([(5, STOP), (5, 6, STOP), (7, 8, 9, STOP)])
    # A finished hypothesis keeps its score: the sum of its tokens' log-probabilities.
    for r, hyps in enumerate(got):
        for tokens, score in hyps:
            total = sum(float(log_softmax(logits_of(r, tokens[:i]))[t]) for i, t in enumerate(tokens))
            assert score == pytest.approx(total, abs=1e-4)


def test_answers_no_beam_row_can_give_are_refused():
    trie = treemask.Trie.from_paths([[5, 6], [5, 7], [8, 9]], V, [STOP])
    first = {0: [(5, -0.5), (8, -1.5)]}
    for bad, message in [({0: [(5, -0.5), (6, -1.0)]}, "does not allow"),  # 6 is not a root token
                         ({0: [(5, 0.5), (8, -1.5)]}, "not a log-probability"),
                         ({0: [(5, float("nan")), (8, -1.5)]}, "not a log-probability"),
                         ({0: [(5, -0.5), (V + 3, -1.0)]}, "not a log-probability"),
                         ({0: [(5, -0.5)]}, "returned 1 candidates")]:  # the root allows 2
        search = BeamSearchState(trie, 1, 2)
        with pytest.raises(EngineMismatchError, match=message):
            search.step(bad)
    search = BeamSearchState(trie, 1, 2)
    search.step(first)
    assert search.tokens[:2] == [[5], [8]]
    with pytest.raises(treemask.InvalidArgumentError, match="no candidates for live slot 1"):
        search.step({0: [(6, -0.1), (7, -2.0)]})
    # -9999.0 (vLLM's JSON stand-in for -inf) is -inf.
    search = BeamSearchState(trie, 1, 3)
    search.step({0: [(5, -0.5), (8, -1.5), (40, -9999.0)]})
    assert search.live_slots() == [0, 1]
