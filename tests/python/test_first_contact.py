"""Issue 44 (first contact), the Python command line's part: errors that
point the way. compile-labels names the label whose token is past
--vocab-size (it said "path 0, position 0"), and a JSON file given as a
list of strings is refused saying what it is (its lines became labels).

Suite `python`.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import subprocess
import sys

import pytest

import treemask
from conftest import SOURCE_ROOT


def _letters(text):
    return [ord(c) for c in text]


def test_from_labels_names_the_label_whose_token_is_past_vocab_size():
    with pytest.raises(treemask.OutOfRangeError, match=r"labels\[1\] 'zed': the tokenizer gives token 122, outside"
                                                        r" vocab_size 100"):
        treemask.Trie.from_labels(["ab", "zed"], _letters, 100, [0], prefix="")
    assert treemask.Trie.from_labels(["ab", "zed"], _letters, 123, [0], prefix="").label(1) == "zed"


def _cli(command, source, tmp_path):
    tok = tmp_path / "tok.json"
    tok.write_text("{}")
    return subprocess.run([sys.executable, "-m", "treemask", command, str(source), "--tokenizer", str(tok),
                           "--vocab-size", "10", "--stop-tokens", "0", "-o", str(tmp_path / "o.tmtrie")],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("command", ["compile-labels", "compile-strings"])
def test_a_json_file_is_not_a_list_of_strings(tmp_path, command):
    catalogue = SOURCE_ROOT / "examples" / "data" / "minionerec" / "Industrial_and_Scientific.index.json"
    if not catalogue.is_file():
        pytest.skip("%s is absent (an installed package's tests without the source tree)" % catalogue)
    run = _cli(command, catalogue, tmp_path)
    assert run.returncode == 1 and "is a JSON document, not" in run.stderr, run.stderr
    lines = tmp_path / "paths.txt"
    lines.write_text("[1, 2]\n[3]\n")
    run = _cli(command, lines, tmp_path)
    assert run.returncode == 1 and "is JSON Lines, not" in run.stderr and "treemask compile" in run.stderr, run.stderr
    assert not (tmp_path / "o.tmtrie").exists()
