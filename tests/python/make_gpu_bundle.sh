#!/usr/bin/env bash
# Packs what a GPU machine needs to run tests/python/test_cuda.py against this
# build: that machine has CUDA, Python and torch, but no network and none of
# our packages. Run here after ./dev build; carry build-gpu/ (a few MB) and
# run build-gpu/run_cuda_tests.sh from the repository root there.
#
#   tests/python/make_gpu_bundle.sh [BUILD_DIR]
#
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
OUT="$ROOT/build-gpu"
PACKAGE="$BUILD/bindings/python/treemask"
[ -f "$PACKAGE/_treemask_cffi.abi3.so" ] || { echo "no built package in $PACKAGE: run ./dev build" >&2; exit 2; }
grep -q "TREEMASK_HAVE_CUDA 1" "$BUILD/treemask_config.h" || echo "warning: $BUILD was built without CUDA" >&2

rm -rf "$OUT"
mkdir -p "$OUT/python/treemask" "$OUT/lib" "$OUT/wheels"
cp "$PACKAGE"/*.py "$PACKAGE"/py.typed "$PACKAGE"/*.so "$OUT/python/treemask/"
# libtreemask's only dependency outside glibc and libstdc++ (Debian's simdjson).
for lib in $(ldd "$PACKAGE/libtreemask.so" | awk '/simdjson/ { print $3 }'); do cp -L "$lib" "$OUT/lib/"; done
# _cffi_backend for whichever CPython the GPU machine has (the module itself is abi3).
CFFI_VERSION=$("$ROOT/.venv/bin/python" -c 'import cffi; print(cffi.__version__)')
for v in 3.10 3.11 3.12 3.13; do
  "$ROOT/.venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version "$v" --platform manylinux2014_x86_64 -d "$OUT/wheels" "cffi==$CFFI_VERSION" \
    || echo "warning: no cffi $CFFI_VERSION wheel for Python $v" >&2
done
cat > "$OUT/run_cuda_tests.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the Python CUDA tests with the bundled package (from the repository root).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"
PYPATH="$HERE/python"
if ! "$PY" -c 'import cffi' 2>/dev/null; then
  # _cffi_backend is all the compiled module needs (pycparser is for building).
  "$PY" -m pip install -q --no-index --no-deps --find-links "$HERE/wheels" --target "$HERE/site" cffi
  PYPATH="$PYPATH:$HERE/site"
fi
export PYTHONPATH="$PYPATH" LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$PY" -c 'import torch, treemask; print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
"| treemask", treemask.__version__, "cuda_available", treemask.cuda_available())'
if "$PY" -c 'import pytest' 2>/dev/null; then
  exec "$PY" -m pytest -q -rs -p no:cacheprovider tests/python/test_cuda.py "$@"
fi
exec "$PY" tests/python/test_cuda.py
RUN
chmod +x "$OUT/run_cuda_tests.sh"
du -sh "$OUT"
