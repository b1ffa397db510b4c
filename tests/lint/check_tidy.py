#!/usr/bin/env python3
"""clang-tidy over the library's sources with the pinned checks of
.clang-tidy, every finding an error.

usage: check_tidy.py SOURCE_ROOT BUILD_DIR CLANG_TIDY
       check_tidy.py --per-file SOURCE_ROOT BUILD_DIR CLANG_TIDY
       check_tidy.py --self-test CLANG_TIDY

Reads BUILD_DIR/compile_commands.json (meson writes it) and checks every C++
file of src/ compiled into the library (not the .cu files), in parallel.
Exits 77 (skip) when no clang-tidy is installed.

One translation unit per directory of src/ (its files included in order,
compiled with their shared flags): clang-tidy 14's matchers walk every
declaration of the standard headers in each translation unit, which was 70%
of its time with one per file (61 files, ~400 CPU seconds on this kind of
machine; per directory ~110, plus ~115 for the per-file pass below). A
directory whose files do not compile as one (two helpers of the same name
in anonymous namespaces) is split in halves until they do, down to one
file. Findings keep their files and lines (the
header filter, .*/src/.*, covers the included files). The checks that only
look at the main file (MAIN_FILE_ONLY: misc-unused-using-decls) run per
file, on their own. --per-file runs every check per file, as before, to
compare. --self-test checks a scratch tree of two files that clash (so the
unit splits), each with one finding of its kind, and fails unless both are
reported with their files.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import concurrent.futures
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

# Checks that skip what is not in the main file: a translation unit per
# directory would silence them.
MAIN_FILE_ONLY = ["misc-unused-using-decls"]
COMPILE_ERROR = "[clang-diagnostic-error]"


def tidy_run(tidy, db_dir, path, checks=None):
    # The build's g++ flags that clang does not know (-Wshadow=local) are
    # no finding: with -Werror they would be errors otherwise.
    cmd = [tidy, "-p", db_dir, "--quiet", "--extra-arg=-Wno-unknown-warning-option"]
    if checks:
        cmd.append("--checks=" + checks)
    r = subprocess.run(cmd + [path], capture_output=True, text=True)
    return r.returncode, r.stdout


def command_for(entry, path):
    """entry's compile command, compiling path instead of its own source."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MQ", "-MT"):
            skip = True
            continue
        if a in ("-MD", "-MMD") or a == entry.get("source", entry["file"]):
            continue
        out.append(a)
    return out + ["-o", os.devnull, path]


def unity_members(path):
    """The files a meson unity file includes (#include<path> lines)."""
    with open(path, encoding="utf-8") as f:
        return [os.path.realpath(m.group(1)) for m in (re.match(r'#include\s*[<"](.+)[>"]', line) for line in f) if m]


def flags_key(entry):
    """The compile flags without the file's own names."""
    args = command_for(entry, "")
    return tuple(args[:-3])


SCRATCH = {
    "a.cc": "namespace {\nint helper() { return 1; }\n}  // namespace\n"
            "extern int a_global;\nint *a_null() { return helper() ? 0 : &a_global; }\n",
    "b.cc": "namespace probe { inline int g() { return 2; } }\nnamespace {\nint helper() { return 2; }\n"
            "using probe::g;\n}  // namespace\nint b() { return helper(); }\n",
}


