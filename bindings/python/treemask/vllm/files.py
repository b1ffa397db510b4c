"""The trie files a request may name: the operator's allowlist.

vLLM's own rule for request-supplied local paths (``--allowed-local-media-path``)
applies: a request may name a file only inside the directories the operator
lists in ``TREEMASK_VLLM_TRIE_DIRS``; with none, no file at all. A name is
an absolute path or a path relative to those directories (the first that
holds it wins); it is allowed only if its real path (symlinks and ``..``
resolved) lies inside one of them, and only a regular file is read (opened
with ``O_NONBLOCK``, so a FIFO never blocks, then checked with ``fstat``).

Every refusal -- missing, outside, a symlink out, ``..``, a directory, a
FIFO, unreadable -- is one and the same message, whatever the file system
holds, so a client cannot probe which files exist. The size is capped
(``TREEMASK_VLLM_MAX_FILE_BYTES``) and the first bytes are checked for the
format before anything reads the rest.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import logging
import os
import stat
from typing import Optional, Sequence, Tuple

from .keys import KEY_TRIE, FileSource, RequestError
from .settings import ENV_TRIE_DIRS

__all__ = ["TrieFiles", "OpenedFile", "REFUSED", "identity_of"]

logger = logging.getLogger("treemask.vllm")

#: The one answer to a name that is not an allowed, regular, readable file.
REFUSED = ("%s: no trie file of that name is available to requests on this server (a request may name only"
           " files inside the directories its operator allows)" % KEY_TRIE)
_NONE_ALLOWED = ("%s: this server allows no trie files (its operator has not set %s); use treemask_choices"
                 % (KEY_TRIE, ENV_TRIE_DIRS))

_TMTRIE_MAGIC = b"\x89TMTRIE\n"
_HEAD_BYTES = 4096
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0) \
    | getattr(os, "O_NOFOLLOW", 0)


class OpenedFile:
    """An allowed trie file, open: its descriptor (the very file that was
    checked, which the registry copies into a private snapshot:
    :mod:`treemask.vllm.snapshots`) and its identity. A context manager;
    closing closes the descriptor."""

    def __init__(self, fd: int, real_path: str, st: os.stat_result, fmt: str) -> None:
        self.fd = fd
        self.real_path = real_path
        self.format = fmt
        self.size = st.st_size
        #: A file replaced by an atomic rename is another file, and one
        #: rewritten in place another version (see identity_of).
        self.identity: Tuple[int, ...] = identity_of(st)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "OpenedFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def identity_of(st: os.stat_result) -> Tuple[int, ...]:
    """What tells one version of a file from another: (device, inode, size,
    modification time, change time). A rename gives another inode; ``cp``
    or an editor writing in place keeps the inode and changes the times
    (and, while it writes, the size)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class TrieFiles:
    """Resolves and opens the files requests name (see the module doc)."""

    def __init__(self, dirs: Sequence[str], max_file_bytes: int) -> None:
        self.dirs = tuple(os.path.realpath(d) for d in dirs)
        self.max_file_bytes = max_file_bytes

    def open(self, source: FileSource) -> OpenedFile:
        """The opened file of source, or RequestError: REFUSED (logged with
        the reason), too large, or not the format its extension says."""
        if not self.dirs:
            raise RequestError(_NONE_ALLOWED)
        for candidate in self._candidates(source.name):
            opened = self._open_allowed(candidate, source.format)
            if opened is not None:
                try:
                    self._check(opened, source)
                except BaseException:
                    opened.close()
                    raise
                return opened
        logger.warning("treemask: refused %s %r: no allowed regular file of that name in %s",
                       KEY_TRIE, source.name[:200], os.pathsep.join(self.dirs))
        raise RequestError(REFUSED)

    def _candidates(self, name: str) -> Sequence[str]:
        if os.path.isabs(name):
            return [name]
        return [os.path.join(d, name) for d in self.dirs]

    def _inside(self, real: str) -> bool:
        return any(real == d or real.startswith(d.rstrip(os.sep) + os.sep) for d in self.dirs)

    def _open_allowed(self, candidate: str, fmt: str) -> Optional[OpenedFile]:
        try:
            real = os.path.realpath(candidate)
        except (OSError, ValueError):
            return None
        if not self._inside(real):
            return None
        try:
            fd = os.open(real, _FLAGS)  # O_NONBLOCK: opening a FIFO returns at once
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            # The file opened is the one checked: not a symlink swapped in
            # since (O_NOFOLLOW on the last component, the procfs link for
            # the directories above it), and a regular file.
            proc = "/proc/self/fd/%d" % fd
            if os.path.islink(proc) and not self._inside(os.readlink(proc)):
                raise OSError("moved outside the allowed directories while being opened")
            if not stat.S_ISREG(st.st_mode):
                raise OSError("not a regular file")
        except OSError as e:
            logger.warning("treemask: refused %s %r: %s", KEY_TRIE, candidate[:200], e)
            os.close(fd)
            return None
        return OpenedFile(fd, real, st, fmt)

    def _check(self, opened: OpenedFile, source: FileSource) -> None:
        """The size cap and the first bytes, before any loader reads the rest."""
        if opened.size > self.max_file_bytes:
            raise RequestError("%s %r: the file is larger than this server's limit of %d bytes"
                               % (KEY_TRIE, _clip(source.name), self.max_file_bytes))
        head = os.pread(opened.fd, _HEAD_BYTES, 0)
        problem = _head_problem(opened.format, head, opened.size)
        if problem:
            raise RequestError("%s %r: not %s file: %s" % (KEY_TRIE, _clip(source.name),
                                                           _FORMAT_NAMES[opened.format], problem))


_FORMAT_NAMES = {"tmtrie": "a .tmtrie", "rtp_json": "an RTP-LLM JSON", "rtp_tsv": "an RTP-LLM TSV",
                 "jsonl": "a JSON Lines"}


def _head_problem(fmt: str, head: bytes, size: int) -> str:
    """What is wrong with a file's first bytes for its format ("" if
    nothing): said without quoting them."""
    if size == 0:
        return "it is empty"
    if fmt == "tmtrie":
        return "" if head.startswith(_TMTRIE_MAGIC) else "its first bytes are not the .tmtrie magic"
    text = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
    first = text.lstrip(b" \t\r\n")[:1]
    if fmt == "rtp_json":
        return "" if first in (b"{", b"") else "it does not start with '{'"
    if fmt == "jsonl":
        return "" if first in (b"[", b"{", b"") else "its first line does not start with '[' or '{'"
    # rtp_tsv: lines "key<TAB>ids"; the first line must have its tab early.
    line = text.split(b"\n", 1)[0]
    if b"\t" not in line and (b"\n" in text or len(text) < _HEAD_BYTES):
        return "its first line has no tab"
    if b"\t" not in line:
        return "its first line has no tab in its first %d bytes" % _HEAD_BYTES
    return ""


def _clip(text: str, n: int = 120) -> str:
    return text if len(text) <= n else text[:n] + "..."
