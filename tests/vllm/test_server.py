"""treemask inside vLLM's OpenAI-compatible server: started on 127.0.0.1
with a bounded life (killed in a finally), completions and chat
completions constrained through ``vllm_xargs``, bad requests answered with
HTTP 400 and treemask's message (never a 500, never an unconstrained
answer).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

import treemask
from conftest import ANIMALS, COLORS

requests = pytest.importorskip("requests")
pytest.importorskip("vllm")

STARTUP_TIMEOUT_S = 420
VOCAB = 151936


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tiny_model, tmp_path_factory):
    path, _, _ = tiny_model
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(path),
           "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
           "--gpu-memory-utilization", "0.15", "--max-model-len", "256", "--max-num-seqs", "16",
           "--dtype", "float32", "--enforce-eager", "--seed", "0"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = "http://127.0.0.1:%d" % port
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail("the server exited with %s:\n%s" % (proc.returncode, log.read_text()[-4000:]))
            try:
                if requests.get(base + "/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the server did not start in %d s:\n%s" % (STARTUP_TIMEOUT_S, log.read_text()[-4000:]))
            time.sleep(1)
        yield base
    finally:
        # The whole process group: the API server, its engine core and workers.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def colors_file(tiny_model, tmp_path_factory):
    _, tokenizer, info = tiny_model
    path = tmp_path_factory.mktemp("tries") / "colors.tmtrie"
    treemask.Trie.from_labels(COLORS, tokenizer, VOCAB, [info["eos"]], prefix=" ").save(path)
    return str(path)


def post(base, route, body):
    return requests.post(base + route, json=body, timeout=120)


def test_completions_with_a_trie_file(server, colors_file):
    r = post(server, "/v1/completions", {
        "model": "tiny", "prompt": "My favourite color is", "max_tokens": 16, "temperature": 1.0, "n": 4,
        "seed": 11, "vllm_xargs": {"treemask_trie": colors_file}})
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


def test_unconstrained_request_is_untouched(server):
    body = {"model": "tiny", "prompt": "Hello", "max_tokens": 8, "temperature": 0}
    r = post(server, "/v1/completions", body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("xargs, message", [
    ({"treemask_trie": "/nonexistent/catalog.tmtrie"}, "No such file"),
    ({"treemask_tire": "x.tmtrie"}, "unknown key 'treemask_tire'"),
    ({"treemask_choices": ["a"], "treemask_failure_policy": "maybe"}, "treemask_failure_policy"),
])
def test_bad_request_is_http_400_with_our_message(server, xargs, message):
    for route, extra in (("/v1/completions", {"prompt": "x"}),
                         ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})):
        r = post(server, route, dict(model="tiny", max_tokens=4, vllm_xargs=xargs, **extra))
        assert r.status_code == 400, (route, r.status_code, r.text)
        assert "treemask: " in r.text and message in json.loads(r.text)["error"]["message"], r.text
