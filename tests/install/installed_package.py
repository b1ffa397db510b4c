#!/usr/bin/env python3
# treemask — the Python test suite against an installed wheel or sdist.
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""Installs a treemask wheel (or sdist) into a fresh virtual environment and
runs the Python test suite from a temporary directory against the installed
package, as a user's machine would have it.

usage: installed_package.py --venv DIR --dist FILE --results DIR [--no-compiler] [--ml] [--source-root DIR]

--no-compiler: the install runs with no compiler reachable: cc, c++, gcc,
  g++, clang, clang++ and nvcc on PATH are stand-ins that fail loudly, CC and
  CXX point at one, and /usr/local/cuda is off PATH; so a wheel that pip
  would build instead of install fails here.
--ml: after the suite ran without torch, installs pyproject.toml's ml group
  (torch, transformers, xgrammar, tiktoken) into the same venv and runs the
  suite again. uv installs them when it is found (next to this Python, as in
  ./dev's venv, or on PATH): its cache, filled by ./dev's own ml install,
  hard-links them in seconds where pip unpacks 4.8 GB again. treemask
  itself and the test group are always installed by pip, as a user would.
Exit 0 when every run passed; the junit XML of each run goes to --results."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMPILERS = ["cc", "c++", "gcc", "g++", "clang", "clang++", "clang-16", "clang++-16", "nvcc", "x86_64-linux-gnu-gcc",
             "x86_64-linux-gnu-g++", "gcc-12", "g++-12"]


def log(msg: str) -> None:
    print("[installed] %s" % msg, flush=True)


def run(cmd: list, env: dict, cwd: str | None = None, check: bool = True) -> int:
    log("$ " + " ".join(str(c) for c in cmd))
    start = time.monotonic()
    rc = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd).returncode
    log("exit %d after %.0fs" % (rc, time.monotonic() - start))
    if check and rc != 0:
        raise SystemExit(rc)
    return rc


def no_compiler_env(base: dict, shim_dir: Path) -> dict:
    shim_dir.mkdir(parents=True, exist_ok=True)
    for name in COMPILERS:
        shim = shim_dir / name
        shim.write_text("#!/bin/sh\necho \"installed_package.py: '%s' was run during a binary-only install\" >&2\n"
                        "exit 97\n" % name)
        shim.chmod(0o755)
    path = [str(shim_dir)] + [p for p in base.get("PATH", "").split(":") if p and "cuda" not in p]
    env = dict(base, PATH=":".join(path), CC=str(shim_dir / "cc"), CXX=str(shim_dir / "c++"))
    for name in ("cc", "c++", "nvcc"):
        found = shutil.which(name, path=env["PATH"])
        if found != str(shim_dir / name):
            raise SystemExit("the compiler stand-in for %s is not first on PATH (%s)" % (name, found))
    return env


def pytest_run(python: Path, tests: Path, results: Path, label: str, env: dict, source_root: Path) -> int:
    xml = results / ("pytest-%s.xml" % label)
    with tempfile.TemporaryDirectory(prefix="treemask-installed-") as tmp:
        # From a directory that holds no treemask: the import must find the
        # installed package (test_installed.py asserts where it came from).
        return run([python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--junitxml", xml,
                    "-o", "junit_suite_name=installed-%s" % label, tests], env=dict(
                        env, TREEMASK_SOURCE_ROOT=str(source_root), PYTHONDONTWRITEBYTECODE="1"), cwd=tmp,
                   check=False)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", required=True, type=Path)
    ap.add_argument("--dist", required=True, type=Path)
    ap.add_argument("--results", required=True, type=Path)
    ap.add_argument("--no-compiler", action="store_true")
    ap.add_argument("--ml", action="store_true")
    ap.add_argument("--source-root", type=Path, default=Path(__file__).resolve().parents[2])
    ap.add_argument("--label", default="wheel")
    args = ap.parse_args()
    root = args.source_root.resolve()
    args.results.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    if args.venv.exists():
        shutil.rmtree(args.venv)
    run([sys.executable, "-m", "venv", args.venv], env)
    python = args.venv / "bin" / "python"
    env["PATH"] = "%s:%s" % (args.venv / "bin", env.get("PATH", ""))
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run([*pip, "--upgrade", "pip>=25.1"], env)
    install_env = no_compiler_env(env, args.venv / "no-compiler") if args.no_compiler else env
    only_binary = ["--only-binary=:all:"] if args.no_compiler else []
    run(pip + only_binary + [args.dist.resolve()], install_env)
    run(pip + only_binary + ["--group", "%s:test" % (root / "pyproject.toml")], install_env)
    # The command line entry point works without the source tree, and the
    # install put the console script `treemask` on the venv's PATH: every
    # command of the native program and the two Python ones.
    with tempfile.TemporaryDirectory() as tmp:
        run([python, "-m", "treemask", "--help"], env, cwd=tmp)
        script = args.venv / "bin" / "treemask"
        helped = subprocess.run([str(script), "--help"], env=env, cwd=tmp, capture_output=True, text=True)
        missing = [c for c in ("compile ", "inspect ", "paths ", "check ", "version ", "compile-labels ",
                               "compile-strings ") if "\n  " + c not in helped.stdout]
        if helped.returncode != 0 or missing:
            log("`treemask --help` (the console script): exit %d, commands missing: %s\n%s%s"
                % (helped.returncode, missing, helped.stdout, helped.stderr))
            raise SystemExit(1)
        run([script, "version"], env, cwd=tmp)
        run([python, "-c", "import treemask, sys; print('treemask', treemask.__version__, 'from', treemask.__file__,"
             " '| cuda_available:', treemask.cuda_available(), '|', treemask.cuda_unavailable_reason())"], env, cwd=tmp)
    tests = root / "tests" / "python"
    failed = 0
    if pytest_run(python, tests, args.results, args.label + "-no-torch", env, root) != 0:
        failed += 1
    if args.ml:
        group = ["--group", "%s:ml" % (root / "pyproject.toml")]
        uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
        if uv:
            run([uv, "pip", "install", "-q", "--compile-bytecode", "--python", python,
                 *(["--only-binary", ":all:"] if only_binary else []), *group], install_env)
        else:
            run(pip + only_binary + group, install_env)
        if pytest_run(python, tests, args.results, args.label + "-ml", env, root) != 0:
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
