#!/usr/bin/env bash
# The llama.cpp integration, tested against the real llama.cpp:
#   1. download the llama-cpp-python 0.3.36 sdist (it vendors llama.cpp, its
#      headers, convert_hf_to_gguf.py and gguf-py);
#   2. build llama.cpp from it with cmake as shared libraries (portable:
#      -DGGML_NATIVE=OFF; no tools, tests, server or examples; -O1 for the
#      tests, -O3 in a build of its own for --bench);
#   3. make a tiny random-weight Qwen2 (vocabulary 151,936, hidden 64,
#      2 layers) with transformers and the Qwen2.5 tokenizer from ../shared
#      (or a toy tokenizer trained on the bundled IAB labels where ../shared
#      is absent) and convert it with convert_hf_to_gguf.py (f32; with the
#      gguf-py 0.19.0 vendored beside it: PyPI's gguf 0.19.0 is older code);
#   4. compile bindings/llama.cpp/treemask_llama.c with the C test and the
#      complete program of bindings/llama.cpp/README.md, and run them;
#   5. run treemask.llama_cpp inside llama-cpp-python: its Python package
#      from the same sdist, loading the libllama built in step 2
#      (LLAMA_CPP_LIB_PATH), so llama.cpp is compiled once.
# Everything is cached under build-llama/ (stamps make each step run once).
#
# usage: tests/llama_cpp/run.sh [--bench | --prepare] [BUILD_DIR]
#   BUILD_DIR: the meson build directory with libtreemask (default build/;
#   ./dev build makes it). --bench runs the sampler benchmark instead of the
#   tests. --prepare does steps 1 and 2 only (./dev test runs it in the
#   background, with the sanitizer builds; a lock makes a run that starts
#   meanwhile wait for it, then find llama.cpp built). Exits 77 (skip) only
#   when something cannot be installed (no network to PyPI, no cmake and no
#   root to install it, no disk), saying why.
#   TREEMASK_LLAMA_RUNS sets the generations per chain (default 200).
#
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH=0 PREPARE=0
if [ "${1:-}" = "--bench" ]; then BENCH=1; shift; fi
if [ "${1:-}" = "--prepare" ]; then PREPARE=1; shift; fi
BUILD="$(cd "${1:-$ROOT/build}" 2>/dev/null && pwd || echo "${1:-$ROOT/build}")"
CACHE="$ROOT/build-llama"
PIN="0.3.36"
SDIST="$CACHE/dl/llama_cpp_python-$PIN.tar.gz"
SRC="$CACHE/llama_cpp_python-$PIN"
LLAMA="$SRC/vendor/llama.cpp"
# The tests' llama.cpp at -O1 (their model is tiny, and -O3 costs ~45% more
# compile time: ops.cpp 15.9 vs 8.4 s); the benchmark's at -O3 (Release), in
# a build of its own, so its decode time is what users get.
if [ "$BENCH" = 1 ]; then
  CMAKE_BUILD="$CACHE/cmake-release" OPT_FLAGS=()
else
  CMAKE_BUILD="$CACHE/cmake" OPT_FLAGS=(-DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG")
fi
LIBDIR="$CMAKE_BUILD/bin"
MODEL_DIR="$CACHE/model"
PYDEPS="$CACHE/pydeps"
OUT="$CACHE/out"
# As ./dev pins them (setup_python_ml_deps, setup_python): only for a venv of our own.
VENV_PINS=("torch==2.15.0" "transformers==5.23.0" "numpy==2.4.6" "cffi==2.1.1" "pytest==8.3.3")
# diskcache: llama-cpp-python; sentencepiece: convert_hf_to_gguf.py imports it for
# every Qwen2 (then falls back to tokenizer.json). The rest comes with transformers.
PY_PINS=("diskcache==5.6.3" "sentencepiece==0.2.1")

log() { printf '[llama.cpp] %s\n' "$*"; }
skip() { printf '[llama.cpp] SKIP: %s\n' "$*"; exit 77; }
die() { printf '[llama.cpp] error: %s\n' "$*" >&2; exit 1; }
t0=$(date +%s)
step_start=$t0
TIMES=()
step() { step_start=$(date +%s); log "== $1"; step_name="$1"; }
step_done() { TIMES+=("$(printf '%-50s %4ds' "$step_name" "$(( $(date +%s) - step_start ))")"); }
print_times() {
  log "step times:"
  for t in "${TIMES[@]}"; do printf '    %s\n' "$t"; done
  printf '    %-50s %4ds\n' total "$(( $(date +%s) - t0 ))"
}

LIBTREEMASK_DIR="$BUILD/src"
[ "$PREPARE" = 1 ] || [ -e "$LIBTREEMASK_DIR/libtreemask.so" ] ||
  die "no $LIBTREEMASK_DIR/libtreemask.so: run ./dev build first"
mkdir -p "$CACHE/dl" "$OUT"
# Steps 1 and 2 one run at a time (a --prepare in the background).
exec 9>"$CACHE/.prepare.lock"
flock 9

# ---- 1. the sdist ------------------------------------------------------------
step "download llama-cpp-python $PIN sdist"
if [ ! -f "$SDIST" ]; then
  PY_DL="${PYTHON:-python3}"
  [ -x "$ROOT/.venv/bin/python" ] && PY_DL="$ROOT/.venv/bin/python"
  # pip prepares the sdist's metadata in an isolated build env (scikit-build-core):
  # most of this step's time.
  "$PY_DL" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "llama-cpp-python==$PIN" -d "$CACHE/dl.tmp" ||
    skip "cannot download llama-cpp-python==$PIN from PyPI (no network?)"
  mv "$CACHE/dl.tmp/llama_cpp_python-$PIN.tar.gz" "$SDIST"
  rm -rf "$CACHE/dl.tmp"
fi
if [ ! -f "$SRC/.extracted" ]; then
  rm -rf "$SRC"
  tar -xzf "$SDIST" -C "$CACHE"
  touch "$SRC/.extracted"
fi
step_done

# ---- 2. llama.cpp ------------------------------------------------------------
step "build llama.cpp (shared, GGML_NATIVE=OFF)"
if ! command -v cmake >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    log "installing cmake (Debian)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cmake >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cmake >/dev/null 2>&1; } ||
      skip "cmake is missing and apt-get could not install it"
  else
    skip "cmake is missing and this is not root: apt-get install cmake"
  fi
fi
CMAKE_FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF
  -DGGML_OPENMP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF
  -DLLAMA_CURL=OFF "${OPT_FLAGS[@]}")
