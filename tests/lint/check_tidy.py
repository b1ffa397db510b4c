#!/usr/bin/env python3
"""clang-tidy over the library's sources with the pinned checks of
.clang-tidy, every finding an error.

usage: check_tidy.py SOURCE_ROOT BUILD_DIR CLANG_TIDY

Reads BUILD_DIR/compile_commands.json (meson writes it) and checks every C++
file of src/ compiled into the library (not the .cu files), in parallel.
Exits 77 (skip) when no clang-tidy is installed.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import concurrent.futures
import json
import os
import subprocess
import sys


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    root, build, tidy = argv[1], argv[2], argv[3]
    if not tidy or not os.path.exists(tidy):
        print("clang-tidy is not installed (./dev setup installs it): skipped")
        return 77
    src = os.path.join(os.path.realpath(root), "src") + os.sep
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        commands = json.load(f)
    files = sorted({os.path.realpath(os.path.join(c["directory"], c["file"])) for c in commands})
    files = [f for f in files if f.startswith(src) and f.endswith(".cc")]
    if not files:
        print("no sources of src/ in %s/compile_commands.json" % build)
        return 1

    def run(path):
        # The build's g++ flags that clang does not know (-Wshadow=local) are
        # no finding: with -Werror they would be errors otherwise.
        r = subprocess.run([tidy, "-p", build, "--quiet", "--extra-arg=-Wno-unknown-warning-option", path],
                           capture_output=True, text=True)
        return path, r.returncode, r.stdout

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for path, code, out in pool.map(run, files):
            if code != 0:
                failed += 1
                print(out.strip() or "%s: clang-tidy exited %d" % (path, code))
    version = subprocess.run([tidy, "--version"], capture_output=True, text=True).stdout.split("\n")
    print("%d of %d files clean (%s)" % (len(files) - failed, len(files),
                                         next((v.strip() for v in version if "version" in v), tidy)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
