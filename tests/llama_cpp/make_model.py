"""Writes the tiny model the llama.cpp tests run: a random-weight Qwen2
(vocabulary 151,936, hidden size 64, 2 layers) saved with transformers,
plus a tokenizer, ready for llama.cpp's convert_hf_to_gguf.py; and the
labels the tests constrain generation to (tests/data/iab, one per line).

usage: make_model.py OUT_DIR SOURCE_ROOT [TOKENIZER_DIR]

TOKENIZER_DIR holds the real Qwen2.5 tokenizer files (tokenizer.json,
tokenizer_config.json, from ../shared). Without it a small byte-level BPE
tokenizer is trained on the labels (the bundled fallback of the Python
tests) and the vocabulary is padded to 151,936 rows all the same; it
prints "toy" on its last line so the caller knows the converter must be
told the pre-tokenizer (see convert.py).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import pathlib
import shutil
import sys

VOCAB_SIZE = 151936


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    source_root = pathlib.Path(sys.argv[2])
    tokenizer_dir = pathlib.Path(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else None
    sys.path.insert(0, str(source_root / "tests" / "python"))
    from taxonomy_data import iab_labels, toy_tokenizer

    import torch
    import transformers

    labels = iab_labels(source_root)
    out.mkdir(parents=True, exist_ok=True)
    if tokenizer_dir is not None:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(tokenizer_dir / name, out / name)
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(out))
        kind = "qwen2.5"
    else:
        tokenizer = toy_tokenizer(labels)
        tokenizer.save_pretrained(str(out))
        kind = "toy"
    eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    config = transformers.Qwen2Config(
        vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
        tie_word_embeddings=True, eos_token_id=eos, bos_token_id=None, pad_token_id=None)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(config).eval()
    with torch.no_grad():  # spread the logits so sampling has real choices
        model.model.embed_tokens.weight.normal_(0.0, 0.5)
    model.save_pretrained(str(out), safe_serialization=True)
    (out / "labels.txt").write_text("".join(label + "\n" for label in labels), encoding="utf-8")
    (out / "treemask-model.json").write_text(json.dumps({"tokenizer": kind, "eos": eos}), encoding="utf-8")
    print(kind)


if __name__ == "__main__":
    main()
