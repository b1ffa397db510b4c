#!/usr/bin/env python3
"""Writes build-gpu/: what a GPU machine needs to run every GPU test and
benchmark of this checkout with one command, `bash build-gpu/run.sh` from the
repository root. That machine has CUDA, Python and torch, but none of our
packages and no network; it gets the working tree and build-gpu/ (at most 64
MiB). `./dev gpu-bundle` runs this after building.

build-gpu/
  run.sh        tests/cuda/gpu_run.sh
  lib/          libtreemask (CUDA for the build's gpu_archs, PTX of the last;
                the kernels' line tables, no host debug information)
                and the one library it needs beyond glibc / libstdc++
                (Debian's simdjson)
  bin/          the CUDA test programs and benchmarks (plain programs)
  wheels/       the treemask wheel of this checkout (dist/, ./dev wheel: what
                users install) and cffi for CPython 3.10-3.13 (its one
                dependency beyond numpy); run.sh installs both offline into
                build-gpu/site, next to the machine's own torch
  data/         the GeoNames names tokenized for Qwen2.5, for the processor
                benchmark (when ../shared and transformers are here)
  MANIFEST.txt  the commit, the build's options, the files and their sizes

usage: gpu_bundle.py SOURCE_ROOT BUILD_DIR [OUT_DIR]   (the wheel: SOURCE_ROOT/dist/treemask-*.whl)

Downloads (the cffi wheels) and the tokenized data are cached in
BUILD_DIR/gpu-bundle-cache, so a second run needs no network.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import pathlib
import shutil
import subprocess
import sys

LIMIT_BYTES = 64 << 20
PROGRAMS = ["test_cuda_apply", "test_cuda_trie", "test_cuda_beam", "bench_cuda", "bench_cuda_beam"]
PYTHON_VERSIONS = ["3.10", "3.11", "3.12", "3.13"]


def fail(message):
    sys.exit("gpu-bundle: " + message)


def run(cmd, **kwargs):
    return subprocess.run(cmd, check=False, capture_output=True, text=True, **kwargs)


def needed_libraries(binary):
    """Shared libraries ldd resolves for binary outside the system's
    standard set (glibc, libstdc++, libgcc) and libtreemask itself."""
    out = run(["ldd", str(binary)]).stdout
    keep = []
    for line in out.splitlines():
        parts = line.split("=>")
        if len(parts) != 2 or not parts[1].strip().startswith("/"):
            continue
        name, path = parts[0].strip(), parts[1].split()[0]
        if name.startswith(("libc.", "libm.", "libstdc++", "libgcc_s", "ld-linux", "libpthread", "libdl", "librt",
                            "libtreemask")):
            continue
        keep.append(pathlib.Path(path))
    return keep


def cffi_wheels(cache, python):
    """The cached cffi wheels for PYTHON_VERSIONS (downloaded on first use)."""
    version = run([python, "-c", "import cffi; print(cffi.__version__)"]).stdout.strip()
    if not version:
        fail("cffi is not installed in %s (./dev setup installs it)" % python)
    folder = cache / ("cffi-" + version)
    stamp = folder / ".complete"
    if stamp.is_file():
        return sorted(folder.glob("*.whl"))
    folder.mkdir(parents=True, exist_ok=True)
    for v in PYTHON_VERSIONS:
        r = run([python, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                 "--only-binary=:all:", "--python-version", v, "--platform", "manylinux2014_x86_64", "-d",
                 str(folder), "cffi==" + version])
        if r.returncode != 0:
            print("gpu-bundle: warning: no cffi %s wheel for Python %s (offline?): a GPU machine with that Python"
                  " needs cffi installed" % (version, v), file=sys.stderr)
            return sorted(folder.glob("*.whl"))
    stamp.touch()
    return sorted(folder.glob("*.whl"))


def geonames_trie(source_root, cache, build, python):
    """The cached .tmtrie of the GeoNames names tokenized for Qwen2.5, or
    None (with a note) where ../shared or transformers is missing."""
    out = cache / "geonames-qwen2.5.tmtrie"
    if out.is_file():
        return out
    shared = source_root.parent / "shared" / "data"
    names = shared / "labels" / "geonames-cities1000.tsv"
    tokenizer = shared / "tokenizers" / "qwen2.5-instruct" / "tokenizer.json"
    if not names.is_file() or not tokenizer.is_file():
        print("gpu-bundle: note: %s is absent: the processor benchmark will use random names" % shared,
              file=sys.stderr)
        return None
    script = """
