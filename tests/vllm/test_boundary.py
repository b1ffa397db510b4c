"""Issue 29, driven at the processor (no model, no server): one boundary
where a request meets a trie and a model (every token id a request or its
file brings is checked at submission and refused with a message naming the
key and the token; a string set must be over the model's own vocabulary),
and a worker that never dies for one request (any exception for one row
fails that row closed, the other rows go on, no exception reaches vLLM).

The same through a real ``vllm serve``: test_server.py (the refusals as HTTP
400) and test_faults.py (failures injected into the worker of a running
server).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import logging
import re

import numpy as np
import pytest
import torch

import treemask
from treemask import vllm as tv
from treemask.vllm import beam, boundary, processor
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessors

from test_processor import (EOS, EXTRA_STOP, SLOTS, V, InputProcessor, allowed, byte_tokenizer, byte_vocab,  # noqa: F401
                            fresh_registry, make_processor, params, step, tries)


def refused(extra, message, **kwargs):
    with pytest.raises(ValueError, match="treemask: .*" + message):
        InputProcessor().validate(SamplingParams(extra_args=extra, **kwargs))


def add(proc, *rows):
    """Adds (index, params, output) rows to the processor's batch."""
    proc.update_state(BatchUpdate(batch_size=len(rows), removed=[], moved=[],
                                  added=[(i, p, None, out) for i, p, out in rows]))


# ---- the boundary: stop overrides ------------------------------------------------


@pytest.mark.parametrize("token", [V, V + 1, 151936, 2**31 - 2])
def test_a_stop_token_outside_the_vocabulary_is_refused_at_submission(tries, token):
    """The review's crash: a stop override past the vocabulary passed the
    front end and killed the worker. Refused for every kind of source."""
    want = re.escape("treemask_stop_tokens: token %d is outside the trie's vocabulary (its vocab_size is %d)"
                     % (token, V))
    refused({"treemask_trie": tries["a"], "treemask_stop_tokens": [EOS, token]}, want)
    refused({"treemask_trie": tries["b"], "treemask_stop_tokens": [token]}, want)
    # a choice list is built with its stop tokens: checked before it is compiled
    refused({"treemask_choices": ["ab", "c"], "treemask_stop_tokens": [token]},
            re.escape("treemask_stop_tokens: token %d is outside the model's vocabulary (its vocab_size is %d)"
                      % (token, V)))


def test_a_stop_token_past_a_small_tries_vocabulary_is_refused(tmp_path):
    small = tmp_path / "small.tmtrie"
    treemask.Trie.from_paths([[1, 2], [3]], 100, [50]).save(small)
    refused({"treemask_trie": str(small), "treemask_stop_tokens": [EOS]},
            re.escape("token %d is outside the trie's vocabulary (its vocab_size is 100)" % EOS))
    p = SamplingParams(extra_args={"treemask_trie": str(small), "treemask_stop_tokens": [99]})
    InputProcessor().validate(p)  # in range: valid
    assert 99 in p.stop_token_ids


@pytest.mark.parametrize("token", [1, 2, 6, 12])
def test_a_stop_token_used_inside_the_paths_is_refused(tries, token):
    """A stop token only ends a sequence: the paths that need it as text
    (here [1, 2, 3], [7 .. 12] ...) could never be generated (the worker
    fails the row closed: HTTP 200 with empty text, before this check)."""
    refused({"treemask_trie": tries["a"], "treemask_stop_tokens": [EXTRA_STOP, token]},
            re.escape("treemask_stop_tokens: token %d is used inside the trie's sequences, and a stop token may"
                      " only end a sequence" % token))
    # the message says which token, never the trie's paths
    with pytest.raises(ValueError) as e:
        InputProcessor().validate(SamplingParams(extra_args={"treemask_trie": tries["a"],
                                                             "treemask_stop_tokens": [token]}))
    assert "[1 2" not in str(e.value) and "path [" not in str(e.value)


def test_valid_stop_overrides_are_accepted_and_served(tries):
    p = SamplingParams(extra_args={"treemask_trie": tries["a"], "treemask_stop_tokens": [EXTRA_STOP, 100]})
    InputProcessor().validate(p)
    assert {EXTRA_STOP, 100} <= set(p.stop_token_ids)
    proc = make_processor()
    out = [1, 6]
    add(proc, (0, params(treemask_trie=tries["a"], treemask_stop_tokens=[EXTRA_STOP, 100]), out))
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {EXTRA_STOP, 100}


