"""The API server's memory per byte of choice list at the full caps
(tests/vllm/run.sh bench memory): issue 29 item 3's measurement, too slow
for ./dev test (which runs test_memory.py at a scaled-down cap).

One ``vllm serve`` of the tiny model with the default limits (1,000,000
strings, 64 MiB a list), then, each on lists never seen before: one list in
the canonical tokenization, one in "any", and two of each sent at once.
Each list holds TREEMASK_VLLM_BENCH_MEMORY_N strings (default 1,000,000) of
60 bytes (57 MiB of text). For each run it prints the wall time, the API
server's resident memory before and at its peak (sampled every 50 ms) and
the growth per byte of the lists, the slowest /health answer (polled every
100 ms) and the whole server's memory at the end (the API server, the
engine core and its worker: the worker maps the compiled list the API
server cached, and keeps its strings).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conftest import model_dir, vllm_server  # noqa: E402
from memory_probe import MiB, Watch, body, choice_list, list_bytes, rss, send_at_once  # noqa: E402

N = int(os.environ.get("TREEMASK_VLLM_BENCH_MEMORY_N", "1000000"))
WIDTH = 60


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
    nbytes = sum(list_bytes(c) for c in lists)
    growth = watch.peak_rss - before
    bad = [h for h in watch.health if h[1] != 200]
    print("%-32s %7.1f MiB  %6.0f s  API server %5.0f -> peak %5.0f MiB (+%5.0f MiB, %4.1f x the lists)  "
          "slowest /health %5.2f s%s  whole server %5.0f MiB"
          % (name, nbytes / MiB, took, before / MiB, watch.peak_rss / MiB, growth / MiB, growth / nbytes,
             watch.slowest_health, " (%d failed)" % len(bad) if bad else "", server.rss_bytes() / MiB), flush=True)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("TREEMASK_VLLM_CACHE_DIR", os.path.join(tmp, "cache"))
        env = {"TREEMASK_VLLM_CACHE_BYTES": str(4 << 30), "VLLM_CPU_KVCACHE_SPACE": "1"}
        print("bench memory: %d strings of %d bytes a list (caps: the defaults)" % (N, WIDTH), flush=True)
        with vllm_server(model_dir(), tmp, env) as server:
            # what a process pays once: the tokenizer's private copy, the model's vocabulary
            run(server, "warm-up (100 strings, both)", [choice_list(100, WIDTH, 1)], "canonical")
            run(server, "warm-up any", [choice_list(100, WIDTH, 2)], "any")
            seed = 10
            for tokenization in ("any", "canonical"):
                run(server, "one list, %s" % tokenization, [choice_list(N, WIDTH, seed)], tokenization)
                run(server, "two lists at once, %s" % tokenization,
                    [choice_list(N, WIDTH, seed + 1), choice_list(N, WIDTH, seed + 2)], tokenization)
                seed += 10


if __name__ == "__main__":
    main()
