"""torch interop on the CPU: tensor bitmasks, masking tensors of every
dtype, and the rule that nothing is ever copied between devices (checked
with torch's "meta" device, which needs no GPU).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""

import numpy as np
import pytest

import treemask
from oracle import allowed_tokens

torch = pytest.importorskip("torch", reason="torch is not installed (./dev installs it)")
import treemask.torch as tt  # noqa: E402  (needs torch)


def reference(logits, bitmask, vocab_size):
    allowed = torch.zeros(logits.shape, dtype=torch.bool)
    bits = torch.from_numpy(np.unpackbits(bitmask.numpy().view(np.uint8), axis=1, bitorder="little").astype(bool))
    n = min(vocab_size, logits.shape[1])
    allowed[:, :n] = bits[:, :n]
    return logits.masked_fill(~allowed, float("-inf"))


def test_allocate_is_a_pinned_when_cuda_int32_tensor():
    bm = tt.allocate_token_bitmask(3, 100)
    assert bm.dtype == torch.int32 and tuple(bm.shape) == (3, 4) and bool((bm == -1).all())
    assert bm.is_pinned() == torch.cuda.is_available()
    bm.zero_()
    tt.reset_token_bitmask(bm)
    assert bool((bm == -1).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("vocab", [1, 33, 151936])
def test_apply_on_cpu_tensors(dtype, vocab):
    gen = torch.Generator().manual_seed(vocab)
    words = (vocab + 31) // 32
    logits = torch.randn((4, vocab + 5), generator=gen).to(dtype)
    bitmask = torch.randint(-2**31, 2**31 - 1, (4, words), generator=gen, dtype=torch.int32)
    want = reference(logits, bitmask, vocab)
    treemask.apply_token_bitmask_inplace(logits, bitmask, vocab_size=vocab)
    assert torch.equal(logits, want)
    # A row slice of a wider tensor (row stride > width), and indices.
    wide = torch.randn((4, vocab + 40), generator=gen).to(dtype)
    view = wide[:, :vocab]
    want = wide.clone()
    want[[1, 3], :vocab] = reference(view[[1, 3]], bitmask[[1, 3]], vocab)
    treemask.apply_token_bitmask_inplace(view, bitmask, indices=torch.tensor([1, 3]))
    assert torch.equal(wide, want)


def test_matcher_and_batch_fill_tensors():
    trie = treemask.Trie.from_paths([[1, 2], [1, 3], [4]], 50, [0])
    bitmask = tt.allocate_token_bitmask(2, 50)
    m = treemask.Matcher(trie)
    m.accept_token(1)
    m.fill_next_token_bitmask(bitmask, 1)
    assert allowed_tokens(bitmask[1].numpy()) == [2, 3]
    batch = treemask.BatchMatcher([treemask.Matcher(trie), m])
    assert batch.accept_tokens(torch.tensor([4, 3])).tolist() == [True, True]
    batch.fill_next_token_bitmask(bitmask)
    assert allowed_tokens(bitmask[0].numpy()) == [0] and allowed_tokens(bitmask[1].numpy()) == [0]
    with pytest.raises(treemask.InvalidArgumentError, match="int32"):
        m.fill_next_token_bitmask(bitmask.to(torch.int64))
    with pytest.raises(treemask.InvalidArgumentError, match="contiguous"):
        m.fill_next_token_bitmask(torch.zeros((4, 2), dtype=torch.int32).t())


def test_never_copies_between_devices():
    bitmask = tt.allocate_token_bitmask(1, 64)
    meta_logits = torch.empty((1, 64), device="meta")
    with pytest.raises(treemask.InvalidArgumentError, match="never copies"):
        treemask.apply_token_bitmask_inplace(meta_logits, bitmask)
    with pytest.raises(treemask.InvalidArgumentError, match="never copies"):
        treemask.apply_token_bitmask_inplace(torch.zeros((1, 64)), torch.empty((1, 2), dtype=torch.int32,
                                                                               device="meta"))
    m = treemask.Matcher(treemask.Trie.from_paths([[1]], 64, [0]))
    with pytest.raises(treemask.InvalidArgumentError, match="not on the CPU"):
        m.fill_next_token_bitmask(torch.empty((1, 2), dtype=torch.int32, device="meta"))
    with pytest.raises(treemask.InvalidArgumentError, match="not on the CPU"):
        treemask.BatchMatcher(1).accept_tokens(torch.empty(1, dtype=torch.int64, device="meta"))


@pytest.mark.skipif(treemask.cuda_available(), reason="this libtreemask has usable CUDA")
def test_device_trie_without_cuda_is_a_clear_error():
    trie = treemask.Trie.from_paths([[1]], 64, [0])
    with pytest.raises(treemask.UnsupportedError, match="cuda_available"):
        tt.DeviceTrie(trie)


def test_state_constants():
    assert tt.STATE_TERMINATED == 0xFFFFFFFE and tt.STATE_FAILED == 0xFFFFFFFF and tt.STATE_ROOT == 0


def _semantic_id_trie(rng, vocab=600, items=400, stop=599):
    paths = [[rng.randrange(0, 200), 200 + rng.randrange(0, 200), 400 + rng.randrange(0, 190)]
             for _ in range(items)]
    return treemask.Trie.from_paths(paths, vocab, [stop], no_labels=True)


def test_device_beam_over_the_host_twins(monkeypatch):
    """DeviceBeam's wrapper logic (start by top-k at the root, steps over its
    own tensors, reset, finished) with the device entry points answered by
    their host twins on CPU tensors (host_cuda.py): the same searches as
    treemask.Beam, and not one tensor reallocated across steps (what makes
    a step capturable; the GPU test captures and replays one,
    tests/python/test_cuda.py)."""
    import random

    import host_cuda

    host = host_cuda.install(monkeypatch)
    rng = random.Random(7)
    trie = _semantic_id_trie(rng)
    gen = torch.Generator().manual_seed(3)
    for n_requests, B in ((1, 1), (3, 4), (2, 33)):
        beam = tt.DeviceBeam(trie, n_requests, B, device="cuda")
        owned = [t.data_ptr() for t in (beam.states, beam.scores, beam.parents, beam.tokens, beam.n_bad_rows)]
        assert beam.scores.tolist() == treemask.initial_scores(n_requests, B).tolist()
        for _search in range(2):
            first = torch.randn((n_requests, 600), generator=gen) * 3
            tokens, scores = beam.start(first)
            want = treemask.topk_states(trie, np.zeros(n_requests, dtype=np.uint32), first, B)
            assert tokens.tolist() == want.tokens.reshape(-1).tolist()
            assert scores.tolist() == want.scores.reshape(-1).tolist()
            states = np.zeros(n_requests * B, dtype=np.uint32)
            trie.advance_states(states, want.tokens.reshape(-1))
            host_scores = want.scores.reshape(-1).copy()
            assert beam.states.numpy().view(np.uint32).tolist() == states.tolist()
            reference = treemask.Beam(B)
            for _step in range(4):  # dtypes alternate: a layout change must reach the kept logits struct
                dtype = (torch.bfloat16, torch.float32)[_step % 2]
                logits = torch.randn((n_requests * B, 600), generator=gen).to(dtype)
                want_parents, want_tokens = reference.step_states(trie, states, logits, host_scores)
                parents, tokens, scores = beam.step(logits)
                assert parents is beam.parents and tokens is beam.tokens and scores is beam.scores
                assert parents.tolist() == want_parents.tolist() and tokens.tolist() == want_tokens.tolist()
                assert scores.tolist() == host_scores.tolist()
                assert beam.states.numpy().view(np.uint32).tolist() == states.tolist()
            assert bool(beam.finished().all())  # 3 codes and the stop token: every hypothesis ended
            beam.reset()
            assert beam.scores.tolist() == treemask.initial_scores(n_requests, B).tolist()
            assert int(beam.states.abs().sum()) == 0 and beam.parents.tolist() == [-1] * (n_requests * B)
        assert [t.data_ptr() for t in (beam.states, beam.scores, beam.parents, beam.tokens,
                                       beam.n_bad_rows)] == owned
    assert host.calls["beam_step"] == 4 * 2 * 3
    assert host.flags["beam_step"] == {host.TREEMASK_CUDA_CALLER_CHECKED_POINTERS}  # tensors it checked
    with pytest.raises(treemask.InvalidArgumentError, match="beam_width"):
        tt.DeviceBeam(trie, 2, 0, device="cuda")
    beam = tt.DeviceBeam(trie, 2, 3, device="cuda")
    for _ in range(2):  # errors on a fresh beam, then after a step whose layout it remembers
        with pytest.raises(treemask.InvalidArgumentError, match="6 rows"):
            beam.step(torch.zeros((5, 600)))
        with pytest.raises(treemask.InvalidArgumentError, match="float32, float16 or bfloat16"):
            beam.step(torch.zeros((6, 600), dtype=torch.float64))
        with pytest.raises(treemask.InvalidArgumentError, match="contiguous"):
            beam.step(torch.zeros((600, 6)).t())
        with pytest.raises(treemask.InvalidArgumentError, match="is not on"):
            beam.step(torch.zeros((6, 600), device="meta"))
        with pytest.raises(treemask.InvalidArgumentError, match="2-D"):
            beam.step(np.zeros((6, 600), dtype=np.float32))
        beam.step(torch.zeros((6, 600)))
    assert beam._layout is not None


def test_device_beam_needs_cuda():
    if treemask.cuda_available():
        pytest.skip("this machine has a usable CUDA device: the error path cannot be reached")
    trie = treemask.Trie.from_paths([[1]], 8, [0])
    with pytest.raises(treemask.UnsupportedError, match="needs CUDA"):
        tt.DeviceBeam(trie, 1, 2)


def test_cuda_apply_fast_path_arguments(monkeypatch):
    """apply_token_bitmask_inplace's fast path for CUDA tensors, on the CPU:
    tensors posing as CUDA tensors of device 0 and the C call recorded.
    Usual calls reach the C call with the arguments the general path would
    compute; unusual ones return to the general path (which explains them)."""
    from treemask import bitmask as bm

    class PosingAsCuda(torch.Tensor):
        __torch_function__ = torch._C._disabled_torch_function_impl

        @property
        def is_cuda(self):
            return not getattr(self, "elsewhere", False)  # elsewhere: device 0 of another accelerator

        def get_device(self):
            return 0

    recorded = []
    real_lib = bm.lib

    class RecordingLib:
        def __getattr__(self, name):
            return getattr(real_lib, name)

        @staticmethod
        def treemask_py_cuda_apply_token_bitmask(*args):
            recorded.append(args)
            return 0

    calls = bm._CudaCalls(torch)
    calls.get_device = lambda: 0
    calls.raw_stream = lambda index: 0
    monkeypatch.setattr(bm, "_cuda_calls", calls)
    monkeypatch.setattr(bm, "lib", RecordingLib())

    def cuda(t):
        return t.as_subclass(PosingAsCuda)

    wide = torch.zeros((3, 1100))
    logits = cuda(wide[:, :1000])  # strided rows
    mask = cuda(torch.zeros((3, 32), dtype=torch.int32))
    treemask.apply_token_bitmask_inplace(logits, mask)
    args = recorded.pop()
    # (logits, dtype, n_rows, row_stride, width, bitmask, words, bitmask rows, vocab_size, stream): the
    # module's shim, which passes TREEMASK_CUDA_CALLER_CHECKED_POINTERS (both are CUDA tensors of the
    # current device) and takes the pointers as integers
    assert args[1:5] == (0, 3, 1100, 1000) and args[6:9] == (32, 3, 1000) and args[9] == 0
    assert args[0] == wide.data_ptr() and args[5] == mask.data_ptr()
    treemask.apply_token_bitmask_inplace(cuda(torch.zeros(40, dtype=torch.bfloat16)),
                                         cuda(torch.zeros(2, dtype=torch.int32)), vocab_size=33)
    args = recorded.pop()
    assert args[1:5] == (2, 1, 40, 40) and args[6:9] == (2, 1, 33)
    # Unusual calls leave the fast path: the general path's errors come out.
    assert not bm._apply_cuda_fast(torch, logits, cuda(torch.zeros((2, 32), dtype=torch.int32)), None)
    assert not bm._apply_cuda_fast(torch, logits, cuda(torch.zeros((3, 32), dtype=torch.int64)), None)
    assert not bm._apply_cuda_fast(torch, logits, torch.zeros((3, 32), dtype=torch.int32), None)
    xpu_mask = cuda(torch.zeros((3, 32), dtype=torch.int32))
    xpu_mask.elsewhere = True
    assert not bm._apply_cuda_fast(torch, logits, xpu_mask, None)  # device 0 of something else: never vouched for
    assert not bm._apply_cuda_fast(torch, cuda(torch.zeros((3, 1000), dtype=torch.float64)), mask, None)
    assert not bm._apply_cuda_fast(torch, cuda(torch.zeros((1000, 3)).t()), mask, None)
    assert not bm._apply_cuda_fast(torch, logits, mask, 1001)
    assert not bm._apply_cuda_fast(torch, logits, np.zeros((3, 32), dtype=np.int32), None)
    assert not recorded
    assert bm._apply_cuda_fast(torch, cuda(torch.zeros((0, 1000))), cuda(torch.zeros((0, 32), dtype=torch.int32)),
                               None)
    assert not recorded  # nothing to mask: no call


def test_cuda_shims_reach_the_library():
    """The module's own shims (integers for pointers): the apply's calls
    treemask_cuda_apply_token_bitmask_flags with every argument: its checks
    answer (a bad dtype by name), then, with no device, UNSUPPORTED."""
    from treemask._ffi import ffi, lib

    if treemask.cuda_available():
        pytest.skip("a usable CUDA device: host memory must not reach a kernel")
    logits = np.zeros((2, 64), dtype=np.float32)
    mask = np.zeros((2, 2), dtype=np.int32)
    pointers = [int(ffi.cast("uintptr_t", ffi.from_buffer(a))) for a in (logits, mask)]
    status = lib.treemask_py_cuda_apply_token_bitmask(pointers[0], 7, 2, 64, 64, pointers[1], 2, 2, 64, 0)
    assert status == lib.TREEMASK_ERR_INVALID_ARGUMENT and "unknown dtype 7" in treemask.last_error()
    status = lib.treemask_py_cuda_apply_token_bitmask(pointers[0], 0, 2, 64, 64, pointers[1], 1, 2, 64, 0)
    assert status == lib.TREEMASK_ERR_BUFFER_TOO_SMALL and "bitmask_row_words 1" in treemask.last_error()
    status = lib.treemask_py_cuda_apply_token_bitmask(pointers[0], 0, 2, 64, 64, pointers[1], 2, 2, 64, 0)
    assert status == lib.TREEMASK_ERR_UNSUPPORTED
    assert treemask.last_error().startswith("treemask_cuda_apply_token_bitmask_flags: ")
    assert not logits.any()
    # The processor's shim (its arguments reach the kernel only on a GPU: tests/python/test_cuda.py).
    rows = ffi.new("treemask_cuda_token_rows *")
    lib.treemask_cuda_token_rows_init(rows)
    status = lib.treemask_py_cuda_trie_follow_rows_mask_logits(ffi.NULL, ffi.NULL, rows, 0, 0, 0, pointers[0], 0,
                                                                64, 64, -1, 0)
    assert status == lib.TREEMASK_ERR_INVALID_ARGUMENT
    assert treemask.last_error() == "treemask_cuda_trie_follow_rows_mask_logits: dev_trie is NULL"
