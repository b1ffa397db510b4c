"""treemask.llama_cpp's logits processor without llama-cpp-python: the calls
llama-cpp-python makes (every evaluated token, then a strided float32 view of
the candidates' logits in id order), driven by hand with random scores.
tests/llama_cpp/run.sh runs it inside the real llama-cpp-python.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import numpy as np
import pytest

import treemask
from treemask.llama_cpp import TrieLogitsProcessor

V = 1000
STOP = 999
PATHS = [[5, 7, 9], [5, 7, 11], [5, 8], [20], [5]]


@pytest.fixture
def trie():
    return treemask.Trie.from_paths(PATHS, V, [STOP])


def candidate_logits(rng):
    """What llama-cpp-python passes: the logit field of the llama_token_data
    records (id, logit, p), so a strided view, not a contiguous array."""
    rec = np.zeros(V, dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True))
    rec["id"] = np.arange(V)
    rec["logit"] = rng.standard_normal(V).astype(np.float32)
    return rec, rec["logit"]


def allowed(scores):
    return np.flatnonzero(np.isfinite(scores)).tolist()


def generate(proc, prompt, rng, forced=None):
    """One generation as llama-cpp-python runs it; returns the tokens up to
    and including the stop token."""
    ids = list(prompt)
    out = []
    for step in range(10):
        rec, view = candidate_logits(rng)
        original = view.copy()
        result = proc(np.array(ids, dtype=np.intc), view)
        assert result is view
        keep = np.isfinite(view)
        assert np.array_equal(view[keep], original[keep])  # kept logits untouched
        token = int(forced[step]) if forced and step < len(forced) else int(np.argmax(view))
        out.append(token)
        ids.append(token)
        if token == STOP:
            return out
    raise AssertionError("no stop token within 10 steps: %r" % out)


def test_every_generation_is_a_path(trie):
    rng = np.random.default_rng(0)
    proc = TrieLogitsProcessor(trie)
    seen = set()
    for run in range(60):
        prompt = rng.integers(0, 900, size=int(rng.integers(1, 6))).tolist()
        out = generate(proc, prompt, rng)
        assert out[:-1] in PATHS and out[-1] == STOP
        assert proc.matcher.can_terminate() and proc.error is None  # (the stop token itself ends the loop)
        seen.add(tuple(out))
    assert len(seen) > 2


def test_allowed_sets_step_by_step(trie):
    proc = TrieLogitsProcessor(trie)
    rng = np.random.default_rng(1)
    _, view = candidate_logits(rng)
    proc(np.array([1, 2], dtype=np.intc), view)
    assert allowed(view) == [5, 20]
    _, view = candidate_logits(rng)
    proc(np.array([1, 2, 5], dtype=np.intc), view)
    assert allowed(view) == [7, 8, STOP]
    _, view = candidate_logits(rng)
    proc(np.array([1, 2, 5], dtype=np.intc), view)  # the same call again: nothing new
    assert allowed(view) == [7, 8, STOP]
    _, view = candidate_logits(rng)
    proc(np.array([1, 2, 5, 7], dtype=np.intc), view)
    assert allowed(view) == [9, 11]
    # a different prompt: a new generation from the root
    _, view = candidate_logits(rng)
    proc(np.array([3, 3, 3], dtype=np.intc), view)
    assert allowed(view) == [5, 20]


def test_fixed_prompt_length(trie):
    proc = TrieLogitsProcessor(trie, prompt_length=2)
    _, view = candidate_logits(np.random.default_rng(2))
    proc(np.array([1, 2, 5, 7], dtype=np.intc), view)  # first call already 2 tokens in
    assert allowed(view) == [9, 11]


def test_a_token_outside_the_trie_closes(trie):
    proc = TrieLogitsProcessor(trie)
    rng = np.random.default_rng(3)
    out = generate(proc, [1], rng, forced=[6])  # token 6 is not allowed at the root
    assert out[0] == 6 and out[-1] == STOP and len(out) == 2  # then only the stop token


def test_internal_error_fails_closed_and_never_raises(trie, capsys):
    proc = TrieLogitsProcessor(trie)
    rng = np.random.default_rng(4)
    _, view = candidate_logits(rng)
    proc(np.array([1], dtype=np.intc), view)

    def broken(*args, **kwargs):
        raise RuntimeError("simulated failure")

    proc._mask = broken
    _, view = candidate_logits(rng)
    assert proc(np.array([1, 5], dtype=np.intc), view) is view  # no exception
    assert allowed(view) == [STOP]
    assert "simulated failure" in proc.error
    assert "simulated failure" in capsys.readouterr().err
    _, view = candidate_logits(rng)
    proc(np.array([1, 5, 7], dtype=np.intc), view)  # stays closed
    assert allowed(view) == [STOP]
    del proc._mask
    proc.reset()
    _, view = candidate_logits(rng)
    proc(np.array([4], dtype=np.intc), view)
    assert allowed(view) == [5, 20] and proc.error is None


def test_garbage_arguments_never_raise(trie):
    proc = TrieLogitsProcessor(trie)
    scores = np.zeros(V, dtype=np.float32)
    assert proc("not ids", scores) is scores  # bad input_ids: closed, no exception
    assert allowed(scores) == [STOP]
    proc.reset()
    assert proc(np.array([1]), None) is None  # scores it cannot write: still no exception
    proc.reset()
    short = np.zeros(10, dtype=np.float32)  # fewer scores than the stop token id
    proc(np.array([1], dtype=np.intc), short)
    assert allowed(short) == [5]


def test_think_phase_uses_the_bitmask(trie):
    proc = TrieLogitsProcessor(trie, think_end_tokens=[50], start_in_thinking=True, think_begin_token=49)
    rng = np.random.default_rng(5)
    _, view = candidate_logits(rng)
    proc(np.array([1], dtype=np.intc), view)
    assert len(allowed(view)) == V - 1 and 49 not in allowed(view)
    _, view = candidate_logits(rng)
    proc(np.array([1, 50], dtype=np.intc), view)
    assert allowed(view) == [5, 20]


def test_constructor_errors(trie):
    with pytest.raises(treemask.InvalidArgumentError):
        TrieLogitsProcessor("not a trie")
    with pytest.raises(treemask.InvalidArgumentError):
        TrieLogitsProcessor(trie, prompt_length=-1)
