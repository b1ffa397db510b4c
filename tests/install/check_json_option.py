#!/usr/bin/env python3
# treemask — a source build never leaves the JSON loaders out silently.
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""Configures this source tree where pkg-config finds no simdjson (an empty
PKG_CONFIG_LIBDIR): by default (json=enabled) meson must stop with an error
that names simdjson, the package to install and the option that builds
without the loaders; with -Djson=disabled it must configure, saying the
loaders are off. (Before, the default was auto: the library built without
them and a user found out at the first load.)

usage: check_json_option.py MESON SOURCE_ROOT"""
import os
import subprocess
import sys
import tempfile

meson, root = sys.argv[1], sys.argv[2]
light = ["-Dtests=disabled", "-Dpython=disabled", "-Drust=disabled", "-Dcuda=disabled", "-Dexamples=disabled"]
failures = []
with tempfile.TemporaryDirectory(prefix="treemask-json-") as tmp:
    env = dict(os.environ, PKG_CONFIG_LIBDIR=os.path.join(tmp, "no-pkgconfig"), PKG_CONFIG_PATH="")
    default = subprocess.run([meson, "setup", os.path.join(tmp, "default"), root, *light], env=env,
                             capture_output=True, text=True)
    said = default.stdout + default.stderr
    print("default options, no simdjson: exit %d" % default.returncode)
    if default.returncode == 0:
        failures.append("meson setup without simdjson succeeded: the JSON loaders would be left out silently")
    for want in ("simdjson was not found", "libsimdjson-dev", "-Djson=disabled"):
        if want not in said:
            failures.append("the error does not say %r:\n%s" % (want, said[-1500:]))
    off = subprocess.run([meson, "setup", os.path.join(tmp, "off"), root, *light, "-Djson=disabled"], env=env,
                         capture_output=True, text=True)
    print("-Djson=disabled, no simdjson: exit %d" % off.returncode)
    if off.returncode != 0 or "JSON loader (simdjson)         : NO" not in off.stdout:
        failures.append("-Djson=disabled did not configure without the loaders:\n%s"
                        % (off.stdout + off.stderr)[-1500:])
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