def self_test(tidy):
    with tempfile.TemporaryDirectory(prefix="check-tidy-") as tmp:
        src = os.path.join(tmp, "src", "scratch")
        build = os.path.join(tmp, "build")
        os.makedirs(src)
        os.makedirs(build)
        with open(os.path.join(tmp, ".clang-tidy"), "w", encoding="utf-8") as f:
            f.write("Checks: '-*,modernize-use-nullptr,misc-unused-using-decls'\nWarningsAsErrors: '*'\n"
                    "HeaderFilterRegex: '.*/src/.*'\n")
        db = []
        for name, text in SCRATCH.items():
            with open(os.path.join(src, name), "w", encoding="utf-8") as f:
                f.write(text)
            db.append({"directory": build, "file": "../src/scratch/" + name,
                       "command": "c++ -std=c++20 -o %s.o -c ../src/scratch/%s" % (name, name)})
        with open(os.path.join(build, "compile_commands.json"), "w", encoding="utf-8") as f:
            json.dump(db, f)
        r = subprocess.run([sys.executable, __file__, tmp, build, tidy], capture_output=True, text=True)
    want = ["a.cc:5:35: error: use nullptr [modernize-use-nullptr", "b.cc:4:14: error: using decl 'g' is unused"]
    missing = [w for w in want if w not in r.stdout]
    if r.returncode != 1 or missing or "2 translation units" not in r.stdout:
        print("self-test: expected exit 1, 2 translation units and %s; got exit %d:\n%s" % (want, r.returncode, r.stdout))
        return 1
    print("self-test: a unit of two clashing files split in two, and a finding of each kind reported")
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        if not argv[2] or not os.path.exists(argv[2]):
            print("clang-tidy is not installed (./dev setup installs it): skipped")
            return 77
        return self_test(argv[2])
    per_file = len(argv) > 1 and argv[1] == "--per-file"
    if per_file:
        argv = argv[:1] + argv[2:]
    if len(argv) != 4:
        sys.exit(__doc__)
    root, build, tidy = argv[1], argv[2], argv[3]
    if not tidy or not os.path.exists(tidy):
        print("clang-tidy is not installed (./dev setup installs it): skipped")
        return 77
    src = os.path.join(os.path.realpath(root), "src") + os.sep
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        commands = json.load(f)
    entries = {}
    for c in commands:
        path = os.path.realpath(os.path.join(c["directory"], c["file"]))
        # meson's unity files (the library compiles in them: src/meson.build)
        # stand for the files they include, with their flags.
        for member in unity_members(path) if "-unity" in os.path.basename(path) else [path]:
            if member.startswith(src) and member.endswith(".cc"):
                entries.setdefault(member, dict(c, file=member, source=c["file"]))
    files = sorted(entries)
    if not files:
        print("no sources of src/ in %s/compile_commands.json" % build)
        return 1
    start = time.monotonic()
    workers = os.cpu_count() or 1
    # Every file's own compile command (unity members have none in build's).
    unity_dir = os.path.join(os.path.realpath(build), "tidy-unity")
    files_db = os.path.join(unity_dir, "files")
    os.makedirs(files_db, exist_ok=True)
    with open(os.path.join(files_db, "compile_commands.json"), "w", encoding="utf-8") as f:
        json.dump([{"directory": entries[p]["directory"], "file": p, "arguments": command_for(entries[p], p)}
                   for p in files], f)
    if per_file:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(lambda p: (p,) + tidy_run(tidy, files_db, p), files))
        failed = [(p, out) for p, code, out in results if code != 0]
        return report(tidy, files, failed, "one translation unit per file", start)

    # Groups: the files of one directory with the same flags.
    groups = {}
    for path in files:
        groups.setdefault((os.path.dirname(path), flags_key(entries[path])), []).append(path)
    numbers = itertools.count(1)
    without_main_only = "-" + ",-".join(MAIN_FILE_ONLY)

    def unity(paths):
        """A translation unit of paths: its file and the directory of its
        compile database (one each: the units are made as they run)."""
        if len(paths) == 1:
            return paths[0], files_db
        db = os.path.join(unity_dir, "%s-%d" % (os.path.basename(os.path.dirname(paths[0])), next(numbers)))
        os.makedirs(db, exist_ok=True)
        name = os.path.join(db, "unit.cc")
        with open(name, "w", encoding="utf-8") as f:
            f.write("// clang-tidy's translation unit for %d files (tests/lint/check_tidy.py)\n" % len(paths))
            for p in paths:
                f.write('#include "%s"  // NOLINT(bugprone-suspicious-include)\n' % p)
        e = entries[paths[0]]
        with open(os.path.join(db, "compile_commands.json"), "w", encoding="utf-8") as f:
            json.dump([{"directory": e["directory"], "file": name, "arguments": command_for(e, name)}], f)
        return name, db

    def check_group(paths):
        """(paths, exit code, output) for each translation unit it took."""
        code, out = tidy_run(tidy, *reversed(unity(paths)), without_main_only)
        if code != 0 and COMPILE_ERROR in out and len(paths) > 1:
            half = len(paths) // 2
            return check_group(paths[:half]) + check_group(paths[half:])
        return [(paths, code, out)]

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        # The big translation units first, the per-file checks after.
        unit_jobs = [pool.submit(check_group, g) for g in sorted(groups.values(), key=len, reverse=True)]
        file_jobs = [pool.submit(lambda p: (p,) + tidy_run(tidy, files_db, p, "-*," + ",".join(MAIN_FILE_ONLY)), p)
                     for p in files]
        units = [u for job in unit_jobs for u in job.result()]
        singles = [job.result() for job in file_jobs]
    failed = [(" + ".join(os.path.relpath(p, root) for p in paths), out) for paths, code, out in units if code != 0]
    failed += [(p, out) for p, code, out in singles if code != 0]
    return report(tidy, files, failed, "%d translation units, then %s per file" % (len(units), ", ".join(MAIN_FILE_ONLY)),
                  start)


def report(tidy, files, failed, how, start):
    for what, out in failed:
        print(out.strip() or "%s: clang-tidy failed" % what)
    version = subprocess.run([tidy, "--version"], capture_output=True, text=True).stdout.split("\n")
    print("%d files, %s, %.0fs (%s): %s" % (len(files), how, time.monotonic() - start,
                                          next((v.strip() for v in version if "version" in v), tidy),
                                          "%d with findings" % len(failed) if failed else "clean"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
