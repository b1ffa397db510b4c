"""treemask.llama_cpp inside the real llama-cpp-python (0.3.36): its Python
package from the sdist, loading the libllama that tests/llama_cpp/run.sh
built from the same sdist (LLAMA_CPP_LIB_PATH), and the tiny random-weight
Qwen2 GGUF. Sampling many times, every completion must be a label followed
by EOS; a processor that breaks mid-generation must leave only EOS.

Run by tests/llama_cpp/run.sh (TREEMASK_LLAMA_MODEL, TREEMASK_LLAMA_LABELS).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os

import numpy as np
import pytest

import treemask
from treemask.llama_cpp import TrieLogitsProcessor, vocab_of

llama_cpp = pytest.importorskip("llama_cpp", reason="llama_cpp is not importable (run tests/llama_cpp/run.sh)")

MODEL = os.environ.get("TREEMASK_LLAMA_MODEL")
LABELS = os.environ.get("TREEMASK_LLAMA_LABELS")
RUNS = int(os.environ.get("TREEMASK_LLAMA_RUNS") or 200)
if not MODEL or not LABELS:
    pytest.skip("TREEMASK_LLAMA_MODEL / TREEMASK_LLAMA_LABELS not set (run tests/llama_cpp/run.sh)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def llm():
    return llama_cpp.Llama(MODEL, n_ctx=256, n_threads=1, n_threads_batch=1, seed=1234, verbose=False)


@pytest.fixture(scope="module")
def labels():
    return [line for line in open(LABELS, encoding="utf-8").read().splitlines() if line]


@pytest.fixture(scope="module")
def trie(llm, labels):
    paths = [llm.tokenize((" " + label).encode("utf-8"), add_bos=False, special=False) for label in labels]
    return treemask.Trie.from_paths(paths, llm.n_vocab(), [llm.token_eos()])


def complete(llm, processor, prompt, **kwargs):
    out = llm.create_completion(prompt, max_tokens=64, logits_processor=llama_cpp.LogitsProcessorList([processor]),
                                **kwargs)
    return out["choices"][0]


def test_sampled_completions_are_labels(llm, labels, trie):
    label_set = set(labels)
    seen = set()
    processor = TrieLogitsProcessor(trie)  # one processor, successive calls
    for run in range(RUNS):
        choice = complete(llm, processor, "Article %d: a recipe for sourdough bread. Topic:" % (run % 7),
                          temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=run)
        text = choice["text"]
        assert choice["finish_reason"] == "stop", (run, text, choice["finish_reason"])
        assert text.startswith(" ") and text[1:] in label_set, (run, text)
        assert processor.error is None and processor.matcher.can_terminate()  # EOS ends it unseen
        seen.add(text)
    print("%d completions, %d distinct labels" % (RUNS, len(seen)))
    assert len(seen) > 1


def test_default_sampling_settings(llm, labels, trie):
    """llama-cpp-python's defaults (top_k 40, top_p 0.95, min_p 0.05, temp 0.8)
    after the processor: still only labels."""
    label_set = set(labels)
    for run in range(20):
        choice = complete(llm, TrieLogitsProcessor(trie), "Topic of note %d:" % run, seed=100 + run)
        assert choice["finish_reason"] == "stop" and choice["text"][1:] in label_set, choice


def test_greedy(llm, labels, trie):
    choice = complete(llm, TrieLogitsProcessor(trie), "Topic:", temperature=0.0)
    assert choice["finish_reason"] == "stop" and choice["text"][1:] in set(labels)


def test_internal_error_fails_closed(llm, trie):
    """The processor breaks after the first token: llama-cpp-python would
    swallow an exception and go on unconstrained; ours ends with EOS."""
    processor = TrieLogitsProcessor(trie)
    calls = []
    original = processor._mask

    def breaks_later(scores):
        calls.append(1)
        if len(calls) > 1:
            raise MemoryError("simulated")
        original(scores)

    processor._mask = breaks_later
    choice = complete(llm, processor, "Topic:", temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=3)
    assert processor.error is not None and "simulated" in processor.error
    assert choice["finish_reason"] == "stop"
    first = llm.tokenize(choice["text"].encode("utf-8"), add_bos=False, special=False)
    assert len(first) <= 1, choice["text"]  # one constrained token, then only EOS


def test_scores_reach_the_processor_as_llama_cpp_passes_them(llm, trie):
    """Pins the calling convention the processor relies on: the evaluated ids
    (prompt, then one more per step) and a float32 row of n_vocab scores."""
    seen = []

    def spy(input_ids, scores):
        seen.append((np.asarray(input_ids).copy(), scores.shape, scores.dtype))
        return scores

    processor = TrieLogitsProcessor(trie)
    llm.create_completion("Topic:", max_tokens=64, temperature=0.0,
                          logits_processor=llama_cpp.LogitsProcessorList([spy, processor]))
    assert len(seen) >= 2
    prompt_len = len(seen[0][0])
    for i, (ids, shape, dtype) in enumerate(seen):
        assert len(ids) == prompt_len + i and shape == (llm.n_vocab(),) and dtype == np.float32


def test_readme_python_example():
    """The README's llama-cpp-python example (the ```python block of its
    "llama.cpp" section), verbatim but for the model path."""
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md"), encoding="utf-8").read()
    section = readme.split("\n## llama.cpp\n", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert '"model.gguf"' in code
    namespace = {}
    exec(compile(code.replace('"model.gguf"', repr(MODEL)), "README.md (llama-cpp-python example)", "exec"),
         namespace)
    choice = namespace["out"]["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["text"][1:] in namespace["labels"], choice


@pytest.fixture(scope="module")
def model_vocab(llm):
    return vocab_of(llm)


def test_a_string_set_in_any_tokenization(llm, labels, model_vocab):
    """The labels as a string set (issue 23) over the model's token bytes
    (treemask.llama_cpp.vocab_of: llama.cpp's pieces, control and added
    tokens never text): completions spell a label, in whatever tokenization
    the model samples (the C test counts how often that is not the
    canonical)."""
    strings = treemask.Trie.from_strings(labels, model_vocab, [llm.token_eos()], prefix=" ")
    label_set = set(labels)
    for run in range(RUNS // 4):
        processor = TrieLogitsProcessor(strings, vocab=model_vocab if run % 2 else llm)
        choice = complete(llm, processor, "Article %d: a recipe for sourdough bread. Topic:"
                          % (run % 7), temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=run)
        text = choice["text"]
        assert choice["finish_reason"] == "stop", (run, text, choice["finish_reason"])
        assert text.startswith(" ") and text[1:] in label_set, (run, text)


def test_a_string_set_of_another_tokenizer_is_refused(llm, model_vocab):
    """Issue 29 item 2: a string set compiled over another vocabulary of the
    same width (every token's bytes moved to the next id), or a smaller one,
    is refused naming both fingerprints; one compiled over the model's
    Hugging Face tokenizer (python -m treemask compile-strings) gives the
    same masks as llama.cpp's pieces, and is taken."""
    n = llm.n_vocab()
    pieces = [model_vocab.token_bytes(t) for t in range(n)]
    shifted = treemask.Vocab.from_token_bytes(pieces[1:] + pieces[:1], n)
    smaller = treemask.Vocab.from_token_bytes(pieces[:n - 2000], n - 2000)
    for other, stop in ((shifted, llm.token_eos()), (smaller, 100)):
        strings = treemask.Trie.from_strings(["cat"], other, [stop], prefix=" ")
        with pytest.raises(treemask.InvalidArgumentError, match="0x%x" % other.fingerprint) as e:
            TrieLogitsProcessor(strings, vocab=llm)
        assert "0x%x" % model_vocab.fingerprint in str(e.value)
    hf_dir = os.path.join(os.path.dirname(MODEL), "hf")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    if not os.path.isdir(hf_dir):
        pytest.skip("%s is absent (the model's Hugging Face files)" % hf_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
    hf_vocab = treemask.Vocab.from_tokenizer(tokenizer, n)
    strings = treemask.Trie.from_strings(["cat", "dog"], hf_vocab, [llm.token_eos()], prefix=" ")
    TrieLogitsProcessor(strings, vocab=llm)  # taken: the same masks
