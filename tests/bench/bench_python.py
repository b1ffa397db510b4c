#!/usr/bin/env python3
"""Python benchmark (suite `bench`): what the Python layer costs.

1. transformers generate(), 8 prompts x 4 beams: per-step time inside our
   TrieLogitsProcessor vs transformers' PrefixConstrainedLogitsProcessor
   driven by a Python dict trie (the common practice), same model, labels
   and batch; both runs must produce the same sequences.
2. BatchMatcher fill of 256 rows: the Python method vs the bare C call
   through cffi (the C benchmark's number), full and incremental.
3. CPU apply on the same tensors: ours vs xgrammar's
   apply_token_bitmask_inplace (backend "cpu"), with memset of the buffer as
   the limit.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import pathlib
import statistics
import sys
import time

import numpy as np

import treemask
from treemask._ffi import ffi, lib

ROOT = pathlib.Path(os.environ.get("TREEMASK_SOURCE_ROOT") or pathlib.Path(__file__).resolve().parents[2])
sys.path.insert(0, str(ROOT / "tests" / "python"))
SHARED = ROOT.parent / "shared" / "data"
V = 151936


def paired(fn_a, fn_b, repeat=50, number=20):
    """Median seconds per call of two functions, measured alternately so
    that other load on the machine hits both alike."""
    fn_a(), fn_b()
    a, b = [], []
    for _ in range(repeat):
        for fn, out in ((fn_a, a), (fn_b, b)):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            out.append((time.perf_counter() - start) / number)
    return statistics.median(a), statistics.median(b)


def timed(fn, repeat=20, number=1):
    """Median seconds per call of fn over `repeat` runs of `number` calls."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


class Timed:
    """Wraps a logits processor and records the time of each call."""

    def __init__(self, inner):
        self.inner = inner
        self.times = []

    def __call__(self, input_ids, scores):
        start = time.perf_counter()
        out = self.inner(input_ids, scores)
        self.times.append(time.perf_counter() - start)
        return out


def processor_benchmark():
    try:
        import torch
        import transformers
        from transformers.generation.logits_process import PrefixConstrainedLogitsProcessor
    except ImportError as e:
        print("processor benchmark skipped: %s" % e)
        return
    from taxonomy_data import google_labels, iab_labels, toy_tokenizer
    from treemask.hf import TrieLogitsProcessor

    if (SHARED / "tokenizers").is_dir():
        tokenizer = transformers.PreTrainedTokenizerFast(
            tokenizer_file=str(SHARED / "tokenizers" / "qwen2.5-instruct" / "tokenizer.json"))
        eos, pad = 151645, 151643
        tokenizer.pad_token_id = pad
        labels, what = google_labels(SHARED), "Google taxonomy (5,582 labels), Qwen2.5 tokenizer"
    else:
        labels = iab_labels(ROOT)
        tokenizer = toy_tokenizer(labels)
        eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
        what = "IAB taxonomy (704 labels), toy tokenizer (../shared absent)"
    trie = treemask.Trie.from_labels(labels, tokenizer, V, [eos])
    config = transformers.Qwen2Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True,
                                      eos_token_id=eos, pad_token_id=pad)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(config).eval()
    prompts = ["Product %d: a thing to classify. Category:" % i for i in range(8)]
    tokenizer.padding_side = "left"
    inputs = tokenizer(prompts, return_tensors="pt", padding=True)
    prompt_length = inputs["input_ids"].shape[1]

    # The common practice: a dict trie walked from the root for every row.
    dict_trie = {}
    for i, label in enumerate(labels):
        if label in trie.skipped_labels:
            continue
        node = dict_trie
        for t in tokenizer.encode(" " + label, add_special_tokens=False):
            node = node.setdefault(t, {})
        node[eos] = {}

    def allowed(batch_id, sent):
        node = dict_trie
        for t in sent[prompt_length:].tolist():
            if t == eos:
                return [eos]
            node = node.get(t)
            if node is None:
                return [eos]
        return list(node.keys())

    # Three generate() runs each, alternating; the least disturbed run (lowest
    # mean) of each counts, since other processes share this machine.
    runs = {}
    for _ in range(3):
        for name, processor in (("treemask", TrieLogitsProcessor(trie)),
                                ("treemask, 2 threads", TrieLogitsProcessor(trie, n_threads=2)),
                                ("dict trie", PrefixConstrainedLogitsProcessor(allowed, num_beams=4))):
            timer = Timed(processor)
            with torch.no_grad():
                out = model.generate(**inputs, logits_processor=[timer], num_beams=4, num_return_sequences=4,
                                     do_sample=False, max_new_tokens=trie.stats().max_depth + 1,
                                     eos_token_id=eos, pad_token_id=pad)
            if name not in runs or statistics.mean(timer.times) < statistics.mean(runs[name][0]):
                runs[name] = (timer.times, out)
    same = all(torch.equal(runs[n][1], runs["dict trie"][1]) for n in ("treemask", "treemask, 2 threads"))
    ours, theirs = (statistics.mean(runs[n][0]) for n in ("treemask", "dict trie"))
    print("\nProcessor time per step, generate() with 8 prompts x 4 beams = 32 rows, V = %d;" % V)
    print("treemask masks on 1 thread (the default) or 2; torch runs the model and the baseline's"
          " operations on %d threads" % torch.get_num_threads())
    print("(%s; %d steps; best of 3 runs; identical outputs: %s)" % (what, len(runs["treemask"][0]), same))
    print("| processor | mean ms / step | median ms / step |")
    print("|---|---|---|")
    for name in ("treemask", "treemask, 2 threads", "dict trie"):
        times = runs[name][0]
        print("| %s | %.3f | %.3f |" % (name, 1e3 * statistics.mean(times), 1e3 * statistics.median(times)))
    print("ratio (dict trie / treemask): %.1fx (target >= 20x); with 2 threads: %.1fx"
          % (theirs / ours, theirs / statistics.mean(runs["treemask, 2 threads"][0])))
    if not same:
        print("error: the two processors produced different sequences")
        sys.exit(1)


