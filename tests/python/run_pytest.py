#!/usr/bin/env python3
"""Runs one pytest file for meson: exit 0 when something passed and nothing
failed, 77 (meson's SKIP) when every test was skipped, 1 otherwise. The
skip reasons are printed, so a skipped file says why.

usage: run_pytest.py TEST_FILE [pytest args...]

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import sys

import pytest


class Outcomes:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def pytest_runtest_logreport(self, report):
        if report.skipped:
            self.skipped += report.when != "teardown"
        elif report.failed:
            self.failed += 1
        elif report.passed and report.when == "call":
            self.passed += 1

    def pytest_collectreport(self, report):
        if report.failed:
            self.failed += 1


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    outcomes = Outcomes()
    # -rs prints the skip reasons; no cache directory in the source tree.
    rc = pytest.main([argv[1], "-q", "-rs", "-p", "no:cacheprovider"] + argv[2:], plugins=[outcomes])
    if outcomes.failed or rc not in (0, 5):
        return 1
    if outcomes.passed == 0:
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
