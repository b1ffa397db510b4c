"""Bitmask helpers and apply_token_bitmask_inplace on numpy arrays and CPU
tensors against a numpy reference, on awkward sizes, and the checks that
keep a wrong buffer from ever reaching the kernel.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import random

import numpy as np
import pytest

import treemask
from conftest import scaled


def reference_apply(logits, bitmask, vocab_size=None, indices=None):
    logits = np.array(logits, copy=True)
    two_d = logits.ndim == 2
    rows = logits if two_d else logits[None]
    masks = bitmask if bitmask.ndim == 2 else bitmask[None]
    width = rows.shape[1]
    if vocab_size is None:
        vocab_size = min(width, 32 * masks.shape[1])
    bits = np.unpackbits(masks.view(np.uint8), axis=1, bitorder="little").astype(bool)
    allowed = np.zeros((rows.shape[0], width), bool)
    n = min(width, bits.shape[1], vocab_size)
    allowed[:, :n] = bits[:, :n]
    for r in (range(rows.shape[0]) if indices is None else indices):
        rows[r, ~allowed[r]] = -np.inf
    return logits


def random_bitmask(rng, rows, words, density):
    bits = rng.random((rows, words * 32)) < density
    return np.packbits(bits, axis=1, bitorder="little").view(np.int32).copy()


def test_shape_allocate_reset():
    assert treemask.get_bitmask_shape(3, 151936) == (3, 4748)
    assert treemask.get_bitmask_shape(1, 33) == (1, 2)
    bm = treemask.allocate_token_bitmask(2, 33)
    assert bm.dtype == np.int32 and bm.shape == (2, 2) and (bm == -1).all()
    bm[:] = 0
    treemask.reset_token_bitmask(bm)
    assert (bm == -1).all()
    with pytest.raises(treemask.InvalidArgumentError):
        treemask.reset_token_bitmask([0])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("vocab", [1, 31, 32, 33, 151936])
def test_numpy_apply_matches_reference(dtype, vocab):
    rng = np.random.default_rng(vocab)
    for density in (0.0, 0.01, 0.5, 1.0):
        rows = 3
        words = (vocab + 31) // 32
        logits = rng.standard_normal((rows, vocab)).astype(dtype)
        bitmask = random_bitmask(rng, rows, words, density)
        want = reference_apply(logits, bitmask)
        treemask.apply_token_bitmask_inplace(logits, bitmask)
        np.testing.assert_array_equal(logits, want)


def test_padded_width_strided_rows_indices_and_vocab_size():
    rng = np.random.default_rng(5)
    for _ in range(scaled(20)):
        vocab = int(rng.integers(1, 300))
        width = vocab + int(rng.integers(0, 70))
        stride = width + int(rng.integers(0, 9))
        rows = int(rng.integers(1, 6))
        words = (vocab + 31) // 32 + int(rng.integers(0, 2))
        buffer = rng.standard_normal((rows, stride)).astype(np.float32)
        logits = buffer[:, :width]
        bitmask = random_bitmask(rng, rows, words, 0.3)
        indices = sorted(rng.choice(rows, size=int(rng.integers(1, rows + 1)), replace=False).tolist())
        use_vocab = vocab if rng.random() < 0.5 else None
        want = reference_apply(logits, bitmask, vocab_size=use_vocab, indices=indices)
        tail = buffer[:, width:].copy()
        treemask.apply_token_bitmask_inplace(logits, bitmask, vocab_size=use_vocab, indices=indices)
        np.testing.assert_array_equal(logits, want)
        np.testing.assert_array_equal(buffer[:, width:], tail)  # the stride padding is never touched


def test_one_dimensional_logits_and_bitmask():
    logits = np.zeros(40, np.float32)
    bitmask = np.array([1 << 3, 1 << 1], np.int32)
    treemask.apply_token_bitmask_inplace(logits, bitmask)
    assert np.flatnonzero(np.isfinite(logits)).tolist() == [3, 33]
    # xgrammar's default vocab_size: min(width, 32 * words), so a mask
    # narrower than the logits masks the columns it does not cover.
    logits = np.zeros(64, np.float32)
    treemask.apply_token_bitmask_inplace(logits, np.array([-1], np.int32))
    assert np.isfinite(logits).sum() == 32 and np.isfinite(logits[:32]).all()


@pytest.mark.parametrize("make, message", [
    (lambda: (np.zeros((2, 64), np.float64), np.zeros((2, 2), np.int32)), "float32, float16 or bfloat16"),
    (lambda: (np.zeros((2, 64), np.float32), np.zeros((2, 2), np.uint32)), "int32"),
    (lambda: (np.zeros((2, 64), np.float32), np.zeros((3, 2), np.int32)), "2 rows but the bitmask has 3"),
    (lambda: (np.zeros((64, 2), np.float32).T, np.zeros((2, 2), np.int32)), "stride 1"),
    (lambda: (np.zeros((2, 2, 64), np.float32), np.zeros((2, 2), np.int32)), "dimensions"),
    (lambda: ([0.0] * 64, np.zeros((1, 2), np.int32)), "numpy.ndarray or torch.Tensor"),
])
def test_apply_rejects_bad_arguments(make, message):
    logits, bitmask = make()
    with pytest.raises(treemask.InvalidArgumentError, match=message):
        treemask.apply_token_bitmask_inplace(logits, bitmask)


def test_apply_argument_errors_from_the_library():
    logits, bitmask = np.zeros((2, 64), np.float32), np.zeros((2, 2), np.int32)
    with pytest.raises(treemask.OutOfRangeError):
        treemask.apply_token_bitmask_inplace(logits, bitmask, indices=[0, 5])
    with pytest.raises(treemask.InvalidArgumentError, match="vocab_size 65"):
        treemask.apply_token_bitmask_inplace(logits, bitmask, vocab_size=65)
    with pytest.raises(treemask.InvalidArgumentError, match="needs 2 bitmask words"):
        treemask.apply_token_bitmask_inplace(logits, np.zeros((2, 1), np.int32), vocab_size=64)
    read_only = np.zeros((2, 64), np.float32)
    read_only.setflags(write=False)
    with pytest.raises(treemask.InvalidArgumentError, match="read-only"):
        treemask.apply_token_bitmask_inplace(read_only, bitmask)
    assert np.isfinite(logits).all()  # nothing was written by the failed calls


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_threaded_apply_matches_the_reference(dtype):
    # 9 rows of 151,936 columns: 2.7-5.5 MB, so up to 2-5 threads take part.
    rng = np.random.default_rng(9)
    vocab, rows = 151936, 9
    words = (vocab + 31) // 32
    buffer = rng.standard_normal((rows, vocab + 40)).astype(dtype)
    bitmask = random_bitmask(rng, rows, words, 0.3)
    for n_threads in (2, 3, 8):
        for indices in (None, [0, 2, 3, 5, 8], [7, 1, 4]):
            logits = buffer.copy()[:, :vocab]  # strided rows: stride vocab + 40
            want = reference_apply(logits, bitmask, indices=indices)
            treemask.apply_token_bitmask_inplace(logits, bitmask, indices=indices, n_threads=n_threads)
            np.testing.assert_array_equal(logits, want)


def test_threaded_apply_reports_a_bad_index_and_writes_nothing():
    logits = np.zeros((8, 151936), np.float32)
    bitmask = np.zeros((8, 4748), np.int32)
    with pytest.raises(treemask.OutOfRangeError, match="8"):
        treemask.apply_token_bitmask_inplace(logits, bitmask, indices=[0, 1, 2, 3, 4, 5, 6, 8], n_threads=4)
    assert np.isfinite(logits).all()
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(treemask.InvalidArgumentError, match="n_threads"):
            treemask.apply_token_bitmask_inplace(logits, bitmask, n_threads=bad)


def test_matcher_masks_end_to_end():
    rng = random.Random(3)
    vocab = 1000
    paths = [[rng.randrange(1, vocab) for _ in range(3)] for _ in range(20)]
    trie = treemask.Trie.from_paths(paths, vocab, [0])
    m = treemask.Matcher(trie)
    logits = np.zeros((1, 1024), np.float32)  # a padded vocab
    bitmask = treemask.allocate_token_bitmask(1, vocab)
    m.fill_next_token_bitmask(bitmask)
    treemask.apply_token_bitmask_inplace(logits, bitmask)
    assert np.flatnonzero(np.isfinite(logits[0])).tolist() == m.next_tokens()
    assert treemask.cpu_kernel_isa() in ("avx2", "scalar")
