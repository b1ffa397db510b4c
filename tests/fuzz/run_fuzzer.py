#!/usr/bin/env python3
"""One libFuzzer target as a meson test (suite `fuzz-smoke`, in a build with
-Dfuzz=enabled): runs it for TREEMASK_FUZZ_SECONDS (default 20) over its
corpus (kept between runs) and its seed directories, prints the executions,
and on a failure the end of its log and the input to keep as
tests/fuzz/inputs/NAME/regression-<what-it-found>.

usage: run_fuzzer.py FUZZER WORK_DIR SEED_DIR...

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import re
import subprocess
import sys


def main(argv):
    fuzzer, work, seeds = argv[1], argv[2], argv[3:]
    name = os.path.basename(fuzzer)
    seconds = os.environ.get("TREEMASK_FUZZ_SECONDS", "20")
    corpus, artifacts = os.path.join(work, "corpus"), os.path.join(work, "artifacts")
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(artifacts, exist_ok=True)
    env = dict(os.environ, UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    # libFuzzer exits 77 on a crash by default, which meson reads as a skip:
    # every finding exits 1 here, and so does anything other than 0 below.
    cmd = [fuzzer, "-max_total_time=" + seconds, "-timeout=30", "-rss_limit_mb=2048",
           "-error_exitcode=1", "-timeout_exitcode=1",
           "-print_final_stats=1", "-artifact_prefix=" + artifacts + "/", corpus]
    cmd += [s for s in seeds if os.path.isdir(s)]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace")
    with open(os.path.join(work, "fuzz.log"), "w", encoding="utf-8") as f:
        f.write(proc.stdout)
    runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", proc.stdout)
    print("%s: %s executions in %ss, corpus of %d inputs, exit %d"
          % (name, runs[-1] if runs else "?", seconds, len(os.listdir(corpus)), proc.returncode))
    if proc.returncode != 0:
        print("\n".join(proc.stdout.splitlines()[-40:]))
        print("reproduce with replay_%s <input>; once fixed keep the input as "
              "tests/fuzz/inputs/%s/regression-<what-it-found>: %s"
              % (name[len("fuzz_"):], name[len("fuzz_"):], " ".join(os.listdir(artifacts))))
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
