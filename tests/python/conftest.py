"""Shared fixtures of the Python tests.

The tests import whichever `treemask` is first on sys.path: the in-tree
build (meson sets PYTHONPATH=build/bindings/python) or an installed wheel.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import pathlib

import pytest

SOURCE_ROOT = pathlib.Path(os.environ.get("TREEMASK_SOURCE_ROOT") or pathlib.Path(__file__).resolve().parents[2])
SHARED_DATA = SOURCE_ROOT.parent / "shared" / "data"


def scaled(n: int) -> int:
    """n scaled by TREEMASK_TEST_SCALE (at least 1)."""
    try:
        scale = float(os.environ.get("TREEMASK_TEST_SCALE") or 1)
    except ValueError:
        scale = 1.0
    return max(1, int(n * (scale if scale > 0 else 1)))


@pytest.fixture
def shared_data():
    """../shared/data beside the source tree, or a skip saying it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip("%s is absent (a clone without ../shared); the bundled fixture covers this case"
                    % SHARED_DATA)
    return SHARED_DATA


@pytest.fixture
def qwen_tokenizer():
    """Qwen2.5's tokenizer.json from ../shared as a tokenizers.Tokenizer, or
    a skip saying what is missing."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed (./dev installs it)")
    path = SHARED_DATA / "tokenizers" / "qwen2.5-instruct" / "tokenizer.json"
    if not path.is_file():
        pytest.skip("%s is absent (a clone without ../shared)" % path)
    return tokenizers.Tokenizer.from_file(str(path))


@pytest.fixture
def source_root():
    return SOURCE_ROOT
