"""treemask inside vLLM's OpenAI-compatible server (started on 127.0.0.1
with a bounded life, killed in a finally): completions and chat
completions constrained through ``vllm_xargs``, bad requests answered with
HTTP 400 and treemask's message (never a 500, never an unconstrained
answer), and issue 21's hostile client: files outside the allowed
directories, FIFOs, oversized files and lists, bytes of files in replies,
lone surrogates, a max_tokens too small for any label, beam search.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os
import threading
import time

import pytest

import treemask
from conftest import ANIMALS, COLORS, VOCAB, vllm_server

requests = pytest.importorskip("requests")
pytest.importorskip("vllm")

SECRET = "sk-live-SECRET"
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


@pytest.fixture(scope="module")
def server(tiny_model, tries, tmp_path_factory):
    path, _, _ = tiny_model
    env = {"TREEMASK_VLLM_TRIE_DIRS": str(tries["dir"]), "TREEMASK_VLLM_MAX_FILE_BYTES": str(1 << 20),
           "TREEMASK_VLLM_MAX_CHOICES": "20000", "TREEMASK_VLLM_MAX_CHOICE_BYTES": str(1 << 20)}
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
    assert r.status_code == 400 and "larger than this server's limit of 1048576 bytes" in error_message(r), r.text
    assert time.monotonic() - t0 < 5


def test_choice_lists_over_the_limits_are_refused(server):
    r = complete(server, {"treemask_choices": ["x%d" % i for i in range(20001)]})
    assert r.status_code == 400 and "more than this server's limit of 20000" in error_message(r), r.text
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
