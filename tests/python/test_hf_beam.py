"""treemask.hf.beam_search against transformers' generate() on real MiniOneRec
semantic IDs: a tiny random-weight Qwen2 (built from a config, no download)
whose vocabulary is Qwen2.5's 151,936 tokens plus the 3 x 256 semantic-ID
code tokens (code <L_N> is token 151936 + 256 * level + N, as MiniOneRec adds
them). Every item is 3 codes, so the catalogue is fixed-length and the two
searches must return the same sequences, with scores equal to generate's
sequences_scores at length_penalty=0.0 and L ** length_penalty times them
otherwise (L = 4 generated tokens: 3 codes and EOS).

Catalogues: the bundled examples/data/minionerec/Industrial_and_Scientific
(always) and every ../shared/data/semantic-ids/minionerec/*.index.json
(where ../shared is present).

Suite `python-hf`.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import re

import numpy as np
import pytest

import treemask
from conftest import SHARED_DATA, SOURCE_ROOT

torch = pytest.importorskip("torch", reason="torch is not installed (./dev installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (./dev installs it)")
from treemask.hf import TrieLogitsProcessor, beam_search  # noqa: E402

BASE_VOCAB = 151936
EOS, PAD = 151645, 151643

BUNDLED = SOURCE_ROOT / "examples" / "data" / "minionerec" / "Industrial_and_Scientific.index.json"
CATALOGUES = [BUNDLED] + sorted((SHARED_DATA / "semantic-ids" / "minionerec").glob("*.index.json"))


def minionerec_paths(path):
    """The token paths of a MiniOneRec index.json and the model vocabulary size."""
    items = json.loads(path.read_text())
    levels = max(len(codes) for codes in items.values())
    paths = []
    for codes in items.values():
        path_tokens = []
        for code in codes:
            letter, number = code.strip("<>").split("_")
            path_tokens.append(BASE_VOCAB + 256 * (ord(letter) - ord("a")) + int(number))
        paths.append(path_tokens)
    return paths, BASE_VOCAB + 256 * levels


def minionerec_trie(path):
    """The trie of a MiniOneRec index.json and the model vocabulary size."""
    paths, vocab = minionerec_paths(path)
    return treemask.Trie.from_paths(paths, vocab, [EOS]), vocab


def tiny_qwen2(vocab_size, seed=0, attention="sdpa"):
    # A wide initializer spreads the logits, so that no two candidates of a
    # step are within float rounding of each other (the two searches compute
    # the log-softmax in different orders).
    config = transformers.Qwen2Config(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.5,
        tie_word_embeddings=True, eos_token_id=EOS, pad_token_id=PAD, bos_token_id=None,
        attn_implementation=attention)
    torch.manual_seed(seed)
    return transformers.Qwen2ForCausalLM(config).eval()


def generate(model, input_ids, attention_mask, trie, num_beams, length_penalty):
    with torch.no_grad():
        return model.generate(
            input_ids=input_ids, attention_mask=attention_mask, num_beams=num_beams,
            num_return_sequences=num_beams, do_sample=False, logits_processor=[TrieLogitsProcessor(trie)],
            max_new_tokens=trie.stats().max_depth + 1, eos_token_id=EOS, pad_token_id=PAD,
            length_penalty=length_penalty, return_dict_in_generate=True, output_scores=True)


def prompts(n_requests, length, seed, ragged):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, BASE_VOCAB, (n_requests, length), generator=g)
    mask = torch.ones_like(ids)
    if ragged:  # left padding, as generate wants it
        for r in range(n_requests):
            mask[r, : r % length] = 0
            ids[r, : r % length] = PAD
    return ids, mask


@pytest.mark.parametrize("catalogue", CATALOGUES, ids=lambda p: p.name.split(".")[0])
@pytest.mark.parametrize("num_beams,ragged", [(8, False), (50, True)])
def test_beam_search_equals_generate(catalogue, num_beams, ragged):
    trie, vocab = minionerec_trie(catalogue)
    assert trie.stats().max_depth == 3
    model = tiny_qwen2(vocab)
    input_ids, attention_mask = prompts(2, 6, num_beams, ragged)
    want = generate(model, input_ids, attention_mask, trie, num_beams, 0.0)
    got = beam_search(model, input_ids, trie, num_beams, attention_mask=attention_mask)
    assert got.sequences.shape == want.sequences.shape == (2 * num_beams, 6 + 4)
    assert got.sequences.dtype == torch.int64 and got.scores.dtype == torch.float32
    assert torch.equal(got.sequences, want.sequences)
    np.testing.assert_allclose(got.scores.numpy(), want.sequences_scores.numpy(), rtol=1e-5, atol=1e-4)
    # Every hypothesis is a catalogue item followed by EOS.
    for row in got.sequences[:, 6:].tolist():
        m = treemask.Matcher(trie)
        assert m.accept_tokens(row) == 4 and m.is_terminated()
    # The default length_penalty=1.0 divides by L = 4: same order, scores / 4.
    lp1 = generate(model, input_ids, attention_mask, trie, num_beams, 1.0)
    assert torch.equal(lp1.sequences, got.sequences)
    np.testing.assert_allclose(got.scores.numpy() / 4, lp1.sequences_scores.numpy(), rtol=1e-5, atol=1e-4)


def test_num_return_sequences_and_errors():
    trie, vocab = minionerec_trie(BUNDLED)
    model = tiny_qwen2(vocab, seed=1)
    input_ids, _ = prompts(3, 4, 0, False)
    full = beam_search(model, input_ids, trie, 6)
    top2 = beam_search(model, input_ids, trie, 6, num_return_sequences=2)
    assert top2.sequences.shape == (6, 8)
    keep = torch.tensor([0, 1, 6, 7, 12, 13])
    assert torch.equal(top2.sequences, full.sequences[keep])
    assert torch.equal(top2.scores, full.scores[keep])
    assert (full.scores.view(3, 6).diff(dim=1) <= 0).all(), "best first"
    # Stopped early: only 2 of the 4 tokens, nothing finished.
    short = beam_search(model, input_ids, trie, 6, max_new_tokens=2)
    assert short.sequences.shape == (18, 6)
    with pytest.raises(treemask.InvalidArgumentError, match="num_return_sequences"):
        beam_search(model, input_ids, trie, 2, num_return_sequences=3)
    with pytest.raises(treemask.InvalidArgumentError, match="num_beams"):
        beam_search(model, input_ids, trie, 0)
    with pytest.raises(treemask.InvalidArgumentError, match="input_ids"):
        beam_search(model, input_ids[0], trie, 2)
    with pytest.raises(treemask.InvalidArgumentError, match="trie"):
        beam_search(model, input_ids, None, 2)
    with pytest.raises(treemask.InvalidArgumentError, match="attention_mask"):
        beam_search(model, input_ids, trie, 2, attention_mask=torch.ones(3, 5, dtype=torch.long))


@pytest.mark.parametrize("num_beams", [1, 6, 40])
def test_device_search_loop_equals_the_host_loop(monkeypatch, num_beams):
    """treemask.hf's CUDA search loop over treemask.torch.DeviceBeam
    (start by top-k, graph-capturable steps, tensors throughout) with the
    device entry points answered by their host twins on CPU tensors
    (host_cuda.py): the same sequences and scores as the host loop, dead and
    finished slots included (the GPU test runs the real kernels,
    tests/python/test_cuda.py)."""
    import host_cuda

    import treemask.hf as hf

    trie, vocab = minionerec_trie(BUNDLED)
    model = tiny_qwen2(vocab, seed=3)
    input_ids, attention_mask = prompts(3, 5, seed=num_beams, ragged=True)
    want = beam_search(model, input_ids, trie, num_beams, attention_mask=attention_mask)
    host = host_cuda.install(monkeypatch)
    got = hf._beam_search_device(model, input_ids, trie, num_beams, num_beams, trie.stats().max_depth + 1,
                                 attention_mask, PAD)
    assert got.sequences.tolist() == want.sequences.tolist()
    assert torch.equal(got.scores, want.scores)
    assert host.calls["topk"] == 1 and host.calls["beam_step"] == trie.stats().max_depth


def mixed_length_trie(path):
    """MiniOneRec's items, a third of them cut to their first two codes (so
    hypotheses end at different steps)."""
    paths, vocab = minionerec_paths(path)
    paths = [p[:2] if i % 3 == 0 else p for i, p in enumerate(paths)]
    return treemask.Trie.from_paths(paths, vocab, [EOS]), vocab


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("num_beams", [1, 6, 40])
def test_compiled_search_loop_equals_the_host_loop(monkeypatch, num_beams, attention):
    """beam_search(compile=True)'s loop: the beams' KV cache a StaticCache
    (the prompt copied in per beam, reordered in place), the attention mask
    one tensor over it, the steps with fixed shapes and addresses (on a GPU
    captured in one CUDA graph: tests/python/test_cuda.py); here on CPU
    tensors through host_cuda.py, the same steps run eagerly. The same
    sequences as the host loop, the scores to float rounding (attention
    over the whole static cache, masked), with either attention
    implementation's mask (boolean for sdpa, additive for eager)."""
    import host_cuda

    import treemask.hf as hf

    trie, vocab = minionerec_trie(BUNDLED)
    model = tiny_qwen2(vocab, seed=3, attention=attention)
    input_ids, attention_mask = prompts(3, 5, seed=num_beams, ragged=True)
    want = beam_search(model, input_ids, trie, num_beams, attention_mask=attention_mask)
    host = host_cuda.install(monkeypatch)
    got = hf._beam_search_device(model, input_ids, trie, num_beams, num_beams, trie.stats().max_depth + 1,
                                 attention_mask, PAD, compile=True)
    assert got.sequences.tolist() == want.sequences.tolist()
    np.testing.assert_allclose(got.scores.numpy(), want.scores.numpy(), rtol=1e-5, atol=1e-5)
    assert host.calls["topk"] == 1 and host.calls["beam_step"] == trie.stats().max_depth


