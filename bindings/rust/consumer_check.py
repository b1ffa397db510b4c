#!/usr/bin/env python3
"""Builds bindings/rust/consumer-check (a crate depending on `treemask` with
the build.rs of bindings/rust/treemask/README.md) and runs its binary with LD_LIBRARY_PATH removed: it
must find libtreemask through the rpath (issue 14 item 18).

usage: consumer_check.py CARGO MANIFEST

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import subprocess
import sys


def main(cargo, manifest):
    env = dict(os.environ)
    subprocess.run([cargo, "build", "--offline", "--locked", "--manifest-path", manifest], env=env, check=True)
    binary = os.path.join(env["CARGO_TARGET_DIR"], "debug", "treemask-consumer-check")
    env.pop("LD_LIBRARY_PATH", None)
    p = subprocess.run([binary], env=env, capture_output=True, text=True)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if p.returncode != 0 or p.stdout.strip() != "nodes 3":
        print("the consumer binary did not run without LD_LIBRARY_PATH (rc %d)" % p.returncode, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
