#!/usr/bin/env python3
"""The `treemask` command end to end: `paths` prints exactly the sequences
RTP-LLM's rule allows (computed here independently, from the raw fixtures),
compile -> .tmtrie -> paths is lossless, `check` lists every problem, and the
exit codes are 0 ok / 1 bad input / 2 usage.

usage: test_cli.py TREEMASK_BINARY SOURCE_ROOT
Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

TREEMASK = sys.argv[1]
ROOT = sys.argv[2]
DATA = os.path.join(ROOT, "tests", "data", "rtp-llm")


def run(*args, check_rc=None):
    p = subprocess.run([TREEMASK, *args], capture_output=True, text=True)
    if check_rc is not None and p.returncode != check_rc:
        raise AssertionError("treemask %s: rc %d, want %d\nstdout: %s\nstderr: %s"
                             % (" ".join(args), p.returncode, check_rc, p.stdout[-2000:], p.stderr))
    return p


def rtp_sequences(prefix_dict, start, end, sep="_"):
    """Every sequence RTP-LLM's mask lets a generation end with: walk the keys
    as RTP-LLM looks them up; a missing key or empty list allows only end."""
    out = []
    stack = [()]
    while stack:
        generated = stack.pop()
        key = sep.join([str(start)] + [str(t) for t in generated])
        allowed = set(prefix_dict.get(key) or [end])
        if end in allowed:
            out.append(generated)
        stack.extend(generated + (t,) for t in allowed if t != end)
    return sorted(out)


def paths_output(seqs):
    return "".join((" ".join(map(str, s)) if s else "(empty)") + "\n" for s in seqs)


class Paths(unittest.TestCase):
    def test_json_fixture(self):
        d = json.load(open(os.path.join(DATA, "gir_prefix_dict.json")))
        want = paths_output(rtp_sequences(d["prefix_dict"], d["start_token_id"], d["end_token_id"]))
        got = run("paths", os.path.join(DATA, "gir_prefix_dict.json"), "--vocab-size", "100000",
                  check_rc=0).stdout
        self.assertEqual(got, want)

    def test_tsv_fixture_and_its_compiled_file(self):
        prefix_dict = {}
        for line in open(os.path.join(DATA, "gir_prefix_dict.txt"), encoding="utf-8"):
            key, ids = line.rstrip("\n").split("\t")
            prefix_dict[key] = [int(x) for x in ids.split("\x02") if x]
        self.assertEqual(len(prefix_dict["225"]), 7835)
        want = paths_output(rtp_sequences(prefix_dict, 225, 2))
        src = os.path.join(DATA, "gir_prefix_dict.txt")
        got = run("paths", src, "--vocab-size", "100000", "--start-token", "225",
                  "--end-token", "2", check_rc=0).stdout
        self.assertEqual(got, want)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "gir.tmtrie")
            compiled = run("compile", src, "-o", out, "--vocab-size", "100000", "--rtp-defaults",
                           "--meta", "tokenizer=test-fingerprint", check_rc=0).stdout
            self.assertIn("nodes", compiled)
            for flags in ([], ["--trusted"]):
                self.assertEqual(run("paths", out, *flags, check_rc=0).stdout, want)
            info = run("inspect", out, check_rc=0).stdout
            self.assertIn("tokenizer            test-fingerprint", info)
            self.assertIn("bytes/edge", info)
            self.assertIn("checksum verified", info)

    def test_jsonl_paths_are_the_sorted_distinct_input(self):
        rng = random.Random(5)
        seqs = [tuple(rng.randrange(1, 50) for _ in range(rng.randrange(0, 5))) for _ in range(300)]
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "paths.jsonl")
            with open(src, "w") as f:
                for i, s in enumerate(seqs):
                    f.write(json.dumps({"tokens": list(s), "label": i} if i % 2 else list(s)) + "\n")
            got = run("paths", src, "--vocab-size", "50", "--stop-tokens", "0", check_rc=0).stdout
        self.assertEqual(got, paths_output(sorted(set(seqs))))


class Check(unittest.TestCase):
    def test_lists_every_problem(self):
        bad = {"start_token_id": 1, "end_token_id": 2, "extra": 1,
               "prefix_dict": {"1": [3, 4, 500], "1_3": ["x"], "1_x": [2], "7_1": [2],
                               "1_4": [2], "1_9_9": [2]}}
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "bad.json")
            json.dump(bad, open(src, "w"))
            p = run("check", src, "--vocab-size", "100", check_rc=1)
        errors = [l for l in p.stdout.splitlines() if l.startswith("error:")]
        warnings = [l for l in p.stdout.splitlines() if l.startswith("warning:")]
        self.assertEqual(len(errors), 4, p.stdout)  # 500, "x", key 1_x, key 7_1
        self.assertTrue(any("id 500 is out of range" in e for e in errors), p.stdout)
        self.assertTrue(any('key "1_x"' in e for e in errors), p.stdout)
        self.assertTrue(any('key "7_1"' in e for e in errors), p.stdout)
        self.assertTrue(any('"extra"' in w for w in warnings), p.stdout)
        self.assertTrue(any('"1_9_9" is unreachable' in w for w in warnings), p.stdout)

    def test_clean_input_and_the_utils_fixture(self):
        run("check", os.path.join(DATA, "gir_prefix_dict.json"), "--vocab-size", "100000",
            check_rc=0)
        p = run("check", os.path.join(DATA, "utils_test_gir_prefix_dict.json"), "--vocab-size",
                "100", check_rc=1)
        self.assertIn('key "1_2"', p.stdout)
        self.assertIn('key "1_2_3"', p.stdout)

    def test_a_damaged_tmtrie(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "g.tmtrie")
            run("compile", os.path.join(DATA, "gir_prefix_dict.json"), "-o", out, "--vocab-size",
                "100000", check_rc=0)
            run("check", out, check_rc=0)
            data = bytearray(open(out, "rb").read())
            data[-20] ^= 0x40
            open(out, "wb").write(data)
            p = run("check", out, check_rc=1)
            self.assertIn("checksum mismatch", p.stdout)


class ExitCodes(unittest.TestCase):
    def test_usage_errors_exit_2(self):
        src = os.path.join(DATA, "gir_prefix_dict.json")
        for args in (["frobnicate"], [], ["compile", src, "-o", "/tmp/x.tmtrie"],
                     ["paths", src, "--vocab-size"], ["paths", src, "--vocab-size", "ten"],
                     ["compile", src, "--vocab-size", "9"], ["inspect", "file.unknown"],
                     ["paths", os.path.join(DATA, "gir_prefix_dict.txt"), "--vocab-size", "9"],
                     ["check", src, "--vocab-size", "10", "--nope"]):
            self.assertEqual(run(*args).returncode, 2, args)

    def test_bad_input_exits_1(self):
        self.assertEqual(run("paths", "/nonexistent.json", "--vocab-size", "10").returncode, 1)
        self.assertEqual(run("paths", os.path.join(DATA, "gir_prefix_dict.json"),
                             "--vocab-size", "100").returncode, 1)  # ids >= vocab

    def test_flags_that_contradict_the_file_exit_1(self):
        p = run("paths", os.path.join(DATA, "gir_prefix_dict.json"), "--vocab-size", "100000",
                "--start-token", "1")
        self.assertEqual(p.returncode, 1)
        self.assertIn('"start_token_id" is 225 in the input but 1 was given', p.stderr)

    def test_help_for_every_command(self):
        for cmd in ("compile", "inspect", "paths", "check"):
            p = run(cmd, "--help", check_rc=0)
            self.assertIn("usage: treemask " + cmd, p.stdout)
        self.assertIn("commands:", run("--help", check_rc=0).stdout)


class Hardening(unittest.TestCase):
    """Issue 14: regressions of the outside review."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.src = os.path.join(DATA, "gir_prefix_dict.json")

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name, text=None, mode="w"):
        p = os.path.join(self.dir, name)
        if text is not None:
            with open(p, mode) as f:
                f.write(text)
        return p

    def test_fifo_input_is_an_error_not_a_hang(self):  # item 2
        fifo = self.path("in.json")
        os.mkfifo(fifo)
        for cmd in (["paths", fifo, "--vocab-size", "10"], ["inspect", fifo],
                    ["compile", fifo, "-o", self.path("o.tmtrie"), "--vocab-size", "10"]):
            p = subprocess.run([TREEMASK, *cmd], capture_output=True, text=True, timeout=20)
            self.assertEqual(p.returncode, 1, (cmd, p.stderr))
            self.assertIn("is a FIFO, not a regular file", p.stderr)

    def test_compile_refuses_bad_outputs_before_any_work(self):  # item 3
        src = self.path("dict.json", open(self.src).read())
        before = open(src, "rb").read()
        for out, why in ((src, "is the input file"), ("", "the output path is empty"),
                         (".", "is a directory"), (self.dir + "/", "is a directory"),
                         ("/dev/null", "is not a regular file")):
            p = run("compile", src, "-o", out, "--vocab-size", "100000", check_rc=1)
            self.assertIn(why, p.stderr, out)
        self.assertEqual(open(src, "rb").read(), before)
        link = self.path("link.json")
        os.symlink(src, link)
        p = run("compile", link, "-o", src, "--vocab-size", "100000", check_rc=1)
        self.assertIn("is the input file", p.stderr)
        self.assertEqual(open(src, "rb").read(), before)

    def test_messages_are_one_printable_line(self):  # item 7
        bad_key = "225\nerror: fake\u001b[31m\u0000x"
        src = self.path("bad.json", json.dumps({"start_token_id": 225, "end_token_id": 2,
                                                "prefix_dict": {bad_key: [5]}}))
        p = run("compile", src, "-o", self.path("o.tmtrie"), "--vocab-size", "100", check_rc=1)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertNotIn("\x1b", p.stderr)
        self.assertIn("\\x1b[31m\\x00x", p.stderr)
        self.assertIn("225\\nerror: fake", p.stderr)
        jsonl = self.path("w.jsonl", '{"tokens": [1], "\\u001b]0;pwned\\u0007": 1}\n')
        p = run("check", jsonl, "--vocab-size", "10", "--stop-tokens", "0", check_rc=0)
        self.assertNotIn("\x1b", p.stdout)
        self.assertNotIn("\x07", p.stdout)
        self.assertIn("\\x1b]0;pwned\\x07", p.stdout)
        out = self.path("m.tmtrie")
        run("compile", self.src, "-o", out, "--vocab-size", "100000",
            "--meta", "note=a\nb\x1b[2Jc", check_rc=0)
        p = run("inspect", out, check_rc=0)
        self.assertNotIn("\x1b", p.stdout)
        self.assertIn("a\\nb\\x1b[2Jc", p.stdout)

    def test_end_token_key_warning_says_why(self):  # item 8
        d = self.path("e.json", '{"start_token_id": 225, "end_token_id": 2, '
                      '"prefix_dict": {"225": [5, 2], "225_2": [3]}}')
        p = run("check", d, "--vocab-size", "10", check_rc=0)
        self.assertIn('key "225_2" is unreachable from the root "225": its id 2 is end_token_id',
                      p.stdout)
        self.assertNotIn("does not list the id", p.stdout)

    def test_tsv_sep_with_a_tab_is_refused(self):  # item 9
        tsv = os.path.join(DATA, "gir_prefix_dict.txt")
        p = run("paths", tsv, "--vocab-size", "100000", "--rtp-defaults", "--sep", "\t",
                check_rc=2)
        self.assertIn("--sep must not contain a tab", p.stderr)

    def test_flags_are_checked(self):  # item 10
        p = run("paths", self.src, "--vocab-size", "1099511627776", check_rc=2)
        self.assertIn("--vocab-size 1099511627776 is out of range", p.stderr)
        out = self.path("t.tmtrie")
        run("compile", self.src, "-o", out, "--vocab-size", "100000", check_rc=0)
        for flag in (["--vocab-size", "5"], ["--stop-tokens", "2"], ["--start-token", "1"],
                     ["--sep", "_"], ["--rtp-compat"]):
            p = run("paths", out, *flag, check_rc=2)
            self.assertIn("does not apply to tmtrie input", p.stderr)
        p = run("inspect", out, "--vocab-size", "5", check_rc=2)
        self.assertIn("--vocab-size does not apply to tmtrie input", p.stderr)
        p = run("paths", self.src, "--vocab-size", "100000", "--trusted", check_rc=2)
        self.assertIn("--trusted does not apply to rtp-json input", p.stderr)

    def test_rtp_compat_loads_what_rtp_llm_loads(self):  # item 15
        utils = os.path.join(DATA, "utils_test_gir_prefix_dict.json")
        p = run("paths", utils, "--vocab-size", "100", check_rc=1)
        self.assertIn("does not start with start_token_id 225", p.stderr)
        p = run("check", utils, "--vocab-size", "100", "--rtp-compat", check_rc=0)
        self.assertIn('key "1_2" ignored', p.stdout)
        self.assertIn("0 errors, 3 warnings", p.stdout.splitlines()[-1])  # 2 keys, no root
        d = self.path("neg.json", '{"start_token_id": 7, "end_token_id": 2, "sep": "-", '
                      '"prefix_dict": {"7": [5, -3, 99999999999999999999999999], "7-5": [2]}}')
        run("paths", d, "--vocab-size", "10", check_rc=1)
        p = run("paths", d, "--vocab-size", "10", "--rtp-compat", check_rc=0)
        self.assertEqual(p.stdout, "5\n")

    def test_paths_prints_labels_stop_tokens_and_the_empty_sequence(self):  # item 19
        src = self.path("p.jsonl", '[1, 2]\n{"tokens": [1], "label": 7}\n[]\n[1, 2]\n')
        base = ["paths", src, "--vocab-size", "10", "--stop-tokens", "5,0"]
        self.assertEqual(run(*base, check_rc=0).stdout, "(empty)\n1\n1 2\n")
        self.assertEqual(run(*base, "--labels", "--with-stop", check_rc=0).stdout,
                         "0\t2\n1 0\t7\n1 2 0\t0,3\n")
        # An RTP dictionary has no labels: no label column.
        p = run("paths", self.src, "--vocab-size", "100000", "--labels", "--with-stop", check_rc=0)
        self.assertTrue(p.stdout.startswith("64000 64001 2\n"), p.stdout)
        self.assertNotIn("\t", p.stdout)

    def test_a_label_list_is_not_tsv(self):  # item 17
        labels = self.path("labels.txt", "red shoes\nblue hat\n")
        p = run("compile", labels, "-o", self.path("o.tmtrie"), "--vocab-size", "10",
                "--rtp-defaults", check_rc=2)
        self.assertIn("not RTP-LLM TSV", p.stderr)
        self.assertIn("python -m treemask compile-labels", p.stderr)



