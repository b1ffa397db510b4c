"""Matcher against the plain-Python model over random tries and walks, the
decoding modes through their Python options, and the bitmask checks.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import copy
import random
import zlib

import numpy as np
import pytest

import treemask
from conftest import scaled
from oracle import allowed_tokens, random_paths


@pytest.mark.parametrize("policy", ["reject", "fail_closed", "sticky_error"])
def test_random_walks_agree_across_channels(policy):
    """The rules are tested once, in C++, against the brute-force oracle;
    here the binding's channels must agree with each other and with the
    API's contract: the numpy bitmask row, next_tokens, accept (a token is
    accepted iff it was listed), need_apply, rollback to the lists seen
    before, reset to the root's, and the failure policies' states."""
    rng = random.Random(zlib.crc32(policy.encode()))
    for _ in range(scaled(15)):
        vocab = rng.choice([33, 64, 200])
        stops = sorted({vocab - 1, vocab - 2})
        paths = random_paths(rng, rng.randint(1, 25), vocab - 2, 6)
        trie = treemask.Trie.from_paths(paths, vocab, stops)
        m = treemask.Matcher(trie, failure_policy=policy)
        root = m.next_tokens()
        seen = [root]  # allowed lists rollback can return to; None once closed
        failed = False
        bitmask = treemask.allocate_token_bitmask(3, vocab)
        for _step in range(40):
            allowed = m.next_tokens()
            out = np.full(rng.randrange(len(allowed) + 2), -1, dtype=np.int32)
            assert m.next_tokens_into(out) == len(allowed)
            assert out.tolist() == (allowed + [-1])[:out.size]  # the first that fit, nothing written past them
            if failed:  # sticky error: no candidates, and a fill is an error
                assert allowed == []
                with pytest.raises(treemask.InvalidStateError):
                    m.fill_next_token_bitmask(bitmask, 2)
                assert allowed_tokens(bitmask[2]) == stops
            else:
                need_apply = m.fill_next_token_bitmask(bitmask, 2)
                assert allowed_tokens(bitmask[2]) == allowed
                assert need_apply == (len(allowed) < vocab)
                assert allowed == sorted(set(allowed))
                if m.is_terminated():
                    assert allowed == stops
            action = rng.random()
            if action < 0.1 and seen and len(seen) > 1 and not failed:
                n = rng.randint(1, len(seen) - 1)
                m.rollback(n)
                del seen[len(seen) - n:]
                assert m.next_tokens() == seen[-1]
            elif action < 0.15:
                m.reset()
                seen, failed = [root], False
                assert m.next_tokens() == root
            else:
                token = (rng.choice(allowed) if allowed and rng.random() < 0.85
                         else rng.randrange(-2, vocab + 2))
                if failed:
                    with pytest.raises(treemask.InvalidStateError):
                        m.accept_token(token)
                    continue
                terminated = m.is_terminated()
                before = treemask.last_error()
                got = m.accept_token(token)
                assert got == (token in allowed), (token, allowed)
                if not got:
                    # A rejection is not an error: the last error stays as it was.
                    assert treemask.last_error() == before
                    if not terminated and policy != "reject":
                        failed = policy == "sticky_error"
                        seen = None
                        if not failed:
                            assert m.next_tokens() == stops  # closed: only stop tokens
                elif not terminated and seen is not None:
                    seen.append(m.next_tokens())


def test_clone_is_independent_and_copy_clones():
    trie = treemask.Trie.from_paths([[1, 2, 3], [1, 4]], 10, [0])
    m = treemask.Matcher(trie)
    m.accept_token(1)
    c = m.clone()
    d = copy.copy(m)
    assert c.accept_token(4) and c.next_tokens() == [0]
    assert m.next_tokens() == [2, 4] and d.next_tokens() == [2, 4]
    m.rollback()
    assert m.next_tokens() == [1] and c.next_tokens() == [0]


def test_rollback_errors_and_limits():
    trie = treemask.Trie.from_paths([[1, 2, 3]], 10, [0])
    m = treemask.Matcher(trie, max_rollback_tokens=2)
    m.accept_tokens([1, 2, 3])
    assert m.rollback_depth == 2 and m.max_rollback_tokens == 2
    with pytest.raises(treemask.OutOfRangeError):
        m.rollback(3)
    m.rollback(2)
    assert m.next_tokens() == [2]
    with pytest.raises(treemask.OutOfRangeError):
        m.rollback(-1)


def test_terminate_without_stop_token_and_pad_token():
    trie = treemask.Trie.from_paths([[1, 2]], 10, [0])
    m = treemask.Matcher(trie, terminate_without_stop_token=True, pad_token=9)
    m.accept_token(1)
    assert not m.is_terminated()
    m.accept_token(2)
    assert m.is_terminated()
    assert m.accept_token(9) and m.accept_token(0) and not m.accept_token(5)
    assert m.label_ids() == [0]


def test_forced_tokens_and_jump_forward():
    trie = treemask.Trie.from_paths([[1, 2, 3, 4], [1, 2, 3, 5]], 10, [0])
    m = treemask.Matcher(trie)
    assert m.forced_tokens() == [1, 2, 3]
    assert m.accept_forced_tokens() == [1, 2, 3]
    assert m.next_tokens() == [4, 5] and m.forced_tokens() == []


def test_speculative_accept_and_draft_bitmasks():
    trie = treemask.Trie.from_paths([[1, 2, 3], [1, 5]], 10, [0])
    m = treemask.Matcher(trie)
    bitmask = treemask.allocate_token_bitmask(4, 10)
    assert m.fill_draft_bitmasks([1, 2, 7], bitmask) == 3
    assert [allowed_tokens(r) for r in bitmask] == [[1], [2, 5], [3], []]
    assert m.next_tokens() == [1]  # unchanged
    assert m.accept_tokens([1, 2, 7]) == 2
    assert m.next_tokens() == [3]
    tree = treemask.allocate_token_bitmask(3, 10)
    m.reset()
    assert m.fill_draft_bitmasks([1, 5], tree, parents=[-1, 0]) == 3
    assert allowed_tokens(tree[2]) == [0]


def test_multi_label_mode_with_exclusions():
    labels = [[1], [2], [3, 4]]
    trie = treemask.Trie.from_paths(labels, 10, [0])
    m = treemask.Matcher(trie, label_separator=[9], max_labels=2)
    excluded = treemask.ExclusionSet(trie, [1])
    assert excluded.n_terminals == 1
    m.set_label_filter(excluded)
    assert m.next_tokens() == [1, 3]  # label 1 (path [2]) excluded
    m.accept_tokens([1, 9])
    assert m.next_tokens() == [3]  # label 0 used, label 1 excluded
    m.accept_tokens([3, 4])
    assert m.next_tokens() == [0]  # max_labels reached
    assert m.accept_token(0) and m.produced_labels() == [0, 2]
    m2 = treemask.Matcher(trie)
    m2.set_label_filter(allowed=[2])
    assert m2.next_tokens() == [3]
    with pytest.raises(treemask.InvalidArgumentError):
        m2.set_label_filter(allowed=[77])


def test_think_mode_and_length_budget():
    trie = treemask.Trie.from_paths([[1, 2, 3], [4]], 20, [0])
    m = treemask.Matcher(trie, think_end_tokens=[18, 19], start_in_thinking=True, max_thinking_tokens=2)
    assert m.is_thinking() and len(m.next_tokens()) == 20
    m.accept_tokens([7, 8])
    assert m.next_tokens() == [18]  # budget spent: the end is forced
    m.accept_tokens([18, 19])
    assert not m.is_thinking() and m.next_tokens() == [1, 4]
    b = treemask.Matcher(trie, max_new_tokens=2)
    assert b.remaining_tokens == 2 and b.next_tokens() == [4]
    b.remaining_tokens = None
    assert b.remaining_tokens is None and b.next_tokens() == [1, 4]
    row = treemask.allocate_token_bitmask(1, 20)
    b.fill_next_token_bitmask(row, remaining_tokens=2)
    assert allowed_tokens(row[0]) == [4]


def test_override_stop_tokens_and_bad_options():
    trie = treemask.Trie.from_paths([[1]], 10, [0])
    m = treemask.Matcher(trie, override_stop_tokens=[8, 7])
    assert m.stop_tokens() == [7, 8]
    m.accept_token(1)
    assert m.next_tokens() == [7, 8]
    out = np.zeros(1, dtype=np.int32)
    assert m.next_tokens_into(out) == 2 and out.tolist() == [7]
    for bad in ([0, 0], np.zeros(2, dtype=np.int64), np.zeros((2, 2), dtype=np.int32), np.zeros(4, np.int32)[::2]):
        with pytest.raises(treemask.InvalidArgumentError, match="out: want"):
            m.next_tokens_into(bad)
    with pytest.raises(treemask.InvalidArgumentError, match="failure_policy"):
        treemask.Matcher(trie, failure_policy="explode")
    with pytest.raises(treemask.OutOfRangeError, match="pad_token"):
        treemask.Matcher(trie, pad_token=10)
    with pytest.raises(treemask.InvalidArgumentError):
        treemask.Matcher(trie, label_separator=[0])  # a stop token as separator
    with pytest.raises(treemask.InvalidArgumentError, match="treemask.Trie"):
        treemask.Matcher("not a trie")


def test_state_and_debug_string():
    trie = treemask.Trie.from_paths([[1, 2]], 10, [0])
    m = treemask.Matcher(trie)
    m.accept_token(1)
    assert m.state == 1
    m.accept_tokens([2, 0])
    assert m.state == treemask.STATE_TERMINATED
    assert "terminated" in m.debug_string() and "terminated" in repr(m)


def test_accept_token_out_of_int32_raises():
    m = treemask.Matcher(treemask.Trie.from_paths([[1]], 10, [0]))
    with pytest.raises(treemask.OutOfRangeError):
        m.accept_token(1 << 40)
    assert m.accept_token(np.int64(1))


@pytest.mark.parametrize("bad, message", [
    (np.zeros((1, 1), np.int32), "words"),
    (np.zeros((1, 4), np.int64), "int32"),
    (np.zeros((4, 2), np.int32).T, "C-contiguous"),
    (np.zeros((1, 2, 2), np.int32), "dimensions"),
    ([0, 0, 0, 0], "numpy.ndarray or torch.Tensor"),
])
def test_fill_rejects_bad_bitmasks(bad, message):
    m = treemask.Matcher(treemask.Trie.from_paths([[1]], 40, [0]))
    with pytest.raises(treemask.Error, match=message):
        m.fill_next_token_bitmask(bad)


def test_fill_index_and_read_only_buffers():
    m = treemask.Matcher(treemask.Trie.from_paths([[1]], 40, [0]))
    bitmask = treemask.allocate_token_bitmask(2, 40)
    with pytest.raises(treemask.OutOfRangeError, match="index 2"):
        m.fill_next_token_bitmask(bitmask, 2)
    bitmask.setflags(write=False)
    with pytest.raises(treemask.InvalidArgumentError, match="read-only"):
        m.fill_next_token_bitmask(bitmask)
    one_row = np.full(2, -1, np.int32)
    assert m.fill_next_token_bitmask(one_row)
    assert allowed_tokens(one_row) == [1]


def test_sticky_error_needs_reset():
    m = treemask.Matcher(treemask.Trie.from_paths([[1]], 10, [0]), failure_policy="sticky_error")
    assert not m.accept_token(5)
    with pytest.raises(treemask.InvalidStateError):
        m.accept_token(1)
    with pytest.raises(treemask.InvalidStateError):
        m.fill_next_token_bitmask(treemask.allocate_token_bitmask(1, 10))
    m.reset()
    assert m.accept_token(1)


def test_every_experimental_entry_names_an_api():
    # treemask.EXPERIMENTAL marks the experimental tier in Python; an entry
    # that no longer names a class, function, method or argument would mark
    # nothing.
    import importlib
    import inspect
    import re
    assert "ExclusionSet" in treemask.EXPERIMENTAL and "Matcher" not in treemask.EXPERIMENTAL
    for entry in sorted(treemask.EXPERIMENTAL):
        path, _, arguments = entry.partition("(")
        obj = treemask
        for part in path.split("."):
            if part == "torch" and obj is treemask:
                try:
                    obj = importlib.import_module("treemask.torch")
                except ImportError:  # torch absent: that entry cannot be checked here
                    break
                continue
            assert hasattr(obj, part), entry
            obj = getattr(obj, part)
        names = re.findall(r"(\w+)=", arguments)
        if names:
            parameters = inspect.signature(obj).parameters
            for name in names:
                assert name in parameters, (entry, name)
