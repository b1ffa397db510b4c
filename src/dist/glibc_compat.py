#!/usr/bin/env python3
# treemask — glibc symbol versions for the wheel's libtreemask.
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""Makes the libraries linked on this machine's glibc load on an older one.

The linker binds each reference to glibc to the first library on the link
line that defines the symbol, at the version that library gives it. Linked
against Debian 12's glibc 2.36, pthread_create, dlopen and shm_open become
libc.so.6's @GLIBC_2.34 (their move into libc), exp, log and pow
@GLIBC_2.29: an older glibc has neither the versions nor, before 2.34, those
functions in libc.so.6 (they were in libpthread.so.0, libdl.so.2,
librt.so.1, ...).

So the link sees glibc --max first: this script writes its libraries as stubs
(every symbol each of libc.so.6, libm.so.6, libpthread.so.0, libdl.so.2,
librt.so.1, libutil.so.1, libresolv.so.2 and ld-linux-x86-64.so.2 exports
in that glibc, at the versions it exports them, and no code), made by PyPI's
ziglang from the glibc ABI lists it ships (`zig cc -target
x86_64-linux-gnu.MAX`), and prints link arguments that put them ahead of the
machine's glibc, --as-needed:

- every reference binds to the symbol where glibc --max defines it, as a link
  on that glibc would (pthread_create to libpthread.so.0@GLIBC_2.2.5,
  shm_open to librt.so.1@GLIBC_2.2.5, exp to libm.so.6@GLIBC_2.2.5), and a
  library that provides a used symbol is listed as needed, no other
  (--as-needed decides from the references the link resolves: inside meson's
  --start-group, which rescans, so the static libraries' references count
  too);
- a symbol glibc --max does not have falls through to the machine's glibc at
  its newer version. glibc_compat.c implements those the libraries use on
  interfaces glibc --max has (COMPAT_C: each -Wl,--wrap=NAME, each an archive
  member that the link takes only when something references it); any other
  fails auditwheel's tag check and tests/install/check_glibc.py.

It also compiles glibc_compat.c's members into an archive (with --cc), and
prints the link arguments, one a line: what meson.build adds to every link
of the wheel's build (option glibc_max).

usage: glibc_compat.py --max 2.28 --out-dir DIR --cc CC [--ar AR]"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Interfaces newer than 2.28 that glibc exports at no older version;
# glibc_compat.c defines __wrap_NAME for each (compiled with
# -DTREEMASK_COMPAT_NAME, one archive member a name).
COMPAT_C = ["stat", "fstat", "lstat", "stat64", "fstat64", "lstat64", "fstatat", "fstatat64",
            "__libc_single_threaded", "arc4random"]
# The libraries of glibc that zig writes stubs for, by the name zig gives the
# file; the file is copied under its soname. libanl (getaddrinfo_a) is not
# among them: a reference to it fails the checks.
STUB_FILES = ["libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1", "libresolv.so.2",
              "libm.so.6", "libc.so.6", "libld.so.2"]


def fail(message: str) -> None:
    raise SystemExit("glibc_compat.py: " + message)


def soname(lib: str) -> str:
    out = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    if not m:
        fail("%s has no soname" % lib)
    return m.group(1)


def defined_versions(lib: str) -> set[tuple[str, str]]:
    """(name, version) of every symbol LIB defines, default or not."""
    out = subprocess.run(["nm", "-D", "--with-symbol-versions", "--defined-only", lib], check=True,
                         capture_output=True, text=True).stdout
    return {(m.group(1), m.group(2)) for m in re.finditer(r" \w (\S+?)@@?(\S+)$", out, re.M)}


