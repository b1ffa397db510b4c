#!/usr/bin/env bash
# build-gpu/run.sh's plumbing on a machine without a GPU: with a stand-in
# nvidia-smi that lists one GPU, every part runs (the CUDA programs and the
# benchmarks exit 77 here, the Python GPU tests run their logic in host mode,
# TREEMASK_TEST_CUDA_ON_HOST=1), and the run must end as on a GPU machine:
# a summary per part, then `gpu: N passed, 0 failed` with the Python tests
# counted one by one, exit status 0; a stand-in ncu takes the profile parts
# through their exports and summaries; TREEMASK_GPU_PARTS runs only the parts
# it names and refuses a name that matches none. Run by ./dev test after ./dev
# gpu-bundle. Exit 77 where build-gpu/ is absent.
#
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ -f "$ROOT/build-gpu/run.sh" ] || { echo "SKIP: no $ROOT/build-gpu (./dev gpu-bundle writes it)"; exit 77; }
FAKE="$(mktemp -d)"
trap 'rm -rf "$FAKE"' EXIT
cat >"$FAKE/nvidia-smi" <<'EOF'
#!/bin/sh
echo "GPU 0: stand-in for run.sh's plumbing check (UUID: none)"
EOF
chmod +x "$FAKE/nvidia-smi"
# A stand-in ncu for the profile part: a capture runs the program (which must
# take its arguments: exit 0, or 77 without a GPU) and writes a report; an
# import prints pages in Nsight Compute's CSV layout.
cat >"$FAKE/ncu" <<'EOF'
#!/usr/bin/env bash
export_to="" import="" page=""
while [ $# -gt 0 ]; do
  case "$1" in
    --export) export_to="$2"; shift 2 ;;
    --import) import="$2"; shift 2 ;;
    --page) page="$2"; shift 2 ;;
    --csv | --force-overwrite) shift ;;
    --*) shift 2 ;;
    *) break ;;
  esac
done
if [ -n "$export_to" ]; then
  rc=0; "$@" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || { echo "==ERROR== the application exited $rc"; exit "$rc"; }
  echo "stand-in report" >"$export_to.ncu-rep"
  exit 0
fi
[ -s "$import" ] || { echo "==ERROR== no report $import"; exit 1; }
case "$page" in
  raw)
    echo '"ID","Kernel Name","Block Size","Grid Size","gpu__time_duration.sum","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"'
    echo '"","","","","nsecond","inst"'
    echo '"0","treemask::cuda::device::(anonymous namespace)::beam_step_kernel(BeamStep)","(256, 1, 1)","(140, 1, 1)","12,500","3.5"' ;;
  source)
    echo '"Kernel Name","beam_step_kernel"'
    echo '"Address","Source","Warp Stall Sampling (All Samples)"'
    echo '"0x7f0000000000","BAR.SYNC.DEFER_BLOCKING 0x0","9"'
    echo '"0x7f0000000010","EXIT","1"' ;;
  *) echo "details of the stand-in report" ;;
esac
EOF
chmod +x "$FAKE/ncu"
out="$FAKE/out.txt"
rc=0
(cd "$ROOT" && PATH="$FAKE:$PATH" TREEMASK_TEST_CUDA_ON_HOST=1 bash build-gpu/run.sh) >"$out" 2>&1 || rc=$?
cat "$out"
fail() { echo "check_gpu_run: $*" >&2; exit 1; }
[ "$rc" = 0 ] || fail "run.sh exited $rc (want 0)"
last=$(tail -1 "$out")
[[ "$last" =~ ^gpu:\ ([0-9]+)\ passed,\ 0\ failed$ ]] || fail "the last line is '$last'"
[ "${BASH_REMATCH[1]}" -ge 10 ] || fail "only ${BASH_REMATCH[1]} tests passed: the host-mode tests were not counted"
for part in test_cuda_apply test_cuda_trie test_cuda_beam bench_cuda_beam bench_cuda_python bench_cuda \
    sanitizer_racecheck_trie sanitizer_synccheck_trie sanitizer_memcheck_trie \
    sanitizer_racecheck_beam sanitizer_synccheck_beam sanitizer_memcheck_beam; do
  grep -q "^SKIP $part: " "$out" || fail "part $part did not report a skip"
done
grep -q "^PASS python_test_cuda: " "$out" || fail "the Python GPU tests did not pass in host mode"
for part in profile_beam profile_processor; do
  grep -q "^PASS $part " "$out" || fail "the profile part $part did not pass with a stand-in ncu"
done
grep -q "^kernel 0: beam_step_kernel (140, 1, 1) x (256, 1, 1), 12.5 us, stalls: barrier 3.5$" "$out" ||
  fail "the profile part did not print the stand-in report's kernel line"
# Every part reports once, under a name TREEMASK_GPU_PARTS knows.
eval "$(sed -n '/^PART_NAMES=(/,/)$/p' "$ROOT/build-gpu/run.sh")"
reported=$(sed -n '/^== summary/,$p' "$out" | sed -nE 's/^(PASS|FAIL|SKIP) ([a-z0-9_]+)[ :].*/\2/p' | sort)
[ "$reported" = "$(printf '%s\n' "${PART_NAMES[@]}" | sort)" ] ||
  fail "the parts reported ($(echo $reported)) are not run.sh's PART_NAMES (${PART_NAMES[*]})"

# TREEMASK_GPU_PARTS: only the parts named run; a name that matches none
# stops the run before it starts.
rc=0
(cd "$ROOT" && PATH="$FAKE:$PATH" TREEMASK_GPU_PARTS='test_cuda_beam,profile_*' bash build-gpu/run.sh) >"$out" 2>&1 ||
  rc=$?
[ "$rc" = 0 ] || { cat "$out"; fail "run.sh with TREEMASK_GPU_PARTS exited $rc (want 0)"; }
reported=$(sed -n '/^== summary/,$p' "$out" | sed -nE 's/^(PASS|FAIL|SKIP) ([a-z0-9_]+)[ :].*/\1 \2/p' | sort |
  tr '\n' ' ')
[ "$reported" = "PASS profile_beam PASS profile_processor SKIP test_cuda_beam " ] ||
  fail "TREEMASK_GPU_PARTS='test_cuda_beam,profile_*' ran: $reported"
[ "$(tail -1 "$out")" = "gpu: 2 passed, 0 failed" ] || fail "the filtered run ended with '$(tail -1 "$out")'"
rc=0
(cd "$ROOT" && PATH="$FAKE:$PATH" TREEMASK_GPU_PARTS='test_cuda_beam,bench_cuda_bem' bash build-gpu/run.sh) >"$out" 2>&1 ||
  rc=$?
[ "$rc" = 2 ] && grep -q "'bench_cuda_bem' matches no part" "$out" && ! grep -q "^== test_cuda_beam" "$out" ||
  fail "a misspelt part name: exit $rc, $(head -3 "$out")"
echo "check_gpu_run: run.sh's plumbing holds"
