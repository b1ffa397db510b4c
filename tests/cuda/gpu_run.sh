#!/usr/bin/env bash
# Every GPU test and benchmark of treemask, on a machine with an NVIDIA GPU,
# CUDA, Python and torch but none of our packages and no network. Written
# into build-gpu/run.sh by `./dev gpu-bundle`; run from the repository root:
#
#   bash build-gpu/run.sh
#
# Each part runs under its own timeout (and the whole under a budget of
# TREEMASK_GPU_BUDGET_S seconds, default 480), so a failing or hanging part
# costs only itself; its full output goes to build-gpu/logs/. The run ends
# with every target line the benchmarks printed (`TARGET name: figure
# (target ...): met | MISSED`) and one line `gpu: N passed, N failed`.
# Where $OUT is set (the device tool of our sessions), every log is also
# written to $OUT/treemask-gpu-logs.tar.gz, the Nsight Compute report of
# the beam step among them.
# Exit status: 0 all passed, 1 something failed, 77 no GPU here (saying why),
# 2 a usage error.
#
# TREEMASK_GPU_PARTS: a comma-separated list of part names or shell patterns,
# e.g. 'test_cuda_beam,bench_cuda_beam,sanitizer_*_beam,profile_beam': only
# those run, so that a rerun after a fix costs only their device time. A
# pattern that matches no part stops the run before anything starts.
#
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"
BUDGET="${TREEMASK_GPU_BUDGET_S:-480}"
START=$(date +%s)
LOGS="$HERE/logs"

[ -f tests/python/test_cuda.py ] && [ -f tests/bench/bench_cuda_python.py ] || {
  echo "run.sh: run it from the repository root (tests/python/test_cuda.py not found in $(pwd))" >&2
  exit 2
}

PART_NAMES=(test_cuda_apply test_cuda_trie test_cuda_beam python_test_cuda bench_cuda_beam
  bench_cuda_python bench_cuda sanitizer_racecheck_trie sanitizer_synccheck_trie
  sanitizer_memcheck_trie sanitizer_racecheck_beam sanitizer_synccheck_beam
  sanitizer_memcheck_beam profile_beam profile_processor)
IFS=, read -ra PATTERNS <<<"${TREEMASK_GPU_PARTS:-*}"
# wanted NAME: whether TREEMASK_GPU_PARTS selects the part NAME.
wanted() {
  local pattern
  for pattern in "${PATTERNS[@]}"; do
    # shellcheck disable=SC2053  # the pattern is a glob on purpose
    [[ "$1" == $pattern ]] && return 0
  done
  return 1
}
for pattern in "${PATTERNS[@]}"; do
  matched=0
  for name in "${PART_NAMES[@]}"; do
    # shellcheck disable=SC2053
    [[ "$name" == $pattern ]] && matched=1
  done
  if [ "$matched" = 0 ]; then
    echo "run.sh: TREEMASK_GPU_PARTS: '$pattern' matches no part (the parts: ${PART_NAMES[*]})" >&2
    exit 2
  fi
done

# No GPU: nothing here can run.
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "SKIP gpu: no NVIDIA GPU here (nvidia-smi is not installed)"
  exit 77
fi
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIP gpu: no NVIDIA GPU here (nvidia-smi -L lists none: $(nvidia-smi -L 2>&1 | head -1))"
  exit 77
fi

rm -rf "$LOGS"
mkdir -p "$LOGS"
export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TREEMASK_SOURCE_ROOT="$(pwd)" PYTHONDONTWRITEBYTECODE=1
# The wheel users install (build-gpu/wheels/treemask-*.whl), installed
# offline into build-gpu/site next to the machine's own torch and numpy, with
# cffi from build-gpu/wheels when the machine lacks it.
PYPATH="$HERE/site"
rm -rf "$HERE/site"
if ! "$PY" -m pip install -q --no-index --no-deps --target "$HERE/site" "$HERE"/wheels/treemask-*.whl \
    >"$LOGS/pip.log" 2>&1; then
  echo "run.sh: cannot install the treemask wheel for $("$PY" -V 2>&1): $(tail -3 "$LOGS/pip.log")" >&2
  exit 1
