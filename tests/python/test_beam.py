"""The beam step and top-k bindings: marshalling, dtypes, strides, errors, and
a small brute-force check in numpy (the C++ test tests/batch/test_beam_step.cc
is the semantic oracle; this one checks what the binding passes and returns).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import random

import numpy as np
import pytest

import treemask
from conftest import scaled
from oracle import random_paths

VOCAB = 64
STOP = VOCAB - 1


def make_trie(seed, n_paths=30, max_len=4):
    return treemask.Trie.from_paths(random_paths(random.Random(seed), n_paths, STOP, max_len), VOCAB, [STOP])


def log_softmax(row):
    row = row.astype(np.float64)
    return row - (np.log(np.sum(np.exp(row - row.max()))) + row.max())


def reference_step(matchers, logits, scores, B, log_probs=False):
    """Brute force: every candidate of every request, sorted by (score desc,
    b, t). Returns (parents, tokens, scores, new matchers)."""
    n = len(matchers)
    parents = np.full(n, -1, np.int32)
    tokens = np.full(n, -1, np.int32)
    new_scores = np.full(n, -np.inf, np.float64)
    new = list(matchers)
    for r in range(n // B):
        cands = []
        for b in range(B):
            slot = r * B + b
            if not scores[slot] > -np.inf:
                continue
            m = matchers[slot]
            if m.is_terminated():
                cands.append((float(scores[slot]), b, m.stop_tokens()[0]))
                continue
            lp = logits[slot].astype(np.float64) if log_probs else log_softmax(logits[slot])
            for t in m.next_tokens():
                cands.append((float(scores[slot]) + lp[t], b, t))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        for i, (s, b, t) in enumerate(cands[:B]):
            parents[r * B + i], tokens[r * B + i], new_scores[r * B + i] = b, t, s
            c = matchers[r * B + b].clone()
            if not c.is_terminated():
                assert c.accept_token(t)
            new[r * B + i] = c
    return parents, tokens, new_scores, new


@pytest.mark.parametrize("n_threads", [0, 1])
@pytest.mark.parametrize("B", [1, 3, 8])
def test_batch_beam_step_matches_brute_force(B, n_threads):
    trie = make_trie(B)
    rng = np.random.default_rng(B)
    n_requests = 3
    n = n_requests * B
    batch = treemask.BatchMatcher([treemask.Matcher(trie)] * n, n_threads=n_threads)
    ref = [treemask.Matcher(trie) for _ in range(n)]
    scores = treemask.initial_scores(n_requests, B)
    for step in range(6):
        logits = rng.standard_normal((n, VOCAB + 5)).astype(np.float32) * 3  # padded width: all columns count
        want_p, want_t, want_s, ref = reference_step(ref, logits, scores, B)
        out = batch.beam_step(logits, scores, B)
        assert isinstance(out, treemask.BeamStep)
        assert out.parents.dtype == np.int32 and out.tokens.dtype == np.int32 and out.scores.dtype == np.float32
        np.testing.assert_array_equal(out.parents, want_p, err_msg="step %d" % step)
        np.testing.assert_array_equal(out.tokens, want_t)
        np.testing.assert_allclose(out.scores, want_s, rtol=1e-5, atol=1e-5)
        for i in range(n):
            if out.scores[i] > -np.inf:
                assert batch[i].is_terminated() == ref[i].is_terminated()
                assert batch[i].next_tokens() == ref[i].next_tokens()
        scores = out.scores
        if (scores == -np.inf).all() or all(batch[i].is_terminated() for i in range(n) if scores[i] > -np.inf):
            break


def test_state_array_form_matches_batch_form_and_updates_in_place():
    B, n_requests = 4, 2
    n = B * n_requests
    trie = make_trie(7)
    rng = np.random.default_rng(7)
    batch = treemask.BatchMatcher([treemask.Matcher(trie)] * n)
    states = np.full(n, treemask.STATE_ROOT, dtype=np.uint32)
    scores = treemask.initial_scores(n_requests, B)
    batch_scores = scores.copy()
    beam = treemask.Beam(B, n_threads=2)
    for _ in range(5):
        logits = rng.standard_normal((n, VOCAB)).astype(np.float32)
        before = scores.copy()
        parents, tokens = beam.step_states(trie, states, logits, scores)
        assert not np.array_equal(before, scores) or (before == -np.inf).all()
        out = batch.beam_step(logits, batch_scores, B)
        np.testing.assert_array_equal(parents, out.parents)
        np.testing.assert_array_equal(tokens, out.tokens)
        np.testing.assert_array_equal(scores, out.scores)
        batch_scores = out.scores
        # The module-level form with a cached Beam gives the same.
    states2 = np.full(n, treemask.STATE_ROOT, dtype=np.uint32)
    scores2 = treemask.initial_scores(n_requests, B)
    logits = np.random.default_rng(1).standard_normal((n, VOCAB)).astype(np.float32)
    p2, t2 = treemask.beam_step_states(trie, states2, logits, scores2, B)
    states3 = np.full(n, treemask.STATE_ROOT, dtype=np.uint32)
    scores3 = treemask.initial_scores(n_requests, B)
    p3, t3 = beam.step_states(trie, states3, logits, scores3)
    np.testing.assert_array_equal(p2, p3)
    np.testing.assert_array_equal(states2, states3)


def test_log_probs_rows_are_taken_as_is():
    trie = make_trie(3)
    B, n = 2, 4
    logits = np.random.default_rng(3).standard_normal((n, VOCAB)).astype(np.float32)
    ref = [treemask.Matcher(trie) for _ in range(n)]
    scores = treemask.initial_scores(2, B)
    want_p, want_t, want_s, _ = reference_step(ref, logits, scores, B, log_probs=True)
    out = treemask.BatchMatcher(ref).beam_step(logits, scores, B, log_probs=True)
    np.testing.assert_array_equal(out.tokens, want_t)
    np.testing.assert_allclose(out.scores, want_s, rtol=1e-6)


def test_dtypes_and_strides_and_torch():
    torch = pytest.importorskip("torch", reason="torch is not installed (./dev installs it)")
    trie = make_trie(11)
    B, n_requests = 4, 2
    n = B * n_requests
    base = torch.randn(n, 2 * VOCAB + 7) * 2
    strided = base[:, 3:3 + VOCAB + 2]  # row stride 2V+7, width V+2
    assert not strided.is_contiguous()
    want = treemask.BatchMatcher([treemask.Matcher(trie)] * n).beam_step(
        strided.contiguous().numpy(), treemask.initial_scores(n_requests, B), B)
    for dtype, tol in ((torch.float32, 0), (torch.float16, 2e-2), (torch.bfloat16, 1e-1)):
        x = strided.to(dtype)
        ref_logits = x.float().contiguous().numpy()
        ref = treemask.BatchMatcher([treemask.Matcher(trie)] * n).beam_step(
            ref_logits, treemask.initial_scores(n_requests, B), B)
        scores_t = torch.from_numpy(treemask.initial_scores(n_requests, B))
        out = treemask.BatchMatcher([treemask.Matcher(trie)] * n).beam_step(x, scores_t, B)
        assert isinstance(out.parents, torch.Tensor) and out.parents.dtype == torch.int32
        assert out.scores.dtype == torch.float32
        np.testing.assert_array_equal(out.tokens.numpy(), ref.tokens)
        np.testing.assert_allclose(out.scores.numpy(), ref.scores, rtol=1e-5, atol=1e-5)
        if dtype == torch.float32:
            np.testing.assert_array_equal(out.tokens.numpy(), want.tokens)
            assert torch.equal(scores_t, torch.from_numpy(treemask.initial_scores(n_requests, B))), \
                "beam_scores must not be modified"
        x2 = strided.to(dtype)
        x2_copy = x2.clone()
        treemask.BatchMatcher([treemask.Matcher(trie)] * n).beam_step(x2, scores_t, B)
        assert torch.equal(x2, x2_copy), "logits must not be written"
    # numpy float16 and a read-only array
    a = strided.contiguous().numpy().astype(np.float16)
    a.flags.writeable = False
    out = treemask.BatchMatcher([treemask.Matcher(trie)] * n).beam_step(a, [0.0] + [-np.inf] * 3 + [0.0] + [-np.inf] * 3,
                                                                        B)
    assert out.tokens.shape == (n,)


def test_fewer_candidates_than_beams_leave_dead_slots():
    trie = treemask.Trie.from_paths([[1], [2]], VOCAB, [STOP])
    B = 5
    batch = treemask.BatchMatcher([treemask.Matcher(trie)] * B)
    logits = np.zeros((B, VOCAB), dtype=np.float32)
    out = batch.beam_step(logits, treemask.initial_scores(1, B), B)
    np.testing.assert_array_equal(out.parents, [0, 0, -1, -1, -1])
    np.testing.assert_array_equal(out.tokens, [1, 2, -1, -1, -1])
    assert (out.scores[2:] == -np.inf).all()
    out = batch.beam_step(logits, out.scores, B)  # both offer only the stop token
    np.testing.assert_array_equal(out.tokens[:2], [STOP, STOP])
    out2 = batch.beam_step(logits, out.scores, B)  # finished: carried over, score unchanged
    np.testing.assert_array_equal(out2.tokens[:2], [STOP, STOP])
    np.testing.assert_array_equal(out2.scores, out.scores)


def test_topk_states():
    trie = make_trie(5, n_paths=60)
    rng = np.random.default_rng(5)
    states = np.array([treemask.STATE_ROOT, treemask.STATE_TERMINATED], dtype=np.uint32)
    m = treemask.Matcher(trie)
    first = m.next_tokens()[0]
    m.accept_token(first)
    states = np.append(states, np.uint32(m.state))
    logits = rng.standard_normal((3, VOCAB)).astype(np.float32)
    k = 4
    got = treemask.topk_states(trie, states, logits, k)
    assert got.tokens.shape == (3, k) and got.scores.shape == (3, k) and got.counts.shape == (3,)
    for i, allowed in enumerate([treemask.Matcher(trie).next_tokens(), [STOP], m.next_tokens()]):
        lp = log_softmax(logits[i])
        want = sorted(allowed, key=lambda t: (-lp[t], t))[:k]
        assert got.counts[i] == len(want)
        assert got.tokens[i, :len(want)].tolist() == want
        np.testing.assert_allclose(got.scores[i, :len(want)], lp[want], rtol=1e-5)
        assert (got.tokens[i, len(want):] == -1).all() and (got.scores[i, len(want):] == -np.inf).all()
    raw = treemask.topk_states(trie, states[:1], logits[:1], 2, log_probs=True)
    np.testing.assert_array_equal(raw.scores[0], logits[0, raw.tokens[0]])


def test_errors():
    trie = make_trie(1)
    B = 2
    batch = treemask.BatchMatcher([treemask.Matcher(trie)] * 4)
    good = np.zeros((4, VOCAB), dtype=np.float32)
    scores = treemask.initial_scores(2, B)
    with pytest.raises(treemask.InvalidArgumentError, match="multiple of beam_width"):
        batch.beam_step(good[:3], scores[:3], B)
    with pytest.raises(treemask.InvalidArgumentError, match="beam_width"):
        batch.beam_step(good, scores, 0)
    with pytest.raises(treemask.InvalidArgumentError, match="rows, the batch 4 slots"):
        batch.beam_step(np.zeros((6, VOCAB), np.float32), np.zeros(6, np.float32), B)
    with pytest.raises(treemask.InvalidArgumentError, match="beam_scores"):
        batch.beam_step(good, scores[:3], B)
    with pytest.raises(treemask.InvalidArgumentError, match="float32, float16 or bfloat16"):
        batch.beam_step(good.astype(np.float64), scores, B)
    with pytest.raises(treemask.InvalidArgumentError, match="shape"):
        batch.beam_step(good[0], scores, B)
    with pytest.raises(treemask.InvalidArgumentError, match="numpy"):
        batch.beam_step(good.tolist(), scores, B)
    with pytest.raises(treemask.Error):  # narrower than the trie's vocabulary: the C library's check
        batch.beam_step(good[:, :VOCAB - 1], scores, B)
    bad = good.copy()
    bad[0, 5] = np.nan
    with pytest.raises(treemask.InvalidArgumentError):
        batch.beam_step(bad, scores, B)
    empty = treemask.BatchMatcher(4)
    with pytest.raises(treemask.Error):
        empty.beam_step(good, scores, B)
    states = np.zeros(4, dtype=np.uint32)
    with pytest.raises(treemask.InvalidArgumentError, match="writable C-contiguous numpy float32"):
        treemask.beam_step_states(trie, states, good, scores.astype(np.float64), B)
    with pytest.raises(treemask.InvalidArgumentError, match="states"):
        treemask.beam_step_states(trie, states.astype(np.int64), good, scores.copy(), B)
    with pytest.raises(treemask.InvalidArgumentError, match="entries"):
        treemask.beam_step_states(trie, states[:2], good, scores.copy(), B)
    with pytest.raises(treemask.Error, match="state"):
        treemask.beam_step_states(trie, np.full(4, 10**6, np.uint32), good, scores.copy(), B)
    with pytest.raises(treemask.InvalidArgumentError, match="k must be"):
        treemask.topk_states(trie, states, good, -1)
    # k = 0 is valid (the top-k contract of treemask.h, shared with the device).
    none = treemask.topk_states(trie, states, good, 0)
    assert none.tokens.shape == (4, 0) and none.counts.tolist() == [0, 0, 0, 0]
    with pytest.raises(treemask.InvalidArgumentError):
        treemask.Beam(0)
    with pytest.raises(treemask.InvalidArgumentError):
        treemask.Beam(2, n_threads=0)


def test_cuda_tensors_raise_type_error():
    torch = pytest.importorskip("torch", reason="torch is not installed (./dev installs it)")
    trie = make_trie(1)
    try:
        x = torch.zeros((2, VOCAB), device="meta")  # a device tensor without a GPU
    except (RuntimeError, TypeError):  # pragma: no cover
        pytest.skip("this torch has no meta device")
    batch = treemask.BatchMatcher([treemask.Matcher(trie)] * 2)
    with pytest.raises(TypeError, match="cpu"):
        batch.beam_step(x, treemask.initial_scores(1, 2), 2)
    with pytest.raises(treemask.DeviceTensorError):
        treemask.topk_states(trie, np.zeros(2, np.uint32), x, 1)


def test_repeated_steps_reuse_one_beam():
    trie = make_trie(2)
    batch = treemask.BatchMatcher([treemask.Matcher(trie)] * 4)
    logits = np.zeros((4, VOCAB), dtype=np.float32)
    for _ in range(scaled(3)):
        batch.beam_step(logits, treemask.initial_scores(2, 2), 2)
    batch.beam_step(logits, treemask.initial_scores(1, 4), 4)
    assert sorted(batch._beams) == [2, 4]


def test_readme_beam_search_example_runs():
    """The first Python block of the README's "Beam search" section, verbatim."""
    from conftest import SOURCE_ROOT

    readme = (SOURCE_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Beam search\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace = {}
    exec(compile(code, "README.md (beam search example)", "exec"), namespace)
    tokens, scores = namespace["tokens"], namespace["scores"]
    assert (tokens == 999).all() and np.isfinite(scores[[0, 4]]).all()
