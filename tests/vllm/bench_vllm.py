"""vLLM benchmark (tests/vllm/run.sh bench, from ./dev bench): the tiny
random Qwen2 (vocab 151,936) on the CPU, 32 requests per measurement.

1. Throughput, greedy, every request constrained vs none: a trie of 2,000
   random 31-token paths against unconstrained requests with ignore_eos, so
   that every request generates exactly 32 tokens either way. Target: the
   constrained run keeps >= 0.85 of the unconstrained throughput.
2. Per-request choice lists at 100, 10,000 and 100,000 options, same
   prompts: treemask's two semantics (``treemask_choices`` with
   ``treemask_tokenization`` "any": a string set over the model's vocabulary,
   no tokenizer call per choice; "canonical": each choice's tokenization)
   against vLLM's own ``structured_outputs`` choice (xgrammar backend, which
   matches any tokenization too). Measured: the first answer (32 requests
   to the end on a list never seen before, compiling included: the time to
   first token of a new list, plus 32 short completions; treemask refuses a
   max_tokens too small for the shortest choice, so it is not max_tokens =
   1) and throughput (32 requests to the end, the list compiled). The
   model's vocabulary for "any" is built once per model before (printed).
   vLLM's own choice runs in a child process with its own engine, bounded by
   TREEMASK_VLLM_BENCH_XGRAMMAR_TIMEOUT seconds (default 300; measured here
   once: ~750 s for the first 100,000-option request): a list that does not
   finish in time is reported as "> N s".

Prints the baselines and the ratios. TREEMASK_VLLM_BENCH_SIZES overrides
the option counts (comma-separated), TREEMASK_VLLM_BENCH_ENGINES the
engines (default "any,canonical,xgrammar").

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os
import random
import statistics
import subprocess
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

    # ---- 2. choice lists: any / canonical tokenization vs structured_outputs --
    sizes = [int(s) for s in os.environ.get("TREEMASK_VLLM_BENCH_SIZES", "100,10000,100000").split(",") if s]
    engines = os.environ.get("TREEMASK_VLLM_BENCH_ENGINES", "any,canonical,xgrammar").split(",")
    timeout = float(os.environ.get("TREEMASK_VLLM_BENCH_XGRAMMAR_TIMEOUT", "300"))
    if "any" in engines:  # the model's Vocab, built once per model (and process)
        t0 = time.perf_counter()
        warm = SamplingParams(max_tokens=8, temperature=0,
                              extra_args={"treemask_choices": ["warm up"], "treemask_tokenization": "any"})
        llm.generate(prompts[:1], warm, use_tqdm=False)
        print("the model's vocabulary for tokenization 'any' (once per model): %.2f s"
              % (time.perf_counter() - t0))
    print("choice lists, %d requests, greedy (one list shared by the requests of a run):" % N_REQUESTS)
    print("  %8s  %-10s %12s %12s" % ("options", "engine", "first (s)", "tok/s"))
    for n in sizes:
        results = {}
        fresh = choices(n, salt=n)  # the same list: each engine has its own caches
        for engine in engines:
            if engine == "xgrammar":
                results[engine] = xgrammar_in_child(path, n, timeout)
            else:
                results[engine] = first_answer_and_throughput(llm, prompts, treemask_params(fresh, engine), fresh)
            ttft, rate = results[engine]
            print("  %8d  %-10s %12s %12s" % (n, engine, "> %.0f" % timeout if ttft is None else "%.3f" % ttft,
                                              "-" if rate is None else "%.1f" % rate), flush=True)
        base = results.get("any")
        for other in ("canonical", "xgrammar"):
            if base is None or other not in results:
                continue
            (ta, ra), (to, ro) = base, results[other]
            first = ("> %.0fx" % (timeout / ta)) if to is None else "%.1fx" % (to / ta)
            rate = "-" if ro is None else "%.2f" % (ra / ro)
            print("  %8d  ratio      first answer %s/any %s, throughput any/%s %s"
                  % (n, other, first, other, rate), flush=True)


def treemask_params(opts, tokenization):
    from vllm import SamplingParams

    def make(max_tokens):
        return SamplingParams(max_tokens=max_tokens, temperature=0,
                              extra_args={"treemask_choices": opts, "treemask_tokenization": tokenization})
    return make


def first_answer_and_throughput(llm, prompts, params, fresh):
    """(first answer on a list never seen, tokens/s once compiled)."""
    t0 = time.perf_counter()
    llm.generate(prompts, params(32), use_tqdm=False)
    ttft = time.perf_counter() - t0
    t_run, out = timed(lambda: llm.generate(prompts, params(32), use_tqdm=False), repeat=2)
    for o in out:
        text = o.outputs[0].text.strip()
        assert text in fresh, text
    return ttft, n_tokens(out) / t_run


def xgrammar_in_child(path, n, timeout):
    """vLLM's own choice at n options in a child process with its own engine
    (started before the clock runs): (first answer, tok/s), or (None, None)
    when the first answer takes longer than timeout seconds."""
    child = subprocess.Popen([sys.executable, __file__, "--xgrammar", path, str(n)], stdout=subprocess.PIPE,
                             text=True)
    started = None
    deadline = None
    try:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("ready"):
                started = time.monotonic()
                deadline = started + timeout + 120  # + the throughput runs, which follow
                break
        if started is None:
            child.wait()
            raise RuntimeError("the xgrammar child exited before its engine was ready")
        result = None

        def read():
            nonlocal result
            assert child.stdout is not None
            for line in child.stdout:
                if line.startswith("{"):
                    result = json.loads(line)
        import threading
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout=max(1.0, deadline - time.monotonic()))
        if result is None or result["first"] > timeout:
            return None, None
        return result["first"], result["rate"]
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def xgrammar_child(path, n):
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    llm = LLM(model=path, gpu_memory_utilization=0.15, max_model_len=256, max_num_seqs=N_REQUESTS, seed=0,
              dtype="float32", enforce_eager=True, structured_outputs_config={"backend": "xgrammar"})
    prompts = ["Request %d: describe the item in a few words:" % i for i in range(N_REQUESTS)]
    fresh = choices(n, salt=n)
    warm = choices(3, salt=-1)
    llm.generate(prompts[:1], SamplingParams(max_tokens=8, temperature=0,
                                             structured_outputs=StructuredOutputsParams(choice=warm)), use_tqdm=False)
    print("ready", flush=True)

    def params(max_tokens):
        return SamplingParams(max_tokens=max_tokens, temperature=0,
                              structured_outputs=StructuredOutputsParams(choice=fresh))
    first, rate = first_answer_and_throughput(llm, prompts, params, fresh)
    print(json.dumps({"first": first, "rate": rate}), flush=True)
    llm.llm_engine.engine_core.shutdown()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--xgrammar":
        xgrammar_child(sys.argv[2], int(sys.argv[3]))
    else:
        main()
