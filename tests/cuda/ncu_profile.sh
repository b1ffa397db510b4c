#!/usr/bin/env bash
# Nsight Compute on one program's marked launches: build-gpu/run.sh's
# profile parts. Runs COMMAND under ncu with the full section set and PC
# sampling, capturing only what it runs between cudaProfilerStart and
# cudaProfilerStop (bench_cuda_beam --profile: the beam step at STATIC's 2 x
# 70 and at 256 x 32, one step per depth; bench_cuda_python.py
# --profile-processor: the transformers processor's calls), then exports the
# report as text and CSV beside it and prints a summary per kernel launch
# (tests/cuda/ncu_summary.py): its time, occupancy, the stall reasons that
# dominate, and the SASS instructions and source lines with the most stall
# samples (from `nvdisasm -gi` of the library's cubins for this GPU: the
# bundle's library is built with -lineinfo).
#
# Usage: ncu_profile.sh NCU LIBTREEMASK PREFIX KERNEL_FILTER COMMAND...
#   KERNEL_FILTER  ncu's --kernel-name (e.g. regex:beam_step), or "" for all
# Writes PREFIX.{ncu-rep,capture.txt,details.txt,raw.csv,sass.csv} and, where
# cuobjdump and nvdisasm are at hand, PREFIX.listing.txt.
# Exit status: 0 with a summary; 77 where nothing could be profiled (no GPU,
# or ncu cannot read the counters here), saying why; 1 for a summary that
# could not be made from a report that was written.
#
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
set -uo pipefail
[ $# -ge 5 ] || { echo "usage: ncu_profile.sh NCU LIBTREEMASK PREFIX KERNEL_FILTER COMMAND..." >&2; exit 2; }
NCU="$1" REP="$3" FILTER="$4"
LIB="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
shift 4
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"
rm -f "$REP".*

# --clock-control none and --cache-control none: the clocks and the warm L2
# that the benchmarks' timed calls see (each profiled call follows warm-up
# calls of the same kind).
filter=()
[ -z "$FILTER" ] || filter=(--kernel-name "$FILTER")
rc=0
"$NCU" --clock-control none --cache-control none --profile-from-start off --target-processes all \
  "${filter[@]}" --set full --force-overwrite --export "$REP" "$@" >"$REP.capture.txt" 2>&1 || rc=$?
if [ ! -s "$REP.ncu-rep" ]; then
  why=$(grep -m1 -E '^SKIP|ERR_|[Ee]rror' "$REP.capture.txt" || tail -1 "$REP.capture.txt")
  echo "SKIP: ncu wrote no report (exit $rc): ${why:-no output}"
  exit 77
fi
[ "$rc" = 0 ] || echo "note: ncu exited $rc but wrote its report ($(grep -m1 -E 'ERR_|[Ee]rror' "$REP.capture.txt"))"

"$NCU" --import "$REP.ncu-rep" --page details >"$REP.details.txt" 2>&1 ||
  echo "note: the details page could not be exported (see $REP.details.txt)"
"$NCU" --import "$REP.ncu-rep" --page raw --csv >"$REP.raw.csv" 2>&1 ||
  echo "note: the raw page could not be exported (see $REP.raw.csv)"
"$NCU" --import "$REP.ncu-rep" --page source --csv >"$REP.sass.csv" 2>&1 ||
  echo "note: the source page could not be exported (see $REP.sass.csv)"

# The cubins that ran (this GPU's SASS in the library) with their line tables.
listing=()
tool_dir="$(dirname "$NCU")"
CUOBJDUMP="$(command -v cuobjdump || ls "$tool_dir/cuobjdump" /usr/local/cuda/bin/cuobjdump 2>/dev/null | head -1)"
NVDISASM="$(command -v nvdisasm || ls "$tool_dir/nvdisasm" /usr/local/cuda/bin/nvdisasm 2>/dev/null | head -1)"
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
if [ -n "$CUOBJDUMP" ] && [ -n "$NVDISASM" ] && [ -n "$arch" ]; then
  cubins="$(mktemp -d)"
  (cd "$cubins" && "$CUOBJDUMP" -xelf all "$LIB" >/dev/null 2>&1)
  : >"$REP.listing.txt"
  for cubin in "$cubins"/*.sm_"$arch".cubin; do
    [ -f "$cubin" ] && "$NVDISASM" -gi -c "$cubin" >>"$REP.listing.txt" 2>&1
  done
  rm -rf "$cubins"
  if [ -s "$REP.listing.txt" ]; then
    listing=("$REP.listing.txt")
  else
    echo "note: no sm_$arch cubin in $LIB to disassemble: SASS offsets without source lines"
  fi
else
  echo "note: cuobjdump, nvdisasm or the GPU's compute capability not found: SASS offsets without source lines"
fi
"$PY" "$HERE/ncu_summary.py" "$REP.raw.csv" "$REP.sass.csv" "${listing[@]}"
