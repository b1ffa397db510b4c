"""treemask.vllm.TrieLogitsProcessor driven directly, without a model:
vLLM's BatchUpdate mechanics (additions, removals, one-way moves, swaps,
preempted requests resumed with their output, -1 placeholders), the
length budget, the trie registry (reload on atomic replace, running
requests keep their snapshot, bounded by bytes, files outside the allowed
directories failing closed in the worker), request validation (the errors
a request gets at submission, stop tokens added, a max_tokens no label
fits), the API server's hooks (loads off the event loop, beam search
refused) and the one-thread guard.

The randomised test drives the processor through vLLM's own persistent
batch (vllm.v1.worker.gpu_input_batch.InputBatch: add_request,
remove_request, condense, swap_states, refresh_metadata), as vLLM's
logits-processor correctness test does with its fake batch, and checks
every row of every step against a fresh Matcher over the row's output.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import asyncio
import json
import random
import re
import threading
import types

import numpy as np
import pytest
import torch

import treemask
from treemask import vllm as tv
from treemask._device_mask import DeviceMasker
from treemask.vllm import frontend, processor
from treemask.vllm.keys import ChoiceSource
from treemask.vllm.trie_registry import _compile_choices
from treemask.vllm.settings import Settings
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessors, MoveDirectionality

V = 300  # vocab: byte tokens 0..255 for choice lists, stop tokens above
EOS, EXTRA_STOP = 290, 291
SLOTS = 8
REFUSED = "no trie file of that name is available"


def byte_tokenizer(text):
    return list(text.encode("utf-8"))


def model_config(vocab=V, eos=EOS):
    return types.SimpleNamespace(
        get_vocab_size=lambda: vocab, try_get_generation_config=lambda: {"eos_token_id": [eos]},
        hf_text_config=types.SimpleNamespace(eos_token_id=eos), tokenizer="bytes", skip_tokenizer_init=True,
        trust_remote_code=False, tokenizer_revision=None)


def make_processor(slots=SLOTS, device="cpu"):
    config = types.SimpleNamespace(model_config=model_config(),
                                   scheduler_config=types.SimpleNamespace(max_num_seqs=slots))
    proc = tv.TrieLogitsProcessor(config, torch.device(device), False)
    proc.model._tokenizer = byte_tokenizer
    return proc


@pytest.fixture(autouse=True)
def fresh_registry(tmp_path):
    """The process's registry, allowing files in tmp_path only."""
    processor.registry.configure(Settings(trie_dirs=(str(tmp_path),), cache_dir=str(tmp_path / "choice-cache")))
    yield
    processor.registry.configure(None)


PATHS_A = [[1, 2, 3], [1, 2, 4, 5], [1, 6], [7, 8, 9, 10, 11, 12], [7, 13]]
PATHS_B = [[20, 21], [20, 22, 23], [24]]


@pytest.fixture
def tries(tmp_path):
    a = tmp_path / "a.tmtrie"
    treemask.Trie.from_paths(PATHS_A, V, [EOS]).save(a)
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps(p) + "\n" for p in PATHS_B))
    return {"a": str(a), "b": str(b)}


def expected_allowed(trie, output, max_tokens, stops=None):
    m = treemask.Matcher(trie, failure_policy="fail_closed", max_new_tokens=max_tokens - 1,
                         override_stop_tokens=stops)
    for t in output:
        m.accept_token(t)
    return set(m.next_tokens())


def allowed(logits_row):
    return set(np.flatnonzero(np.isfinite(logits_row.numpy())).tolist())


def params(**extra):
    max_tokens = extra.pop("max_tokens", 16)
    return SamplingParams(max_tokens=max_tokens, extra_args=extra or None)


def step(proc, n_rows):
    logits = torch.randn(n_rows, V)
    before = logits.clone()
    proc.apply(logits)
    return before, logits


def test_mixed_rows_and_unconstrained_rows_untouched(tries):
    proc = make_processor()
    out = [[] for _ in range(4)]
    proc.update_state(BatchUpdate(batch_size=4, removed=[], moved=[], added=[
        (0, params(treemask_trie=tries["a"]), [5], out[0]),
        (1, params(), [5], out[1]),
        (2, params(treemask_trie=tries["b"]), [5], out[2]),
        (3, params(treemask_choices=["ab", "ac", "b"]), [5], out[3]),
    ]))
    before, logits = step(proc, 4)
    assert allowed(logits[0]) == {1, 7}
    assert torch.equal(logits[1], before[1])
    assert allowed(logits[2]) == {20, 24}
    assert allowed(logits[3]) == {ord("a"), ord("b")}
    out[0].append(1)
    out[2].append(24)
    out[3].append(ord("a"))
    _, logits = step(proc, 4)
    assert allowed(logits[0]) == {2, 6}
    assert allowed(logits[2]) == {EOS}
    assert allowed(logits[3]) == {ord("b"), ord("c")}


