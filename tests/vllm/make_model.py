"""Writes the tiny model the vLLM tests and benchmark serve: a Qwen2 with
random weights (vocab 151,936, hidden 64, 2 layers, 2 heads of 32: the
smallest head size vLLM's CPU attention takes) saved by transformers, with
the real Qwen2.5 tokenizer from ../shared/data, or, where ../shared is
absent, a byte-level BPE tokenizer trained on the bundled IAB taxonomy.
Nothing is downloaded.

    python make_model.py OUTDIR

The generation config lists only <|im_end|> (151645) as EOS, so a trie
whose stop token is <|endoftext|> (151643) exercises the stop-token rule.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED_TOKENIZER = ROOT.parent / "shared" / "data" / "tokenizers" / "qwen2.5-instruct"
VOCAB = 151936
EOS, PAD = 151645, 151643
TOY_CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                     "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def toy_tokenizer(out: pathlib.Path):
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    from taxonomy_data import iab_labels
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    texts = iab_labels(ROOT) + ["Classify the text.", "Answer with one word:", "red green blue"]
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([" " + t for t in texts] + texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = TOY_CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    return fast.convert_tokens_to_ids("<|im_end|>"), fast.convert_tokens_to_ids("<|endoftext|>")


def main(out: pathlib.Path) -> None:
    import torch
    import transformers

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    eos, pad = EOS, PAD
    if SHARED_TOKENIZER.is_dir():
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(SHARED_TOKENIZER / name, tmp / name)
        source = "qwen2.5"
    else:
        eos, pad = toy_tokenizer(tmp)
        source = "toy"
    config = transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=2048, tie_word_embeddings=True, eos_token_id=eos,
        pad_token_id=pad, bos_token_id=None, torch_dtype="float32")
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(config).eval()
    # Random weights give near-uniform logits; sharpen them so that greedy
    # decoding is not decided by rounding.
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(8.0)
    model.save_pretrained(str(tmp), safe_serialization=True)
    (tmp / "generation_config.json").write_text(json.dumps({"eos_token_id": [eos], "pad_token_id": pad}))
    (tmp / "treemask-tiny.json").write_text(json.dumps({"tokenizer": source, "eos": eos, "pad": pad}))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]).resolve())
