"""The CUDA paths of the Python package, on a GPU: apply on CUDA tensors on
the tensor's current stream, DeviceTrie's fused step against the CPU state
arrays, a CUDA-graph capture of the step, the transformers processor with
scores on the GPU (its device path against its host path, with no host
synchronisation), the device beam step and top-k (DeviceTrie, DeviceBeam and
its graph capture, BatchMatcher with CUDA logits, treemask.hf.beam_search on
CUDA) against the host ones.

Without a GPU (or a libtreemask without CUDA) every test skips. With
TREEMASK_TEST_CUDA_ON_HOST=1 the tests run on the CPU instead: tensors on
the CPU, the device entry points answered by their host twins
(host_cuda.py), streams and graphs replaced by direct calls, and the few
tests that need a real device (a second stream racing, a device mismatch,
routing by device type) skipped. That run checks the tests' own logic on
every machine (suite `python`); the kernels themselves are compared with the
host twins under the CUDA emulation (tests/cuda).

On a GPU machine without pytest, run it as a script: `python test_cuda.py`
(exit 77 = skipped); build-gpu/run.sh does.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import contextlib
import os
import random
import sys

import numpy as np

try:
    import pytest
except ImportError:  # the GPU machine may have no pytest: see main() below
    pytest = None

import treemask

try:
    import torch
except ImportError:
    torch = None


HOST_MODE = os.environ.get("TREEMASK_TEST_CUDA_ON_HOST") == "1"
DEV = "cpu" if HOST_MODE else "cuda"


def _skip_reason():
    if torch is None:
        return "torch is not installed"
    if HOST_MODE:
        return None
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    if not treemask.cuda_available():
        return "this libtreemask has no usable CUDA (built without nvcc, or the device is too old)"
    return None


SKIP_REASON = _skip_reason()
if pytest is not None:
    pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))


_HOST = None  # the host twins' library (host mode), which counts what it does
if HOST_MODE and SKIP_REASON is None:
    import host_cuda

    # Never undone: the host mode is the whole process's.
    _HOST = host_cuda.install(host_cuda.Patches())


def _side_stream():
    """A second stream (None in the host mode)."""
    return None if HOST_MODE else torch.cuda.Stream()


def _on_stream(stream):
    return contextlib.nullcontext() if stream is None else torch.cuda.stream(stream)


def _synchronize():
    if not HOST_MODE:
        torch.cuda.synchronize()


def _capture(fn):
    """fn captured in a CUDA graph (after one warm-up call on a side stream,
    as torch wants); returns the replay. In the host mode: fn itself, after
    the same warm-up call."""
    side = _side_stream()
    if side is not None:
        side.wait_stream(torch.cuda.current_stream())
    with _on_stream(side):
        fn()
    if HOST_MODE:
        return fn
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def _device_path(processor):
    """The processor on its device path (in the host mode, CPU scores take
    it too)."""
    if HOST_MODE:
        processor._device_path = lambda scores: True
    return processor


def _needs_gpu(why):
    if HOST_MODE:
        skip("needs a real GPU: %s" % why)


class _Skipped(Exception):
    """A test that cannot run here, in the script runner (main)."""


def skip(reason):
    if pytest is not None:
        pytest.skip(reason)
    raise _Skipped(reason)


def _transformers():
    try:
        import transformers
    except ImportError:
        skip("transformers is not installed on this machine")
    return transformers

VOCABS = [1, 31, 32, 33, 1000, 151936]


def _cpu_reference(logits_cpu, bitmask_cpu, vocab_size=None, indices=None):
    out = logits_cpu.clone()
    treemask.apply_token_bitmask_inplace(out, bitmask_cpu, vocab_size=vocab_size, indices=indices)
    return out


def test_apply_matches_the_cpu_kernel():
    gen = torch.Generator().manual_seed(1)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for vocab in VOCABS:
            for rows in (1, 5):
                width = vocab + (3 if vocab > 32 else 0)
                words = (vocab + 31) // 32
                logits = torch.randn((rows, width), generator=gen).to(dtype)
                bitmask = torch.randint(-2**31, 2**31 - 1, (rows, words), generator=gen, dtype=torch.int32)
                bitmask[0, :] = 0  # an all-masked row (store-only path)
                if rows > 1:
                    bitmask[1, :] = -1  # an all-allowed row (skipped words)
                want = _cpu_reference(logits, bitmask, vocab_size=vocab)
                dev_logits = logits.to(DEV)
                treemask.apply_token_bitmask_inplace(dev_logits, bitmask.to(DEV), vocab_size=vocab)
                assert torch.equal(dev_logits.cpu(), want), (dtype, vocab, rows)


def test_apply_strided_rows_and_indices():
    gen = torch.Generator().manual_seed(2)
    wide = torch.randn((6, 1100), generator=gen)
    bitmask = torch.randint(-2**31, 2**31 - 1, (6, 32), generator=gen, dtype=torch.int32)
    want = wide.clone()
    want[:, :1000] = _cpu_reference(wide[:, :1000].contiguous(), bitmask, indices=[0, 4])
    dev = wide.to(DEV)
    treemask.apply_token_bitmask_inplace(dev[:, :1000], bitmask.to(DEV), indices=[0, 4])
    assert torch.equal(dev.cpu(), want)
    dev = wide.to(DEV)
    treemask.apply_token_bitmask_inplace(dev[:, :1000], bitmask.to(DEV),
                                         indices=torch.tensor([0, 4], device=DEV))
    assert torch.equal(dev.cpu(), want)


def test_apply_runs_on_the_current_stream():
    """The apply is enqueued on the logits' current stream, behind that
    stream's earlier work: on a side stream, a delay, then a fill that
    leaves one allowed token per row (bit 0), then the apply. Run on any
    other stream, the apply would not wait for the delay and would read the
    bitmask as it was before (every token allowed)."""
    rows, vocab = 64, 151936
    logits = torch.zeros((rows, vocab), device=DEV)
    bitmask = torch.full((rows, (vocab + 31) // 32), -1, dtype=torch.int32, device=DEV)
    _synchronize()
    side = _side_stream()
    with _on_stream(side):
        if side is not None:
            torch.cuda._sleep(50_000_000)  # ~25 ms of GPU time before the fill
        bitmask.zero_()
        bitmask[:, 0] = 1
        treemask.apply_token_bitmask_inplace(logits, bitmask)
    _synchronize()
    finite = torch.isfinite(logits)
    assert int(finite.sum()) == rows, int(finite.sum())
    assert bool(finite[:, 0].all())
def test_device_mismatch_is_an_error():
    _needs_gpu("logits on a device and a bitmask on the host")
    raised = False
    try:
        treemask.apply_token_bitmask_inplace(torch.zeros((1, 64), device=DEV),
                                             torch.zeros((1, 2), dtype=torch.int32))
    except treemask.InvalidArgumentError as e:
        raised = "never copies" in str(e)
    assert raised


def _random_trie(rng, vocab):
    paths = [[rng.randrange(1, vocab - 1) for _ in range(rng.randint(1, 5))] for _ in range(60)]
    return treemask.Trie.from_paths(paths, vocab, [vocab - 1]), paths


def test_device_trie_step_matches_cpu_state_arrays():
    import treemask.torch as tt

    rng = random.Random(3)
    for vocab in (33, 1000, 151936):
        trie, paths = _random_trie(rng, vocab)
        dev_trie = tt.DeviceTrie(trie)
        rows = 16
        states_cpu = np.zeros(rows, dtype=np.uint32)
        states = dev_trie.new_states(rows)
        bitmask = torch.zeros((rows, trie.bitmask_words), dtype=torch.int32, device=DEV)
        want = treemask.allocate_token_bitmask(rows, vocab)
        accepted = torch.zeros(rows, dtype=torch.uint8, device=DEV)
        tokens = None
        for step in range(8):
            for policy in ("reject",):
                dev_tokens = None if tokens is None else torch.tensor(tokens, dtype=torch.int32, device=DEV)
                dev_trie.advance_fill_bitmask(states, dev_tokens, bitmask, failure_policy=policy, accepted=accepted)
                if tokens is not None:
                    want_accepted = trie.advance_states(states_cpu, tokens, failure_policy=policy)
                    assert accepted.cpu().numpy().astype(bool).tolist() == want_accepted.tolist()
                trie.fill_states(states_cpu, want)
                assert states.cpu().numpy().view(np.uint32).tolist() == states_cpu.tolist()
                assert np.array_equal(bitmask.cpu().numpy(), want)
            # Mostly allowed tokens, some rejected ones, some rows idle.
            tokens = []
            for r in range(rows):
                row = want[r]
                allowed = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little"))
                pick = rng.random()
                tokens.append(-1 if pick < 0.1 else rng.randrange(vocab) if pick < 0.2 else int(rng.choice(allowed)))


def test_device_trie_masks_logits_and_replays_in_a_cuda_graph():
    import treemask.torch as tt

    rng = random.Random(5)
    vocab = 151936
    trie, paths = _random_trie(rng, vocab)
    dev_trie = tt.DeviceTrie(trie)
    rows = 8
    states = dev_trie.new_states(rows)
    tokens = torch.full((rows,), -1, dtype=torch.int32, device=DEV)
    logits = torch.zeros((rows, vocab + 64), dtype=torch.bfloat16, device=DEV)
    replay = _capture(lambda: dev_trie.advance_mask_logits(states, tokens, logits))
    states.zero_()  # the warm-up call advanced them (by no token: -1)
    states_cpu = np.zeros(rows, dtype=np.uint32)
    want_mask = treemask.allocate_token_bitmask(rows, vocab)
    for step in range(5):
        trie.fill_states(states_cpu, want_mask)
        picks = []
        for r in range(rows):
            allowed = np.flatnonzero(np.unpackbits(want_mask[r].view(np.uint8), bitorder="little"))
            picks.append(int(rng.choice(allowed)))
        tokens.copy_(torch.tensor(picks, dtype=torch.int32))
        logits.zero_()
        replay()
        trie.advance_states(states_cpu, picks)
        trie.fill_states(states_cpu, want_mask)
        want = torch.zeros((rows, vocab + 64), dtype=torch.bfloat16)
        treemask.apply_token_bitmask_inplace(want, torch.from_numpy(want_mask), vocab_size=vocab)
        _synchronize()
        assert torch.equal(logits.cpu(), want), step
        assert states.cpu().numpy().view(np.uint32).tolist() == states_cpu.tolist()


def test_device_trie_argument_errors():
    import treemask.torch as tt

    trie = treemask.Trie.from_paths([[1]], 64, [0])
    dev_trie = tt.DeviceTrie(trie)
    states = dev_trie.new_states(2)
    bad_calls = [] if HOST_MODE else [  # host states for a device trie
        (lambda: dev_trie.advance_fill_bitmask(states.cpu(), None, torch.zeros((2, 2), dtype=torch.int32,
                                                                                 device=DEV)), "states")]
    for bad_call, message in bad_calls + [
        (lambda: dev_trie.advance_fill_bitmask(states, torch.zeros(2, dtype=torch.int64, device=DEV),
                                               torch.zeros((2, 2), dtype=torch.int32, device=DEV)), "int32"),
        (lambda: dev_trie.advance_mask_logits(states, None, torch.zeros((2, 64), dtype=torch.float64,
                                                                         device=DEV)), "float32"),
        (lambda: dev_trie.follow_rows(torch.zeros((2, 3), dtype=torch.int32, device=DEV), states,
                                      torch.zeros(2, dtype=torch.int64, device=DEV)), "int64"),
        (lambda: dev_trie.advance_states(states, None), "tokens"),
    ]:
        raised = False
        try:
            bad_call()
        except treemask.InvalidArgumentError as e:
            raised = message in str(e)
        assert raised, message


def test_device_row_states_follow_growing_rows():
    """DeviceRowStates: every row's state equals the walk of its ids from the
    root (Trie.advance_states, the same policy), step after step with the
    rows reordered and duplicated between steps (as beam search does), off-
    trie ids, through a growth of its buffers (past 16 ids, where the
    previous rows must stay readable: no row walks from the root), a new
    row count and a reset, ids read in place (strided rows) and copied
    first (column-major); and mask_logits, the fused update_mask_logits in
    place and as a masked copy (the scores untouched) leave finite exactly
    each state's allowed tokens, with their scores, and the fused call's
    finished_token besides in TERMINATED rows."""
    import treemask.torch as tt

    rng = random.Random(8)
    vocab = 40
    paths = [[rng.randrange(1, vocab - 1) for _ in range(rng.randint(1, 40))] for _ in range(30)]
    trie = treemask.Trie.from_paths(paths, vocab, [vocab - 1])
    rows = tt.DeviceRowStates(tt.DeviceTrie(trie), failure_policy="fail_closed")

    def walked(ids):
        states = np.zeros(len(ids), dtype=np.uint32)
        for r, row in enumerate(ids):
            one = states[r:r + 1]
            for token in row:
                trie.advance_states(one, [token], failure_policy="fail_closed")
        return states.view(np.int32)

    finished_rows = 0
    for n_rows, steps in ((6, 30), (3, 5)):
        rows.reset()
        walks = _HOST.rows_walked if _HOST is not None else 0
        prompt = [[5, 6]] * n_rows
        ids = [[] for _ in range(n_rows)]
        for step in range(steps):
            full = torch.tensor([p + g for p, g in zip(prompt, ids)], dtype=torch.int64, device=DEV)
            if step % 5 == 4:  # column-major ids: not read in place (copied first)
                full = full.t().contiguous().t()
            form = step % 3
            scores = torch.randn((n_rows, vocab + 3), device=DEV).to(torch.bfloat16 if step % 2 else torch.float32)
            before = scores.clone()
            # The generated ids as a slice (strided rows), or the whole rows
            # and the prompt's length as start (read in place from there).
            generated, start = (full, {"start": 2}) if rng.random() < 0.5 else (full[:, 2:], {})
            # The fused call's finished token (a pad id): none, the stop, any.
            finished = rng.choice([None, vocab - 1, rng.randrange(vocab)]) if form else None
            if form == 0:  # the two calls
                states = rows.update(generated, **start)
                logits = scores
                rows.mask_logits(logits)
            elif form == 1:  # one fused call, in place
                logits = scores
                states = rows.update_mask_logits(generated, scores, finished_token=finished, **start)
            else:  # one fused call, a masked copy
                logits = torch.full_like(scores, 7.0)
                states = rows.update_mask_logits(generated, scores, logits, finished_token=finished, **start)
                assert torch.equal(scores, before), "the scores were written"
            assert states.cpu().numpy().tolist() == walked(ids).tolist()
            mask = np.zeros((n_rows, trie.bitmask_words), dtype=np.int32)
            trie.fill_states(states.cpu().numpy().view(np.uint32), mask)
            allowed = np.unpackbits(mask.view(np.uint8), axis=1, bitorder="little")[:, :vocab].astype(bool)
            if finished is not None:
                terminated = states.cpu().numpy().view(np.uint32) == treemask.STATE_TERMINATED
                finished_rows += int(terminated.sum())
                allowed[terminated, finished] = True
            assert (torch.isfinite(logits).cpu().numpy()[:, :vocab] == allowed).all()
            assert not torch.isfinite(logits[:, vocab:]).any()
            kept = torch.isfinite(logits)
            assert torch.equal(logits[kept], before[kept]), "a kept score changed"
            # Beam search: rows reordered and duplicated, then one id each
            # (a path's next id mostly, sometimes any id).
            order = [rng.randrange(n_rows) for _ in range(n_rows)]
            ids = [list(ids[o]) for o in order]
            for row in ids:
                nexts = [p[len(row)] for p in paths if p[:len(row)] == row and len(p) > len(row)]
                row.append(rng.choice(nexts) if nexts and rng.random() < 0.9 else rng.randrange(vocab))
        # Every row extended a row of the step before: none walked from the
        # root, across the growth of the buffers too (the host twin counts).
        assert _HOST is None or _HOST.rows_walked == walks
    assert finished_rows > 0, "no TERMINATED row met a finished token"
    for bad_call, message in [
        (lambda: rows.update(torch.zeros((2, 3), dtype=torch.int32, device=DEV)), "int64"),
        (lambda: rows.update(torch.zeros(3, dtype=torch.int64, device=DEV)), "2-D"),
        (lambda: rows.update(torch.zeros((2, 3), dtype=torch.int64, device=DEV), start=4), "start 4: want a column"),
        (lambda: rows.update(torch.zeros((2, 3), dtype=torch.int64, device=DEV), start=-1), "in [0, 3]"),
        (lambda: rows.update_mask_logits(torch.zeros((2, 3), dtype=torch.int64, device=DEV),
                                         torch.zeros((2, vocab), device=DEV), start=1.0), "start 1.0"),
        (lambda: rows.update(torch.zeros((2, 3), dtype=torch.int64, device=DEV), start=None), "start None"),
        (lambda: rows.update(torch.zeros((2, 3), dtype=torch.int64, device=DEV), start=0.0), "start 0.0"),
        (lambda: rows.mask_logits(torch.zeros((3, vocab), dtype=torch.float64, device=DEV)), "float32"),
        (lambda: rows.update_mask_logits(torch.zeros((3, 1), dtype=torch.int64, device=DEV),
                                         torch.zeros((3, vocab), device=DEV), finished_token=vocab),
         "finished_token %d is outside [0, %d)" % (vocab, vocab)),
        (lambda: rows.update_mask_logits(torch.zeros((3, 1), dtype=torch.int64, device=DEV),
                                         torch.zeros((3, vocab), device=DEV),
                                         torch.zeros((3, vocab), dtype=torch.bfloat16, device=DEV)), "dtype of scores"),
        (lambda: tt.DeviceRowStates(trie), "DeviceTrie"),
    ] + ([] if HOST_MODE else [(lambda: rows.update(torch.zeros((2, 3), dtype=torch.int64)), "never copies")]):
        raised = False
        try:
            bad_call()
        except treemask.InvalidArgumentError as e:
            raised = message in str(e)
        assert raised, message


def test_processor_masks_cuda_scores():
    from treemask.hf import TrieLogitsProcessor

    trie = treemask.Trie.from_paths([[1, 2], [1, 3], [4]], 151936, [151645])
    processor = _device_path(TrieLogitsProcessor(trie))
    scores = torch.zeros((2, 151936), device=DEV)
    out = processor(torch.tensor([[9], [9]], device=DEV), scores)
    assert torch.isfinite(out).sum(dim=1).tolist() == [2, 2]
    assert torch.isfinite(scores).all()  # out of place (issue 14 item 13)
    scores = torch.zeros((2, 151936), device=DEV)
    out = processor(torch.tensor([[9, 1], [9, 4]], device=DEV), scores)
    assert torch.nonzero(torch.isfinite(out[0])).flatten().tolist() == [2, 3]
    assert torch.nonzero(torch.isfinite(out[1])).flatten().tolist() == [151645]


def _beam_logits(rng, rows, vocab, dtype):
    gen = torch.Generator().manual_seed(rng.randrange(1 << 30))
    return (torch.randn((rows, vocab + 7), generator=gen) * 3).to(dtype)[:, :vocab + 3]


def test_device_beam_step_matches_the_host_step():
    """DeviceTrie.beam_step against treemask.Beam.step_states on the same
    inputs, whole searches: parents and tokens exactly, scores to fp
    tolerance, states equal (fp32 rows; fp16/bf16 normalizers may differ in
    the last bits, so those compare scores loosely and tokens where the
    scores are apart)."""
    import treemask.torch as tt

    rng = random.Random(16)
    for vocab in (33, 1000, 151936):
        trie, _paths = _random_trie(rng, vocab)
        dev_trie = tt.DeviceTrie(trie)
        for B, n_requests in ((1, 2), (3, 3), (8, 2)):
            n = B * n_requests
            host = treemask.Beam(B)
            states = np.zeros(n, dtype=np.uint32)
            scores = treemask.initial_scores(n_requests, B)
            d_states = torch.zeros(n, dtype=torch.int32, device=DEV)
            d_scores = torch.from_numpy(scores.copy()).to(DEV)
            bad = torch.zeros(1, dtype=torch.int32, device=DEV)
            for _step in range(6):
                logits = _beam_logits(rng, n, vocab, torch.float32)
                parents, tokens = host.step_states(trie, states, logits, scores)
                d_parents, d_tokens, d_scores = dev_trie.beam_step(d_states, logits.to(DEV), d_scores, B,
                                                                   n_bad_rows=bad)
                assert d_parents.cpu().numpy().tolist() == parents.tolist(), (vocab, B)
                assert d_tokens.cpu().numpy().tolist() == tokens.tolist(), (vocab, B)
                assert np.allclose(d_scores.cpu().numpy(), scores, rtol=1e-5, atol=1e-4, equal_nan=True)
                assert d_states.cpu().numpy().view(np.uint32).tolist() == states.tolist()
            assert int(bad.item()) == 0


def test_device_beam_step_half_precision_and_log_probs():
    import treemask.torch as tt

    rng = random.Random(17)
    trie, _paths = _random_trie(rng, 1000)
    dev_trie = tt.DeviceTrie(trie)
    B, n_requests = 4, 2
    n = B * n_requests
    for dtype in (torch.float16, torch.bfloat16):
        for log_probs in (False, True):
            host = treemask.Beam(B)
            states = np.zeros(n, dtype=np.uint32)
            scores = treemask.initial_scores(n_requests, B)
            d_states = torch.zeros(n, dtype=torch.int32, device=DEV)
            d_scores = torch.from_numpy(scores.copy()).to(DEV)
            logits = _beam_logits(rng, n, 1000, dtype)
            host.step_states(trie, states, logits, scores, log_probs=log_probs)
            _p, _t, d_scores = dev_trie.beam_step(d_states, logits.to(DEV), d_scores, B, log_probs=log_probs)
            got = np.sort(d_scores.cpu().numpy())
            want = np.sort(scores)
            assert np.allclose(got, want, rtol=1e-3, atol=1e-3, equal_nan=True), (dtype, log_probs)


def test_device_topk_matches_the_host():
    """The top-k twins' one contract (treemask.h / treemask_cuda.h): k = 0
    valid on both (zero counts, empty rows), a TERMINATED state allows the
    stop tokens, entries past a count are token -1 / score -inf, counts
    int64 on both, a k past the vocabulary refused by both."""
    import treemask.torch as tt

    rng = random.Random(18)
    for vocab in (33, 151936):
        trie, _paths = _random_trie(rng, vocab)
        dev_trie = tt.DeviceTrie(trie)
        states = np.zeros(5, dtype=np.uint32)
        states[1] = treemask.STATE_TERMINATED
        states[2] = treemask.STATE_FAILED
        logits = _beam_logits(rng, 5, vocab, torch.float32)
        for k in (0, 1, 4, min(40, vocab)):
            want = treemask.topk_states(trie, states, logits, k)
            tokens, scores, counts = dev_trie.topk(torch.from_numpy(states.view(np.int32)).to(DEV), logits.to(DEV), k)
            assert counts.dtype == torch.int64 and want.counts.dtype == np.int64
            assert tuple(tokens.shape) == tuple(want.tokens.shape) == (5, k)
            assert counts.cpu().numpy().tolist() == want.counts.tolist(), (vocab, k)
            assert tokens.cpu().numpy().tolist() == want.tokens.tolist(), (vocab, k)
            assert np.allclose(scores.cpu().numpy(), want.scores, rtol=1e-5, atol=1e-4)
            if k > 4:  # fewer allowed tokens than k: the padding of the contract
                assert (tokens[1, counts[1]:] == -1).all() and (want.tokens[1, want.counts[1]:] == -1).all()
        device_states = torch.from_numpy(states.view(np.int32)).to(DEV)
        for topk, args in ((treemask.topk_states, (trie, states, logits)),
                           (dev_trie.topk, (device_states, logits.to(DEV)))):
            try:
                topk(*args, vocab + 1)
            except treemask.InvalidArgumentError as e:
                assert "more than the trie's vocab_size" in str(e), e
            else:
                raise AssertionError("k = vocab + 1 was not refused by %s" % topk.__name__)


def test_batch_beam_step_on_the_device_follows_the_host_step():
    _needs_gpu("treemask.torch.batch_beam_step steps CUDA logits through the device trie")
    import treemask.torch as tt

    rng = random.Random(19)
    trie, _paths = _random_trie(rng, 1000)
    B, n_requests = 3, 2
    n = B * n_requests
    on_host = treemask.BatchMatcher([treemask.Matcher(trie)] * n)
    on_device = treemask.BatchMatcher([treemask.Matcher(trie)] * n)
    scores_h = treemask.initial_scores(n_requests, B)
    scores_d = torch.from_numpy(scores_h.copy())
    for _step in range(5):
        logits = _beam_logits(rng, n, 1000, torch.float32)
        want = on_host.beam_step(logits.numpy(), scores_h, B)
        got = tt.batch_beam_step(on_device, logits.to(DEV), scores_d, B)
        assert got.parents.device.type == "cuda"
        assert got.parents.cpu().numpy().tolist() == want.parents.tolist()
        assert got.tokens.cpu().numpy().tolist() == want.tokens.tolist()
        scores_h, scores_d = want.scores, got.scores.cpu()
        assert [on_device[i].next_tokens() for i in range(n)] == [on_host[i].next_tokens() for i in range(n)]
    with_modes = treemask.BatchMatcher([treemask.Matcher(trie, leaves_only=True)] * n)
    raised = False
    try:
        tt.batch_beam_step(with_modes, _beam_logits(rng, n, 1000, torch.float32).to(DEV),
                           treemask.initial_scores(2, B), B)
    except treemask.InvalidArgumentError as e:
        raised = "decoding modes" in str(e)
    assert raised
    # The core class imports no adapter: CUDA logits name the device step.
    raised = False
    try:
        on_host.beam_step(logits.to(DEV), scores_h, B)
    except treemask.DeviceTensorError as e:
        raised = "treemask.torch.batch_beam_step" in str(e)
    assert raised


def test_hf_beam_search_on_cuda_equals_the_cpu_search():
    _needs_gpu("beam_search routes by input_ids' device type (test_hf_beam.py runs its device loop on the CPU)")
    transformers = _transformers()
    from treemask.hf import beam_search

    config = transformers.Qwen2Config(vocab_size=1100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(config).eval()
    rng = random.Random(20)
    paths = [[1000 + rng.randrange(30), 1030 + rng.randrange(30), 1060 + rng.randrange(30)] for _ in range(200)]
    trie = treemask.Trie.from_paths(paths, 1100, [1099])
    input_ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    cpu = beam_search(model, input_ids, trie, num_beams=6)
    gpu = beam_search(model.to(DEV), input_ids.to(DEV), trie, num_beams=6)
    assert gpu.sequences.device.type == "cuda"
    assert gpu.sequences.cpu().tolist() == cpu.sequences.tolist()
    assert torch.allclose(gpu.scores.cpu(), cpu.scores, rtol=1e-3, atol=1e-3)


def test_hf_beam_search_compiled_equals_the_eager_search():
    """beam_search(compile=True) on the GPU: a StaticCache and every step
    after the first replayed from one CUDA graph (no RuntimeWarning: the
    capture worked), the same sequences as the eager device search and the
    CPU search, over items of 2 and 3 codes (hypotheses end at different
    steps), fp32 and bf16, sdpa and eager attention; then the next searches
    of the same shapes (other prompts, then the first again), which replay
    that graph from their first step."""
    _needs_gpu("CUDA graph capture of a transformers decode step (test_hf_beam.py runs the same loop on the CPU)")
    import warnings

    transformers = _transformers()
    from treemask import hf
    from treemask.hf import beam_search

    try:
        hf._check_static_cache_api()
    except treemask.UnsupportedError as e:  # this machine's transformers (no network to install ours)
        skip(str(e))
    rng = random.Random(21)
    paths = [[1000 + rng.randrange(30), 1030 + rng.randrange(30), 1060 + rng.randrange(30)][:2 + i % 2]
             for i in range(300)]
    trie = treemask.Trie.from_paths(paths, 1100, [1099])
    input_ids = torch.tensor([[5, 6, 7, 8], [0, 9, 10, 11]], device=DEV)
    other_ids = torch.tensor([[15, 16, 17, 18], [0, 19, 20, 21]], device=DEV)
    attention_mask = torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1]], device=DEV)
    for attention in ("sdpa", "eager"):
        config = transformers.Qwen2Config(vocab_size=1100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                          tie_word_embeddings=True, initializer_range=0.5,
                                          attn_implementation=attention)
        torch.manual_seed(0)
        model = transformers.Qwen2ForCausalLM(config).eval()
        cpu = beam_search(model, input_ids.cpu(), trie, num_beams=6, attention_mask=attention_mask.cpu(),
                          max_new_tokens=6)
        for dtype in (torch.float32, torch.bfloat16):
            model = model.to(device=DEV, dtype=dtype)
            eager = beam_search(model, input_ids, trie, num_beams=6, attention_mask=attention_mask, max_new_tokens=6)
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                compiled = beam_search(model, input_ids, trie, num_beams=6, attention_mask=attention_mask,
                                       max_new_tokens=6, compile=True)
            assert compiled.sequences.tolist() == eager.sequences.tolist(), (attention, dtype)
            tol = 1e-4 if dtype == torch.float32 else 2e-2
            assert torch.allclose(compiled.scores, eager.scores, rtol=tol, atol=tol), (attention, dtype)
            if dtype == torch.float32:
                assert compiled.sequences.cpu().tolist() == cpu.sequences.tolist(), attention
            # The next searches of these shapes replay the same graph from
            # their first step, over the loop rewritten in place.
            for ids in (other_ids, input_ids):
                want = beam_search(model, ids, trie, num_beams=6, attention_mask=attention_mask, max_new_tokens=6)
                with warnings.catch_warnings():
                    warnings.simplefilter("error", RuntimeWarning)
                    again = beam_search(model, ids, trie, num_beams=6, attention_mask=attention_mask,
                                        max_new_tokens=6, compile=True)
                assert again.sequences.tolist() == want.sequences.tolist(), (attention, dtype, "again")
                assert torch.allclose(again.scores, want.scores, rtol=tol, atol=tol), (attention, dtype, "again")
            model = model.float().cpu()
            hf.clear_compiled(model)


def _semantic_ids(rng, levels=3, codebook=256, base=0, items=3000):
    paths = [[base + level * codebook + rng.randrange(codebook) for level in range(levels)] for _ in range(items)]
    vocab = base + levels * codebook + 1
    return treemask.Trie.from_paths(paths, vocab, [vocab - 1], no_labels=True), vocab


def test_device_beam_matches_the_host_and_replays_in_a_cuda_graph():
    """DeviceBeam against treemask.Beam over whole searches (start by top-k,
    then steps; fp32 log-probabilities, so bit for bit), and the same
    search with each step replayed from one captured CUDA graph: the
    tensors never move, nothing synchronises inside the step."""
    import treemask.torch as tt

    rng = random.Random(21)
    trie, vocab = _semantic_ids(rng)
    for n_requests, B in ((1, 1), (2, 70), (4, 33)):
        n = n_requests * B
        gen = torch.Generator().manual_seed(n)
        first = torch.log_softmax(torch.randn((n_requests, vocab), generator=gen) * 3, dim=-1)
        steps = [torch.log_softmax(torch.randn((n, vocab), generator=gen) * 3, dim=-1) for _ in range(3)]
        # The host search.
        want = treemask.topk_states(trie, np.zeros(n_requests, dtype=np.uint32), first, B, log_probs=True)
        states = np.zeros(n, dtype=np.uint32)
        trie.advance_states(states, want.tokens.reshape(-1))
        scores = want.scores.reshape(-1).copy()
        host = treemask.Beam(B)
        want_steps = []
        for logits in steps:
            parents, tokens = host.step_states(trie, states, logits, scores, log_probs=True)
            want_steps.append((parents.tolist(), tokens.tolist(), scores.tolist(), states.tolist()))
        # Eager, then captured.
        eager = tt.DeviceBeam(trie, n_requests, B)
        eager.start(first.to(DEV), log_probs=True)
        for logits, (parents, tokens, scores_, states_) in zip(steps, want_steps):
            got = eager.step(logits.to(DEV), log_probs=True)
            assert got[0].tolist() == parents and got[1].tolist() == tokens, (n_requests, B)
            assert got[2].tolist() == scores_ and eager.states.cpu().numpy().view(np.uint32).tolist() == states_
        captured = tt.DeviceBeam(trie, n_requests, B)
        static = torch.empty((n, vocab), device=DEV)
        static.copy_(steps[0])
        captured.start(first.to(DEV), log_probs=True)
        replay = _capture(lambda: captured.step(static, log_probs=True))
        captured.reset()
        captured.start(first.to(DEV), log_probs=True)
        for logits, (parents, tokens, scores_, states_) in zip(steps, want_steps):
            static.copy_(logits)
            replay()
            _synchronize()
            assert captured.parents.tolist() == parents and captured.tokens.tolist() == tokens
            assert captured.scores.tolist() == scores_
            assert captured.states.cpu().numpy().view(np.uint32).tolist() == states_
        assert int(captured.n_bad_rows.item()) == 0


def _simulated_rows(processor, rng, trie, n_rows, steps, prompt, vocab, reorder=True):
    """Runs a processor through a simulated generation on the GPU (ids
    reordered between steps as beam search does, tokens mostly allowed,
    some not, pad after EOS); returns every step's masked scores."""
    ids = torch.tensor([prompt] * n_rows, dtype=torch.long, device=DEV)
    gen = torch.Generator(device=DEV).manual_seed(rng.randrange(1 << 30))
    outs = []
    for _step in range(steps):
        scores = torch.randn((n_rows, vocab + 5), device=DEV, generator=gen)
        out = processor(ids, scores)
        outs.append(out.clone())
        allowed = torch.isfinite(out).cpu()
        tokens = []
        for r in range(n_rows):
            choices = torch.nonzero(allowed[r]).flatten().tolist()
            tokens.append(rng.choice(choices) if choices and rng.random() > 0.1 else rng.randrange(vocab))
        ids = torch.cat([ids, torch.tensor(tokens, device=DEV)[:, None]], dim=1)
        if reorder:
            ids = ids[torch.tensor([rng.randrange(n_rows) for _ in range(n_rows)], device=DEV)]
    return outs


