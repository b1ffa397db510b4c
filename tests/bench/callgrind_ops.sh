#!/usr/bin/env bash
# Instructions per operation (callgrind) of count_ops.cc against one tree's
# libtreemask: compiles count_ops.cc with that tree's public headers, links
# it to that tree's build, runs each OP with N and 2N repetitions under
# callgrind and prints (Ir(2N) - Ir(N)) / N, which leaves out the set-up.
# Instruction counts are exact and repeatable on a loaded machine, so a
# change that must cost nothing compares before and after with them:
#
#   tests/bench/callgrind_ops.sh SOURCE_TREE BUILD_DIR [OP...]
#
# e.g. a worktree of the old commit built in old/build, then this tree:
#   tests/bench/callgrind_ops.sh old old/build > before.txt
#   tests/bench/callgrind_ops.sh . build > after.txt
#
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "$1" && pwd)"
build="$(cd "$2" && pwd)"
shift 2
ops=("$@")
[ ${#ops[@]} -gt 0 ] || ops=(fill1 fill16 fill256 fillroot accept beam beamlse strings_fill)
command -v valgrind >/dev/null || { echo "callgrind_ops: valgrind is not installed" >&2; exit 77; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
g++ -std=c++20 -O2 -I"$src/include" -I"$build/include" "$here/count_ops.cc" -o "$out/count_ops" \
  -L"$build/src" -ltreemask -Wl,-rpath,"$build/src"
n_for() {
  case "$1" in
    beamlse) echo 20 ;;
    beam) echo 400 ;;
    strings_fill) echo 200 ;;
    *) echo 2000 ;;
  esac
}
ir() {  # OP N: the program's total instructions
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$out/count_ops" "$1" "$2" \
    2>&1 >/dev/null | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
printf '%-14s %14s\n' op 'Ir per op'
for op in "${ops[@]}"; do
  n=$(n_for "$op")
  a=$(ir "$op" "$n")
  b=$(ir "$op" $((2 * n)))
  printf '%-14s %14.1f\n' "$op" "$(echo "($b - $a) / $n" | bc -l)"
done
