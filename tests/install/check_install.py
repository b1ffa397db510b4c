#!/usr/bin/env python3
# treemask — C and C++ consumers of an installed libtreemask.
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""Stages `meson install` of a build directory under a temporary DESTDIR and
builds the README's C example against it, as a user of the installed library
would: an out-of-tree CMake project (find_package(treemask CONFIG):
treemask::treemask and treemask::treemask_static), a plain pkg-config build
and a static one (`pkg-config --static`, libtreemask.a). Each program runs and
must finish its decode loop.

usage: check_install.py BUILD_DIR README.md"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "lint"))
from check_readme_c import harness_source  # noqa: E402


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("$", " ".join(str(c) for c in cmd), flush=True)
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print(r.stdout[-6000:], r.stderr[-6000:], sep="\n")
        raise SystemExit("failed (%d): %s" % (r.returncode, " ".join(str(c) for c in cmd)))
    return r


def main() -> int:
    build_dir, readme = Path(sys.argv[1]).resolve(), sys.argv[2]
    options = {o["name"]: o["value"] for o in json.loads(
        run(["meson", "introspect", build_dir, "--buildoptions"]).stdout)}
    prefix, libdir, includedir = options["prefix"], options["libdir"], options["includedir"]
    failures = []
    with tempfile.TemporaryDirectory(prefix="treemask-install-") as tmp:
        destdir = Path(tmp) / "stage"
        # The C library's tags: the headers, libraries, treemask.pc, the CMake
        # package and the `treemask` command (not the Python package).
        run(["meson", "install", "-C", build_dir, "--no-rebuild", "--quiet", "--tags", "runtime,devel",
             "--destdir", destdir])
        staged_prefix = destdir / prefix.lstrip("/")
        staged_lib = staged_prefix / libdir if not os.path.isabs(libdir) else destdir / libdir.lstrip("/")
        staged_inc = staged_prefix / includedir
        for want in (staged_inc / "treemask" / "treemask.h", staged_inc / "treemask" / "treemask_cuda.h",
                     staged_inc / "treemask" / "version.h", staged_lib / "libtreemask.a",
                     staged_lib / "pkgconfig" / "treemask.pc",
                     staged_lib / "cmake" / "treemask" / "treemaskConfig.cmake",
                     staged_lib / "cmake" / "treemask" / "treemaskConfigVersion.cmake"):
            if not want.exists():
                failures.append("not installed: %s" % want.relative_to(destdir))
        sonames = sorted(p.name for p in staged_lib.glob("libtreemask.so*"))
        print("installed libraries:", " ".join(sonames))
        if not any(n.startswith("libtreemask.so.") for n in sonames) or "libtreemask.so" not in sonames:
            failures.append("libtreemask.so and its soname link are not both installed: %s" % sonames)
        source = Path(tmp) / "readme_example.c"
        source.write_text(harness_source(readme), encoding="utf-8")
        env = dict(os.environ, LD_LIBRARY_PATH=str(staged_lib))

        # CMake, out of tree, finding the staged prefix.
        cmake_build = Path(tmp) / "cmake-build"
        run(["cmake", "-S", HERE / "cmake_consumer", "-B", cmake_build, "-G", "Ninja",
             "-DCMAKE_PREFIX_PATH=%s" % staged_prefix, "-DREADME_EXAMPLE=%s" % source,
             "-DCMAKE_BUILD_TYPE=Release"])
        run(["cmake", "--build", cmake_build])
        programs = ["readme_example_shared", "readme_example_static"]
        for program in programs:
            exe = cmake_build / program
            if not exe.exists():
                failures.append("CMake did not build %s (treemask::treemask_static missing?)" % program)
                continue
            out = run([exe], env=env).stdout
            print(program + ":", out.strip())
        needed = run(["readelf", "-d", cmake_build / "readme_example_static"]).stdout \
            if (cmake_build / "readme_example_static").exists() else ""
        if "libtreemask" in needed:
            failures.append("readme_example_static needs libtreemask.so: it did not link the static library")

        # pkg-config, as the README's "Building by hand" shows, through the
        # staged .pc (PKG_CONFIG_SYSROOT_DIR maps its paths into DESTDIR).
        pc_env = dict(os.environ, PKG_CONFIG_PATH=str(staged_lib / "pkgconfig"),
                      PKG_CONFIG_SYSROOT_DIR=str(destdir))
        flags = run(["pkg-config", "--cflags", "--libs", "treemask"], env=pc_env).stdout.split()
        version = run(["pkg-config", "--modversion", "treemask"], env=pc_env).stdout.strip()
        print("pkg-config treemask %s: %s" % (version, " ".join(flags)))
        exe = Path(tmp) / "readme_example_pkgconfig"
        cc = shutil.which(os.environ.get("CC", "cc")) or "cc"
        run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", source, "-o", exe, *flags, "-lm"])
        print("readme_example_pkgconfig:", run([exe], env=env).stdout.strip())

        # pkg-config --static: libtreemask.a (-l:libtreemask.a, the shared
        # library being installed beside it) with what it needs from
        # treemask.pc's Libs.private and Requires.private.
        static_flags = run(["pkg-config", "--static", "--cflags", "--libs", "treemask"], env=pc_env).stdout.split()
        print("pkg-config --static treemask: %s" % " ".join(static_flags))
        if "-ltreemask" not in static_flags:
            failures.append("pkg-config --static --libs treemask has no -ltreemask: %s" % static_flags)
        static_flags = ["-l:libtreemask.a" if f == "-ltreemask" else f for f in static_flags]
        exe = Path(tmp) / "readme_example_pkgconfig_static"
        link = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", source, "-o", exe, *static_flags],
                              capture_output=True, text=True)
        undefined = sorted(set(re.findall(r"undefined reference to `([^']+)'", link.stderr)))
        if link.returncode != 0:
            failures.append("the static pkg-config link failed (exit %d; %d undefined symbols, e.g. %s):\n%s" % (
                link.returncode, len(undefined), undefined[:8], link.stderr[-1500:]))
        else:
            if "libtreemask" in run(["readelf", "-d", exe]).stdout:
                failures.append("readme_example_pkgconfig_static needs libtreemask.so: it did not link libtreemask.a")
            print("readme_example_pkgconfig_static:", run([exe]).stdout.strip())
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("the staged install's headers, libraries, treemask.pc and CMake package build and run the README"
              " example")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
