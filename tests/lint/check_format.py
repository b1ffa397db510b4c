#!/usr/bin/env python3
"""Every C/C++/CUDA source in the tree is clang-format clean (config: .clang-format).

usage: check_format.py SOURCE_ROOT CLANG_FORMAT"""
import os
import subprocess
import sys

root, clang_format = sys.argv[1], sys.argv[2]
exts = (".c", ".cc", ".h", ".cu", ".cuh")
files = []
for top in ("include", "src", "tests", "examples", "bindings"):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
        dirnames[:] = [d for d in dirnames if d not in ("target", "build")]
        files += [os.path.join(dirpath, f) for f in filenames if f.endswith(exts)]
r = subprocess.run([clang_format, "--dry-run", "--Werror", "--style=file"] + sorted(files),
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.stdout.write(r.stderr[:20000])
    sys.exit("clang-format would change the files above: run clang-format -i on them")
print("%d files are clang-format clean" % len(files))
