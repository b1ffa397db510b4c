#!/usr/bin/env python3
# treemask — the Rust crates without an installed libtreemask.
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""treemask-sys's `bundled` feature (the default), as a user of the crates
gets it: `cargo test --offline` of the treemask crate with no libtreemask
anywhere the build or the loader looks (TREEMASK_LIB_DIR and
TREEMASK_MESON_BUILD_DIR empty, no pkg-config path to one, no
LD_LIBRARY_PATH), so build.rs compiles the core from the sources packaged in
treemask-sys; then checks that the test programs do not need libtreemask.so,
and that `cargo package --list` of treemask-sys carries those sources.

The compiler is given as a wrapper with leading arguments, as ccache is
(CXX="<a script that records each run> <the compiler>"): every compile must
go through it. Before that, a CXX naming no program must fail the build with
a message that names the program, the variable and the file it was compiling,
not one saying that libtreemask cannot be found.

usage: bundled_check.py CARGO RUST_DIR TARGET_DIR"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

cargo, rust_dir, target = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "TREEMASK_INCLUDE_DIR")}
env.update(TREEMASK_LIB_DIR="", TREEMASK_MESON_BUILD_DIR="", CARGO_TARGET_DIR=str(target), CARGO_TERM_COLOR="never")
failures = []

# 1. The packaged sources.
listing = subprocess.run([cargo, "package", "--offline", "--no-verify", "--list", "--allow-dirty",
                          "--manifest-path", str(rust_dir / "treemask-sys" / "Cargo.toml")],
                         capture_output=True, text=True, env=env)
files = listing.stdout.split()
print("cargo package --list (treemask-sys): %d files, %d C++ sources, %d headers"
      % (len(files), sum(f.endswith(".cc") for f in files), sum(f.endswith(".h") for f in files)))
if listing.returncode != 0:
    failures.append("cargo package --list failed: %s" % listing.stderr.strip()[-2000:])
for want in ("build.rs", "src/bindings.rs", "csrc/include/treemask/treemask.h", "csrc/include/treemask/treemask_cuda.h",
             "csrc/src/capi/capi.cc", "LICENSE"):
    if want not in files:
        failures.append("the package lacks %s" % want)
repo_sources = {str(p.relative_to(rust_dir.parent.parent)) for p in (rust_dir.parent.parent / "src").rglob("*.cc")
                if "cli" not in p.parts}
packaged = {f[len("csrc/"):] for f in files if f.startswith("csrc/src/") and f.endswith(".cc")}
if repo_sources - packaged:
    failures.append("the package lacks sources of src/: %s" % sorted(repo_sources - packaged)[:10])

# 2. A compiler that cannot be run: the error names it.
manifest = str(rust_dir / "treemask" / "Cargo.toml")
missing = "treemask-no-such-compiler"
broken = subprocess.run([cargo, "build", "--offline", "--locked", "--manifest-path", manifest],
                        env=dict(env, CXX="%s c++" % missing), capture_output=True, text=True)
said = broken.stdout + broken.stderr
print("CXX=\"%s c++\": exit %d" % (missing, broken.returncode))
for line in said.splitlines():
    if "cannot run the C++ compiler" in line or "command:" in line:
        print("  " + line.strip())
if broken.returncode == 0:
    failures.append("the build passed with CXX naming no program (%s)" % missing)
elif not re.search(r"cannot run the C\+\+ compiler `%s` \(CXX=\"%s c\+\+\"\) to compile \S+csrc/src/\S+\.cc"
                   % (missing, missing), said):
    failures.append("the error for CXX=\"%s c++\" does not name the program, CXX and the file:\n%s"
                    % (missing, said[-2000:]))
elif "cannot find libtreemask" in said:
    failures.append("the error for a compiler that cannot run says that libtreemask cannot be found")

# 3. cargo test with nothing installed, the compiler behind a wrapper.
tmp = tempfile.TemporaryDirectory(prefix="treemask-cxx-wrapper-")
log = Path(tmp.name) / "runs.log"
wrapper = Path(tmp.name) / "cxx-wrapper"
wrapper.write_text('#!/bin/sh\nprintf \'%%s\\n\' "$*" >> %s\nexec "$@"\n' % shlex.quote(str(log)))
wrapper.chmod(0o755)
compiler = os.environ.get("CXX", "").strip() or "c++"
test = subprocess.run([cargo, "test", "--offline", "--locked", "--manifest-path", manifest],
                      env=dict(env, CXX="%s %s" % (wrapper, compiler)))
runs = log.read_text().splitlines() if log.exists() else []
print("CXX=\"<wrapper> %s\": %d compiler runs through the wrapper" % (compiler, len(runs)))
if test.returncode == 0 and not [r for r in runs if r.startswith(compiler + " ") and "-std=c++20" in r]:
    failures.append("cargo test passed but no compile went through CXX's wrapper as `%s -std=c++20 ...`: %s"
                    % (compiler, runs[:3]))
if test.returncode != 0:
    failures.append("cargo test (bundled, CXX=\"<wrapper> %s\") failed: exit %d" % (compiler, test.returncode))
else:
    programs = [p for p in (target / "debug" / "deps").iterdir()
                if p.is_file() and os.access(p, os.X_OK) and re.match(r"(api|walks|formats)-[0-9a-f]+$", p.name)]
    if not programs:
        failures.append("no test program found under %s" % (target / "debug" / "deps"))
    # What a bundled program needs at run time, as the README says: glibc's
    # libraries, libgcc_s, and libsimdjson when the JSON loaders are in;
    # neither libtreemask nor the C++ runtime (linked statically).
    allowed = re.compile(r"^(libc|libm|libgcc_s|libpthread|libdl|librt|libsimdjson|ld-linux-x86-64)\.so")
    for p in programs:
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                            subprocess.run(["readelf", "-d", str(p)], capture_output=True, text=True).stdout)
        extra = [n for n in needed if not allowed.match(n)]
        if extra:
            failures.append("%s needs %s at run time (the README says: glibc, libgcc_s, libsimdjson)" % (p.name, extra))
        ldd = subprocess.run(["ldd", str(p)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
        if ldd.returncode != 0 or "not found" in ldd.stdout:
            failures.append("ldd %s: %s" % (p.name, (ldd.stdout + ldd.stderr).strip()[-1000:]))
    print("test programs linked statically (libtreemask, libstdc++): %s; they need %s"
          % (", ".join(sorted(p.name for p in programs)), " ".join(needed) if programs else "-"))
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
