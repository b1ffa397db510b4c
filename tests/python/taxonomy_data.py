"""Taxonomy labels and a small deterministic tokenizer for the tests that run
transformers' generate().

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import pathlib


def iab_labels(source_root: pathlib.Path):
    """The IAB Content Taxonomy 3.1 (tests/data/iab, CC BY 3.0) as
    "Tier 1 > Tier 2 > ..." paths, one per category."""
    rows = (source_root / "tests" / "data" / "iab" / "content-taxonomy-3.1.tsv").read_text(encoding="utf-8")
    labels = []
    for line in rows.splitlines()[2:]:
        cols = line.rstrip("\r").split("\t")
        tiers = [c for c in cols[3:7] if c]
        if tiers:
            labels.append(" > ".join(tiers))
    return sorted(set(labels))


def google_labels(shared_data: pathlib.Path):
    """The Google product taxonomy (en-US) from ../shared: 5,582 paths."""
    path = shared_data / "taxonomies" / "google-product-taxonomy" / "taxonomy-with-ids.en-US.txt"
    return [line.split(" - ", 1)[1] for line in path.read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]


def toy_tokenizer(texts, vocab_size=600):
    """A byte-level BPE tokenizer trained on texts: deterministic, exact
    round trips, ids 0 and 1 are the end and pad tokens. Returns a
    transformers PreTrainedTokenizerFast."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|end|>", "<|pad|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([" " + t for t in texts], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|end|>", pad_token="<|pad|>")