class FirstContact(unittest.TestCase):
    """Issue 44 item 4: what --help and the README say is what compile does."""

    def test_meta_wins_over_the_automatic_entries(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "p.jsonl")
            with open(src, "w") as f:
                f.write("[1, 2]\n[1, 3]\n")
            out = os.path.join(tmp, "p.tmtrie")
            run("compile", src, "-o", out, "--vocab-size", "10", "--stop-tokens", "0", "--meta", "source=catalogue-v7",
                "--meta", "created_by=our pipeline", check_rc=0)
            info = run("inspect", out, check_rc=0).stdout
            self.assertIn("source               catalogue-v7", info)
            self.assertIn("created_by           our pipeline", info)
            self.assertIn("source_format        jsonl", info)  # the automatic entry not given stays
            self.assertNotIn("p.jsonl", info.split("metadata")[-1])

    def test_a_file_in_another_format_names_the_one_it_looks_like(self):  # item 5
        catalogue = os.path.join(ROOT, "examples", "data", "minionerec", "Industrial_and_Scientific.index.json")
        p = run("compile", catalogue, "-o", os.path.join(tempfile.gettempdir(), "never.tmtrie"), "--vocab-size",
                "1000", check_rc=1)
        self.assertIn("semantic-ID index", p.stderr)
        self.assertIn("examples/demo/demo.cc", p.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            cases = {"paths.json": ("[1, 2]\n[1, 3]\n", "it looks like jsonl: pass --format jsonl"),
                     "dict.jsonl": ('{"prefix_dict": {"225": [3]}}\n', "it looks like rtp-json: pass --format rtp-json"),
                     "prose.jsonl": ("hello world\n", "treemask reads rtp-json"),
                     "tabs.json": ("225\t3\n", "it looks like rtp-tsv: pass --format rtp-tsv")}
            for name, (text, hint) in cases.items():
                path = os.path.join(tmp, name)
                with open(path, "w") as f:
                    f.write(text)
                p = run("compile", path, "-o", os.path.join(tmp, "o.tmtrie"), "--vocab-size", "1000",
                        "--stop-tokens", "0", check_rc=1)
                self.assertIn(hint, p.stderr, name)
                self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
            # A file in the format its name says: the error alone, no hint.
            path = os.path.join(tmp, "wide.json")
            with open(path, "w") as f:
                f.write('{"prefix_dict": {"225": [5000]}, "start_token_id": 225, "end_token_id": 2}')
            p = run("compile", path, "-o", os.path.join(tmp, "o.tmtrie"), "--vocab-size", "1000", check_rc=1)
            self.assertIn("out of range", p.stderr)
            self.assertNotIn("read as", p.stderr)

    def test_every_flag_compile_takes_is_in_its_help(self):
        text = run("compile", "--help", check_rc=0).stdout
        for flag in ("--vocab-size", "--stop-tokens", "--format", "--start-token", "--end-token", "--sep",
                     "--rtp-defaults", "--rtp-compat", "--trusted", "--meta", "--output"):
            self.assertIn(flag, text)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
