"""Driver of the string-set benchmark (bench_strings.cc): writes the Qwen2.5
vocabulary's token bytes (treemask._vocab_bytes) to a temporary file, runs
the C++ benchmark on it with GeoNames' names, and times ``Trie.from_labels``
(the canonical kind: one tokenizer call per name) on the same names, the
build the byte-level kind is compared with.

    python tests/bench/bench_strings.py build/tests/bench/bench_strings

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
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
    import treemask

    names = sorted({line.split("\t", 1)[0] for line in geonames.read_text(encoding="utf-8").splitlines()})
    t0 = time.perf_counter()
    trie = treemask.Trie.from_labels(names, tok, QWEN_WIDTH, [QWEN_EOS], prefix=" ")
    took = time.perf_counter() - t0
    print("canonical kind on the same %d names: Trie.from_labels (Qwen2.5 tokenizer, prefix \" \") %.2f s, "
          "%d labels skipped" % (len(names), took, len(trie.skipped_labels)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
