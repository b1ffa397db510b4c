"""Issue 44 (first contact), the Python command line's part: errors that
point the way. compile-labels names the label whose token is past
--vocab-size (it said "path 0, position 0"), and a JSON file given as a
list of strings is refused saying what it is (its lines became labels).

Suite `python`.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import subprocess
import sys

import pytest

import treemask
from conftest import SOURCE_ROOT


def _treemask(*args, cwd=None):
    # The package this test imports, wherever it is (a build tree, a venv).
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(treemask.__file__))))
    return subprocess.run([sys.executable, "-m", "treemask", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=env)


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
    return _treemask(command, source, "--tokenizer", tok, "--vocab-size", 10, "--stop-tokens", 0, "-o",
                     tmp_path / "o.tmtrie")


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


# ---- item 1: the treemask command of the package ---------------------------------------------


def test_the_package_carries_the_native_program_and_runs_every_command(tmp_path):
    from treemask.__main__ import native_program

    assert native_program() is not None, "the package has no treemask/_cli/treemask"
    helped = _treemask("--help", cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    for command in ("compile", "inspect", "paths", "check", "version", "compile-labels", "compile-strings"):
        assert "\n  %s " % command in helped.stdout, (command, helped.stdout)
    # compile, paths, inspect and check through the package, as the native
    # program answers them (its messages and exit statuses).
    source = tmp_path / "p.jsonl"
    source.write_text("[1, 2]\n[1, 3]\n[4]\n")
    out = tmp_path / "p.tmtrie"
    compiled = _treemask("compile", source, "-o", out, "--vocab-size", 10, "--stop-tokens", 0)
    assert compiled.returncode == 0 and "nodes" in compiled.stdout, compiled.stderr
    assert _treemask("paths", out).stdout == "1 2\n1 3\n4\n"
    assert treemask.Trie.load(str(out)).stats().n_terminals == 3
    inspected = _treemask("inspect", out)
    assert inspected.returncode == 0 and "checksum verified" in inspected.stdout, inspected.stderr
    assert _treemask("check", source, "--vocab-size", 10, "--stop-tokens", 0).returncode == 0
    bad = _treemask("check", source, "--vocab-size", 3, "--stop-tokens", 0)
    assert bad.returncode == 1 and "out of range" in bad.stdout, bad.stdout
    usage = _treemask("compile", source)
    assert usage.returncode == 2 and "usage: treemask compile" in usage.stderr
    assert treemask.__version__ in _treemask("version").stdout
    unknown = _treemask("bogus")
    assert unknown.returncode == 2 and "unknown command 'bogus'" in unknown.stderr
