"""Issue 24, the parts of the vLLM beam search that need no vLLM: the beam
keys (``treemask_beam_tokens``, ``treemask_trie_id``) and the "exactly one
source" rule, the walk a beam request is checked by at submission and in
the engine, and the private directory of registered tries (what it
refuses, what it deletes: only its own files). The same through a real
engine and server: tests/vllm/test_beam_search.py.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import stat
import subprocess
import sys
import tempfile
import time

import pytest

import treemask
from treemask.vllm import beam, keys as tk, registered
from treemask.vllm.model import ModelInfo
from treemask.vllm.settings import Settings
from treemask.vllm.trie_registry import TrieRegistry

V = 300
EOS = 290
PATHS = [[1, 2, 3], [1, 2, 4], [1, 5], [6]]
TRIE_ID = "0123456789abcdef" * 2


def small_trie():
    return treemask.Trie.from_paths(PATHS, V, [EOS])


def model():
    return ModelInfo(V, [EOS], tokenizer_id="none")


@pytest.fixture
def tmpdir_of_process(tmp_path, monkeypatch):
    """The registered tries' directory under tmp_path (for this process and
    the children it starts)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    yield tmp_path
    for trie_id in registered.registered_ids():
        registered.unregister_trie(trie_id)


# ---- the keys ---------------------------------------------------------------------


def test_beam_keys_parse_into_the_spec():
    spec = tk.parse_extra_args({"treemask_trie_id": TRIE_ID, "treemask_beam_tokens": [1, 2],
                                "treemask_failure_policy": "reject"})
    assert spec.source == tk.RegisteredSource(TRIE_ID) and spec.beam_tokens == (1, 2)
    assert spec.failure_policy == "reject"
    spec = tk.parse_extra_args({"treemask_choices": ["a"], "treemask_beam_tokens": []})
    assert isinstance(spec.source, tk.ChoiceSource) and spec.beam_tokens == ()
    assert tk.parse_extra_args({"treemask_choices": ["a"]}).beam_tokens is None


@pytest.mark.parametrize("extra, message", [
    ({"treemask_trie_id": TRIE_ID, "treemask_choices": ["a"]},
     "exactly one of treemask_trie, treemask_choices and treemask_trie_id"),
    ({"treemask_trie_id": TRIE_ID, "treemask_trie": "catalog"}, "exactly one of"),
    ({"treemask_beam_tokens": [1]}, "exactly one of"),
    ({"treemask_trie_id": "../../etc/passwd"}, "treemask_trie_id: want the 32 hex digits"),
    ({"treemask_trie_id": TRIE_ID.upper()}, "treemask_trie_id: want the 32 hex digits"),
    ({"treemask_trie_id": 17}, "treemask_trie_id: want the 32 hex digits"),
    ({"treemask_trie_id": TRIE_ID, "treemask_stop_tokens": [5]},
     "treemask_stop_tokens applies to treemask_trie and treemask_choices only"),
    ({"treemask_trie_id": TRIE_ID, "treemask_prefix": " "}, "treemask_prefix applies to treemask_choices only"),
    ({"treemask_choices": ["a"], "treemask_beam_tokens": "1,2"}, "treemask_beam_tokens: want a list of token ids"),
    ({"treemask_choices": ["a"], "treemask_beam_tokens": [1, -1]}, r"treemask_beam_tokens\[1\]: want a token id"),
    ({"treemask_choices": ["a"], "treemask_beam_tokens": [True]}, r"treemask_beam_tokens\[0\]: want a token id"),
    ({"treemask_choices": ["a"], "treemask_beam_tokens": [2**31]}, r"treemask_beam_tokens\[0\]"),
    ({"treemask_choices": ["a"], "treemask_beam_tokens": [1] * 70000}, "has 70000 tokens, more than 65536"),
    ({"treemask_trie_id": TRIE_ID, "treemask_state": 3}, "unknown key 'treemask_state'"),
])
def test_bad_beam_keys_name_the_key(extra, message):
    with pytest.raises(tk.RequestError, match=message):
        tk.parse_extra_args(extra)


# ---- the walk -------------------------------------------------------------------------


