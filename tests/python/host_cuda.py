"""treemask.torch's device wrappers on the CPU, for machines without a GPU.

:func:`install` points ``treemask.torch`` at :class:`HostCudaLib`, which
answers each ``treemask_cuda_*`` entry point the wrappers call with its host
twin over the same pointers (CPU tensors' memory), and makes the wrappers'
device, stream and device-guard helpers accept the CPU. Then
:class:`treemask.torch.DeviceTrie`, :class:`treemask.torch.DeviceBeam`,
``TrieLogitsProcessor``'s device path and ``treemask.hf``'s device beam
search run here, with their buffers, pointers, strides, prev tracking and
padding exactly as on a GPU; only the kernels differ, and those are compared
with the host twins under the CUDA emulation (tests/cuda) and on a GPU
(tests/python/test_cuda.py).

``treemask_cuda_trie_follow_rows`` has no host twin: it is written here from
its contract (a row equal to a row of prev but for its last id takes one
step from that row's state, matched by key and then compared id by id; any
other row walks from the root; the ids copied to ``copy_to``), with its own
keys. ``treemask_cuda_trie_follow_rows_mask_logits`` is that, then the scores
copied into the logits and the fill-only mask of the new states.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import contextlib

import numpy as np

from treemask._ffi import ffi
from treemask._ffi import lib as real_lib

INT32_MAX = 2**31 - 1


class HostCudaLib:
    """The C library as treemask.torch sees it, with the device entry points
    answered by their host twins. Attributes it does not define are the real
    library's. Counts the calls it answers (``calls``)."""

    def __init__(self):
        self._tries = []  # the host tries standing in for device tries (kept alive)
        self._beams = {}  # beam_width -> treemask_beam *
        self.calls = {}
        self.rows_walked = 0  # follow_rows rows with ids that found no parent in prev
        self.flags = {}  # call name -> the set of flags values it was given

    def __getattr__(self, name):
        return getattr(real_lib, name)

    def _count(self, name, flags=0):
        self.calls[name] = self.calls.get(name, 0) + 1
        if flags & ~real_lib.TREEMASK_CUDA_CALLER_CHECKED_POINTERS:
            raise AssertionError("%s: unknown flags %#x" % (name, flags))
        self.flags.setdefault(name, set()).add(flags)

    @staticmethod
    def _trie(dev_trie):
        return ffi.cast("const treemask_trie *", dev_trie)

    def treemask_cuda_available(self):
        return True

    def treemask_cuda_trie_upload(self, trie, stream, out):
        self._count("upload")
        self._tries.append(trie)
        out[0] = ffi.cast("treemask_cuda_trie *", trie)
        return 0

    def treemask_cuda_trie_free(self, dev_trie):
        pass

    def treemask_cuda_apply_token_bitmask(self, logits, dtype, n_rows, row_stride, width, bitmask, words,
                                          bitmask_rows, vocab_size, indices, n_indices, stream):
        return self.treemask_cuda_apply_token_bitmask_flags(logits, dtype, n_rows, row_stride, width, bitmask,
                                                            words, bitmask_rows, vocab_size, indices, n_indices, 0,
                                                            stream)

    def treemask_cuda_apply_token_bitmask_flags(self, logits, dtype, n_rows, row_stride, width, bitmask, words,
                                                bitmask_rows, vocab_size, indices, n_indices, flags, stream):
        self._count("apply", flags)
        return real_lib.treemask_cpu_apply_token_bitmask(logits, dtype, n_rows, row_stride, width, bitmask, words,
                                                         bitmask_rows, vocab_size, indices, n_indices)

    def treemask_cuda_trie_advance_states(self, dev_trie, states, tokens, n, policy, accepted, stream):
        self._count("advance_states")
        return real_lib.treemask_trie_advance_states(self._trie(dev_trie), states, tokens, n, policy,
                                                     ffi.cast("bool *", accepted))

    def _fill(self, dev_trie, states, n, tokens, policy, accepted):
        """Advances (when tokens) and returns the bitmask rows of the states."""
        trie = self._trie(dev_trie)
        if tokens != ffi.NULL:
            status = real_lib.treemask_trie_advance_states(trie, states, tokens, n, policy,
                                                           ffi.cast("bool *", accepted))
            if status:
                return status, None
        words = (real_lib.treemask_trie_vocab_size(trie) + 31) // 32
        bitmask = np.empty((n, words), dtype=np.int32)
        status = real_lib.treemask_trie_fill_states(trie, states, n, ffi.from_buffer("int32_t[]", bitmask), words)
        return status, bitmask

    def treemask_cuda_trie_advance_fill_bitmask(self, dev_trie, states, tokens, n, policy, accepted, bitmask,
                                                words, stream):
        self._count("advance_fill_bitmask")
        status, rows = self._fill(dev_trie, states, n, tokens, policy, accepted)
        if status:
            return status
        ffi.memmove(bitmask, ffi.from_buffer(rows), rows.nbytes)
        return 0

    def treemask_cuda_trie_advance_mask_logits(self, dev_trie, states, tokens, n, policy, accepted, logits,
                                               dtype, row_stride, width, stream):
        self._count("advance_mask_logits")
        status, rows = self._fill(dev_trie, states, n, tokens, policy, accepted)
        if status:
            return status
        vocab = real_lib.treemask_trie_vocab_size(self._trie(dev_trie))
        return real_lib.treemask_cpu_apply_token_bitmask(logits, dtype, n, row_stride, width,
                                                         ffi.from_buffer("int32_t[]", rows), rows.shape[1], n,
                                                         vocab, ffi.NULL, 0)

    def treemask_cuda_trie_topk_states(self, dev_trie, states, n, logits, k, tokens, scores, counts, n_bad,
                                       stream):
        self._count("topk")
        return real_lib.treemask_trie_topk_states(self._trie(dev_trie), states, n, logits, k, tokens, scores,
                                                  counts)

    def treemask_cuda_beam_workspace_size(self, n_requests, beam_width, out):
        status = real_lib.treemask_cuda_beam_workspace_size(n_requests, beam_width, out)
        if status:  # a libtreemask without CUDA: any size will do here
            out[0] = 8 * n_requests * beam_width * (beam_width + 1) + 8
        return 0

    def treemask_cuda_beam_step(self, dev_trie, n_requests, beam_width, logits, states, scores, parents, tokens,
                                workspace, workspace_bytes, n_bad, stream):
        return self.treemask_cuda_beam_step_flags(dev_trie, n_requests, beam_width, logits, states, scores, parents,
                                                  tokens, workspace, workspace_bytes, n_bad, 0, stream)

    def treemask_cuda_beam_step_flags(self, dev_trie, n_requests, beam_width, logits, states, scores, parents,
                                      tokens, workspace, workspace_bytes, n_bad, flags, stream):
        self._count("beam_step", flags)
        beam = self._beams.get(beam_width)
        if beam is None:
            opts = ffi.new("treemask_beam_options *")
            real_lib.treemask_beam_options_init(opts)
            opts.beam_width = beam_width
            out = ffi.new("treemask_beam **")
            assert real_lib.treemask_beam_create(opts, out) == 0
            beam = self._beams[beam_width] = ffi.gc(out[0], real_lib.treemask_beam_free)
        return real_lib.treemask_beam_step_states(beam, self._trie(dev_trie), n_requests, logits, states, scores,
                                                  parents, tokens)

    def treemask_cuda_trie_follow_rows(self, dev_trie, prev, rows, policy, stream):
        self._count("follow_rows")
        return self._follow(dev_trie, prev, rows, policy)

    def _follow(self, dev_trie, prev, rows, policy):
        trie = self._trie(dev_trie)
        n, stride = rows.n_tokens, rows.row_stride or rows.n_tokens
        ids = [[rows.tokens[r * stride + k] for k in range(n)] for r in range(rows.n_rows)]
        earlier = {}
        if prev != ffi.NULL and prev.n_tokens + 1 == n:
            pstride = prev.row_stride or prev.n_tokens
            for j in range(prev.n_rows):
                row = tuple(prev.tokens[j * pstride + k] for k in range(prev.n_tokens))
                if self._key(row) == prev.keys[j]:  # matched by key, then by ids (the dict)
                    earlier.setdefault(row, prev.states[j])
        state = ffi.new("uint32_t *")
        token = ffi.new("int32_t *")
        for r, row in enumerate(ids):
            parent = earlier.get(tuple(row[:-1])) if n else None
            walk = row[-1:] if parent is not None else row
            self.rows_walked += parent is None and n > 0
            state[0] = parent if parent is not None else 0
            for t in walk:
                token[0] = t if 0 <= t < INT32_MAX else INT32_MAX
                status = real_lib.treemask_trie_advance_states(trie, state, token, 1, policy, ffi.NULL)
                if status:
                    return status
            rows.states[r] = state[0]
            rows.keys[r] = self._key(tuple(row))
            if rows.copy_to != ffi.NULL:
                cstride = rows.copy_stride or n
                for k, t in enumerate(row):
                    rows.copy_to[r * cstride + k] = t
        return 0

    def treemask_cuda_trie_follow_rows_mask_logits(self, dev_trie, prev, rows, policy, scores, scores_stride,
                                                   logits, dtype, row_stride, width, finished_token, flags, stream):
        self._count("follow_rows_mask_logits", flags)
        status = self._follow(dev_trie, prev, rows, policy)
        if status:
            return status
        n = rows.n_rows
        size = 4 if dtype == 0 else 2
        out = ffi.cast("char *", logits)
        if scores != ffi.NULL and scores != logits:
            stride = scores_stride or width
            for r in range(n):
                ffi.memmove(out + r * row_stride * size, ffi.cast("char *", scores) + r * stride * size, width * size)
        # finished_token keeps its score in TERMINATED rows: saved before the
        # mask, put back after it.
        kept = []
        if finished_token >= 0:
            kept = [(r, ffi.buffer(out + (r * row_stride + finished_token) * size, size)[:]) for r in range(n)
                    if rows.states[r] == real_lib.TREEMASK_STATE_TERMINATED]
        status = self.treemask_cuda_trie_advance_mask_logits(dev_trie, rows.states, ffi.NULL, n, policy, ffi.NULL,
                                                             logits, dtype, row_stride, width, stream)
        for r, value in kept:
            ffi.memmove(out + (r * row_stride + finished_token) * size, value, size)
        return status

    def treemask_py_cuda_trie_follow_rows_mask_logits(self, dev_trie, prev, rows, policy, scores, scores_stride,
                                                      logits, dtype, row_stride, width, finished_token, stream):
        """The package's shim (bindings/python/build_ffi.py): integer pointers,
        the caller's word on them."""
        return self.treemask_cuda_trie_follow_rows_mask_logits(
            dev_trie, prev, rows, policy, ffi.cast("const void *", scores), scores_stride, ffi.cast("void *", logits),
            dtype, row_stride, width, finished_token, real_lib.TREEMASK_CUDA_CALLER_CHECKED_POINTERS,
            ffi.cast("void *", stream))

    @staticmethod
    def _key(row):
        return hash(row) & (2**64 - 1)


@contextlib.contextmanager
def _no_guard(device):
    yield


class Patches:
    """monkeypatch's setattr outside pytest (the script runner, the
    benchmarks); undo() puts every attribute back."""

    def __init__(self):
        self._undo = []

    def setattr(self, target, name, value):
        self._undo.append((target, name, getattr(target, name)))
        setattr(target, name, value)

    def undo(self):
        while self._undo:
            setattr(*self._undo.pop())


def install(monkeypatch):
    """Routes treemask.torch (and so treemask.hf's device paths) through a
    HostCudaLib over CPU tensors (monkeypatch: pytest's or a Patches);
    returns it."""
    import torch

    import treemask.torch as tt

    host = HostCudaLib()
    monkeypatch.setattr(tt, "lib", host)
    monkeypatch.setattr(tt, "cuda_available", lambda: True)
    monkeypatch.setattr(tt, "_resolve_device", lambda device: torch.device("cpu"))
    monkeypatch.setattr(tt, "_stream", lambda device: ffi.NULL)
    monkeypatch.setattr(tt, "_stream_handle", lambda device: 0)
    monkeypatch.setattr(tt, "_on_device", _no_guard)
    return host
