#!/usr/bin/env python3
"""The demo example (examples/demo, what `./dev demo` runs): it generates only
catalogue items, on the bundled MiniOneRec catalogue and on a small one
written here; bad flags exit 2 and a bad catalogue exits 1 naming the byte and
the item.

usage: test_demo.py DEMO_BINARY
Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

DEMO = sys.argv[1]


def run(*args, rc):
    p = subprocess.run([DEMO, *args], capture_output=True, text=True, timeout=60)
    if p.returncode != rc:
        raise AssertionError("demo %s: rc %d, want %d\nstdout: %s\nstderr: %s"
                             % (" ".join(args), p.returncode, rc, p.stdout[-2000:], p.stderr))
    return p


class Demo(unittest.TestCase):
    def catalogue(self, text):
        d = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        path = os.path.join(d, "c.index.json")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_bundled_catalogue_yields_only_catalogue_items(self):
        p = run("--samples", "5", "--seed", "3", rc=0)
        rows = [line for line in p.stdout.splitlines() if "in catalogue:" in line]
        self.assertEqual(len(rows), 4 + 5)  # 4 beams, 5 samples
        self.assertTrue(all(r.endswith("in catalogue: yes") for r in rows), p.stdout)
        self.assertIn("all 9 generated items are in the catalogue", p.stdout)

    def test_small_catalogue_generates_its_own_items(self):
        path = self.catalogue('{"7": ["<a_1>", "<b_2>", "<c_3>"],\n'
                              ' "9": ["<a_1>", "<b_5>", "<c_0>"]}')
        p = run("--catalogue", path, "--samples", "6", rc=0)
        items = re.findall(r"item (\S+)", p.stdout)
        self.assertEqual(len(items), 2 + 6)  # only two beams can exist
        self.assertTrue(set(items) <= {"7", "9"}, items)
        self.assertEqual(set(re.findall(r"<a_1><b_\d><c_\d>", p.stdout)),
                         {"<a_1><b_2><c_3>", "<a_1><b_5><c_0>"})

    def test_bad_catalogues_name_the_byte_and_the_item(self):
        cases = [('{"7": ["<a_1>", "<a_2>"]}', 'item "7" code 1 is "<a_2>"'),
                 ('{"7": ["<a_300>"]}', 'item "7" code 0 is "<a_300>"'),
                 ('{"7": []}', 'item "7" has no codes'),
                 ('{"7": ["<a_1>"]', "expected ','"),
                 ('{"7": ["<a_1>"]} x', "unexpected data after the catalogue"),
                 ('{"7": ["<a_1', "unterminated string")]
        for text, message in cases:
            p = run("--catalogue", self.catalogue(text), rc=1)
            self.assertIn(message, p.stderr)
            self.assertRegex(p.stderr, r"byte \d+")
        p = run("--catalogue", "/nonexistent/x.json", rc=1)
        self.assertIn('cannot read "/nonexistent/x.json"', p.stderr)

    def test_flags_are_checked(self):
        for flag in (["--samples", "-1"], ["--seed", "x"], ["--samples", "3x"]):
            p = run(*flag, rc=2)
            self.assertIn("expects a whole number", p.stderr)
        self.assertIn('unknown argument "--beams"', run("--beams", "3", rc=2).stderr)
        self.assertIn("--seed needs a value", run("--seed", rc=2).stderr)
        self.assertIn("usage: demo", run("--help", rc=0).stdout)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
