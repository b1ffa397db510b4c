"""Driver of the string-set benchmark (bench_strings.cc): writes the Qwen2.5
vocabulary's token bytes (treemask._vocab_bytes) to a temporary file, runs
the C++ benchmark on it with GeoNames' names (the engine's build and masks),
then the builds through the Python API, each in a fresh process (time, and
peak resident memory above what the process held before the build):
``Trie.from_strings`` (any tokenization: no tokenizer call) beside
``Trie.from_labels`` (canonical: one tokenizer call per name) on GeoNames'
150,634 names and on 1M generated names, and ``Vocab.from_tokenizer`` (once
per model).

    python tests/bench/bench_strings.py build/tests/bench/bench_strings

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os
import pathlib
import struct
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(os.environ.get("TREEMASK_SOURCE_ROOT") or pathlib.Path(__file__).resolve().parents[2])
DATA = ROOT.parent / "shared" / "data"
QWEN_WIDTH = 151936  # the model's logits rows (the tokenizer has 151,665 ids)
QWEN_EOS = 151645


def write_dump(path: pathlib.Path, tokenizer, width: int) -> None:
    """The token bytes of ``tokenizer`` (logits width ``width``) in the
    format bench_strings.cc reads."""
    from treemask._vocab_bytes import vocab_bytes

    v = vocab_bytes(tokenizer, width)
    data, offsets, flags = v.packed()
    with open(path, "wb") as f:
        f.write(b"TMVOCAB1" + struct.pack("<II", v.vocab_size, len(v.tokens)))
        f.write(flags.tobytes())
        f.write(offsets.astype("<u8").tobytes())
        f.write(data)


def main() -> int:
    exe = sys.argv[1]
    geonames = DATA / "labels" / "geonames-cities1000.tsv"
    tokenizer_json = DATA / "tokenizers" / "qwen2.5-instruct" / "tokenizer.json"
    if not geonames.is_file() or not tokenizer_json.is_file():
        print("bench_strings: %s is absent: build figures for generated names only" % DATA)
        return subprocess.call([exe])
    try:
        import tokenizers
    except ImportError:
        print("bench_strings: no tokenizers package: no masks (the Qwen2.5 vocabulary needs it)")
        return subprocess.call([exe, "--geonames", str(geonames)])
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    with tempfile.TemporaryDirectory() as tmp:
        dump = pathlib.Path(tmp) / "qwen2.5.vocab"
        write_dump(dump, tok, QWEN_WIDTH)
        sys.stdout.flush()
        rc = subprocess.call([exe, "--geonames", str(geonames), "--vocab", str(dump)])
    if rc != 0:
        return rc
    print("builds through the Python API (Qwen2.5, a fresh process each; peak = resident memory above the"
          " process's before the build):")
    vocab = measure("vocab", "none")
    print("  Vocab.from_tokenizer (once per model)   %7.2f s   peak %7.1f MB" % (vocab["s"], vocab["peak_mb"]))
    for names, prefix, label in (("geonames", " ", "GeoNames, 150,634"), ("generated", "", "1M generated")):
        strings = measure("strings", names)
        labels = measure("labels", names)
        print("  %s names (%.1f MB of UTF-8):" % (label, strings["bytes_mb"]))
        print("    Trie.from_strings (any tokenization)  %7.2f s   peak %7.1f MB = %.1fx the bytes"
              % (strings["s"], strings["peak_mb"], strings["peak_mb"] / strings["bytes_mb"]))
        print("    Trie.from_labels (canonical)          %7.2f s   peak %7.1f MB   (%.0fx the time of from_strings;"
              " %d labels skipped)" % (labels["s"], labels["peak_mb"], labels["s"] / strings["s"], labels["skipped"]))
    return 0


def generated_names(n: int):
    """n distinct place-like names (a seeded generator: 2-4 syllables, some
    with a second word)."""
    import random

    rng = random.Random(1)
    syllables = ["ka", "lo", "mi", "ren", "sa", "tor", "vil", "ber", "gen", "dor", "an", "el", "is", "ou", "ra",
                 "ste", "burg", "ford", "ton", "ville", "ham", "dal", "nes", "port", "mar", "zu", "qui", "wen"]
    out = set()
    while len(out) < n:
        name = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))).capitalize()
        if rng.random() < 0.3:
            name += " " + "".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))).capitalize()
        out.add(name)
    return sorted(out)


def measure(kind: str, names: str) -> dict:
    """Runs one build in a fresh process (this script with --measure)."""
    out = subprocess.run([sys.executable, __file__, "--measure", kind, names], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _resident_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def measure_child(kind: str, which: str) -> None:
    import tokenizers

    import treemask

    tok = tokenizers.Tokenizer.from_file(str(DATA / "tokenizers" / "qwen2.5-instruct" / "tokenizer.json"))
    names, prefix = [], ""
    if which == "geonames":
        text = (DATA / "labels" / "geonames-cities1000.tsv").read_text(encoding="utf-8")
        names, prefix = sorted({line.split("\t", 1)[0] for line in text.splitlines()}), " "
    elif which == "generated":
        names = generated_names(1_000_000)
    vocab = treemask.Vocab.from_tokenizer(tok, QWEN_WIDTH) if kind == "strings" else None
    # The peak from here on: memory freed so far returned to the system (so
    # that the build cannot hide in it), then the high-water mark reset
    # (Linux >= 4.0).
    import ctypes
    import gc

    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _resident_mb("VmRSS")
    t0 = time.perf_counter()
    skipped = 0
    if kind == "vocab":
        treemask.Vocab.from_tokenizer(tok, QWEN_WIDTH)
    elif kind == "strings":
        treemask.Trie.from_strings(names, vocab, [QWEN_EOS], prefix=prefix)
    else:
        skipped = len(treemask.Trie.from_labels(names, tok, QWEN_WIDTH, [QWEN_EOS], prefix=prefix).skipped_labels)
    took = time.perf_counter() - t0
    print(json.dumps({"s": took, "peak_mb": _resident_mb("VmHWM") - before, "skipped": skipped,
                      "bytes_mb": sum(len(n.encode("utf-8")) for n in names) / 1e6}))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--measure":
        measure_child(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.exit(main())