def test_a_beam_token_outside_the_vocabulary_is_refused(tries):
    refused({"treemask_trie": tries["a"], "treemask_beam_tokens": [1, V + 5]},
            re.escape("treemask_beam_tokens[1]: token %d does not continue a sequence" % (V + 5)), max_tokens=1)


# ---- the boundary: string sets over the model's vocabulary -------------------------


def other_vocab(width=V):
    """A vocabulary of the same shape as byte_vocab with other token bytes."""
    pieces = [bytes([(b + 1) % 256]) for b in range(256)] + [b"re", b"red", b"gr", b"een"]
    pieces += [b"<%d>" % i for i in range(len(pieces), width)]
    return treemask.Vocab.from_token_bytes(pieces[:width], width, [i >= 260 for i in range(width)])


@pytest.mark.parametrize("width", [V, 280])
def test_a_string_set_over_another_vocabulary_is_refused(tmp_path, width):
    """The review's wrong answers: a string set built over a vocabulary of
    the same width but other bytes (or a smaller one) was served."""
    path = tmp_path / "colors.tmtrie"
    treemask.Trie.from_strings(["red", "green"], other_vocab(width), [min(EOS, width - 5)]).save(path)
    frontend_processor = InputProcessor()
    tv.model.model_of_input_processor(frontend_processor)._vocab = byte_vocab()
    with pytest.raises(ValueError, match=r"treemask: treemask_trie '.*colors.tmtrie' is a string set over another"
                                         r" vocabulary \(fingerprint [0-9a-f]{16}, vocab_size %d\) than this"
                                         r" model's \(fingerprint [0-9a-f]{16}, vocab_size %d\)" % (width, V)):
        frontend_processor.validate(SamplingParams(extra_args={"treemask_trie": str(path)}))
    # and in the worker (a file replaced after submission): the row fails closed
    proc = make_processor()
    proc.model._vocab = byte_vocab()
    add(proc, (0, params(treemask_trie=str(path)), []))
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {EOS}


def test_a_string_set_over_the_models_vocabulary_is_served(tmp_path):
    path = tmp_path / "colors.tmtrie"
    treemask.Trie.from_strings(["red", "green"], byte_vocab(), [EOS]).save(path)
    frontend_processor = InputProcessor()
    tv.model.model_of_input_processor(frontend_processor)._vocab = byte_vocab()
    frontend_processor.validate(SamplingParams(max_tokens=8, extra_args={"treemask_trie": str(path)}))
    proc = make_processor()
    proc.model._vocab = byte_vocab()
    out = []
    add(proc, (0, params(treemask_trie=str(path)), out))
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {ord("r"), ord("g"), 256, 257, 258}
    out.append(257)  # "red"
    _, logits = step(proc, 1)
    assert allowed(logits[0]) == {EOS}


def test_check_trie_names_what_differs():
    model = tv.ModelInfo(V, [EOS], vocab=byte_vocab())
    model.check_trie(treemask.Trie.from_paths([[1]], V, [EOS]), "t")
    model.check_trie(treemask.Trie.from_strings(["red"], byte_vocab(), [EOS]), "t")
    with pytest.raises(tv.RequestError, match=r"t was built for a larger vocabulary \(vocab_size 301\)"):
        model.check_trie(treemask.Trie.from_paths([[1]], V + 1, [EOS]), "t")
    with pytest.raises(tv.RequestError, match="t is a string set over another vocabulary"):
        model.check_trie(treemask.Trie.from_strings(["red"], other_vocab(), [EOS]), "t")


# ---- the worker never dies for one request ----------------------------------------------


@pytest.fixture
def three_rows(tries):
    """A processor with three constrained rows: a (trie a), b (jsonl b) and
    c (a choice list), each at its root; and what each row allows there."""
    proc = make_processor()
    outs = [[], [], []]
    add(proc, (0, params(treemask_trie=tries["a"]), outs[0]), (1, params(treemask_trie=tries["b"]), outs[1]),
        (2, params(treemask_choices=["ab", "b"]), outs[2]))
    return proc, outs, [{1, 7}, {20, 24}, {ord("a"), ord("b")}]


