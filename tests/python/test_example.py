"""examples/python/taxonomy_classification.py runs and prints only taxonomy
labels: with the Qwen2.5 tokenizer from ../shared when it is there, and
always with a small tokenizer trained on the bundled IAB taxonomy.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import subprocess
import sys

import pytest

from conftest import SHARED_DATA, SOURCE_ROOT
from taxonomy_data import iab_labels, toy_tokenizer

pytest.importorskip("torch", reason="torch is not installed (./dev installs it)")
pytest.importorskip("transformers", reason="transformers is not installed (./dev installs it)")

EXAMPLE = SOURCE_ROOT / "examples" / "python" / "taxonomy_classification.py"
IAB = SOURCE_ROOT / "tests" / "data" / "iab" / "content-taxonomy-3.1.tsv"
TEXTS = ["Trail running shoes with a rock plate", "A weekend in Naples: pizza and museums"]


def run_example(*args):
    out = subprocess.run([sys.executable, str(EXAMPLE), "--taxonomy", str(IAB), *args, *TEXTS],
                         capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def check_listing(stdout, top=4):
    labels = set(iab_labels(SOURCE_ROOT))
    lines = [line.strip() for line in stdout.splitlines() if line.startswith("  ")]
    assert len(lines) == top * len(TEXTS), stdout
    for line in lines:
        score, label = line.split(None, 1)
        assert label in labels and float(score) <= 0, line


def test_with_a_toy_tokenizer(tmp_path):
    tokenizer = toy_tokenizer(iab_labels(SOURCE_ROOT) + TEXTS)
    path = tmp_path / "tokenizer.json"
    tokenizer.backend_tokenizer.save(str(path))
    check_listing(run_example("--tokenizer-file", str(path), "--random-model", "--eos-token", "<|end|>"))


def test_with_the_qwen_tokenizer():
    tokenizer = SHARED_DATA / "tokenizers" / "qwen2.5-instruct" / "tokenizer.json"
    if not tokenizer.is_file():
        pytest.skip("%s is absent (a clone without ../shared)" % tokenizer)
    check_listing(run_example("--tokenizer-file", str(tokenizer), "--random-model"))

