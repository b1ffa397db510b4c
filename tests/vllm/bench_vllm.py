"""vLLM benchmark (tests/vllm/run.sh bench, from ./dev bench): the tiny
random Qwen2 (vocab 151,936) on the CPU, 32 requests per measurement.

1. Throughput, greedy, every request constrained vs none: a trie of 2,000
   random 31-token paths against unconstrained requests with ignore_eos, so
   that every request generates exactly 32 tokens either way. Target: the
   constrained run keeps >= 0.85 of the unconstrained throughput.
2. Per-request choice lists, treemask (``treemask_choices``) vs vLLM's own
   ``structured_outputs`` choice (xgrammar backend), at 100, 10,000 and
   100,000 options, same prompts: the first answer (32 requests to the end
   on a list never seen before: compiling included; treemask refuses a
   max_tokens too small for the shortest choice, so this is no longer a
   max_tokens = 1 time to first token) and throughput (32 requests to the
   end, the list already compiled).

Prints the baselines and the ratios. TREEMASK_VLLM_BENCH_SIZES overrides
the option counts (comma-separated), TREEMASK_VLLM_BENCH_ENGINES the
engines (default "treemask,xgrammar"). Measured here: xgrammar needs ~12
minutes for the first 100,000-option request, most of the run.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import random
import statistics
import sys
import tempfile
import time

N_REQUESTS = 32
PATH_LEN = 31
VOCAB = 151936
WORDS = ["red", "green", "blue", "dark", "light", "olive", "sea", "spring", "shoe", "coat", "lamp", "desk",
         "chair", "phone", "cable", "table", "garden", "kitchen", "summer", "winter", "north", "south"]


def model_path():
    path = os.environ.get("TREEMASK_VLLM_MODEL")
    if not path:
        sys.exit("set TREEMASK_VLLM_MODEL (tests/vllm/run.sh bench does)")
    return path


def timed(fn, repeat=3):
    times = []
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def n_tokens(outputs):
    return sum(len(c.token_ids) for o in outputs for c in o.outputs)


def choices(n, salt):
    rng = random.Random(salt)
    out = set()
    while len(out) < n:
        out.add("%s %s %d" % (rng.choice(WORDS), rng.choice(WORDS), rng.randrange(10 * n)))
    return sorted(out)


def main():
    import treemask
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    path = model_path()
    # The trie file of part 1 goes in a directory requests may name files in.
    trie_dir = tempfile.mkdtemp(prefix="treemask-bench-")
    os.environ["TREEMASK_VLLM_TRIE_DIRS"] = trie_dir
    llm = LLM(model=path, gpu_memory_utilization=0.15, max_model_len=256, max_num_seqs=N_REQUESTS, seed=0,
              dtype="float32", enforce_eager=True, structured_outputs_config={"backend": "xgrammar"})
    eos = llm.get_tokenizer().eos_token_id
    prompts = ["Request %d: describe the item in a few words:" % i for i in range(N_REQUESTS)]

    # ---- 1. constrained vs unconstrained throughput -----------------------
    rng = random.Random(0)
    paths = [[rng.randrange(1000, 150000) for _ in range(PATH_LEN)] for _ in range(2000)]
    trie_file = os.path.join(trie_dir, "bench.tmtrie")
    treemask.Trie.from_paths(paths, VOCAB, [eos]).save(trie_file)
    try:
        free = SamplingParams(max_tokens=PATH_LEN + 1, temperature=0, ignore_eos=True)
        tied = SamplingParams(max_tokens=PATH_LEN + 1, temperature=0, extra_args={"treemask_trie": trie_file})
        llm.generate(prompts, free, use_tqdm=False)  # warm-up
        llm.generate(prompts, tied, use_tqdm=False)
        t_free, out_free = timed(lambda: llm.generate(prompts, free, use_tqdm=False))
        t_tied, out_tied = timed(lambda: llm.generate(prompts, tied, use_tqdm=False))
    finally:
        os.unlink(trie_file)
        os.rmdir(trie_dir)
    tok_free, tok_tied = n_tokens(out_free), n_tokens(out_tied)
    assert tok_free == tok_tied == N_REQUESTS * (PATH_LEN + 1), (tok_free, tok_tied)
    r_free, r_tied = tok_free / t_free, tok_tied / t_tied
    print("throughput, greedy, %d requests x %d tokens (median of 3):" % (N_REQUESTS, PATH_LEN + 1))
    print("  unconstrained      %8.1f tok/s" % r_free)
    print("  treemask trie      %8.1f tok/s   ratio %.3f (target >= 0.85)" % (r_tied, r_tied / r_free))

    # ---- 2. choice lists: treemask vs structured_outputs (xgrammar) -------
    sizes = [int(s) for s in os.environ.get("TREEMASK_VLLM_BENCH_SIZES", "100,10000,100000").split(",") if s]
    engines = os.environ.get("TREEMASK_VLLM_BENCH_ENGINES", "treemask,xgrammar").split(",")
    print("choice lists, %d requests, greedy (one list shared by the requests of a run):" % N_REQUESTS)
    print("  %8s  %-10s %12s %12s" % ("options", "engine", "first (s)", "tok/s"))
    for n in sizes:
        results = {}
        for engine in engines:
            def params(opts, max_tokens):
                if engine == "treemask":
                    return SamplingParams(max_tokens=max_tokens, temperature=0,
                                          extra_args={"treemask_choices": opts})
                return SamplingParams(max_tokens=max_tokens, temperature=0,
                                      structured_outputs=StructuredOutputsParams(choice=opts))

            fresh = choices(n, salt=n)  # the same list: each engine has its own caches
            t0 = time.perf_counter()
            llm.generate(prompts, params(fresh, 32), use_tqdm=False)
            ttft = time.perf_counter() - t0
            t_run, out = timed(lambda: llm.generate(prompts, params(fresh, 32), use_tqdm=False), repeat=2)
            for o in out:
                text = o.outputs[0].text.strip()
                assert text in fresh, (engine, text)
            results[engine] = (ttft, n_tokens(out) / t_run)
            print("  %8d  %-10s %12.3f %12.1f" % (n, engine, ttft, results[engine][1]), flush=True)
        if len(results) < 2:
            continue
        (tt, rt), (tx, rx) = results["treemask"], results["xgrammar"]
        print("  %8d  ratio      first answer xgrammar/treemask %.1fx, throughput treemask/xgrammar %.2f"
              % (n, tx / tt, rt / rx), flush=True)


if __name__ == "__main__":
    main()
