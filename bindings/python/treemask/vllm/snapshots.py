"""A served file's private snapshot: what the registry loads instead of the
operator's file.

A ``.tmtrie`` is mapped, and the C library's rule for a mapped file is that
it must not be truncated or rewritten in place while a trie loaded from it
is alive: the validated arrays would change under the trie (SIGSEGV) or
their pages vanish (SIGBUS), and in vLLM that kills the engine's worker.
An operator's ``cp``, ``scp``, editor or sync job rewrites a file in place.
So no process of the plugin maps an operator's file:

- :func:`take` copies the file's bytes, through the descriptor
  :mod:`~treemask.vllm.files` opened and checked, into a new private file
  (a temporary of the cache directory, or of the system's temporary
  directory when the cache is off), hashing them on the way, and loads
  that copy: a ``.tmtrie`` is mapped with every check, checksum included;
  an RTP-LLM ``.json`` / ``.tsv`` or a ``.jsonl`` is parsed from it. Nobody
  else writes that file, so what is mapped never changes.
- A copy that may be torn is never used: the file's identity (device,
  inode, size, modification and change times) is compared before and after
  the copy, a short read means the file shrank, and a ``.tmtrie``'s
  checksum catches a same-size rewrite the clock did not see. A changed
  file raises :class:`FileChanged` (the registry opens it again and
  retries, then fails the request with a clear error); a file that fails
  its checks while unchanged is a corrupt file (a clear error, as before).
- The checked snapshot is kept in the cache directory under its digest
  (the SHA-256 of the bytes and of the keys that change how they are read:
  format, vocab size, an RTP-LLM ``.tsv``'s start and end ids, the stop
  tokens a text format is built with), a ``.tmtrie`` as the copy itself,
  a text format as the trie parsed from it. The digest travels with the
  request from the API server to the engine's worker
  (``treemask_snapshot``, which only the front end sets), so the worker
  maps that snapshot instead of reading or parsing the file inside its
  step, and gets the version the request was checked against; the same
  bytes copied again (``cp`` of the same file) name the same snapshot and
  are not parsed again.

The cost of a snapshot: one copy of the file (disk, at most
``TREEMASK_VLLM_MAX_FILE_BYTES`` per load in flight) and one hashing pass
per new file identity; a published snapshot counts against
``TREEMASK_VLLM_CACHE_BYTES`` (a larger one is not kept: each process then
loads its own private copy, the worker too).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from typing import Any, Callable, Optional, Tuple

from ..trie import Trie
from .choice_cache import ChoiceCache
from .files import OpenedFile, identity_of

__all__ = ["take", "FileChanged", "reading_of"]

logger = logging.getLogger("treemask.vllm")

#: Bytes copied and hashed at once.
COPY_CHUNK = 1 << 20
#: Part of every digest: a change of what a snapshot holds changes it.
_VERSION = "treemask.vllm snapshot 1"


class FileChanged(Exception):
    """The file changed while it was being copied (the copy may be torn)."""


def reading_of(fmt: str, vocab_size: int, start: Optional[int], end: Optional[int],
               stops: Tuple[int, ...]) -> Tuple[Any, ...]:
    """What changes how a file's bytes are read (part of its snapshot's
    digest): nothing but the format for a ``.tmtrie``, which holds its own
    stop tokens and is checked against the model afterwards."""
    if fmt == "tmtrie":
        return (fmt,)
    return (fmt, vocab_size, start, end, tuple(stops))


def take(opened: OpenedFile, reading: Tuple[Any, ...], parse: Callable[[str], Trie],
         store: Optional[ChoiceCache]) -> Tuple[Trie, Optional[str], bool]:
    """The trie of ``opened``, loaded from a private copy of its bytes
    (see the module doc): ``(trie, digest, parsed)``, the digest only when
    the snapshot is in ``store`` (where a worker can map it), ``parsed``
    False when a snapshot of the same bytes, read the same way, was there
    already. ``parse`` loads or parses a path in ``opened.format``. Raises
    FileChanged, or what ``parse`` raises for a file that did not change."""
    temporary = store.temporary() if store is not None else None
    if temporary is not None:
        out, name, path = temporary
    else:
        out, path = tempfile.mkstemp(prefix="treemask-snapshot-", suffix=".tmtrie")
        name = ""
    try:
        try:
            digest = _copy(opened, out, reading)
        finally:
            os.close(out)
        if store is not None and opened.format != "tmtrie":
            # The same bytes read the same way before (another version of
            # the same content, another process): no parse.
            trie = store.load_snapshot(digest)
            if trie is not None:
                return trie, digest, False
        try:
            trie = parse(path)
        except Exception:
            if _changed(opened):
                raise FileChanged() from None
            raise
        if temporary is None or store is None:
            return trie, None, True
        if opened.format == "tmtrie":
            kept = store.publish(name, digest)  # the checked copy itself
        else:
            kept = store.save(digest, trie, 0)
        return trie, digest if kept else None, True
    finally:
        # The copy stays mapped (an unlinked .tmtrie keeps its pages) or
        # was published under its digest; the temporary name goes.
        if temporary is not None:
            assert store is not None
            store.discard(name)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def _copy(opened: OpenedFile, out: int, reading: Tuple[Any, ...]) -> str:
    """Copies the file's ``opened.size`` bytes to ``out``; returns the
    digest of the reading and the bytes. FileChanged when the file is not
    the one opened any more: shorter, or another identity afterwards."""
    h = hashlib.sha256(json.dumps([_VERSION, *reading]).encode("utf-8"))
    offset = 0
    while offset < opened.size:
        chunk = os.pread(opened.fd, min(COPY_CHUNK, opened.size - offset), offset)
        if not chunk:
            raise FileChanged()
        h.update(chunk)
        view = memoryview(chunk)
        while view:
            view = view[os.write(out, view):]
        offset += len(chunk)
    if _changed(opened):
        raise FileChanged()
    return h.hexdigest()


def _changed(opened: OpenedFile) -> bool:
    try:
        return identity_of(os.fstat(opened.fd)) != opened.identity
    except OSError:
        return True