def test_processor_device_path_equals_the_host_path():
    """TrieLogitsProcessor on CUDA scores: the device path (follow_rows and
    the fused mask) against the host path of the same processor class,
    step by step, with beam-like reordering, off-trie tokens and a pad
    token; the device path's steps run with torch's sync debug mode set to
    error (the first call uploads the trie and is left out)."""
    from treemask.hf import TrieLogitsProcessor

    rng = random.Random(22)
    vocab = 151936
    trie, _paths = _random_trie(rng, vocab)
    for pad in (None, 7):
        on_host = TrieLogitsProcessor(trie, pad_token_id=pad)
        on_host._device_path = lambda scores: False
        on_device = _device_path(TrieLogitsProcessor(trie, pad_token_id=pad))
        seed = rng.randrange(1 << 30)
        want = _simulated_rows(on_host, random.Random(seed), trie, 16, 8, [3, 4], vocab)
        on_device(torch.tensor([[3, 4]], device=DEV), torch.zeros((1, vocab), device=DEV))  # uploads
        on_device.reset()
        got = _simulated_rows(_SyncChecked(on_device), random.Random(seed), trie, 16, 8, [3, 4], vocab)
        for step, (a, b) in enumerate(zip(got, want)):
            assert torch.equal(torch.isfinite(a), torch.isfinite(b)), (pad, step)
            assert torch.equal(a[torch.isfinite(a)], b[torch.isfinite(b)]), (pad, step)