def test_a_second_instance_for_the_same_engine_is_inert(tries):
    config = types.SimpleNamespace(model_config=model_config(),
                                   scheduler_config=types.SimpleNamespace(max_num_seqs=2))
    first = tv.TrieLogitsProcessor(config, torch.device("cpu"), False)
    second = tv.TrieLogitsProcessor(config, torch.device("cpu"), False)
    assert not first.inert and second.inert
    update = BatchUpdate(batch_size=1, removed=[], moved=[], added=[(0, params(treemask_trie=tries["a"]), None, [])])
    first.update_state(update)
    second.update_state(update)
    assert second.rows == {} and list(first.rows) == [0]


def test_no_constrained_rows_leaves_logits_identical():
    proc = make_processor()
    proc.update_state(BatchUpdate(batch_size=2, removed=[], moved=[],
                                  added=[(0, params(), [1], []), (1, params(), [1], [])]))
    before, logits = step(proc, 2)
    assert torch.equal(before, logits)


def test_moves_swaps_removals_and_replacement(tries):
    proc = make_processor()
    outs = {i: [] for i in range(3)}
    proc.update_state(BatchUpdate(batch_size=3, removed=[], moved=[], added=[
        (0, params(treemask_trie=tries["a"]), None, outs[0]),
        (1, params(treemask_trie=tries["b"]), None, outs[1]),
        (2, params(), None, outs[2])]))
    step(proc, 3)
    outs[0].append(7)
    outs[1].append(20)
    # swap 0 <-> 2: the trie-a row is now at 2, the unconstrained one at 0
    proc.update_state(BatchUpdate(batch_size=3, removed=[], added=[], moved=[(0, 2, MoveDirectionality.SWAP)]))
    before, logits = step(proc, 3)
    assert torch.equal(logits[0], before[0])
    assert allowed(logits[2]) == {8, 13}
    assert allowed(logits[1]) == {21, 22}
    # remove the row at 0, move 2 -> 0 one way (condense)
    outs[0].append(13)
    proc.update_state(BatchUpdate(batch_size=2, removed=[0], added=[],
                                  moved=[(2, 0, MoveDirectionality.UNIDIRECTIONAL)]))
    _, logits = step(proc, 2)
    assert allowed(logits[0]) == {EOS}
    assert allowed(logits[1]) == {21, 22}
    # an added request replaces the row at 1 without a removal
    new_out = []
    proc.update_state(BatchUpdate(batch_size=2, removed=[], moved=[],
                                  added=[(1, params(treemask_choices=["z"]), None, new_out)]))
    _, logits = step(proc, 2)
    assert allowed(logits[1]) == {ord("z")}
    assert sorted(proc.rows) == [0, 1]


def test_preempted_request_resumes_with_its_output(tries):
    proc = make_processor()
    out = [7, 8, 9]
    proc.update_state(BatchUpdate(batch_size=1, removed=[], moved=[],
                                  added=[(0, params(treemask_trie=tries["a"]), None, out)]))
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {10}
    out.append(10)
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {11}


def test_async_placeholders(tries):
    proc = make_processor()
    out = []
    proc.update_state(BatchUpdate(batch_size=1, removed=[], moved=[],
                                  added=[(0, params(treemask_trie=tries["a"]), None, out)]))
    step(proc, 1)
    # update_state sees a -1 placeholder, vLLM repairs it before sampling
    out.append(-1)
    proc.update_state(None)
    out[-1] = 1
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {2, 6}
    # a placeholder still there at sampling time: the row fails closed
    out.append(-1)
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {EOS}


def test_length_budget_offers_only_what_fits(tries):
    proc = make_processor()
    out = []
    proc.update_state(BatchUpdate(batch_size=2, removed=[], moved=[], added=[
        (0, params(treemask_trie=tries["a"], max_tokens=3), None, out),
        (1, params(treemask_trie=tries["a"], max_tokens=3), None, [1])]))
    # [1, 6] + EOS and [7, 13] + EOS fit in 3 tokens; [1, 2, 3] + EOS does
    # not (it would fit without its stop token: not offered either)
    _, logits = step(proc, 2)
    assert allowed(logits[0]) == {1, 7}
    assert allowed(logits[1]) == {6}
    out.append(7)
    _, logits = step(proc, 2)
    assert allowed(logits[0]) == {13}
    out.append(13)
    _, logits = step(proc, 2)
    assert allowed(logits[0]) == {EOS}


