"""Beam search benchmark (tests/vllm/run.sh bench, from ./dev bench): the
tiny random Qwen2 (vocab 151,936) on the CPU, B = 50, over the MiniOneRec
catalogue shape (the bundled Industrial_and_Scientific semantic IDs: 3,686
items of 3 codes, code <x_N> mapped to token 1000 + 256 * level + N).

1. Time per request, 8 prompts of 20 to 160 tokens searched together
   (and one prompt alone: latency):
   - treemask.vllm.beam_search (exact, constrained; engine in
     logprobs_mode processed_logits, prefix caching on);
   - vLLM's own LLM.beam_search at the same B (unconstrained: the baseline
     of what exactness and the constraint cost; engine in its default
     raw_logprobs mode, which it needs);
   - treemask.hf.beam_search on the same weights (transformers, float32).
2. The share of vLLM's own beam output that is not a catalogue item
   (treemask's: 0, checked).
3. The processor's cost per beam row: treemask.vllm.beam.normalize_beam_rows
   and the mask (treemask.apply_token_bitmask_inplace) on 50 rows of the
   vocabulary, against torch.log_softmax of the same rows (what vLLM's
   raw_logprobs mode computes for every request that asks for logprobs).

Every treemask.vllm hypothesis list is checked equal to hf.beam_search's.
TREEMASK_VLLM_BENCH_REPEAT sets the repeats (the fastest counts; default 5).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import gc
import json
import os
import pathlib
import sys
import time

B = 50
N_PROMPTS = 8
CODE_BASE = 1000
VOCAB = 151936
ROOT = pathlib.Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "examples" / "data" / "minionerec" / "Industrial_and_Scientific.index.json"


def model_path():
    path = os.environ.get("TREEMASK_VLLM_MODEL")
    if not path:
        sys.exit("set TREEMASK_VLLM_MODEL (tests/vllm/run.sh bench does)")
    return path


def timed(fn, repeat):
    """The fastest of repeat runs (the least disturbed on a shared machine)."""
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def is_item(trie, tokens):
    import treemask

    m = treemask.Matcher(trie)
    return bool(tokens) and m.accept_tokens(tokens) == len(tokens) and m.is_terminated()


def engine(path, **kwargs):
    from vllm import LLM

    return LLM(model=path, gpu_memory_utilization=0.15, max_model_len=512, max_num_seqs=256, seed=0,
               dtype="float32", enforce_eager=True, **kwargs)


def shutdown(llm):
    llm.llm_engine.engine_core.shutdown()
    gc.collect()


def row_cost(repeat):
    """normalize_beam_rows + the mask vs torch.log_softmax, B rows of the vocabulary."""
    import numpy as np
    import torch

    import treemask
    from treemask.vllm.beam import normalize_beam_rows

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(B, VOCAB, generator=g)
    bitmask = np.zeros((B, (VOCAB + 31) // 32), dtype=np.int32)
    bitmask[:, CODE_BASE // 32:CODE_BASE // 32 + 8] = -1  # 256 allowed tokens per row
    rows = list(range(B))
    work = logits.clone()

    def ours():
        work.copy_(logits)
        normalize_beam_rows(work, rows)
        treemask.apply_token_bitmask_inplace(work, bitmask, vocab_size=VOCAB, indices=rows)

    t_ours, _ = timed(ours, repeat * 5)
    t_copy, _ = timed(lambda: work.copy_(logits), repeat * 5)
    t_base, _ = timed(lambda: torch.log_softmax(logits, dim=-1), repeat * 5)
    return t_ours - t_copy, t_base


def main():
    import numpy as np
    import torch
    import transformers

    import treemask
    import treemask.vllm as tv
    from treemask.hf import beam_search as hf_beam_search

    repeat = int(os.environ.get("TREEMASK_VLLM_BENCH_REPEAT", "5"))
    path = model_path()
    items = json.loads(CATALOGUE.read_text())
    paths = [[CODE_BASE + 256 * (ord(c[1]) - ord("a")) + int(c.strip("<>").split("_")[1]) for c in codes]
             for codes in items.values()]
    eos = json.loads((pathlib.Path(path) / "treemask-tiny.json").read_text())["eos"]
    trie = treemask.Trie.from_paths(paths, VOCAB, [eos])
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 150000, n).tolist() for n in np.linspace(20, 160, N_PROMPTS).astype(int)]
    print("beam search, B = %d, MiniOneRec Industrial_and_Scientific (%d items of 3 codes), %d prompts of %d-%d"
          " tokens, tiny Qwen2 on the CPU (best of %d)" % (B, len(paths), N_PROMPTS, len(prompts[0]),
                                                             len(prompts[-1]), repeat))

    # ---- treemask.vllm.beam_search --------------------------------------
    exact = engine(path, logprobs_mode="processed_logits", max_logprobs=B)
    tv.beam_search(exact, prompts[:2], trie, B)  # warm-up
    t_ours, ours = timed(lambda: tv.beam_search(exact, prompts, trie, B), repeat)
    t_ours1, _ = timed(lambda: tv.beam_search(exact, prompts[:1], trie, B), repeat)
    shutdown(exact)

    # ---- vLLM's own beam search, unconstrained ---------------------------
    from vllm.sampling_params import BeamSearchParams

    plain = engine(path, max_logprobs=2 * B)  # vLLM's beam search asks for 2B log-probabilities
    params = BeamSearchParams(beam_width=B, max_tokens=trie.stats().max_depth + 1)
    requests = [{"prompt_token_ids": p} for p in prompts]
    plain.beam_search(requests[:2], params)  # warm-up
    t_own, own = timed(lambda: plain.beam_search(requests, params), repeat)
    t_own1, _ = timed(lambda: plain.beam_search(requests[:1], params), repeat)
    shutdown(plain)
    n_own = n_foreign = 0
    for prompt, out in zip(prompts, own):
        for seq in out.sequences:
            generated = list(seq.tokens[len(prompt):])
            n_own += 1
            if not is_item(trie, generated if generated and generated[-1] == eos else [*generated, eos]):
                n_foreign += 1

    # ---- treemask.hf.beam_search -----------------------------------------
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()

    def hf_all():
        return [hf_beam_search(model, torch.tensor([p]), trie, B) for p in prompts]

    hf_all()  # warm-up
    t_hf, ref = timed(hf_all, repeat)
    t_hf1, _ = timed(lambda: hf_beam_search(model, torch.tensor([prompts[0]]), trie, B), repeat)

    same = all([t for t, _ in hyps] == r.sequences[:, len(p):].tolist()
               and np.allclose([s for _, s in hyps], r.scores.numpy(), atol=1e-3)
               for p, hyps, r in zip(prompts, ours, ref))
    n_ours = sum(len(h) for h in ours)
    ours_foreign = sum(not is_item(trie, t) for h in ours for t, _ in h)
    assert same, "treemask.vllm.beam_search differs from hf.beam_search"
    assert ours_foreign == 0

    print("  %-40s %12s %12s" % ("", "s/request", "1 alone (s)"))
    print("  %-40s %12.3f %12.3f" % ("treemask.vllm.beam_search (exact)", t_ours / N_PROMPTS, t_ours1))
    print("  %-40s %12.3f %12.3f   ratio treemask/vLLM %.2f (batch), %.2f (alone)"
          % ("vLLM LLM.beam_search (unconstrained)", t_own / N_PROMPTS, t_own1, t_ours / t_own, t_ours1 / t_own1))
    print("  %-40s %12.3f %12.3f   ratio treemask.vllm/hf %.2f (batch), %.2f (alone)"
          % ("treemask.hf.beam_search (transformers)", t_hf / N_PROMPTS, t_hf1, t_ours / t_hf, t_ours1 / t_hf1))
    print("  not a catalogue item: vLLM's own %d of %d hypotheses (%.1f%%); treemask's %d of %d"
          % (n_foreign, n_own, 100.0 * n_foreign / max(1, n_own), ours_foreign, n_ours))
    print("  treemask.vllm.beam_search = hf.beam_search (hypotheses, scores within 1e-3): %s"
          % ("yes" if same else "NO"))
    t_rows, t_softmax = row_cost(repeat)
    print("  beam rows, %d x %d: normalize_beam_rows + mask %.2f ms, torch.log_softmax %.2f ms (ratio %.2f)"
          % (B, VOCAB, 1e3 * t_rows, 1e3 * t_softmax, t_rows / t_softmax))


if __name__ == "__main__":
    main()