def test_staged_path_without_the_cuda_kernel_equals_the_device_path():
    """TrieLogitsProcessor where this libtreemask has no usable CUDA: the
    host walk's rows staged to the scores' device (pinned copy, event) and
    masked by the torch unpacking (treemask._device_mask, the helper the
    vLLM processor uses too), against the device path, step by step."""
    from treemask import _device_mask
    from treemask.hf import TrieLogitsProcessor

    rng = random.Random(24)
    vocab = 151936
    trie, _paths = _random_trie(rng, vocab)
    on_device = _device_path(TrieLogitsProcessor(trie, pad_token_id=7))
    staged = TrieLogitsProcessor(trie, pad_token_id=7)
    staged._device_path = lambda scores: False
    staged._staged = lambda scores: True  # CPU scores too, in the host mode
    seed = rng.randrange(1 << 30)
    want = _simulated_rows(on_device, random.Random(seed), trie, 16, 8, [3, 4], vocab)
    kernel = _device_mask.cuda_available
    _device_mask.cuda_available = lambda: False  # asked when the masker is made
    try:
        got = _simulated_rows(staged, random.Random(seed), trie, 16, 8, [3, 4], vocab)
    finally:
        _device_mask.cuda_available = kernel
    assert staged._masker is not None and not staged._masker._kernel
    for step, (a, b) in enumerate(zip(got, want)):
        assert torch.equal(torch.isfinite(a), torch.isfinite(b)), step
        assert torch.equal(a[torch.isfinite(a)], b[torch.isfinite(b)]), step


