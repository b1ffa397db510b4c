"""The byte-level string-set engine (src/strings) against xgrammar 0.2.8.

For each label set and tokenizer, xgrammar compiles ``root ::= "<prefix+s1>"
| ...`` and is walked from the root choosing random allowed tokens (so the
paths are mostly not canonical tokenizations); treemask replays the same
tokens through its public API (``Vocab.from_tokenizer``,
``Trie.from_strings``, a ``Matcher``). At every state the two bitmasks must be
equal, treemask must accept every token xgrammar accepted, and both must
terminate after the stop token. A token that xgrammar rejects at a state (one
sampled among the masked ones) must be rejected by treemask too.

Label sets: GeoNames names with prefix " " (a sample: xgrammar compiles 5,000
in 0.5 s), the Chinese Google product taxonomy with prefix "" (a sample: all
5,427 take xgrammar 65 s to compile), and a hand-made family of strings that
are prefixes of each other, with quotes, backslashes, non-ASCII and the empty
string. None contains an added token's text (our vocabulary never allows
added tokens as text; xgrammar 0.2.8 flags none of them special).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import functools
import json
import random
import zlib
from typing import List

import numpy as np
import pytest

import treemask
from conftest import SHARED_DATA, scaled

xgr = pytest.importorskip("xgrammar")
transformers = pytest.importorskip("transformers")

TOKENIZERS = {
    # name: (directory, logits width, stop token)
    "qwen2.5": ("qwen2.5-instruct", 151936, 151645),
    "mistral-nemo": ("mistral-nemo-instruct", 131072, 2),
}

HANDMADE = ["", "a", "ab", "abc", "abc def", "abcd", 'say "hi"', 'say "hi" twice', "back\\slash", "\\",
            "\\\\n", "tab\tand newline\n", "café", "café au lait", "Zürich", "東京", "東京都", "😀", "😀😀 ok",
            "\u00e9\u0301", "It's", "It's a \"quote\"", "a-b_c.d/e", "0", "00", "001", "100%"]


def label_sets() -> dict:
    geonames = sorted({line.split("\t", 1)[0] for line in
                       (SHARED_DATA / "labels" / "geonames-cities1000.tsv").read_text(encoding="utf-8").splitlines()})
    zh_file = SHARED_DATA / "taxonomies" / "google-product-taxonomy" / "taxonomy-with-ids.zh-CN.txt"
    zh = [line.split(" - ", 1)[1] for line in zh_file.read_text(encoding="utf-8").splitlines()
          if line and not line.startswith("#")]
    rng = random.Random(2026)
    return {
        "geonames": (rng.sample(geonames, scaled(2000)), " "),
        "zh-taxonomy": (rng.sample(zh, min(len(zh), scaled(300))), ""),
        "handmade": (HANDMADE, ""),
    }


def ebnf_literal(text: str) -> str:
    """An xgrammar EBNF string literal (JSON's escapes, which it reads)."""
    return json.dumps(text, ensure_ascii=False)


@pytest.fixture(scope="module")
def data():
    if not SHARED_DATA.is_dir():
        pytest.skip("%s is absent (a clone without ../shared)" % SHARED_DATA)
    return label_sets()


def xgrammar_walks(matcher_factory, width: int, stop: int, n_walks: int, seed: int):
    """Random walks through xgrammar: per walk the tokens, the mask before
    each token (and after the last, if the walk did not end), and one
    masked token per state with whether xgrammar accepts it."""
    rng = random.Random(seed)
    bitmask = xgr.allocate_token_bitmask(1, width)
    walks = []
    for _ in range(n_walks):
        m = matcher_factory()
        tokens: List[int] = []
        masks: List[np.ndarray] = []
        probes = []
        while not m.is_terminated():
            m.fill_next_token_bitmask(bitmask)
            row = bitmask[0].numpy().view(np.uint32).copy()
            masks.append(row)
            bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:width]
            allowed = np.flatnonzero(bits)
            assert len(allowed) > 0, "xgrammar allows nothing before terminating"
            masked = np.flatnonzero(bits == 0)
            probe = None
            if len(masked):
                bad = int(masked[rng.randrange(len(masked))])
                probe = (bad, m.accept_token(bad))
                if probe[1]:
                    m.rollback(1)
            probes.append(probe)
            # Prefer the stop token rarely, so walks go deep.
            choice = [int(t) for t in allowed if t != stop] or [stop]
            token = stop if (stop in allowed and rng.random() < 0.2) else choice[rng.randrange(len(choice))]
            assert m.accept_token(token)
            tokens.append(token)
        walks.append((tokens, masks, probes))
    return walks