fi
if ! "$PY" -c 'import cffi' 2>/dev/null; then
  # _cffi_backend is all the compiled module needs (pycparser is for building).
  if ! "$PY" -m pip install -q --no-index --no-deps --find-links "$HERE/wheels" --target "$HERE/site" cffi \
      >>"$LOGS/pip.log" 2>&1; then
    echo "run.sh: warning: could not install cffi for $("$PY" -V 2>&1) from $HERE/wheels ($(tail -1 "$LOGS/pip.log"))"
  fi
fi
export PYTHONPATH="$PYPATH${PYTHONPATH:+:$PYTHONPATH}"

nvidia-smi -L | head -4
"$PY" - <<'EOF' 2>&1 | head -4
import sys
try:
    import torch
    print("python %s, torch %s, torch.cuda.is_available() %s" % (sys.version.split()[0], torch.__version__,
                                                                torch.cuda.is_available()))
    try:
        import transformers
        print("transformers %s" % transformers.__version__)
    except Exception as e:
        print("transformers: not importable (%r): the transformers tests and benchmarks skip" % e)
    import treemask
    print("treemask %s from %s, treemask.cuda_available() %s %s" % (
        treemask.__version__, treemask.__file__, treemask.cuda_available(), treemask.cuda_unavailable_reason() or ""))
except Exception as e:
    print("python environment: %r" % e)
EOF

PASSED=0 FAILED=0 SKIPPED=0
SUMMARY=()  # one line per part
TARGETS=()

# unfinished KIND NAME WHY: counts a part that did not run or finish: a
# failure, except a profile, which only informs (a skip).
unfinished() {
  if [ "$1" = profile ]; then
    SKIPPED=$((SKIPPED + 1)); SUMMARY+=("SKIP $2: $3")
  else
    FAILED=$((FAILED + 1)); SUMMARY+=("FAIL $2: $3")
  fi
}

# absent NAME WHY: a part whose tool this machine lacks: a skip, when the
# part is selected.
absent() {
  wanted "$1" || return 0
  SKIPPED=$((SKIPPED + 1)); SUMMARY+=("SKIP $1: $2")
}

# part NAME TIMEOUT KIND COMMAND...: runs COMMAND (KIND: program, pytests,
# bench or profile) with its output in logs/NAME.log, and counts it. A
# profile only informs: where it cannot run or finish it counts as a skip.
part() {
  local name="$1" limit="$2" kind="$3" log rc left elapsed line p f s
  shift 3
  wanted "$name" || return 0
  log="$LOGS/$name.log"
  left=$(( BUDGET - ($(date +%s) - START) ))
  if [ "$left" -lt 20 ]; then
    unfinished "$kind" "$name" "not run, the run's budget of ${BUDGET}s is spent"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (timeout ${limit}s)"
  local t0; t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - t0 ))
  while IFS= read -r line; do TARGETS+=("$line"); done < <(grep '^TARGET ' "$log")
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    unfinished "$kind" "$name" "timed out after ${limit}s"
    tail -5 "$log"
    return
  fi
  case "$kind" in
    pytests)  # the script runner's last line: N passed, N failed, N skipped
      line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -1)
      grep -E '^(FAIL|SKIP) ' "$log" | head -20
      if [ "$rc" = 77 ]; then
        SKIPPED=$((SKIPPED + 1)); SUMMARY+=("SKIP $name: $(head -1 "$log")")
      elif [ -n "$line" ]; then
        read -r p _ f _ s _ <<<"${line//,/}"
        PASSED=$((PASSED + p)); FAILED=$((FAILED + f)); SKIPPED=$((SKIPPED + s))
        SUMMARY+=("$([ "$rc" = 0 ] && echo PASS || echo FAIL) $name: $line (${elapsed}s)")
        [ "$rc" = 0 ] || [ "$f" -gt 0 ] || { FAILED=$((FAILED + 1)); SUMMARY+=("FAIL $name: exit status $rc"); }
      else
        FAILED=$((FAILED + 1)); SUMMARY+=("FAIL $name: exit status $rc, no summary line"); tail -20 "$log"
      fi
      ;;
    profile)  # informational: a skip where it cannot run, never a failure of the GPU code
      if [ "$rc" = 0 ]; then
        PASSED=$((PASSED + 1)); SUMMARY+=("PASS $name (${elapsed}s)")
        grep -E '^(kernel|note)' "$log"
      else
        SKIPPED=$((SKIPPED + 1))
        line=$(grep -m1 '^SKIP' "$log" || echo "exit status $rc: $(tail -1 "$log")")
        SUMMARY+=("SKIP $name: ${line#SKIP: }")
      fi
      ;;
    *)
      if [ "$rc" = 0 ]; then
        PASSED=$((PASSED + 1)); SUMMARY+=("PASS $name (${elapsed}s)")
        [ "$kind" = bench ] && cat "$log" || tail -2 "$log"
      elif [ "$rc" = 77 ]; then
        SKIPPED=$((SKIPPED + 1)); SUMMARY+=("SKIP $name: $(grep -m1 SKIP "$log" || head -1 "$log")")
      else
        FAILED=$((FAILED + 1)); SUMMARY+=("FAIL $name: exit status $rc (${elapsed}s)")
        tail -25 "$log"
      fi
      ;;
  esac
}