stamp_want="$PIN ${CMAKE_FLAGS[*]}"
if [ "$(cat "$CMAKE_BUILD/.treemask-stamp" 2>/dev/null)" != "$stamp_want" ] || [ ! -e "$LIBDIR/libllama.so" ]; then
  command -v ninja >/dev/null 2>&1 || PATH="$ROOT/.venv/bin:$PATH"
  cmake -S "$LLAMA" -B "$CMAKE_BUILD" "${CMAKE_FLAGS[@]}" > "$CACHE/cmake-config.log" 2>&1 ||
    { tail -n 30 "$CACHE/cmake-config.log"; die "cmake configure failed (log: $CACHE/cmake-config.log)"; }
  ninja -C "$CMAKE_BUILD" -j "$(nproc)" llama > "$CACHE/cmake-build.log" 2>&1 ||
    { tail -n 30 "$CACHE/cmake-build.log"; die "llama.cpp build failed (log: $CACHE/cmake-build.log)"; }
  echo "$stamp_want" > "$CMAKE_BUILD/.treemask-stamp"
fi
step_done
flock -u 9
if [ "$PREPARE" = 1 ]; then
  print_times
  exit 0
fi

# ---- compile the C programs ----------------------------------------------------
step "compile the sampler, test, example and benchmark"
CC="${CC:-cc}"
CFLAGS=(-std=c11 -O2 -Wall -Wextra -Werror -I "$ROOT/include" -I "$ROOT/bindings/llama.cpp"
  -I "$LLAMA/include" -I "$LLAMA/ggml/include")
LDFLAGS=(-L "$LIBTREEMASK_DIR" -ltreemask -L "$LIBDIR" -lllama -lggml -lggml-base -lm
  "-Wl,-rpath,$LIBTREEMASK_DIR:$LIBDIR")
