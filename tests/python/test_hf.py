"""TrieLogitsProcessor without a model: generation is simulated with
random tokens, beam reordering, finished rows and padding, and every row's
mask is compared with the plain-Python model of its own generated tokens.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import random

import pytest

import treemask
from conftest import scaled
from oracle import TrieModel, random_paths

torch = pytest.importorskip("torch", reason="torch is not installed (./dev installs it)")
pytest.importorskip("transformers", reason="transformers is not installed (./dev installs it)")
from treemask.hf import TrieLogitsProcessor  # noqa: E402

VOCAB, EOS, PAD = 300, 299, 298


@pytest.fixture(params=["host", "staged", "device"])
def path(request, monkeypatch):
    """Which path masks the scores: the host walk; the host walk with its
    rows staged to the scores' device and masked there (a libtreemask
    without usable CUDA: here the stage is the CPU, so the torch fallback
    masks); or the device path (treemask.torch's wrappers and follow_rows)
    over the host twins on CPU tensors (host_cuda.py; the kernels
    themselves run in tests/cuda and tests/python/test_cuda.py). Returns a
    function that routes a processor, and the HostCudaLib (None but for the
    device path)."""
    if request.param == "host":
        return lambda processor: processor, None
    if request.param == "staged":
        def stage(processor):
            processor._staged = lambda scores: True
            return processor
        return stage, None
    import host_cuda

    host = host_cuda.install(monkeypatch)

    def route(processor):
        processor._device_path = lambda scores: True
        return processor
    return route, host


def allowed_in(scores_row):
    return torch.nonzero(torch.isfinite(scores_row)).flatten().tolist()


def expected_allowed(model: TrieModel, generated, pad=None):
    """What a row may generate next: tokens after the first stop token are
    padding and ignored; an off-trie token closes the row (fail_closed)."""
    prefix = []
    for t in generated:
        if t in model.stops:
            return sorted(model.stops + ([pad] if pad is not None else []))
        if not model.is_prefix(tuple(prefix + [t])):
            return list(model.stops)
        prefix.append(t)
    return model.allowed(tuple(prefix))


def simulate(processor, model, rng, n_rows, steps, prompt, reorder=True, skip_step=None, pad=None, wild=0.0):
    ids = torch.tensor([prompt] * n_rows, dtype=torch.long)
    for step in range(steps):
        scores = torch.zeros((n_rows, VOCAB + 4))  # logits wider than the vocab (padded)
        if step != skip_step:
            out = processor(ids, scores)
            # Issue 14 item 13: a new tensor; scores (the raw logits
            # transformers returns with output_logits=True) stay unmasked.
            assert out is not scores and out.shape == scores.shape
            assert torch.isfinite(scores).all()
        for r in range(n_rows):
            generated = ids[r, len(prompt):].tolist()
            want = expected_allowed(model, generated, pad)
            if step != skip_step:
                assert allowed_in(out[r]) == want, (step, r, generated)
        tokens = []
        for r in range(n_rows):
            generated = ids[r, len(prompt):].tolist()
            if any(t in model.stops for t in generated):
                tokens.append(pad if pad is not None else EOS)
            elif rng.random() < wild:
                tokens.append(rng.randrange(VOCAB))  # another processor forced something
            else:
                tokens.append(rng.choice(expected_allowed(model, generated)))
        ids = torch.cat([ids, torch.tensor(tokens)[:, None]], dim=1)
        if reorder:  # beam search: rows are regrouped by their parents
            ids = ids[torch.tensor([rng.randrange(n_rows) for _ in range(n_rows)])]
    return ids


@pytest.mark.parametrize("reorder", [False, True])
def test_rows_follow_their_own_tokens(reorder, path):
    route, host = path
    rng = random.Random(int(reorder))
    for _ in range(scaled(6)):
        paths = random_paths(rng, 30, 290, 6)
        trie = treemask.Trie.from_paths(paths, VOCAB, [EOS])
        model = TrieModel(paths, [EOS])
        processor = route(TrieLogitsProcessor(trie, pad_token_id=PAD))
        # The cached path must serve every step: walking from the root would
        # make a step cost O(rows x length). On the device path every row
        # finds its parent among the previous call's rows.
        processor._state_from_root = None
        simulate(processor, model, rng, n_rows=8, steps=9, prompt=[5, 6, 7], reorder=reorder, pad=PAD)
        if host is not None:
            assert host.rows_walked == 0 and host.calls["follow_rows_mask_logits"] > 0
            # the processor vouches for its tensors: no pointer queries in the library
            assert host.flags["follow_rows_mask_logits"] == {host.TREEMASK_CUDA_CALLER_CHECKED_POINTERS}


def test_off_trie_tokens_close_the_row(path):
    route, _host = path
    rng = random.Random(9)
    paths = random_paths(rng, 30, 290, 5)
    trie = treemask.Trie.from_paths(paths, VOCAB, [EOS])
    simulate(route(TrieLogitsProcessor(trie)), TrieModel(paths, [EOS]), rng, 6, 7, [1], wild=0.2)


def test_a_skipped_step_and_a_new_generation(path):
    route, host = path
    rng = random.Random(4)
    paths = random_paths(rng, 30, 290, 6)
    trie = treemask.Trie.from_paths(paths, VOCAB, [EOS])
    model = TrieModel(paths, [EOS])
    processor = route(TrieLogitsProcessor(trie))
    simulate(processor, model, rng, 4, 6, [1, 2], skip_step=2)
    assert processor.prompt_length == 2
    # The step after the skipped one found no parents: its 4 rows walked.
    assert host is None or host.rows_walked == 4
    # A second generate() call with another prompt length re-infers it.
    simulate(processor, model, rng, 3, 5, [8, 8, 8, 8])
    assert processor.prompt_length == 4
    assert host is None or host.rows_walked == 4


def test_explicit_prompt_length_and_argument_errors(path):
    route, _host = path
    trie = treemask.Trie.from_paths([[1, 2]], VOCAB, [EOS])
    processor = route(TrieLogitsProcessor(trie, prompt_length=2))
    scores = torch.zeros((1, VOCAB))
    out = processor(torch.tensor([[7, 7, 1]]), scores)  # one token generated already
    assert allowed_in(out[0]) == [2]
    with pytest.raises(treemask.InvalidArgumentError, match="fewer than prompt_length"):
        TrieLogitsProcessor(trie, prompt_length=5)(torch.tensor([[1, 2]]), torch.zeros((1, VOCAB)))
    with pytest.raises(treemask.InvalidArgumentError, match="pad_token_id"):
        TrieLogitsProcessor(trie, pad_token_id=VOCAB)
    with pytest.raises(treemask.InvalidArgumentError, match="treemask.Trie"):
        TrieLogitsProcessor([[1, 2]])


def test_threaded_masking_gives_the_same_scores():
    # 8 rows x 151,936 fp32 scores (4.9 MB): large enough for 2 threads.
    rng = random.Random(12)
    vocab, eos = 151936, 151645
    paths = random_paths(rng, 200, 151000, 5)
    trie = treemask.Trie.from_paths(paths, vocab, [eos])
    paths = [p for p in paths if len(p) >= 2]
    ids = torch.tensor([[3, 3] + paths[r][:2] for r in range(8)])
    scores = torch.randn((8, vocab))
    one, two = scores.clone(), scores.clone()
    TrieLogitsProcessor(trie, prompt_length=2)(ids, one)
    TrieLogitsProcessor(trie, prompt_length=2, n_threads=2)(ids, two)
    assert torch.equal(one, two)
    assert all(len(allowed_in(row)) >= 1 for row in one)
    with pytest.raises(treemask.InvalidArgumentError, match="n_threads"):
        TrieLogitsProcessor(trie, n_threads=0)


def test_bfloat16_scores_and_a_transformers_processor_list():
    from transformers import LogitsProcessorList

    trie = treemask.Trie.from_paths([[1, 2], [3]], VOCAB, [EOS])
    processors = LogitsProcessorList([TrieLogitsProcessor(trie)])
    scores = torch.zeros((2, VOCAB), dtype=torch.bfloat16)
    out = processors(torch.tensor([[0], [0]]), scores)
    assert allowed_in(out[0].float()) == [1, 3] == allowed_in(out[1].float())


def test_ids_outside_int32_are_rejected_not_skipped(path):
    route, _host = path
    trie = treemask.Trie.from_paths([[1, 2]], VOCAB, [EOS])
    processor = route(TrieLogitsProcessor(trie, prompt_length=0))
    scores = torch.zeros((2, VOCAB))
    out = processor(torch.tensor([[1, 2**40], [1, -5]]), scores)
    # Both tokens are off the trie: fail_closed leaves only the stop token.
    assert allowed_in(out[0]) == [EOS] and allowed_in(out[1]) == [EOS]
