"""The ``treemask`` command (the console script a wheel installs, and
``python -m treemask``): ``compile``, ``inspect``, ``paths``, ``check`` and
``version`` run the native program the package carries (``treemask/_cli``,
the same program ``meson install`` puts on PATH; ``treemask COMMAND --help``
says what each does); ``compile-labels`` and ``compile-strings`` are the
commands that need Python (a tokenizer; ``pip install 'treemask[tokenizers]'``):

    python -m treemask compile-labels LABELS.txt --tokenizer tokenizer.json \\
        --vocab-size V --stop-tokens ID[,ID...] -o out.tmtrie [--prefix " "] [--strict]

compile-labels reads one label per line (UTF-8; a byte-order mark at the start
of the file, which Windows editors write, is not part of the first label; a
trailing newline or CR is not part of a label; blank lines are skipped),
tokenizes ``prefix + label``
with the tokenizer, builds the trie with label id = line's label index and
saves it as a .tmtrie with the label strings (``Trie.load`` restores them).
Labels that do not round-trip through the tokenizer, contain a stop token or
tokenize to nothing are skipped and listed with the reason (``--strict``: the
first one is an error). The tokenizer is a ``tokenizer.json`` file (the
``tokenizers`` package) or a transformers tokenizer directory. The output
must not be one of the inputs (the labels file, the tokenizer file or a file
of the tokenizer directory): that is a usage error, never an overwrite.

    python -m treemask compile-strings STRINGS.txt --tokenizer tokenizer.json \\
        --vocab-size V --stop-tokens ID[,ID...] -o out.tmtrie [--prefix P]

compile-strings reads the strings the same way (one per line, UTF-8, byte-order
mark and line ends not part of them, blank lines skipped) and builds a string
set at the byte level (``Trie.from_strings``): any tokenization of
``prefix + string`` is allowed, as engines match ``choice``; the prefix
defaults to none. No string is tokenized, so none is skipped; the tokenizer
gives the vocabulary (each token's bytes), which the .tmtrie holds, with the
strings as label names (string i carries label i). The same rule keeps the
output from being an input.

Exit status: 0 ok, 1 bad input, 2 usage.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
import time
from typing import Any, List, NoReturn, Optional, Tuple

from . import Error, Trie, Vocab


def escape_for_terminal(text: str) -> str:
    """text on one printable line: control characters as \\n, \\t, \\xNN (as
    the C library's messages)."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or 0x7F <= code < 0xA0:
            out.append("\\x%02x" % code)
        else:
            out.append(ch)
    return "".join(out)


class _Usage(Exception):
    pass


class _Unreadable(Exception):
    """An input file that cannot be used (exit 1); the message says why."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _read_regular(path: str) -> bytes:
    """The bytes of a regular file, at most the size it had when opened (a
    file that grows meanwhile is read to that size). A FIFO, socket, device
    or directory is refused before any read: opened without blocking (a FIFO
    without a writer would block open() forever) and checked with fstat, as
    the C++ command does. Raises _Unreadable naming the file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise _Unreadable("%s: %s" % (path, e.strerror or e)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Unreadable("%s is %s, not a regular file" % (path, _kind_of(st.st_mode)))
        os.set_blocking(fd, True)
        chunks = []
        left = st.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise _Unreadable("%s: %s" % (path, e.strerror or e)) from None
    finally:
        os.close(fd)


def _refuse_json(path: str, text: str, lines: List[str], what: str) -> None:
    """_Unreadable when a file of one string per line holds JSON (a JSON
    document, or JSON Lines of arrays or objects): each of its lines would
    become a string such as '{"0": ["<a_1>", ...'."""
    if not lines or lines[0].lstrip("\ufeff \t")[:1] not in ("{", "["):
        return
    try:
        json.loads(text)
        kind = "a JSON document"
    except ValueError:
        try:
            if not all(isinstance(json.loads(line), (list, dict)) for line in lines[:3]):
                return
        except ValueError:
            return
        kind = "JSON Lines"
    raise _Unreadable("%s is %s, not %s one per line (JSON Lines of token ids compile with the treemask"
                      " command: treemask compile FILE.jsonl --vocab-size V --stop-tokens ID -o out.tmtrie)"
                      % (path, kind, what))


def _nonblank_lines(path: str, what: str) -> List[str]:
    """The lines of a UTF-8 text file that are not blank (a byte-order mark
    is not part of the first line). Raises _Unreadable naming the file."""
    data = _read_regular(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise _Unreadable("%s: not UTF-8 text (byte 0x%02x at offset %d, line %d)"
                          % (path, data[e.start], e.start, line)) from None
    del data
    # Universal newlines, as text-mode files read them: \n, \r\n and \r end a line.
    lines = [line for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n") if line.strip()]
    _refuse_json(path, text, lines, what)
    if not lines:
        raise _Unreadable("%s: no %s (the file is empty or has only blank lines)" % (path, what))
    return lines


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # exit 2 with the usage, as the C++ CLI does
        self.print_usage(sys.stderr)
        print("python -m treemask: %s" % message, file=sys.stderr)
        sys.exit(2)


def _load_tokenizer(spec: str) -> Any:
    if os.path.isdir(spec):
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise _Usage("--tokenizer %s is a directory, which needs the transformers package "
                         "(pip install transformers), or pass its tokenizer.json" % spec) from None
        return AutoTokenizer.from_pretrained(spec, local_files_only=True)
    if not os.path.exists(spec):
        raise _Usage("--tokenizer %s: no such file or directory" % spec)
    kind = os.stat(spec).st_mode
    if not stat.S_ISREG(kind):
        raise _Usage("--tokenizer %s is %s, not a tokenizer.json file" % (spec, _kind_of(kind)))
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise _Usage("--tokenizer %s needs the tokenizers package: pip install 'treemask[tokenizers]'" % spec) from None
    try:
        return Tokenizer.from_file(spec)
    except Exception as e:  # tokenizers raises its own exception types
        raise _Usage("--tokenizer %s: not a tokenizer.json the tokenizers package can read: %s" % (spec, e)) from None


def _text_flag(flag: str, text: str) -> str:
    """A flag's value as text: the shell hands over bytes, and Python keeps
    the ones that are not UTF-8 as lone surrogates, which no tokenizer or
    encoder takes; refused here, naming the byte."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raw = os.fsencode(text)
        at = len(os.fsencode(text[:e.start]))
        raise _Usage("%s %s is not UTF-8 text (byte 0x%02x at offset %d)"
                     % (flag, escape_for_terminal(repr(raw)), raw[at], at)) from None
    return text


def _int_list(flag: str, text: str) -> List[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise _Usage("%s expects comma-separated integers, got %r" % (flag, text)) from None


class _Progress:
    """A bar on stderr for large lists when stderr is a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.start = time.monotonic()
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or not total:
            return
        filled = 30 * done // total
        rate = done / max(time.monotonic() - self.start, 1e-9)
        sys.stderr.write("\rtokenizing [%s%s] %3d%%  %.0f labels/s" % ("#" * filled, "-" * (30 - filled),
                                                                    100 * done // total, rate))
        sys.stderr.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            sys.stderr.write("\r%70s\r" % "")


def _refuse_output_that_is_an_input(output: str, labels: str, tokenizer: str,
                                    labels_name: str = "the labels file") -> None:
    """_Usage if output is (the same file as) the labels file, the tokenizer
    file or a file of the tokenizer directory: save() would replace it."""
    try:
        out = os.stat(output)
    except OSError:
        return  # a new file: no input can be it
    inputs = [(labels_name, labels), ("the --tokenizer file", tokenizer)]
    if os.path.isdir(tokenizer):
        inputs += [("a file of the --tokenizer directory", e.path) for e in os.scandir(tokenizer)]
    for what, path in inputs:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
            raise _Usage("-o %s is %s; refusing to overwrite an input" % (output, what))


class _Exit(Exception):
    """Ends a command with this exit status, its reason already printed."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _compile_inputs(parser: argparse.ArgumentParser, args: argparse.Namespace, path: str, what: str,
                    input_name: str) -> Tuple[List[int], List[str], Any]:
    """The stop tokens, the input file's non-blank lines and the tokenizer
    of a compile command; raises _Exit(2) for a usage error (with the
    usage) and _Exit(1) for an input that cannot be read, having said why."""
    try:
        stops = _int_list("--stop-tokens", args.stop_tokens)
        args.prefix = _text_flag("--prefix", args.prefix)
        _refuse_output_that_is_an_input(args.output, path, args.tokenizer, input_name)
        lines = _nonblank_lines(path, what)
        return stops, lines, _load_tokenizer(args.tokenizer)
    except _Unreadable as e:
        print("python -m treemask: %s" % escape_for_terminal(str(e)), file=sys.stderr)
        raise _Exit(1) from None
    except _Usage as e:
        parser.print_usage(sys.stderr)
        print("python -m treemask: %s" % escape_for_terminal(str(e)), file=sys.stderr)
        raise _Exit(2) from None


def compile_labels(argv: List[str]) -> int:
    parser = _Parser(prog="python -m treemask compile-labels",
                     description="Label strings (one per line) -> a .tmtrie with the label names.")
    parser.add_argument("labels", help="UTF-8 text file, one label per line")
    parser.add_argument("--tokenizer", required=True, help="tokenizer.json, or a transformers tokenizer directory")
    parser.add_argument("--vocab-size", required=True, type=int, help="the model's vocabulary size")
    parser.add_argument("--stop-tokens", required=True, help="EOS id(s), comma-separated")
    parser.add_argument("-o", "--output", required=True, help="the .tmtrie to write")
    parser.add_argument("--prefix", default=" ", help='prepended to each label before tokenizing (default " ")')
    parser.add_argument("--strict", action="store_true", help="a label that does not round-trip is an error")
    args = parser.parse_args(argv)
    try:
        stops, labels, tokenizer = _compile_inputs(parser, args, args.labels, "labels", "the labels file")
    except _Exit as e:
        return e.code
    progress = _Progress(len(labels) >= 10000 and sys.stderr.isatty())
    started = time.monotonic()
    try:
        trie = Trie.from_labels(labels, tokenizer, args.vocab_size, stops, prefix=args.prefix, strict=args.strict,
                                progress=progress)
        progress.clear()
        trie.save(args.output)
    except Error as e:
        progress.clear()
        print("python -m treemask: %s" % escape_for_terminal(str(e)), file=sys.stderr)
        return 1
    for skipped in trie.skipped_labels:
        print("skipped: %s: %s" % (escape_for_terminal(repr(str(skipped))),
                                   escape_for_terminal(getattr(skipped, "reason", ""))), file=sys.stderr)
    stats = trie.stats()
    print("compiled %d of %d labels from %s in %.2f s -> %s (%d nodes, %d skipped)"
          % (len(labels) - len(trie.skipped_labels), len(labels), escape_for_terminal(args.labels),
             time.monotonic() - started, escape_for_terminal(args.output), stats.n_nodes,
             len(trie.skipped_labels)))
    return 0


def compile_strings(argv: List[str]) -> int:
    parser = _Parser(prog="python -m treemask compile-strings",
                     description="Strings (one per line) -> a .tmtrie that allows any tokenization of each.")
    parser.add_argument("strings", help="UTF-8 text file, one string per line")
    parser.add_argument("--tokenizer", required=True, help="tokenizer.json, or a transformers tokenizer directory")
    parser.add_argument("--vocab-size", required=True, type=int, help="the model's vocabulary size (logits width)")
    parser.add_argument("--stop-tokens", required=True, help="EOS id(s), comma-separated")
    parser.add_argument("-o", "--output", required=True, help="the .tmtrie to write")
    parser.add_argument("--prefix", default="", help='put before each string (default none; " " for a string'
                        " that follows a word)")
    args = parser.parse_args(argv)
    try:
        stops, strings, tokenizer = _compile_inputs(parser, args, args.strings, "strings", "the strings file")
    except _Exit as e:
        return e.code
    started = time.monotonic()
    try:
        vocab = Vocab.from_tokenizer(tokenizer, args.vocab_size)
        trie = Trie.from_strings(strings, vocab, stops, prefix=args.prefix)
        trie.save(args.output)
    except Error as e:
        print("python -m treemask: %s" % escape_for_terminal(str(e)), file=sys.stderr)
        return 1
    stats = trie.stats()
    print("compiled %d strings from %s in %.2f s -> %s (any tokenization; %d byte-trie nodes, vocabulary %016x)"
          % (len(strings), escape_for_terminal(args.strings), time.monotonic() - started,
             escape_for_terminal(args.output), stats.n_nodes, vocab.fingerprint))
    return 0


_COMMANDS = {"compile-labels": compile_labels, "compile-strings": compile_strings}


#: The native program's commands (src/cli), run as they are.
_NATIVE = ("compile", "inspect", "paths", "check", "version")
_PYTHON_HELP = (
    "  compile-labels   LABELS.txt --tokenizer T ...  labels (one a line) -> .tmtrie, canonical tokens\n"
    "  compile-strings  STRINGS.txt --tokenizer T ... strings (one a line) -> .tmtrie, any tokenization\n"
    "                   (both need a tokenizer: pip install 'treemask[tokenizers]')\n")


def native_program() -> Optional[str]:
    """The path of the native ``treemask`` program inside the package, or
    None when this installation has none."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_cli", "treemask")
    return path if os.access(path, os.X_OK) else None


def _run_native(argv: List[str], replace: bool) -> int:
    program = native_program()
    if program is None:
        print("treemask: this installation has no native treemask program (%s is missing): %s needs it"
              % (os.path.join(os.path.dirname(os.path.abspath(__file__)), "_cli", "treemask"), argv[0]),
              file=sys.stderr)
        return 2
    if replace:  # the command line's own process: the program takes it over (signals, exit status)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(program, ["treemask", *argv])
    return subprocess.run([program, *argv]).returncode


def _help(out: Any) -> None:
    """The native program's help with the Python commands added to its list."""
    program = native_program()
    text = subprocess.run([program, "--help"], capture_output=True, text=True).stdout if program else ""
    marker = "\n\nInputs:"
    if marker in text:
        text = text.replace(marker, "\n" + _PYTHON_HELP.rstrip("\n") + marker, 1)
    else:
        text = "usage: treemask <command> [options]\n\ncommands:\n" + _PYTHON_HELP
    out.write(text if text.endswith("\n") else text + "\n")


def main(argv: Optional[List[str]] = None) -> int:
    console = argv is None
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in _NATIVE:
        return _run_native(argv, replace=console)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in _COMMANDS:
        out = sys.stdout if argv and argv[0] in ("-h", "--help") else sys.stderr
        if argv and argv[0] not in ("-h", "--help"):
            print("treemask: unknown command %s" % escape_for_terminal(repr(argv[0])), file=sys.stderr)
        _help(out)
        return 0 if out is sys.stdout else 2
    return _COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