@pytest.mark.parametrize("compile", [False, True])
def test_steps_after_the_end_change_nothing(monkeypatch, compile):
    """On a GPU the device loop learns that every hypothesis has finished a
    step or two late (it never waits for the device), so it may run steps
    after the end: those must leave the result as it was. Forced here: the
    end is never seen, and the loop runs all of max_new_tokens = 8 steps
    over items of 2 and 3 codes that all end by step 4; the host loop stops
    there. Same sequences (as many columns) and scores."""
    import host_cuda

    import treemask.hf as hf

    trie, vocab = mixed_length_trie(BUNDLED)
    model = tiny_qwen2(vocab, seed=5)
    input_ids, attention_mask = prompts(2, 5, seed=7, ragged=True)
    want = beam_search(model, input_ids, trie, 6, attention_mask=attention_mask, max_new_tokens=8)
    assert want.sequences.shape[1] == 5 + 4, "the host loop stopped at the end"
    host = host_cuda.install(monkeypatch)
    monkeypatch.setattr(hf._EndProbe, "ended", lambda self: False)
    got = hf._beam_search_device(model, input_ids, trie, 6, 6, 8, attention_mask, PAD, compile=compile)
    assert host.calls["beam_step"] == 7, "every step ran"
    assert got.sequences.tolist() == want.sequences.tolist()
    np.testing.assert_allclose(got.scores.numpy(), want.scores.numpy(), rtol=1e-5, atol=1e-5)


