"""What test_served_files.py and bench_memory.py share: choice lists of a given
size, the budget "Serving safely" states, and a watcher that samples the
API server's resident memory and times ``/health`` while requests run.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import concurrent.futures
import random
import threading
import time

import requests

MiB = 1 << 20
#: The budget bindings/python/README.md ("Serving safely", "Memory")
#: states: while lists are served, the API server grows by at most
#: BUDGET_PER_BYTE times the UTF-8 bytes plus BUDGET_PER_STRING bytes per
#: string of each list in flight, plus BUDGET_FIXED (the interpreter's and
#: vLLM's own churn). Measured at the caps (1,000,000 strings; 64 MiB):
#: see test_served_files.py and bench_memory.py.
BUDGET_PER_BYTE = 10
BUDGET_PER_STRING = 200
BUDGET_FIXED = 64 * MiB
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
         "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]


def choice_list(n, width, seed):
    """n distinct strings of exactly ``width`` ASCII bytes (a number, then
    words, as catalogue items look)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        text = "%d-%d %s" % (seed, i, " ".join(rng.choice(WORDS) for _ in range(width // 4)))
        out.append(text[:width].ljust(width, "x"))
    return out


def distinct_strings(n, width, seed):
    """n distinct strings of ``width`` characters from [a-z0-9] (n numbers
    in base 36 from one that depends on ``seed``, wrapping around): the
    short-string case, where the cost per string dominates. Another seed,
    another list."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    space = 36 ** width
    assert n <= space
    out = []
    for i in range(n):
        k = (seed * 104729 + i) % space
        chars = []
        for _ in range(width):
            k, digit = divmod(k, 36)
            chars.append(alphabet[digit])
        out.append("".join(chars))
    return out


def budget(lists):
    """What the API server may grow by while ``lists`` are in flight."""
    return sum(BUDGET_PER_BYTE * list_bytes(c) + BUDGET_PER_STRING * len(c) for c in lists) + BUDGET_FIXED


def rss(pid):
    """Resident bytes of one process now (0 once it is gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Watch:
    """Samples the API server's RSS every ``period`` seconds and polls
    /health on its own thread (each answer timed; 30 s timeout)."""

    def __init__(self, server, period=0.05):
        self.server, self.period = server, period
        self.peak_rss = 0
        self.health = []  # (seconds the answer took, status or error)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._sample, daemon=True),
                         threading.Thread(target=self._poll, daemon=True)]

    def _sample(self):
        while not self._stop.is_set():
            self.peak_rss = max(self.peak_rss, rss(self.server.proc.pid))
            self._stop.wait(self.period)

    def _poll(self):
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                status = requests.get(self.server.base + "/health", timeout=30).status_code
            except requests.RequestException as e:
                status = repr(e)
            self.health.append((time.monotonic() - t0, status))
            self._stop.wait(0.1)

    @property
    def slowest_health(self):
        return max((s for s, _ in self.health), default=0.0)

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(60)


def send_at_once(server, bodies, timeout=1800):
    """Posts the completion bodies concurrently; returns the responses."""
    def post(body):
        return requests.post(server.base + "/v1/completions", json=body, timeout=timeout)

    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(post, bodies))


def body(choices, tokenization="canonical", max_tokens=64):
    xargs = {"treemask_choices": choices, "treemask_prefix": " "}
    if tokenization != "canonical":
        xargs["treemask_tokenization"] = tokenization
    return {"model": "tiny", "prompt": "Pick:", "max_tokens": max_tokens, "temperature": 0, "vllm_xargs": xargs}


def list_bytes(choices):
    return sum(len(c.encode("utf-8")) for c in choices)
