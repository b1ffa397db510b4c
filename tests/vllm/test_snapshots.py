"""Issue 43 items 2 and 3 without a server: a served file is a private
snapshot (treemask.vllm.snapshots), so its file can change in place
under a trie that is being served; a torn copy is retried or refused,
never used; each version of a file is read once per way of reading it,
whatever the requests' keys; and the engine's worker maps the snapshot the
front end checked a request against instead of reading the file. The same
through a real ``vllm serve`` under load: test_served_files.py.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import subprocess
import sys
import textwrap
import time

import pytest
from vllm import SamplingParams

import treemask
from treemask.vllm import keys, processor, snapshots
from treemask.vllm.model import ModelInfo
from treemask.vllm.settings import Settings
from treemask.vllm.trie_registry import FILE_READ_ATTEMPTS, TrieRegistry

V = 300
EOS = 290
PATHS_A = [[1, 2, 3], [1, 4], [5, 6]]
PATHS_B = [[11, 12, 13], [11, 14], [15, 16]]  # the same shape: a file of the same size


def model():
    return ModelInfo(V, [EOS], None, tokenizer_id="none")


def spec(**extra):
    return keys.parse_extra_args(extra, snapshot=True)


def first_tokens(trie):
    return treemask.Matcher(trie).next_tokens()


@pytest.fixture
def allowed(tmp_path):
    d = tmp_path / "allowed"
    d.mkdir()
    treemask.Trie.from_paths(PATHS_A, V, [EOS]).save(d / "served.tmtrie")
    treemask.Trie.from_paths(PATHS_B, V, [EOS]).save(tmp_path / "other.tmtrie")
    assert os.path.getsize(d / "served.tmtrie") == os.path.getsize(tmp_path / "other.tmtrie")
    # RTP-LLM's text form: root 225 -> 7 or 8, then 9
    (d / "dict.tsv").write_bytes(b"225\t7\x028\n225_7\t9\n")
    return d


def registry_for(tmp_path, allowed_dir, cache="cache"):
    return TrieRegistry(Settings(trie_dirs=(str(allowed_dir),), cache_dir=str(tmp_path / cache) if cache else ""))


def rewrite_in_place(path, data):
    """What cp, scp or an editor's save does: the same inode, written over
    (after a pause, so that the file's times move on)."""
    time.sleep(0.02)
    with open(path, "r+b") as f:
        f.write(data)
        f.truncate(len(data))


def test_a_served_trie_never_faults_when_its_file_changes_in_place(tmp_path, allowed):
    """The mapped file truncated, then overwritten with other bytes of the
    same size, under a trie loaded from it: before, SIGBUS and SIGSEGV
    (run in a child process, so that a fault is this test's failure)."""
    script = textwrap.dedent("""
        import os, sys, time
        import treemask
        from treemask.vllm import keys
        from treemask.vllm.model import ModelInfo
        from treemask.vllm.settings import Settings
        from treemask.vllm.trie_registry import TrieRegistry
        allowed, other, cache = sys.argv[1:]
        path = os.path.join(allowed, "served.tmtrie")
        reg = TrieRegistry(Settings(trie_dirs=(allowed,), cache_dir=cache))
        spec = keys.parse_extra_args({"treemask_trie": "served"})
        m = ModelInfo(300, [290], None)
        served = reg.trie_for(spec, m)
        os.truncate(path, 0)
        print(treemask.Matcher(served).next_tokens(), flush=True)
        time.sleep(0.02)
        with open(path, "r+b") as f:
            f.write(bytes(b ^ 0x5A for b in open(other, "rb").read()))
        print(treemask.Matcher(served).next_tokens(), flush=True)
        time.sleep(0.02)
        with open(path, "r+b") as f:
            f.write(open(other, "rb").read())
        print(treemask.Matcher(reg.trie_for(spec, m)).next_tokens(), treemask.Matcher(served).next_tokens())
    """)
    done = subprocess.run([sys.executable, "-c", script, str(allowed), str(tmp_path / "other.tmtrie"),
                           str(tmp_path / "cache")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split("\n")[:3] == ["[1, 5]", "[1, 5]", "[11, 15] [1, 5]"], done.stdout


def test_a_new_version_is_picked_up_and_running_requests_keep_theirs(tmp_path, allowed):
    reg = registry_for(tmp_path, allowed)
    first = reg.trie_for(spec(treemask_trie="served"), model())
    rewrite_in_place(allowed / "served.tmtrie", (tmp_path / "other.tmtrie").read_bytes())
    second = reg.trie_for(spec(treemask_trie="served"), model())
    assert first_tokens(first) == [1, 5] and first_tokens(second) == [11, 15]
    assert reg.n_file_loads == 2 and reg.bytes == second.stats().bytes  # the old version left
    # cp of the first version's bytes again: a new version, read again
    rewrite_in_place(allowed / "served.tmtrie", first_bytes(first, tmp_path))
    assert first_tokens(reg.trie_for(spec(treemask_trie="served"), model())) == [1, 5]
    assert reg.n_file_loads == 3


def first_bytes(trie, tmp_path):
    trie.save(tmp_path / "saved.tmtrie")
    return (tmp_path / "saved.tmtrie").read_bytes()


class Tearing:
    """os.pread that changes the file after the first chunk of a copy."""

    def __init__(self, monkeypatch, change):
        self.real, self.change, self.calls = os.pread, change, 0
        monkeypatch.setattr(snapshots, "COPY_CHUNK", 64)
        monkeypatch.setattr(os, "pread", self)

    def __call__(self, fd, n, offset):
        chunk = self.real(fd, n, offset)
        if offset == 64:  # the copy's second chunk (the head check reads from 0)
            self.calls += 1
            if self.calls == 1:
                self.change()
        return chunk


def test_a_copy_torn_by_a_rewrite_is_read_again(tmp_path, allowed, monkeypatch):
    path = allowed / "served.tmtrie"
    Tearing(monkeypatch, lambda: rewrite_in_place(path, (tmp_path / "other.tmtrie").read_bytes()))
    reg = registry_for(tmp_path, allowed)
    trie = reg.trie_for(spec(treemask_trie="served"), model())
    assert first_tokens(trie) == [11, 15]  # the new version, whole
    assert reg.n_file_loads == 1


def test_a_copy_torn_by_a_truncation_is_refused_cleanly(tmp_path, allowed, monkeypatch):
    Tearing(monkeypatch, lambda: os.truncate(allowed / "served.tmtrie", 0))
    reg = registry_for(tmp_path, allowed)
    with pytest.raises(keys.RequestError, match=r"not a \.tmtrie file: it is empty"):
        reg.trie_for(spec(treemask_trie="served"), model())
    assert reg.n_file_loads == 0
    # nothing of the torn copy stays in the cache directory
    assert not [n for n in os.listdir(tmp_path / "cache") if ".tmp." in n]


def test_a_file_that_never_stops_changing_is_refused_after_retries(tmp_path, allowed, monkeypatch):
    seen = []

    def moving(st):
        seen.append(1)
        return (len(seen),)

    monkeypatch.setattr(snapshots, "identity_of", moving)
    reg = registry_for(tmp_path, allowed)
    with pytest.raises(keys.RequestError, match=r"treemask_trie 'served\.tmtrie' changed while it was being read, %d"
                       r" times: try again" % FILE_READ_ATTEMPTS):
        reg.trie_for(spec(treemask_trie="served"), model())
    assert len(seen) == FILE_READ_ATTEMPTS and reg.n_file_loads == 0


def test_a_checksum_failure_is_a_clear_error(tmp_path, allowed):
    path = allowed / "served.tmtrie"
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF  # a payload byte: only the checksum can tell
    path.write_bytes(bytes(data))
    reg = registry_for(tmp_path, allowed)
    with pytest.raises(keys.RequestError, match=r"does not load: it fails the \.tmtrie integrity checks"):
        reg.trie_for(spec(treemask_trie="served"), model())


def test_keys_that_change_the_reading_never_evict_each_other(tmp_path, allowed):
    """Issue 43 item 3: requests alternating treemask_end_token_id made the
    registry drop the other key's trie as "an older version": a load per
    request. Now each (version, reading) loads once; only a new version
    evicts."""
    reg = registry_for(tmp_path, allowed)
    tries = {}
    for i in range(12):
        end = (2, 3)[i % 2]
        tries.setdefault(end, set()).add(id(reg.trie_for(spec(treemask_trie="dict.tsv", treemask_start_token_id=225,
                                                              treemask_end_token_id=end), model())))
    assert reg.n_file_loads == 2 and all(len(ids) == 1 for ids in tries.values())
    rewrite_in_place(allowed / "dict.tsv", b"225\t7\n")
    new = reg.trie_for(spec(treemask_trie="dict.tsv", treemask_start_token_id=225, treemask_end_token_id=2), model())
    assert first_tokens(new) == [7] and reg.n_file_loads == 3
    assert reg.bytes == new.stats().bytes  # both entries of the old version left


def test_the_same_bytes_written_again_are_not_parsed_again(tmp_path, allowed, monkeypatch):
    reg = registry_for(tmp_path, allowed)
    s = spec(treemask_trie="dict.tsv", treemask_start_token_id=225)
    first = reg.trie_for(s, model())
    monkeypatch.setattr(treemask.Trie, "from_rtp_tsv", lambda *a, **k: pytest.fail("parsed again"))
    rewrite_in_place(allowed / "dict.tsv", (allowed / "dict.tsv").read_bytes())  # cp of the same file
    again = reg.trie_for(s, model())
    assert again is not first and first_tokens(again) == first_tokens(first) == [7, 8]
    assert reg.snapshot_of(again) == reg.snapshot_of(first) is not None


def test_the_worker_maps_the_snapshot_the_front_end_checked(tmp_path, allowed):
    front = registry_for(tmp_path, allowed)
    worker = registry_for(tmp_path, allowed)
    s = spec(treemask_trie="dict.tsv", treemask_start_token_id=225)
    checked = front.trie_for(s, model())
    digest = front.snapshot_of(checked)
    assert digest is not None and (tmp_path / "cache" / (digest + ".tmtrie")).is_file()
    os.truncate(allowed / "dict.tsv", 0)  # the operator's file changes after the check
    in_worker = keys.parse_extra_args({"treemask_trie": "dict.tsv", "treemask_start_token_id": 225,
                                       keys.KEY_SNAPSHOT: digest}, snapshot=True)
    mapped = worker.trie_for(in_worker, model())
    assert first_tokens(mapped) == [7, 8] and worker.n_file_loads == 0  # not read, not parsed
    # evicted before the worker got to it: the worker reads the file (now empty) itself
    (tmp_path / "cache" / (digest + ".tmtrie")).unlink()
    with pytest.raises(keys.RequestError, match="it is empty"):
        registry_for(tmp_path, allowed).trie_for(in_worker, model())
    # the key is the front end's: a client's is never read there
    assert spec(treemask_trie="dict.tsv", treemask_start_token_id=225).snapshot is None
    assert keys.parse_extra_args({"treemask_trie": "x", keys.KEY_SNAPSHOT: digest}).snapshot is None
    with pytest.raises(keys.RequestError, match="treemask_snapshot: want the 64 hex digits"):
        keys.parse_extra_args({"treemask_trie": "x", keys.KEY_SNAPSHOT: "../../etc/passwd"}, snapshot=True)


def test_without_a_cache_each_process_reads_a_private_copy(tmp_path, allowed):
    reg = registry_for(tmp_path, allowed, cache=None)
    trie = reg.trie_for(spec(treemask_trie="served"), model())
    assert reg.snapshot_of(trie) is None and first_tokens(trie) == [1, 5]
    os.truncate(allowed / "served.tmtrie", 0)
    assert first_tokens(trie) == [1, 5]


class Frontend:
    """Stands in for vLLM's InputProcessor (found by its name)."""

    def __init__(self):
        import types

        self.model_config = types.SimpleNamespace(
            get_vocab_size=lambda: V, try_get_generation_config=lambda: {"eos_token_id": [EOS]},
            hf_text_config=types.SimpleNamespace(eos_token_id=EOS), tokenizer="none", tokenizer_revision=None,
            skip_tokenizer_init=True, trust_remote_code=False)
        self.tokenizer = lambda text: list(text.encode("utf-8"))


class InputProcessor(Frontend):
    def validate(self, p):
        processor.TrieLogitsProcessor.validate_params(p)


def test_validation_stamps_the_snapshot_and_replaces_a_clients(tmp_path, allowed):
    processor.registry.configure(Settings(trie_dirs=(str(allowed),), cache_dir=str(tmp_path / "cache")))
    try:
        forged = "0" * 64
        p = SamplingParams(max_tokens=8, extra_args={"treemask_trie": "served", keys.KEY_SNAPSHOT: forged})
        InputProcessor().validate(p)
        stamped = p.extra_args[keys.KEY_SNAPSHOT]
        assert stamped != forged and (tmp_path / "cache" / (stamped + ".tmtrie")).is_file()
        loads = processor.registry.n_file_loads
        worker_spec = keys.parse_extra_args(p.extra_args, snapshot=True)
        assert worker_spec.snapshot == stamped
        processor.registry.trie_for(worker_spec, model())
        assert processor.registry.n_file_loads == loads
        p = SamplingParams(max_tokens=8, extra_args={"treemask_choices": ["a"], keys.KEY_SNAPSHOT: forged})
        InputProcessor().validate(p)
        assert keys.KEY_SNAPSHOT not in p.extra_args
    finally:
        processor.registry.configure(None)
