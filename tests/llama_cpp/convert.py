"""Runs llama.cpp's convert_hf_to_gguf.py on the tiny model (f32) with the
gguf-py the sdist vendors beside it (version 0.19.0). The PyPI release of
gguf 0.19.0 is older code under the same number: this converter fails with
it (AttributeError: MODEL_ARCH.DFLASH), so it is not used.

usage: convert.py LLAMA_CPP_DIR MODEL_DIR OUT.gguf

For the toy tokenizer (make_model.py without the Qwen2.5 files) the
converter cannot recognise the pre-tokenizer by its hash (it knows only
published tokenizers' hashes), so it is told "qwen2": the toy tokenizer is a
plain byte-level BPE and the tests only need encoding to be consistent
between the trie and the model.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os
import pathlib
import sys


def main() -> None:
    llama_dir, model_dir, out = sys.argv[1:4]
    os.environ.pop("NO_LOCAL_GGUF", None)  # the converter then puts its gguf-py first
    sys.path.insert(0, llama_dir)
    import convert_hf_to_gguf
    from conversion.base import TextModel

    info = json.loads((pathlib.Path(model_dir) / "treemask-model.json").read_text(encoding="utf-8"))
    if info["tokenizer"] == "toy":
        TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
    sys.argv = ["convert_hf_to_gguf.py", "--outtype", "f32", "--outfile", out, model_dir]
    convert_hf_to_gguf.main()


if __name__ == "__main__":
    main()
