"""Issue 14 (hardening) regressions in the Python package: xgrammar's
indices semantics, RTP-LLM compatibility mode, errors that are
treemask.Error subclasses or TypeErrors naming the argument, labels that
tokenize to nothing, and concurrent use of one matcher.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import threading

import numpy as np
import pytest

import treemask

ROOT = os.environ.get("TREEMASK_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(ROOT, "tests", "data", "rtp-llm")


def test_indices_address_logits_and_bitmask_of_different_row_counts():  # item 14
    logits = np.ones((4, 32), np.float32)
    bitmask = np.array([[0b10], [0b01]], np.int32)  # 2 bitmask rows
    treemask.apply_token_bitmask_inplace(logits, bitmask, indices=[1])
    assert np.isfinite(logits[1]).tolist() == [True] + [False] * 31
    assert np.isfinite(logits[[0, 2, 3]]).all()
    with pytest.raises(treemask.OutOfRangeError, match="n_bitmask_rows=2"):
        treemask.apply_token_bitmask_inplace(logits, bitmask, indices=[3])
    with pytest.raises(treemask.InvalidArgumentError, match="without indices"):
        treemask.apply_token_bitmask_inplace(logits, bitmask)
    # More bitmask rows than logits rows.
    two = np.ones((2, 32), np.float32)
    treemask.apply_token_bitmask_inplace(two, np.zeros((5, 1), np.int32), indices=[1])
    assert np.isfinite(two[0]).all() and not np.isfinite(two[1]).any()


def test_rtp_compat_loads_rtp_llm_fixtures():  # item 15
    utils = os.path.join(DATA, "utils_test_gir_prefix_dict.json")
    with pytest.raises(treemask.InvalidArgumentError, match="does not start with start_token_id"):
        treemask.Trie.from_rtp_json(utils, 100)
    trie = treemask.Trie.from_rtp_json(utils, 100, rtp_compat=True)
    assert trie.stats().n_warnings == 3
    text = ('{"start_token_id": 7, "end_token_id": 2, "sep": "-", '
            '"prefix_dict": {"7": [5, -3, 99999999999999999999999], "7-5": [2]}}')
    trie = treemask.Trie.from_rtp_json(text, 10, rtp_compat=True)
    m = treemask.Matcher(trie)
    assert m.next_tokens() == [5]
    tsv = treemask.Trie.from_rtp_tsv("7\t5\x02-3\n7-5\t2\n", 10, 7, 2, sep="-", rtp_compat=True)
    assert tsv.stats().n_warnings == 1
    gir = treemask.Trie.from_rtp_tsv(os.path.join(DATA, "gir_prefix_dict.txt"), 100000, 225, 2,
                                     rtp_compat=True)
    assert gir.stats().max_fanout == 7835


def test_rtp_json_says_when_a_str_was_read_as_a_path():  # item 11
    with pytest.raises(treemask.FileError, match="read as a file path"):
        treemask.Trie.from_rtp_json("hello", 10)
    body = '{"start_token_id": 225, "end_token_id": 2, "prefix_dict": {"225": [5]}}'
    trie = treemask.Trie.from_rtp_json("\ufeff" + body, 10)
    assert treemask.Matcher(trie).next_tokens() == [5]


def test_errors_are_treemask_errors_or_type_errors_naming_the_argument():  # item 11
    trie = treemask.Trie.from_paths([[1, 2]], 10, 0)
    m = treemask.Matcher(trie)
    with pytest.raises(treemask.OutOfRangeError, match="rollback"):
        m.rollback(10**20)
    with pytest.raises(TypeError, match="rollback: n must be an int"):
        m.rollback("1")

    class NotATokenizer:
        def encode(self, text):
            return [1]

    with pytest.raises(TypeError, match="tokenizer: NotATokenizer.encode\\(\\) does not take add_special_tokens"):
        treemask.Trie.from_labels(["a"], NotATokenizer(), 10, 0)
    with pytest.raises(TypeError, match="tokenizer: want"):
        treemask.Trie.from_labels(["a"], 42, 10, 0)
    with pytest.raises(TypeError, match="tokenizer returned str for labels\\[0\\]"):
        treemask.Trie.from_labels(["a"], lambda text: "12", 10, 0)
    with pytest.raises(TypeError, match="tokenizer returned 'x'"):
        treemask.Trie.from_labels(["a"], lambda text: [1, "x"], 10, 0)
    with pytest.raises(treemask.InvalidArgumentError, match="the stop token 0 is inside its path"):
        treemask.Trie.from_labels(["a"], lambda text: [1, 0], 10, 0, strict=True)


def test_a_label_that_tokenizes_to_nothing_is_skipped_with_its_reason():  # item 11
    encode = {" a": [1], " b": [2], " ": []}
    trie = treemask.Trie.from_labels(["a", "", "b"], lambda text: encode[text], 10, 0)
    assert trie.skipped_labels == [""]
    assert "tokenizes to no tokens" in trie.skipped_labels[0].reason
    m = treemask.Matcher(trie)
    assert not m.can_terminate()  # the root is not terminal
    assert sorted(m.next_tokens()) == [1, 2]
    with pytest.raises(treemask.InvalidArgumentError, match="labels\\[1\\] '': it tokenizes to no tokens"):
        treemask.Trie.from_labels(["a", ""], lambda text: encode[text], 10, 0, strict=True)


def test_concurrent_use_of_one_matcher_raises_instead_of_corrupting():  # item 12
    trie = treemask.Trie.from_paths([[1, 2, 3]] * 1 + [[1, 4]], 10, 0)
    m = treemask.Matcher(trie)
    # Hold the matcher's lock as a call in progress on another thread would.
    entered, release = threading.Event(), threading.Event()

    def hold():
        with m._busy:
            entered.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    entered.wait(10)
    try:
        with pytest.raises(treemask.InvalidStateError, match="used by another thread"):
            m.accept_token(1)
        with pytest.raises(treemask.InvalidStateError):
            m.next_tokens()
        batch = treemask.BatchMatcher([m])
        assert batch[0].next_tokens() == [1]  # the batch holds its own clone
    finally:
        release.set()
        t.join()
    assert m.accept_token(1)  # free again

    # A real race: many threads hammering one matcher never crash it; the
    # losers get InvalidStateError.
    errors = []

    def hammer():
        for _ in range(2000):
            try:
                m.reset()
                m.accept_token(1)
                m.next_tokens()
            except treemask.InvalidStateError:
                errors.append(1)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    m.reset()
    assert m.next_tokens() == [1]


def test_out_of_place_apply_matches_in_place_and_leaves_input():  # item 13
    rng = np.random.default_rng(13)
    for dtype in (np.float32, np.float16):
        logits = rng.standard_normal((5, 70)).astype(dtype)
        logits.flags.writeable = False  # the input is only read
        bitmask = rng.integers(-2**31, 2**31, size=(5, 3)).astype(np.int32)
        for indices in (None, [4, 0], []):
            want = np.array(logits)
            treemask.apply_token_bitmask_inplace(want, bitmask, vocab_size=65, indices=indices)
            got = treemask.apply_token_bitmask(logits, bitmask, vocab_size=65, indices=indices)
            assert got.dtype == logits.dtype and got.shape == logits.shape
            np.testing.assert_array_equal(got, want)
    big = rng.standard_normal((8, 70000)).astype(np.float32)
    big_mask = rng.integers(-2**31, 2**31, size=(8, 2188)).astype(np.int32)
    want = big.copy()
    treemask.apply_token_bitmask_inplace(want, big_mask)
    np.testing.assert_array_equal(treemask.apply_token_bitmask(big, big_mask, n_threads=3), want)
    reuse = np.empty_like(big)
    assert treemask.apply_token_bitmask(big, big_mask, out=reuse) is reuse
    np.testing.assert_array_equal(reuse, want)
    strided = np.ones((3, 40), np.float32)[:, :33]
    got = treemask.apply_token_bitmask(strided, np.zeros((3, 2), np.int32))
    assert got.flags.c_contiguous and np.isinf(got).all() and (strided == 1).all()


def test_processor_does_not_modify_scores():  # item 13
    torch = pytest.importorskip("torch")
    from treemask.hf import TrieLogitsProcessor

    trie = treemask.Trie.from_paths([[1, 2], [3]], 100, 0)
    processor = TrieLogitsProcessor(trie, prompt_length=1)
    scores = torch.randn((2, 100))
    before = scores.clone()
    out = processor(torch.tensor([[5], [5]]), scores)
    assert torch.equal(scores, before)
    assert torch.isfinite(out).sum().item() == 4


def _run_module(*args, cwd=None):
    import subprocess
    import sys

    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "treemask", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


def test_compile_labels_from_the_command_line(tmp_path):  # item 17
    tokenizers = pytest.importorskip("tokenizers", reason="compile-labels reads tokenizer.json with tokenizers")
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders

    vocab = {"[UNK]": 0, "<eos>": 1, "red": 2, "shoes": 3, "blue": 4, "hat": 5}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece()
    tok_path = tmp_path / "tokenizer.json"
    tok.save(str(tok_path))
    labels = tmp_path / "labels.txt"
    labels.write_text("red shoes\nblue hat\ngreen\n\nblue\n", encoding="utf-8")
    out = tmp_path / "labels.tmtrie"
    p = _run_module("compile-labels", str(labels), "--tokenizer", str(tok_path), "--vocab-size", "6",
                    "--stop-tokens", "1", "-o", str(out), "--prefix", "")
    assert p.returncode == 0, p.stderr
    assert "skipped: 'green'" in p.stderr and "does not round-trip" in p.stderr
    assert "compiled 3 of 4 labels" in p.stdout
    trie = treemask.Trie.load(out)
    assert [trie.label(i) for i in range(3)] == ["red shoes", "blue hat", "green"]
    m = treemask.Matcher(trie)
    assert sorted(m.next_tokens()) == [2, 4]
    assert m.accept_token(4) and m.can_terminate()  # "blue" is a label and a prefix
    p = _run_module("compile-labels", str(labels), "--tokenizer", str(tok_path), "--vocab-size", "6",
                    "--stop-tokens", "1", "-o", str(out), "--prefix", "", "--strict")
    assert p.returncode == 1 and "'green'" in p.stderr
    p = _run_module("compile-labels", str(labels), "--tokenizer", str(tmp_path / "nope.json"),
                    "--vocab-size", "6", "--stop-tokens", "1", "-o", str(out))
    assert p.returncode == 2 and "no such file" in p.stderr
    p = _run_module("compile-labels", str(labels), "--tokenizer", str(tok_path), "--vocab-size", "6",
                    "--stop-tokens", "1", "-o", str(labels))
    assert p.returncode == 2 and "is the labels file" in p.stderr
    assert _run_module("frobnicate").returncode == 2


def test_think_force_end_after_prefix():  # item 16
    trie = treemask.Trie.from_paths([[1, 2], [3]], 16, 0)
    m = treemask.Matcher(trie, think_end_tokens=[7, 8, 9], start_in_thinking=True,
                         think_force_end_after_prefix=True)
    assert m.accept_token(5) and m.accept_token(7)
    assert m.next_tokens() == [8] and m.forced_tokens() == [8, 9]
    plain = treemask.Matcher(trie, think_end_tokens=[7, 8, 9], start_in_thinking=True)
    assert plain.accept_token(7) and len(plain.next_tokens()) == 16


def test_ints_too_large_for_c_are_out_of_range_errors():  # item 11
    trie = treemask.Trie.from_paths([[1, 2]], 10, 0)
    m = treemask.Matcher(trie)
    bitmask = treemask.allocate_token_bitmask(1, 10)
    calls = [
        lambda: m.fill_next_token_bitmask(bitmask, remaining_tokens=2**70),
        lambda: setattr(m, "remaining_tokens", 2**70),
        lambda: treemask.Matcher(trie, max_rollback_tokens=2**70),
        lambda: treemask.BatchMatcher(1, n_threads=2**70),
        lambda: m.accept_token(2**70),
        lambda: treemask.BatchMatcher([m])[0].rollback(2**70),
    ]
    for call in calls:
        with pytest.raises(treemask.Error):
            call()
