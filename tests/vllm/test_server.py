"""treemask inside vLLM's OpenAI-compatible server (started on 127.0.0.1
with a bounded life, killed in a finally): completions and chat
completions constrained through ``vllm_xargs``, bad requests answered with
HTTP 400 and treemask's message (never a 500, never an unconstrained
answer), and issue 21's hostile client: files outside the allowed
directories, FIFOs, oversized files and lists, bytes of files in replies,
lone surrogates, a max_tokens too small for any label, beam search; and
issue 29's: token ids the trie or the model cannot take, string sets over
another vocabulary, failures injected into the worker (the server runs
with the test-only hook of tests/vllm/faults). The API server's memory with
lists at the caps: test_served_files.py.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os
import re
import threading
import time

import pytest

import treemask
from conftest import ANIMALS, COLORS, HERE, VOCAB, vllm_server
from memory_probe import send_at_once

requests = pytest.importorskip("requests")
pytest.importorskip("vllm")

SECRET = "sk-live-SECRET"
FAULTS = HERE / "faults"
REFUSED = "no trie file of that name is available to requests on this server"


@pytest.fixture(scope="module")
def tries(tiny_model, allowed_trie_dir):
    """Tries inside the allowed directory, and files a client must not reach."""
    _, tokenizer, info = tiny_model
    d = allowed_trie_dir / "server-tries"
    d.mkdir()
    treemask.Trie.from_labels(COLORS, tokenizer, VOCAB, [info["eos"]], prefix=" ").save(d / "colors.tmtrie")
    (d / "leak.json").write_text(json.dumps({"start_token_id": 225, "end_token_id": 2,
                                             "prefix_dict": {"225": [5], "225_" + SECRET * 1500: [1]}}))
    (d / "leak.tsv").write_text("225\t5\x02" + SECRET + "\n")
    os.mkfifo(d / "fifo.json")
    with open(d / "sparse.json", "wb") as f:
        f.truncate(2 << 30)
    outside = allowed_trie_dir / "outside.tmtrie"  # outside the server's directory
    treemask.Trie.from_labels(ANIMALS, tokenizer, VOCAB, [info["eos"]], prefix=" ").save(outside)
    os.symlink(outside, d / "link.tmtrie")
    return {"dir": d, "colors": str(d / "colors.tmtrie"), "outside": str(outside)}


#: The caps of this server: scaled down from the defaults (1,000,000 strings,
#: 64 MiB) so that a list at the cap compiles in seconds.
MAX_CHOICES = 20000
MAX_CHOICE_BYTES = 1 << 20
#: Room for a string-set file (it carries the model's vocabulary: ~2.5 MB).
MAX_FILE_BYTES = 8 << 20


@pytest.fixture(scope="module")
def server(tiny_model, tries, tmp_path_factory):
    """The server, with the test-only fault hook (tests/vllm/faults: inert
    unless a request carries one of its marker strings)."""
    path, _, _ = tiny_model
    pythonpath = os.pathsep.join(p for p in (str(FAULTS), os.environ.get("PYTHONPATH", "")) if p)
    env = {"TREEMASK_VLLM_TRIE_DIRS": str(tries["dir"]), "TREEMASK_VLLM_MAX_FILE_BYTES": str(MAX_FILE_BYTES),
           "TREEMASK_VLLM_MAX_CHOICES": str(MAX_CHOICES), "TREEMASK_VLLM_MAX_CHOICE_BYTES": str(MAX_CHOICE_BYTES),
           "PYTHONPATH": pythonpath, "TREEMASK_TEST_FAULTS": "1"}
    with vllm_server(path, tmp_path_factory.mktemp("server"), env) as s:
        yield s


def post(server, route, body, timeout=120):
    return requests.post(server.base + route, json=body, timeout=timeout)


def complete(server, xargs, **extra):
    body = dict(model="tiny", prompt="x", max_tokens=16, vllm_xargs=xargs)
    body.update(extra)
    return post(server, "/v1/completions", body)


def error_message(r):
    return json.loads(r.text)["error"]["message"]


def test_completions_with_a_trie_file(server, tries):
    for name in (tries["colors"], "colors.tmtrie", "colors"):  # a path, or a name in the allowed directory
        r = post(server, "/v1/completions", {
            "model": "tiny", "prompt": "My favourite color is", "max_tokens": 16, "temperature": 1.0, "n": 4,
            "seed": 11, "vllm_xargs": {"treemask_trie": name}})
        assert r.status_code == 200, r.text
        choices = r.json()["choices"]
        assert len(choices) == 4
        for c in choices:
            assert c["finish_reason"] == "stop", c
            assert c["text"].startswith(" ") and c["text"][1:] in COLORS, c


def test_chat_completions_with_a_choice_list(server):
    r = post(server, "/v1/chat/completions", {
        "model": "tiny", "messages": [{"role": "user", "content": "Name an animal."}], "max_tokens": 16,
        "temperature": 0, "vllm_xargs": {"treemask_choices": ANIMALS}})
    assert r.status_code == 200, r.text
    c = r.json()["choices"][0]
    assert c["finish_reason"] == "stop", c
    assert c["message"]["content"] in ANIMALS, c


def test_chat_completions_with_any_tokenization(server):
    r = post(server, "/v1/chat/completions", {
        "model": "tiny", "messages": [{"role": "user", "content": "Name an animal."}], "max_tokens": 24,
        "temperature": 1.5, "seed": 3, "n": 4,
        "vllm_xargs": {"treemask_choices": ANIMALS, "treemask_tokenization": "any"}})
    assert r.status_code == 200, r.text
    for c in r.json()["choices"]:
        assert c["finish_reason"] == "stop", c
        assert c["message"]["content"] in ANIMALS, c
    bad = post(server, "/v1/chat/completions", {
        "model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 8,
        "vllm_xargs": {"treemask_choices": ANIMALS, "treemask_tokenization": "bytes"}})
    assert bad.status_code == 400 and "treemask_tokenization: want one of" in error_message(bad), bad.text


def test_unconstrained_request_is_untouched(server):
    body = {"model": "tiny", "prompt": "Hello", "max_tokens": 8, "temperature": 0}
    r = post(server, "/v1/completions", body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("xargs, message", [
    ({"treemask_trie": "/nonexistent/catalog.tmtrie"}, REFUSED),
    ({"treemask_tire": "x.tmtrie"}, "unknown key 'treemask_tire'"),
    ({"treemask_choices": ["a"], "treemask_failure_policy": "maybe"}, "treemask_failure_policy"),
])
def test_bad_request_is_http_400_with_our_message(server, xargs, message):
    for route, extra in (("/v1/completions", {"prompt": "x"}),
                         ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})):
        r = post(server, route, dict(model="tiny", max_tokens=4, vllm_xargs=xargs, **extra))
        assert r.status_code == 400, (route, r.status_code, r.text)
        assert "treemask: " in r.text and message in error_message(r), r.text


# ---- issue 21 item 1: request-supplied paths ---------------------------------------


def test_names_outside_the_allowed_directory_get_one_answer(server, tries):
    names = [tries["outside"], "../" + os.path.basename(tries["outside"]), "/etc/passwd.json",
             "/proc/self/cwd/README.json", "/proc/self/environ.json", "link.tmtrie", "missing.tmtrie",
             str(tries["dir"] / ".." / os.path.basename(tries["outside"])), "/root/.json", "/etc/shadow.tsv",
             "/nonexistent/dir/x.jsonl"]
    answers = set()
    for name in names:
        xargs = {"treemask_trie": name}
        if name.endswith(".tsv"):
            xargs["treemask_start_token_id"] = 1
        r = complete(server, xargs)
        assert r.status_code == 400, (name, r.text)
        answers.add(error_message(r))
    assert len(answers) == 1 and REFUSED in answers.pop()


def test_no_reply_holds_a_byte_of_a_file(server):
    for xargs in ({"treemask_trie": "leak.json"}, {"treemask_trie": "leak.tsv", "treemask_start_token_id": 225}):
        r = complete(server, xargs)
        assert r.status_code == 400, r.text
        assert "SECRET" not in r.text and len(r.text) < 1000, r.text
        assert "does not load" in r.text


# ---- items 2 and 3: the event loop never blocks, bounded work ---------------------------


class HealthWatch:
    """Polls /health every 50 ms on its own thread (10 s timeout each);
    records when each answer came. A blocked event loop answers nothing
    until it is free again, however busy the machine is otherwise."""

    def __init__(self, server):
        self.server, self.answers, self.failures = server, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                if requests.get(self.server.base + "/health", timeout=10).status_code == 200:
                    self.answers.append(time.monotonic())
                else:
                    self.failures.append("status")
            except requests.RequestException as e:
                self.failures.append(repr(e))
            self._stop.wait(0.05)

    def answered_between(self, start, end):
        return sum(1 for t in self.answers if start < t < end)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(15)


def test_a_fifo_does_not_hang_the_server(server):
    with HealthWatch(server) as watch:
        t0 = time.monotonic()
        r = complete(server, {"treemask_trie": "fifo.json"}, timeout=30)
        took = time.monotonic() - t0
        time.sleep(0.5)
    assert r.status_code == 400 and REFUSED in error_message(r), r.text
    assert took < 10 and not watch.failures and watch.answers, (took, watch.failures)


def test_an_oversized_file_is_refused_before_it_is_read(server):
    t0 = time.monotonic()
    r = complete(server, {"treemask_trie": "sparse.json"})
    assert r.status_code == 400, r.text
    assert "larger than this server's limit of %d bytes" % MAX_FILE_BYTES in error_message(r), r.text
    assert time.monotonic() - t0 < 5


def test_choice_lists_over_the_limits_are_refused(server):
    r = complete(server, {"treemask_choices": ["x%d" % i for i in range(MAX_CHOICES + 1)]})
    assert r.status_code == 400 and "more than this server's limit of %d" % MAX_CHOICES in error_message(r), r.text
    r = complete(server, {"treemask_choices": ["y" * 300_000] * 4})
    assert r.status_code == 400 and "UTF-8 bytes" in error_message(r), r.text


def test_a_large_choice_list_compiles_off_the_event_loop(server):
    """20,000 new strings take seconds to tokenize: /health keeps answering."""
    words = ["item %d of the catalogue, colour %d" % (i, i * 7919 % 1000) for i in range(20000)]
    with HealthWatch(server) as watch:
        t0 = time.monotonic()
        r = complete(server, {"treemask_choices": words, "treemask_prefix": " "}, max_tokens=24, temperature=0)
        t1 = time.monotonic()
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"][1:] in set(words)
    assert not watch.failures, watch.failures
    # Compiled on the event loop, no /health answer could come while it ran.
    assert t1 - t0 < 1 or watch.answered_between(t0 + 0.2, t1 - 0.2) >= 2, (t1 - t0, len(watch.answers))
    # and the add_request hook did the loading (validate_params says when it has to)
    assert "on the API server's event loop" not in server.log.read_text(errors="replace")


# ---- item 6: clear errors ------------------------------------------------------------------


def test_lone_surrogates_name_the_key(server):
    # json.dumps writes "\ud800" as an escape, which the server decodes to a lone surrogate
    r = complete(server, {"treemask_choices": ["fine", "\ud800"]})
    assert r.status_code == 400, r.text
    assert "treemask: treemask_choices[1] is not valid Unicode text" in error_message(r), r.text
    r = complete(server, {"treemask_choices": ["fine"], "treemask_prefix": "\udfff"})
    assert r.status_code == 400 and "treemask_prefix is not valid Unicode text" in error_message(r), r.text


def test_max_tokens_too_small_for_any_label_is_refused(server, tiny_model):
    _, tokenizer, _ = tiny_model
    n = len(tokenizer.encode("hello world foo", add_special_tokens=False))
    assert n >= 2
    r = complete(server, {"treemask_choices": ["hello world foo"]}, max_tokens=1)
    assert r.status_code == 400, r.text
    assert "max_tokens 1 cannot hold the trie's shortest sequence (%d tokens)" % n in error_message(r), r.text
    r = complete(server, {"treemask_choices": ["hello world foo"]}, max_tokens=n + 1, temperature=0)
    assert r.status_code == 200, r.text
    c = r.json()["choices"][0]
    assert c["finish_reason"] == "stop" and c["text"] == "hello world foo", c


# ---- item 7: beam search ------------------------------------------------------------------


def test_beam_search_with_a_trie_is_refused(server):
    for route, extra in (("/v1/completions", {"prompt": "x"}),
                         ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})):
        r = post(server, route, dict(model="tiny", max_tokens=8, n=2, use_beam_search=True,
                                     vllm_xargs={"treemask_choices": ANIMALS}, **extra))
        assert r.status_code == 400, (route, r.text)
        assert "use_beam_search cannot carry a trie" in error_message(r), r.text
    # beam search without treemask keys still works
    r = post(server, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 4, "n": 2,
                                         "use_beam_search": True})
    assert r.status_code == 200, r.text


# ---- issue 29: one boundary where a request meets a trie and a model ---------------------


@pytest.fixture(scope="module")
def boundary_tries(tiny_model, tries):
    """A small-vocabulary trie, and string sets over the model's vocabulary
    and over another one of the same width (the model's token bytes shifted
    by one id)."""
    _, tokenizer, info = tiny_model
    d = tries["dir"]
    treemask.Trie.from_paths([[11, 12], [13]], 1000, [999]).save(d / "small.tmtrie")
    model_vocab = treemask.Vocab.from_tokenizer(tokenizer, VOCAB)
    treemask.Trie.from_strings(COLORS, model_vocab, [info["eos"]], prefix=" ").save(d / "strings.tmtrie")
    n = model_vocab.n_tokens
    pieces = [model_vocab.token_bytes((i + 1) % n) for i in range(n)]
    other = treemask.Vocab.from_token_bytes(pieces, VOCAB)
    assert other.vocab_size == model_vocab.vocab_size and other.fingerprint != model_vocab.fingerprint
    treemask.Trie.from_strings(COLORS, other, [info["eos"]], prefix=" ").save(d / "foreign.tmtrie")
    narrow = treemask.Vocab.from_tokenizer(tokenizer)  # its own size, narrower than the model's logits
    treemask.Trie.from_strings(COLORS, narrow, [info["eos"]], prefix=" ").save(d / "narrow.tmtrie")
    return info


def healthy(server):
    return requests.get(server.base + "/health", timeout=10).status_code == 200


@pytest.mark.parametrize("token", [VOCAB, VOCAB + 1, 2**31 - 2])
def test_a_stop_token_past_the_vocabulary_is_a_400_and_the_server_lives(server, tries, token):
    """The review's crash: this request passed the front end, and the
    worker's fallback raised OutOfRangeError: the engine died, /health went
    503 and the API server exited."""
    r = complete(server, {"treemask_trie": "colors", "treemask_stop_tokens": [token]})
    assert r.status_code == 400, r.text
    assert error_message(r) == ("treemask: treemask_stop_tokens: token %d is outside the trie's vocabulary (its"
                                " vocab_size is %d): a stop token must be one of the trie's token ids"
                                % (token, VOCAB)), r.text
    r = complete(server, {"treemask_choices": COLORS, "treemask_stop_tokens": [token]})
    assert r.status_code == 400 and "treemask_stop_tokens: token %d is outside" % token in error_message(r), r.text
    assert healthy(server)
    r = complete(server, {"treemask_trie": "colors"}, temperature=0)
    assert r.status_code == 200 and r.json()["choices"][0]["text"][1:] in COLORS, r.text


def test_stop_overrides_that_cannot_work_are_a_400(server, tiny_model, boundary_tries):
    """Before: HTTP 200 with empty text and finish_reason "stop" (the worker
    failed the row closed), and only the server log said why."""
    _, tokenizer, info = tiny_model
    inside = tokenizer.encode(" red", add_special_tokens=False)[0]  # a token of the colors' paths
    r = complete(server, {"treemask_trie": "colors", "treemask_stop_tokens": [inside]})
    assert r.status_code == 400, r.text
    assert "treemask_stop_tokens: token %d is used inside the trie's sequences" % inside in error_message(r)
    r = complete(server, {"treemask_trie": "small", "treemask_stop_tokens": [1000]}, max_tokens=4)
    assert r.status_code == 400, r.text
    assert "token 1000 is outside the trie's vocabulary (its vocab_size is 1000)" in error_message(r)
    # valid overrides: served, and the output ends on one of them
    r = complete(server, {"treemask_trie": "small", "treemask_stop_tokens": [999, info["eos"] % 1000]},
                 max_tokens=4, temperature=0)
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "stop", r.text
    r = complete(server, {"treemask_trie": "colors", "treemask_stop_tokens": [info["pad"]]}, temperature=0)
    assert r.status_code == 200, r.text
    c = r.json()["choices"][0]
    assert c["finish_reason"] == "stop" and c["text"][1:] in COLORS, c


def test_a_string_set_over_another_vocabulary_is_a_400(server, boundary_tries):
    """The review's wrong answer: a string set compiled over a vocabulary of
    the same width but other token bytes was served (text like '");\\r\\ndm')."""
    for name, size in (("foreign", VOCAB), ("narrow", None)):
        r = complete(server, {"treemask_trie": name}, max_tokens=24)
        assert r.status_code == 400, (name, r.text)
        message = error_message(r)
        assert "treemask_trie '%s.tmtrie' is a string set over another vocabulary (fingerprint " % name in message
        assert "than this model's (fingerprint " in message and "vocab_size %d)" % VOCAB in message, message
        if size is not None:
            assert "vocab_size %d) than" % size in message
    r = complete(server, {"treemask_trie": "strings"}, max_tokens=24, temperature=1.0, n=4, seed=5)
    assert r.status_code == 200, r.text
    for c in r.json()["choices"]:
        assert c["finish_reason"] == "stop" and c["text"][1:] in COLORS, c
    assert healthy(server)


# ---- issue 29 item 2: the worker never dies for one request --------------------------------

# tests/vllm/faults/sitecustomize.py makes a request whose choices hold one of
# these raise in the server's worker: when its row is added to the batch, or
# when its row's bitmask is filled (the batch fill, then the row's own).
FAULT_ADD = "treemask-test-fault-at-add"
FAULT_STEP = "treemask-test-fault-at-step"


def test_one_failing_request_fails_alone_and_the_engine_lives(server):
    """Poisoned requests sent in one batch with valid ones: each fails
    alone and closed (only its stop token: empty text, finish_reason
    "stop"), logged with its request id; the others of the batch answer
    valid choices, /health stays 200 throughout, the server keeps serving.
    (Before: any exception there killed the engine core, and the server.)"""
    jobs = [(COLORS, False), (ANIMALS, False), (COLORS + [FAULT_ADD], True), (ANIMALS, False),
            (COLORS + [FAULT_STEP], True), (COLORS, False), (ANIMALS, False), (COLORS + [FAULT_ADD], True)]
    bodies = [{"model": "tiny", "prompt": "Pick one:", "max_tokens": 16, "temperature": 1.0, "seed": i,
               "vllm_xargs": {"treemask_choices": choices, "treemask_prefix": " "}}
              for i, (choices, _) in enumerate(jobs)]
    with HealthWatch(server) as watch:
        answers = send_at_once(server, bodies, timeout=180)
        after = complete(server, {"treemask_choices": ANIMALS, "treemask_prefix": " "}, temperature=0)
        time.sleep(0.5)
    log = server.log.read_text(errors="replace")
    assert "[treemask test faults] installed" in log  # the hook was live in the server's processes
    for (choices, poisoned), r in zip(jobs, answers):
        assert r.status_code == 200, r.text
        c = r.json()["choices"][0]
        assert c["finish_reason"] == "stop", c
        if poisoned:
            assert c["text"] == "", c  # failed closed: only the stop token was offered
        else:
            assert c["text"][1:] in choices, c
    assert after.status_code == 200 and after.json()["choices"][0]["text"][1:] in ANIMALS, after.text
    assert watch.answers and not watch.failures, watch.failures
    for injected in ("injected fault at add", "injected fault in a row's fill"):
        lines = [ln for ln in log.splitlines() if injected in ln]
        assert lines, (injected, log[-3000:])
        # the failed request, named by vLLM's request id
        assert re.search(r"treemask: request cmpl-\S+ \(batch row \d+\) fails closed", lines[0]), lines[0]
