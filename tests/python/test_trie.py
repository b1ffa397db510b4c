"""Trie construction, files, label names and the errors that name the
problem.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import pathlib
import random

import numpy as np
import pytest

import treemask
from conftest import SOURCE_ROOT, scaled
from oracle import TrieModel, allowed_tokens, random_paths

RTP_DIR = SOURCE_ROOT / "tests" / "data" / "rtp-llm"


def root_allowed(trie):
    m = treemask.Matcher(trie)
    return m.next_tokens()


def walk_all(trie, model: TrieModel):
    """Every path of the model is accepted, and every prefix allows exactly
    what the model allows."""
    bitmask = treemask.allocate_token_bitmask(1, trie.vocab_size)
    for path in model.paths:
        m = treemask.Matcher(trie)
        for i, token in enumerate(path):
            assert m.next_tokens() == model.allowed(path[:i])
            m.fill_next_token_bitmask(bitmask)
            assert allowed_tokens(bitmask[0]) == model.allowed(path[:i])
            assert m.accept_token(token)
        assert m.next_tokens() == model.allowed(path)
        assert m.accept_token(model.stops[0])
        assert m.is_terminated()


def test_from_paths_matches_model():
    rng = random.Random(1)
    for _ in range(scaled(20)):
        vocab = rng.choice([5, 31, 32, 33, 1000])
        stops = [vocab - 1]
        paths = random_paths(rng, rng.randint(1, 30), vocab - 1, 6)
        trie = treemask.Trie.from_paths(paths, vocab, stops)
        model = TrieModel(paths, stops)
        assert trie.vocab_size == vocab
        assert trie.stop_tokens == stops
        assert trie.stats().max_depth == max(len(p) for p in paths)
        walk_all(trie, model)


def test_from_paths_accepts_arrays_and_label_ids():
    arr = np.array([[3, 4, 5], [3, 4, 6], [7, 8, 9]], dtype=np.int64)
    trie = treemask.Trie.from_paths(arr, 50, stop_tokens=0, labels=[10, 11, 12])
    m = treemask.Matcher(trie)
    for t in (3, 4, 6):
        assert m.accept_token(t)
    assert m.label_ids() == [11]
    # A numpy path list and a tuple list build the same trie.
    same = treemask.Trie.from_paths([tuple(r) for r in arr.tolist()], 50, [0])
    assert same.stats()._replace(max_label_id=0) == trie.stats()._replace(max_label_id=0)
    assert (same.stats().max_label_id, trie.stats().max_label_id) == (2, 12)  # path indices; the labels given


def test_no_labels_catalogue_keeps_its_paths_and_saves_the_label_bytes():
    # Semantic IDs: the paths are the items. Without labels every path is
    # still allowed and ends, no labels are reported, and the 4 bytes per
    # item of the label array are gone.
    rng = np.random.default_rng(5)
    codes = np.unique(rng.integers(0, 64, size=(2000, 4)), axis=0) + np.array([100, 164, 228, 292])
    with_labels = treemask.Trie.from_paths(codes, 400, stop_tokens=0)
    plain = treemask.Trie.from_paths(codes, 400, stop_tokens=0, no_labels=True)
    assert with_labels.stats().bytes - plain.stats().bytes == 4 * len(codes)  # path indices fit 32 bits
    assert plain.stats().n_labels == 0
    for row in codes[::97]:
        m = treemask.Matcher(plain)
        for t in row:
            assert m.accept_token(int(t))
        assert m.can_terminate() and m.label_ids() == []
    with pytest.raises(treemask.InvalidArgumentError, match="no_labels"):
        treemask.Trie.from_paths(codes, 400, stop_tokens=0, labels=range(len(codes)), no_labels=True)


def test_duplicate_paths_merge_and_keep_both_labels():
    trie = treemask.Trie.from_paths([[1, 2], [1, 2], [1]], 10, [0], labels=[5, 6, 7])
    m = treemask.Matcher(trie)
    m.accept_token(1)
    assert m.label_ids() == [7]
    m.accept_token(2)
    assert m.label_ids() == [5, 6]


def test_empty_path_makes_the_root_terminal():
    trie = treemask.Trie.from_paths([[], [4]], 10, [9])
    assert root_allowed(trie) == [4, 9]


@pytest.mark.parametrize("paths, message", [
    ([[1, 2], [3, 1 << 40]], "paths[1][1]"),
    ([[1, 2], [3, -(1 << 40)]], "paths[1][1]"),
    ([[1, 2], [3, "x"]], "paths[1][1]"),
    ([[1, 2.5]], "paths"),
])
def test_bad_tokens_name_path_and_position(paths, message):
    with pytest.raises(treemask.Error) as e:
        treemask.Trie.from_paths(paths, 100, [0])
    assert message in str(e.value)


def test_library_errors_carry_the_c_message():
    with pytest.raises(treemask.OutOfRangeError) as e:
        treemask.Trie.from_paths([[1, 2], [3, 500]], 100, [0])
    assert "500" in str(e.value) and e.value.status == 2 and e.value.status_name == "out of range"
    assert isinstance(e.value, ValueError)
    with pytest.raises(treemask.InvalidArgumentError) as e:
        treemask.Trie.from_paths([[1, 0, 2]], 100, [0])  # a stop token inside a path
    assert "stop token" in str(e.value)
    with pytest.raises(treemask.Error, match="vocab_size"):
        treemask.Trie.from_paths([[1]], 0, [0])
    with pytest.raises(treemask.InvalidArgumentError, match="vocab_size must be positive, got -5"):
        treemask.Trie.from_paths([[1]], -5, [0])
    with pytest.raises(treemask.InvalidArgumentError, match="vocab_size 2147483648: want 1"):
        treemask.Trie.from_paths([[1]], 2**31, [0])
    with pytest.raises(treemask.Error, match="empty"):
        treemask.Trie.from_paths([], 10, [0])
    with pytest.raises(treemask.InvalidArgumentError, match="labels has 1 entries for 2 paths"):
        treemask.Trie.from_paths([[1], [2]], 10, [0], labels=[1])
    with pytest.raises(TypeError):
        treemask.Trie()


def test_rtp_json_text_bytes_and_path_agree():
    path = RTP_DIR / "gir_prefix_dict.json"
    text = path.read_text()
    tries = [
        treemask.Trie.from_rtp_json(path, 100000),
        treemask.Trie.from_rtp_json(str(path), 100000),
        treemask.Trie.from_rtp_json(text, 100000),
        treemask.Trie.from_rtp_json(text.encode(), 100000),
    ]
    d = json.loads(text)
    root = sorted(d["prefix_dict"][str(d["start_token_id"])])
    for trie in tries:
        assert trie.stop_tokens == [d["end_token_id"]]
        assert root_allowed(trie) == root
        assert trie.stats() == tries[0].stats()


def test_rtp_json_errors_name_the_key_and_offset(tmp_path):
    bad_key = '{"start_token_id": 225, "end_token_id": 2, "prefix_dict": {"1_2": [3]}}'
    with pytest.raises(treemask.InvalidArgumentError) as e:
        treemask.Trie.from_rtp_json(bad_key, 1000)
    assert '"1_2"' in str(e.value)
    with pytest.raises(treemask.ParseError, match="byte"):
        treemask.Trie.from_rtp_json('{"start_token_id": 225, "prefix_dict": {', 1000)
    with pytest.raises(treemask.FileError) as e:
        treemask.Trie.from_rtp_json(tmp_path / "missing.json", 1000)
    assert "missing.json" in str(e.value) and isinstance(e.value, OSError)
    with pytest.raises(treemask.InvalidArgumentError, match="NUL"):
        treemask.Trie.from_rtp_json("a\0b", 1000)


def test_rtp_tsv_text_and_path_agree():
    path = RTP_DIR / "gir_prefix_dict.txt"
    from_path = treemask.Trie.from_rtp_tsv(path, 100000, 225, 2)
    from_text = treemask.Trie.from_rtp_tsv(path.read_bytes(), 100000, 225, 2)
    from_str = treemask.Trie.from_rtp_tsv(path.read_text(), 100000, 225, 2)
    assert from_path.stats() == from_text.stats() == from_str.stats()
    assert len(root_allowed(from_path)) == 7835


def test_jsonl():
    trie = treemask.Trie.from_jsonl('[1, 2]\n{"tokens": [1, 3], "label": 7}\n', 10, [0])
    m = treemask.Matcher(trie)
    m.accept_tokens([1, 3])
    assert m.label_ids() == [7]


def test_save_load_round_trip_keeps_labels_and_metadata(tmp_path):
    labels = ["alpha", "beta", "gamma", "dup"]

    def encode(text):
        return [ord(c) for c in text]

    trie = treemask.Trie.from_labels(labels, encode, 128, [0], prefix="", decode=lambda ids: "".join(map(chr, ids)))
    path = tmp_path / "labels.tmtrie"
    trie.save(path, metadata={"tokenizer": "chars"})
    for loaded in (treemask.Trie.load(path), treemask.Trie.load(str(path), trusted=True)):
        assert loaded.labels == tuple(labels)
        assert loaded.metadata["tokenizer"] == "chars"
        assert loaded.stats() == trie.stats()
        m = treemask.Matcher(loaded)
        m.accept_tokens(encode("gamma"))
        assert m.labels() == ["gamma"]
    with pytest.raises(treemask.FileError):
        treemask.Trie.load(tmp_path / "nope.tmtrie")
    corrupt = tmp_path / "corrupt.tmtrie"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    with pytest.raises(treemask.CorruptFileError):
        treemask.Trie.load(corrupt)
    corrupt.write_bytes(bytes(data[:100]))
    with pytest.raises(treemask.CorruptFileError):
        treemask.Trie.load(corrupt)


class CharTokenizer:
    """A transformers-like tokenizer: one id per character, except that 'é'
    decodes to 'e' (so labels with it do not round-trip)."""

    def encode(self, text, add_special_tokens=True):
        assert add_special_tokens is False
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=True):
        assert clean_up_tokenization_spaces is False
        return "".join("e" if i == ord("é") else chr(i) for i in ids)


def test_from_labels_skips_what_does_not_round_trip():
    labels = ["cafe", "café", "tea", "tea"]
    trie = treemask.Trie.from_labels(labels, CharTokenizer(), 512, [1])
    assert trie.skipped_labels == ["café"]
    assert trie.label(1) == "café" and trie.labels == tuple(labels)
    m = treemask.Matcher(trie)
    m.accept_tokens([ord(c) for c in " tea"])
    assert m.label_ids() == [2, 3] and m.labels() == ["tea", "tea"]
    with pytest.raises(treemask.InvalidArgumentError, match="café"):
        treemask.Trie.from_labels(labels, CharTokenizer(), 512, [1], strict=True)
    with pytest.raises(treemask.OutOfRangeError):
        trie.label(9)
    with pytest.raises(treemask.InvalidArgumentError, match="no label names"):
        treemask.Trie.from_paths([[1]], 10, [0]).label(0)


def test_from_labels_leaves_out_labels_containing_a_stop_token():
    trie = treemask.Trie.from_labels(["ab", "a!"], CharTokenizer(), 128, [ord("!")], prefix="")
    assert trie.skipped_labels == ["a!"]


def test_from_labels_with_a_plain_callable_is_not_checked():
    trie = treemask.Trie.from_labels(["x", "y"], lambda text: [len(text), ord(text[-1])], 256, [0])
    assert trie.skipped_labels == []
    assert treemask.Matcher(trie).next_tokens() == [2]


def test_from_labels_with_a_tokenizers_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "[EOS]": 1, "red": 2, "green": 3, "blue": 4, "dark": 5}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    trie = treemask.Trie.from_labels(["red", "dark blue", "purple"], tok, 6, [1], prefix="")
    # WordLevel decodes with spaces between words; "purple" is unknown.
    assert trie.skipped_labels == ["purple"]
    m = treemask.Matcher(trie)
    assert m.next_tokens() == [2, 5]


def test_state_arrays_follow_the_matcher():
    rng = random.Random(7)
    paths = random_paths(rng, 40, 60, 5)
    trie = treemask.Trie.from_paths(paths, 64, [63])
    model = TrieModel(paths, [63])
    for _ in range(scaled(20)):
        path = rng.choice(model.paths)
        states = np.zeros(1, dtype=np.uint32)
        bitmask = treemask.allocate_token_bitmask(1, 64)
        for i, token in enumerate(path + (63,)):
            trie.fill_states(states, bitmask)
            assert allowed_tokens(bitmask[0]) == model.allowed(path[:i])
            assert trie.advance_states(states, [token]).tolist() == [True]
        assert states[0] == treemask.STATE_TERMINATED
        assert trie.advance_states(states, [5]).tolist() == [False]
        assert states[0] == treemask.STATE_TERMINATED
    states = np.zeros(2, dtype=np.uint32)
    accepted = trie.advance_states(states, [-1, 62], failure_policy="fail_closed")
    assert accepted.tolist() == [True, 62 in model.allowed(())]
    with pytest.raises(treemask.InvalidArgumentError, match="writable"):
        trie.advance_states([0, 0], [1, 1])
    with pytest.raises(treemask.OutOfRangeError):
        trie.fill_states([12345678], treemask.allocate_token_bitmask(1, 64))
    with pytest.raises(treemask.InvalidArgumentError, match="failure_policy"):
        trie.advance_states(states, [1, 1], failure_policy="explode")


def test_trie_outlives_its_python_object():
    trie = treemask.Trie.from_paths([[1, 2]], 10, [0])
    m = treemask.Matcher(trie)
    del trie
    import gc
    gc.collect()
    assert m.accept_token(1) and m.next_tokens() == [2]
