#!/usr/bin/env python3
# treemask — checks of the built wheel.
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""Checks what a user of the wheel gets, before anyone installs it:

- the file name: treemask-<version>-cp39-abi3-<platform>.whl;
- `auditwheel show`: the wheel is consistent with the claimed platform tag
  (its glibc symbol versions allow it) and grafts nothing;
- `abi3audit --strict`: the extension module uses only the stable Python ABI;
- `readelf -d`: no shared object needs libstdc++, libcudart, libcuda or
  libsimdjson (all inside libtreemask, or loaded by the CUDA runtime at run
  time), and libtreemask exports only treemask_* symbols;
- `cuobjdump`: SASS for every requested architecture and PTX of the newest;
- the size limit.

usage: check_wheel.py --platform TAG --archs 75,80,... [--max-mib 25] [--junit FILE] WHEEL
Prints one line per check and "N passed, N failed"; exit 1 on any failure."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

# libgcc_s.so.1 is allowed: every manylinux platform has it, and its static
# twin's unwinder would need glibc 2.35 (meson.build, portable).
FORBIDDEN_NEEDED = ("libstdc++", "libcudart", "libcuda.", "libsimdjson")


def sh(cmd: list) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--platform", required=True)
    ap.add_argument("--archs", required=True)
    ap.add_argument("--max-mib", type=float, default=25.0)
    ap.add_argument("--junit")
    ap.add_argument("wheels", nargs="+", type=Path)
    args = ap.parse_args()
    results: list[tuple[str, str | None]] = []  # (check, failure message or None)

    def check(name: str, problem: str | None, detail: str = "") -> None:
        results.append((name, problem))
        print("%-4s %s%s" % ("ok" if problem is None else "FAIL", name,
                             (": " + problem) if problem else (" (" + detail + ")" if detail else "")), flush=True)

    if len(args.wheels) != 1:
        check("exactly one wheel in dist/", "found %s" % [w.name for w in args.wheels])
        return finish(results, args.junit)
    wheel = args.wheels[0]
    m = re.fullmatch(r"treemask-(\d+\.\d+\.\d+)-(\w+)-(\w+)-(.+)\.whl", wheel.name)
    check("file name treemask-<v>-cp39-abi3-%s.whl" % args.platform,
          None if m and m.group(2) == "cp39" and m.group(3) == "abi3" and m.group(4) == args.platform
          else "got %s" % wheel.name)

    size_mib = wheel.stat().st_size / 2**20
    check("size <= %g MiB" % args.max_mib, None if size_mib <= args.max_mib else "%.1f MiB" % size_mib,
          "%.1f MiB" % size_mib)

    show = sh(["auditwheel", "show", wheel])
    consistent = re.search(r"consistent\s+with\s+the\s+following\s+platform\s+tag:\s*\"?([\w.]+)\"?", show.stdout)
    check("auditwheel show: consistent with %s" % args.platform,
          None if show.returncode == 0 and consistent and consistent.group(1) == args.platform
          else "auditwheel show says: %s" % (show.stdout + show.stderr).strip()[:2000],
          consistent.group(1) if consistent else "")
    with zipfile.ZipFile(wheel) as z:
        grafted = sorted({n.split("/")[0] + "/" + n.split("/")[1] for n in z.namelist() if ".libs/" in n})
    check("auditwheel repair grafted nothing (no treemask.libs/)", "grafted %s" % grafted if grafted else None)

    audit = sh(["abi3audit", "--strict", "--verbose", wheel])
    check("abi3audit --strict", None if audit.returncode == 0 else (audit.stdout + audit.stderr).strip()[-2000:],
          " ".join((audit.stdout + audit.stderr).split())[-160:])

    with tempfile.TemporaryDirectory(prefix="treemask-wheel-") as tmp:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(tmp)
            # The modes the wheel records, as pip applies them (extractall drops them).
            for info in z.infolist():
                if info.external_attr >> 16 & 0o111:
                    os.chmod(Path(tmp) / info.filename, info.external_attr >> 16 & 0o777)
        objects = sorted(Path(tmp).rglob("*.so*"))
        names = sorted(str(o.relative_to(tmp)) for o in objects)
        check("shared objects: the cffi module and libtreemask only",
              None if {Path(n).name for n in names} == {"_treemask_cffi.abi3.so", "libtreemask.so"} else
              "found %s" % names, ", ".join(names))
        for o in objects:
            needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", sh(["readelf", "-d", o]).stdout)
            bad = [n for n in needed if n.startswith(FORBIDDEN_NEEDED)]
            check("readelf -d %s: no libstdc++/libcudart/libcuda/libsimdjson" % o.name,
                  "needs %s" % bad if bad else None, "needs " + " ".join(needed))
        # The native program (the console script `treemask` runs it): linked
        # as the library is, statically against the core and the C++ runtime.
        program = Path(tmp) / "treemask" / "_cli" / "treemask"
        if not program.is_file():
            check("the treemask program (treemask/_cli/treemask) in the wheel", "missing")
        else:
            needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", sh(["readelf", "-d", program]).stdout)
            bad = [n for n in needed if n.startswith(FORBIDDEN_NEEDED + ("libtreemask",))]
            ran = sh([program, "version"])
            check("the treemask program: needs no libstdc++/libcudart/libcuda/libsimdjson/libtreemask, runs",
                  "needs %s" % bad if bad else None if ran.returncode == 0 else "`treemask version`: exit %d %s"
                  % (ran.returncode, ran.stderr.strip()), "needs %s; %s" % (" ".join(needed), ran.stdout.strip()))
        lib = next((o for o in objects if o.name == "libtreemask.so"), None)
        if lib is None:
            check("libtreemask.so in the wheel", "missing")
            return finish(results, args.junit)
        exported = [line.split()[-1] for line in sh(["nm", "-D", "--defined-only", lib]).stdout.splitlines()
                    if len(line.split()) == 3]
        leaked = [s for s in exported if not s.startswith("treemask_") and not s.startswith("TREEMASK_")]
        check("libtreemask.so exports only treemask_* (the C++ runtime stays hidden)",
              "also exports %s" % leaked[:20] if leaked else None, "%d symbols" % len(exported))
        strings = sh(["strings", "-n", "8", lib]).stdout
        check("libtreemask.so has the JSON loaders (simdjson compiled in)",
              None if "simdjson" in strings and "built without simdjson" not in strings else
              "no simdjson code in libtreemask.so")
        want = {int(a) for a in args.archs.split(",")}
        cuobjdump = find_cuobjdump()
        if cuobjdump is None:
            check("cuobjdump found", "neither on PATH nor from the nvidia-cuda-cuobjdump wheel (dependency group dist)")
            return finish(results, args.junit)
        elf = sh([cuobjdump, "--list-elf", lib])
        ptx = sh([cuobjdump, "--list-ptx", lib])
        sass = {int(a) for a in re.findall(r"\.sm_(\d+)[a-z]?\.cubin", elf.stdout)}
        ptx_archs = {int(a) for a in re.findall(r"\.sm_(\d+)[a-z]?\.ptx", ptx.stdout)}
        check("cuobjdump: SASS for sm_%s" % ",".join(map(str, sorted(want))),
              None if elf.returncode == 0 and sass == want else "SASS for %s (%s)" % (sorted(sass), elf.stderr.strip()),
              " ".join("sm_%d" % a for a in sorted(sass)))
        check("cuobjdump: PTX of compute_%d" % max(want),
              None if ptx.returncode == 0 and ptx_archs == {max(want)} else "PTX for %s" % sorted(ptx_archs),
              " ".join("compute_%d" % a for a in sorted(ptx_archs)))
    return finish(results, args.junit)


def find_cuobjdump() -> str | None:
    """cuobjdump from PATH, or from NVIDIA's nvidia-cuda-cuobjdump wheel."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    for base in map(Path, sys.path):
        for candidate in sorted((base / "nvidia").glob("*/bin/cuobjdump")):  # nvidia/cu13/bin/cuobjdump
            if candidate.is_file():
                return str(candidate)
    return None


def finish(results: list, junit: str | None) -> int:
    failed = sum(1 for _, p in results if p is not None)
    print("%d passed, %d failed" % (len(results) - failed, failed))
    if junit:
        cases = "".join('<testcase classname="check_wheel" name="%s">%s</testcase>' % (
            escape(n, {'"': "&quot;"}), "" if p is None else '<failure message="%s"/>' % escape(p, {'"': "&quot;"}))
            for n, p in results)
        Path(junit).write_text('<?xml version="1.0"?><testsuite name="check_wheel" tests="%d" failures="%d" '
                               'errors="0" skipped="0">%s</testsuite>\n' % (len(results), failed, cases))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