def test_stop_tokens_override(tries):
    proc = make_processor()
    out = [24]
    proc.update_state(BatchUpdate(batch_size=1, removed=[], moved=[], added=[
        (0, params(treemask_trie=tries["b"], treemask_stop_tokens=[EXTRA_STOP]), None, out)]))
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {EXTRA_STOP}


def test_file_replaced_new_requests_get_the_new_snapshot(tries, tmp_path):
    proc = make_processor()
    old_out = [1]
    proc.update_state(BatchUpdate(batch_size=1, removed=[], moved=[],
                                  added=[(0, params(treemask_trie=tries["a"]), None, old_out)]))
    step(proc, 1)
    # atomic replace (Trie.save writes a temporary file and renames it)
    treemask.Trie.from_paths([[40, 41]], V, [EOS]).save(tries["a"])
    new_out = []
    proc.update_state(BatchUpdate(batch_size=2, removed=[], moved=[],
                                  added=[(1, params(treemask_trie=tries["a"]), None, new_out)]))
    _, logits = step(proc, 2)
    assert allowed(logits[0]) == {2, 6}  # the running request keeps its snapshot
    assert allowed(logits[1]) == {40}
    assert processor.registry.n_file_loads == 2
    # unchanged file: no reload
    proc.update_state(BatchUpdate(batch_size=3, removed=[], moved=[],
                                  added=[(2, params(treemask_trie=tries["a"]), None, [])]))
    assert processor.registry.n_file_loads == 2


def test_a_file_broken_after_validation_fails_closed(tmp_path):
    proc = make_processor()
    bad = tmp_path / "bad.tmtrie"
    bad.write_bytes(b"not a trie at all")
    proc.update_state(BatchUpdate(batch_size=1, removed=[], moved=[],
                                  added=[(0, params(treemask_trie=str(bad)), None, [])]))
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {EOS}


def test_choice_registry_is_bounded_by_bytes(tmp_path):
    one = treemask.Trie.from_labels(["a"], byte_tokenizer, V, [EOS], prefix="").stats().bytes + 57
    reg = tv.TrieRegistry(Settings(registry_bytes=2 * one, cache_dir=""))
    model = tv.ModelInfo(V, [EOS], byte_tokenizer)
    lists = [["a"], ["b"], ["c"]]
    tries_ = [reg.trie_for(tv.parse_extra_args({"treemask_choices": c}), model) for c in lists]
    assert reg.n_choice_compiles == 3 and reg.bytes <= 2 * one
    assert reg.trie_for(tv.parse_extra_args({"treemask_choices": ["c"]}), model) is tries_[2]
    assert reg.trie_for(tv.parse_extra_args({"treemask_choices": ["a"]}), model) is not tries_[0]
    assert reg.n_choice_compiles == 4


def test_choice_file_cache_is_shared_between_processes(tmp_path):
    """What the frontend compiled, the worker maps (a second registry on the
    same directory stands for the other process)."""
    model = tv.ModelInfo(V, [EOS], byte_tokenizer)
    spec = tv.parse_extra_args({"treemask_choices": ["red", "green", "blue"]})
    frontend_registry = tv.TrieRegistry(Settings(cache_dir=str(tmp_path / "c")))
    compiled = frontend_registry.trie_for(spec, model)
    assert frontend_registry.n_choice_compiles == 1
    worker = tv.TrieRegistry(Settings(cache_dir=str(tmp_path / "c")))
    mapped = worker.trie_for(spec, model)
    assert worker.n_choice_compiles == 0
    assert mapped.labels == compiled.labels == spec.source.choices
    m = treemask.Matcher(mapped)
    assert m.accept_tokens(byte_tokenizer("green")) == 5 and m.accept_token(EOS)
    # a file whose labels differ (another list, a planted file) is not used
    (cached,) = list((tmp_path / "c").glob("*.tmtrie"))
    treemask.Trie.from_labels(["red", "green", "black"], byte_tokenizer, V, [EOS], prefix="").save(cached)
    other = tv.TrieRegistry(Settings(cache_dir=str(tmp_path / "c")))
    assert other.trie_for(spec, model).labels == spec.source.choices and other.n_choice_compiles == 1