class _SyncChecked:
    """Calls a processor with torch.cuda's sync debug mode on "error": a
    host synchronisation inside the call raises."""

    def __init__(self, processor):
        self.processor = processor

    def __call__(self, input_ids, scores):
        if HOST_MODE:
            return self.processor(input_ids, scores)
        torch.cuda.set_sync_debug_mode("error")
        try:
            return self.processor(input_ids, scores)
        finally:
            torch.cuda.set_sync_debug_mode("default")


def test_generate_device_path_equals_the_host_path():
    """generate() on CUDA with TrieLogitsProcessor: device path against host
    path for greedy, sampling with num_return_sequences, and beam search
    with num_return_sequences (and a pad token)."""
    transformers = _transformers()
    from treemask.hf import TrieLogitsProcessor

    rng = random.Random(23)
    vocab, eos, pad = 1100, 1099, 1098
    paths = [[rng.randrange(100, 1000) for _ in range(rng.randint(1, 5))] for _ in range(300)]
    trie = treemask.Trie.from_paths(paths, vocab, [eos])
    config = transformers.Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      tie_word_embeddings=True, eos_token_id=eos, pad_token_id=pad)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(config).eval().to(DEV)
    input_ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]], device=DEV)
    common = dict(attention_mask=torch.ones_like(input_ids), max_new_tokens=6, eos_token_id=eos, pad_token_id=pad)
    modes = [dict(do_sample=False), dict(do_sample=True, top_k=0, num_return_sequences=3),
             dict(num_beams=4, num_return_sequences=4, do_sample=False),
             dict(num_beams=3, num_return_sequences=2, do_sample=False)]
    for i, kwargs in enumerate(modes):
        outs = []
        for on_device in (False, True):
            processor = TrieLogitsProcessor(trie, pad_token_id=pad if i == 3 else None)
            processor._device_path = lambda scores, on_device=on_device: on_device
            torch.manual_seed(12)
            with torch.no_grad():
                outs.append(model.generate(input_ids, logits_processor=[processor], **kwargs, **common))
        assert torch.equal(outs[0], outs[1]), kwargs