def batch_benchmark():
    rng = np.random.default_rng(0)
    paths = rng.integers(64000, 92531, size=(20000, 4)).tolist()
    trie = treemask.Trie.from_paths(paths, V, [2])
    n = 256
    batch = treemask.BatchMatcher([treemask.Matcher(trie) for _ in range(n)])
    for slot in range(n):  # spread the rows over depths 0..3
        batch[slot].accept_tokens(paths[slot][: slot % 4])
    bitmask = treemask.allocate_token_bitmask(n, V)
    need = np.zeros(n, dtype=np.bool_)
    mask_ptr, need_ptr = ffi.from_buffer("int32_t[]", bitmask), ffi.from_buffer("bool[]", need)
    words = bitmask.shape[1]

    def raw_full():
        lib.treemask_batch_fill_next_token_bitmask(batch._ptr, mask_ptr, words, ffi.NULL, 0, need_ptr)

    bound = treemask.allocate_token_bitmask(n, V)
    batch.bind_bitmask(bound)
    batch.fill_bound(incremental=False)

    def raw_incremental():
        lib.treemask_batch_fill_bound(batch._ptr, ffi.NULL, 0, lib.TREEMASK_FILL_INCREMENTAL, need_ptr)

    print("\nBatchMatcher fill, 256 rows, V = %d (us per call)" % V)
    print("| mode | Python method | bare C call (cffi) | Python overhead |")
    print("|---|---|---|---|")
    for mode, method, raw in (("full", lambda: batch.fill_next_token_bitmask(bitmask), raw_full),
                              ("incremental", lambda: batch.fill_bound(), raw_incremental)):
        t_py, t_c = paired(method, raw)
        print("| %s | %.2f | %.2f | %.2f (%.0f %%) |" % (mode, 1e6 * t_py, 1e6 * t_c, 1e6 * (t_py - t_c),
                                                       100 * (t_py - t_c) / t_c))
    m = treemask.Matcher(trie)
    row = treemask.allocate_token_bitmask(1, V)
    print("single Matcher: accept_token + rollback %.2f us, fill_next_token_bitmask %.2f us"
          % (1e6 * timed(lambda: (m.accept_token(paths[0][0]), m.rollback()), 50, 200),
             1e6 * timed(lambda: m.fill_next_token_bitmask(row), 50, 200)))