SAMPLER="$ROOT/bindings/llama.cpp/treemask_llama.c"
"$CC" "${CFLAGS[@]}" "$SAMPLER" "$ROOT/tests/llama_cpp/test_llama_sampler.c" -o "$OUT/test_llama_sampler" "${LDFLAGS[@]}"
"$CC" "${CFLAGS[@]}" "$SAMPLER" "$ROOT/tests/llama_cpp/bench_llama_sampler.c" -o "$OUT/bench_llama_sampler" "${LDFLAGS[@]}"
# The llama.cpp README's complete program, verbatim: the first ```c block of
# bindings/llama.cpp/README.md.
LLAMA_README="$ROOT/bindings/llama.cpp/README.md"
awk '/^```c$/ { in_code = 1; next }
     in_code && /^```$/ { exit }
     in_code { print }' "$LLAMA_README" > "$OUT/readme_llama.c"
[ -s "$OUT/readme_llama.c" ] || die "$LLAMA_README has no \`\`\`c block"
"$CC" "${CFLAGS[@]}" "$SAMPLER" "$OUT/readme_llama.c" -o "$OUT/readme_llama" "${LDFLAGS[@]}"
step_done

if [ "$BENCH" = 1 ]; then
  step "benchmark"
  "$OUT/bench_llama_sampler"
  step_done
  print_times
  exit 0
fi

step "sampler tests without a model"
"$OUT/test_llama_sampler"
step_done

# ---- 3. the tiny model ---------------------------------------------------------
step "python: torch, transformers, diskcache"
PY="$ROOT/.venv/bin/python"
has_torch() {  # without importing them (seconds each)
  "$1" -c "import importlib.util as u, sys; sys.exit(not (u.find_spec('torch') and u.find_spec('transformers')))" \
    >/dev/null 2>&1
}
if ! [ -x "$PY" ] || ! has_torch "$PY"; then
  # The main venv lacks them (./dev test installs them first): a venv of our own.
  PY="$CACHE/venv/bin/python"
  [ -x "$PY" ] || python3 -m venv "$CACHE/venv" || skip "cannot create a Python venv"
  if ! has_torch "$PY"; then
    free_gb=$(df -P -BG "$CACHE" | awk 'NR == 2 { sub("G", "", $4); print $4 }')
    [ "${free_gb:-0}" -ge 10 ] || skip "${free_gb} GB free; torch needs ~10 GB"
    "$PY" -m pip install -q --disable-pip-version-check "${VENV_PINS[@]}" ||
      skip "cannot install ${VENV_PINS[*]} from PyPI"
  fi
fi
if [ "$(cat "$PYDEPS/.treemask-stamp" 2>/dev/null)" != "${PY_PINS[*]}" ]; then
  rm -rf "$PYDEPS"
  # Only these, into a folder of their own: the main venv stays as ./dev pins it.
  "$PY" -m pip install -q --disable-pip-version-check --no-deps --target "$PYDEPS" "${PY_PINS[@]}" ||
    skip "cannot install ${PY_PINS[*]} from PyPI"
  echo "${PY_PINS[*]}" > "$PYDEPS/.treemask-stamp"
fi
step_done

step "tiny Qwen2 model -> GGUF"
TOKENIZER="$ROOT/../shared/data/tokenizers/qwen2.5-instruct"
[ -f "$TOKENIZER/tokenizer.json" ] || { log "no $TOKENIZER: using the toy tokenizer"; TOKENIZER=""; }
model_want="$(cat "$ROOT/tests/llama_cpp/make_model.py" "$ROOT/tests/llama_cpp/convert.py" | sha256sum | cut -c1-16) ${TOKENIZER:-toy}"
if [ "$(cat "$MODEL_DIR/.treemask-stamp" 2>/dev/null)" != "$model_want" ] || [ ! -f "$MODEL_DIR/model.gguf" ]; then
  rm -rf "$MODEL_DIR"
  PYTHONPATH="$PYDEPS" "$PY" "$ROOT/tests/llama_cpp/make_model.py" "$MODEL_DIR/hf" "$ROOT" "$TOKENIZER"
  PYTHONPATH="$PYDEPS" "$PY" "$ROOT/tests/llama_cpp/convert.py" "$LLAMA" "$MODEL_DIR/hf" "$MODEL_DIR/model.gguf" \
    > "$CACHE/convert.log" 2>&1 || { tail -n 30 "$CACHE/convert.log"; die "convert_hf_to_gguf.py failed"; }
  cp "$MODEL_DIR/hf/labels.txt" "$MODEL_DIR/labels.txt"
  echo "$model_want" > "$MODEL_DIR/.treemask-stamp"
fi
log "model: $(du -h "$MODEL_DIR/model.gguf" | cut -f1) $MODEL_DIR/model.gguf"
step_done

# ---- 4. C: generation through llama.cpp ------------------------------------------
step "C sampler inside llama.cpp"
"$OUT/test_llama_sampler" "$MODEL_DIR/model.gguf" "$MODEL_DIR/labels.txt" "$OUT/labels.tmtrie"
step_done

step "bindings/llama.cpp/README.md program"
readme_out=$("$OUT/readme_llama" "$MODEL_DIR/model.gguf" "$OUT/labels.tmtrie" "Topic of: sourdough bread recipes." \
  2> "$OUT/readme_llama.log") || { tail -n 30 "$OUT/readme_llama.log"; die "the llama.cpp README's program failed (log: $OUT/readme_llama.log)"; }
printf '%s\n' "$readme_out"
label=$(printf '%s\n' "$readme_out" | sed -n 's/^label: //p')
grep -qxF -- "$label" "$MODEL_DIR/labels.txt" ||
  die "the llama.cpp README's program printed '$label', which is not one of the labels"
step_done

# ---- 5. Python: llama-cpp-python ---------------------------------------------------
step "treemask.llama_cpp inside llama-cpp-python"
TREEMASK_PY="$BUILD/bindings/python"
[ -f "$TREEMASK_PY/treemask/__init__.py" ] || die "no Python package in $TREEMASK_PY: run ./dev build first"
PYTHONPATH="$TREEMASK_PY:$SRC:$PYDEPS" LLAMA_CPP_LIB_PATH="$LIBDIR" \
  TREEMASK_LLAMA_MODEL="$MODEL_DIR/model.gguf" TREEMASK_LLAMA_LABELS="$MODEL_DIR/labels.txt" \
  "$PY" -m pytest -q -p no:cacheprovider "$ROOT/tests/llama_cpp/test_llama_cpp_python.py"
step_done

print_times