def test_device_beam_step_from_two_threads_on_two_streams():
    """Issue 21 item 9: one DeviceTrie stepped by two threads at once, each on
    its own stream: each stream has its own workspace (one shared buffer
    would be written by both streams' kernels), and both equal the host."""
    _needs_gpu("two threads racing on two real streams")
    import threading

    import treemask.torch as tt

    rng = random.Random(21)
    trie, _paths = _random_trie(rng, 1000)
    dev_trie = tt.DeviceTrie(trie)
    B, n_requests = 4, 64
    n = B * n_requests
    inputs = [[_beam_logits(rng, n, 1000, torch.float32) for _ in range(8)] for _ in range(2)]
    want = []
    for steps in inputs:
        host, states, scores, out = treemask.Beam(B), np.zeros(n, np.uint32), treemask.initial_scores(n_requests, B), []
        for logits in steps:
            out.append(host.step_states(trie, states, logits, scores)[1].tolist())
        want.append(out)
    got = [None, None]
    barrier = threading.Barrier(2)

    def run(i):
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            states = torch.zeros(n, dtype=torch.int32, device="cuda")
            scores = torch.from_numpy(treemask.initial_scores(n_requests, B)).cuda()
            device_logits = [x.cuda() for x in inputs[i]]
            barrier.wait()
            tokens = []
            for logits in device_logits:
                _p, t, scores = dev_trie.beam_step(states, logits, scores, B)
                tokens.append(t)
            stream.synchronize()
            got[i] = [t.cpu().tolist() for t in tokens]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert got == want
    assert len(dev_trie._workspace) >= 2


