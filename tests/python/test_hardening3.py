"""Issue 29 (hardening, third round), the library's part: a string set
compiled over another vocabulary is refused where the model's vocabulary is
given (Trie.check_vocab, treemask.hf, treemask.llama_cpp); the Python
loader raises treemask errors for bad metadata (a seeded fuzz of the
reserved entries) and save() refuses the reserved keys; UB-free empty
strings; a huge BatchMatcher refused at once; clear errors for
compile-strings --prefix $'\\xff', Vocab.token_bytes(2**40) and pickling
(Trie and Vocab by value, Matcher and BatchMatcher refused saying what to
do); the core BatchMatcher imports no adapter.

Suite `python`.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os
import pickle
import random
import subprocess
import sys
import time

import numpy as np
import pytest

import treemask
from conftest import SOURCE_ROOT, scaled
from treemask._ffi import ffi, lib

PIECES = [b"<eos>", b"c", b"a", b"t", b"ca", b"at", b"cat", b"d", b"o", b"g", b"dog", b" ", b" c", b" d"]
SPECIAL = [True] + [False] * (len(PIECES) - 1)
WIDTH = len(PIECES) + 2


@pytest.fixture(scope="module")
def vocab():
    return treemask.Vocab.from_token_bytes(PIECES, WIDTH, SPECIAL)


@pytest.fixture(scope="module")
def strings(vocab):
    return treemask.Trie.from_strings(["cat", "dog"], vocab, [0], prefix=" ")


# ---- item 2: the model's vocabulary -------------------------------------------------


def test_check_vocab_takes_equal_masks_and_refuses_other_bytes_or_a_smaller_vocabulary(vocab, strings):
    strings.check_vocab(vocab)
    # Other special-token names and more padding: the same masks, taken.
    renamed = treemask.Vocab.from_token_bytes([b"</s>", *PIECES[1:]], WIDTH + 30, SPECIAL)
    assert renamed.fingerprint != vocab.fingerprint
    strings.check_vocab(renamed)
    # The same width, other bytes ("c" and "d" swapped): refused, both
    # fingerprints and the token named.
    swapped = list(PIECES)
    swapped[1], swapped[7] = swapped[7], swapped[1]
    other = treemask.Vocab.from_token_bytes(swapped, WIDTH, SPECIAL)
    with pytest.raises(treemask.InvalidArgumentError) as e:
        strings.check_vocab(other)
    message = str(e.value)
    assert "0x%x" % vocab.fingerprint in message and "0x%x" % other.fingerprint in message
    assert "token 1 " in message and "another vocabulary" in message
    # A set compiled over a smaller vocabulary than the model's: the model's
    # tokens past it would never be allowed (and are text): refused.
    small = treemask.Vocab.from_token_bytes(PIECES[:11], 11, SPECIAL[:11])
    small_set = treemask.Trie.from_strings(["cat", "dog"], small, [0], prefix=" ")
    with pytest.raises(treemask.InvalidArgumentError, match="token 11 "):
        small_set.check_vocab(vocab)
    # A trie wider than the model: refused, for both kinds.
    with pytest.raises(treemask.InvalidArgumentError, match="wider than the model"):
        strings.check_vocab(small)
    paths = treemask.Trie.from_paths([[1, 2]], WIDTH, [0])
    paths.check_vocab(vocab)
    with pytest.raises(treemask.InvalidArgumentError, match="wider than the model"):
        paths.check_vocab(small)
    with pytest.raises(treemask.InvalidArgumentError, match=r"treemask\.Vocab"):
        strings.check_vocab("qwen")


def test_check_vocab_takes_a_token_text_in_one_vocabulary_only_when_no_string_spells_it():
    # llama.cpp makes "</s>" a control token where the Hugging Face tokenizer
    # keeps it as text: the masks are equal unless a string spells it.
    tag = len(PIECES)
    text = treemask.Vocab.from_token_bytes(PIECES + [b"</s>"], WIDTH, SPECIAL + [False])
    control = treemask.Vocab.from_token_bytes(PIECES + [b"</s>"], WIDTH, SPECIAL + [True])
    assert text.fingerprint != control.fingerprint
    plain = treemask.Trie.from_strings(["cat", "dog"], text, [0], prefix=" ")
    plain.check_vocab(control)
    treemask.Trie.from_strings(["cat", "dog"], control, [0], prefix=" ").check_vocab(text)
    tagged = treemask.Trie.from_strings(["cat</s>", "dog"], text, [0], prefix=" ")
    with pytest.raises(treemask.InvalidArgumentError, match="token %d is text" % tag):
        tagged.check_vocab(control)
    # A part of its text in a string is enough: the token may be allowed there.
    partly = treemask.Trie.from_strings(["cat</s"], text, [0], prefix=" ")
    partly.check_vocab(control)  # "</s>" is not inside " cat</s"
    inside = treemask.Trie.from_strings(["a</s>b"], text, [0])
    with pytest.raises(treemask.InvalidArgumentError, match="token %d is text" % tag):
        inside.check_vocab(control)


def test_load_with_vocab_refuses_a_token_path_file_wider_than_the_model(tmp_path, vocab):
    path = str(tmp_path / "paths.tmtrie")
    treemask.Trie.from_paths([[1, 2]], WIDTH + 5, [0]).save(path)
    with pytest.raises(treemask.InvalidArgumentError, match=r"vocab_size %d, wider" % (WIDTH + 5)):
        treemask.Trie.load(path, vocab=vocab)
    treemask.Trie.from_paths([[1, 2]], WIDTH, [0]).save(path)
    assert treemask.Trie.load(path, vocab=vocab).vocab_size == WIDTH


def test_hf_adapters_check_a_string_set_against_the_model_vocabulary(vocab, strings):
    from treemask.hf import TrieLogitsProcessor

    swapped = list(PIECES)
    swapped[1], swapped[7] = swapped[7], swapped[1]
    other = treemask.Vocab.from_token_bytes(swapped, WIDTH, SPECIAL)
    with pytest.raises(treemask.InvalidArgumentError, match="0x%x" % other.fingerprint):
        TrieLogitsProcessor(strings, vocab=other)
    TrieLogitsProcessor(strings, vocab=vocab)
    TrieLogitsProcessor(strings)  # no vocabulary given: nothing to check


def test_hf_takes_the_models_tokenizer_as_its_vocabulary(qwen_tokenizer):
    from treemask.hf import TrieLogitsProcessor

    tok = qwen_tokenizer
    model = treemask.Vocab.from_tokenizer(tok, 151936)
    ours = treemask.Trie.from_strings(["red", "blue"], model, [151645], prefix=" ")
    TrieLogitsProcessor(ours, vocab=tok)  # the tokenizer read at the trie's width
    # The review's case: the same strings over a vocabulary of the same width
    # whose bytes differ (here every token's bytes moved one id up).
    pieces = [model.token_bytes(t) for t in range(151936)]
    other = treemask.Vocab.from_token_bytes(pieces[-1:] + pieces[:-1], 151936)
    theirs = treemask.Trie.from_strings(["red", "blue"], other, [151645], prefix=" ")
    with pytest.raises(treemask.InvalidArgumentError, match="0x%x" % other.fingerprint):
        TrieLogitsProcessor(theirs, vocab=tok)


# ---- item 6: metadata of a .tmtrie ------------------------------------------------


def test_save_refuses_the_reserved_keys(tmp_path):
    t = treemask.Trie.from_paths([[1]], 8, [0])
    for key in ("treemask.python.labels", "treemask.python.skipped_labels", "treemask.python.anything"):
        with pytest.raises(treemask.InvalidArgumentError, match="reserved"):
            t.save(str(tmp_path / "t.tmtrie"), metadata={key: "x"})
    assert not (tmp_path / "t.tmtrie").exists()
    with pytest.raises(treemask.InvalidArgumentError, match="lone surrogate"):
        t.save(str(tmp_path / "t.tmtrie"), metadata={"k": "\udcff"})
    with pytest.raises(treemask.InvalidArgumentError, match="mapping"):
        t.save(str(tmp_path / "t.tmtrie"), metadata=[("k", "v")])
    # Label names holding a lone surrogate (JSON escapes in a file another
    # writer made) still round-trip through save and load.
    _save_raw(t, str(tmp_path / "s.tmtrie"), [(b"treemask.python.labels", b'["a", "b\\udcff"]')])
    loaded = treemask.Trie.load(str(tmp_path / "s.tmtrie"))
    assert loaded.labels == ("a", "b\udcff")
    loaded.save(str(tmp_path / "l.tmtrie"), metadata={"source": "test"})
    back = treemask.Trie.load(str(tmp_path / "l.tmtrie"))
    assert back.labels == ("a", "b\udcff") and back.metadata["source"] == "test"


def _save_raw(trie, path, entries):
    """Saves through the C API with metadata of any bytes (what another
    writer could put in a file): entries is a list of (key, value) bytes."""
    keep = []
    keys = ffi.new("const char *[]", len(entries))
    values = ffi.new("const char *[]", len(entries))
    for i, (k, v) in enumerate(entries):
        kc, vc = ffi.new("char[]", k), ffi.new("char[]", v)
        keep += (kc, vc)
        keys[i], values[i] = kc, vc
    opts = ffi.new("treemask_save_options *")
    lib.treemask_save_options_init(opts)
    opts.metadata_keys, opts.metadata_values, opts.n_metadata = keys, values, len(entries)
    assert lib.treemask_trie_save(trie._ptr, os.fsencode(path), opts) == 0, ffi.string(lib.treemask_last_error())


def _mutants(rng, good_labels, good_skipped):
    """Values for the reserved entries: broken JSON, other types, invalid
    UTF-8, deep nesting, huge numbers, truncations and byte flips of the
    valid ones."""
    fixed = [b"", b"x", b"[", b"{}", b"null", b"1e999999", b"[1, 2]", b"[[1, 2]]", b'["a", 1]', b"[null]",
             b'[["a"]]', b'[["a", "b", "c"]]', b'[["a", 2]]', b"\xff\xfe", b'["\xc3"]', b"[" * 100000,
             b'"text"', b"123456789012345678901234567890", b"[true]", b'[{"a": 1}]', b"NaN", b"[NaN]",
             b"\x00", b"[1]" * 3]
    out = list(fixed)
    for base in (good_labels, good_skipped):
        for _ in range(40):
            b = bytearray(base)
            for _ in range(rng.randint(1, 4)):
                kind = rng.randrange(3)
                if kind == 0 and b:
                    b[rng.randrange(len(b))] = rng.randrange(1, 256)
                elif kind == 1 and b:
                    del b[rng.randrange(len(b)):]
                else:
                    b.insert(rng.randrange(len(b) + 1), rng.randrange(1, 256))
            out.append(bytes(b).replace(b"\x00", b"0"))
    return out


def test_fuzz_the_loaders_metadata(tmp_path):
    """Seeded mutants of the reserved entries (and a non-UTF-8 entry beside
    them): Trie.load gives a trie with well-typed labels or a treemask
    error naming the key, never a raw Python exception."""
    rng = random.Random(29)
    base = treemask.Trie.from_labels(["alpha", "beta"], lambda s: [1] if "alpha" in s else [2], 8, [0])
    good_labels = json.dumps(["alpha", "beta"]).encode()
    good_skipped = json.dumps([["gamma", "no tokens"], "delta"]).encode()
    path = str(tmp_path / "m.tmtrie")
    loaded = refused = 0
    mutants = _mutants(rng, good_labels, good_skipped)
    for i in range(scaled(600)):
        value = mutants[i % len(mutants)] if i < len(mutants) else rng.choice(mutants)
        entries = [(b"treemask.python.labels", value if i % 2 else good_labels),
                   (b"treemask.python.skipped_labels", good_skipped if i % 2 else value)]
        if i % 5 == 0:
            entries.append((b"other \xff key", b"\xfe value"))
        _save_raw(base, path, entries)
        try:
            t = treemask.Trie.load(path)
        except treemask.Error as e:
            assert isinstance(e, treemask.CorruptFileError) and "treemask.python." in str(e), repr(e)
            refused += 1
            continue
        loaded += 1
        assert t.labels is None or all(isinstance(x, str) for x in t.labels)
        assert all(isinstance(x, str) for x in t.skipped_labels)
        if i % 5 == 0:
            with pytest.raises(treemask.CorruptFileError, match="not UTF-8"):
                _ = t.metadata
    assert loaded > 10 and refused > 100, (loaded, refused)


def test_the_reviewed_case_raises_a_corrupt_file_error(tmp_path):
    t = treemask.Trie.from_paths([[1]], 8, [0])
    path = str(tmp_path / "x.tmtrie")
    _save_raw(t, path, [(b"treemask.python.labels", b"x")])
    with pytest.raises(treemask.CorruptFileError, match=r"treemask\.python\.labels.*not JSON"):
        treemask.Trie.load(path)


# ---- item 7: only empty strings -----------------------------------------------------


def test_only_empty_strings(vocab):
    t = treemask.Trie.from_strings(["", ""], vocab, [1])
    m = treemask.Matcher(t)
    assert m.next_tokens() == [1] and m.accept_token(1) and m.is_terminated()


# ---- item 8: a huge BatchMatcher ----------------------------------------------------


def test_a_batch_larger_than_the_machine_is_refused_at_once():
    have = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    n = max(10**9, have // 48 + 1)
    if n > 2**31 - 1:
        pytest.skip("this machine has %d GiB: every n_slots up to 2^31 - 1 fits" % (have >> 30))
    start = time.monotonic()
    with pytest.raises(treemask.OutOfMemoryError, match=r"n_slots %d needs" % n):
        treemask.BatchMatcher(n)
    assert time.monotonic() - start < 1.0
    assert len(treemask.BatchMatcher(1 << 16)) == 1 << 16


# ---- item 9: clear errors -------------------------------------------------------------


def test_compile_strings_prefix_that_is_not_utf8(tmp_path):
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed (./dev installs it)")
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "<eos>": 2}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok_path = str(tmp_path / "tokenizer.json")
    tok.save(tok_path)
    del tokenizers
    strings = tmp_path / "s.txt"
    strings.write_text("a\nb\n")
    for command in ("compile-strings", "compile-labels"):
        argv = [sys.executable, "-m", "treemask", command, str(strings), "--tokenizer", tok_path,
                "--vocab-size", "3", "--stop-tokens", "2", "-o", str(tmp_path / "o.tmtrie"),
                b"--prefix", b"\xff"]
        out = subprocess.run(argv, capture_output=True, timeout=120)
        err = out.stderr.decode("utf-8", "replace")
        assert out.returncode == 2, err
        assert "--prefix b'\\xff' is not UTF-8 text (byte 0xff at offset 0)" in err, err
        assert "Traceback" not in err and "UnicodeEncodeError" not in err
    # The library refuses such a prefix too, clearly.
    vocab = treemask.Vocab.from_token_bytes([b"a", b"b", b"<eos>"], 3, [False, False, True])
    with pytest.raises(treemask.InvalidArgumentError, match="lone surrogate"):
        treemask.Trie.from_strings(["a"], vocab, [2], prefix="\udcff")
    assert treemask.Trie.from_strings(["a"], vocab, [2], prefix=b"\xff").is_string_set  # bytes: any


def test_token_bytes_out_of_range(vocab):
    assert vocab.token_bytes(6) == b"cat" and vocab.token_bytes(WIDTH - 1) == b""  # padding
    for bad in (2**40, -1, WIDTH):
        with pytest.raises(treemask.OutOfRangeError, match=r"outside \[0, vocab_size=%d\)" % WIDTH):
            vocab.token_bytes(bad)
    with pytest.raises(treemask.InvalidArgumentError, match="int"):
        vocab.token_bytes("6")


def _same_trie(a, b):
    def own(meta):  # save writes the label names under treemask.python.*
        return {k: v for k, v in meta.items() if not k.startswith("treemask.python.")}

    assert a.stats() == b.stats() and a.labels == b.labels and a.stop_tokens == b.stop_tokens
    assert a.is_string_set == b.is_string_set and own(a.metadata) == own(b.metadata)
    states = np.arange(a.stats().n_nodes, dtype=np.uint32)
    rows_a = np.zeros((states.size, a.bitmask_words), np.int32)
    rows_b = np.zeros_like(rows_a)
    a.fill_states(states, rows_a)
    b.fill_states(states, rows_b)
    assert np.array_equal(rows_a, rows_b)


def test_trie_and_vocab_pickle_by_value(tmp_path, vocab, strings):
    assert pickle.loads(pickle.dumps(vocab)) == vocab
    back = pickle.loads(pickle.dumps(vocab))
    assert [back.token_bytes(t) for t in range(WIDTH)] == [vocab.token_bytes(t) for t in range(WIDTH)]
    _same_trie(pickle.loads(pickle.dumps(strings)), strings)
    assert pickle.loads(pickle.dumps(strings)).vocab == vocab
    labelled = treemask.Trie.from_labels(["x", "y", "zz"], lambda s: [len(s), 1], 8, [0])
    _same_trie(pickle.loads(pickle.dumps(labelled)), labelled)
    assert pickle.loads(pickle.dumps(labelled)).skipped_labels == labelled.skipped_labels
    path = str(tmp_path / "p.tmtrie")
    labelled.save(path, metadata={"provenance": "test"})
    loaded = treemask.Trie.load(path)
    _same_trie(pickle.loads(pickle.dumps(loaded)), loaded)
    beam = pickle.loads(pickle.dumps(treemask.Beam(4, n_threads=2)))
    assert (beam.beam_width, beam.n_threads) == (4, 2)


def test_a_large_string_set_pickles_in_reasonable_time():
    rng = random.Random(3)
    pieces = [bytes([c]) for c in range(97, 123)] + [bytes([rng.randrange(97, 123) for _ in range(3)])
                                                     for _ in range(2000)] + [b"<eos>"]
    vocab = treemask.Vocab.from_token_bytes(pieces, len(pieces), [False] * (len(pieces) - 1) + [True])
    names = sorted({"".join(chr(rng.randrange(97, 123)) for _ in range(rng.randint(5, 20)))
                    for _ in range(150_000)})
    trie = treemask.Trie.from_strings(names, vocab, [len(pieces) - 1])
    start = time.monotonic()
    data = pickle.dumps(trie)
    back = pickle.loads(data)
    elapsed = time.monotonic() - start
    print("a %d-name string set: %.1f MB pickled, round trip %.2f s" % (len(names), len(data) / 1e6, elapsed))
    assert elapsed < 10.0
    assert back.labels == trie.labels and back.stats() == trie.stats()


def test_matchers_and_batches_refuse_pickling_saying_what_to_do(strings):
    for obj in (treemask.Matcher(strings), treemask.BatchMatcher([treemask.Matcher(strings)]),
                treemask.ExclusionSet(treemask.Trie.from_paths([[1]], 8, [0]), [0])):
        with pytest.raises(treemask.UnsupportedError, match=r"cannot be pickled.*(send|Send)"):
            pickle.dumps(obj)
    batch = treemask.BatchMatcher([treemask.Matcher(strings)])
    with pytest.raises(treemask.UnsupportedError, match="accept_tokens"):
        pickle.dumps(batch[0])


def test_multiprocessing_ships_a_trie(strings):
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        got = pool.apply(_walk_in_child, (strings, [12, 4, 5, 0]))  # " c" "ca" "at"? no: " c"+"at"
    assert got == _walk_in_child(strings, [12, 4, 5, 0])


def _walk_in_child(trie, tokens):
    m = treemask.Matcher(trie)
    return [m.accept_token(t) for t in tokens], m.is_terminated(), trie.labels


# ---- issue 31 item 2: the core imports no adapter -------------------------------------


def test_batch_matcher_imports_no_adapter():
    code = ("import sys, treemask, treemask.batch; "
            "bad = [m for m in sys.modules if m.startswith('treemask.') and m.split('.')[1] in "
            "('torch', 'hf', 'vllm', 'llama_cpp')] + [m for m in ('torch', 'transformers', 'vllm') "
            "if m in sys.modules]; "
            "b = treemask.BatchMatcher(2); "
            "print(','.join(bad))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                         cwd=str(SOURCE_ROOT.parent))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", "treemask.batch imported: %s" % out.stdout
