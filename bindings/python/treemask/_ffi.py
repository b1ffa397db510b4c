"""The compiled cffi module (API mode, generated from the public headers).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from ._treemask_cffi import ffi, lib

__all__ = ["ffi", "lib"]