def test_hf_beam_search_refuses_a_width_the_gpu_cannot_hold():
    _needs_gpu("the width is checked against the real device's memory")
    from treemask import hf

    class Model(torch.nn.Module):
        config = type("Config", (), {"vocab_size": 151936})()
        dtype = torch.float32

    trie = treemask.Trie.from_paths([[1, 2]], 151936, [0])
    with torch.no_grad():
        try:
            hf.beam_search(Model(), torch.zeros((1, 3), dtype=torch.long, device="cuda"), trie, 10**7)
        except treemask.OutOfMemoryError as e:
            assert "of this cuda" in str(e), e
        else:
            raise AssertionError("a 6 PB step was not refused")


# What a skip raises: ours without pytest, pytest's own with it.
_SKIPS = (_Skipped, pytest.skip.Exception) if pytest is not None else (_Skipped,)


def _string_set():
    """A string set over a vocabulary of every byte plus a few pieces, padded
    to Qwen's width: any tokenization of its strings."""
    pieces = [bytes([b]) for b in range(256)] + [b"pos", b"itive", b"positive", b" neg", b"ative"]
    vocab = treemask.Vocab.from_token_bytes(pieces + [b"<eos>"], 151936, [False] * len(pieces) + [True])
    eos = len(pieces)
    return treemask.Trie.from_strings(["positive", "negative", "neutral"], vocab, [eos], prefix=" "), eos


