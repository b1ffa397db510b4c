"""Test helpers: random token paths, the allowed ids of a bitmask row, and
TrieModel, the set of paths a trie holds (what the transformers processor
and the path round trips are checked against; the matcher's rules are
tested once, in C++, against tests/common/oracle.h).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import random

import numpy as np


def allowed_tokens(bitmask_row, vocab_size=None):
    """The token ids whose bit is set in one int32 bitmask row."""
    bits = np.unpackbits(np.ascontiguousarray(bitmask_row).view(np.uint8), bitorder="little")
    ids = np.flatnonzero(bits)
    return ids.tolist() if vocab_size is None else ids[ids < vocab_size].tolist()


def random_paths(rng: random.Random, n_paths: int, vocab_size: int, max_len: int, stops=()):
    """n_paths random token paths with shared prefixes (tokens drawn from a
    small alphabet so that paths branch and share)."""
    alphabet = [t for t in rng.sample(range(vocab_size), min(vocab_size, 12)) if t not in stops]
    paths = []
    for _ in range(n_paths):
        if paths and rng.random() < 0.3:  # extend or branch off an existing path
            base = list(rng.choice(paths))[: rng.randint(0, max_len)]
        else:
            base = []
        while len(base) < rng.randint(1, max_len):
            base.append(rng.choice(alphabet))
        paths.append(base)
    return paths


class TrieModel:
    """The set of paths, the stop tokens and the matcher rules."""

    def __init__(self, paths, stops, labels=None):
        self.paths = [tuple(p) for p in paths]
        self.path_set = set(self.paths)
        self.stops = sorted(set(stops))
        self.labels = {}
        for i, p in enumerate(self.paths):
            self.labels.setdefault(p, set()).add(i if labels is None else labels[i])

    def allowed(self, prefix, terminated=False):
        if terminated:
            return list(self.stops)
        n = len(prefix)
        out = {p[n] for p in self.paths if len(p) > n and p[:n] == prefix}
        if prefix in self.path_set:
            out.update(self.stops)
        return sorted(out)

    def is_prefix(self, prefix):
        n = len(prefix)
        return any(p[:n] == prefix for p in self.paths)