def test_a_beam_request_is_an_unfinished_walk_of_its_trie_and_one_token():
    trie = small_trie()
    for tokens in ([], [1], [1, 2], [6]):
        beam.check_beam_request(trie, tokens)
    for tokens, message in [
        ([7], r"treemask_beam_tokens\[0\]: token 7 does not continue a sequence of the request's trie"),
        ([1, 2, 9], r"treemask_beam_tokens\[2\]: token 9 does not continue"),
        ([6, EOS], "ends with a stop token"),
        ([1, 2, 3, EOS, 1], r"has 5 tokens, more than the trie's longest sequence \(3\) and a stop token"),
    ]:
        with pytest.raises(tk.RequestError, match=message):
            beam.check_beam_request(trie, tokens)
    with pytest.raises(tk.RequestError, match=r"treemask_beam_tokens\[2\]: the beam ended with a stop token at \[1\]"):
        beam.check_beam_request(treemask.Trie.from_paths([[6], [6, 7, 8, 9]], V, [EOS]), [6, EOS, 1])
    # the request's own stop tokens end a beam
    with pytest.raises(tk.RequestError, match="ends with a stop token"):
        beam.check_beam_request(trie, [6, 299], stop_tokens=[299])
    # one step: one token, never a budget the trie's paths could be cut by
    for max_tokens in (2, 16, None, 0):
        with pytest.raises(tk.RequestError, match="max_tokens must be 1, got %s" % max_tokens):
            beam.check_beam_request(trie, [1], max_tokens=max_tokens)


def test_the_engine_walks_the_beam_against_the_prompt():
    trie = small_trie()
    m = treemask.Matcher(trie)
    beam.walk_beam_tokens(m, [1, 2], [40, 41, 1, 2])
    assert sorted(m.next_tokens()) == [3, 4]
    beam.walk_beam_tokens(treemask.Matcher(trie), [], None)  # the first step: nothing to check
    for tokens, prompt in [([1, 2], [40, 1, 7]), ([1, 2], [2]), ([1, 2], None), ([7], [7]), ([6, EOS], [6, EOS])]:
        with pytest.raises(ValueError, match="treemask_beam_tokens"):
            beam.walk_beam_tokens(treemask.Matcher(trie), tokens, prompt)


def test_is_beam_request():
    assert beam.is_beam_request({"treemask_choices": ["a"], "treemask_beam_tokens": []})
    assert not beam.is_beam_request({"treemask_choices": ["a"]})
    assert not beam.is_beam_request(None)


# ---- registered tries: the private directory -------------------------------------------


def test_a_registered_trie_is_found_by_its_id_until_unregistered(tmpdir_of_process):
    trie = small_trie()
    trie_id = registered.register_trie(trie)
    assert tk.parse_trie_id(trie_id) == trie_id
    d = tmpdir_of_process / ("treemask-vllm-tries-%d" % os.getuid())
    assert registered.directory() == str(d)
    st = os.lstat(d)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077 == 0
    assert os.listdir(d) == [trie_id + ".tmtrie"]
    spec = tk.parse_extra_args({"treemask_trie_id": trie_id, "treemask_beam_tokens": []})
    reg = TrieRegistry(Settings(cache_dir=""))
    assert reg.trie_for(spec, model()) is trie  # this process's own object
    registered.unregister_trie(trie_id)
    assert os.listdir(d) == [] and registered.registered_ids() == ()
    with pytest.raises(tk.RequestError, match="no trie is registered under this id"):
        reg.trie_for(spec, model())


