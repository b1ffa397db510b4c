"""Fault injection for tests/vllm/test_faults.py: a server started with this
directory on PYTHONPATH and TREEMASK_TEST_FAULTS=1 has, in every process
(the API server, the engine core and the spawned worker), treemask's vLLM
processor patched so that one request's processing raises:

- a request whose choices include ``FAULT_ADD`` raises RuntimeError when
  its row is added to the batch (``beam.is_beam_request``, which the
  processor calls for every new row);
- a request whose choices include ``FAULT_STEP`` raises RuntimeError when
  its row's bitmask is filled (``BatchMatcher.fill_bound`` with its slot
  among the slots, and the slot's own ``fill_next_token_bitmask``).

With TREEMASK_TEST_LOG=1 instead (or too), treemask's ``treemask.vllm``
logger writes its INFO lines to stderr in every process (the server's log):
test_served_files.py counts the registry's file reads and snapshot maps
there, by process.

Nothing of this is in the package: the test starts the server with it, and
without TREEMASK_TEST_FAULTS=1 or TREEMASK_TEST_LOG=1 it does nothing.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import importlib.abc
import importlib.util
import logging
import os
import sys

FAULT_ADD = "treemask-test-fault-at-add"
FAULT_STEP = "treemask-test-fault-at-step"
TARGET = "treemask.vllm.processor"


def _poisoned(trie, marker):
    labels = getattr(trie, "labels", None)
    return bool(labels) and marker in labels


def _patch(processor):
    import treemask.batch
    import treemask.matcher
    from treemask.vllm import beam

    is_beam_request = beam.is_beam_request

    def poisoned_is_beam_request(extra_args):
        if extra_args and FAULT_ADD in (extra_args.get("treemask_choices") or ()):
            raise RuntimeError("injected fault at add (tests/vllm/faults)")
        return is_beam_request(extra_args)

    beam.is_beam_request = poisoned_is_beam_request

    fill_bound = treemask.batch.BatchMatcher.fill_bound

    def poisoned_fill_bound(self, slots=None, **kwargs):
        tries = getattr(self, "_tries", [])
        if any(_poisoned(tries[s], FAULT_STEP) for s in (slots or ()) if s < len(tries) and tries[s] is not None):
            raise RuntimeError("injected fault in the batch fill (tests/vllm/faults)")
        return fill_bound(self, slots, **kwargs)

    treemask.batch.BatchMatcher.fill_bound = poisoned_fill_bound

    fill_row = treemask.matcher._MatcherMethods.fill_next_token_bitmask

    def poisoned_fill_row(self, *args, **kwargs):
        if _poisoned(getattr(self, "_trie", None), FAULT_STEP):
            raise RuntimeError("injected fault in a row's fill (tests/vllm/faults)")
        return fill_row(self, *args, **kwargs)

    treemask.matcher._MatcherMethods.fill_next_token_bitmask = poisoned_fill_row
    print("[treemask test faults] installed in process %d" % os.getpid(), file=sys.stderr, flush=True)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _patch(module)

        loader.exec_module = exec_module
        return spec


if os.environ.get("TREEMASK_TEST_FAULTS") == "1":
    sys.meta_path.insert(0, _Finder())
if os.environ.get("TREEMASK_TEST_LOG") == "1":
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("[treemask test log] %(message)s"))
    logging.getLogger("treemask.vllm").addHandler(_handler)
    logging.getLogger("treemask.vllm").setLevel(logging.INFO)
