"""A plain-Python model of the trie rules, the reference the tests compare
treemask with (the Python twin of tests/common/oracle.h).

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


class MatcherModel:
    """What a treemask matcher must do, step by step."""

    def __init__(self, trie: TrieModel, policy="reject"):
        self.trie = trie
        self.policy = policy
        self.reset()

    def reset(self):
        self.prefix = ()
        self.terminated = False
        self.closed = False  # fail_closed after a rejection
        self.failed = False  # sticky_error
        self.history = []  # states to roll back to

    def allowed(self):
        if self.terminated or self.closed or self.failed:
            return list(self.trie.stops)
        return self.trie.allowed(self.prefix)

    def accept(self, token):
        """True iff accepted. (The sticky-error failed state is an error in
        treemask, not a rejection; callers check `failed` first.)"""
        stops = self.trie.stops
        if self.terminated:
            return token in stops
        if self.closed:
            if token in stops:
                self.terminated = True
                return True
            return False
        if token in stops and self.prefix in self.trie.path_set:
            self.history.append((self.prefix, self.terminated))
            self.terminated = True
            return True
        if token not in stops and self.trie.is_prefix(self.prefix + (token,)):
            self.history.append((self.prefix, self.terminated))
            self.prefix = self.prefix + (token,)
            return True
        if self.policy == "fail_closed":
            self.closed = True
            self.history = []
        elif self.policy == "sticky_error":
            self.failed = True
        return False

    def rollback(self, n):
        for _ in range(n):
            self.prefix, self.terminated = self.history.pop()

    def label_ids(self):
        if self.closed or self.failed:
            return []
        return sorted(self.trie.labels.get(self.prefix, ()))
