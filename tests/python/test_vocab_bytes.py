"""Token bytes from tokenizers (treemask._vocab_bytes): the real Qwen2.5 and
Mistral-NeMo tokenizers (round trip of random strings through the
tokenizer's own encoding, every id against xgrammar's decoded vocabulary), a
SentencePiece-style tokenizer with byte fallback, tiktoken (a real
``tiktoken.Encoding`` when the package is installed, and a stub with its
documented attributes either way), and the errors.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import functools
import pathlib
import random
import unicodedata
from typing import Any, NamedTuple

import numpy as np
import pytest

from conftest import scaled
from treemask import InvalidArgumentError, UnsupportedError
from treemask._vocab_bytes import byte_level_decoder, vocab_bytes

tokenizers = pytest.importorskip("tokenizers")

MODELS = {
    # name: (directory, logits width of the model, eos id, NFC normalizer)
    "qwen2.5": ("qwen2.5-instruct", 151936, 151645, True),
    "mistral-nemo": ("mistral-nemo-instruct", 131072, 2, False),
}

# Characters of random strings: ASCII with punctuation and whitespace,
# accented Latin, combining marks, Cyrillic, CJK, emoji (4-byte UTF-8).
ALPHABET = (
    [chr(c) for c in range(0x20, 0x7F)] + list("\n\t  \r") + list("éèàçøÅßñüÉ") + ["\u0301", "\u0308"]
    + list("москваПривет") + list("北京東京서울中文字") + ["\U0001F600", "\U0001F30D", "\u2581", "\u0120"]
)


def random_text(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40)))


class Model(NamedTuple):
    name: str
    tok: Any  # tokenizers.Tokenizer
    width: int
    eos: int
    nfc: bool
    directory: pathlib.Path


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request, shared_data_dir):
    directory, width, eos, nfc = MODELS[request.param]
    path = shared_data_dir / "tokenizers" / directory / "tokenizer.json"
    return Model(request.param, tokenizers.Tokenizer.from_file(str(path)), width, eos, nfc, path.parent)


@pytest.fixture(scope="module")
def shared_data_dir():
    from conftest import SHARED_DATA

    if not SHARED_DATA.is_dir():
        pytest.skip("%s is absent (a clone without ../shared)" % SHARED_DATA)
    return SHARED_DATA


def test_random_strings_round_trip_through_the_tokenizers_encoding(model):
    v = vocab_bytes(model.tok, model.width)
    assert v.encoding == "byte_level"
    assert v.vocab_size == model.width
    rng = random.Random(23)
    for _ in range(scaled(2000)):
        text = random_text(rng)
        ids = model.tok.encode(text, add_special_tokens=False).ids
        expected = (unicodedata.normalize("NFC", text) if model.nfc else text).encode("utf-8")
        assert b"".join(v.tokens[i] for i in ids) == expected, (model.name, text, ids)


def test_added_tokens_are_special_and_padding_is_past_the_tokenizer(model):
    v = vocab_bytes(model.tok, model.width)
    added = model.tok.get_added_tokens_decoder()
    assert len(v.tokens) == model.tok.get_vocab_size(with_added_tokens=True)
    assert sorted(i for i, s in enumerate(v.special) if s) == sorted(added)
    assert v.special[model.eos]
    for i, t in added.items():
        assert v.tokens[i] == t.content.encode("utf-8")
    # Every other id has bytes.
    assert all(v.tokens[i] for i in range(len(v.tokens)) if not v.special[i])
    data, offsets, flags = v.packed()
    assert offsets.dtype == np.uint64 and flags.dtype == np.uint8
    assert len(offsets) == len(v.tokens) + 1 and int(offsets[-1]) == len(data)
    for i in (0, 1000, model.eos, len(v.tokens) - 1):
        assert data[int(offsets[i]):int(offsets[i + 1])] == v.tokens[i]
        assert flags[i] == int(v.special[i])


@functools.lru_cache(maxsize=None)
def transformers_tokenizer(directory: pathlib.Path):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(directory))


def test_transformers_tokenizer_gives_the_same_bytes(model):
    hf = transformers_tokenizer(model.directory)
    assert vocab_bytes(hf, model.width) == vocab_bytes(model.tok, model.width)


def test_every_id_matches_xgrammars_decoded_vocabulary(model):
    """xgrammar 0.2.8 decodes the same tokenizer on its own: the bytes agree
    for every id (xgrammar flags no added token special, so for those only
    the bytes are compared)."""
    xgr = pytest.importorskip("xgrammar")
    hf = transformers_tokenizer(model.directory)
    info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=model.width)
    v = vocab_bytes(model.tok, model.width)
    decoded = info.decoded_vocab
    assert len(decoded) >= len(v.tokens)
    assert [i for i in range(len(v.tokens)) if decoded[i] != v.tokens[i]] == []


def test_vocab_size_may_cut_off_added_tokens_only(model):
    full = vocab_bytes(model.tok)
    n = len(full.tokens)
    last_regular = max(i for i in range(n) if not full.special[i])
    if last_regular < n - 1:  # Qwen: the added tokens come last
        cut = vocab_bytes(model.tok, last_regular + 1)
        assert len(cut.tokens) == cut.vocab_size == last_regular + 1
    with pytest.raises(InvalidArgumentError, match="would cut off token %d" % last_regular):
        vocab_bytes(model.tok, last_regular)


def test_vocab_size_must_be_a_positive_int():
    tok, _ = sentencepiece_tokenizer()
    for bad in (0, -1, 2.5, True, "300"):
        with pytest.raises(InvalidArgumentError, match="vocab_size must be a positive int"):
            vocab_bytes(tok, bad)


def sentencepiece_tokenizer():
    """A Llama-2 style tokenizer: BPE over ▁-joined words with byte fallback."""
    from tokenizers import decoders, models, normalizers

    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    words = ["▁", "a", "b", "c", "d", "▁a", "▁b", "ab", "▁ab", "cd", "▁cd", "é", "▁é"]
    pieces += words
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = [("▁", "a"), ("▁", "b"), ("a", "b"), ("▁a", "b"), ("c", "d"), ("▁", "cd"), ("▁", "é")]
    tok = tokenizers.Tokenizer(models.BPE(vocab, merges, byte_fallback=True, unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens(["<s>", "</s>"])
    return tok, vocab


def test_sentencepiece_spaces_and_byte_fallback():
    tok, vocab = sentencepiece_tokenizer()
    v = vocab_bytes(tok)
    assert v.encoding == "sentencepiece"
    assert v.tokens[vocab["<0x0A>"]] == b"\n" and not v.special[vocab["<0x0A>"]]
    assert v.tokens[vocab["<0xFF>"]] == b"\xff"
    assert v.tokens[vocab["▁ab"]] == b" ab"
    assert v.special[vocab["<s>"]] and v.special[vocab["</s>"]]
    rng = random.Random(5)
    for _ in range(scaled(500)):
        text = "".join(rng.choice("abcd é\nø北") for _ in range(rng.randint(1, 12)))
        ids = tok.encode(text, add_special_tokens=False).ids
        # The normalizer puts ▁ (a space) before the text: the string-set
        # prefix " " of such tokenizers.
        assert b"".join(v.tokens[i] for i in ids) == (" " + text).encode("utf-8"), (text, ids)


class SlowSentencePiece:
    """A slow transformers tokenizer as the converter sees it: get_vocab()
    and added_tokens_decoder, no backend_tokenizer."""

    def __init__(self, vocab):
        self._vocab = vocab

        class Added:
            def __init__(self, content):
                self.content = content

        self.added_tokens_decoder = {1: Added("<s>"), 2: Added("</s>")}

    def get_vocab(self):
        return dict(self._vocab)


def test_slow_tokenizer_encoding_read_off_its_pieces():
    tok, vocab = sentencepiece_tokenizer()
    v = vocab_bytes(SlowSentencePiece(vocab))
    assert v.encoding == "sentencepiece"
    assert v.tokens == vocab_bytes(tok).tokens
    assert v.special == vocab_bytes(tok).special


def test_byte_level_alphabet_is_gpt2s():
    dec = byte_level_decoder()
    assert len(dec) == 256 and sorted(dec.values()) == list(range(256))
    assert dec["Ġ"] == 0x20 and dec["Ċ"] == 0x0A and dec["!"] == 0x21 and dec["ÿ"] == 0xFF


class StubEncoding:
    """tiktoken's documented Encoding API, over a small vocabulary with a hole
    (id 4) and two special tokens."""

    def __init__(self):
        self.ranks = {b"a": 0, b"b": 1, b" ": 2, b"ab": 3, b" ab": 5, b"\xe2\x82": 6, b"\xac": 7}
        self.specials = {"<|endoftext|>": 8, "<|fim|>": 9}
        self.n_vocab = 10
        self.special_tokens_set = set(self.specials)
        self._by_id = {i: b for b, i in self.ranks.items()}
        self._by_id.update({i: s.encode() for s, i in self.specials.items()})

    def decode_single_token_bytes(self, token):
        return self._by_id[token]  # KeyError for a hole, as tiktoken

    def encode_single_token(self, text):
        return self.specials[text]


def test_tiktoken_stub_encoding():
    v = vocab_bytes(StubEncoding())
    assert v.encoding == "raw"
    assert v.tokens == [b"a", b"b", b" ", b"ab", b"", b" ab", b"\xe2\x82", b"\xac", b"<|endoftext|>", b"<|fim|>"]
    assert v.special == [False] * 4 + [True] + [False] * 3 + [True, True]
    assert vocab_bytes(StubEncoding(), 16).vocab_size == 16


def test_real_tiktoken_encoding_round_trips(shared_data_dir):
    """A real tiktoken Encoding (no download: built from Qwen2.5's byte
    vocabulary, whose ids are tiktoken ranks) round-trips random strings."""
    tiktoken = pytest.importorskip("tiktoken")
    tok = tokenizers.Tokenizer.from_file(str(shared_data_dir / "tokenizers" / "qwen2.5-instruct" / "tokenizer.json"))
    base = vocab_bytes(tok)
    ranks = {b: i for i, b in enumerate(base.tokens) if not base.special[i]}
    specials = {t.decode(): i for i, t in enumerate(base.tokens) if base.special[i]}
    pattern = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    pattern += r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""  # Qwen2.5's pre-tokenizer split
    enc = tiktoken.Encoding("qwen-test", pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
    v = vocab_bytes(enc)
    assert v.tokens == base.tokens and v.special == base.special
    rng = random.Random(11)
    for _ in range(scaled(1000)):
        text = random_text(rng)
        ids = enc.encode_ordinary(text)
        assert b"".join(v.tokens[i] for i in ids) == text.encode("utf-8")


def test_unsupported_and_wrong_objects():
    from tokenizers import decoders, models

    wp = tokenizers.Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    wp.decoder = decoders.WordPiece()
    with pytest.raises(UnsupportedError, match="WordPiece"):
        vocab_bytes(wp)
    with pytest.raises(TypeError, match="tokenizer: expected"):
        vocab_bytes(object())
    bad = tokenizers.Tokenizer(models.BPE({"a": 0, "\u4e00": 1}, []))
    bad.decoder = decoders.ByteLevel()
    with pytest.raises(InvalidArgumentError, match="token 1: piece '\u4e00' is not in the byte_level encoding"):
        vocab_bytes(bad)
