"""The byte-level string-set engine (src/strings) against xgrammar 0.2.8.

For each label set and tokenizer, xgrammar compiles ``root ::= "<prefix+s1>"
| ...`` and is walked from the root choosing random allowed tokens (so the
paths are mostly not canonical tokenizations); the C++ engine replays the same
tokens through ``strings_replay`` (a test tool: the engine has no C API yet).
At every state the two bitmasks must be equal, the engine must accept every
token xgrammar accepted, and both must terminate after the stop token. A
token that xgrammar rejects at a state (one sampled among the masked ones)
must be masked by the engine too.

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
import importlib.util
import json
import os
import pathlib
import random
import struct
import subprocess
import zlib
from typing import List, Sequence

import numpy as np
import pytest

from conftest import SHARED_DATA, SOURCE_ROOT, scaled

xgr = pytest.importorskip("xgrammar")
transformers = pytest.importorskip("transformers")

REPLAY = os.environ.get("TREEMASK_STRINGS_REPLAY", "")

TOKENIZERS = {
    # name: (directory, logits width, stop token)
    "qwen2.5": ("qwen2.5-instruct", 151936, 151645),
    "mistral-nemo": ("mistral-nemo-instruct", 131072, 2),
}

HANDMADE = ["", "a", "ab", "abc", "abc def", "abcd", 'say "hi"', 'say "hi" twice', "back\\slash", "\\",
            "\\\\n", "tab\tand newline\n", "café", "café au lait", "Zürich", "東京", "東京都", "😀", "😀😀 ok",
            "\u00e9\u0301", "It's", "It's a \"quote\"", "a-b_c.d/e", "0", "00", "001", "100%"]


def _bench_module():
    spec = importlib.util.spec_from_file_location("bench_strings", SOURCE_ROOT / "tests" / "bench" / "bench_strings.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    if not REPLAY or not pathlib.Path(REPLAY).is_file():
        pytest.skip("TREEMASK_STRINGS_REPLAY names no strings_replay tool (meson sets it)")
    return label_sets()


def write_strings(path: pathlib.Path, strings: Sequence[str]) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<I", len(strings)))
        for s in strings:
            b = s.encode("utf-8")
            f.write(struct.pack("<I", len(b)) + b)


def write_sequences(path: pathlib.Path, sequences: Sequence[Sequence[int]]) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<I", len(sequences)))
        for seq in sequences:
            f.write(struct.pack("<I", len(seq)) + struct.pack("<%di" % len(seq), *seq))


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
def tokenizer_files(tokenizer_name: str, directory: pathlib.Path):
    """The transformers tokenizer, xgrammar's TokenizerInfo and the vocabulary
    dump of one tokenizer, made once per module."""
    path, width, stop = TOKENIZERS[tokenizer_name]
    hf = transformers.AutoTokenizer.from_pretrained(str(SHARED_DATA / "tokenizers" / path))
    info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=width, stop_token_ids=[stop])
    dump = directory / (tokenizer_name + ".vocab")
    _bench_module().write_dump(dump, hf, width)
    return info, dump


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    return tmp_path_factory.mktemp("vocab")


@pytest.mark.parametrize("tokenizer_name", sorted(TOKENIZERS))
@pytest.mark.parametrize("set_name", ["geonames", "zh-taxonomy", "handmade"])
def test_masks_equal_xgrammars_along_random_walks(data, dumps, tokenizer_name, set_name, tmp_path):
    _, width, stop = TOKENIZERS[tokenizer_name]
    strings, prefix = data[set_name]
    info, vocab_path = tokenizer_files(tokenizer_name, dumps)
    grammar = "root ::= " + " | ".join(ebnf_literal(prefix + s) for s in strings)
    compiled = xgr.GrammarCompiler(info).compile_grammar(grammar)
    walks = xgrammar_walks(lambda: xgr.GrammarMatcher(compiled), width, stop, scaled(25),
                           seed=zlib.crc32((tokenizer_name + set_name).encode()))

    strings_path, seq_path, out_path = (tmp_path / n for n in ("strings", "seq", "out"))
    write_strings(strings_path, strings)
    write_sequences(seq_path, [w[0] for w in walks])
    subprocess.run([REPLAY, str(vocab_path), str(strings_path), prefix.encode("utf-8").hex() or "-", str(stop),
                    str(seq_path), str(out_path)], check=True)
    out = out_path.read_bytes()
    words = (width + 31) // 32
    at = 0
    states = 0
    for w, (tokens, masks, probes) in enumerate(walks):
        for i, token in enumerate(tokens):
            ours = np.frombuffer(out, dtype=np.uint32, count=words, offset=at)
            at += 4 * words
            diff = np.flatnonzero(np.unpackbits((ours ^ masks[i]).view(np.uint8), bitorder="little"))
            assert len(diff) == 0, "walk %d step %d (tokens %s): masks differ at tokens %s" % (
                w, i, tokens[:i], diff[:10].tolist())
            states += 1
            kind = out[at]
            at += 1
            assert kind == (1 if token == stop else 0), "walk %d step %d: token %d -> %d" % (w, i, token, kind)
            if probes[i] is not None:
                bad, accepted = probes[i]
                assert not accepted, "xgrammar accepted token %d that its own mask excludes" % bad
        assert tokens[-1] == stop  # both ended on the stop token
    assert at == len(out)
    longest = max(len(w[0]) for w in walks)
    print("%s/%s: %d states, longest walk %d tokens" % (tokenizer_name, set_name, states, longest))
    assert states > scaled(25)
