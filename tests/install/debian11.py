#!/usr/bin/env python3
# treemask — the wheel under Debian 11's glibc 2.31 and Python 3.9, run by their own loader.
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""Runs the wheel on the oldest glibc Debian's archive still serves, as the
loader of that system runs it, not as a symbol-version list predicts:

- Debian 11 (bullseye) packages, libc6 2.31, libgcc-s1, python3.9-minimal and
  libpython3.9-stdlib with everything they depend on, downloaded by apt with
  a private state (sources: this machine's Debian sources with its release's
  name replaced by bullseye; the system's apt state is not touched) and
  unpacked with dpkg-deb -x; cffi and numpy for CPython 3.9 (pyproject.toml's
  dependencies) from PyPI as wheels. All cached under --cache: a rerun
  downloads nothing.
- bullseye's ld-linux-x86-64.so.2 (--library-path to its libraries) traces
  the wheel's libtreemask.so with every symbol bound (LD_BIND_NOW, as ldd -r
  does): no library missing, no undefined symbol;
- bullseye's Python 3.9, run by that loader, loads libtreemask.so with
  RTLD_NOW, imports treemask from the unpacked wheel and runs
  glibc_workload.py, whose results must equal those of the same workload run
  by this machine's Python against the same wheel.

usage: debian11.py --cache DIR [--junit FILE] WHEEL
Prints one line per check and "N passed, N failed"; exit 1 on any failure."""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from check_wheel import finish  # noqa: E402

SUITE = "bullseye"
PACKAGES = ["libc6", "libgcc-s1", "python3.9-minimal", "libpython3.9-stdlib"]
PYTHON = "3.9"


def sh(cmd: list, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def must(cmd: list, what: str, **kw) -> subprocess.CompletedProcess:
    r = sh(cmd, **kw)
    if r.returncode != 0:
        raise SystemExit("%s failed (exit %d): %s\n%s" % (what, r.returncode, " ".join(map(str, cmd)),
                                                          (r.stdout + r.stderr)[-4000:]))
    return r


def bullseye_sources(apt: Path) -> None:
    """This machine's Debian sources for its own release (deb822 .sources or
    one-line .list entries whose suites all start with its codename), with
    the codename replaced by bullseye, into APT/sources.list.d."""
    codename = ""
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            codename = line.split("=", 1)[1].strip().strip('"')
    if not codename:
        raise SystemExit("/etc/os-release names no VERSION_CODENAME: cannot derive Debian 11's sources")
    parts = apt / "sources.list.d"
    parts.mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text("")
    n = 0
    for f in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        stanzas = []
        for stanza in re.split(r"\n\s*\n", Path(f).read_text()):
            suites = re.search(r"(?m)^Suites:\s*(.+)$", stanza)
            if suites and all(s.startswith(codename) for s in suites.group(1).split()):
                stanzas.append(re.sub(r"(?m)^(Suites:.*)$", lambda m: m.group(1).replace(codename, SUITE), stanza))
        if stanzas:
            (parts / os.path.basename(f)).write_text("\n\n".join(stanzas) + "\n")
            n += len(stanzas)
    lines = []
    for f in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
        for line in Path(f).read_text().splitlines() if os.path.isfile(f) else []:
            m = re.match(r"^deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.+)$", line)
            if m and m.group(3).startswith(codename):
                lines.append(line.replace(" " + m.group(3) + " ", " " + m.group(3).replace(codename, SUITE) + " "))
    (apt / "sources.list").write_text("".join(line + "\n" for line in lines))
    if n + len(lines) == 0:
        raise SystemExit("this machine's apt sources name no suite of %s: cannot derive Debian 11's" % codename)


def sysroot(cache: Path) -> Path:
    """Debian 11's packages unpacked (once) into CACHE/sysroot."""
    root = cache / "sysroot"
    stamp = cache / "sysroot.stamp"
    if stamp.is_file() and stamp.read_text() == " ".join(PACKAGES) and root.is_dir():
        return root
    apt = cache / "apt"
    debs = apt / "archives"
    for d in (apt / "state" / "lists" / "partial", apt / "cache", debs / "partial"):
        d.mkdir(parents=True, exist_ok=True)
    (apt / "status").write_text("")  # nothing installed: apt downloads the whole closure
    bullseye_sources(apt)
    opts = []
    for k, v in [("Dir::Etc::SourceList", apt / "sources.list"), ("Dir::Etc::SourceParts", apt / "sources.list.d"),
                 ("Dir::Etc::Preferences", "/dev/null"), ("Dir::Etc::PreferencesParts", apt / "sources.list.d"),
                 ("Dir::State", apt / "state"), ("Dir::State::status", apt / "status"), ("Dir::Cache", apt / "cache"),
                 ("Dir::Cache::archives", debs), ("APT::Architecture", "amd64"), ("APT::Architectures", "amd64"),
                 ("APT::Sandbox::User", "root"), ("Debug::NoLocking", "1")]:
        opts += ["-o", "%s=%s" % (k, v)]
    must(["apt-get", *opts, "update", "-qq"], "apt-get update (Debian 11 sources, private state)")
    must(["apt-get", *opts, "install", "-y", "-qq", "--download-only", "--no-install-recommends", *PACKAGES],
         "apt-get install --download-only (Debian 11)")
    tmp = cache / "sysroot.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for deb in sorted(debs.glob("*.deb")):
        must(["dpkg-deb", "-x", deb, tmp], "dpkg-deb -x %s" % deb.name)
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
    stamp.write_text(" ".join(PACKAGES))
    return root


