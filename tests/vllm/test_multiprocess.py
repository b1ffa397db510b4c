"""Issue 29 item 4: more than one process.

Two ``vllm serve`` processes (each with its engine core and worker) share
one TREEMASK_VLLM_TRIE_DIRS and one choice-cache directory, and a bounded
load test hammers both at once: the same new choice lists sent to both at
the same moment (both compile it, both write the same cache file, each
worker maps what either wrote), a trie file replaced by atomic renames
while requests name it, lists in both tokenizations, and a small cache cap
so that each process evicts files the other may be reading. Planted in the
cache beforehand, under the names of lists the clients send: a torn file
(a compiled list cut short) and a foreign one (another list's compiled
trie). Asserted: every answer is a complete sequence of what its request
named (a torn or foreign file read would answer another list, or fail), no
server dies and /health answers 200 throughout, and the cache ends under
its cap with the planted names holding their true lists.

One of the two servers runs vLLM's data parallelism on the CPU
(``--data-parallel-size 2``: two engine cores, each with its worker, behind
one API server), so three engines share the directories; it answers greedy
constrained requests exactly as the one-engine server does.

TREEMASK_VLLM_MP_SECONDS (default 20) and TREEMASK_VLLM_MP_CLIENTS (default
6) size the load; it stops early after TREEMASK_VLLM_MP_MAX_REQUESTS (600).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import collections
import concurrent.futures
import os
import random
import threading
import time

import pytest

import treemask
from conftest import ANIMALS, COLORS, FRUITS, VOCAB, vllm_servers
from treemask.vllm.choice_cache import META_DIGEST

requests = pytest.importorskip("requests")
pytest.importorskip("vllm")

SECONDS = float(os.environ.get("TREEMASK_VLLM_MP_SECONDS", "20"))
CLIENTS = int(os.environ.get("TREEMASK_VLLM_MP_CLIENTS", "6"))
MAX_REQUESTS = int(os.environ.get("TREEMASK_VLLM_MP_MAX_REQUESTS", "600"))
# Room for two lists in any tokenization (each file carries the model's
# vocabulary, 1.7 MB) and a few dozen canonical ones (3 KB each): the
# clients' new lists make both processes evict.
CACHE_BYTES = 4 << 20
WORDS = ["north", "south", "amber", "cedar", "delta", "ember", "fjord", "grove", "harbor", "island"]


def shared_lists():
    """The lists both servers are sent (fixed, so that each is compiled and
    cached by whichever process gets it first)."""
    rng = random.Random(29)
    return [sorted({"%s %s %d" % (rng.choice(WORDS), rng.choice(WORDS), rng.randrange(1000))
                    for _ in range(rng.randint(20, 60))}) for _ in range(10)]


@pytest.fixture(scope="module")
def shared(tiny_model, allowed_trie_dir, tmp_path_factory):
    """The shared directories, the planted cache files, two servers."""
    path, tokenizer, info = tiny_model
    d = allowed_trie_dir / "mp-tries"
    d.mkdir()
    treemask.Trie.from_labels(COLORS, tokenizer, VOCAB, [info["eos"]], prefix=" ").save(d / "colors.tmtrie")
    versions = [treemask.Trie.from_labels(labels, tokenizer, VOCAB, [info["eos"]], prefix=" ")
                for labels in (ANIMALS, FRUITS)]
    versions[0].save(d / "swapped.tmtrie")
    cache = tmp_path_factory.mktemp("mp-cache") / "cache"
    cache.mkdir(mode=0o700)
    lists = shared_lists()
    # Planted under the names the servers will look these lists up by.
    from treemask.vllm.choice_cache import digest_of

    def name_of(choices):
        return digest_of(tuple(choices), " ", (info["eos"],), VOCAB, "%s@None" % path) + ".tmtrie"

    whole = treemask.Trie.from_labels(lists[0], tokenizer, VOCAB, [info["eos"]], prefix=" ")
    whole.save(cache / "torn.tmp")
    data = (cache / "torn.tmp").read_bytes()
    (cache / "torn.tmp").unlink()
    (cache / name_of(lists[0])).write_bytes(data[: len(data) * 2 // 3])  # torn
    foreign = treemask.Trie.from_labels(lists[2], tokenizer, VOCAB, [info["eos"]], prefix=" ")
    foreign.save(cache / name_of(lists[1]))  # another list under this list's name
    env = {"TREEMASK_VLLM_TRIE_DIRS": str(d), "TREEMASK_VLLM_CACHE_DIR": str(cache),
           "TREEMASK_VLLM_CACHE_BYTES": str(CACHE_BYTES), "TREEMASK_VLLM_MAX_CHOICES": "2000",
           "VLLM_CPU_KVCACHE_SPACE": "1"}
    # B runs vLLM's data parallelism: two engine cores (and their workers)
    # behind one API server, so three engines share the directories.
    with vllm_servers((path, tmp_path_factory.mktemp("mp-a"), env),
                      (path, tmp_path_factory.mktemp("mp-b"), env, ("--data-parallel-size", "2"))) as (a, b):
        yield {"servers": (a, b), "dir": d, "cache": cache, "lists": lists, "versions": versions,
               "info": info, "name_of": name_of}


def test_two_servers_share_the_trie_directory_and_the_cache(shared, capsys):
    a, b = shared["servers"]
    lists, d, cache = shared["lists"], shared["dir"], shared["cache"]
    stop = threading.Event()
    problems = []
    figures = collections.Counter()
    lock = threading.Lock()
    slowest = [0.0]

    def fail(what):
        with lock:
            problems.append(what)
        stop.set()

    def ask(server, xargs, labels, rng):
        body = {"model": "tiny", "prompt": "Pick:", "max_tokens": 24, "temperature": 1.0,
                "seed": rng.randrange(1 << 30), "vllm_xargs": xargs}
        r = requests.post(server.base + "/v1/completions", json=body, timeout=180)
        if r.status_code != 200:
            return fail("HTTP %d from %s for %s: %s" % (r.status_code, server.base, sorted(xargs), r.text[:300]))
        c = r.json()["choices"][0]
        if c["finish_reason"] != "stop" or c["text"] not in labels:
            return fail("%s: not a sequence of its trie: %r (%r)" % (sorted(xargs), c["text"], c["finish_reason"]))
        with lock:
            figures["requests"] += 1
            if figures["requests"] >= MAX_REQUESTS:
                stop.set()

    def client(seed):
        rng = random.Random(seed)
        while not stop.is_set():
            kind = rng.choice(["shared", "shared", "shared any", "file", "swapped", "new"])
            try:
                if kind.startswith("shared"):
                    # the same list to both servers at the same moment
                    choices = rng.choice(lists)
                    xargs = {"treemask_choices": choices, "treemask_prefix": " "}
                    if kind == "shared any":
                        xargs["treemask_tokenization"] = "any"
                    labels = {" " + c for c in choices}
                    both = [threading.Thread(target=ask, args=(s, xargs, labels, random.Random(rng.random())))
                            for s in (a, b)]
                    for t in both:
                        t.start()
                    for t in both:
                        t.join()
                elif kind == "file":
                    ask(rng.choice((a, b)), {"treemask_trie": "colors"}, {" " + c for c in COLORS}, rng)
                elif kind == "swapped":  # replaced by renames meanwhile: either version
                    ask(rng.choice((a, b)), {"treemask_trie": "swapped"}, {" " + c for c in ANIMALS + FRUITS}, rng)
                else:  # a new list: fills the cache, and each process evicts
                    choices = ["%s %d" % (rng.choice(WORDS), rng.randrange(10**6)) for _ in range(40)]
                    ask(rng.choice((a, b)), {"treemask_choices": choices}, set(choices), rng)
                with lock:
                    figures[kind] += 1
            except requests.RequestException as e:
                fail("%s request: %r" % (kind, e))

    def swapper():
        i = 0
        while not stop.is_set():
            i += 1
            shared["versions"][i % 2].save(d / "swapped.tmtrie")  # an atomic rename
            with lock:
                figures["file replacements"] += 1
            stop.wait(0.5)

    def watch():
        while not stop.is_set():
            for s in (a, b):
                t0 = time.monotonic()
                try:
                    ok = requests.get(s.base + "/health", timeout=10).status_code == 200
                except requests.RequestException:
                    ok = False
                if not ok or s.proc.poll() is not None:
                    fail("%s: /health did not answer 200" % s.base)
                slowest[0] = max(slowest[0], time.monotonic() - t0)
            stop.wait(0.2)

    # What each process pays once, before the load: its tokenizer's private
    # copy and the model's vocabulary hold Python's GIL for up to ~1.7 s each
    # on this VM ("Serving safely"), more under load.
    warm = random.Random(-1)
    for s in (a, b):
        ask(s, {"treemask_choices": ["warm up %d" % i for i in range(5)]}, {"warm up %d" % i for i in range(5)}, warm)
        ask(s, {"treemask_choices": ["warm", "up"], "treemask_tokenization": "any"}, {"warm", "up"}, warm)
    assert not problems, problems
    figures.clear()
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    threads += [threading.Thread(target=swapper, daemon=True), threading.Thread(target=watch, daemon=True)]
    started = time.monotonic()
    for t in threads:
        t.start()
    stop.wait(SECONDS)
    stop.set()
    for t in threads:
        t.join(240)
    seconds = time.monotonic() - started
    with capsys.disabled():
        print("\nmulti-process: 2 servers, %d clients, %.1f s, %s; slowest /health %.2f s; cache %d bytes (cap %d)"
              % (CLIENTS, seconds, ", ".join("%s %d" % kv for kv in sorted(figures.items())), slowest[0],
                 _cache_bytes(cache), CACHE_BYTES))
    assert not any(t.is_alive() for t in threads), "a client did not finish"
    assert not problems, "\n".join(problems[:5])
    assert figures["shared"] >= 2 and figures["file replacements"] >= 2, figures
    for s in (a, b):
        assert s.proc.poll() is None
        log = s.log.read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]
    # the cache ends under its cap (one list saved before its eviction), and
    # a planted name, if it is still there, holds its true list now
    # (a save by one process while the other evicts may leave one file over)
    assert 0 < _cache_bytes(cache) <= CACHE_BYTES + (2 << 20)
    for i in (0, 1):
        name = shared["name_of"](lists[i])
        if (cache / name).exists():  # its file records the digest of its true list
            assert treemask.Trie.load(cache / name).metadata[META_DIGEST] + ".tmtrie" == name


def _cache_bytes(cache):
    return sum(e.stat().st_size for e in os.scandir(cache) if e.name.endswith(".tmtrie"))


# ---- vLLM's data parallelism on the CPU --------------------------------------------------


def test_data_parallel_engines_answer_as_one_process(shared):
    """Server B (--data-parallel-size 2: its requests go to either engine
    core) answers greedy constrained requests exactly as A (one engine)."""
    a, b = shared["servers"]
    cases = [({"treemask_trie": "colors"}, "My favourite color is", COLORS),
             ({"treemask_choices": ANIMALS, "treemask_prefix": " "}, "An animal:", ANIMALS),
             ({"treemask_choices": FRUITS, "treemask_prefix": " ", "treemask_tokenization": "any"}, "A fruit:",
              FRUITS),
             ({"treemask_trie": "swapped"}, "Pick:", ANIMALS + FRUITS)]
    bodies, labels = [], []
    for xargs, prompt, words in cases:
        for i in range(6):
            bodies.append({"model": "tiny", "prompt": "%s %d" % (prompt, i), "max_tokens": 24, "temperature": 0,
                           "vllm_xargs": xargs})
            labels.append({" " + w for w in words})
    shared["versions"][0].save(shared["dir"] / "swapped.tmtrie")  # one version for both

    def answers(server):
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            out = list(pool.map(lambda body: requests.post(server.base + "/v1/completions", json=body, timeout=180),
                                bodies))
        assert all(r.status_code == 200 for r in out), [r.text for r in out if r.status_code != 200][:2]
        return [r.json()["choices"][0]["text"] for r in out]

    one, two = answers(a), answers(b)
    for text, allowed in zip(one, labels):
        assert text in allowed, text
    assert two == one
    # B does run two engine cores
    names = set()
    for pid in b.pids():
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                names.add(f.read().split(b"\0")[0].decode(errors="replace"))
        except OSError:
            pass
    assert {"VLLM::EngineCore_DP0", "VLLM::EngineCore_DP1"} <= names, names
