"""The API server's memory per choice list at the full caps
(tests/vllm/run.sh bench memory): issue 29 item 3's and issue 43 item 6's
measurements, the long-string half too slow for ./dev test
(test_served_files.py runs the short-string half).

One ``vllm serve`` of the tiny model with the default limits (1,000,000
strings, 64 MiB a list), then, each on lists never seen before: first (the
cold server) two lists of 1,000,000 distinct 4-character strings in any
tokenization at once; then, after one small list of each kind (what a
process pays once), the short-string case (1,000,000 strings of 4 bytes,
3.8 MiB: the cost per string dominates) and the long-string case
(TREEMASK_VLLM_BENCH_MEMORY_N strings, default 1,000,000, of 60 bytes:
57 MiB, near the byte cap), each in any tokenization and canonical, one
list and two at once. For each run it prints the wall time, the API
server's resident memory before and at its peak (sampled every 50 ms), the
growth per byte and per string of the lists against the budget of
memory_probe (BUDGET_PER_BYTE times the bytes plus BUDGET_PER_STRING per
string, plus BUDGET_FIXED), the slowest /health answer (polled every 100
ms) and the whole server's memory at the end (the API server, the engine
core and its worker: the worker maps the compiled list the API server
cached, and vLLM keeps the running requests' parameters, the list with
them, in every process).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conftest import model_dir, vllm_server  # noqa: E402
from memory_probe import (MiB, Watch, body, budget, choice_list, distinct_strings, list_bytes, rss,  # noqa: E402
                          send_at_once)

N = int(os.environ.get("TREEMASK_VLLM_BENCH_MEMORY_N", "1000000"))
SHORT, LONG = 4, 60


def run(server, name, lists, tokenization):
    before = rss(server.proc.pid)
    t0 = time.monotonic()
    with Watch(server) as watch:
        answers = send_at_once(server, [body(c, tokenization) for c in lists])
    took = time.monotonic() - t0
    for c, r in zip(lists, answers):
        if r.status_code != 200:
            sys.exit("%s: HTTP %d %s" % (name, r.status_code, r.text[:300]))
        text = r.json()["choices"][0]["text"]
        if text[1:] not in set(c):
            sys.exit("%s: %r is not one of the list's strings" % (name, text))
    nbytes, nstrings = sum(list_bytes(c) for c in lists), sum(len(c) for c in lists)
    growth = watch.peak_rss - before
    bad = [h for h in watch.health if h[1] != 200]
    print("%-34s %6.1f MiB %5.0f s  API server %5.0f -> peak %5.0f MiB (+%5.0f MiB, %4.1f x the bytes, %4.0f B a"
          " string; budget %5.0f MiB)  slowest /health %5.2f s%s  whole server %5.0f MiB"
          % (name, nbytes / MiB, took, before / MiB, watch.peak_rss / MiB, growth / MiB, growth / nbytes,
             growth / nstrings, budget(lists) / MiB, watch.slowest_health, " (%d failed)" % len(bad) if bad else "",
             server.rss_bytes() / MiB), flush=True)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("TREEMASK_VLLM_CACHE_DIR", os.path.join(tmp, "cache"))
        env = {"TREEMASK_VLLM_CACHE_BYTES": str(4 << 30), "VLLM_CPU_KVCACHE_SPACE": "1"}
        print("bench memory: %d strings of %d and of %d bytes a list (caps: the defaults)" % (N, SHORT, LONG),
              flush=True)
        with vllm_server(model_dir(), tmp, env) as server:
            run(server, "cold: two short lists, any", [distinct_strings(N, SHORT, s) for s in (1, 2)], "any")
            # what a process pays once: the tokenizer's private copy
            run(server, "warm-up (100 strings), canonical", [choice_list(100, LONG, 1)], "canonical")
            run(server, "warm-up (100 strings), any", [choice_list(100, LONG, 2)], "any")
            seed = 10
            for width, make in ((SHORT, distinct_strings), (LONG, choice_list)):
                for tokenization in ("any", "canonical"):
                    what = "%s, %s" % ("short" if width == SHORT else "long", tokenization)
                    run(server, "one list, " + what, [make(N, width, seed)], tokenization)
                    run(server, "two lists at once, " + what, [make(N, width, seed + 1), make(N, width, seed + 2)],
                        tokenization)
                    seed += 10


if __name__ == "__main__":
    main()