def test_batched_choice_compile_equals_from_labels(tiny_model):
    """The batch-tokenized compile builds exactly Trie.from_labels' trie."""
    from conftest import ANIMALS, COLORS, FRUITS

    _, tokenizer, info = tiny_model
    labels = tuple(COLORS + ANIMALS + FRUITS + ["  two spaces", "tab\there", "ünïcödé", "<|im_end|>"])
    model = tv.ModelInfo(151936, [info["eos"]], tokenizer)
    for prefix in ("", " "):
        fast = _compile_choices(ChoiceSource(labels, prefix), model, (info["eos"],))
        slow = treemask.Trie.from_labels(list(labels), tokenizer, 151936, [info["eos"]], prefix=prefix)
        assert fast.skipped_labels == slow.skipped_labels
        assert fast.stats() == slow.stats()
        for i, label in enumerate(labels):
            if label in slow.skipped_labels:
                continue
            ids = tokenizer.encode(prefix + label, add_special_tokens=False)
            for trie in (fast, slow):
                m = treemask.Matcher(trie)
                assert m.accept_tokens(ids) == len(ids) and m.accept_token(info["eos"]) and i in m.label_ids()


def test_chunked_choice_compile_across_chunks(tiny_model, monkeypatch, caplog):
    """Issue 29 item 3: the compile tokenizes a chunk at a time and keeps only
    token ids between chunks; across chunk boundaries (5 choices a chunk
    here) it still builds Trie.from_labels' trie, with the same label ids
    and skipped labels (the first SKIPPED_KEPT kept with their reasons, all
    counted in the log)."""
    from conftest import ANIMALS, COLORS, FRUITS
    from treemask.vllm import trie_registry

    _, tokenizer, info = tiny_model
    labels = tuple(COLORS + ["<|im_end|>"] + ANIMALS + ["a<|im_end|>b", "x<|im_end|>"] + FRUITS + ["<|im_end|>"])
    monkeypatch.setattr(trie_registry, "COMPILE_CHUNK", 5)
    monkeypatch.setattr(trie_registry, "SKIPPED_KEPT", 2)
    model = tv.ModelInfo(151936, [info["eos"]], tokenizer)
    with caplog.at_level("WARNING", "treemask.vllm"):
        fast = _compile_choices(ChoiceSource(labels, " "), model, (info["eos"],))
    slow = treemask.Trie.from_labels(list(labels), tokenizer, 151936, [info["eos"]], prefix=" ")
    assert len(slow.skipped_labels) == 4
    assert fast.skipped_labels == slow.skipped_labels[:2]
    assert [s.reason for s in fast.skipped_labels] == [s.reason for s in slow.skipped_labels[:2]]
    assert "4 of %d choices do not round-trip" % len(labels) in caplog.text
    assert fast.stats() == slow.stats() and fast.labels == labels
    for i, label in enumerate(labels):
        if label in slow.skipped_labels:
            continue
        ids = tokenizer.encode(" " + label, add_special_tokens=False)
        m = treemask.Matcher(fast)
        assert m.accept_tokens(ids) == len(ids) and m.accept_token(info["eos"]) and m.label_ids() == [i]


# ---- validation at submission ---------------------------------------------


class InputProcessor:
    """Stands in for vLLM's frontend InputProcessor (found by its name)."""

    def __init__(self, tokenizer=byte_tokenizer):
        self.model_config = model_config()
        self.tokenizer = tokenizer

    def validate(self, p):
        tv.TrieLogitsProcessor.validate_params(p)


@pytest.mark.parametrize("extra, message", [
    ({"treemask_trie": "x.tmtrie", "treemask_choices": ["a"]}, "exactly one of"),
    ({"treemask_tire": "x.tmtrie"}, "unknown key 'treemask_tire'"),
    ({"treemask_choices": "abc"}, "want a list of strings"),
    ({"treemask_choices": []}, "is empty"),
    ({"treemask_choices": ["a", 3]}, "treemask_choices[1] is int"),
    ({"treemask_trie": "x.txt"}, "unknown format '.txt'"),
    ({"treemask_trie": "/nonexistent/x.tmtrie"}, REFUSED),
    ({"treemask_choices": ["a"], "treemask_failure_policy": "maybe"}, "treemask_failure_policy"),
    ({"treemask_choices": ["a"], "treemask_stop_tokens": ["x"]}, "want a token id"),
    ({"treemask_trie": "x.tsv"}, "treemask_start_token_id"),
])
def test_bad_requests_fail_at_submission(extra, message):
    with pytest.raises(ValueError, match="treemask: .*" + re.escape(message)):
        InputProcessor().validate(SamplingParams(extra_args=extra))