def test_compiled_search_refuses_what_it_cannot_mask(monkeypatch):
    """compile=True passes its own full-attention mask: a model with sliding
    layers or another attention implementation is refused, naming it."""
    import host_cuda

    import treemask.hf as hf

    trie, vocab = minionerec_trie(BUNDLED)
    input_ids, attention_mask = prompts(1, 4, seed=0, ragged=False)
    host_cuda.install(monkeypatch)
    model = tiny_qwen2(vocab)
    model.config.layer_types = ["sliding_attention", "full_attention"]
    with pytest.raises(treemask.UnsupportedError, match="sliding_attention layers"):
        hf._beam_search_device(model, input_ids, trie, 2, 2, 4, attention_mask, PAD, compile=True)
    model = tiny_qwen2(vocab)
    model.config._attn_implementation = "flash_attention_2"
    with pytest.raises(treemask.UnsupportedError, match="flash_attention_2"):
        hf._beam_search_device(model, input_ids, trie, 2, 2, 4, attention_mask, PAD, compile=True)
    # On CPU tensors the host loop runs: nothing to compile, the same result.
    model = tiny_qwen2(vocab)
    assert torch.equal(beam_search(model, input_ids, trie, 2, compile=True).sequences,
                       beam_search(model, input_ids, trie, 2).sequences)


def test_compiled_search_refuses_a_transformers_without_static_layers(monkeypatch):
    """compile=True sets what transformers 5's StaticCache layers keep (the
    prompt copied in by lazy_initialization, a cumulative_length tensor on
    the device): a transformers whose layers lack either is refused before
    any work, naming its version and what is missing; compile=False still
    runs."""
    import host_cuda
    import transformers.cache_utils as cache_utils

    import treemask.hf as hf

    trie, vocab = minionerec_trie(BUNDLED)
    input_ids, attention_mask = prompts(1, 4, seed=0, ragged=False)
    host = host_cuda.install(monkeypatch)
    model = tiny_qwen2(vocab)

    class IntLength:  # an older layout: the length a Python int
        def __init__(self, max_cache_len):
            self.cumulative_length = 0

        def lazy_initialization(self, keys, values):
            pass

    class NoLazy:
        def __init__(self, max_cache_len):
            pass

    cases = [(IntLength, "whose cumulative_length is int, not a tensor"), (NoLazy, "without lazy_initialization")]
    for layer_class, message in cases:
        monkeypatch.setattr(cache_utils, "StaticLayer", layer_class)
        with pytest.raises(treemask.UnsupportedError, match="transformers %s has a StaticLayer %s"
                           % (re.escape(transformers.__version__), message)):
            hf._beam_search_device(model, input_ids, trie, 2, 2, 4, attention_mask, PAD, compile=True)
    monkeypatch.delattr(cache_utils, "StaticLayer")
    with pytest.raises(treemask.UnsupportedError, match=re.escape("has no cache_utils.StaticLayer")):
        hf._beam_search_device(model, input_ids, trie, 2, 2, 4, attention_mask, PAD, compile=True)
    assert host.calls.get("topk", 0) == 0, "refused before any work"
    got = hf._beam_search_device(model, input_ids, trie, 2, 2, 4, attention_mask, PAD, compile=False)
    assert got.sequences.tolist() == beam_search(model, input_ids, trie, 2, attention_mask=attention_mask,
                                                 max_new_tokens=4).sequences.tolist()


