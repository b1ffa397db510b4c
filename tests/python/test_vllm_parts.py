"""Issue 21, the vLLM plugin's parts that need no vLLM: request keys, the
operator's allowed files, the registry and the choice-list cache (items
1-6). The same behaviour through a real ``vllm serve`` is tested in
tests/vllm (test_serving_safely.py, test_load.py).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os
import stat
import threading
import time

import pytest

import treemask
from treemask.vllm import keys as tk
from treemask.vllm.choice_cache import ChoiceCache, digest_of
from treemask.vllm.files import REFUSED
from treemask.vllm.model import ModelInfo
from treemask.vllm.trie_registry import ByteLRU, TrieRegistry
from treemask.vllm.settings import Settings

V = 300
EOS, EXTRA_STOP = 290, 291
SECRET = "sk-live-SECRET"


def byte_tokenizer(text):
    return list(text.encode("utf-8"))


def model():
    return ModelInfo(V, [EOS], byte_tokenizer, tokenizer_id="bytes")


def spec(**extra):
    return tk.parse_extra_args(extra)


@pytest.fixture
def allowed(tmp_path):
    d = tmp_path / "tries"
    d.mkdir()
    treemask.Trie.from_paths([[1, 2, 3], [1, 4]], V, [EOS]).save(d / "catalog.tmtrie")
    (d / "paths.jsonl").write_text("[5, 6]\n[7]\n")
    return d


def registry_for(tmp_path, allowed_dir, **settings):
    settings.setdefault("cache_dir", str(tmp_path / "cache"))
    return TrieRegistry(Settings(trie_dirs=(str(allowed_dir),), **settings))


# ---- item 1: request-supplied paths ------------------------------------------------


def test_names_resolve_only_inside_the_allowed_directories(tmp_path, allowed):
    reg = registry_for(tmp_path, allowed)
    m = model()
    for name in (str(allowed / "catalog.tmtrie"), "catalog.tmtrie", "catalog", "paths.jsonl"):
        trie = reg.trie_for(spec(treemask_trie=name), m)
        assert trie.vocab_size == V
    outside = tmp_path / "outside.tmtrie"
    treemask.Trie.from_paths([[9]], V, [EOS]).save(outside)
    os.symlink(outside, allowed / "link.tmtrie")
    os.mkdir(allowed / "dir.json")
    os.mkfifo(allowed / "fifo.json")
    refused = [str(outside), "../outside.tmtrie", str(allowed / ".." / "outside.tmtrie"), "link.tmtrie",
               "missing.tmtrie", "/etc/passwd.json", "/proc/self/cwd/x.json", "dir.json", "fifo.json",
               "/nonexistent/dir/x.tmtrie", str(allowed / "catalog.tmtrie" / "x.json")]
    messages = set()
    for name in refused:  # the FIFO too: opened with O_NONBLOCK, so this returns
        with pytest.raises(tk.RequestError) as e:
            reg.trie_for(spec(treemask_trie=name), m)
        messages.add(str(e.value))
    assert messages == {"treemask: " + REFUSED}  # one answer whatever the file system holds


def test_no_allowed_directory_means_no_file(tmp_path, allowed):
    reg = TrieRegistry(Settings(cache_dir=""))
    with pytest.raises(tk.RequestError, match="allows no trie files .*TREEMASK_VLLM_TRIE_DIRS"):
        reg.trie_for(spec(treemask_trie=str(allowed / "catalog.tmtrie")), model())


def _planted(d):
    """Files whose content must never reach a client."""
    files = {
        "key.json": json.dumps({"start_token_id": 225, "end_token_id": 2,
                                "prefix_dict": {"225": [5], "225_" + SECRET: [1]}}),
        "long.json": json.dumps({"start_token_id": 225, "end_token_id": 2,
                                 "prefix_dict": {"225": [5], "225_" + SECRET * 1500: [1]}}),
        "elem.json": json.dumps({"start_token_id": 225, "end_token_id": 2,
                                 "prefix_dict": {"225": [5, SECRET]}}),
        "sep.json": json.dumps({"start_token_id": 225, "end_token_id": 2, "sep": SECRET,
                                "prefix_dict": {"225": [5]}}),
        "big.json": json.dumps({"start_token_id": 225, "end_token_id": 2, "prefix_dict": {"225": [5, 99999]}}),
        "line.tsv": "225\t5\x02" + SECRET + "\n",
        "notab.tsv": SECRET + "\n",
        "syntax.json": '{"start_token_id": 225, "prefix_dict": {"' + SECRET + '": [1,}',
        "list.jsonl": "[1, 2]\n[\"" + SECRET + "\"]\n",
        "text.tmtrie": SECRET,
        "nojson.json": SECRET,
    }
    for name, text in files.items():
        (d / name).write_text(text)
    trie = treemask.Trie.from_paths([[1]], V, [EOS])
    trie.save(d / "trunc.tmtrie")
    data = (d / "trunc.tmtrie").read_bytes()
    (d / "trunc.tmtrie").write_bytes(data[:-7])
    return list(files) + ["trunc.tmtrie"]


def test_no_reply_holds_a_byte_of_a_file(tmp_path, allowed):
    reg = registry_for(tmp_path, allowed)
    for name in _planted(allowed):
        extra = {"treemask_trie": name}
        if name.endswith(".tsv"):
            extra["treemask_start_token_id"] = 225
        with pytest.raises(tk.RequestError) as e:
            reg.trie_for(spec(**extra), model())
        text = str(e.value)
        assert SECRET not in text and "SECRET" not in text, (name, text)
        assert len(text) < 400, (name, text)
        assert name in text, text  # the request's own name, to say which
    # where: a byte offset or a line, not the content
    with pytest.raises(tk.RequestError, match=r"not well-formed \(at byte \d+\)"):
        reg.trie_for(spec(treemask_trie="syntax.json"), model())
    with pytest.raises(tk.RequestError, match=r"outside the model's vocabulary"):
        reg.trie_for(spec(treemask_trie="big.json"), model())


# ---- item 3: bounded work ---------------------------------------------------------


def test_size_cap_and_first_bytes_come_before_any_read(tmp_path, allowed, monkeypatch):
    """A 2 GB sparse file was read whole before the first-byte checks
    refused it (6-8 s and +2 GB per request): now no loader runs."""
    for loader in ("load", "from_rtp_json", "from_jsonl", "from_rtp_tsv"):
        monkeypatch.setattr(treemask.Trie, loader, lambda *a, _n=loader, **k: pytest.fail("%s read it" % _n))
    reg = registry_for(tmp_path, allowed, max_file_bytes=1 << 20)
    sparse = allowed / "sparse.json"
    with open(sparse, "wb") as f:
        f.truncate(2 << 30)
    with pytest.raises(tk.RequestError, match="larger than this server's limit of 1048576 bytes"):
        reg.trie_for(spec(treemask_trie="sparse.json"), model())
    reg_big = registry_for(tmp_path, allowed, max_file_bytes=4 << 30)
    for name, message in (("sparse.json", "does not start with '{'"), ("sparse.jsonl", "does not start with"),
                          ("sparse.tmtrie", "not the .tmtrie magic")):
        if name != "sparse.json":
            os.link(sparse, allowed / name)
        with pytest.raises(tk.RequestError, match=message):
            reg_big.trie_for(spec(treemask_trie=name), model())
    (allowed / "headless.tsv").write_bytes(b"x" * 5000)
    with pytest.raises(tk.RequestError, match="no tab in its first 4096 bytes"):
        reg_big.trie_for(spec(treemask_trie="headless.tsv", treemask_start_token_id=1), model())
    assert reg.n_file_loads == reg_big.n_file_loads == 0


def test_choice_lists_are_capped_in_count_and_bytes():
    limits = Settings(max_choices=3, max_choice_bytes=10)
    with pytest.raises(tk.RequestError, match="treemask_choices has 4 strings, more than this server's limit of 3"):
        tk.parse_extra_args({"treemask_choices": ["a", "b", "c", "d"]}, limits)
    with pytest.raises(tk.RequestError, match=r"up to \[1\] hold more than this server's limit of 10 UTF-8 bytes"):
        tk.parse_extra_args({"treemask_choices": ["abcdef", "ghijkl"]}, limits)
    defaults = Settings()
    assert defaults.max_choices == 1_000_000 and defaults.max_choice_bytes == 64 << 20
    big = ["x" * (1 << 20)] * 65  # 65 MiB: over the default
    with pytest.raises(tk.RequestError, match=r"up to \[64\] hold more than this server's limit"):
        tk.parse_extra_args({"treemask_choices": big})
    with pytest.raises(tk.RequestError, match="more than 1024"):
        tk.parse_extra_args({"treemask_choices": ["a"], "treemask_stop_tokens": list(range(2000))})


def test_settings_come_from_the_environment_and_refuse_nonsense():
    s = Settings.from_env({"TREEMASK_VLLM_TRIE_DIRS": "/a" + os.pathsep + "/b", "TREEMASK_VLLM_MAX_CHOICES": "10",
                           "TREEMASK_VLLM_MAX_FILE_BYTES": "2M", "TREEMASK_VLLM_CACHE_DIR": "off"})
    assert s.trie_dirs == ("/a", "/b") and s.max_choices == 10 and s.max_file_bytes == 2 << 20
    assert s.cache_dir == ""
    assert Settings.from_env({}).trie_dirs == ()
    with pytest.raises(treemask.InvalidArgumentError, match="TREEMASK_VLLM_MAX_CHOICES='lots'"):
        Settings.from_env({"TREEMASK_VLLM_MAX_CHOICES": "lots"})
    with pytest.raises(treemask.InvalidArgumentError, match="not an absolute path"):
        Settings.from_env({"TREEMASK_VLLM_TRIE_DIRS": "relative/dir"})


# ---- item 4: bounded memory ------------------------------------------------------------


def test_a_file_loads_once_whatever_stop_tokens_requests_give(tmp_path, allowed):
    reg = registry_for(tmp_path, allowed)
    m = model()
    tries = {id(reg.trie_for(spec(treemask_trie="paths.jsonl", treemask_stop_tokens=[s]), m))
             for s in range(200, 260)}
    assert reg.n_file_loads == 1 and len(tries) == 1
    for name in ("catalog", "paths.jsonl"):
        for s in (None, [EXTRA_STOP], [EOS, EXTRA_STOP]):
            extra = {"treemask_trie": name}
            if s:
                extra["treemask_stop_tokens"] = s
            reg.trie_for(spec(**extra), m)
    assert reg.n_file_loads == 2


def test_a_replaced_file_is_loaded_again_and_the_old_version_leaves(tmp_path, allowed):
    reg = registry_for(tmp_path, allowed)
    first = reg.trie_for(spec(treemask_trie="catalog"), model())
    before = reg.bytes
    treemask.Trie.from_paths([[40, 41]], V, [EOS]).save(allowed / "catalog.tmtrie")
    second = reg.trie_for(spec(treemask_trie="catalog"), model())
    assert second is not first and reg.n_file_loads == 2
    assert treemask.Matcher(first).next_tokens() == [1]  # a running request keeps its snapshot
    assert treemask.Matcher(second).next_tokens() == [40]
    assert reg.bytes == second.stats().bytes and before == first.stats().bytes


def test_registry_is_bounded_by_bytes(tmp_path, allowed):
    one = treemask.Trie.from_labels(["abc"], byte_tokenizer, V, [EOS], prefix="").stats().bytes
    reg = registry_for(tmp_path, allowed, registry_bytes=5 * (one + 100), cache_dir="")
    m = model()
    for i in range(40):
        reg.trie_for(spec(treemask_choices=["c%02d" % i]), m)
    assert reg.bytes <= 5 * (one + 100)
    assert reg.n_choice_compiles == 40
    reg.trie_for(spec(treemask_choices=["c39"]), m)  # the most recent stays
    assert reg.n_choice_compiles == 40
    reg.trie_for(spec(treemask_choices=["c00"]), m)  # the oldest went
    assert reg.n_choice_compiles == 41


def test_single_flight_loads_once_for_concurrent_requests():
    lru = ByteLRU(1 << 20)
    calls = []
    gate = threading.Event()

    def build():
        calls.append(1)
        gate.wait(5)
        return "value", 10

    results = []
    threads = [threading.Thread(target=lambda: results.append(lru.get("k", build))) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    gate.set()
    for t in threads:
        t.join(10)
    assert calls == [1] and results == ["value"] * 8
    # an error reaches every waiter, and the next call builds again
    lru2 = ByteLRU(100)
    with pytest.raises(ValueError):
        lru2.get("k", lambda: (_ for _ in ()).throw(ValueError("no")))
    assert lru2.get("k", lambda: ("ok", 1)) == "ok"
    assert lru2.get("huge", lambda: ("big", 1000)) == "big" and len(lru2) == 1  # returned, not kept


# ---- item 5: the cache deletes only its own files ---------------------------------------


def test_choice_cache_refuses_a_symlinked_directory(tmp_path):
    real = tmp_path / "data"
    real.mkdir()
    (real / "catalog1.tmtrie").write_bytes(b"user data")
    link = tmp_path / "cache-link"
    os.symlink(real, link)
    reg = TrieRegistry(Settings(cache_dir=str(link), cache_bytes=1))
    for i in range(5):
        reg.trie_for(spec(treemask_choices=["s%d" % i]), model())
    assert reg.cache is not None and reg.cache.bytes_on_disk() == 0
    assert sorted(os.listdir(real)) == ["catalog1.tmtrie"]


def test_choice_cache_deletes_only_its_own_names_and_fits_its_bytes(tmp_path):
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    user_files = ["catalog.tmtrie", "catalog1.tmtrie", "x" * 64 + ".tmtrie", "0" * 63 + ".tmtrie", "notes.txt"]
    for name in user_files:
        (d / name).write_bytes(b"user data " * 1000)
    os.mkdir(d / ("a" * 64 + ".tmtrie"))  # a directory with a cache-like name
    one = treemask.Trie.from_labels(["choice-000"], byte_tokenizer, V, [EOS], prefix="").stats().bytes
    cap = 4 * one + 4096
    reg = TrieRegistry(Settings(cache_dir=str(d), cache_bytes=cap))
    for i in range(30):
        reg.trie_for(spec(treemask_choices=["choice-%03d" % i]), model())
    names = set(os.listdir(d))
    assert set(user_files) <= names and "a" * 64 + ".tmtrie" in names
    own = [n for n in names if len(n) == 71 and n.endswith(".tmtrie") and n[:64].isalnum()
           and all(c in "0123456789abcdef" for c in n[:64])]
    assert 1 <= len(own) <= 5
    assert reg.cache.bytes_on_disk() <= cap
    for name in user_files:
        assert (d / name).read_bytes() == b"user data " * 1000


def test_a_cache_file_larger_than_the_cap_is_not_kept_and_evicts_nothing(tmp_path):
    """Issue 29: a list in any tokenization is saved with the model's
    vocabulary (1.7 MB for Qwen2.5's) while its trie counts ~1 KB: under a
    smaller cap its save evicted every other file, then itself."""
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    m = any_model()
    small = treemask.Trie.from_labels(["choice-000"], byte_tokenizer, V, [EOS], prefix="")
    small.save(tmp_path / "probe.tmtrie")
    cap = 2 * os.path.getsize(tmp_path / "probe.tmtrie")  # the string set's file: over 2x
    reg = TrieRegistry(Settings(cache_dir=str(d), cache_bytes=cap))
    reg.trie_for(spec(treemask_choices=["choice-000"]), m)
    kept = set(os.listdir(d))
    assert len(kept) == 1
    anyt = reg.trie_for(spec(treemask_choices=["red", "green"], treemask_tokenization="any"), m)
    assert anyt.is_string_set
    assert set(os.listdir(d)) == kept  # the large file is gone, the small one stays
    assert reg.cache.bytes_on_disk() <= cap


def test_choice_cache_refuses_a_directory_others_may_write(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    cache = ChoiceCache(str(d), 1 << 20)
    trie = treemask.Trie.from_labels(["a"], byte_tokenizer, V, [EOS], prefix="")
    cache.save("f" * 64, trie, 100)
    assert os.listdir(d) == []
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o777


def test_the_worker_maps_what_the_frontend_compiled(tmp_path):
    m = model()
    s = spec(treemask_choices=["red", "green", "blue"])
    frontend = TrieRegistry(Settings(cache_dir=str(tmp_path / "c")))
    compiled = frontend.trie_for(s, m)
    worker = TrieRegistry(Settings(cache_dir=str(tmp_path / "c")))
    mapped = worker.trie_for(s, m)
    assert frontend.n_choice_compiles == 1 and worker.n_choice_compiles == 0
    assert mapped.labels == compiled.labels == s.source.choices
    # another tokenizer (same vocab size) never maps it
    other = ModelInfo(V, [EOS], byte_tokenizer, tokenizer_id="another")
    worker.trie_for(s, other)
    assert worker.n_choice_compiles == 1
    assert digest_of(("a",), "", (1,), V, "x") != digest_of(("a",), "", (1,), V, "y")


# ---- item 6: clear errors ------------------------------------------------------------


@pytest.mark.parametrize("extra, message", [
    ({"treemask_choices": ["ok", "\ud800"]}, r"treemask_choices\[1\] is not valid Unicode text: a lone surrogate"
                                              r" U\+D800 at character 0"),
    ({"treemask_choices": ["ok"], "treemask_prefix": "a\udfff"}, r"treemask_prefix is not valid Unicode text"),
    ({"treemask_trie": "x\udc80.tmtrie"}, r"treemask_trie is not valid Unicode text"),
    ({"treemask_trie": "x.tmtrie", "treemask_choices": ["a"]}, "exactly one of"),
    ({"treemask_tire": "x.tmtrie"}, "unknown key 'treemask_tire'"),
    ({"treemask_choices": "abc"}, "want a list of strings"),
    ({"treemask_choices": []}, "is empty"),
    ({"treemask_choices": ["a", 3]}, r"treemask_choices\[1\] is int"),
    ({"treemask_trie": "x.txt"}, "unknown format '.txt'"),
    ({"treemask_trie": "x.tmtrie", "treemask_prefix": " "}, "treemask_prefix applies to treemask_choices only"),
    ({"treemask_trie": "x.tsv"}, "treemask_start_token_id"),
    ({"treemask_trie": "x.json", "treemask_start_token_id": 1}, "applies to a .tsv treemask_trie only"),
    ({"treemask_choices": ["a"], "treemask_failure_policy": "maybe"}, "treemask_failure_policy"),
    ({"treemask_choices": ["a"], "treemask_stop_tokens": ["x"]}, "want a token id"),
    ({"treemask_trie": "a" * 5000 + ".tmtrie"}, "longer than 4096 bytes"),
])
def test_bad_keys_name_the_key(extra, message):
    with pytest.raises(tk.RequestError, match="^treemask: .*" + message):
        tk.parse_extra_args(extra)


def test_request_error_is_a_treemask_error_and_a_value_error():
    assert issubclass(tk.RequestError, treemask.InvalidArgumentError)
    assert issubclass(tk.RequestError, ValueError) and issubclass(tk.RequestError, treemask.Error)


def test_shortest_path_for_the_length_budget(tmp_path, allowed):
    reg = registry_for(tmp_path, allowed)
    trie = treemask.Trie.from_paths([[1, 2, 3, 4], [5, 6], [7, 8, 9]], V, [EOS])
    assert reg.shortest_path(trie) == 2
    assert reg.shortest_path(treemask.Trie.from_paths([[]], V, [EOS])) == 0
    words = treemask.Trie.from_labels(["hello world foo"], lambda t: [ord(c) for c in t.split()[0][:1]]
                                      + list(range(100, 100 + len(t.split()) - 1)), V, [EOS], prefix="")
    assert reg.shortest_path(words) == 3


# ---- issue 23: treemask_tokenization "any" (string sets over the model's vocabulary) ------------


def byte_vocab():
    """Every byte a token (ids 0..255), a few longer pieces, EOS and
    EXTRA_STOP special: what Vocab.from_tokenizer gives for a byte-level BPE."""
    pieces = [bytes([b]) for b in range(256)] + [b"re", b"red", b"gr", b"een", b"bl", b"ue"]
    pieces += [b"<%d>" % i for i in range(len(pieces), EXTRA_STOP + 1)]
    special = [i >= 262 for i in range(len(pieces))]
    return treemask.Vocab.from_token_bytes(pieces, V, special)


def any_model(vocab=None):
    return ModelInfo(V, [EOS], byte_tokenizer, tokenizer_id="bytes", vocab=vocab or byte_vocab())


def test_tokenization_key_is_parsed_and_checked():
    assert spec(treemask_choices=["a"]).source.tokenization == "canonical"  # the default
    assert spec(treemask_choices=["a"], treemask_tokenization="any").source.tokenization == "any"
    assert spec(treemask_choices=["a"], treemask_tokenization="any") != spec(treemask_choices=["a"])
    with pytest.raises(tk.RequestError, match="treemask_tokenization: want one of 'canonical', 'any', got 'bytes'"):
        spec(treemask_choices=["a"], treemask_tokenization="bytes")
    with pytest.raises(tk.RequestError, match="treemask_tokenization applies to treemask_choices only"):
        spec(treemask_trie="x.tmtrie", treemask_tokenization="any")


def test_any_tokenization_is_a_string_set_over_the_models_vocabulary(tmp_path):
    m = any_model()
    reg = TrieRegistry(Settings(cache_dir=str(tmp_path / "c")))
    choices = ["red", "green", "blue"]
    anyt = reg.trie_for(spec(treemask_choices=choices, treemask_tokenization="any"), m)
    canonical = reg.trie_for(spec(treemask_choices=choices), m)
    assert anyt.is_string_set and not canonical.is_string_set
    assert anyt.vocab == m.vocab and anyt.labels == tuple(choices)
    # "red" as one token, as "re" + "d", or byte by byte: all allowed.
    for seq in ([257], [256, ord("d")], [ord("r"), ord("e"), ord("d")]):
        matcher = treemask.Matcher(anyt)
        assert matcher.accept_tokens(seq + [EOS]) == len(seq) + 1 and matcher.label_ids() == [0]
    # The canonical trie allows only the tokenizer's bytes.
    assert treemask.Matcher(canonical).next_tokens() == sorted(ord(c[0]) for c in choices)
    # Cached per vocabulary: the same request is one compile.
    again = reg.trie_for(spec(treemask_choices=choices, treemask_tokenization="any"), m)
    assert again is anyt and reg.n_choice_compiles == 2
    # The length check's shortest sequence counts the fewest tokens: "red" is one.
    assert reg.shortest_path(anyt) == 1 and reg.shortest_path(canonical) == 3


def test_the_vocabulary_is_built_once_per_model(monkeypatch):
    built = []
    real = treemask.Vocab.from_tokenizer

    def counting(tokenizer, vocab_size=None):
        built.append(vocab_size)
        return byte_vocab()
    monkeypatch.setattr(treemask.Vocab, "from_tokenizer", staticmethod(counting))
    m = ModelInfo(V, [EOS], byte_tokenizer, tokenizer_id="bytes")
    reg = TrieRegistry(Settings(cache_dir=""))
    threads = [threading.Thread(target=reg.trie_for, args=(spec(treemask_choices=["a%d" % i],
                                                                 treemask_tokenization="any"), m))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert built == [V] and reg.n_choice_compiles == 8
    del real


def test_a_tokenizer_without_readable_bytes_is_a_clear_error():
    m = ModelInfo(V, [EOS], byte_tokenizer, tokenizer_id="bytes")  # a bare callable: no token bytes
    reg = TrieRegistry(Settings(cache_dir=""))
    with pytest.raises(tk.RequestError, match=r"treemask_tokenization 'any', or a string-set trie file\) needs the bytes of"):
        reg.trie_for(spec(treemask_choices=["a"], treemask_tokenization="any"), m)


def test_the_worker_maps_the_string_set_the_frontend_compiled(tmp_path):
    s = spec(treemask_choices=["red", "blue"], treemask_tokenization="any", treemask_stop_tokens=[EOS, EXTRA_STOP])
    frontend = TrieRegistry(Settings(cache_dir=str(tmp_path / "c")))
    compiled = frontend.trie_for(s, any_model())
    worker_model = any_model()
    worker = TrieRegistry(Settings(cache_dir=str(tmp_path / "c")))
    mapped = worker.trie_for(s, worker_model)
    assert frontend.n_choice_compiles == 1 and worker.n_choice_compiles == 0
    assert mapped.is_string_set and mapped.labels == compiled.labels
    assert mapped.stop_tokens == [EOS, EXTRA_STOP]
    # Another vocabulary (same size) never maps it; nor does the canonical list.
    other = ModelInfo(V, [EOS], byte_tokenizer, tokenizer_id="bytes", vocab=treemask.Vocab.from_token_bytes(
        [bytes([b]) for b in range(256)], V))
    assert worker.trie_for(s, other).vocab == other.vocab and worker.n_choice_compiles == 1
    worker.trie_for(spec(treemask_choices=["red", "blue"], treemask_stop_tokens=[EOS, EXTRA_STOP]), worker_model)
    assert worker.n_choice_compiles == 2


def test_any_tokenization_takes_the_same_caps():
    limits = Settings(max_choices=3, max_choice_bytes=10)
    with pytest.raises(tk.RequestError, match="more than this server's limit of 3"):
        tk.parse_extra_args({"treemask_choices": ["a"] * 4, "treemask_tokenization": "any"}, limits)
    with pytest.raises(tk.RequestError, match="limit of 10 UTF-8 bytes"):
        tk.parse_extra_args({"treemask_choices": ["abcdefgh", "ijk"], "treemask_tokenization": "any"}, limits)