def test_corrupt_file_and_empty_label_set_fail_at_submission(tmp_path):
    bad = tmp_path / "bad.tmtrie"
    bad.write_bytes(b"\0" * 64)
    with pytest.raises(ValueError, match="treemask: .*bad.tmtrie"):
        InputProcessor().validate(SamplingParams(extra_args={"treemask_trie": str(bad)}))
    big = tmp_path / "big.jsonl"
    big.write_text("[1, 2, 1000]\n")
    with pytest.raises(ValueError, match="treemask: .*big.jsonl.*outside the model's vocabulary"):
        InputProcessor().validate(SamplingParams(extra_args={"treemask_trie": str(big)}))

    def eos_tokenizer(text):  # every label contains the stop token: nothing is left
        return [EOS]

    with pytest.raises(ValueError, match="none of the 2 labels"):
        InputProcessor(eos_tokenizer).validate(SamplingParams(extra_args={"treemask_choices": ["a", "b"]}))
    with pytest.raises(ValueError, match="min_tokens"):
        InputProcessor().validate(SamplingParams(min_tokens=2, extra_args={"treemask_choices": ["a"]}))


def test_speculative_decoding_refuses_constrained_requests():
    """vLLM builds no custom logits processor when speculative decoding is
    on: a constrained request must be refused, not run unconstrained."""
    frontend = InputProcessor()
    frontend.speculative_config = object()
    with pytest.raises(ValueError, match="speculative decoding"):
        frontend.validate(SamplingParams(extra_args={"treemask_choices": ["a"]}))
    frontend.validate(SamplingParams())  # unconstrained requests are fine


def test_validation_adds_the_trie_stop_tokens(tries):
    p = SamplingParams(stop_token_ids=[5], extra_args={"treemask_trie": tries["b"],
                                                       "treemask_stop_tokens": [EXTRA_STOP, EOS]})
    InputProcessor().validate(p)
    assert sorted(p.stop_token_ids) == [5, EOS, EXTRA_STOP]
    assert {EOS, EXTRA_STOP} <= p.all_stop_token_ids
    p = SamplingParams(extra_args={"treemask_trie": tries["a"]})  # a .tmtrie keeps its own stop tokens
    InputProcessor().validate(p)
    assert p.stop_token_ids == [EOS]
    p = SamplingParams()
    InputProcessor().validate(p)
    assert p.stop_token_ids == []


# ---- the device path's host side ------------------------------------------