def _loop_storage(loop):
    """Where each tensor a captured step reads or writes lives."""
    tensors = [loop.generated, loop.tok, loop.src, loop.positions, loop.step_index, loop.n_steps, loop.allowed,
               loop.in_ids, loop.in_mask,
               loop.beam.states, loop.beam.scores, loop.beam.parents, loop.beam.tokens]
    for layer in loop.cache.layers:
        tensors += [layer.keys, layer.values, layer.cumulative_length]
    return [t.data_ptr() for t in tensors]


def test_compiled_loop_serves_the_next_search_of_the_same_shapes(monkeypatch):
    """compile=True keeps its loop (static KV cache, tensors, on a GPU the
    captured graphs) for the next search of the same shapes on the same model
    and trie, whose start (its prompts copied in, their forward pass, the
    first step; on a GPU a second graph) rewrites it in place: every tensor
    keeps its storage (captured graphs read them there), and each search
    equals the host loop's.
    Other shapes get their own loop, two per model at most (the least
    recently used goes); another trie, moved weights or a loop in use get a
    fresh one; clear_compiled drops them."""
    import host_cuda

    import treemask.hf as hf

    trie, vocab = mixed_length_trie(BUNDLED)
    model = tiny_qwen2(vocab, seed=11)
    max_new = 5
    host_cuda.install(monkeypatch)
    hf.clear_compiled()

    def search(input_ids, attention_mask, on=trie, beams=6):
        return hf._beam_search_device(model, input_ids, on, beams, beams, max_new, attention_mask, PAD,
                                      compile=True)

    def check(got, input_ids, attention_mask, on=trie, beams=6):
        want = beam_search(model, input_ids, on, beams, attention_mask=attention_mask, max_new_tokens=max_new)
        assert got.sequences.tolist() == want.sequences.tolist()
        np.testing.assert_allclose(got.scores.numpy(), want.scores.numpy(), rtol=1e-5, atol=1e-5)

    def loops():
        return list(hf._COMPILED._by_model.get(model, {}).values())

    a, b = prompts(3, 5, seed=1, ragged=True), prompts(3, 5, seed=2, ragged=False)
    check(search(*a), *a)
    [(loop, _, _)] = loops()
    storage = _loop_storage(loop)
    for ids, mask in (b, a, b):
        check(search(ids, mask), ids, mask)
        assert [entry[0] for entry in loops()] == [loop], "the same loop served"
        assert _loop_storage(loop) == storage, "rewritten in place"
    # Other shapes: their own loops, two per model.
    longer, wider = prompts(3, 7, seed=3, ragged=True), prompts(4, 5, seed=4, ragged=True)
    check(search(*longer), *longer)
    assert len(loops()) == 2
    check(search(*wider), *wider)
    assert len(loops()) == 2 and loop not in [entry[0] for entry in loops()], "the least recently used went"
    # Another trie of the same shapes, a loop in use: a fresh loop each.
    other_trie, _ = minionerec_trie(BUNDLED)
    check(search(*wider, on=other_trie), *wider, on=other_trie)
    busy = loops()[-1][0]  # the most recent
    assert busy.beam is not loops()[0][0].beam
    with busy.lock:
        check(search(*wider, on=other_trie), *wider, on=other_trie)
    assert busy in [entry[0] for entry in loops()]
    # Moved weights (model.to): the loop's captured step would read the old ones.
    before = [entry[0] for entry in loops()]
    model.double().float()
    for on in (other_trie, trie):  # each stale loop goes when its shapes come again
        check(search(*wider, on=on), *wider, on=on)
    assert len(loops()) == 2 and not {id(loop) for loop in before} & {id(entry[0]) for entry in loops()}
    hf.clear_compiled(model)
    assert loops() == []
    check(search(*a), *a)
    hf.clear_compiled()
    assert loops() == []
    hf.clear_compiled(5)  # nothing that cannot be cached is: nothing to drop, no error
