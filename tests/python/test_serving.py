"""Issue 21 (serving safely), the items outside vLLM: objects that own
mutable state refuse concurrent use (item 9), ``compile-labels`` input
handling (item 10), sizes: empty batches, no labels, huge beam widths
(item 11); and the one failure-policy table.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import treemask
from treemask import failure_policy

V = 64
EOS = 63


def small_trie():
    return treemask.Trie.from_paths([[1, 2, 3], [1, 4], [5]], V, [EOS])


# ---- item 9: one thread at a time ----------------------------------------------


def hammer(call, n_threads=4, rounds=300):
    """Runs call() from n_threads threads at once; returns (results, errors)."""
    barrier = threading.Barrier(n_threads)
    results, errors = [], []

    def run():
        barrier.wait()
        for _ in range(rounds):
            try:
                results.append(call())
            except treemask.InvalidStateError as e:
                errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    return results, errors


def test_beam_shared_by_threads_refuses_instead_of_corrupting():
    """The review saw 106 wrong steps and a double free with different step
    sizes: every step that runs is right, the others raise."""
    trie = small_trie()
    beam = treemask.Beam(2)
    rng = np.random.default_rng(0)
    logits_by_size = {n: rng.standard_normal((2 * n, V)).astype(np.float32) for n in (1, 3, 8)}

    def expected(n):
        states = np.zeros(2 * n, dtype=np.uint32)
        scores = treemask.initial_scores(n, 2)
        parents, tokens = treemask.Beam(2).step_states(trie, states, logits_by_size[n], scores)
        return parents.tolist(), tokens.tolist(), scores.tolist()

    want = {n: expected(n) for n in logits_by_size}
    counter = iter(range(10**9))

    def step():
        n = (1, 3, 8)[next(counter) % 3]
        states = np.zeros(2 * n, dtype=np.uint32)
        scores = treemask.initial_scores(n, 2)
        parents, tokens = beam.step_states(trie, states, logits_by_size[n], scores)
        return n, (parents.tolist(), tokens.tolist(), scores.tolist())

    results, errors = hammer(step)
    assert results, "no step ran"
    for n, got in results:
        assert got == want[n]
    assert errors, "4 threads x 300 steps never overlapped: the guard was not exercised"
    assert all("another thread" in str(e) for e in errors)


def test_hf_processor_shared_by_threads_refuses():
    torch = pytest.importorskip("torch")
    from treemask.hf import TrieLogitsProcessor

    proc = TrieLogitsProcessor(small_trie(), prompt_length=0)
    ids = torch.zeros((2, 0), dtype=torch.long)
    scores = torch.zeros((2, V))

    def call():
        out = proc(ids, scores)
        return sorted(torch.nonzero(torch.isfinite(out[0])).flatten().tolist())

    results, errors = hammer(call)
    assert results and all(r == [1, 5] for r in results)
    assert errors and all("another thread" in str(e) for e in errors)


def test_llama_cpp_processor_shared_by_threads_fails_closed():
    """llama-cpp-python swallows a processor's exception and samples
    unconstrained: concurrent use must close both generations instead."""
    from treemask.llama_cpp import TrieLogitsProcessor

    proc = TrieLogitsProcessor(small_trie(), prompt_length=0)
    entered, release = threading.Event(), threading.Event()
    original = proc._catch_up

    def slow_catch_up(ids):
        entered.set()
        release.wait(10)
        original(ids)

    proc._catch_up = slow_catch_up
    first = np.zeros(V, dtype=np.float32)
    t = threading.Thread(target=lambda: proc(np.zeros(0, dtype=np.intc), first))
    t.start()
    assert entered.wait(10)
    second = np.zeros(V, dtype=np.float32)
    proc(np.zeros(0, dtype=np.intc), second)  # never raises
    release.set()
    t.join(10)
    assert np.flatnonzero(np.isfinite(second)).tolist() == [EOS]
    assert proc.error and "two threads" in proc.error
    third = np.zeros(V, dtype=np.float32)
    proc(np.zeros(0, dtype=np.intc), third)
    assert np.flatnonzero(np.isfinite(third)).tolist() == [EOS]


def test_exclusive_leaves_other_packages_classes_alone():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import treemask.hf  # noqa: F401  (wraps its processor)

    assert "_exclusive_wrapped" not in vars(transformers.LogitsProcessor)
    assert torch is not None


# ---- item 10: compile-labels ------------------------------------------------------


def _tokenizer_json(tmp_path):
    pytest.importorskip("tokenizers", reason="compile-labels reads tokenizer.json with tokenizers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"[UNK]": 0, "<eos>": 1, "cat": 2, "dog": 3}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


def compile_labels(*args):
    return subprocess.run([sys.executable, "-m", "treemask", "compile-labels", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))


def test_compile_labels_strips_a_byte_order_mark(tmp_path):
    tok = _tokenizer_json(tmp_path)
    labels = tmp_path / "labels.txt"
    labels.write_bytes(b"\xef\xbb\xbfcat\r\ndog\r\n")  # as Windows Notepad writes it
    out = tmp_path / "out.tmtrie"
    p = compile_labels(labels, "--tokenizer", tok, "--vocab-size", 4, "--stop-tokens", 1, "-o", out,
                       "--prefix", "", "--strict")
    assert p.returncode == 0, p.stderr
    trie = treemask.Trie.load(out)
    assert trie.labels == ("cat", "dog")
    m = treemask.Matcher(trie)
    assert m.accept_token(2) and m.accept_token(1) and m.label_ids() == [0]


def test_compile_labels_refuses_to_overwrite_an_input(tmp_path):
    tok = _tokenizer_json(tmp_path)
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\n")
    before = tok.read_bytes()
    p = compile_labels(labels, "--tokenizer", tok, "--vocab-size", 4, "--stop-tokens", 1, "-o", tok)
    assert p.returncode == 2 and "is the --tokenizer file" in p.stderr, p.stderr
    assert tok.read_bytes() == before
    # the same inode under another name
    alias = tmp_path / "alias.tmtrie"
    os.link(tok, alias)
    p = compile_labels(labels, "--tokenizer", tok, "--vocab-size", 4, "--stop-tokens", 1, "-o", alias)
    assert p.returncode == 2 and "refusing to overwrite an input" in p.stderr, p.stderr
    assert tok.read_bytes() == before
    # a tokenizer directory: none of its files may be the output
    d = tmp_path / "tokdir"
    d.mkdir()
    (d / "tokenizer_config.json").write_text("{}")
    p = compile_labels(labels, "--tokenizer", d, "--vocab-size", 4, "--stop-tokens", 1, "-o",
                       d / "tokenizer_config.json")
    assert p.returncode == 2 and "a file of the --tokenizer directory" in p.stderr, p.stderr
    assert (d / "tokenizer_config.json").read_text() == "{}"


def test_compile_labels_empty_file_says_no_labels(tmp_path):
    tok = _tokenizer_json(tmp_path)
    labels = tmp_path / "labels.txt"
    labels.write_bytes(b"\xef\xbb\xbf\n  \n")
    p = compile_labels(labels, "--tokenizer", tok, "--vocab-size", 4, "--stop-tokens", 1, "-o",
                       tmp_path / "o.tmtrie")
    assert p.returncode == 1 and "no labels" in p.stderr and "round-trips" not in p.stderr, p.stderr
    assert not (tmp_path / "o.tmtrie").exists()


# ---- item 11: sizes -----------------------------------------------------------------


def test_from_labels_without_labels_says_so():
    with pytest.raises(treemask.InvalidArgumentError, match="no labels"):
        treemask.Trie.from_labels([], lambda text: [1], V, [EOS])


@pytest.mark.parametrize("make", [
    lambda: np.zeros((0, V), np.float32),  # numpy's empty strides are (0, 0)
    lambda: np.empty((0, V), np.float16),
])
def test_empty_batches_give_empty_results(make):
    trie = small_trie()
    logits = make()
    bitmask = treemask.allocate_token_bitmask(0, V)
    treemask.apply_token_bitmask_inplace(logits, bitmask)
    assert treemask.apply_token_bitmask(logits, bitmask).shape == (0, V)
    top = treemask.topk_states(trie, np.zeros(0, np.uint32), logits, 2)
    assert top.tokens.shape == (0, 2) and top.counts.shape == (0,)
    parents, tokens = treemask.Beam(2).step_states(trie, np.zeros(0, np.uint32), logits,
                                                   np.zeros(0, np.float32))
    assert parents.shape == tokens.shape == (0,)


def test_empty_torch_batches_give_empty_results():
    torch = pytest.importorskip("torch")
    trie = small_trie()
    logits = torch.zeros((0, V))
    treemask.apply_token_bitmask_inplace(logits, torch.zeros((0, 2), dtype=torch.int32))
    assert treemask.topk_states(trie, np.zeros(0, np.uint32), logits, 3).tokens.shape == (0, 3)


def test_huge_beam_width_costs_nothing_until_used():
    """Beam(10**9) allocated 10^9 heap entries per thread at once (the OOM
    killer ended the process); now a step sizes them. Run under a 3 GiB
    address-space limit, so that a regression fails here as a clean error
    instead of exhausting the machine."""
    code = """if True:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        import numpy as np
        import treemask
        beam = treemask.Beam(10**9, n_threads=2)
        trie = treemask.Trie.from_paths([[1, 2]], 8, [7])
        parents, _ = beam.step_states(trie, np.zeros(0, np.uint32), np.zeros((0, 8), np.float32),
                                      np.zeros(0, np.float32))
        assert parents.size == 0
        try:
            beam.step_states(trie, np.zeros(2, np.uint32), np.zeros((2, 8), np.float32), np.zeros(2, np.float32))
        except treemask.InvalidArgumentError as e:
            assert "not a multiple of beam_width" in str(e)
        print("ok")
    """
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"))
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]


def test_topk_k_past_the_vocabulary_is_refused():
    with pytest.raises(treemask.InvalidArgumentError, match="vocab_size"):
        treemask.topk_states(small_trie(), np.zeros(1, np.uint32), np.zeros((1, V), np.float32), 10**9)


def test_hf_beam_search_refuses_a_width_that_cannot_fit():
    torch = pytest.importorskip("torch")
    from treemask import hf

    class Model(torch.nn.Module):
        config = type("Config", (), {"vocab_size": 151936})()
        dtype = torch.float32

        def forward(self, **kwargs):  # never reached: refused before the prompt runs
            raise AssertionError("the model ran")

    with pytest.raises(treemask.OutOfMemoryError, match="num_beams 10000000 x 1 requests need") as e:
        hf.beam_search(Model(), torch.zeros((1, 3), dtype=torch.long), small_trie(), 10**7)
    assert isinstance(e.value, MemoryError)


# ---- the failure-policy table (issue 25 section 4) -------------------------------------


def test_one_failure_policy_table_and_its_defaults():
    from treemask._ffi import lib

    assert failure_policy.POLICIES == {"reject": lib.TREEMASK_FAILURE_REJECT,
                                       "fail_closed": lib.TREEMASK_FAILURE_FAIL_CLOSED,
                                       "sticky_error": lib.TREEMASK_FAILURE_STICKY_ERROR}
    assert treemask.trie.failure_policy_code is failure_policy.failure_policy_code
    assert failure_policy.adapter_policy_code("sticky_error") == failure_policy.POLICIES["fail_closed"]
    assert failure_policy.adapter_policy_code("reject") == failure_policy.POLICIES["reject"]
    with pytest.raises(treemask.InvalidArgumentError, match="want one of reject, fail_closed, sticky_error"):
        failure_policy.failure_policy_code("maybe")
    with pytest.raises(treemask.InvalidArgumentError):
        failure_policy.failure_policy_code(True)
    import inspect

    assert inspect.signature(treemask.Matcher).parameters["failure_policy"].default == "reject"
    assert inspect.signature(treemask.Trie.advance_states).parameters["failure_policy"].default == "reject"
    # library default: a refused token leaves the state; adapter default: only stop tokens after
    trie = small_trie()
    m = treemask.Matcher(trie)
    assert not m.accept_token(9) and sorted(m.next_tokens()) == [1, 5]
    m = treemask.Matcher(trie, failure_policy=failure_policy.ADAPTER_DEFAULT)
    assert not m.accept_token(9) and m.next_tokens() == [EOS]