def test_device_masker_host_parts(tries):
    """The pinned staging and the torch fallback apply (what runs on a
    CUDA device without treemask's kernel), on the CPU; and the processor
    driven through its device path (a non-CPU device is all it checks)."""
    dm = DeviceMasker(4, (V + 31) // 32, torch.device("cpu"), False)
    dm.wait_host()
    a = dm.host
    trie = treemask.Trie.load(tries["a"])
    trie.fill_states(np.array([treemask.STATE_ROOT] * 3, dtype=np.uint32), a[:3])
    logits = torch.randn(3, V)
    before = logits.clone()
    dm.apply(logits, 3, [0, 2], V)
    assert allowed(logits[0]) == allowed(logits[2]) == {1, 7}
    assert torch.equal(logits[1], before[1])
    assert torch.equal(logits[0, [1, 7]], before[0, [1, 7]])
    # the whole processor through the device path, with "meta"-free CPU
    # tensors standing in for the device ones
    proc = make_processor()
    proc._masker = DeviceMasker(SLOTS, (V + 31) // 32, torch.device("cpu"), False)
    proc._host = proc._masker.host
    proc.batch.bind_bitmask(proc._host)
    out = []
    proc.update_state(BatchUpdate(batch_size=2, removed=[], moved=[], added=[
        (0, params(), None, []), (1, params(treemask_trie=tries["a"]), None, out)]))
    before, logits = step(proc, 2)
    assert torch.equal(logits[0], before[0]) and allowed(logits[1]) == {1, 7}
    out.append(7)
    _, logits = step(proc, 2)
    assert allowed(logits[1]) == {8, 13}


# ---- randomised: vLLM's own persistent batch ------------------------------


def test_random_batches_through_vllms_input_batch(tries):
    from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

    rng = random.Random(1234)
    proc = make_processor(slots=SLOTS)
    batch = InputBatch(max_num_reqs=SLOTS, max_model_len=64, max_num_batched_tokens=256,
                       device=torch.device("cpu"), vocab_size=V, block_sizes=[16], max_num_blocks_per_req=[4],
                       logitsprocs=LogitsProcessors([proc]), logitsprocs_need_output_token_ids=True)
    trie_a = treemask.Trie.load(tries["a"])
    trie_b = treemask.Trie.from_jsonl(tries["b"], V, [EOS])
    choice = treemask.Trie.from_labels(["ab", "abc", "b"], byte_tokenizer, V, [EOS], prefix="")
    kinds = [("a", {"treemask_trie": tries["a"]}, trie_a), ("b", {"treemask_trie": tries["b"]}, trie_b),
             ("c", {"treemask_choices": ["ab", "abc", "b"]}, choice), ("u", None, None)]
    seen = {"swap": 0, "move": 0, "removed": 0, "resumed": 0}
    original_update = proc.update_state

    def recording_update(update):
        if update is not None:
            seen["removed"] += len(update.removed)
            seen["resumed"] += sum(1 for a in update.added if a[3])
            for _, _, d in update.moved:
                seen["swap" if d == MoveDirectionality.SWAP else "move"] += 1
        original_update(update)

    proc.update_state = recording_update
    live = {}  # req_id -> (state, trie, max_tokens)
    pending = []  # preempted requests waiting to resume
    counter = 0
    checked = 0
    for _ in range(300):
        # finish or preempt some requests; add, condense and reorder as the model runner does
        for req_id in list(live):
            if rng.random() < 0.15:
                batch.remove_request(req_id)
                state, trie, max_tokens = live.pop(req_id)
                if rng.random() < 0.3 and len(state.output_token_ids) < max_tokens:  # preempted: back later
                    live_again = CachedRequestState(
                        req_id=req_id + "r", prompt_token_ids=[1, 2], mm_features=[],
                        sampling_params=state.sampling_params, generator=None, block_ids=([],),
                        num_computed_tokens=0, output_token_ids=list(state.output_token_ids))
                    pending.append((live_again, trie, max_tokens))
        # add new (and resumed) requests while there is room
        while batch.num_reqs < SLOTS and (pending or rng.random() < 0.6):
            if pending:
                state, trie, max_tokens = pending.pop()
            else:
                counter += 1
                name, extra, trie = rng.choice(kinds)
                max_tokens = rng.randint(1, 8)
                state = CachedRequestState(
                    req_id="r%d%s" % (counter, name), prompt_token_ids=[1, 2], mm_features=[],
                    sampling_params=SamplingParams(max_tokens=max_tokens, extra_args=extra,
                                                   temperature=rng.choice([0.0, 1.0])),
                    generator=None, block_ids=([],), num_computed_tokens=0, output_token_ids=[])
            batch.add_request(state)
            live[state.req_id] = (state, trie, max_tokens)
        batch.condense()
        if batch.num_reqs >= 2 and rng.random() < 0.3:  # vLLM's reordering (decodes first)
            i, j = rng.sample(range(batch.num_reqs), 2)
            batch.swap_states(i, j)
        batch.refresh_metadata()
        n = batch.num_reqs
        if n == 0:
            continue
        logits = torch.randn(n, V)
        before = logits.clone()
        proc.apply(logits)
        for i, req_id in enumerate(batch.req_ids):
            state, trie, max_tokens = live[req_id]
            if trie is None:
                assert torch.equal(logits[i], before[i]), req_id
                token = rng.randrange(256)
            else:
                want = expected_allowed(trie, state.output_token_ids, max_tokens)
                assert allowed(logits[i]) == want, (req_id, state.output_token_ids)
                token = rng.choice(sorted(want))
                checked += 1
            state.output_token_ids.append(token)
            if len(state.output_token_ids) >= max_tokens or token == EOS:
                batch.remove_request(req_id)
                live.pop(req_id)
    assert checked > 200
    assert all(v > 10 for v in seen.values()), seen  # every kind of update happened



# ---- issue 21: the worker side, the frontend hooks, threads ----------------


def test_max_tokens_that_no_label_fits_is_refused_at_submission(tries):
    """Item 6: with max_tokens=1 and a 3-token choice the server returned a
    cut label (finish_reason "length")."""
    with pytest.raises(ValueError, match=re.escape("max_tokens 2 cannot hold the trie's shortest sequence (2 tokens)"
                                                   " and its stop token: give max_tokens >= 3")):
        InputProcessor().validate(SamplingParams(max_tokens=2, extra_args={"treemask_trie": tries["a"]}))
    InputProcessor().validate(SamplingParams(max_tokens=3, extra_args={"treemask_trie": tries["a"]}))
    with pytest.raises(ValueError, match=r"shortest sequence \(15 tokens\)"):
        InputProcessor().validate(SamplingParams(max_tokens=1, extra_args={"treemask_choices": ["hello world foo"]}))


def test_a_file_outside_the_allowed_directories_fails_closed_in_the_worker(tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "x.tmtrie"
    treemask.Trie.from_paths([[1, 2]], V, [EOS]).save(elsewhere)
    proc = make_processor()
    proc.update_state(BatchUpdate(batch_size=1, removed=[], moved=[],
                                  added=[(0, params(treemask_trie=str(elsewhere)), None, [])]))
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {EOS}
    with pytest.raises(ValueError, match=REFUSED):
        InputProcessor().validate(SamplingParams(extra_args={"treemask_trie": str(elsewhere)}))


def test_request_stop_tokens_do_not_load_the_file_again(tries):
    proc = make_processor()
    added = [(i, params(treemask_trie=tries["b"], treemask_stop_tokens=[EOS + (i % 5)]), None, [24])
             for i in range(SLOTS)]
    proc.update_state(BatchUpdate(batch_size=SLOTS, removed=[], moved=[], added=added))
    _, logits = step(proc, SLOTS)
    for i in range(SLOTS):
        assert allowed(logits[i]) == {EOS + (i % 5)}
    assert processor.registry.n_file_loads == 1


def test_the_api_servers_hooks_are_installed():
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    from vllm.v1.engine.async_llm import AsyncLLM

    assert frontend.installed == {"prepare": True, "beam_search": True, "warm_up": True}
    assert tv.registry is processor.registry and isinstance(tv.registry, tv.TrieRegistry)
    assert getattr(AsyncLLM.add_request, "_treemask_hook", False)
    request = CompletionRequest(model="m", prompt="x", max_tokens=4, n=2, use_beam_search=True,
                                vllm_xargs={"treemask_choices": ["a"]})
    with pytest.raises(ValueError, match="use_beam_search cannot carry a trie"):
        request.to_beam_search_params(4, {})
    plain = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}], n=2,
                                  use_beam_search=True)
    assert plain.to_beam_search_params(4, {}).beam_width == 2
    frontend.install()  # idempotent
    assert getattr(AsyncLLM.add_request, "__wrapped__", None) is not None
    assert not getattr(AsyncLLM.add_request.__wrapped__, "_treemask_hook", False)


def test_prepare_loads_off_the_event_loop_and_validation_uses_it(tries, monkeypatch):
    """Item 2: the API server validates on its event loop; the trie is loaded
    on the hook's thread pool first, and validate_params only looks it up."""
    loaded_on = []
    real = processor.registry.trie_for

    def recording(spec, model):
        loaded_on.append(threading.get_ident())
        return real(spec, model)

    engine = types.SimpleNamespace(input_processor=InputProcessor())
    p = SamplingParams(max_tokens=8, extra_args={"treemask_choices": ["red", "green"]})

    parsed_on = []
    real_parse = frontend.parse_extra_args

    def recording_parse(extra, settings=None):
        parsed_on.append(threading.get_ident())
        return real_parse(extra, settings)

    async def add_request():
        monkeypatch.setattr(processor.registry, "trie_for", recording)
        monkeypatch.setattr(frontend, "parse_extra_args", recording_parse)
        await frontend._prepare(engine, p)
        assert frontend.take_prepared(p) is not None
        monkeypatch.setattr(processor.registry, "trie_for", lambda *a: pytest.fail("loaded on the loop"))
        # issue 29: the keys of a million strings take seconds to check: parsed once, off the loop
        monkeypatch.setattr(processor, "parse_extra_args", lambda *a: pytest.fail("parsed on the loop"))
        engine.input_processor.validate(p)  # what process_inputs does, on the loop
        return threading.get_ident()

    loop_thread = asyncio.run(add_request())
    monkeypatch.setattr(processor, "parse_extra_args", real_parse)
    assert loaded_on and loaded_on[0] != loop_thread
    assert parsed_on and loop_thread not in parsed_on
    assert EOS in p.stop_token_ids
    frontend._prepared.clear()
    monkeypatch.setattr(processor.registry, "trie_for", real)
    # an error is the request's error
    bad = SamplingParams(extra_args={"treemask_trie": "/nonexistent/x.tmtrie"})
    with pytest.raises(ValueError, match=REFUSED):
        asyncio.run(frontend._prepare(engine, bad))


