#!/usr/bin/env python3
# treemask — the READMEs' Rust decode loop, compiled and run as written.
# Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""Takes the first ```rust block of README.md's "## Rust" section and of
bindings/rust/treemask/README.md, puts each into a small harness (a fake
model whose logits change every step, argmax sampling, a step bound so that
a loop that never ends fails instead of spinning) as a crate that depends on
bindings/rust/treemask by path, and runs it with cargo: the program must
end, print its label, and take a few steps.

usage: readme_check.py CARGO SOURCE_ROOT WORK_DIR"""
import os
import re
import subprocess
import sys
from pathlib import Path

HARNESS = """%(uses)s

static mut STEPS: u32 = 0;

/// A stand-in model: seeded logits that change every step.
fn model_forward(generated: &[i32]) -> Vec<f32> {
    // Safety: the harness is single-threaded.
    let steps = unsafe {
        STEPS += 1;
        STEPS
    };
    assert!(steps <= 100, "the README's decode loop did not end after 100 steps");
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (generated.len() as u64 + 1);
    (0..151_936)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32
        })
        .collect()
}

fn sample(logits: &[f32]) -> i32 {
    let mut best = 0;
    for (t, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = t;
        }
    }
    best as i32
}

fn main() -> Result<(), treemask::Error> {
%(body)s
    // Safety: as above.
    println!("README loop ended after {} steps", unsafe { STEPS });
    Ok(())
}
"""


def snippet(readme: Path, section: str) -> str:
    text = readme.read_text(encoding="utf-8")
    if section:
        text = text.split("\n" + section + "\n", 1)[1]
    m = re.search(r"```rust\n(.*?)```", text, re.S)
    if not m:
        sys.exit("%s has no ```rust block%s" % (readme, " under " + section if section else ""))
    return m.group(1)


def main() -> int:
    cargo, root, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    failures = []
    for readme, section in ((root / "README.md", "## Rust"), (root / "bindings/rust/treemask/README.md", "")):
        code = snippet(readme, section)
        uses = "\n".join(line for line in code.splitlines() if line.startswith("use "))
        body = "\n".join("    " + line for line in code.splitlines() if not line.startswith("use "))
        crate = work / readme.parent.name.replace(".", "_")
        (crate / "src").mkdir(parents=True, exist_ok=True)
        (crate / "Cargo.toml").write_text(
            '[package]\nname = "treemask-readme-check"\nversion = "0.1.0"\nedition = "2021"\npublish = false\n\n'
            '[dependencies]\ntreemask = { path = "%s" }\n\n[workspace]\n' % (root / "bindings/rust/treemask"))
        (crate / "src" / "main.rs").write_text(HARNESS % {"uses": uses, "body": body})
        # The meson build's libtreemask (a user's crate adds an rpath in its
        # build.rs; the crate README shows how): found through the loader path.
        env = dict(os.environ)
        if env.get("TREEMASK_MESON_BUILD_DIR"):
            env["LD_LIBRARY_PATH"] = os.path.join(env["TREEMASK_MESON_BUILD_DIR"], "src")
        run = subprocess.run([cargo, "run", "--offline", "--quiet", "--manifest-path", str(crate / "Cargo.toml")],
                             capture_output=True, text=True, env=env)
        out = run.stdout + run.stderr
        print("%s: exit %d\n%s" % (readme.relative_to(root), run.returncode, out.strip()[-1500:]))
        if run.returncode != 0 or "README loop ended after" not in out or "label [" not in out:
            failures.append("%s's Rust example did not compile, end or print its label" % readme.relative_to(root))
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
