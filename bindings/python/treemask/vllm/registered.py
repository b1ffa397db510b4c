"""Tries registered in process for the exact beam search
(:func:`treemask.vllm.beam_search`), named by requests with
``treemask_trie_id``.

vLLM's engine core and workers are other processes (spawned), and a
callable sent through ``LLM.collective_rpc`` needs
``VLLM_ALLOW_INSECURE_SERIALIZATION``. So a registered trie is a
``.tmtrie`` that the registering process writes into a private directory
of its user, ``<tmp>/treemask-vllm-tries-<uid>``, under a 128-bit random
id; the engine's processes map it on first use (through the registry:
:class:`~treemask.vllm.trie_registry.TrieRegistry`, its LRU and its byte
bound). Deleting the file unregisters it everywhere: every lookup opens it.

The directory follows the choice cache's rules (:mod:`treemask.vllm.choice_cache`):

- it is opened with ``O_NOFOLLOW`` and checked on its descriptor: a
  symlink, another user's directory or one others may read or write is
  refused (nothing can be registered or looked up, and the error says
  why); every later operation goes through that descriptor;
- a request names a trie only by its id (32 lowercase hex digits, checked
  by :func:`treemask.vllm.keys.parse_trie_id`), never by a path, and a
  lookup opens ``<id>.tmtrie`` with ``O_NOFOLLOW | O_NONBLOCK``, reads it
  only if it is a regular file of this user, and answers anything else
  with one message ("no trie is registered under this id");
- a process deletes only files it wrote: :func:`unregister_trie` removes
  the file of an id this process registered, and nothing else. While
  registered, the writer holds a shared ``flock`` on the file; a file of
  the directory's own name pattern that nobody holds locked and that is
  older than a minute was left by a process that died before
  unregistering it, and the next :func:`register_trie` deletes it (with
  the save's temporaries older than an hour). A name of any other
  pattern, or anything but a regular file, is never touched.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import logging
import os
import re
import secrets
import stat
import tempfile
import threading
import time
from typing import Dict, Optional, Tuple

from ..errors import InvalidArgumentError, InvalidStateError
from ..trie import Trie
from .keys import KEY_TRIE_ID, RequestError, parse_trie_id

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: no lock, no sweep
    fcntl = None  # type: ignore[assignment]

__all__ = ["register_trie", "unregister_trie", "open_registered", "local_trie", "registered_ids", "directory",
           "UNKNOWN"]

logger = logging.getLogger("treemask.vllm")

#: The one answer to an id that names no registered trie.
UNKNOWN = ("%s: no trie is registered under this id on this server (treemask.vllm.beam_search registers one"
           " in the engine's own process for one search)" % KEY_TRIE_ID)

_OWN_NAME = re.compile(r"[0-9a-f]{32}\.tmtrie")
_OWN_TEMPORARY = re.compile(r"[0-9a-f]{32}\.tmtrie\.tmp\.\d+\.\d+")
#: A registered file unlocked and older than this was left by a process
#: that died (the writer locks it right after the save's rename).
_STALE_S = 60.0
#: A save's temporary older than this was left by a crash (as the choice
#: cache: a large save may write for a while).
_STALE_TEMPORARY_S = 3600.0
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)

_lock = threading.Lock()
_dir_fd: Optional[int] = None
_dir_key: Optional[Tuple[str, int, int]] = None  # (path, device, inode) of _dir_fd
# What this process registered: id -> (the descriptor holding the shared
# lock, the trie itself, which this process's registry uses as it is).
_mine: Dict[str, Tuple[int, Trie]] = {}


def directory() -> str:
    """The private directory: ``<tmp>/treemask-vllm-tries-<uid>``."""
    return os.path.join(tempfile.gettempdir(), "treemask-vllm-tries-%d" % os.getuid())


def _open_dir(create: bool) -> Optional[int]:
    """The directory's descriptor (created private when ``create``), None
    when it does not exist; InvalidStateError when it is not private."""
    global _dir_fd, _dir_key
    path = directory()
    with _lock:
        if _dir_fd is not None:
            try:
                now = os.lstat(path)
            except FileNotFoundError:
                now = None
            if now is not None and _dir_key == (path, now.st_dev, now.st_ino):
                return _dir_fd
            os.close(_dir_fd)  # the path now names another directory (or none): open it again
            _dir_fd = _dir_key = None
        if create:
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                pass
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None
        except OSError as e:  # a symlink (ELOOP), not a directory
            raise InvalidStateError("%s is not a directory of this user (%s): no trie can be registered or looked"
                                    " up" % (path, e.strerror)) from None
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            os.close(fd)
            raise InvalidStateError("%s is not a private directory of this user (another owner, or open to"
                                    " others): no trie can be registered or looked up" % path)
        _dir_fd, _dir_key = fd, (path, st.st_dev, st.st_ino)
        return fd


def _in_dir(fd: int, name: str) -> str:
    """A path to ``name`` inside the directory the descriptor holds (through
    /proc when there is one, so that the path cannot be swapped)."""
    proc = "/proc/self/fd/%d" % fd
    return os.path.join(proc if os.path.isdir(proc) else directory(), name)


def register_trie(trie: Trie) -> str:
    """Registers ``trie`` for requests of this user's processes: returns the
    id that ``treemask_trie_id`` names it by. Call :func:`unregister_trie`
    when done (:func:`treemask.vllm.beam_search` does both)."""
    if not isinstance(trie, Trie):
        raise InvalidArgumentError("trie must be a treemask.Trie, got %s" % type(trie).__name__)
    fd = _open_dir(create=True)
    assert fd is not None
    _sweep(fd)
    trie_id = secrets.token_hex(16)
    name = trie_id + ".tmtrie"
    trie.save(_in_dir(fd, name))  # atomic: a temporary renamed
    try:
        held = os.open(name, _FLAGS, dir_fd=fd)
        if fcntl is not None:
            fcntl.flock(held, fcntl.LOCK_SH)
    except OSError as e:
        _unlink(name, fd)
        raise InvalidStateError("could not register the trie: %s" % e) from None
    with _lock:
        _mine[trie_id] = (held, trie)
    return trie_id


def unregister_trie(trie_id: str) -> None:
    """Removes a trie this process registered (requests naming it are
    refused from now on; running ones keep it). An id this process did not
    register is left alone."""
    parse_trie_id(trie_id)
    with _lock:
        entry = _mine.pop(trie_id, None)
    if entry is None:
        return
    try:
        fd = _open_dir(create=False)
        if fd is not None:
            _unlink(trie_id + ".tmtrie", fd)
    finally:
        os.close(entry[0])  # releases the lock


def registered_ids() -> Tuple[str, ...]:
    """The ids this process has registered and not unregistered."""
    with _lock:
        return tuple(_mine)


def local_trie(trie_id: str) -> Optional[Trie]:
    """The trie this very process registered under ``trie_id``, if any."""
    with _lock:
        entry = _mine.get(trie_id)
    return entry[1] if entry is not None else None


def open_registered(trie_id: str) -> Tuple[int, os.stat_result]:
    """The open descriptor and status of the trie registered under
    ``trie_id`` (the caller closes it), or RequestError(UNKNOWN) whatever
    is in the way: no directory, no file, a symlink, not a regular file,
    another owner."""
    parse_trie_id(trie_id)
    try:
        dir_fd = _open_dir(create=False)
    except InvalidStateError as e:
        logger.warning("treemask: %s", e)
        raise RequestError(UNKNOWN) from None
    if dir_fd is None:
        raise RequestError(UNKNOWN)
    try:
        fd = os.open(trie_id + ".tmtrie", _FLAGS, dir_fd=dir_fd)
    except OSError:
        raise RequestError(UNKNOWN) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        raise RequestError(UNKNOWN)
    return fd, st


def _sweep(fd: int) -> None:
    """Deletes what processes that died left: registered files that no
    process holds locked, older than a minute, and save temporaries older
    than an hour (the directory's own name patterns only)."""
    if fcntl is None:
        return
    now = time.time()
    for entry in os.scandir(fd):
        own = _OWN_NAME.fullmatch(entry.name)
        if not own and not _OWN_TEMPORARY.fullmatch(entry.name):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or now - st.st_mtime < (_STALE_S if own else _STALE_TEMPORARY_S):
            continue
        if own:
            try:
                probe = os.open(entry.name, _FLAGS, dir_fd=fd)
            except OSError:
                continue
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live process holds it
            finally:
                os.close(probe)
        logger.info("treemask: removing %s, left in %s by a process that ended", entry.name, directory())
        _unlink(entry.name, fd)


def _unlink(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass
