#!/usr/bin/env python3
# treemask — a small deterministic workload, run under two glibcs and compared.
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""Loads libtreemask with every symbol bound at once, then imports treemask
and runs a small workload: a trie from token paths, masks filled and applied,
tokens accepted to the end of each path, a save and load, the JSON loader
(simdjson inside the library). Prints one JSON object: where it ran (glibc,
Python) under "env", what it computed under "results" (the part
tests/install/debian11.py compares between Debian 11's Python and this
machine's). Python 3.9 syntax: Debian 11's Python runs it.

usage: glibc_workload.py"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import sys
import tempfile


def lcg(seed: int):
    """Numbers that every Python gives alike (random's algorithms may change)."""
    state = seed
    while True:
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        yield state >> 33


def main() -> int:
    import importlib.util

    spec = importlib.util.find_spec("treemask")
    if spec is None or spec.origin is None:
        raise SystemExit("treemask is not importable from %s" % sys.path)
    lib = os.path.join(os.path.dirname(spec.origin), "libtreemask.so")
    # RTLD_NOW: every symbol the library imports is bound here, or this
    # raises OSError naming the first one missing.
    ctypes.CDLL(lib, mode=os.RTLD_NOW | os.RTLD_LOCAL)

    import numpy as np
    import treemask

    vocab, stop = 1000, 999
    rand = lcg(43)
    paths = []
    for _ in range(300):
        length = 1 + next(rand) % 6
        paths.append([next(rand) % (vocab - 1) for _ in range(length)])
    trie = treemask.Trie.from_paths(paths, vocab_size=vocab, stop_tokens=[stop])
    results: dict = {"n_paths": len(paths), "vocab_size": trie.vocab_size}
    bitmask = treemask.allocate_token_bitmask(1, trie.vocab_size)
    digest = hashlib.sha256()
    walks = []
    for start in range(12):
        matcher = treemask.Matcher(trie)
        accepted = []
        while not matcher.is_terminated():
            matcher.fill_next_token_bitmask(bitmask)
            digest.update(bitmask.tobytes())
            allowed = matcher.next_tokens()
            token = allowed[(start * 7 + len(accepted)) % len(allowed)]
            if not matcher.accept_token(token):
                raise SystemExit("accept_token(%d) refused a token next_tokens() allowed" % token)
            accepted.append(token)
        walks.append({"tokens": accepted, "labels": matcher.label_ids()})
    results["walks"] = walks
    results["bitmask_sha256"] = digest.hexdigest()

    logits = np.array([(next(rand) % 20001 - 10000) / 997.0 for _ in range(vocab)], np.float32).reshape(1, vocab)
    matcher = treemask.Matcher(trie)
    matcher.fill_next_token_bitmask(bitmask)
    treemask.apply_token_bitmask_inplace(logits, bitmask)
    results["masked_logits_sha256"] = hashlib.sha256(logits.tobytes()).hexdigest()
    results["argmax"] = int(logits.argmax())

    with tempfile.TemporaryDirectory(prefix="treemask-workload-") as tmp:
        path = os.path.join(tmp, "paths.tmtrie")
        trie.save(path, metadata={"workload": "glibc"})
        loaded = treemask.Trie.load(path)
        results["saved_file_sha256"] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    results["loaded_next_tokens"] = treemask.Matcher(loaded).next_tokens()[:20]

    rtp = treemask.Trie.from_rtp_json('{"start_token_id": 7, "end_token_id": 2, "sep": ",", '
                                      '"prefix_dict": {"7": [5, 6], "7,5": [2], "7,6": [3], "7,6,3": [2]}}', 10)
    rtp_matcher = treemask.Matcher(rtp)
    rtp_walk = [rtp_matcher.next_tokens()]
    for token in (6, 3):
        rtp_matcher.accept_token(token)
        rtp_walk.append(rtp_matcher.next_tokens())
    results["rtp_json_walk"] = rtp_walk

    print(json.dumps({"env": {"glibc": platform.libc_ver()[1], "python": platform.python_version(),
                              "numpy": np.__version__, "treemask": treemask.__version__, "library": lib},
                      "results": results}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
