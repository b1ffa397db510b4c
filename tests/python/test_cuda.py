"""The CUDA paths of the Python package, on a GPU: apply on CUDA tensors on
the tensor's current stream, DeviceTrie's fused step against the CPU state
arrays, a CUDA-graph capture of the step, the transformers processor with
scores on the GPU, and the device beam step and top-k (DeviceTrie,
BatchMatcher with CUDA logits, treemask.hf.beam_search on CUDA) against the
host ones.

Without a GPU (or a libtreemask without CUDA) every test skips. On a GPU
machine without pytest, run it as a script: `python test_cuda.py` (exit 77
= skipped). See the README's "Python" section for the command.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
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


def _skip_reason():
    if torch is None:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    if not treemask.cuda_available():
        return "this libtreemask has no usable CUDA (built without nvcc, or the device is too old)"
    return None


SKIP_REASON = _skip_reason()
if pytest is not None:
    pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

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
                dev_logits = logits.cuda()
                treemask.apply_token_bitmask_inplace(dev_logits, bitmask.cuda(), vocab_size=vocab)
                assert torch.equal(dev_logits.cpu(), want), (dtype, vocab, rows)


def test_apply_strided_rows_and_indices():
    gen = torch.Generator().manual_seed(2)
    wide = torch.randn((6, 1100), generator=gen)
    bitmask = torch.randint(-2**31, 2**31 - 1, (6, 32), generator=gen, dtype=torch.int32)
    want = wide.clone()
    want[:, :1000] = _cpu_reference(wide[:, :1000].contiguous(), bitmask, indices=[0, 4])
    dev = wide.cuda()
    treemask.apply_token_bitmask_inplace(dev[:, :1000], bitmask.cuda(), indices=[0, 4])
    assert torch.equal(dev.cpu(), want)
    dev = wide.cuda()
    treemask.apply_token_bitmask_inplace(dev[:, :1000], bitmask.cuda(),
                                         indices=torch.tensor([0, 4], device="cuda"))
    assert torch.equal(dev.cpu(), want)


def test_apply_runs_on_the_current_stream():
    logits = torch.zeros((64, 151936), device="cuda")
    bitmask = torch.zeros((64, 4748), dtype=torch.int32, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        # Enqueued on `side` behind this fill; on another stream it would race.
        bitmask.fill_(-1)
        bitmask[:, 0] = 1
        treemask.apply_token_bitmask_inplace(logits, bitmask)
    side.synchronize()
    finite = torch.isfinite(logits)
    assert int(finite.sum()) == 64 and bool(finite[:, 0].all())


def test_device_mismatch_is_an_error():
    raised = False
    try:
        treemask.apply_token_bitmask_inplace(torch.zeros((1, 64), device="cuda"),
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
        bitmask = torch.zeros((rows, trie.bitmask_words), dtype=torch.int32, device="cuda")
        want = treemask.allocate_token_bitmask(rows, vocab)
        accepted = torch.zeros(rows, dtype=torch.uint8, device="cuda")
        tokens = None
        for step in range(8):
            for policy in ("reject",):
                dev_tokens = None if tokens is None else torch.tensor(tokens, dtype=torch.int32, device="cuda")
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
    tokens = torch.full((rows,), -1, dtype=torch.int32, device="cuda")
    logits = torch.zeros((rows, vocab + 64), dtype=torch.bfloat16, device="cuda")
    # Warm up on a side stream, as torch's graph capture requires.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        dev_trie.advance_mask_logits(states, tokens, logits)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dev_trie.advance_mask_logits(states, tokens, logits)
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
        graph.replay()
        trie.advance_states(states_cpu, picks)
        trie.fill_states(states_cpu, want_mask)
        want = torch.zeros((rows, vocab + 64), dtype=torch.bfloat16)
        treemask.apply_token_bitmask_inplace(want, torch.from_numpy(want_mask), vocab_size=vocab)
        torch.cuda.synchronize()
        assert torch.equal(logits.cpu(), want), step
        assert states.cpu().numpy().view(np.uint32).tolist() == states_cpu.tolist()


def test_device_trie_argument_errors():
    import treemask.torch as tt

    trie = treemask.Trie.from_paths([[1]], 64, [0])
    dev_trie = tt.DeviceTrie(trie)
    states = dev_trie.new_states(2)
    for bad_call, message in (
        (lambda: dev_trie.advance_fill_bitmask(states.cpu(), None, torch.zeros((2, 2), dtype=torch.int32,
                                                                                 device="cuda")), "states"),
        (lambda: dev_trie.advance_fill_bitmask(states, torch.zeros(2, dtype=torch.int64, device="cuda"),
                                               torch.zeros((2, 2), dtype=torch.int32, device="cuda")), "int32"),
        (lambda: dev_trie.advance_mask_logits(states, None, torch.zeros((2, 64), dtype=torch.float64,
                                                                         device="cuda")), "float32"),
    ):
        raised = False
        try:
            bad_call()
        except treemask.InvalidArgumentError as e:
            raised = message in str(e)
        assert raised, message


def test_processor_masks_cuda_scores():
    from treemask.hf import TrieLogitsProcessor

    trie = treemask.Trie.from_paths([[1, 2], [1, 3], [4]], 151936, [151645])
    processor = TrieLogitsProcessor(trie)
    scores = torch.zeros((2, 151936), device="cuda")
    out = processor(torch.tensor([[9], [9]], device="cuda"), scores)
    assert torch.isfinite(out).sum(dim=1).tolist() == [2, 2]
    assert torch.isfinite(scores).all()  # out of place (issue 14 item 13)
    scores = torch.zeros((2, 151936), device="cuda")
    out = processor(torch.tensor([[9, 1], [9, 4]], device="cuda"), scores)
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
            d_states = torch.zeros(n, dtype=torch.int32, device="cuda")
            d_scores = torch.from_numpy(scores.copy()).cuda()
            bad = torch.zeros(1, dtype=torch.int32, device="cuda")
            for _step in range(6):
                logits = _beam_logits(rng, n, vocab, torch.float32)
                parents, tokens = host.step_states(trie, states, logits, scores)
                d_parents, d_tokens, d_scores = dev_trie.beam_step(d_states, logits.cuda(), d_scores, B,
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
            d_states = torch.zeros(n, dtype=torch.int32, device="cuda")
            d_scores = torch.from_numpy(scores.copy()).cuda()
            logits = _beam_logits(rng, n, 1000, dtype)
            host.step_states(trie, states, logits, scores, log_probs=log_probs)
            _p, _t, d_scores = dev_trie.beam_step(d_states, logits.cuda(), d_scores, B, log_probs=log_probs)
            got = np.sort(d_scores.cpu().numpy())
            want = np.sort(scores)
            assert np.allclose(got, want, rtol=1e-3, atol=1e-3, equal_nan=True), (dtype, log_probs)


def test_device_topk_matches_the_host():
    import treemask.torch as tt

    rng = random.Random(18)
    for vocab in (33, 151936):
        trie, _paths = _random_trie(rng, vocab)
        dev_trie = tt.DeviceTrie(trie)
        states = np.zeros(5, dtype=np.uint32)
        states[1] = treemask.STATE_TERMINATED
        logits = _beam_logits(rng, 5, vocab, torch.float32)
        for k in (0, 1, 4, 40):
            want = treemask.topk_states(trie, states, logits, k)
            tokens, scores, counts = dev_trie.topk(torch.from_numpy(states.view(np.int32)).cuda(), logits.cuda(), k)
            assert counts.cpu().numpy().tolist() == np.asarray(want.counts).tolist()
            assert tokens.cpu().numpy().tolist() == np.asarray(want.tokens).tolist()
            assert np.allclose(scores.cpu().numpy(), np.asarray(want.scores), rtol=1e-5, atol=1e-4)


def test_batch_matcher_routes_cuda_logits_through_the_device_trie():
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
        got = on_device.beam_step(logits.cuda(), scores_d, B)
        assert got.parents.device.type == "cuda"
        assert got.parents.cpu().numpy().tolist() == want.parents.tolist()
        assert got.tokens.cpu().numpy().tolist() == want.tokens.tolist()
        scores_h, scores_d = want.scores, got.scores.cpu()
        assert [on_device[i].next_tokens() for i in range(n)] == [on_host[i].next_tokens() for i in range(n)]
    with_modes = treemask.BatchMatcher([treemask.Matcher(trie, leaves_only=True)] * n)
    raised = False
    try:
        with_modes.beam_step(_beam_logits(rng, n, 1000, torch.float32).cuda(), treemask.initial_scores(2, B), B)
    except treemask.InvalidArgumentError as e:
        raised = "decoding modes" in str(e)
    assert raised


def test_hf_beam_search_on_cuda_equals_the_cpu_search():
    try:
        import transformers
    except ImportError:
        if pytest is not None:
            pytest.skip("transformers is not installed on this machine")
        return
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
    gpu = beam_search(model.cuda(), input_ids.cuda(), trie, num_beams=6)
    assert gpu.sequences.device.type == "cuda"
    assert gpu.sequences.cpu().tolist() == cpu.sequences.tolist()
    assert torch.allclose(gpu.scores.cpu(), cpu.scores, rtol=1e-3, atol=1e-3)


def test_device_beam_step_from_two_threads_on_two_streams():
    """Issue 21 item 9: one DeviceTrie stepped by two threads at once, each on
    its own stream: each stream has its own workspace (one shared buffer
    would be written by both streams' kernels), and both equal the host."""
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


def main():
    """A runner for machines without pytest: every test_* function in order."""
    if SKIP_REASON is not None:
        print("SKIP: %s" % SKIP_REASON)
        return 77
    failed = 0
    tests = [(name, fn) for name, fn in sorted(globals().items()) if name.startswith("test_") and callable(fn)]
    for name, fn in tests:
        try:
            fn()
            print("PASS %s" % name)
        except Exception as e:  # report every failure, not just the first
            failed += 1
            print("FAIL %s: %r" % (name, e))
    print("%d passed, %d failed" % (len(tests) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
