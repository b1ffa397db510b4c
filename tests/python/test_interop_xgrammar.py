"""Interop with xgrammar: the same bitmask layout both ways. xgrammar's masks
applied by treemask's kernel equal xgrammar's own CPU kernel, treemask's
masks applied by xgrammar's kernel equal ours, and for the same set of
sequences both libraries produce bit-identical masks.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import random
import string

import numpy as np
import pytest

import treemask
from conftest import scaled

torch = pytest.importorskip("torch", reason="torch is not installed (./dev installs it)")
xgr = pytest.importorskip("xgrammar", reason="xgrammar is not installed (./dev installs it)")

# One character per token, so a grammar over strings is a grammar over
# token ids with no ambiguity: id i spells LETTERS[i - 1]; id 0 is EOS.
LETTERS = list(string.ascii_letters[:40])
VOCAB = ["<eos>"] + LETTERS + ["<pad%d>" % i for i in range(59)]  # 100 ids, an awkward 4 words


def xgrammar_kernel(logits, bitmask, **kw):
    xgr.apply_token_bitmask_inplace(logits, bitmask, backend="cpu", **kw)


def both_kernels(logits, bitmask, **kw):
    ours, theirs = logits.clone(), logits.clone()
    treemask.apply_token_bitmask_inplace(ours, bitmask, **kw)
    xgrammar_kernel(theirs, bitmask, **kw)
    return ours, theirs


def test_random_masks_apply_identically():
    gen = torch.Generator().manual_seed(0)
    # Not vocab 1: xgrammar 0.2.8's CPU kernel corrupts the heap there
    # (glibc aborts with "free(): invalid next size"), with or without treemask loaded.
    for vocab in (31, 32, 33, 1000, 151936):
        words = (vocab + 31) // 32
        for rows in (1, 3):
            logits = torch.randn((rows, vocab), generator=gen)
            bitmask = torch.randint(-2**31, 2**31 - 1, (rows, words), generator=gen, dtype=torch.int32)
            ours, theirs = both_kernels(logits, bitmask)
            same = torch.equal(ours, theirs)  # (no tensor repr in the failure message: it is huge)
            assert same, vocab
    logits = torch.randn((4, 200), generator=gen)
    bitmask = torch.randint(-2**31, 2**31 - 1, (4, 7), generator=gen, dtype=torch.int32)
    ours, theirs = both_kernels(logits, bitmask, vocab_size=150, indices=[0, 2])
    assert torch.equal(ours[:, :150], theirs[:, :150])
    # The one documented difference: columns at or past vocab_size (a padded
    # vocab) are masked by treemask and left alone by xgrammar.
    assert bool(torch.isneginf(ours[[0, 2], 150:]).all()) and torch.equal(theirs[:, 150:], logits[:, 150:])
    assert torch.equal(ours[[1, 3]], logits[[1, 3]])


def trie_and_grammar(rng):
    paths = set()
    while len(paths) < 12:
        paths.add(tuple(rng.randrange(1, len(LETTERS) + 1) for _ in range(rng.randint(1, 5))))
    paths = sorted(paths)
    trie = treemask.Trie.from_paths(paths, len(VOCAB), [0])
    alternatives = " | ".join('"%s"' % "".join(LETTERS[t - 1] for t in p) for p in paths)
    info = xgr.TokenizerInfo(VOCAB, vocab_type=xgr.VocabType.RAW, vocab_size=len(VOCAB), stop_token_ids=[0])
    compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_grammar("root ::= " + alternatives)
    return paths, trie, compiled


def test_same_sequences_give_bit_identical_masks():
    rng = random.Random(1)
    for _ in range(scaled(10)):
        paths, trie, compiled = trie_and_grammar(rng)
        path = rng.choice(paths)
        ours = treemask.Matcher(trie)
        theirs = xgr.GrammarMatcher(compiled)
        our_mask = torch.full((1, 4), -1, dtype=torch.int32)
        their_mask = xgr.allocate_token_bitmask(1, len(VOCAB))
        for token in list(path) + [0]:
            ours.fill_next_token_bitmask(our_mask)
            theirs.fill_next_token_bitmask(their_mask)
            assert torch.equal(our_mask, their_mask), (path, token)
            logits = torch.randn((1, len(VOCAB)))
            a, b = both_kernels(logits, our_mask)
            assert torch.equal(a, b)
            assert ours.accept_token(token) and theirs.accept_token(token)
        assert ours.is_terminated() and theirs.is_terminated()