def make_stubs(version: str, out_dir: str) -> dict[str, str]:
    """glibc VERSION's libraries as link stubs in OUT_DIR (written once):
    {soname: path}. Needs the ziglang package in this interpreter."""
    stamp = os.path.join(out_dir, "glibc-%s.stamp" % version)
    if not os.path.isfile(stamp):
        try:
            import ziglang  # noqa: F401  (only its presence: `python -m ziglang` runs zig)
        except ImportError:
            fail("glibc %s's symbol lists come from PyPI's ziglang, which %s cannot import: pip install "
                 "ziglang==0.13.0 (./dev wheel does)" % (version, sys.executable))
        os.makedirs(out_dir, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="glibc-stubs-") as tmp:
            src = os.path.join(tmp, "empty.c")
            with open(src, "w") as f:
                f.write("int treemask_glibc_stub_probe(void) { return 0; }\n")
            env = dict(os.environ, ZIG_GLOBAL_CACHE_DIR=os.path.join(tmp, "cache"),
                       ZIG_LOCAL_CACHE_DIR=os.path.join(tmp, "cache"))
            cmd = [sys.executable, "-m", "ziglang", "cc", "-target", "x86_64-linux-gnu.%s" % version, "-shared",
                   "-v", "-o", os.path.join(tmp, "probe.so"), src]
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            found = re.findall(r"(\S+)/libc\.so\.6\b", r.stdout + r.stderr)
            if r.returncode != 0 or not found:
                fail("%s: exit %d, no glibc stubs in its link line:\n%s" % (" ".join(cmd), r.returncode,
                                                                           (r.stdout + r.stderr)[-3000:]))
            for name in STUB_FILES:
                path = os.path.join(found[0], name)
                if not os.path.isfile(path):
                    fail("zig wrote no %s for glibc %s (in %s)" % (name, version, found[0]))
                shutil.copyfile(path, os.path.join(out_dir, soname(path)))
        with open(stamp, "w") as f:
            f.write("\n".join(sorted(soname(os.path.join(out_dir, n)) for n in os.listdir(out_dir)
                                     if ".so" in n)) + "\n")
    with open(stamp) as f:
        return {name: os.path.join(out_dir, name) for name in f.read().split()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--cc", required=True)
    ap.add_argument("--ar", default="ar")
    args = ap.parse_args()
    if not re.fullmatch(r"2\.\d+", args.max):
        fail("--max %r is not a glibc version such as 2.28" % args.max)
    out_dir = os.path.abspath(args.out_dir)
    stubs = make_stubs(args.max, os.path.join(out_dir, "glibc-%s" % args.max))
    libc_names = {name for name, _ in defined_versions(stubs["libc.so.6"])}
    compat = [name for name in COMPAT_C if name not in libc_names]
    # As a link on that glibc orders them: the libraries the build names
    # (-lpthread, -ldl, -lrt, ...) before libm, libc and the loader, which the
    # compiler driver adds.
    order = ["libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1", "libresolv.so.2", "libm.so.6",
             "libc.so.6", "ld-linux-x86-64.so.2"]
    if set(order) != set(stubs):
        fail("the stubs for glibc %s are %s, expected %s" % (args.max, sorted(stubs), sorted(order)))
    link = ["-Wl,--push-state,--as-needed"] + [stubs[n] for n in order] + ["-Wl,--pop-state"]
    if compat:
        here = os.path.dirname(os.path.abspath(__file__))
        objects = []
        for name in compat:
            obj = os.path.join(out_dir, "glibc_compat_%s.o" % name)
            cmd = [args.cc, "-c", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror", "-DTREEMASK_COMPAT_%s" % name,
                   os.path.join(here, "glibc_compat.c"), "-o", obj]
            subprocess.run(cmd, check=True)
            if ("__wrap_" + name) not in subprocess.run(["nm", "--defined-only", obj], check=True,
                                                        capture_output=True, text=True).stdout:
                fail("%s defines no __wrap_%s" % (" ".join(cmd), name))
            objects.append(obj)
        archive = os.path.join(out_dir, "libglibc_compat.a")
        if os.path.exists(archive):
            os.remove(archive)
        subprocess.run([args.ar, "rcs", archive, *objects], check=True)
        link.append(archive)
    link += ["-Wl,--wrap=%s" % name for name in compat]
    print("\n".join(link))
    return 0


if __name__ == "__main__":
    sys.exit(main())