def test_another_process_registration_is_loaded_once_through_the_registry(tmpdir_of_process):
    """A child registers (as the driver does), this process (the engine)
    loads it into its byte-bounded registry; the child ends its search and
    the id is refused."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, treemask, treemask.vllm as tv\n"
         "t = treemask.Trie.from_paths(%r, %d, [%d])\n"
         "i = tv.register_trie(t); print(i, flush=True); sys.stdin.readline(); tv.unregister_trie(i)"
         % (PATHS, V, EOS)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        trie_id = child.stdout.readline().strip()
        spec = tk.parse_extra_args({"treemask_trie_id": trie_id, "treemask_beam_tokens": [1]})
        reg = TrieRegistry(Settings(cache_dir=""))
        got = reg.trie_for(spec, model())
        assert got.stats().n_terminals == len(PATHS) and reg.bytes == got.stats().bytes
        assert reg.trie_for(spec, model()) is got  # once per (id, file identity)
        reg.check_source(spec)
        # a file larger than the operator's limit is refused like any trie file
        with pytest.raises(tk.RequestError, match="larger than this server's limit of 100 bytes"):
            TrieRegistry(Settings(cache_dir="", max_file_bytes=100)).trie_for(spec, model())
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(30) == 0
        with pytest.raises(tk.RequestError, match="no trie is registered under this id"):
            TrieRegistry(Settings(cache_dir="")).trie_for(spec, model())
        with pytest.raises(tk.RequestError, match="no trie is registered under this id"):
            reg.check_source(spec)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_what_is_not_a_registered_file_gets_one_answer(tmpdir_of_process):
    registered.unregister_trie(registered.register_trie(small_trie()))  # creates the directory
    d = tmpdir_of_process / ("treemask-vllm-tries-%d" % os.getuid())
    outside = tmpdir_of_process / "outside.tmtrie"
    small_trie().save(outside)
    names = {"a" * 32: lambda p: os.symlink(outside, p), "b" * 32: lambda p: os.mkfifo(p),
             "c" * 32: lambda p: os.mkdir(p), "d" * 32: lambda p: p.write_bytes(b"not a trie at all"),
             "e" * 32: lambda p: None}
    reg = TrieRegistry(Settings(cache_dir=""))
    for trie_id, make in names.items():
        make(d / (trie_id + ".tmtrie"))
        with pytest.raises(tk.RequestError) as e:  # the FIFO too: opened O_NONBLOCK, so this returns
            reg.trie_for(tk.parse_extra_args({"treemask_trie_id": trie_id}), model())
        assert str(e.value) == "treemask: " + registered.UNKNOWN


def test_a_directory_that_is_not_private_is_refused(tmpdir_of_process):
    d = tmpdir_of_process / ("treemask-vllm-tries-%d" % os.getuid())
    elsewhere = tmpdir_of_process / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, d)
    with pytest.raises(treemask.InvalidStateError, match="is not a directory of this user"):
        registered.register_trie(small_trie())
    assert os.listdir(elsewhere) == []
    with pytest.raises(tk.RequestError, match="no trie is registered"):
        registered.open_registered(TRIE_ID)
    os.unlink(d)
    d.mkdir(mode=0o700)
    os.chmod(d, 0o755)  # others may read: a catalogue is the operator's data
    with pytest.raises(treemask.InvalidStateError, match="not a private directory"):
        registered.register_trie(small_trie())
    os.chmod(d, 0o700)
    registered.unregister_trie(registered.register_trie(small_trie()))


def test_only_own_files_are_deleted(tmpdir_of_process):
    """unregister_trie deletes only what this process registered; the sweep
    only what a dead process left (own name pattern, unlocked, old)."""
    first = registered.register_trie(small_trie())
    d = tmpdir_of_process / ("treemask-vllm-tries-%d" % os.getuid())
    old = time.time() - 7200  # older than both thresholds (a minute, an hour)
    keep = {"catalog.tmtrie": b"the operator's", ("f" * 64) + ".tmtrie": b"a choice cache file",
            ("1" * 32) + ".json": b"{}", ("2" * 31) + ".tmtrie": b"not ours"}
    for name, data in keep.items():
        (d / name).write_bytes(data)
        os.utime(d / name, (old, old))
    os.mkdir(d / (("3" * 32) + ".tmtrie"))  # a directory of our pattern: not a file we wrote
    os.utime(d / (("3" * 32) + ".tmtrie"), (old, old))
    # A registration by a process that died (its file unlocked), a fresh one
    # being saved by a live process, and a crashed save's temporary.
    dead, fresh = "4" * 32, "5" * 32
    small_trie().save(d / (dead + ".tmtrie"))
    os.utime(d / (dead + ".tmtrie"), (old, old))
    small_trie().save(d / (fresh + ".tmtrie"))
    (d / (dead + ".tmtrie.tmp.123.0")).write_bytes(b"partial")
    os.utime(d / (dead + ".tmtrie.tmp.123.0"), (old, old))
    # A live registration of another process: held locked, even when old.
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, treemask, treemask.vllm as tv\n"
         "t = treemask.Trie.from_paths(%r, %d, [%d])\n"
         "print(tv.register_trie(t), flush=True); sys.stdin.readline()" % (PATHS, V, EOS)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        live = child.stdout.readline().strip()
        os.utime(d / (live + ".tmtrie"), (old, old))
        registered.unregister_trie(live)  # not this process's: left alone
        assert (d / (live + ".tmtrie")).exists()
        second = registered.register_trie(small_trie())  # sweeps
        left = set(os.listdir(d))
        assert left == set(keep) | {("3" * 32) + ".tmtrie", fresh + ".tmtrie", live + ".tmtrie",
                                    first + ".tmtrie", second + ".tmtrie"}, left
        child.kill()  # dies without unregistering: its file stays, unlocked
        child.wait()
        assert (d / (live + ".tmtrie")).exists()
        registered.unregister_trie(registered.register_trie(small_trie()))
        assert not (d / (live + ".tmtrie")).exists()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    registered.unregister_trie(first)
    registered.unregister_trie(second)
    assert set(os.listdir(d)) == set(keep) | {("3" * 32) + ".tmtrie", fresh + ".tmtrie"}
    assert all((d / name).read_bytes() == data for name, data in keep.items())


def test_the_beam_modules_import_without_vllm_or_torch():
    code = ("import sys, treemask.vllm as tv, treemask.vllm.client, treemask.vllm.beam\n"
            "assert callable(tv.beam_search) and callable(tv.register_trie)\n"
            "print(sorted(m for m in ('vllm', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
