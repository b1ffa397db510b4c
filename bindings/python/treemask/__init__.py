"""treemask: constrain LLM generation to a fixed set of token sequences.

A :class:`Trie` holds the allowed token sequences (taxonomy labels, entity
names, semantic IDs, an RTP-LLM ``prefix_dict``); a :class:`Matcher` follows
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
from .beam import (Beam, BeamStep, DeviceTensorError, TopK, beam_kernel_isa, beam_step_states, initial_scores,
                   topk_states)
from .bitmask import (allocate_token_bitmask, apply_token_bitmask, apply_token_bitmask_inplace, cpu_kernel_isa,
                      cuda_available, get_bitmask_shape, reset_token_bitmask)
from .errors import (BufferTooSmallError, CorruptFileError, Error, FileError, InternalError, InvalidArgumentError,
                     InvalidStateError, OutOfMemoryError, OutOfRangeError, ParseError, UnsupportedError,
                     VersionMismatchError, last_error)
from .log import LOG_ERROR, LOG_INFO, LOG_WARNING, log_to_logging, set_log_callback
from .matcher import ExclusionSet, Matcher, MatcherCounters
from .trie import STATE_FAILED, STATE_ROOT, STATE_TERMINATED, SkippedLabel, Trie, TrieStats

__version__ = _ffi.string(_lib.treemask_version_string()).decode("ascii")

__all__ = [
    "Trie", "TrieStats", "SkippedLabel", "Matcher", "MatcherCounters", "BatchMatcher", "ExclusionSet",
    "set_log_callback", "log_to_logging", "LOG_INFO", "LOG_WARNING", "LOG_ERROR",
    "allocate_token_bitmask", "get_bitmask_shape", "reset_token_bitmask", "apply_token_bitmask_inplace",
    "apply_token_bitmask",
    "cuda_available", "cpu_kernel_isa", "library_path", "last_error",
    "STATE_ROOT", "STATE_TERMINATED", "STATE_FAILED",
    "Error", "InvalidArgumentError", "OutOfRangeError", "BufferTooSmallError", "InvalidStateError",
    "OutOfMemoryError", "ParseError", "FileError", "CorruptFileError", "VersionMismatchError",
    "UnsupportedError", "InternalError",
    "Beam", "BeamStep", "TopK", "DeviceTensorError", "beam_step_states", "topk_states", "initial_scores",
    "beam_kernel_isa",
]


def library_path() -> str:
    """The path of the libtreemask this package loaded (it ships inside the
    package), for C code or other bindings that want the same library."""
    return _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "libtreemask.so")
