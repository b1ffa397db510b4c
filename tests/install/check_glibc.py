#!/usr/bin/env python3
# treemask — the wheel's libraries against an old glibc's own per-library symbol lists.
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""Checks that every shared object in the wheel loads on glibc --glibc (the
manylinux floor its tag claims) with what it lists as needed, the way that
glibc's loader resolves it, not only that its symbol versions are old enough
(what auditwheel checks):

- every symbol it imports at a GLIBC_ version is defined at that version by
  one of the libraries it lists as needed (DT_NEEDED) or the loader, in that
  glibc (before 2.34, pthread_create lives in libpthread.so.0, shm_open in
  librt.so.1, dlopen in libdl.so.2: a library that imports them needs those);
- every version it requires of a library (.gnu.version_r) is defined by that
  library in that glibc.

glibc --glibc's libraries are the link stubs src/dist/glibc_compat.py makes
from PyPI's ziglang (its glibc ABI lists), cached in --stubs; the check
first confirms that they are that glibc's (libc.so.6's newest version).

usage: check_glibc.py --glibc 2.28 --stubs DIR [--junit FILE] WHEEL_OR_LIBRARY...
Prints one line per check and "N passed, N failed"; exit 1 on any failure."""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "src" / "dist"))
from check_wheel import finish  # noqa: E402
from glibc_compat import make_stubs  # noqa: E402

LOADER = "ld-linux-x86-64.so.2"


def sh(cmd: list) -> str:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("failed (exit %d): %s\n%s" % (r.returncode, " ".join(map(str, cmd)), r.stderr[-2000:]))
    return r.stdout


def version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v[len("GLIBC_"):].split("."))


def defined(lib: Path) -> tuple[set[tuple[str, str]], set[str]]:
    """LIB's (symbol, version) definitions and its version names."""
    symbols = {(m.group(1), m.group(2)) for m in re.finditer(
        r" \w (\S+?)@@?(\S+)$", sh(["nm", "-D", "--with-symbol-versions", "--defined-only", lib]), re.M)}
    dump = sh(["readelf", "-V", "-W", lib])
    definitions = dump.split("Version definition section", 1)[-1].split("Version needs section", 1)[0]
    names = set(re.findall(r"Name: (\S+)", definitions))
    return symbols, names


def check_object(obj: Path, label: str, stubs: dict[str, Path], glibc: str, check) -> None:
    dynamic = sh(["readelf", "-d", "-W", obj])
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    tables = {name: defined(path) for name, path in stubs.items()}
    # The loader is always there, needed or not.
    visible = [n for n in dict.fromkeys([*needed, LOADER]) if n in stubs]
    imports = re.findall(r"^\s+[Uw] (\S+?)@(GLIBC_\S+)$",
                         sh(["nm", "-D", "--undefined-only", "--with-symbol-versions", obj]), re.M)
    problems = []
    for name, version in imports:
        if any((name, version) in tables[lib][0] for lib in visible):
            continue
        elsewhere = sorted(lib for lib in stubs if (name, version) in tables[lib][0])
        problems.append("%s@%s: %s" % (name, version, (
            "glibc %s defines it in %s, which %s does not list as needed" % (glibc, " and ".join(elsewhere), label)
            if elsewhere else "no library of glibc %s defines it" % glibc)))
    check("%s: each of its %d glibc imports defined, at its version, by a library it needs in glibc %s"
          % (label, len(imports), glibc),
          "%d not: %s" % (len(problems), "; ".join(problems[:15])) if problems else None,
          "needs " + " ".join(needed))
    requirements = sh(["readelf", "-V", "-W", obj]).split("Version needs section", 1)
    wrong = []
    if len(requirements) == 2:
        current = None
        for line in requirements[1].splitlines():
            m = re.search(r"File: (\S+)", line)
            if m:
                current = m.group(1)
                continue
            m = re.search(r"Name: (GLIBC_\S+)", line)
            if m and current is not None:
                if current not in stubs:
                    wrong.append("%s from %s, which is no glibc library" % (m.group(1), current))
                elif m.group(1) not in tables[current][1]:
                    wrong.append("%s from %s, which glibc %s's does not define" % (m.group(1), current, glibc))
    check("%s: every glibc version it requires exists in glibc %s's library" % (label, glibc),
          "; ".join(wrong) if wrong else None)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--glibc", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--junit")
    ap.add_argument("inputs", nargs="+", type=Path)
    args = ap.parse_args()
    results: list[tuple[str, str | None]] = []

    def check(name: str, problem: str | None, detail: str = "") -> None:
        results.append((name, problem))
        print("%-4s %s%s" % ("ok" if problem is None else "FAIL", name,
                             (": " + problem) if problem else (" (" + detail + ")" if detail else "")), flush=True)

    stubs = {name: Path(path) for name, path in make_stubs(args.glibc, args.stubs).items()}
    newest = max((v for v in defined(stubs["libc.so.6"])[1] if v.startswith("GLIBC_2.")), key=version_key)
    check("the symbol lists are glibc %s's (libc.so.6's newest version)" % args.glibc,
          None if newest == "GLIBC_" + args.glibc else "libc.so.6's newest version is %s" % newest,
          ", ".join(sorted(stubs)))
    with tempfile.TemporaryDirectory(prefix="treemask-glibc-") as tmp:
        for given in args.inputs:
            if given.suffix == ".whl":
                with zipfile.ZipFile(given) as z:
                    z.extractall(Path(tmp) / given.name)
                # Every ELF file: the shared objects and the native program.
                objects = sorted(p for p in (Path(tmp) / given.name).rglob("*")
                                 if p.is_file() and p.open("rb").read(4) == b"\x7fELF")
                if not objects:
                    check("%s: ELF files" % given.name, "none in the wheel")
                for obj in objects:
                    check_object(obj, str(obj.relative_to(Path(tmp) / given.name)), stubs, args.glibc, check)
            else:
                check_object(given, str(given), stubs, args.glibc, check)
    return finish(results, args.junit)


if __name__ == "__main__":
    sys.exit(main())
