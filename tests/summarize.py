#!/usr/bin/env python3
"""The one pass/fail summary of a ./dev run: reads every result its phases
recorded and prints "N passed, M failed, K skipped"; exits 1 on any failure.

usage: summarize.py RESULT...  where RESULT is one of
  meson:TESTLOG.json:RC   a `meson test` run (its JSON log, one test a line)
  junit:REPORT.xml:RC     a pytest run (--junitxml)
  exit:NAME:RC            a runner script: 0 passed, 77 skipped, else failed
A run whose command failed (RC != 0) without a failed test counts as one
failure, so a crash before any test ran is never a pass.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import sys
import xml.etree.ElementTree as ET


def meson_counts(path):
    passed = failed = skipped = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            result = json.loads(line).get("result")
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:
                failed += 1
    return passed, failed, skipped


def junit_counts(path):
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    failed = int(suite.get("failures")) + int(suite.get("errors"))
    skipped = int(suite.get("skipped"))
    return int(suite.get("tests")) - failed - skipped, failed, skipped


def main(results):
    total = [0, 0, 0]
    for result in results:
        kind, _, rest = result.partition(":")
        what, _, rc = rest.rpartition(":")
        rc = int(rc)
        if kind == "exit":
            counts = (1, 0, 0) if rc == 0 else (0, 0, 1) if rc == 77 else (0, 1, 0)
        else:
            try:
                counts = meson_counts(what) if kind == "meson" else junit_counts(what)
            except (OSError, ValueError, ET.ParseError, AttributeError, TypeError):
                counts = (0, 0, 0)
            if rc != 0 and counts[1] == 0:
                counts = (counts[0], 1, counts[2])
        total = [t + c for t, c in zip(total, counts)]
    line = "%d passed, %d failed" % (total[0], total[1])
    if total[2]:
        line += ", %d skipped" % total[2]
    print(line)
    return 1 if total[1] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
