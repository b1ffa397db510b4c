"""Exceptions: one class per ``TREEMASK_ERR_*`` status of the C library.

Every error raised by this package is a :class:`Error`, but for Python's
own convention for an argument of the wrong kind where no treemask check
applies: a tokenizer that is none (:meth:`treemask.Trie.from_labels`), a
log callback that is not callable, a non-int ``rollback`` count, RTP token
id or separator, calling ``Trie()`` itself, and what cffi or numpy refuse
first raise :class:`TypeError`. Errors reported by the library carry its
message (``treemask_last_error()``), which names the argument, key, token,
path or byte offset at fault; errors found in Python before calling the
library (a wrong dtype, a tensor on the wrong device) use the class of the
status the library would have returned. Each class also derives from the
closest built-in exception, so ``except ValueError`` keeps working (the
vLLM plugin's :class:`treemask.vllm.RequestError`, an
:class:`InvalidArgumentError`, is the ``ValueError`` vLLM answers with
HTTP 400).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

from typing import NoReturn, Optional

from ._ffi import ffi, lib

__all__ = [
    "Error",
    "InvalidArgumentError",
    "OutOfRangeError",
    "BufferTooSmallError",
    "InvalidStateError",
    "OutOfMemoryError",
    "ParseError",
    "FileError",
    "CorruptFileError",
    "VersionMismatchError",
    "UnsupportedError",
    "InternalError",
    "last_error",
]


class Error(Exception):
    """Base class of every treemask error.

    Attributes:
        status: the ``TREEMASK_*`` status code (an ``int``).
        message: the message, naming the problem.
    """

    status: int = -1

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status

    @property
    def status_name(self) -> str:
        """The library's short description of :attr:`status` ("out of range")."""
        return ffi.string(lib.treemask_status_string(self.status)).decode("ascii")


class InvalidArgumentError(Error, ValueError):
    """A bad argument: a malformed path list, a wrong dtype, an unknown option."""

    status = lib.TREEMASK_ERR_INVALID_ARGUMENT


class OutOfRangeError(Error, ValueError):
    """A token id or index outside its range (also: rolling back too far)."""

    status = lib.TREEMASK_ERR_OUT_OF_RANGE


class BufferTooSmallError(Error, ValueError):
    """A bitmask or other buffer shorter than needed."""

    status = lib.TREEMASK_ERR_BUFFER_TOO_SMALL


class InvalidStateError(Error, RuntimeError):
    """The call is not allowed in this state (e.g. a sticky-error failed matcher)."""

    status = lib.TREEMASK_ERR_INVALID_STATE


class OutOfMemoryError(Error, MemoryError):
    """An allocation failed."""

    status = lib.TREEMASK_ERR_OUT_OF_MEMORY


class ParseError(Error, ValueError):
    """Malformed input text (JSON, TSV, JSON Lines); the message has the position."""

    status = lib.TREEMASK_ERR_PARSE


class FileError(Error, OSError):
    """A file could not be read or written."""

    status = lib.TREEMASK_ERR_IO


class CorruptFileError(Error):
    """A ``.tmtrie`` file (or a trie loaded from one) fails its checks."""

    status = lib.TREEMASK_ERR_CORRUPT_FILE


class VersionMismatchError(Error):
    """A ``.tmtrie`` file of another format version."""

    status = lib.TREEMASK_ERR_VERSION_MISMATCH


class UnsupportedError(Error, RuntimeError):
    """Not built into this library, or not usable here (JSON loader, CUDA)."""

    status = lib.TREEMASK_ERR_UNSUPPORTED


class InternalError(Error, RuntimeError):
    """A bug in treemask; please report it."""

    status = lib.TREEMASK_ERR_INTERNAL


_BY_STATUS = {cls.status: cls for cls in (
    InvalidArgumentError, OutOfRangeError, BufferTooSmallError, InvalidStateError,
    OutOfMemoryError, ParseError, FileError, CorruptFileError, VersionMismatchError,
    UnsupportedError, InternalError)}


def last_error() -> str:
    """The library's message for the last failing call on this thread, or for
    the last rejected token (why :meth:`Matcher.accept_token` returned False).
    """
    return ffi.string(lib.treemask_last_error()).decode("utf-8", "replace")


def raise_status(status: int, context: str = "", message: Optional[str] = None) -> NoReturn:
    """Raises the exception for a non-OK status with the library's message
    (``message``, when the failing call ran on another thread, else this
    thread's :func:`last_error`)."""
    if message is None:
        message = last_error()
    if context:
        message = "%s: %s" % (context, message) if message else context
    raise _BY_STATUS.get(status, Error)(message, status)