def test_a_stop_override_past_the_vocabulary_fails_closed_in_the_worker(tries):
    """A request that reaches the worker without the front end's check (the
    review's crash: the fallback itself raised OutOfRangeError there)."""
    proc = make_processor()
    add(proc, (0, params(treemask_trie=tries["a"], treemask_stop_tokens=[V]), []),
        (1, params(treemask_trie=tries["a"]), []))
    _, logits = step(proc, 2)
    assert allowed(logits[0]) == {EOS} and allowed(logits[1]) == {1, 7}


def test_a_failure_when_a_row_is_added_fails_that_row_only(tries, monkeypatch, caplog):
    real = beam.is_beam_request

    def failing(extra_args):
        if extra_args.get("treemask_choices") == ["poison"]:
            raise RuntimeError("injected")
        return real(extra_args)

    monkeypatch.setattr(beam, "is_beam_request", failing)
    proc = make_processor()
    outs = [[], [], []]
    with caplog.at_level(logging.ERROR, "treemask.vllm"):
        add(proc, (0, params(treemask_trie=tries["a"]), outs[0]), (1, params(treemask_choices=["poison"]), outs[1]),
            (2, params(treemask_trie=tries["b"]), outs[2]))
    assert "batch row 1) fails closed, only stop tokens from now on: RuntimeError: injected" in caplog.text
    _, logits = step(proc, 3)
    assert [allowed(logits[i]) for i in range(3)] == [{1, 7}, {EOS}, {20, 24}]
    outs[0].append(7)
    outs[2].append(20)
    _, logits = step(proc, 3)
    assert [allowed(logits[i]) for i in range(3)] == [{8, 13}, {EOS}, {21, 22}]


def test_a_failing_fill_fails_only_its_row(three_rows, monkeypatch):
    proc, outs, want = three_rows
    real_fill = treemask.matcher._MatcherMethods.fill_next_token_bitmask

    def fill_bound(self, slots=None, **kwargs):
        raise RuntimeError("injected batch fill")

    def fill_row(self, *args, **kwargs):
        if self._trie.labels == ("ab", "b"):
            raise RuntimeError("injected row fill")
        return real_fill(self, *args, **kwargs)

    monkeypatch.setattr(treemask.BatchMatcher, "fill_bound", fill_bound)
    monkeypatch.setattr(treemask.matcher._MatcherMethods, "fill_next_token_bitmask", fill_row)
    _, logits = step(proc, 3)
    assert [allowed(logits[i]) for i in range(3)] == [want[0], want[1], {EOS}]
    outs[0].append(7)
    _, logits = step(proc, 3)
    assert [allowed(logits[i]) for i in range(3)] == [{8, 13}, want[1], {EOS}]


def test_a_failing_batch_accept_fails_the_rows_it_fed(three_rows, monkeypatch):
    proc, outs, want = three_rows
    step(proc, 3)

    def accept_tokens(self, tokens):
        raise RuntimeError("injected accept")

    monkeypatch.setattr(treemask.BatchMatcher, "accept_tokens", accept_tokens)
    outs[0].append(7)  # only row 0 generated a token
    _, logits = step(proc, 3)
    assert [allowed(logits[i]) for i in range(3)] == [{EOS}, want[1], want[2]]


def test_a_failing_mask_kernel_is_redone_row_by_row(three_rows, monkeypatch):
    proc, outs, want = three_rows

    def kernel(*args, **kwargs):
        raise RuntimeError("injected kernel")

    monkeypatch.setattr(processor, "apply_token_bitmask_inplace", kernel)
    logits = torch.randn(4, V)
    before = logits.clone()
    proc.apply(logits)
    assert [allowed(logits[i]) for i in range(3)] == want
    assert torch.equal(logits[3], before[3])  # an unconstrained row
    for i in range(3):  # the allowed logits are untouched
        keep = sorted(want[i])
        assert torch.equal(logits[i, keep], before[i, keep])


def test_a_failing_reorder_fails_every_row_closed_without_raising(three_rows, monkeypatch):
    proc, outs, want = three_rows

    def reorder(self, src):
        raise RuntimeError("injected reorder")

    from vllm.v1.sample.logits_processor import MoveDirectionality

    monkeypatch.setattr(treemask.BatchMatcher, "reorder", reorder)
    proc.update_state(BatchUpdate(batch_size=3, removed=[], added=[], moved=[(0, 2, MoveDirectionality.SWAP)]))
    _, logits = step(proc, 3)
    assert [allowed(logits[i]) for i in range(3)] == [{EOS}] * 3


def test_a_failing_beam_normalization_fails_only_that_beam(tries, monkeypatch):
    proc = make_processor()
    real = beam.normalize_beam_rows

    def normalize(logits, rows):
        if 1 in rows:
            raise RuntimeError("injected normalize")
        return real(logits, rows)

    monkeypatch.setattr(beam, "normalize_beam_rows", normalize)
    # (the prompt ends with the beam's tokens, as the driver sends it)
    proc.update_state(BatchUpdate(batch_size=2, removed=[], moved=[], added=[
        (0, params(treemask_trie=tries["a"], treemask_beam_tokens=[7], max_tokens=1), [5, 7], []),
        (1, params(treemask_trie=tries["a"], treemask_beam_tokens=[1], max_tokens=1), [5, 1], [])]))
    logits = torch.randn(2, V)
    before = logits.clone()
    proc.apply(logits)
    assert allowed(logits[0]) == {8, 13} and allowed(logits[1]) == {EOS}
    norm = torch.log_softmax(before[0], dim=-1)
    assert torch.allclose(logits[0, [8, 13]], norm[[8, 13]])


def test_the_request_id_is_read_from_vllms_input_batch(tries, caplog, monkeypatch):
    """The log names the failed request by vLLM's id (vLLM gives a logits
    processor batch indices only: the id comes from its InputBatch)."""
    from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

    real = beam.is_beam_request

    def failing(extra_args):
        if extra_args.get("treemask_choices") == ["poison"]:
            raise RuntimeError("injected")
        return real(extra_args)

    monkeypatch.setattr(beam, "is_beam_request", failing)
    proc = make_processor()
    batch = InputBatch(max_num_reqs=SLOTS, max_model_len=64, max_num_batched_tokens=256,
                       device=torch.device("cpu"), vocab_size=V, block_sizes=[16], max_num_blocks_per_req=[4],
                       logitsprocs=LogitsProcessors([proc]), logitsprocs_need_output_token_ids=True)
    for req_id, extra in (("cmpl-good", {"treemask_trie": tries["a"]}), ("cmpl-poisoned-7", {"treemask_choices":
                                                                                          ["poison"]})):
        batch.add_request(CachedRequestState(
            req_id=req_id, prompt_token_ids=[1, 2], mm_features=[], sampling_params=SamplingParams(
                max_tokens=8, extra_args=extra), generator=None, block_ids=([],), num_computed_tokens=0,
            output_token_ids=[]))
    with caplog.at_level(logging.ERROR, "treemask.vllm"):
        batch.refresh_metadata()
    assert "request cmpl-poisoned-7 (batch row 1) fails closed" in caplog.text
    logits = torch.randn(2, V)
    proc.apply(logits)
    assert allowed(logits[0]) == {1, 7} and allowed(logits[1]) == {EOS}


def test_boundary_and_worker_build_the_same_matcher(tries):
    """request_matcher is what both sides use: the budget, the stops and the
    policy of the request."""
    spec = tv.parse_extra_args({"treemask_trie": tries["a"], "treemask_stop_tokens": [EXTRA_STOP]})
    trie = treemask.Trie.load(tries["a"])
    m = boundary.request_matcher(spec, trie, 3)
    assert m.accept_token(1) and set(m.next_tokens()) == {6}  # only [1, 6] fits 3 tokens with its stop
    assert m.accept_token(6) and m.next_tokens() == [EXTRA_STOP]
    assert boundary.check_request(spec, trie, tv.ModelInfo(V, [EOS]), 3) == [EXTRA_STOP]
    np.testing.assert_equal(boundary.stop_tokens_of(tv.parse_extra_args({"treemask_trie": tries["a"]}), trie), [EOS])
