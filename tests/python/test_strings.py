"""String sets at the byte level through the Python API: Vocab, Trie.from_strings
and every Python entry point that takes a trie (Matcher, BatchMatcher, state
arrays, top-k and the beam step, save/load, treemask.hf's processor and
beam search, the llama.cpp processor, ``python -m treemask compile-strings``),
each compared with a brute-force model over a small vocabulary, or refusing
a string set with UnsupportedError where it is defined over token paths.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import random
import subprocess
import sys

import numpy as np
import pytest

import treemask
from conftest import SHARED_DATA, scaled

EOS, PAD_ID = 0, 1
PIECES = [b"<eos>", b"<pad>", b"", b"a", b"b", b"c", b"e", b"i", b"n", b"o", b"p", b"s", b"t", b"v", b"g", b" ",
          b"pos", b"itive", b"positive", b"neg", b"ative", b"negative", b"neu", b"tral", b" pos", b" neg",
          b"ab", b"abc", b"ca", b"\xc3", b"\xa9", b"caf\xc3\xa9", b"\xc3\xa9", b"ba"]
SPECIAL = [True, True] + [False] * (len(PIECES) - 2)
WIDTH = len(PIECES) + 6  # padded logits rows
CHOICES = ["positive", "negative", "neutral", "ab", "abc", "", "café", "a", "cab"]


class Model:
    """The rules, spelled out: a state is the bytes generated so far."""

    def __init__(self, strings, prefix=b"", stops=(EOS,)):
        self.full = {prefix + (s.encode() if isinstance(s, str) else s) for s in strings}
        self.stops = sorted(set(stops))

    def terminal(self, w):
        return w in self.full

    def allowed(self, w):
        out = []
        for t in range(WIDTH):
            if t in self.stops:
                if self.terminal(w):
                    out.append(t)
            elif t < len(PIECES) and not SPECIAL[t] and PIECES[t] and \
                    any(f.startswith(w + PIECES[t]) for f in self.full):
                out.append(t)
        return out


@pytest.fixture(scope="module")
def vocab():
    return treemask.Vocab.from_token_bytes(PIECES, WIDTH, SPECIAL)


@pytest.fixture(scope="module")
def trie(vocab):
    return treemask.Trie.from_strings(CHOICES, vocab, EOS)


def walk(model, rng, steps=12):
    """Random tokens the model allows, with the byte states before each."""
    w, out = b"", []
    for _ in range(steps):
        allowed = model.allowed(w)
        if not allowed:
            break
        t = rng.choice(allowed)
        out.append((w, t))
        if t in model.stops:
            break
        w += PIECES[t]
    return out


def test_vocab_from_token_bytes(vocab):
    assert vocab.vocab_size == WIDTH and vocab.n_tokens == len(PIECES)
    assert vocab.token_bytes(16) == b"pos" and vocab.token_bytes(len(PIECES) + 1) == b""
    same = treemask.Vocab.from_token_bytes(PIECES, WIDTH, SPECIAL)
    assert same.fingerprint == vocab.fingerprint and same == vocab
    other = treemask.Vocab.from_token_bytes(PIECES, WIDTH + 1, SPECIAL)
    assert other.fingerprint != vocab.fingerprint
    with pytest.raises(treemask.InvalidArgumentError, match="vocab_size"):
        treemask.Vocab.from_token_bytes(PIECES, 3, SPECIAL)
    with pytest.raises(treemask.InvalidArgumentError, match="not bytes"):
        treemask.Vocab.from_token_bytes(["a"], 1)
    with pytest.raises(TypeError):
        treemask.Vocab()


def test_matcher_allows_any_tokenization(trie):
    model = Model(CHOICES)
    rng = random.Random(7)
    for _ in range(scaled(60)):
        m = treemask.Matcher(trie)
        for w, t in walk(model, rng):
            assert m.next_tokens() == model.allowed(w), w
            row = np.zeros(trie.bitmask_words, np.int32)
            m.fill_next_token_bitmask(row)
            bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:WIDTH]
            assert np.flatnonzero(bits).tolist() == model.allowed(w)
            assert m.can_terminate() == model.terminal(w)
            assert m.accept_token(t)
        if m.is_terminated():
            assert trie.label(m.label_ids()[0]) in CHOICES
    # "pos" + "itive", "p" "o" "s" "itive", "positive": one label, three paths.
    for seq in ([16, 17], [10, 9, 11, 17], [18]):
        m = treemask.Matcher(trie)
        assert m.accept_tokens(seq + [EOS]) == len(seq) + 1 and m.is_terminated()
        assert [trie.label(i) for i in m.label_ids()] == ["positive"]


def test_forced_bytes_are_what_every_continuation_shares(trie, vocab):
    """Matcher.forced_bytes along random walks equals the model's: the
    longest common prefix of the strings' rests from the state, empty where
    a string ends; forced_tokens spell a prefix of them, each allowed in
    turn; a token-path trie has none."""
    import os

    model = Model(CHOICES)
    rng = random.Random(11)

    def forced(w):
        rests = [f[len(w):] for f in model.full if f.startswith(w)]
        return b"" if b"" in rests else os.path.commonprefix(rests)

    seen = set()
    for _ in range(scaled(40)):
        m = treemask.Matcher(trie)
        for w, t in walk(model, rng):
            assert m.forced_bytes() == forced(w), w
            seen.add(forced(w))
            tokens = m.forced_tokens()
            assert b"".join(PIECES[k] for k in tokens) == forced(w)[:len(b"".join(PIECES[k] for k in tokens))]
            probe = m.clone()
            assert all(probe.accept_token(k) for k in tokens)
            assert m.accept_token(t)
    assert len(seen) > 2  # the walks met forced bytes of several lengths
    m = treemask.Matcher(treemask.Trie.from_strings(["neutral", "negative"], vocab, EOS))
    assert m.forced_bytes() == b"ne" and m.accept_tokens([8, 6]) == 2 and m.forced_bytes() == b""
    assert m.accept_token(14) and m.forced_bytes() == b"ative"  # "g"
    assert treemask.Matcher(treemask.Trie.from_paths([[3, 4]], 8, [0])).forced_bytes() == b""


def test_repr_labels_prefix_and_duplicates(vocab):
    t = treemask.Trie.from_strings(["pos", b"neg", "pos"], vocab, [EOS, PAD_ID], prefix=" ", labels=[5, 6, 7])
    assert t.is_string_set and "string set" in repr(t)
    assert t.vocab == vocab
    m = treemask.Matcher(t)
    assert m.next_tokens() == Model(["pos", "neg"], b" ", (EOS, PAD_ID)).allowed(b"")
    assert m.accept_token(24) and m.can_terminate()  # " pos"
    assert m.label_ids() == [5, 7]  # the repeated string keeps both labels
    assert t.labels is None  # explicit labels: no names
    # The prefix may be bytes; strings may be bytes.
    t2 = treemask.Trie.from_strings([b"pos"], vocab, EOS, prefix=b" ")
    assert treemask.Matcher(t2).next_tokens() == Model([b"pos"], b" ").allowed(b"")
    assert treemask.Matcher(t2).accept_tokens([24, EOS]) == 2


def test_from_strings_errors(vocab):
    with pytest.raises(treemask.InvalidArgumentError, match="no strings"):
        treemask.Trie.from_strings([], vocab, EOS)
    with pytest.raises(treemask.InvalidArgumentError, match="treemask.Vocab"):
        treemask.Trie.from_strings(["a"], object(), EOS)
    with pytest.raises(treemask.InvalidArgumentError, match="one str"):
        treemask.Trie.from_strings("abc", vocab, EOS)
    with pytest.raises(treemask.InvalidArgumentError, match=r"strings\[1\]"):
        treemask.Trie.from_strings(["a", 3], vocab, EOS)
    with pytest.raises(treemask.InvalidArgumentError, match="labels has 1"):
        treemask.Trie.from_strings(["a", "b"], vocab, EOS, labels=[1])
    with pytest.raises(treemask.OutOfRangeError, match="stop token"):
        treemask.Trie.from_strings(["a"], vocab, WIDTH)


def test_modes_exclusions_and_devices_refuse_a_string_set(trie):
    with pytest.raises(treemask.UnsupportedError, match="string-set trie"):
        treemask.Matcher(trie, max_new_tokens=4)
    with pytest.raises(treemask.UnsupportedError, match="string-set trie"):
        treemask.Matcher(trie, label_separator=[15])
    with pytest.raises(treemask.UnsupportedError, match="string-set trie"):
        treemask.ExclusionSet(trie, [0])
    m = treemask.Matcher(trie)
    with pytest.raises(treemask.UnsupportedError, match="length budget"):
        m.fill_next_token_bitmask(np.zeros(trie.bitmask_words, np.int32), remaining_tokens=3)
    # override_stop_tokens is the one mode a string set takes.
    m = treemask.Matcher(trie, override_stop_tokens=[PAD_ID])
    assert m.accept_token(3) and PAD_ID in m.next_tokens() and EOS not in m.next_tokens()
    torch = pytest.importorskip("torch")
    import treemask.torch as tt

    with pytest.raises(treemask.UnsupportedError, match="string-set trie"):
        tt.DeviceTrie(trie)
    del torch


def test_state_arrays_topk_and_beam_step(trie):
    model = Model(CHOICES)
    rng = random.Random(3)
    for _ in range(scaled(30)):
        states = np.zeros(1, np.uint32)
        for w, t in walk(model, rng):
            rows = np.zeros((1, trie.bitmask_words), np.int32)
            trie.fill_states(states, rows)
            bits = np.unpackbits(rows.view(np.uint8), bitorder="little")[:WIDTH]
            assert np.flatnonzero(bits).tolist() == model.allowed(w)
            top = treemask.topk_states(trie, states, np.zeros((1, WIDTH), np.float32), WIDTH)
            assert sorted(top.tokens[0, :top.counts[0]].tolist()) == model.allowed(w)
            assert trie.advance_states(states, [t]).all()
    # A beam step over random logits: each winner is allowed at its parent
    # (test_strings_beam.py checks the whole step against a brute force).
    beam = treemask.Beam(4)
    states = np.zeros(4, np.uint32)
    ends = treemask.initial_ends(1, 4)
    texts = [b""] * 4
    scores = treemask.initial_scores(1, 4)
    for _ in range(5):
        logits = np.random.default_rng(len(texts[0])).standard_normal((4, WIDTH)).astype(np.float32)
        before, old_texts = states.copy(), list(texts)
        parents, tokens = beam.step_states(trie, states, logits, scores, ends=ends)
        for i, (p, t) in enumerate(zip(parents.tolist(), tokens.tolist())):
            if p < 0:
                continue
            if before[p] != treemask.STATE_TERMINATED:
                assert t in model.allowed(old_texts[p])
                texts[i] = old_texts[p] + (b"" if t == EOS else PIECES[t])
            one = before[p:p + 1].copy()
            trie.advance_states(one, [t])
            assert one[0] == states[i]


def test_batch_full_and_incremental_and_its_beam_step(trie):
    model = Model(CHOICES)
    rng = random.Random(11)
    batch = treemask.BatchMatcher(3)
    bound = treemask.allocate_token_bitmask(3, WIDTH)
    batch.bind_bitmask(bound)
    walks = [walk(model, rng) for _ in range(3)]
    for slot in range(3):
        batch.set_matcher(slot, treemask.Matcher(trie))
    for step in range(max(len(w) for w in walks)):
        full = treemask.allocate_token_bitmask(3, WIDTH)
        batch.fill_next_token_bitmask(full)
        batch.fill_bound(incremental=True)
        tokens = []
        for slot, w in enumerate(walks):
            if step < len(w):
                bits = np.unpackbits(np.asarray(full[slot]).view(np.uint8), bitorder="little")[:WIDTH]
                assert np.flatnonzero(bits).tolist() == model.allowed(w[step][0])
                assert np.array_equal(np.asarray(bound[slot]), np.asarray(full[slot]))
            tokens.append(w[step][1] if step < len(w) else -1)
        batch.accept_tokens(tokens)
    # The batch's beam step: candidates are each matcher's allowed set.
    batch = treemask.BatchMatcher(2)
    for slot in range(2):
        batch.set_matcher(slot, treemask.Matcher(trie))
    logits = np.random.default_rng(0).standard_normal((2, WIDTH)).astype(np.float32)
    step = batch.beam_step(logits, treemask.initial_scores(1, 2), 2)
    for t in step.tokens.tolist():
        assert t in model.allowed(b"")


def test_save_load_and_share_the_vocabulary(trie, vocab, tmp_path):
    path = tmp_path / "choices.tmtrie"
    trie.save(path)
    loaded = treemask.Trie.load(path)
    assert loaded.is_string_set and loaded.labels == trie.labels
    assert loaded.vocab == vocab
    shared = treemask.Trie.load(path, vocab=vocab, trusted=True)
    for t in (loaded, shared):
        assert treemask.Matcher(t).next_tokens() == treemask.Matcher(trie).next_tokens()
    # Another vocabulary whose last token ("ba", never spelled by the set)
    # is "ab" (spelled by "ab", "abc", "cab"): the masks differ, refused.
    other = treemask.Vocab.from_token_bytes(PIECES[:-1] + [b"ab"], WIDTH, SPECIAL)
    with pytest.raises(treemask.InvalidArgumentError, match="fingerprint"):
        treemask.Trie.load(path, vocab=other)
    with pytest.raises(treemask.InvalidArgumentError, match="treemask.Vocab"):
        treemask.Trie.load(path, vocab="qwen")


def test_llama_cpp_processor_takes_a_string_set(trie, vocab):
    from treemask.llama_cpp import TrieLogitsProcessor

    model = Model(CHOICES)
    # The model's vocabulary is required for a string set, and checked.
    with pytest.raises(treemask.InvalidArgumentError, match="vocab=llm"):
        TrieLogitsProcessor(trie)
    # Another vocabulary whose last token ("ba", never spelled by the set)
    # is "ab" (spelled by "ab", "abc", "cab"): the masks differ, refused.
    other = treemask.Vocab.from_token_bytes(PIECES[:-1] + [b"ab"], WIDTH, SPECIAL)
    with pytest.raises(treemask.InvalidArgumentError, match="0x%x" % other.fingerprint):
        TrieLogitsProcessor(trie, vocab=other)
    proc = TrieLogitsProcessor(trie, vocab=vocab)
    rng = random.Random(5)
    prompt = [3, 4]
    ids = list(prompt)
    for w, t in walk(model, rng):
        scores = np.random.default_rng(len(ids)).standard_normal(WIDTH).astype(np.float32)
        proc(np.array(ids, dtype=np.intc), scores)
        assert np.flatnonzero(np.isfinite(scores)).tolist() == model.allowed(w)
        ids.append(t)


torch_needed = pytest.mark.skipif(not __import__("importlib").util.find_spec("torch") or
                                  not __import__("importlib").util.find_spec("transformers"),
                                  reason="torch and transformers are not installed (./dev installs them)")


@torch_needed
def test_hf_processor_host_path_and_no_device_walk(trie):
    import torch

    from treemask.hf import TrieLogitsProcessor

    model = Model(CHOICES)
    proc = TrieLogitsProcessor(trie, prompt_length=2)
    rng = random.Random(9)
    rows = [walk(model, rng) for _ in range(3)]
    for step in range(min(len(r) for r in rows)):
        ids = torch.tensor([[3, 4] + [t for _, t in r[:step]] for r in rows])
        out = proc(ids, torch.zeros((3, WIDTH)))
        for r, row in zip(rows, out):
            assert torch.nonzero(torch.isfinite(row)).flatten().tolist() == model.allowed(r[step][0])

    class FakeCuda:
        class device:
            type = "cuda"
    proc._cuda_usable = True
    assert proc._device_path(FakeCuda()) is False  # the host walk, whatever the scores' device


@torch_needed
def test_hf_beam_search_over_a_string_set(vocab):
    import torch
    import transformers

    from treemask.hf import beam_search

    config = transformers.Qwen2Config(
        vocab_size=WIDTH, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=64, tie_word_embeddings=True, eos_token_id=EOS,
        pad_token_id=PAD_ID, bos_token_id=None)
    torch.manual_seed(0)
    lm = transformers.Qwen2ForCausalLM(config).eval()
    trie = treemask.Trie.from_strings(CHOICES[:3], vocab, EOS)
    out = beam_search(lm, torch.tensor([[3, 4, 5]]), trie, 4)
    for row in out.sequences[:, 3:].tolist():
        m = treemask.Matcher(trie)
        text = b""
        for t in row:
            if m.is_terminated():
                break
            assert m.accept_token(t)
            text += b"" if t == EOS else PIECES[t]
        assert m.is_terminated() and text.decode() in CHOICES[:3]


@pytest.mark.skipif(not (SHARED_DATA / "tokenizers" / "qwen2.5-instruct").is_dir(),
                    reason="../shared/data/tokenizers is absent (a clone without ../shared)")
def test_vocab_from_a_real_tokenizer():
    transformers = pytest.importorskip("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(SHARED_DATA / "tokenizers" / "qwen2.5-instruct"))
    vocab = treemask.Vocab.from_tokenizer(tok, 151936)
    assert vocab.encoding == "byte_level" and vocab.n_tokens == len(tok)
    trie = treemask.Trie.from_strings(["Zürich", "東京"], vocab, [151645], prefix=" ")
    m = treemask.Matcher(trie)
    # The canonical tokenization is one of the allowed paths, and so is any other.
    canonical = tok.encode(" Zürich", add_special_tokens=False)
    assert m.accept_tokens(canonical + [151645]) == len(canonical) + 1
    m.reset()
    spelled = [tok.convert_tokens_to_ids(p) for p in tok.tokenize(" Z")] + \
        tok.encode("ürich", add_special_tokens=False)
    assert m.accept_tokens(spelled) == len(spelled) and m.can_terminate()
    # Added tokens are never text; the stop token only where a string ends.
    assert 151645 in m.next_tokens() and 151643 not in m.next_tokens()  # <|endoftext|>
    assert 151645 not in treemask.Matcher(trie).next_tokens()


# ---- python -m treemask compile-strings ------------------------------------------


def _tokenizer_json(tmp_path):
    pytest.importorskip("tokenizers", reason="compile-strings reads tokenizer.json with tokenizers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE({"<eos>": 0, "c": 1, "a": 2, "t": 3, "ca": 4, "cat": 5, "d": 6, "o": 7, "g": 8},
                               [("c", "a"), ("ca", "t")]))
    tok.add_special_tokens(["<eos>"])
    # Byte-level BPE: ASCII letters are their own bytes in GPT-2's alphabet.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


def compile_strings(*args):
    return subprocess.run([sys.executable, "-m", "treemask", "compile-strings", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))


def test_compile_strings(tmp_path):
    tok = _tokenizer_json(tmp_path)
    strings = tmp_path / "strings.txt"
    strings.write_bytes(b"\xef\xbb\xbfcat\r\ndog\r\n\r\n")  # BOM, CRLF, a blank line
    out = tmp_path / "out.tmtrie"
    p = compile_strings(strings, "--tokenizer", tok, "--vocab-size", 12, "--stop-tokens", 0, "-o", out)
    assert p.returncode == 0, p.stderr
    assert "compiled 2 strings" in p.stdout
    trie = treemask.Trie.load(out)
    assert trie.is_string_set and trie.labels == ("cat", "dog")
    m = treemask.Matcher(trie)
    assert m.next_tokens() == [1, 4, 5, 6]  # c, ca, cat, d
    assert m.accept_tokens([4, 3, 0]) == 3 and m.label_ids() == [0]  # "ca" + "t"


def test_compile_strings_refuses_bad_input(tmp_path):
    tok = _tokenizer_json(tmp_path)
    strings = tmp_path / "strings.txt"
    strings.write_text("cat\n")
    before = tok.read_bytes()
    p = compile_strings(strings, "--tokenizer", tok, "--vocab-size", 12, "--stop-tokens", 0, "-o", tok)
    assert p.returncode == 2 and "is the --tokenizer file" in p.stderr, p.stderr
    assert tok.read_bytes() == before
    p = compile_strings(strings, "--tokenizer", tok, "--vocab-size", 12, "--stop-tokens", 0, "-o", strings)
    assert p.returncode == 2 and "is the strings file" in p.stderr, p.stderr
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"\xef\xbb\xbf\n \n")
    p = compile_strings(empty, "--tokenizer", tok, "--vocab-size", 12, "--stop-tokens", 0, "-o", tmp_path / "o")
    assert p.returncode == 1 and "no strings" in p.stderr
    p = compile_strings(strings, "--tokenizer", tok, "--vocab-size", 5, "--stop-tokens", 0, "-o", tmp_path / "o")
    assert p.returncode == 1 and "vocab_size" in p.stderr, p.stderr
    p = compile_strings(strings, "--tokenizer", tok, "--vocab-size", 12, "--stop-tokens", "x", "-o", tmp_path / "o")
    assert p.returncode == 2 and "comma-separated integers" in p.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(not (SHARED_DATA / "tokenizers" / "qwen2.5-instruct").is_dir(),
                    reason="../shared/data/tokenizers is absent (a clone without ../shared)")
def test_readme_strings_example_runs(tmp_path, monkeypatch):
    """The first Python block of the README's "Strings: any tokenization or
    canonical" section, with the Qwen2.5 tokenizer from ../shared (no
    download) and the .tmtrie written to a temporary directory."""
    pytest.importorskip("transformers")
    from conftest import SOURCE_ROOT

    readme = (SOURCE_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Strings: any tokenization or canonical\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    local = str(SHARED_DATA / "tokenizers" / "qwen2.5-instruct")
    assert '"Qwen/Qwen2.5-0.5B-Instruct"' in code
    code = code.replace('"Qwen/Qwen2.5-0.5B-Instruct"', repr(local))
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, "README.md (strings example)", "exec"), namespace)
    assert namespace["trie"].label(namespace["m"].label_ids()[0]) == "positive"
    assert treemask.Trie.load(tmp_path / "sentiment.tmtrie").is_string_set
