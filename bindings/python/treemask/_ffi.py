"""The compiled cffi module (API mode, generated from the public headers).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import platform
import sys

try:
    from ._treemask_cffi import ffi, lib
except ImportError as _e:  # pragma: no cover - exercised only on a broken or foreign machine
    # The loader's own message (a missing GLIBC_2.xx version, a wrong
    # architecture, a missing file) with what the package needs, never a crash.
    raise ImportError(
        "treemask: cannot load its compiled library (%s). The wheel needs Linux x86_64 with glibc >= 2.28 "
        "and CPython >= 3.9; this is %s %s, %s %s. Elsewhere install from the source distribution "
        "(pip install --no-binary treemask treemask: a C++20 compiler and ninja)."
        % (_e, platform.system(), platform.machine(), platform.python_implementation(),
           ".".join(map(str, sys.version_info[:3])))) from _e

__all__ = ["ffi", "lib"]
