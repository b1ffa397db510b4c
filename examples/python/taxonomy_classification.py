#!/usr/bin/env python3
"""Taxonomy classification with a causal LM: the model may only answer with
one of the taxonomy's category paths, and beam search returns the best k.

    # with a model of your own (a local directory or a cached hub name):
    python taxonomy_classification.py --taxonomy taxonomy.txt --model Qwen/Qwen2.5-0.5B-Instruct \\
        "Trail running shoes with a rock plate"

    # without weights: a tiny random Qwen2-shaped model over any tokenizer.json
    python taxonomy_classification.py --taxonomy tests/data/iab/content-taxonomy-3.1.tsv \\
        --tokenizer-file tokenizer.json --random-model "Trail running shoes"

--taxonomy reads the IAB Content Taxonomy TSV ("Tier 1 > Tier 2 > ..."), the
Google product taxonomy ("<id> - A > B > C") or one label per line.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import argparse
import pathlib
import sys
import time

import torch
import transformers

import treemask
from treemask.hf import TrieLogitsProcessor


def read_taxonomy(path: pathlib.Path):
    text = path.read_text(encoding="utf-8")
    lines = [line.rstrip("\r") for line in text.splitlines()]
    if path.suffix == ".tsv":  # IAB: 2 header rows, tiers in columns 4..7
        labels = [" > ".join(c for c in line.split("\t")[3:7] if c) for line in lines[2:]]
    elif any(" - " in line for line in lines[:5]):  # Google: "<id> - A > B"
        labels = [line.split(" - ", 1)[1] for line in lines if line and not line.startswith("#")]
    else:
        labels = [line.strip() for line in lines]
    return sorted({label for label in labels if label})


def load_model(args):
    if args.model:
        tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model)
        return tokenizer, model
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=args.tokenizer_file)
    if tokenizer.eos_token_id is None:
        tokenizer.eos_token = args.eos_token
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    # The vocabulary rounded up as model configs do (Qwen2.5: 151,665 -> 151,936).
    vocab_size = (len(tokenizer) + 255) // 256 * 256
    config = transformers.Qwen2Config(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(args.seed)
    return tokenizer, transformers.Qwen2ForCausalLM(config).eval()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("texts", nargs="+", help="the texts to classify")
    parser.add_argument("--taxonomy", type=pathlib.Path, required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="a transformers causal LM (directory or cached hub name)")
    source.add_argument("--tokenizer-file", help="a tokenizer.json, with --random-model")
    parser.add_argument("--random-model", action="store_true", help="a tiny random model (no weights needed)")
    parser.add_argument("--eos-token", default="<|im_end|>", help="EOS of a bare tokenizer.json")
    parser.add_argument("--top", type=int, default=4, help="categories per text (beams)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.tokenizer_file and not args.random_model:
        parser.error("--tokenizer-file needs --random-model (or use --model)")

    tokenizer, model = load_model(args)
    labels = read_taxonomy(args.taxonomy)
    eos = tokenizer.eos_token_id
    # Built once per taxonomy and tokenizer; trie.save() / Trie.load() cache it.
    start = time.perf_counter()
    trie = treemask.Trie.from_labels(labels, tokenizer, model.config.vocab_size, [eos])
    print("%d labels -> %d trie nodes in %.2f s (%d skipped: they do not round-trip)"
          % (len(labels), trie.stats().n_nodes, time.perf_counter() - start, len(trie.skipped_labels)))

    tokenizer.padding_side = "left"
    prompts = ["Text: %s\nCategory:" % text for text in args.texts]
    inputs = tokenizer(prompts, return_tensors="pt", padding=True)
    prompt_length = inputs["input_ids"].shape[1]
    processor = TrieLogitsProcessor(trie)
    with torch.no_grad():
        out = model.generate(**inputs, logits_processor=[processor], num_beams=args.top,
                             num_return_sequences=args.top, do_sample=False,
                             max_new_tokens=trie.stats().max_depth + 1, eos_token_id=eos,
                             pad_token_id=tokenizer.pad_token_id, output_scores=True,
                             return_dict_in_generate=True)

    known = set(labels)
    for i, text in enumerate(args.texts):
        print("\n%s" % text)
        for k in range(args.top):
            row = out.sequences[i * args.top + k, prompt_length:].tolist()
            tokens = row[: row.index(eos)] if eos in row else row
            # The trie maps the tokens back to the label exactly (no string matching).
            matcher = treemask.Matcher(trie)
            matcher.accept_tokens(tokens)
            names = matcher.labels()
            if not names or names[0] not in known:
                print("  not a label: %r" % tokenizer.decode(tokens))
                return 1
            print("  %+.3f  %s" % (out.sequences_scores[i * args.top + k].item(), names[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
