#!/usr/bin/env bash
# build-gpu/run.sh's plumbing on a machine without a GPU: with a stand-in
# nvidia-smi that lists one GPU, every part runs (the CUDA programs and the
# benchmarks exit 77 here, the Python GPU tests run their logic in host mode,
# TREEMASK_TEST_CUDA_ON_HOST=1), and the run must end as on a GPU machine:
# a summary per part, then `gpu: N passed, 0 failed` with the Python tests
# counted one by one, exit status 0. Run by ./dev test after ./dev
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
echo "check_gpu_run: run.sh's plumbing holds"
