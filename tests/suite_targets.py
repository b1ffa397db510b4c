#!/usr/bin/env python3
"""The ninja targets the tests of the given suites run or depend on, so a
sanitizer build compiles only those. `meson introspect DIR --tests --targets`
output on stdin.

usage: suite_targets.py BUILD_DIR SUITE...

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os
import sys

build = os.path.realpath(sys.argv[1])
suites = {"treemask:" + s for s in sys.argv[2:]}
data = json.load(sys.stdin)
files = {t["id"]: t["filename"] for t in data["targets"]}
outputs = set()
for test in data["tests"]:
    if not suites & set(test["suite"]):
        continue
    for dep in test["depends"]:
        outputs.update(files.get(dep, []))
    if os.path.realpath(test["cmd"][0]).startswith(build + os.sep):
        outputs.add(test["cmd"][0])
for f in sorted(os.path.relpath(f, build) for f in outputs):
    print(f)
