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
