#!/usr/bin/env python3
"""Compiles and runs the README's C example inside a small harness (a fake model,
argmax sampling), so the example cannot drift from the real API.

usage: check_readme_c.py README.md INCLUDE_DIR LIBRARY_DIR CC"""
import os
import re
import subprocess
import sys
import tempfile


def harness_source(readme: str) -> str:
    """The README's C example inside its harness, as one C99 program (also
    what tests/install builds against an installed libtreemask)."""
    text = open(readme, encoding="utf-8").read()
    m = re.search(r"## C example.*?```c\n(.*?)```", text, re.S)
    if not m:
        sys.exit("README.md has no ```c block under '## C example'")
    body = m.group(1)
    includes = "\n".join(l for l in body.splitlines() if l.startswith("#include"))
    code = "\n".join("  " + l for l in body.splitlines() if not l.startswith("#include"))
    return HARNESS % (includes, code)


HARNESS = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
%s

static float g_logits[151936];
static unsigned g_seed = 1;
static int g_steps = 0;
static void die(const char *msg) { fprintf(stderr, "die: %%s\n", msg); exit(1); }
static float *model_forward(void) {
  int t;
  if (++g_steps > 100) die("the decode loop did not terminate");
  for (t = 0; t < 151936; ++t) { g_seed = g_seed * 1103515245u + 12345u; g_logits[t] = (float)(g_seed >> 8); }
  return g_logits;
}
static void mask_logits(float *logits, const int32_t *mask, int32_t vocab) {
  int32_t t;
  for (t = 0; t < vocab; ++t) if (!(((uint32_t)mask[t / 32] >> (t %% 32)) & 1u)) logits[t] = -INFINITY;
}
static int32_t sample(const float *logits) {
  int32_t t, best = 0;
  for (t = 1; t < 151936; ++t) if (logits[t] > logits[best]) best = t;
  return best;
}

int main(void) {
%s
  printf("README example terminated after %%d steps\n", g_steps);
  return g_steps >= 2 ? 0 : 1;
}
"""

if __name__ == "__main__":
    readme, include_dir, lib_dir, cc = sys.argv[1:5]
    harness = harness_source(readme)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "readme_example.c")
        exe = os.path.join(tmp, "readme_example")
        open(src, "w").write(harness)
        subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-I", include_dir, src, "-o", exe,
                        "-L", lib_dir, "-ltreemask", "-lm", "-Wl,-rpath," + lib_dir], check=True)
        sys.exit(subprocess.run([exe]).returncode)