def test_processor_refuses_a_second_thread():
    proc = make_processor()
    entered, release = threading.Event(), threading.Event()

    def slow(batch_update):
        entered.set()
        release.wait(10)

    proc._catch_up = lambda: slow(None)
    proc.update_state(BatchUpdate(batch_size=1, removed=[], moved=[],
                                  added=[(0, params(treemask_choices=["a"]), None, [])]))
    t = threading.Thread(target=lambda: proc.apply(torch.zeros(1, V)))
    t.start()
    assert entered.wait(10)
    with pytest.raises(treemask.InvalidStateError, match="another thread"):
        proc.update_state(BatchUpdate(batch_size=1, removed=[0], moved=[], added=[]))
    release.set()
    t.join(10)


# ---- what vLLM does not route through logits processors (item 6) ----------


def test_vllm_beam_search_carries_no_extra_args():
    """vLLM's beam search takes BeamSearchParams, which have no extra_args,
    and builds its own single-token SamplingParams per step: a constrained
    beam search through treemask's keys is impossible there, hence
    treemask.vllm.beam_search (test_beam_search.py). If vLLM adds the field,
    this fails: then test vLLM's own beam search with treemask's keys."""
    from vllm.sampling_params import BeamSearchParams

    assert "extra_args" not in BeamSearchParams.__struct_fields__
    with pytest.raises(TypeError):
        BeamSearchParams(beam_width=2, max_tokens=4, extra_args={"treemask_choices": ["a"]})


def test_vllm_builds_no_custom_processor_under_speculative_decoding():
    """With speculative decoding vLLM skips the installed plugins (and
    refuses named ones), which is why validation refuses our requests on
    such an engine."""
    from vllm.v1.sample.logits_processor import build_logitsprocs

    config = types.SimpleNamespace(speculative_config=object(), model_config=model_config(),
                                   scheduler_config=types.SimpleNamespace(max_num_seqs=2))
    procs = build_logitsprocs(config, torch.device("cpu"), False, False, ())
    assert not any(isinstance(p, tv.TrieLogitsProcessor) for p in procs.all)
    with pytest.raises(ValueError, match="speculative decoding"):
        build_logitsprocs(config, torch.device("cpu"), False, False, [tv.TrieLogitsProcessor])
    # without it, the installed entry point alone brings treemask in
    config.speculative_config = None
    procs = build_logitsprocs(config, torch.device("cpu"), False, False, ())
    assert any(isinstance(p, tv.TrieLogitsProcessor) for p in procs.all)


# ---- issue 23: choice lists in any tokenization --------------------------------


def byte_vocab():
    pieces = [bytes([b]) for b in range(256)] + [b"re", b"red", b"gr", b"een"]
    pieces += [b"<%d>" % i for i in range(len(pieces), EXTRA_STOP + 1)]
    return treemask.Vocab.from_token_bytes(pieces, V, [i >= 260 for i in range(len(pieces))])


def test_any_tokenization_rows_walk_the_bytes_without_a_length_budget():
    proc = make_processor()
    proc.model._vocab = byte_vocab()
    out = []
    extra = {"treemask_choices": ["red", "green"], "treemask_tokenization": "any"}
    proc.update_state(BatchUpdate(batch_size=1, removed=[], moved=[], added=[
        (0, params(max_tokens=2, **extra), None, out)]))
    # Every spelling's first token; a budget of 2 tokens cuts none of them
    # (a string set has no length budget: "g" "r" "e" "e" "n" stays allowed).
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {ord("r"), ord("g"), 256, 257, 258}
    for t in (ord("g"), ord("r")):
        out.append(t)
        _, logits = step(proc, 1)
    assert allowed(logits[0]) == {ord("e"), 259}
    out.append(259)
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {EOS}


def test_any_tokenization_is_validated_at_submission():
    frontend_processor = InputProcessor()
    model = tv.model.model_of_input_processor(frontend_processor)
    model._vocab = byte_vocab()
    extra = {"treemask_choices": ["red", "green"], "treemask_tokenization": "any"}
    # "red" is one token: a max_tokens of 2 holds it and its stop token.
    frontend_processor.validate(SamplingParams(max_tokens=2, extra_args=extra))
    with pytest.raises(ValueError, match=re.escape("shortest sequence (1 tokens)")):
        frontend_processor.validate(SamplingParams(max_tokens=1, extra_args=extra))
    with pytest.raises(ValueError, match="treemask_tokenization: want one of 'canonical', 'any'"):
        frontend_processor.validate(SamplingParams(extra_args={**extra, "treemask_tokenization": "utf8"}))