def test_string_set_masks_cuda_scores_through_the_host_walk():
    """A string-set trie on CUDA scores (issue 23): the processor keeps the
    host walk (no device step walks a vocabulary) and applies its rows on the
    device; every row equals the matcher's. DeviceTrie, and so the device
    beam step, refuse it by name."""
    from treemask.hf import TrieLogitsProcessor

    trie, eos = _string_set()
    processor = TrieLogitsProcessor(trie, prompt_length=1)
    assert not processor._device_path(torch.zeros(1, device=DEV))
    rng = random.Random(31)
    ids = torch.tensor([[7], [7], [7]], device=DEV)
    for _ in range(12):
        out = processor(ids, torch.zeros((3, 151936), device=DEV))
        assert out.device.type == torch.device(DEV).type
        next_tokens = []
        for r in range(3):
            m = treemask.Matcher(trie)
            for t in ids[r, 1:].tolist():
                assert m.accept_token(t)
            allowed = m.next_tokens()
            assert torch.nonzero(torch.isfinite(out[r])).flatten().tolist() == allowed
            next_tokens.append(rng.choice(allowed) if not m.is_terminated() else eos)
        ids = torch.cat([ids, torch.tensor(next_tokens, device=DEV)[:, None]], dim=1)
    import treemask.torch as tt

    makers = [lambda: tt.DeviceTrie(trie), lambda: tt.DeviceBeam(trie, 1, 2)]
    if not HOST_MODE:  # on CPU tensors beam_search takes the host path
        from treemask.hf import beam_search

        makers.append(lambda: beam_search(None, torch.zeros((1, 2), dtype=torch.long, device=DEV), trie, 2))
    for make in makers:
        refused = False
        try:
            make()
        except treemask.UnsupportedError as e:
            refused = "string-set trie" in str(e)
        assert refused


def main():
    """A runner for machines without pytest: every test_* function in order;
    prints one line per test and `N passed, N failed, N skipped`."""
    if SKIP_REASON is not None:
        print("SKIP: %s" % SKIP_REASON)
        return 77
    failed = skipped = 0
    tests = [(name, fn) for name, fn in sorted(globals().items()) if name.startswith("test_") and callable(fn)]
    for name, fn in tests:
        try:
            fn()
            print("PASS %s" % name)
        except _SKIPS as e:
            skipped += 1
            print("SKIP %s: %s" % (name, e))
        except Exception as e:  # report every failure, not just the first
            failed += 1
            print("FAIL %s: %r" % (name, e))
    print("%d passed, %d failed, %d skipped" % (len(tests) - failed - skipped, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