part test_cuda_apply 120 program "$HERE/bin/test_cuda_apply"
part test_cuda_trie 120 program "$HERE/bin/test_cuda_trie"
part test_cuda_beam 180 program "$HERE/bin/test_cuda_beam"
part python_test_cuda 240 pytests "$PY" tests/python/test_cuda.py
part bench_cuda_beam 200 bench "$HERE/bin/bench_cuda_beam"
part bench_cuda_python 320 bench "$PY" tests/bench/bench_cuda_python.py
part bench_cuda 120 bench "$HERE/bin/bench_cuda"

# compute-sanitizer on a few launches of each kernel shape
# (TREEMASK_TEST_SANITIZER_SHAPES=1): the trie kernels (the fused step,
# follow_rows with and without its copy, the masked copy) and the beam
# step's selection paths (block and warp kernels, a warp's one-pass
# selection and its second pass, lane and subset floors, the overflow
# fallback, the merge); racecheck, synccheck, memcheck. Where
# the machine has no compute-sanitizer this says so and counts a skip.
SANITIZER="$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)"
for program in trie beam; do
  for tool in racecheck synccheck memcheck; do
    if [ -n "$SANITIZER" ]; then
      part "sanitizer_${tool}_${program}" 90 program env TREEMASK_TEST_SANITIZER_SHAPES=1 \
        "$SANITIZER" --tool "$tool" --error-exitcode 1 "$HERE/bin/test_cuda_${program}"
    else
      absent "sanitizer_${tool}_${program}" "compute-sanitizer not found"
    fi
  done
done

# Nsight Compute (tests/cuda/ncu_profile.sh) on the beam step (STATIC's 2 x
# 70 and 256 x 32, one step per depth) and on the transformers processor's
# calls: where the next change to those kernels starts. Last, so that a run
# short of time loses only these; skips where ncu is absent or cannot read
# the counters.
NCU="$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)"
if [ -n "$NCU" ]; then
  part profile_beam 150 profile bash tests/cuda/ncu_profile.sh "$NCU" "$HERE/lib/libtreemask.so" \
    "$LOGS/beam_ncu" regex:beam_step "$HERE/bin/bench_cuda_beam" --profile
  # The processor runs the wheel's library (no -lineinfo: SASS offsets only).
  part profile_processor 150 profile bash tests/cuda/ncu_profile.sh "$NCU" "$HERE/site/treemask/libtreemask.so" \
    "$LOGS/processor_ncu" "" "$PY" tests/bench/bench_cuda_python.py --profile-processor
else
  absent profile_beam "ncu (Nsight Compute) not found"
  absent profile_processor "ncu (Nsight Compute) not found"
fi

# One file of every log (the device tool brings back at most 8 files).
if [ -n "${OUT:-}" ] && [ -d "$OUT" ] && [ -w "$OUT" ]; then
  tar -czf "$OUT/treemask-gpu-logs.tar.gz" -C "$HERE" logs 2>/dev/null || true
fi
echo
echo "== summary ($(( $(date +%s) - START ))s; logs in $LOGS${TREEMASK_GPU_PARTS:+; parts $TREEMASK_GPU_PARTS})"
for line in "${SUMMARY[@]}"; do echo "$line"; done
[ "$SKIPPED" -gt 0 ] && echo "($SKIPPED skipped)"
for line in "${TARGETS[@]}"; do echo "$line"; done
echo "gpu: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