def python_deps(cache: Path, root: Path) -> Path:
    """pyproject.toml's dependencies as CPython 3.9 wheels, unpacked (once)
    into CACHE/site-packages."""
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    site = cache / "site-packages"
    stamp = cache / "site-packages.stamp"
    if stamp.is_file() and stamp.read_text() == " ".join(deps) and site.is_dir():
        return site
    wheels = cache / "wheels"
    must([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--only-binary=:all:",
          "--python-version", PYTHON, "--implementation", "cp", "--platform", "manylinux2014_x86_64",
          "--platform", "manylinux_2_17_x86_64", "-d", wheels, *deps], "pip download (CPython %s)" % PYTHON)
    shutil.rmtree(site, ignore_errors=True)
    for w in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(w) as z:
            z.extractall(site)
    stamp.write_text(" ".join(deps))
    return site


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True, type=Path)
    ap.add_argument("--junit")
    ap.add_argument("wheel", type=Path)
    args = ap.parse_args()
    cache = args.cache.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    results: list[tuple[str, str | None]] = []

    def check(name: str, problem: str | None, detail: str = "") -> None:
        results.append((name, problem))
        print("%-4s %s%s" % ("ok" if problem is None else "FAIL", name,
                             (": " + problem) if problem else (" (" + detail + ")" if detail else "")), flush=True)

    root = sysroot(cache)
    site = python_deps(cache, HERE.parent.parent)
    # lib64/ld-linux-x86-64.so.2 links to an absolute path (this machine's
    # loader once unpacked elsewhere): the one beside libc.
    loader = root / "lib" / "x86_64-linux-gnu" / "ld-linux-x86-64.so.2"
    libc = sorted(root.glob("lib/x86_64-linux-gnu/libc-*.so"))
    check("Debian 11's loader and glibc 2.31 unpacked",
          None if loader.exists() and [p.name for p in libc] == ["libc-2.31.so"] else
          "found %s and %s" % (loader, [p.name for p in libc]), str(root))
    library_path = ":".join(str(root / d) for d in ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu"))
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

    with tempfile.TemporaryDirectory(prefix="treemask-debian11-") as tmp:
        with zipfile.ZipFile(args.wheel) as z:
            z.extractall(tmp)
            # The modes the wheel records, as pip applies them (extractall drops them).
            for info in z.infolist():
                if info.external_attr >> 16 & 0o111:
                    os.chmod(Path(tmp) / info.filename, info.external_attr >> 16 & 0o777)
        lib = Path(tmp) / "treemask" / "libtreemask.so"
        # ldd -r: the loader lists what it loads and every symbol it cannot bind.
        trace = sh([loader, "--library-path", library_path, lib],
                   env=dict(env, LD_TRACE_LOADED_OBJECTS="1", LD_WARN="yes", LD_BIND_NOW="yes"))
        out = trace.stdout + trace.stderr
        undefined = ["%s@%s" % m if m[1] else m[0]
                     for m in re.findall(r"undefined symbol: ([^,\s]+)(?:, version (\S+))?", out)]
        missing = re.findall(r"^\s*(\S+) => not found", out, re.M)
        loaded = re.findall(r"^\s*(\S+) => (\S+)", out, re.M)
        check("bullseye's ld.so, bind-now trace of libtreemask.so: every library found",
              None if trace.returncode == 0 and not missing else "not found: %s (exit %d)\n%s" % (
                  missing, trace.returncode, out[-2000:]),
              " ".join(n for n, p in loaded if p.startswith(str(root))))
        check("bullseye's ld.so, bind-now trace of libtreemask.so: no undefined symbol",
              "%d undefined, e.g. %s" % (len(undefined), undefined[:12]) if undefined else None)

        # The native program the console script runs, by the same loader.
        program = Path(tmp) / "treemask" / "_cli" / "treemask"
        ran = sh([loader, "--library-path", library_path, program, "version"], env=dict(env, LD_BIND_NOW="1"))
        check("bullseye's ld.so runs the treemask program (bind-now)",
              None if ran.returncode == 0 else "exit %d\n%s" % (ran.returncode, (ran.stdout + ran.stderr)[-2000:]),
              ran.stdout.strip())

        # Debian 11's Python 3.9, run by its own loader, imports the wheel.
        workload = HERE / "glibc_workload.py"
        old = sh([loader, "--library-path", library_path, root / "usr" / "bin" / "python3.9", "-s", workload],
                 env=dict(env, LD_BIND_NOW="1", PYTHONHOME=str(root / "usr"), PYTHONNOUSERSITE="1",
                          PYTHONDONTWRITEBYTECODE="1", PYTHONPATH="%s:%s" % (tmp, site)))
        here = sh([sys.executable, "-s", workload],
                  env=dict(env, LD_BIND_NOW="1", PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=tmp))
        runs = {}
        for label, r in (("Debian 11", old), ("this machine", here)):
            try:
                runs[label] = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None
            except (ValueError, IndexError):
                runs[label] = None
            ran = runs[label]
            check("%s's Python imports treemask from the wheel and runs the workload" % label,
                  None if ran else "exit %d\n%s" % (r.returncode, (r.stdout + r.stderr)[-3000:]),
                  "glibc %s, Python %s, numpy %s" % (ran["env"]["glibc"], ran["env"]["python"], ran["env"]["numpy"])
                  if ran else "")
        old_run, here_run = runs["Debian 11"], runs["this machine"]
        if old_run:
            check("Debian 11's run: glibc 2.31, Python 3.9",
                  None if old_run["env"]["glibc"] == "2.31" and old_run["env"]["python"].startswith("3.9.") else
                  "ran on glibc %s, Python %s" % (old_run["env"]["glibc"], old_run["env"]["python"]))
        if old_run and here_run:
            diff = sorted(k for k in set(old_run["results"]) | set(here_run["results"])
                          if old_run["results"].get(k) != here_run["results"].get(k))
            check("the workload's results under glibc 2.31 equal this machine's",
                  "differ in %s" % diff if diff else None, "%d results" % len(here_run["results"]))
    return finish(results, args.junit)


if __name__ == "__main__":
    sys.exit(main())
