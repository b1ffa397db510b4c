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

usage: bundled_check.py CARGO RUST_DIR TARGET_DIR"""
import os
import re
import subprocess
import sys
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

# 2. cargo test with nothing installed.
test = subprocess.run([cargo, "test", "--offline", "--locked",
                       "--manifest-path", str(rust_dir / "treemask" / "Cargo.toml")], env=env)
if test.returncode != 0:
    failures.append("cargo test (bundled) failed: exit %d" % test.returncode)
else:
    programs = [p for p in (target / "debug" / "deps").iterdir()
                if p.is_file() and os.access(p, os.X_OK) and re.match(r"(api|walks|formats)-[0-9a-f]+$", p.name)]
    if not programs:
        failures.append("no test program found under %s" % (target / "debug" / "deps"))
    for p in programs:
        needed = subprocess.run(["readelf", "-d", str(p)], capture_output=True, text=True).stdout
        if "libtreemask" in needed:
            failures.append("%s needs libtreemask.so: it did not link the bundled library" % p.name)
    print("test programs linked statically: %s" % ", ".join(sorted(p.name for p in programs)))
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
