#!/usr/bin/env bash
# Nsight Compute on the device beam step: build-gpu/run.sh's profile_beam
# part. Runs `bench_cuda_beam --profile` (STATIC's 2 x 70 and the wide 256 x
# 32 batch over V = 2,048, one step per depth, each alone between
# cudaProfilerStart and cudaProfilerStop) under ncu with the full section
# set and PC sampling, then exports the report as text and CSV beside it and
# prints a summary per kernel launch (tests/cuda/ncu_summary.py): its time,
# occupancy, the stall reasons that dominate, and the SASS instructions with
# the most stall samples (their offsets match `nvdisasm -g` of the bundle's
# library, which is built with -lineinfo, so each maps to a source line).
#
# Usage: profile_beam.sh NCU BENCH_CUDA_BEAM LIBTREEMASK LOG_DIR
# Writes LOG_DIR/beam_ncu.{ncu-rep,capture.txt,details.txt,raw.csv,sass.csv}
# and, where cuobjdump and nvdisasm are at hand, beam_ncu.listing.txt
# (the beam kernels' SASS for this GPU with their source lines).
# Exit status: 0 with a summary; 77 where nothing could be profiled (no GPU,
# or ncu cannot read the counters here), saying why; 1 for a summary that
# could not be made from a report that was written.
#
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
set -uo pipefail
[ $# = 4 ] || { echo "usage: profile_beam.sh NCU BENCH_CUDA_BEAM LIBTREEMASK LOG_DIR" >&2; exit 2; }
NCU="$1" BENCH="$2" LOGS="$4"
LIB="$(cd "$(dirname "$3")" && pwd)/$(basename "$3")"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"
REP="$LOGS/beam_ncu"
rm -f "$REP".*

# --clock-control none and --cache-control none: the clocks and the warm L2
# that bench_cuda_beam's timed back-to-back steps see (each profiled step
# follows a warm-up of the same step). The kernel filter keeps the restores'
# copies out.
rc=0
"$NCU" --clock-control none --cache-control none --profile-from-start off --kernel-name regex:beam_step --set full \
  --force-overwrite --export "$REP" "$BENCH" --profile >"$REP.capture.txt" 2>&1 || rc=$?
if [ ! -s "$REP.ncu-rep" ]; then
  why=$(grep -m1 -E '^SKIP |ERR_|[Ee]rror' "$REP.capture.txt" || tail -1 "$REP.capture.txt")
  echo "SKIP profile_beam: ncu wrote no report (exit $rc): ${why:-no output}"
  exit 77
fi
[ "$rc" = 0 ] || echo "note: ncu exited $rc but wrote its report ($(grep -m1 -E 'ERR_|[Ee]rror' "$REP.capture.txt"))"

"$NCU" --import "$REP.ncu-rep" --page details >"$REP.details.txt" 2>&1 ||
  echo "note: the details page could not be exported (see $REP.details.txt)"
"$NCU" --import "$REP.ncu-rep" --page raw --csv >"$REP.raw.csv" 2>&1 ||
  echo "note: the raw page could not be exported (see $REP.raw.csv)"
"$NCU" --import "$REP.ncu-rep" --page source --csv >"$REP.sass.csv" 2>&1 ||
  echo "note: the source page could not be exported (see $REP.sass.csv)"

# The cubin that ran (this GPU's SASS in the library) with its line table.
listing=()
tool_dir="$(dirname "$NCU")"
CUOBJDUMP="$(command -v cuobjdump || ls "$tool_dir/cuobjdump" /usr/local/cuda/bin/cuobjdump 2>/dev/null | head -1)"
NVDISASM="$(command -v nvdisasm || ls "$tool_dir/nvdisasm" /usr/local/cuda/bin/nvdisasm 2>/dev/null | head -1)"
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
if [ -n "$CUOBJDUMP" ] && [ -n "$NVDISASM" ] && [ -n "$arch" ]; then
  cubins="$(mktemp -d)"
  if (cd "$cubins" && "$CUOBJDUMP" -xelf all "$LIB" >/dev/null 2>&1) && [ -f "$cubins/beam_step.sm_$arch.cubin" ] &&
      "$NVDISASM" -gi -c "$cubins/beam_step.sm_$arch.cubin" >"$REP.listing.txt" 2>&1; then
    listing=("$REP.listing.txt")
  else
    echo "note: no beam_step.sm_$arch.cubin in $LIB to disassemble: SASS offsets without source lines"
  fi
  rm -rf "$cubins"
else
  echo "note: cuobjdump, nvdisasm or the GPU's compute capability not found: SASS offsets without source lines"
fi
"$PY" "$HERE/ncu_summary.py" "$REP.raw.csv" "$REP.sass.csv" "${listing[@]}"
