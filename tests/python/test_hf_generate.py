"""transformers' generate() constrained by TrieLogitsProcessor, end to end:
beam search (4 beams, 4 return sequences), greedy and sampling over a
tiny randomly initialised Qwen2 causal LM (built from a config, no
download). Every returned sequence must decode to a taxonomy label.

- Real world: the Qwen2.5 tokenizer from ../shared with the full 151,936-row
  vocabulary and the Google product taxonomy (5,582 labels). Skips with a
  message where ../shared is absent.
- Everywhere: the bundled IAB Content Taxonomy 3.1 (CC BY 3.0) with a small
  byte-level BPE tokenizer trained on it.

Suite `python-hf` (its own, so the cost of torch + transformers shows).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import pytest

import treemask
from conftest import SOURCE_ROOT
from taxonomy_data import google_labels, iab_labels, toy_tokenizer

torch = pytest.importorskip("torch", reason="torch is not installed (./dev installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (./dev installs it)")
from treemask.hf import TrieLogitsProcessor  # noqa: E402

PROMPTS = ["Product: trail running shoes for women. Category:", "Article: the best pizza in Naples. Topic:"]


def tiny_qwen2(vocab_size, eos, pad, seed=0):
    config = transformers.Qwen2Config(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
        tie_word_embeddings=True, eos_token_id=eos, pad_token_id=pad, bos_token_id=None)
    torch.manual_seed(seed)
    return transformers.Qwen2ForCausalLM(config).eval()


def check_outputs(out, prompt_length, tokenizer, trie, eos):
    """Each row: its tokens up to EOS spell exactly one label's path and
    decode to it; rows must have finished with EOS."""
    labels = set(trie.labels)
    for row in out[:, prompt_length:].tolist():
        assert eos in row, "a sequence did not finish: %s" % row
        tokens = row[: row.index(eos)]
        m = treemask.Matcher(trie)
        assert m.accept_tokens(tokens) == len(tokens) and m.accept_token(eos), tokens
        names = m.labels()
        assert names and all(n in labels for n in names)
        assert tokenizer.decode(tokens) == " " + names[0]


def generate_all_ways(model, tokenizer, trie, eos, pad):
    tokenizer.padding_side = "left"
    inputs = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    prompt_length = inputs["input_ids"].shape[1]
    max_new = trie.stats().max_depth + 1  # the longest label plus its EOS
    common = dict(max_new_tokens=max_new, eos_token_id=eos, pad_token_id=pad)
    with torch.no_grad():
        beams = model.generate(**inputs, logits_processor=[TrieLogitsProcessor(trie)], num_beams=4,
                               num_return_sequences=4, do_sample=False, **common)
        assert beams.shape[0] == 4 * len(PROMPTS)
        check_outputs(beams, prompt_length, tokenizer, trie, eos)
        greedy = model.generate(**inputs, logits_processor=[TrieLogitsProcessor(trie, prompt_length)],
                                do_sample=False, **common)
        check_outputs(greedy, prompt_length, tokenizer, trie, eos)
        torch.manual_seed(1)
        sampled = model.generate(**inputs, logits_processor=[TrieLogitsProcessor(trie, pad_token_id=pad)],
                                 do_sample=True, top_k=0, num_return_sequences=4, **common)
        check_outputs(sampled, prompt_length, tokenizer, trie, eos)
    return beams


def test_qwen25_tokenizer_google_taxonomy(shared_data):
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(shared_data / "tokenizers" / "qwen2.5-instruct" / "tokenizer.json"))
    eos, pad = 151645, 151643  # <|im_end|>, <|endoftext|>
    tokenizer.pad_token_id = pad
    labels = google_labels(shared_data)
    assert len(labels) == 5582
    trie = treemask.Trie.from_labels(labels, tokenizer, 151936, [eos])
    # Byte-level BPE round-trips every label.
    assert trie.skipped_labels == []
    model = tiny_qwen2(151936, eos, pad)
    generate_all_ways(model, tokenizer, trie, eos, pad)


def test_bundled_iab_taxonomy_with_a_toy_tokenizer():
    labels = iab_labels(SOURCE_ROOT)
    assert len(labels) == 704
    tokenizer = toy_tokenizer(labels + PROMPTS)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    trie = treemask.Trie.from_labels(labels, tokenizer, len(tokenizer), [eos])
    assert trie.skipped_labels == []
    model = tiny_qwen2(len(tokenizer), eos, pad)
    generate_all_ways(model, tokenizer, trie, eos, pad)


def test_output_logits_are_the_raw_logits():
    """Issue 14 item 13: transformers returns with output_logits=True the
    logits it passed to the processors; a processor that masked them in place
    made them come back masked. With output_scores the processed scores come
    back masked, each step its own."""
    paths = [[5, 6], [5, 7], [8]]
    eos, pad, vocab = 1, 0, 99
    trie = treemask.Trie.from_paths(paths, vocab, [eos])
    model = tiny_qwen2(vocab, eos, pad)
    inputs = torch.tensor([[10, 11, 12], [13, 14, 15]])
    with torch.no_grad():
        out = model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs),
                             logits_processor=[TrieLogitsProcessor(trie)], do_sample=False, max_new_tokens=3,
                             eos_token_id=eos, pad_token_id=pad, output_logits=True, output_scores=True,
                             return_dict_in_generate=True)
    assert len(out.logits) >= 2
    for raw, processed in zip(out.logits, out.scores):
        assert torch.isfinite(raw).all(), "raw logits came back masked"
        assert (torch.isfinite(processed).sum(dim=1) <= 2).all()
    assert out.scores[0].data_ptr() != out.scores[1].data_ptr()
    # The first step allows exactly the root's children.
    assert torch.nonzero(torch.isfinite(out.scores[0][0])).flatten().tolist() == [5, 8]


def test_the_device_path_generates_what_the_host_path_does(monkeypatch):
    """TrieLogitsProcessor's device path (states by follow_rows from the
    previous call's rows and the masked copy, one fused call; the ids copied
    as they are read) against its host path,
    through generate(): greedy, sampling with num_return_sequences, beam
    search with num_return_sequences, and a pad token allowed after EOS.
    The device entry points run as their host twins on CPU tensors
    (host_cuda.py); tests/python/test_cuda.py repeats this on a GPU."""
    import host_cuda

    labels = iab_labels(SOURCE_ROOT)
    tokenizer = toy_tokenizer(labels + PROMPTS)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    trie = treemask.Trie.from_labels(labels, tokenizer, len(tokenizer), [eos])
    model = tiny_qwen2(len(tokenizer), eos, pad, seed=5)
    tokenizer.padding_side = "left"
    inputs = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    common = dict(max_new_tokens=trie.stats().max_depth + 1, eos_token_id=eos, pad_token_id=pad,
                  return_dict_in_generate=True, output_scores=True)
    modes = {
        "greedy": dict(do_sample=False),
        "sampling": dict(do_sample=True, top_k=0, num_return_sequences=3),
        "beam search": dict(num_beams=4, num_return_sequences=4, do_sample=False),
        "beam search, pad allowed": dict(num_beams=3, num_return_sequences=2, do_sample=False),
    }
    host = host_cuda.install(monkeypatch)
    for name, kwargs in modes.items():
        results = []
        for on_device in (False, True):
            processor = TrieLogitsProcessor(trie, pad_token_id=pad if "pad" in name else None)
            processor._device_path = lambda scores, on_device=on_device: on_device
            torch.manual_seed(11)
            with torch.no_grad():
                results.append(model.generate(**inputs, logits_processor=[processor], **kwargs, **common))
        want, got = results
        assert torch.equal(got.sequences, want.sequences), name
        assert len(got.scores) == len(want.scores)
        for a, b in zip(got.scores, want.scores):
            assert torch.equal(torch.isfinite(a), torch.isfinite(b)), name
        check_outputs(got.sequences, inputs["input_ids"].shape[1], tokenizer, trie, eos)
    assert host.calls["follow_rows_mask_logits"] > 0 and host.rows_walked == 0
    assert host.flags["follow_rows_mask_logits"] == {host.TREEMASK_CUDA_CALLER_CHECKED_POINTERS}
