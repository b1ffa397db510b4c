"""Fixtures of the vLLM tests: the tiny model (built once by make_model.py),
tries compiled with its tokenizer, the directory requests may name files
in, and OpenAI servers on 127.0.0.1 with a bounded life.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import contextlib
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]

COLORS = ["red", "dark olive green", "light sea green", "midnight blue", "blue", "lavender blush",
          "medium spring green", "papaya whip"]
ANIMALS = ["cat", "dog", "giant panda", "snow leopard", "emperor penguin", "blue whale"]
FRUITS = ["apple", "banana", "dragon fruit", "passion fruit"]

VOCAB = 151936
# A start-up takes ~35 s on a quiet 2-core machine, and over 7 minutes
# with the machine's load average at 14 (four engineers' builds); a server
# with two data-parallel engines starts both.
STARTUP_TIMEOUT_S = 900


def model_dir() -> pathlib.Path:
    """The tiny model: $TREEMASK_VLLM_MODEL (run.sh builds it), else built here."""
    path = pathlib.Path(os.environ.get("TREEMASK_VLLM_MODEL") or ROOT / "build-vllm" / "tiny-qwen2")
    if not (path / "config.json").is_file():
        subprocess.run([sys.executable, str(HERE / "make_model.py"), str(path)], check=True)
    return path


@pytest.fixture(scope="session", autouse=True)
def general_plugin():
    """The installed treemask declares its vLLM general plugin
    (``treemask.vllm.frontend:register``, entry point group
    ``vllm.general_plugins``), which installs the API server's hooks and
    warms the model's vocabulary before the engine starts: every server the
    tests start loads it, as a server of the installed wheel does."""
    import importlib.metadata

    target = "treemask.vllm.frontend:register"
    found = [ep.value for ep in importlib.metadata.entry_points(group="vllm.general_plugins")]
    assert target in found, "the installed treemask does not declare %s (vllm.general_plugins: %s)" % (target, found)
    return target


@pytest.fixture(scope="session", autouse=True)
def allowed_trie_dir(tmp_path_factory):
    """Requests may name files only inside the operator's directories: the
    session's temporary directory holds every trie the tests write, and
    the engines (and servers) started here inherit the setting."""
    base = tmp_path_factory.getbasetemp()
    os.environ["TREEMASK_VLLM_TRIE_DIRS"] = str(base)
    os.environ.setdefault("TREEMASK_VLLM_CACHE_DIR", str(base / "choice-cache"))
    return base


@pytest.fixture(scope="session")
def tiny_model():
    path = model_dir()
    info = json.loads((path / "treemask-tiny.json").read_text())
    from transformers import AutoTokenizer

    return path, AutoTokenizer.from_pretrained(str(path)), info


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """An OpenAI API server of the tiny model (its process group, its log)."""

    def __init__(self, base, proc, log):
        self.base, self.proc, self.log = base, proc, log

    def pids(self):
        """The server's processes: the API server, its engine core and workers."""
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.getpgid(int(entry)) == self.proc.pid:
                        pids.append(int(entry))
                except OSError:
                    pass
        return pids

    def rss_bytes(self, pids=None):
        """Resident memory of the whole process group (or of pids) now."""
        total = 0
        for pid in self.pids() if pids is None else pids:
            with contextlib.suppress(OSError):
                with open("/proc/%d/status" % pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1]) * 1024
        return total


@contextlib.contextmanager
def _launched(path, log_dir, env=None, extra_args=()):
    """Starts ``vllm serve`` on 127.0.0.1 and yields a Server at once (not
    yet answering); kills the whole process group on the way out."""
    port = free_port()
    log = pathlib.Path(log_dir) / "server.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(path),
           "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
           "--gpu-memory-utilization", "0.15", "--max-model-len", "256", "--max-num-seqs", "16",
           "--dtype", "float32", "--enforce-eager", "--seed", "0", *extra_args]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(os.environ, **(env or {})))
    try:
        yield Server("http://127.0.0.1:%d" % port, proc, log)
    finally:
        # The whole process group: the API server, its engine core and workers.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _wait_ready(server, deadline):
    """Returns once the server's /health answers 200; fails the test with the
    end of its log when it exits or the deadline passes."""
    import requests

    while True:
        if server.proc.poll() is not None:
            pytest.fail("the server exited with %s:\n%s" % (server.proc.returncode, server.log.read_text()[-4000:]))
        try:
            if requests.get(server.base + "/health", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            pytest.fail("the server did not start in %d s:\n%s" % (STARTUP_TIMEOUT_S, server.log.read_text()[-4000:]))
        time.sleep(1)


@contextlib.contextmanager
def vllm_servers(*specs):
    """Starts one server per spec, ``(path, log_dir, env, extra_args)``, all
    at once (a start-up is mostly one process importing after another, so
    they overlap well), yields the Servers once every /health answers, and
    kills every process group on the way out."""
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(_launched(*spec)) for spec in specs]
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        for server in servers:
            _wait_ready(server, deadline)
        yield servers


@contextlib.contextmanager
def vllm_server(path, log_dir, env=None, extra_args=()):
    """Starts ``vllm serve`` on 127.0.0.1, yields a Server once /health
    answers, and kills the whole process group on the way out."""
    with vllm_servers((path, log_dir, env, extra_args)) as (server,):
        yield server
