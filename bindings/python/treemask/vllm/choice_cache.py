"""The on-disk cache of compiled choice lists and of the snapshots of
allowed files: the engine's worker maps what the API server compiled or
loaded when it validated the request, instead of tokenizing the list or
parsing the file a second time inside its step.

Each list is a ``.tmtrie`` named by the SHA-256 of what was compiled (the
list, prefix, stop tokens, vocab size and tokenizer), each file snapshot
one named by the SHA-256 of the file's bytes and the keys that change how
it is read (:mod:`treemask.vllm.snapshots`), in a private directory of
this user: ``TREEMASK_VLLM_CACHE_DIR``, default
``<tmp>/treemask-vllm-<uid>``, ``off`` for none. The cache only ever
touches its own files:

- the directory is opened with ``O_NOFOLLOW`` and checked with ``lstat``:
  a symlink, a directory of another user or one others may write is
  refused (the cache turns off, saying why), and every later operation
  goes through that descriptor, so swapping the path for a symlink
  afterwards changes nothing;
- eviction deletes only files whose names are the cache's own (64 hex
  digits and ``.tmtrie``, or such a name's temporary ``.tmp.<pid>.<n>``
  left by a crash), oldest first, until the files fit
  ``TREEMASK_VLLM_CACHE_BYTES``; a list larger than that is not cached.

A cached list is used only if the digest its file records is the one asked
for (the SHA-256 of the list, prefix, stop tokens, vocab size and
tokenizer: the file holds no copy of the strings, whose JSON cost the API
server ~40 bytes a string to write and the worker ~85 to read; the
request's own strings become the trie's labels), it passes the ``.tmtrie``
checks, checksum included, and holds the stop tokens and vocab size asked
for (and, for a list in any tokenization, is a string set over the model's
vocabulary: its fingerprint is part of the digest and checked at load); a
snapshot only under the name the process that wrote it gave it (its
digest, which the request carries from the API server to the worker), and
only if it passes the same checks. Every file is written under a temporary
name and renamed, never rewritten in place, so a process that maps one
keeps a valid mapping whatever the others do.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import stat
import threading
import time
from typing import List, Optional, Tuple

from .._ffi import ffi, lib
from ..errors import Error
from ..trie import Trie
from ..vocab import Vocab

__all__ = ["ChoiceCache", "digest_of", "META_DIGEST"]

logger = logging.getLogger("treemask.vllm")

_DIGEST = re.compile(r"[0-9a-f]{64}")
#: The metadata key of a cached list's file: the digest it was saved under.
META_DIGEST = "treemask.vllm.digest"
_OWN_NAME = re.compile(r"[0-9a-f]{64}\.tmtrie")
_OWN_TEMPORARY = re.compile(r"[0-9a-f]{64}\.tmtrie\.tmp\.\d+\.\d+")
_STALE_TEMPORARY_S = 3600.0


#: Choices hashed at once (the digest never holds a second copy of a list).
_DIGEST_CHUNK = 4096


def digest_of(choices: Tuple[str, ...], prefix: str, stops: Tuple[int, ...], vocab_size: int,
              tokenizer_id: str = "") -> str:
    """The cache name of a compiled list (hex SHA-256 of everything that
    decides its tokens): the JSON of ``[prefix, stops, vocab_size,
    tokenizer_id]``, then the JSON array of each run of 4,096 choices (each
    array delimits itself, so two lists never hash alike by being cut
    differently)."""
    h = hashlib.sha256(json.dumps([prefix, list(stops), vocab_size, tokenizer_id], ensure_ascii=False)
                       .encode("utf-8"))
    for begin in range(0, len(choices), _DIGEST_CHUNK):
        h.update(json.dumps(choices[begin:begin + _DIGEST_CHUNK], ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()


class ChoiceCache:
    """See the module doc. Thread-safe."""

    def __init__(self, path: str, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._fd: Optional[int] = None
        self._off = False
        self._serial = 0

    def close(self) -> None:
        """Closes the directory's descriptor (a later use opens it again)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def _dir_fd(self) -> Optional[int]:
        """The cache directory's descriptor (created private if missing), or
        None when the cache is off."""
        with self._lock:
            if self._fd is not None or self._off:
                return self._fd
            try:
                try:
                    os.mkdir(self.path, 0o700)
                except FileExistsError:
                    pass
                st = os.lstat(self.path)
                if stat.S_ISLNK(st.st_mode):
                    raise OSError("%s is a symlink" % self.path)
                fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
                st = os.fstat(fd)
                if st.st_uid != os.getuid() or st.st_mode & 0o022:
                    os.close(fd)
                    raise OSError("%s is not a private directory of this user" % self.path)
            except OSError as e:
                logger.warning("treemask: the choice-list file cache is off: %s", e)
                self._off = True
                return None
            self._fd = fd
            return fd

    def _file(self, name: str) -> str:
        fd = self._dir_fd()
        assert fd is not None
        proc = "/proc/self/fd/%d" % fd
        return os.path.join(proc if os.path.isdir(proc) else self.path, name)

    def load(self, digest: str, choices: Tuple[str, ...], stops: Tuple[int, ...], vocab_size: int,
             vocab: Optional[Vocab] = None) -> Optional[Trie]:
        """The cached trie of digest (the list's: see the module doc), its
        labels ``choices``, else None. With ``vocab``: a string set over
        that vocabulary (shared, not rebuilt from the file); without: a
        token-path trie."""
        if self._dir_fd() is None:
            return None
        try:
            trie = Trie.load(self._file(digest + ".tmtrie"), vocab=vocab)
        except Error:
            return None  # absent, being replaced, or over another vocabulary: compile
        recorded = lib.treemask_trie_metadata_get(trie._ptr, META_DIGEST.encode("ascii"))
        if recorded == ffi.NULL or ffi.string(recorded) != digest.encode("ascii") \
                or tuple(sorted(trie.stop_tokens)) != stops or trie.vocab_size != vocab_size \
                or trie.is_string_set != (vocab is not None):
            return None  # another list's, or not a file of this cache
        trie._labels = choices
        return trie

    def save(self, digest: str, trie: Trie, nbytes: int) -> bool:
        """Writes the trie (atomically) with the digest it is saved under
        and without its label names, then evicts the oldest of the
        cache's other files until they fit. A file larger than the cache's
        bytes (a string set's carries the model's vocabulary: 1.7 MB for
        Qwen2.5's, whatever ``nbytes`` says) is removed again, and evicts
        nothing. Failures are logged, not raised. Returns whether the file
        is in the cache."""
        fd = self._dir_fd()
        if fd is None or nbytes > self.max_bytes:
            return False
        name = digest + ".tmtrie"
        try:
            # The same C trie without its Python label names: only the digest
            # says which list it is.
            bare = Trie._adopt([lib.treemask_trie_retain(trie._ptr)])
            bare.save(self._file(name), metadata={META_DIGEST: digest})
            if os.stat(name, dir_fd=fd, follow_symlinks=False).st_size > self.max_bytes:
                _unlink(name, fd)
                return False
            self._evict(fd, keep=name)
            return True
        except (Error, OSError) as e:
            logger.warning("treemask: could not write the choice-list cache: %s", e)
            return False

    # ---- file snapshots (treemask.vllm.snapshots) ----------------------------

    def temporary(self) -> Optional[Tuple[int, str, str]]:
        """A new private file in the cache directory, open for writing:
        (descriptor, name, path). Its name is one of the cache's own
        temporaries (a random 64-hex name), so one a crash leaves is swept
        after an hour. None when the cache is off or cannot create it."""
        fd = self._dir_fd()
        if fd is None:
            return None
        with self._lock:
            self._serial += 1
            serial = self._serial
        name = "%s.tmtrie.tmp.%d.%d" % (secrets.token_hex(32), os.getpid(), serial)
        try:
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                          0o600, dir_fd=fd)
        except OSError as e:
            logger.warning("treemask: could not create a file in the cache directory: %s", e)
            return None
        return out, name, self._file(name)

    def discard(self, name: str) -> None:
        """Removes a file this process created (a temporary of
        :meth:`temporary`); a missing one is no error."""
        fd = self._dir_fd()
        if fd is not None:
            _unlink(name, fd)

    def publish(self, name: str, digest: str) -> bool:
        """Renames the temporary ``name`` (a whole, checked ``.tmtrie``) to
        the digest's name, replacing a file of that name (one of the same
        digest holds the same bytes), then evicts as :meth:`save` does. A
        file larger than the cache's bytes is not kept (the temporary is
        left to the caller). Returns whether it is in the cache."""
        fd = self._dir_fd()
        if fd is None:
            return False
        final = digest + ".tmtrie"
        try:
            if os.stat(name, dir_fd=fd, follow_symlinks=False).st_size > self.max_bytes:
                return False
            os.rename(name, final, src_dir_fd=fd, dst_dir_fd=fd)
            self._evict(fd, keep=final)
            return True
        except OSError as e:
            logger.warning("treemask: could not write the cache: %s", e)
            return False

    def load_snapshot(self, digest: str) -> Optional[Trie]:
        """The trie of the digest's file (every ``.tmtrie`` check, checksum
        included), its modification time renewed so that eviction takes it
        last; None when it is absent, or not a whole trie file."""
        fd = self._dir_fd()
        if fd is None or not _DIGEST.fullmatch(digest):
            return None
        name = digest + ".tmtrie"
        try:
            trie = Trie.load(self._file(name))
        except Error:
            return None
        try:
            os.utime(name, dir_fd=fd, follow_symlinks=False)
        except (OSError, NotImplementedError):
            pass
        return trie

    def _evict(self, fd: int, keep: str = "") -> None:
        with self._lock:
            now = time.time()
            own: List[Tuple[float, str, int]] = []
            total_kept = 0  # the file just written, never evicted by its own save
            for entry in os.scandir(fd):
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                if entry.name == keep:
                    total_kept = st.st_size
                    continue
                if _OWN_NAME.fullmatch(entry.name):
                    own.append((st.st_mtime, entry.name, st.st_size))
                elif _OWN_TEMPORARY.fullmatch(entry.name) and now - st.st_mtime > _STALE_TEMPORARY_S:
                    _unlink(entry.name, fd)
            own.sort()
            total = total_kept + sum(size for _, _, size in own)
            for _, name, size in own:
                if total <= self.max_bytes:
                    break
                _unlink(name, fd)
                total -= size

    def bytes_on_disk(self) -> int:
        """The bytes of the cache's own files (for tests and the load test)."""
        fd = self._dir_fd()
        if fd is None:
            return 0
        total = 0
        for entry in os.scandir(fd):
            if _OWN_NAME.fullmatch(entry.name):
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
        return total


def _unlink(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass
