"""BatchMatcher: one call fills or advances every row exactly as the
matchers would one by one.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import random

import numpy as np
import pytest

import treemask
from conftest import scaled
from oracle import random_paths


def make_trie(rng, vocab=300):
    return treemask.Trie.from_paths(random_paths(rng, 40, vocab - 1, 6), vocab, [vocab - 1])


@pytest.mark.parametrize("n_threads", [0, 2])
def test_batch_follows_independent_matchers(n_threads):
    rng = random.Random(n_threads)
    trie = make_trie(rng)
    n = 12
    singles = [treemask.Matcher(trie) for _ in range(n)]
    batch = treemask.BatchMatcher(singles, n_threads=n_threads)
    assert len(batch) == n and batch.n_slots == n
    got = treemask.allocate_token_bitmask(n, trie.vocab_size)
    bound = treemask.allocate_token_bitmask(n, trie.vocab_size)
    want = treemask.allocate_token_bitmask(n, trie.vocab_size)
    batch.bind_bitmask(bound)
    for step in range(scaled(30)):
        need = batch.fill_next_token_bitmask(got)
        need_bound = batch.fill_bound(incremental=step % 3 != 0)
        for i, m in enumerate(singles):
            assert need[i] == m.fill_next_token_bitmask(want, i)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(bound, want)
        np.testing.assert_array_equal(need, need_bound)
        tokens = []
        for i, m in enumerate(singles):
            allowed = m.next_tokens()
            tokens.append(rng.choice(allowed) if rng.random() < 0.9 else -1)
        accepted = batch.accept_tokens(np.array(tokens, dtype=np.int64))
        for i, m in enumerate(singles):
            assert accepted[i] == (tokens[i] < 0 or m.accept_token(tokens[i]))
            if m.is_terminated() and rng.random() < 0.5:
                m.reset()
                batch[i].reset()
        if rng.random() < 0.3:  # beam reordering
            src = [rng.randrange(n) for _ in range(n)]
            batch.reorder(src)
            singles = [singles[s].clone() for s in src]
            if rng.random() < 0.3:
                bound.fill(-1)  # someone else wrote the bound rows
                batch.invalidate()
        for i, m in enumerate(singles):
            assert batch[i].next_tokens() == m.next_tokens()


def test_slots_fill_and_empty_slots():
    trie = treemask.Trie.from_paths([[1, 2], [3]], 40, [0])
    batch = treemask.BatchMatcher(3)
    assert "slots=3 used=0" in repr(batch)
    batch.set_matcher(1, treemask.Matcher(trie))
    bitmask = np.zeros((3, 2), np.int32)
    batch.fill_next_token_bitmask(bitmask, slots=[1])
    assert bitmask[0].tolist() == [0, 0] and bitmask[1].tolist() == [(1 << 1) | (1 << 3), 0]
    with pytest.raises(treemask.InvalidStateError, match="slot 0 is empty"):
        batch[0].next_tokens()
    with pytest.raises(treemask.Error):
        batch.fill_next_token_bitmask(bitmask, slots=[0])
    with pytest.raises(treemask.Error):
        batch.accept_tokens([1, 1, 1])  # a token for an empty slot
    assert batch.accept_tokens([-1, 3, -1]).tolist() == [True, True, True]
    assert batch[1].is_terminated() is False and batch[-2].next_tokens() == [0]
    clone = batch[1].clone()
    assert isinstance(clone, treemask.Matcher) and clone.next_tokens() == [0]
    batch.reorder([1, 1, -1])
    assert batch[0].next_tokens() == [0] and batch[1].next_tokens() == [0]
    with pytest.raises(treemask.InvalidStateError):
        batch[2].next_tokens()


def test_batch_errors():
    trie = treemask.Trie.from_paths([[1]], 40, [0])
    batch = treemask.BatchMatcher([treemask.Matcher(trie), None])
    with pytest.raises(treemask.InvalidArgumentError, match="2 slots"):
        batch.fill_next_token_bitmask(treemask.allocate_token_bitmask(3, 40))
    with pytest.raises(treemask.InvalidArgumentError, match="n_tokens is 1; pass one token per slot"):
        batch.accept_tokens([1])
    with pytest.raises(treemask.OutOfRangeError):
        batch[5]
    with pytest.raises(treemask.InvalidStateError, match="no bitmask is bound"):
        batch.fill_bound()
    with pytest.raises(treemask.Error):
        batch.reorder([0, 7])
    with pytest.raises(treemask.InvalidArgumentError):
        treemask.BatchMatcher(0)
    # Ranges are the library's to check (one message each, naming the
    # argument); a value no size_t holds is named here.
    with pytest.raises(treemask.InvalidArgumentError, match="n_slots must be in"):
        treemask.BatchMatcher([])
    with pytest.raises(treemask.InvalidArgumentError, match="n_threads must be at most 256"):
        treemask.BatchMatcher(1, n_threads=257)
    with pytest.raises(treemask.OutOfRangeError, match="n_slots -1 is negative"):
        treemask.BatchMatcher(-1)
    with pytest.raises(treemask.OutOfRangeError, match="n_threads -1 is negative"):
        treemask.BatchMatcher(1, n_threads=-1)
    with pytest.raises(treemask.InvalidArgumentError, match="n is 1; src needs one entry per slot"):
        batch.reorder([0])
    with pytest.raises(treemask.InvalidArgumentError):
        batch.set_matcher(0, "matcher")
