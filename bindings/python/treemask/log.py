"""The library's log events (builds, loads, saves, loader warnings, internal
errors) delivered to Python.

By default the library is silent. :func:`set_log_callback` installs a
function ``fn(level, message)``; :func:`log_to_logging` routes events to a
:mod:`logging` logger (``"treemask"`` by default) at the matching level.
Events are serialised process-wide by the library, and arrive on the thread
whose treemask call logged. An exception raised by the callback goes to
:func:`sys.unraisablehook` (by default printed to stderr with its traceback)
and never reaches the library.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import atexit
import logging
from typing import Callable, Optional

from ._ffi import ffi, lib

__all__ = ["LOG_INFO", "LOG_WARNING", "LOG_ERROR", "set_log_callback", "log_to_logging"]

LOG_INFO = lib.TREEMASK_LOG_INFO
LOG_WARNING = lib.TREEMASK_LOG_WARNING
LOG_ERROR = lib.TREEMASK_LOG_ERROR

_LOGGING_LEVELS = {LOG_INFO: logging.INFO, LOG_WARNING: logging.WARNING, LOG_ERROR: logging.ERROR}

# The function log events go to. The library's sink is the cffi callback
# below, installed once and looking this up at each event, so replacing it
# needs no lock: a Python lock held around treemask_set_log_callback could
# deadlock against a callback that itself installs another (the library runs
# callbacks under its own lock). Like the Rust binding's.
_callback: Optional[Callable[[int, str], None]] = None
_installed = False


@ffi.def_extern()
def _treemask_python_log(level, message, _user_data):
    # cffi hands an exception raised here to sys.unraisablehook and returns
    # to the library: nothing unwinds into C.
    fn = _callback
    if fn is not None:
        fn(int(level), ffi.string(message).decode("utf-8", "replace"))


def _uninstall() -> None:
    """At exit: no log event may call into a finalising interpreter."""
    if _installed:
        lib.treemask_set_log_callback(ffi.NULL, ffi.NULL)


def set_log_callback(fn: Optional[Callable[[int, str], None]]) -> None:
    """Installs ``fn(level, message)`` as the process-wide log callback
    (level is LOG_INFO, LOG_WARNING or LOG_ERROR; message one line of text);
    None drops events again. It replaces any callback set from C or Rust in
    the same process, since the library has one. ``fn`` may call treemask,
    this function included."""
    global _callback, _installed
    if fn is not None and not callable(fn):
        raise TypeError("log callback must be callable or None, got %r" % (fn,))
    _callback = fn
    if fn is not None:
        # Installing the sink again is harmless; it is never removed while
        # Python runs, so racing calls cannot leave fn set and the sink gone.
        lib.treemask_set_log_callback(lib._treemask_python_log, ffi.NULL)
        if not _installed:
            _installed = True
            atexit.register(_uninstall)


def log_to_logging(logger: Optional[logging.Logger] = None) -> logging.Logger:
    """Routes the library's log events to ``logger`` (default
    ``logging.getLogger("treemask")``) and returns it."""
    target = logger if logger is not None else logging.getLogger("treemask")

    def forward(level: int, message: str) -> None:
        target.log(_LOGGING_LEVELS.get(level, logging.ERROR), "%s", message)

    set_log_callback(forward)
    return target
