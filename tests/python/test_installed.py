"""The package as `pip install .` leaves it: run by ./dev from outside the
source tree against the wheel it installed into the venv (not part of the
meson suites, which test the in-tree build).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import pathlib
import re
import subprocess
import sys
import sysconfig

import numpy as np
import pytest

import treemask

SOURCE_ROOT = pathlib.Path(os.environ.get("TREEMASK_SOURCE_ROOT") or pathlib.Path(__file__).resolve().parents[2])
PACKAGE_DIR = pathlib.Path(treemask.__file__).resolve().parent


def test_imported_from_site_packages():
    site = pathlib.Path(sysconfig.get_paths()["platlib"]).resolve()
    assert PACKAGE_DIR.parent == site, "treemask was imported from %s, not the venv" % PACKAGE_DIR


def test_wheel_ships_the_module_and_libtreemask():
    names = {p.name for p in PACKAGE_DIR.iterdir()}
    assert {"_treemask_cffi.abi3.so", "libtreemask.so", "py.typed", "hf.py", "torch.py",
            "failure_policy.py", "beam_driver.py", "vllm"} <= names
    assert pathlib.Path(treemask.library_path()).is_file()
    # the vLLM plugin is a package of its own; its request keys import without vLLM
    vllm_modules = {p.name for p in (PACKAGE_DIR / "vllm").iterdir()}
    assert {"__init__.py", "keys.py", "processor.py", "trie_registry.py", "frontend.py", "registered.py", "beam.py",
            "client.py"} <= vllm_modules
    from treemask.vllm import parse_extra_args

    assert parse_extra_args({"treemask_choices": ["a"]}).source.choices == ("a",)


def test_loads_its_own_libtreemask():
    maps = pathlib.Path("/proc/self/maps").read_text()
    loaded = {line.split()[-1] for line in maps.splitlines() if "libtreemask" in line}
    assert loaded == {str(PACKAGE_DIR / "libtreemask.so")}


def test_version_matches_the_project():
    meson_build = (SOURCE_ROOT / "meson.build").read_text()
    assert treemask.__version__ == re.search(r"version: '([^']+)'", meson_build).group(1)


def test_import_needs_no_torch():
    code = "import sys, treemask; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_decode_step_works():
    trie = treemask.Trie.from_paths([[5, 6], [5, 7]], 100, [0])
    m = treemask.Matcher(trie)
    logits = np.zeros((1, 100), np.float32)
    bitmask = treemask.allocate_token_bitmask(1, 100)
    m.fill_next_token_bitmask(bitmask)
    treemask.apply_token_bitmask_inplace(logits, bitmask)
    assert np.flatnonzero(np.isfinite(logits[0])).tolist() == [5]
    with pytest.raises(treemask.Error):
        treemask.Trie.from_paths([[500]], 100, [0])
