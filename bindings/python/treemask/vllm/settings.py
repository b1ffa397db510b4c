"""What the operator of a vLLM server decides for treemask, read once from
the environment of each process (the API server and the engine's workers
inherit it). Every per-request cost a client controls is bounded by one of
these.

==================================  ===========  ==============================================
variable                            default      what it bounds
==================================  ===========  ==============================================
``TREEMASK_VLLM_TRIE_DIRS``         unset        directories (``os.pathsep``-separated) whose
                                                 files a request may name; unset: none
``TREEMASK_VLLM_MAX_FILE_BYTES``    1 GiB        the size of one trie file
``TREEMASK_VLLM_MAX_CHOICES``       1,000,000    strings in one ``treemask_choices``
``TREEMASK_VLLM_MAX_CHOICE_BYTES``  64 MiB       UTF-8 bytes of one ``treemask_choices``
                                                 (with the count, its cost: 10x the bytes
                                                 plus 200 B a string on the API server)
``TREEMASK_VLLM_REGISTRY_BYTES``    2 GiB        the tries one process keeps loaded (LRU)
``TREEMASK_VLLM_CACHE_DIR``         per-user     the cache of compiled choice lists and file
                                    tmp dir      snapshots (``off``: none)
``TREEMASK_VLLM_CACHE_BYTES``       1 GiB        that cache's files on disk
``TREEMASK_VLLM_THREADS``           1            CPU masking threads of a processor
==================================  ===========  ==============================================

A malformed value is an error naming the variable when the process reads
it (at the first constrained request), never a silent default.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Mapping, Optional, Tuple

from ..errors import InvalidArgumentError

__all__ = ["Settings", "ENV_TRIE_DIRS", "ENV_MAX_FILE_BYTES", "ENV_MAX_CHOICES", "ENV_MAX_CHOICE_BYTES",
           "ENV_REGISTRY_BYTES", "ENV_CACHE_DIR", "ENV_CACHE_BYTES", "ENV_THREADS"]

ENV_TRIE_DIRS = "TREEMASK_VLLM_TRIE_DIRS"
ENV_MAX_FILE_BYTES = "TREEMASK_VLLM_MAX_FILE_BYTES"
ENV_MAX_CHOICES = "TREEMASK_VLLM_MAX_CHOICES"
ENV_MAX_CHOICE_BYTES = "TREEMASK_VLLM_MAX_CHOICE_BYTES"
ENV_REGISTRY_BYTES = "TREEMASK_VLLM_REGISTRY_BYTES"
ENV_CACHE_DIR = "TREEMASK_VLLM_CACHE_DIR"
ENV_CACHE_BYTES = "TREEMASK_VLLM_CACHE_BYTES"
ENV_THREADS = "TREEMASK_VLLM_THREADS"

_MiB = 1 << 20
_GiB = 1 << 30


@dataclass(frozen=True)
class Settings:
    """The operator's decisions (see the module doc); :meth:`from_env` reads
    them, tests build them directly."""

    trie_dirs: Tuple[str, ...] = ()
    max_file_bytes: int = _GiB
    max_choices: int = 1_000_000
    max_choice_bytes: int = 64 * _MiB
    registry_bytes: int = 2 * _GiB
    #: None: the per-user default directory; "": no disk cache.
    cache_dir: Optional[str] = None
    cache_bytes: int = _GiB
    threads: int = 1
    # Fixed bounds a client cannot raise: a trie name as long as a path can
    # be, the stop tokens of one request, and the tokens a beam request
    # carries before its trie is known (the trie's depth bounds them then).
    max_name_bytes: int = field(default=4096)
    max_stop_tokens: int = field(default=1024)
    max_beam_tokens: int = field(default=65536)

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "Settings":
        env = os.environ if environ is None else environ
        dirs = tuple(d for d in env.get(ENV_TRIE_DIRS, "").split(os.pathsep) if d)
        for d in dirs:
            if not os.path.isabs(d):
                raise InvalidArgumentError("%s: %r is not an absolute path" % (ENV_TRIE_DIRS, d))
        cache_dir: Optional[str] = env.get(ENV_CACHE_DIR) or None
        if cache_dir == "off":
            cache_dir = ""
        return cls(trie_dirs=dirs,
                   max_file_bytes=_size(env, ENV_MAX_FILE_BYTES, cls.max_file_bytes),
                   max_choices=_size(env, ENV_MAX_CHOICES, cls.max_choices),
                   max_choice_bytes=_size(env, ENV_MAX_CHOICE_BYTES, cls.max_choice_bytes),
                   registry_bytes=_size(env, ENV_REGISTRY_BYTES, cls.registry_bytes),
                   cache_dir=cache_dir,
                   cache_bytes=_size(env, ENV_CACHE_BYTES, cls.cache_bytes),
                   threads=max(1, _size(env, ENV_THREADS, cls.threads)))

    def default_cache_dir(self) -> str:
        """The per-user cache directory when TREEMASK_VLLM_CACHE_DIR is unset."""
        return os.path.join(tempfile.gettempdir(), "treemask-vllm-%d" % os.getuid())


def _size(env: Mapping[str, str], name: str, default: int) -> int:
    """A non-negative integer variable; K/M/G suffixes (powers of 1024)."""
    text = env.get(name, "").strip()
    if not text:
        return default
    scale = {"k": 1 << 10, "m": _MiB, "g": _GiB}.get(text[-1].lower(), 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit():
        raise InvalidArgumentError("%s=%r: want a non-negative integer (K, M and G suffixes allowed)"
                                   % (name, text))
    return int(digits) * scale
