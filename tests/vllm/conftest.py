"""Fixtures of the vLLM tests: the tiny model (built once by make_model.py)
and tries compiled with its tokenizer.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]

COLORS = ["red", "dark olive green", "light sea green", "midnight blue", "blue", "lavender blush",
          "medium spring green", "papaya whip"]
ANIMALS = ["cat", "dog", "giant panda", "snow leopard", "emperor penguin", "blue whale"]
FRUITS = ["apple", "banana", "dragon fruit", "passion fruit"]


def model_dir() -> pathlib.Path:
    """The tiny model: $TREEMASK_VLLM_MODEL (run.sh builds it), else built here."""
    path = pathlib.Path(os.environ.get("TREEMASK_VLLM_MODEL") or ROOT / "build-vllm" / "tiny-qwen2")
    if not (path / "config.json").is_file():
        subprocess.run([sys.executable, str(HERE / "make_model.py"), str(path)], check=True)
    return path


@pytest.fixture(scope="session")
def tiny_model():
    path = model_dir()
    info = json.loads((path / "treemask-tiny.json").read_text())
    from transformers import AutoTokenizer

    return path, AutoTokenizer.from_pretrained(str(path)), info
