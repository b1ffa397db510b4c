"""What the package says about a machine it cannot fully use: no GPU or
driver (cuda_available() False with a reason), a compiled library that does
not load (a clear ImportError, never a crash). Runs against the in-tree build
and, through tests/install/installed_package.py, the installed wheel and sdist.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import pathlib
import shutil
import subprocess
import sys

import treemask

PACKAGE_DIR = pathlib.Path(treemask.__file__).resolve().parent


def test_cuda_unavailable_reason_matches_cuda_available():
    reason = treemask.cuda_unavailable_reason()
    if treemask.cuda_available():
        assert reason is None
    else:
        assert isinstance(reason, str) and reason, "cuda_available() is False without a reason"
        # built without CUDA, no driver, an old driver, no device or no kernel image: each names CUDA
        assert "CUDA" in reason or "cuda" in reason or "NVIDIA" in reason, reason
        assert "\n" not in reason


def test_cuda_unavailable_reason_leaves_the_package_usable():
    treemask.cuda_unavailable_reason()
    trie = treemask.Trie.from_paths([[1, 2], [1, 3]], 8, [7])
    m = treemask.Matcher(trie)
    assert m.accept_token(1) and sorted(m.next_tokens()) == [2, 3]


def test_a_library_that_does_not_load_is_a_clear_import_error(tmp_path):
    # A copy of the package whose libtreemask.so and compiled module are not
    # shared objects (what a foreign architecture or a damaged install gives
    # the loader): its message plus what the wheel needs, as an ImportError.
    copy = tmp_path / "treemask"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("libtreemask.so", "_treemask_cffi.abi3.so"):
        (copy / name).write_bytes(b"not an ELF file\n" * 64)
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env.update(PYTHONPATH=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", "import treemask"], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "ImportError: treemask: cannot load its compiled library" in r.stderr, r.stderr
    assert "glibc >= 2.28" in r.stderr and "CPython >= 3.9" in r.stderr, r.stderr
    assert "Segmentation fault" not in r.stderr


def test_command_line_help_without_the_source_tree(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR.parent))
    r = subprocess.run([sys.executable, "-m", "treemask", "--help"], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "compile-labels" in r.stdout


def test_a_refused_driver_is_diagnosed_from_the_versions_read():
    # Where the CUDA runtime refuses the driver (CI: none installed), the
    # reason says which of the three cases the versions it read give, never
    # "too old" for a driver that is new enough (tests/cuda/test_cuda_driver.cc
    # drives all three through the emulated runtime).
    import pytest

    reason = treemask.cuda_unavailable_reason()
    if reason is None or "cudaErrorInsufficientDriver" not in reason:
        pytest.skip("the CUDA runtime did not refuse a driver here (%s)" % reason)
    assert "no usable CUDA device: " in reason, reason
    diagnoses = ("no NVIDIA driver is loaded", "older than the CUDA", "new enough for the CUDA")
    assert sum(d in reason for d in diagnoses) == 1, reason