@functools.lru_cache(maxsize=None)
def tokenizer(tokenizer_name: str):
    """The transformers tokenizer, xgrammar's TokenizerInfo and treemask's
    Vocab of one tokenizer, made once per module."""
    path, width, stop = TOKENIZERS[tokenizer_name]
    hf = transformers.AutoTokenizer.from_pretrained(str(SHARED_DATA / "tokenizers" / path))
    info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=width, stop_token_ids=[stop])
    return info, treemask.Vocab.from_tokenizer(hf, width)


@pytest.mark.parametrize("tokenizer_name", sorted(TOKENIZERS))
@pytest.mark.parametrize("set_name", ["geonames", "zh-taxonomy", "handmade"])
def test_masks_equal_xgrammars_along_random_walks(data, tokenizer_name, set_name):
    _, width, stop = TOKENIZERS[tokenizer_name]
    strings, prefix = data[set_name]
    info, vocab = tokenizer(tokenizer_name)
    grammar = "root ::= " + " | ".join(ebnf_literal(prefix + s) for s in strings)
    compiled = xgr.GrammarCompiler(info).compile_grammar(grammar)
    walks = xgrammar_walks(lambda: xgr.GrammarMatcher(compiled), width, stop, scaled(25),
                           seed=zlib.crc32((tokenizer_name + set_name).encode()))

    trie = treemask.Trie.from_strings(strings, vocab, [stop], prefix=prefix)
    ours = treemask.allocate_token_bitmask(1, width)
    states = 0
    for w, (tokens, masks, probes) in enumerate(walks):
        m = treemask.Matcher(trie)
        for i, token in enumerate(tokens):
            m.fill_next_token_bitmask(ours[0])
            row = np.asarray(ours[0]).view(np.uint32)
            diff = np.flatnonzero(np.unpackbits((row ^ masks[i]).view(np.uint8), bitorder="little"))
            assert len(diff) == 0, "walk %d step %d (tokens %s): masks differ at tokens %s" % (
                w, i, tokens[:i], diff[:10].tolist())
            states += 1
            if probes[i] is not None:
                bad, accepted = probes[i]
                assert not accepted, "xgrammar accepted token %d that its own mask excludes" % bad
                probe = m.clone()
                assert not probe.accept_token(bad), "walk %d step %d: treemask accepts %d" % (w, i, bad)
            assert m.accept_token(token), "walk %d step %d: treemask rejects %d" % (w, i, token)
            assert m.is_terminated() == (token == stop), "walk %d step %d: token %d" % (w, i, token)
        assert tokens[-1] == stop and m.is_terminated()  # both ended on the stop token
        # After the end both allow the stop token alone.
        m.fill_next_token_bitmask(ours[0])
        assert np.flatnonzero(np.unpackbits(np.asarray(ours[0]).view(np.uint8), bitorder="little")).tolist() \
            == [stop]
    longest = max(len(w[0]) for w in walks)
    print("%s/%s: %d states, longest walk %d tokens" % (tokenizer_name, set_name, states, longest))
    assert states > scaled(25)


def test_added_tokens_are_text_to_xgrammar_but_never_to_treemask(data):
    """The one known difference (README, "Strings: any tokenization or
    canonical"): xgrammar 0.2.8 matches an added token such as <|im_start|>
    by its text inside a string; treemask never allows an added token as
    text (only a stop token, where a string ends), so such a string can
    still be spelled, but not with the added token."""
    _, width, stop = TOKENIZERS["qwen2.5"]
    info, vocab = tokenizer("qwen2.5")
    im_start = 151644
    text = "a<|im_start|>b"
    compiled = xgr.GrammarCompiler(info).compile_grammar("root ::= " + ebnf_literal(text))
    xm = xgr.GrammarMatcher(compiled)
    assert xm.accept_token(vocab_token(vocab, b"a"))
    assert xm.accept_token(im_start)  # xgrammar: the added token is its text
    m = treemask.Matcher(treemask.Trie.from_strings([text], vocab, [stop]))
    assert m.accept_token(vocab_token(vocab, b"a"))
    assert im_start not in m.next_tokens() and not m.clone().accept_token(im_start)
    assert m.next_tokens()  # the text is still spelled, by ordinary tokens ("<", "<|", ...)


def vocab_token(vocab, piece: bytes) -> int:
    return next(t for t in range(vocab.n_tokens) if vocab.token_bytes(t) == piece)