def apply_benchmark():
    try:
        import torch
        import xgrammar
    except ImportError as e:
        print("\napply benchmark against xgrammar skipped: %s" % e)
        xgrammar = None
        import torch
    rng = np.random.default_rng(1)
    print("\nCPU apply, fp32, V = %d, trie-like masks (<= 64 allowed per row); GB/s of logits" % V)
    print("| rows | memset (limit) | treemask | treemask, 2 threads | xgrammar cpu | treemask / xgrammar |")
    print("|---|---|---|---|---|---|")
    for rows in (1, 32, 256):
        logits = torch.zeros((rows, V))
        bitmask = torch.zeros((rows, (V + 31) // 32), dtype=torch.int32)
        for r in range(rows):
            for t in rng.integers(0, V, size=64):
                bitmask[r, t // 32] |= 1 << (int(t) % 32) if t % 32 != 31 else -2**31
        size = logits.numel() * 4 / 1e9
        as_numpy = logits.numpy()
        t_memset = timed(lambda: as_numpy.fill(0.0), 20, 5)
        t_ours = timed(lambda: treemask.apply_token_bitmask_inplace(logits, bitmask), 20, 5)
        t_two = timed(lambda: treemask.apply_token_bitmask_inplace(logits, bitmask, n_threads=2), 20, 5)
        if xgrammar is not None:
            t_x = timed(lambda: xgrammar.apply_token_bitmask_inplace(logits, bitmask, backend="cpu"), 20, 5)
            x_rate, x_ratio = "%.1f" % (size / t_x), "%.1fx" % (t_x / t_ours)
        else:
            x_rate, x_ratio = "-", "-"
        print("| %d | %.1f | %.1f | %.1f | %s | %s |"
              % (rows, size / t_memset, size / t_ours, size / t_two, x_rate, x_ratio))
    print("(2 threads split rows of >= 1 MiB each, so one row stays on one thread)")


def processor_step_benchmark():
    """The processor's own step on 32 rows, measured alternately: the fused
    out-of-place apply it uses (transformers requires processors to leave
    their input alone) against the in-place apply it used before."""
    try:
        import torch
        import treemask.hf as hf
    except ImportError as e:
        print("processor step benchmark skipped: %s" % e)
        return
    rng = np.random.default_rng(0)
    paths = rng.integers(1000, V - 10, size=(5000, 4)).tolist()
    trie = treemask.Trie.from_paths(paths, V, [V - 1])
    ids = torch.tensor([[7] + paths[i][:2] for i in range(32)])
    scores = torch.randn((32, V))

    def in_place(logits, bitmask, out=None, n_threads=1):
        treemask.apply_token_bitmask_inplace(logits, bitmask, n_threads=n_threads)
        return logits

    processors = {}
    work = scores.clone()  # what the in-place form overwrites (its content does not matter)

    def step(apply):
        def run():
            hf.apply_token_bitmask = apply
            p = processors.setdefault(apply, hf.TrieLogitsProcessor(trie, prompt_length=1))
            p.reset()
            logits = work if apply is in_place else scores
            p(ids[:, :2], logits)
            p(ids, logits)
        return run

    fused = hf.apply_token_bitmask
    try:
        t_in, t_out = paired(step(in_place), step(fused), repeat=30, number=5)
    finally:
        hf.apply_token_bitmask = fused
    print("\nTrieLogitsProcessor, 2 steps on 32 rows x V = %d (ms): in place (scores modified) %.3f,"
          " out of place (fused, a new tensor) %.3f" % (V, 1e3 * t_in, 1e3 * t_out))


def main():
    print("treemask %s, CPU kernel %s" % (treemask.__version__, treemask.cpu_kernel_isa()))
    batch_benchmark()
    apply_benchmark()
    processor_step_benchmark()
    processor_benchmark()
    return 0


if __name__ == "__main__":
    sys.exit(main())