import sys, treemask, transformers
tok = transformers.PreTrainedTokenizerFast(tokenizer_file=sys.argv[2])
names = sorted({line.split("\\t")[0] for line in open(sys.argv[1], encoding="utf-8") if line.strip()})
trie = treemask.Trie.from_labels(names, tok, 151936, [151645])
trie.save(sys.argv[3], metadata={"source": "GeoNames cities1000 names (CC BY 4.0), Qwen2.5 tokenizer"})
print(len(names))
"""
    env = dict(os.environ, PYTHONPATH=str(build / "bindings" / "python"))  # the tree build: same library
    r = run([python, "-c", script, str(names), str(tokenizer), str(out)], env=env)
    if r.returncode != 0:
        print("gpu-bundle: note: could not tokenize the GeoNames names (%s): the processor benchmark will use"
              " random names" % r.stderr.strip().splitlines()[-1:], file=sys.stderr)
        return None
    return out


def main(argv):
    if len(argv) not in (3, 4):
        sys.exit(__doc__)
    source_root = pathlib.Path(argv[1]).resolve()
    build = pathlib.Path(argv[2]).resolve()
    out = pathlib.Path(argv[3]).resolve() if len(argv) == 4 else source_root / "build-gpu"
    python = sys.executable
    config = (build / "treemask_config.h").read_text() if (build / "treemask_config.h").is_file() else ""
    if "TREEMASK_HAVE_CUDA 1" not in config:
        print("gpu-bundle: %s was built without CUDA (no nvcc?): nothing to bundle" % build)
        return 77
    wheels = sorted((source_root / "dist").glob("treemask-*.whl"))
    if len(wheels) != 1:
        fail("want exactly one wheel in %s, found %s: run ./dev wheel" % (source_root / "dist",
                                                                         [w.name for w in wheels]))
    missing = [p for p in PROGRAMS if not (build / "tests" / "cuda" / p).is_file()]
    if missing:
        fail("not built: %s (configure with -Dtests=enabled and build)" % ", ".join(missing))
    cache = build / "gpu-bundle-cache"
    cache.mkdir(exist_ok=True)

    if out.exists():
        shutil.rmtree(out)
    for sub in ("lib", "bin", "wheels", "data"):
        (out / sub).mkdir(parents=True)
    shutil.copy2(source_root / "tests" / "cuda" / "gpu_run.sh", out / "run.sh")
    os.chmod(out / "run.sh", 0o755)
    library = (build / "src" / "libtreemask.so").resolve()
    soname = run(["objdump", "-p", str(library)]).stdout.split("SONAME")[-1].split()[0]
    shutil.copy2(library, out / "lib" / soname)
    # The host code's DWARF (two thirds of the file) stays behind; symbols
    # and the kernels' own line tables (-Dgpu_lineinfo, in .nv_fatbin) stay.
    r = run(["strip", "--strip-debug", str(out / "lib" / soname)])
    if r.returncode != 0:
        print("gpu-bundle: note: strip --strip-debug failed (%s): the library goes as built"
              % r.stderr.strip()[:200], file=sys.stderr)
    os.symlink(soname, out / "lib" / "libtreemask.so")
    for lib in needed_libraries(library):
        shutil.copy2(lib, out / "lib" / lib.name)
    for program in PROGRAMS:
        shutil.copy2(build / "tests" / "cuda" / program, out / "bin" / program)
    shutil.copy2(wheels[0], out / "wheels" / wheels[0].name)
    for wheel in cffi_wheels(cache, python):
        shutil.copy2(wheel, out / "wheels" / wheel.name)
    trie = geonames_trie(source_root, cache, build, python)
    if trie is not None:
        shutil.copy2(trie, out / "data" / trie.name)

    files = sorted(p for p in out.rglob("*") if p.is_file() and not p.is_symlink())
    total = sum(p.stat().st_size for p in files)
    commit = run(["git", "-C", str(source_root), "describe", "--always", "--dirty"]).stdout.strip()
    options = run(["meson", "introspect", "--buildoptions", str(build)]).stdout
    archs = "?"
    try:
        import json

        archs = ",".join(next(o["value"] for o in json.loads(options) if o["name"] == "gpu_archs"))
    except (ValueError, StopIteration, KeyError):
        pass
    lines = ["treemask GPU bundle", "commit: %s" % (commit or "?"),
             "gpu_archs: %s (SASS each, PTX of the last)" % archs, "wheel: %s" % wheels[0].name,
             "total: %.1f MiB" % (total / (1 << 20)), ""]
    lines += ["%10d %s" % (p.stat().st_size, p.relative_to(out)) for p in files]
    (out / "MANIFEST.txt").write_text("\n".join(lines) + "\n")
    print("gpu-bundle: wrote %s: %.1f MiB (limit %d MiB), commit %s, gpu_archs %s"
          % (out, total / (1 << 20), LIMIT_BYTES >> 20, commit or "?", archs))
    if total > LIMIT_BYTES:
        fail("the bundle is %.1f MiB, over the %d MiB a GPU session can carry" % (total / (1 << 20),
                                                                                LIMIT_BYTES >> 20))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
