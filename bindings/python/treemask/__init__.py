"""treemask: constrain LLM generation to a fixed set of token sequences.

A :class:`Trie` holds the allowed token sequences (taxonomy labels, entity
names, semantic IDs, an RTP-LLM ``prefix_dict``), or a set of strings in any
tokenization over a :class:`Vocab` (:meth:`Trie.from_strings`); a :class:`Matcher` follows
one sequence and fills xgrammar-layout next-token bitmasks;
:class:`BatchMatcher` fills and advances many rows in one call;
:func:`apply_token_bitmask_inplace` masks numpy arrays or torch tensors.
``treemask.torch`` adds tensor bitmasks and the GPU-resident
:class:`treemask.torch.DeviceTrie`; ``treemask.hf`` the transformers
``TrieLogitsProcessor``.

The package needs numpy; it imports torch only in ``treemask.torch`` and
``treemask.hf`` (and recognises tensors without importing it).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os as _os

from ._ffi import ffi as _ffi, lib as _lib
from .batch import BatchMatcher
from .beam import (Beam, BeamStep, DeviceTensorError, TopK, beam_kernel_isa, beam_step_states, initial_ends,
                   initial_scores, topk_states)
from .bitmask import (allocate_token_bitmask, apply_token_bitmask, apply_token_bitmask_inplace, cpu_kernel_isa,
                      cuda_available, get_bitmask_shape, reset_token_bitmask)
from .errors import (BufferTooSmallError, CorruptFileError, Error, FileError, InternalError, InvalidArgumentError,
                     InvalidStateError, OutOfMemoryError, OutOfRangeError, ParseError, UnsupportedError,
                     VersionMismatchError, last_error)
from .log import LOG_ERROR, LOG_INFO, LOG_WARNING, log_to_logging, set_log_callback
from .matcher import ExclusionSet, Matcher, MatcherCounters
from .trie import STATE_FAILED, STATE_ROOT, STATE_TERMINATED, SkippedLabel, Trie, TrieStats
from .vocab import Vocab

__version__ = _ffi.string(_lib.treemask_version_string()).decode("ascii")

#: What the package exposes of the C header's experimental tier (treemask.h,
#: "Stability tiers"): it may change in any minor release. Each entry is a
#: dotted path from this package (``"Matcher(label_separator=...)"`` names
#: the matcher's decoding-mode arguments); the test suite checks that each
#: one exists. Everything else follows the stable tier.
EXPERIMENTAL = frozenset({
    # decoding modes: the Matcher's mode arguments and what they add
    "Matcher(label_separator=, max_labels=, leaves_only=, think_end_tokens=, think_begin_token=, "
    "start_in_thinking=, max_thinking_tokens=, max_new_tokens=, override_stop_tokens=, "
    "think_force_end_after_prefix=)",
    "Matcher.fill_next_token_bitmask(remaining_tokens=)",
    "Matcher.remaining_tokens", "Matcher.set_label_filter", "Matcher.produced_labels",
    "Matcher.is_thinking", "ExclusionSet",
    # speculative decoding and jump-forward
    "Matcher.accept_tokens", "Matcher.fill_draft_bitmasks", "Matcher.accept_forced_tokens",
    # counters
    "Matcher.counters", "MatcherCounters",
    # the incremental fill of a bound batch buffer
    "BatchMatcher.bind_bitmask", "BatchMatcher.fill_bound", "BatchMatcher.invalidate",
    # state arrays
    "Trie.fill_states", "Trie.advance_states", "Matcher.state", "STATE_ROOT", "STATE_TERMINATED",
    "STATE_FAILED",
    # the beam step and top-k
    "Beam", "BeamStep", "TopK", "beam_step_states", "topk_states", "initial_scores", "initial_ends",
    "beam_kernel_isa", "BatchMatcher.beam_step", "Beam.step_states(ends=)", "torch.batch_beam_step",
    # the CUDA device trie and its steps
    "torch.DeviceTrie", "torch.DeviceBeam", "torch.DeviceRowStates",
    # string sets at the byte level
    "Vocab", "Trie.from_strings", "Trie.is_string_set", "Trie.vocab", "Trie.load(vocab=)",
    "Matcher.forced_bytes", "Trie.check_vocab",
})

__all__ = [
    "Trie", "TrieStats", "SkippedLabel", "Vocab", "Matcher", "MatcherCounters", "BatchMatcher", "ExclusionSet",
    "set_log_callback", "log_to_logging", "LOG_INFO", "LOG_WARNING", "LOG_ERROR",
    "allocate_token_bitmask", "get_bitmask_shape", "reset_token_bitmask", "apply_token_bitmask_inplace",
    "apply_token_bitmask",
    "cuda_available", "cuda_unavailable_reason", "cpu_kernel_isa", "library_path", "last_error",
    "STATE_ROOT", "STATE_TERMINATED", "STATE_FAILED",
    "Error", "InvalidArgumentError", "OutOfRangeError", "BufferTooSmallError", "InvalidStateError",
    "OutOfMemoryError", "ParseError", "FileError", "CorruptFileError", "VersionMismatchError",
    "UnsupportedError", "InternalError",
    "Beam", "BeamStep", "TopK", "DeviceTensorError", "beam_step_states", "topk_states", "initial_scores",
    "initial_ends", "beam_kernel_isa", "EXPERIMENTAL",
]


def library_path() -> str:
    """The path of the libtreemask this package loaded (it ships inside the
    package), for C code or other bindings that want the same library."""
    return _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "libtreemask.so")


def cuda_unavailable_reason() -> "str | None":
    """Why :func:`cuda_available` is False, in one line (None when it is
    True): the library was built without CUDA, no NVIDIA driver is loaded,
    the driver is older than the CUDA runtime inside the library needs (or
    new enough but refused: the driver versions read are named), no device
    is visible, or the device's architecture has no kernel image.
    Nothing is raised: a machine without a GPU is a normal place to run."""
    if cuda_available():
        return None
    # The device check behind every CUDA call names the reason; uploading a
    # one-path trie runs it (and nothing else: it fails before any allocation).
    trie = _ffi.new("treemask_trie **")
    opts = _ffi.new("treemask_trie_options *")
    _lib.treemask_trie_options_init(opts)
    opts.vocab_size = 2
    stop = _ffi.new("int32_t[]", [0])
    opts.stop_tokens = stop
    opts.n_stop_tokens = 1
    path = _ffi.new("int32_t[]", [1])
    offsets = _ffi.new("size_t[]", [0, 1])
    if _lib.treemask_trie_from_paths(opts, path, offsets, 1, _ffi.NULL, trie) != 0:
        return "cannot tell: %s" % last_error()
    try:
        device_trie = _ffi.new("treemask_cuda_trie **")
        status = _lib.treemask_cuda_trie_upload(trie[0], _ffi.NULL, device_trie)
        if status == 0:  # a device appeared since cuda_available() asked
            _lib.treemask_cuda_trie_free(device_trie[0])
            return None
        reason = last_error()
    finally:
        _lib.treemask_trie_free(trie[0])
    return reason
