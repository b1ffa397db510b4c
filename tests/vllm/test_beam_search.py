"""Exact constrained beam search on vLLM (treemask.vllm.beam_search, and
treemask.vllm.client.beam_search through the OpenAI server) against
treemask.hf.beam_search on the same weights (the tiny Qwen2 loaded by
transformers, float32, CPU, in this venv): the same hypotheses, scores
within 1e-3, on the MiniOneRec catalogue shape (3 codes) for B in {1, 4,
16, 50} and prompts of different lengths, and on catalogues of mixed
lengths; prefix caching on (the offline engine) and off (the server) give
the same results; requests that name a state outside their own trie, an
unregistered trie, a file outside the allowed directories or more than one
token are refused.

One offline engine (prefix caching on) and one server (off, loopback, its
life bounded by the module) serve every test.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import pathlib
import random
import re
import tempfile
import types

import numpy as np
import pytest

import treemask
from conftest import COLORS, ROOT, vllm_server

vllm = pytest.importorskip("vllm")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
requests = pytest.importorskip("requests")
from vllm import LLM, SamplingParams  # noqa: E402

import treemask.vllm as tv  # noqa: E402
from treemask.beam_driver import EngineMismatchError  # noqa: E402
from treemask.vllm import beam as vllm_beam, client as vllm_client, registered  # noqa: E402
from treemask.vllm.files import REFUSED  # noqa: E402
from treemask.hf import beam_search as hf_beam_search  # noqa: E402

VOCAB = 151936
MAX_LOGPROBS = 64
CODE_BASE = 1000  # code <x_N> of level x is token CODE_BASE + 256 * level + N
MINIONEREC = ROOT / "examples" / "data" / "minionerec" / "Industrial_and_Scientific.index.json"


def minionerec_paths():
    items = json.loads(MINIONEREC.read_text())
    return [[CODE_BASE + 256 * (ord(code[1]) - ord("a")) + int(code.strip("<>").split("_")[1]) for code in codes]
            for codes in items.values()]


@pytest.fixture(scope="module")
def tiny(tiny_model):
    path, tokenizer, info = tiny_model
    return types.SimpleNamespace(path=path, tokenizer=tokenizer, eos=info["eos"],
                                 model=transformers.AutoModelForCausalLM.from_pretrained(
                                     str(path), dtype=torch.float32).eval())


@pytest.fixture(scope="module")
def catalogue(tiny):
    return treemask.Trie.from_paths(minionerec_paths(), VOCAB, [tiny.eos])


@pytest.fixture(scope="module")
def llm(tiny):
    engine = LLM(model=str(tiny.path), gpu_memory_utilization=0.15, max_model_len=512, max_num_seqs=256, seed=0,
                 dtype="float32", enforce_eager=True, enable_prefix_caching=True,
                 logprobs_mode="processed_logits", max_logprobs=MAX_LOGPROBS)
    yield engine
    engine.llm_engine.engine_core.shutdown()


@pytest.fixture(scope="module")
def prompts(tiny):
    """Token-id prompts of 5, 40 and 150 tokens (150 > the CPU backend's
    128-token cache block, so the prefix cache serves the beams) and text."""
    rng = np.random.default_rng(24)
    return [rng.integers(0, 150000, n).tolist() for n in (5, 40, 150)] + ["Recommend the next item:"]


def reference(tiny, prompt, trie, B):
    """treemask.hf.beam_search on the same weights: [(tokens, score)], dead slots left out."""
    ids = tiny.tokenizer.encode(prompt) if isinstance(prompt, str) else prompt
    out = hf_beam_search(tiny.model, torch.tensor([ids]), trie, B)
    return [(seq[len(ids):], float(s)) for seq, s in zip(out.sequences.tolist(), out.scores.tolist())
            if s > -np.inf]


def strip_padding(hyps, pad):
    """hf pads hypotheses that finished early; the vLLM drivers do not."""
    out = []
    for tokens, score in hyps:
        while tokens and tokens[-1] == pad:
            tokens = tokens[:-1]
        out.append((tokens, score))
    return out


def assert_same(got, want, context):
    assert [t for t, _ in got] == [t for t, _ in want], context
    np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-3, err_msg=str(context))


def assert_catalogue_items(hyps, trie):
    for tokens, _ in hyps:
        m = treemask.Matcher(trie)
        assert m.accept_tokens(tokens) == len(tokens) and m.is_terminated(), tokens


@pytest.mark.parametrize("B", [1, 4, 16, 50])
def test_equals_hf_beam_search_on_minionerec_codes(llm, tiny, catalogue, prompts, B):
    got = tv.beam_search(llm, prompts, catalogue, B)
    assert len(got) == len(prompts)
    for prompt, hyps in zip(prompts, got):
        assert len(hyps) == B
        context = (B, prompt if isinstance(prompt, str) else len(prompt))
        assert_same(hyps, reference(tiny, prompt, catalogue, B), context)
        assert_catalogue_items(hyps, catalogue)
        assert all(len(t) == 4 for t, _ in hyps)  # 3 codes and EOS
        assert [s for _, s in hyps] == sorted((s for _, s in hyps), reverse=True)


def mixed_catalogue(eos, seed, n_items):
    """Items of 1 to 4 tokens, some the prefix of others."""
    rng = random.Random(seed)
    items = set()
    while len(items) < n_items:
        item = tuple(rng.randrange(2000, 2040) for _ in range(rng.randint(1, 4)))
        items.add(item)
        if rng.random() < 0.3:
            items.add(item[:-1] or item)
    return treemask.Trie.from_paths(sorted(items), VOCAB, [eos])


@pytest.mark.parametrize("B", [4, 16])
def test_mixed_length_catalogues_follow_hf_beam_search(llm, tiny, prompts, B):
    """Finished hypotheses carry over and compete in the B slots; a trie with
    fewer items than B leaves slots dead (left out here, -inf in hf)."""
    for trie in (mixed_catalogue(tiny.eos, B, 40), treemask.Trie.from_paths([[2001], [2001, 2002], [2003, 2004]],
                                                                            VOCAB, [tiny.eos])):
        got = tv.beam_search(llm, prompts[:3], trie, B)
        for prompt, hyps in zip(prompts[:3], got):
            want = strip_padding(reference(tiny, prompt, trie, B), tiny.model.generation_config.pad_token_id)
            assert_same(hyps, want, (B, len(prompt)))
            assert_catalogue_items(hyps, trie)
            assert len(hyps) == min(B, trie.stats().n_terminals)
        assert len({len(t) for hyps in got for t, _ in hyps}) > 1, "items of several lengths come back"


def test_choice_list_and_n_return(llm, tiny):
    keys = {"treemask_choices": COLORS, "treemask_prefix": " "}
    got = tv.beam_search(llm, ["My favourite color is"], keys, 6, n_return=3)[0]
    trie = treemask.Trie.from_labels(COLORS, tiny.tokenizer, VOCAB, [tiny.eos], prefix=" ")
    want = strip_padding(reference(tiny, "My favourite color is", trie, 6), tiny.model.generation_config.pad_token_id)
    assert_same(got, want[:3], "choices")
    assert {tiny.tokenizer.decode(t[:-1]) for t, _ in got} <= {" " + c for c in COLORS}


def _texts(tokenizer, hyps, eos):
    return [tokenizer.decode(t[:-1]) for t, _ in hyps if t and t[-1] == eos]


@pytest.mark.parametrize("B", [4, 8])
def test_string_sets_return_distinct_strings(llm, tiny, B):
    """Issue 29 item 5: over a string set (any tokenization), each string
    comes back once, by its best tokenization (the same hypotheses and
    scores as hf.beam_search over the same set), through the choice keys
    and through a registered Trie."""
    vocab = treemask.Vocab.from_tokenizer(tiny.tokenizer, VOCAB)
    strings = [*COLORS, "re", "redd", "bl"]  # prefixes of one another: many spellings share bytes
    trie = treemask.Trie.from_strings(strings, vocab, [tiny.eos], prefix=" ")
    keys = {"treemask_choices": strings, "treemask_prefix": " ", "treemask_tokenization": "any"}
    pad = tiny.model.generation_config.pad_token_id
    for prompt in ("My favourite color is", [5, 6, 7, 8]):
        want = strip_padding(reference(tiny, prompt, trie, B), pad)
        for source in (keys, trie):
            got = tv.beam_search(llm, [prompt], source, B)[0]
            assert_same(got, want, (B, prompt, type(source).__name__))
            texts = _texts(tiny.tokenizer, got, tiny.eos)
            assert len(texts) == len(set(texts)), texts
            assert set(texts) <= {" " + s for s in strings}


def test_beams_are_served_from_the_prefix_cache(llm, catalogue, prompts):
    long_prompt = prompts[2]
    hyps = tv.beam_search(llm, [long_prompt], catalogue, 4)[0]
    beam = hyps[0][0][:2]
    params = SamplingParams(max_tokens=1, temperature=0, logprobs=4, detokenize=False,
                            extra_args={"treemask_trie_id": tv.register_trie(catalogue),
                                        "treemask_beam_tokens": beam})
    try:
        out = llm.generate([{"prompt_token_ids": long_prompt + beam}], params, use_tqdm=False)[0]
    finally:
        tv.unregister_trie(params.extra_args["treemask_trie_id"])
    assert out.num_cached_tokens >= 128, out.num_cached_tokens
    # The row was the beam's: its allowed continuations as log-probabilities, -inf elsewhere.
    m = treemask.Matcher(catalogue)
    m.accept_tokens(beam)
    finite = {t: lp.logprob for t, lp in out.outputs[0].logprobs[0].items() if lp.logprob > -np.inf}
    assert set(finite) <= set(m.next_tokens()) and len(finite) == min(4, len(m.next_tokens()))
    assert all(v <= 0 for v in finite.values())


# ---- the processor's beam rows, without a model ----------------------------------

SMALL_V, SMALL_EOS = 300, 290


def small_processor(slots=4):
    model_config = types.SimpleNamespace(
        get_vocab_size=lambda: SMALL_V, try_get_generation_config=lambda: {"eos_token_id": [SMALL_EOS]},
        hf_text_config=types.SimpleNamespace(eos_token_id=SMALL_EOS), tokenizer=None, skip_tokenizer_init=True,
        trust_remote_code=False, tokenizer_revision=None)
    config = types.SimpleNamespace(model_config=model_config,
                                   scheduler_config=types.SimpleNamespace(max_num_seqs=slots))
    return tv.TrieLogitsProcessor(config, torch.device("cpu"), False)


def test_processor_writes_beam_rows_and_masks_the_others():
    from vllm.v1.sample.logits_processor import BatchUpdate

    trie = treemask.Trie.from_paths([[1, 2, 3], [1, 2, 4], [1, 5], [6]], SMALL_V, [SMALL_EOS])
    trie_id = tv.register_trie(trie)
    try:
        proc = small_processor()
        beam = {"treemask_trie_id": trie_id, "treemask_beam_tokens": [1, 2]}
        proc.update_state(BatchUpdate(batch_size=4, removed=[], moved=[], added=[
            (0, SamplingParams(max_tokens=1, extra_args=beam), [9, 9, 1, 2], []),
            (1, SamplingParams(max_tokens=2, extra_args={"treemask_trie_id": trie_id}), [9], []),
            (2, SamplingParams(max_tokens=4), [9], []),
            # Its prompt does not end with its beam's tokens: fails closed (stop token only).
            (3, SamplingParams(max_tokens=1, extra_args=beam), [9, 9, 1, 7], []),
        ]))
        logits = torch.randn(4, SMALL_V) * 4
        before = logits.clone()
        proc.apply(logits)
        # The beam row: the log-softmax of the whole unmasked row at 3 and 4 (no
        # length budget although max_tokens is 1), -inf elsewhere.
        want = torch.full((SMALL_V,), float("-inf"))
        want[[3, 4]] = torch.log_softmax(before[0], dim=-1)[[3, 4]]
        assert torch.allclose(logits[0], want, atol=1e-6) and torch.equal(torch.isinf(logits[0]), torch.isinf(want))
        # A plain constrained row is masked, not normalized, and keeps its length budget (max_tokens 2: [6]).
        assert torch.isfinite(logits[1]).nonzero().flatten().tolist() == [6]
        assert logits[1, 6] == before[1, 6]
        assert torch.equal(logits[2], before[2])
        finite = torch.isfinite(logits[3]).nonzero().flatten().tolist()
        assert finite == [SMALL_EOS]
    finally:
        tv.unregister_trie(trie_id)


def test_beam_rows_hold_the_unmasked_log_softmax_of_any_rows():
    """normalize_beam_rows on scattered and contiguous rows, fp32 and bf16."""
    g = torch.Generator().manual_seed(3)
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 0.0)):
        x = (torch.randn(7, 1000, generator=g) * 5).to(dtype)
        for rows in ([5, 1, 3, 0], [2, 3, 4, 5]):
            y = x.clone()
            vllm_beam.normalize_beam_rows(y, rows)
            want = torch.log_softmax(x[rows].float(), dim=-1).to(dtype)
            assert torch.allclose(y[rows].float(), want.float(), atol=tol, rtol=0)
            others = [r for r in range(7) if r not in rows]
            assert torch.equal(y[others], x[others])


# ---- refusals ------------------------------------------------------------------


def refused(llm, extra, message, max_tokens=1):
    from vllm.exceptions import VLLMValidationError

    with pytest.raises((ValueError, VLLMValidationError), match=message):
        llm.generate([[1, 2, 3, 4]], SamplingParams(max_tokens=max_tokens, temperature=0, extra_args=extra),
                     use_tqdm=False)


def test_a_beam_reaches_only_states_of_its_own_trie(llm, tiny, catalogue):
    other = treemask.Trie.from_paths([[3000, 3001, 3002]], VOCAB, [tiny.eos])
    mine, theirs = tv.register_trie(catalogue), tv.register_trie(other)
    code = minionerec_paths()[0]
    try:
        # Another trie's walk (the "state" of another request) is not a walk of this one.
        refused(llm, {"treemask_trie_id": mine, "treemask_beam_tokens": [3000, 3001]},
                r"treemask_beam_tokens\[0\]: token 3000 does not continue")
        refused(llm, {"treemask_trie_id": theirs, "treemask_beam_tokens": code[:2]},
                r"treemask_beam_tokens\[0\]: token %d does not continue" % code[0])
        refused(llm, {"treemask_trie_id": mine, "treemask_beam_tokens": [code[0], 5]},
                r"treemask_beam_tokens\[1\]: token 5 does not continue")
        refused(llm, {"treemask_trie_id": mine, "treemask_beam_tokens": [*code, tiny.eos]},
                "ends with a stop token")
        refused(llm, {"treemask_trie_id": mine, "treemask_beam_tokens": code * 2},
                r"has 6 tokens, more than the trie's longest sequence \(3\) and a stop token")
        refused(llm, {"treemask_trie_id": mine, "treemask_beam_tokens": [-1]}, r"treemask_beam_tokens\[0\]")
        refused(llm, {"treemask_trie_id": mine, "treemask_beam_tokens": "1,2"}, "want a list of token ids")
        refused(llm, {"treemask_trie_id": mine, "treemask_beam_tokens": [], "treemask_stop_tokens": [5]},
                "treemask_stop_tokens applies to treemask_trie and treemask_choices only")
        # A beam request is one step: one token, whatever budget it asks for.
        refused(llm, {"treemask_trie_id": mine, "treemask_beam_tokens": []}, "max_tokens must be 1, got 4",
                max_tokens=4)
        # No key names a raw state.
        refused(llm, {"treemask_trie_id": mine, "treemask_state": 17}, "unknown key 'treemask_state'")
    finally:
        tv.unregister_trie(mine)
        tv.unregister_trie(theirs)
    # An ended search's trie, a guessed id, a path as an id.
    refused(llm, {"treemask_trie_id": mine, "treemask_beam_tokens": []}, "no trie is registered under this id")
    refused(llm, {"treemask_trie_id": "0" * 32, "treemask_beam_tokens": []}, "no trie is registered under this id")
    refused(llm, {"treemask_trie_id": "../../etc/passwd", "treemask_beam_tokens": []}, "want the 32 hex digits")
    # the engine is still fine
    assert llm.generate([[1, 2]], SamplingParams(max_tokens=2, temperature=0), use_tqdm=False)[0].outputs[0].token_ids


def test_driver_refuses_an_engine_it_cannot_use(llm, catalogue, monkeypatch):
    with pytest.raises(treemask.InvalidArgumentError, match="max_logprobs 64: create it with max_logprobs >= 65"):
        tv.beam_search(llm, [[1, 2]], catalogue, MAX_LOGPROBS + 1)
    with pytest.raises(treemask.InvalidArgumentError, match="n_return"):
        tv.beam_search(llm, [[1, 2]], catalogue, 4, n_return=5)
    with pytest.raises(treemask.InvalidArgumentError, match="prompts"):
        tv.beam_search(llm, "one prompt", catalogue, 4)
    raw = types.SimpleNamespace(llm_engine=types.SimpleNamespace(
        model_config=types.SimpleNamespace(logprobs_mode="raw_logprobs", max_logprobs=64)))
    with pytest.raises(treemask.InvalidArgumentError, match=r"logprobs_mode='processed_logits'.*'raw_logprobs'"):
        tv.beam_search(raw, [[1, 2]], catalogue, 4)
    import vllm.v1.sample.logits_processor as lp

    monkeypatch.setattr(lp, "cached_load_custom_logitsprocs", lambda names: [])
    with pytest.raises(treemask.UnsupportedError, match="logits processor is not loaded"):
        tv.beam_search(llm, [[1, 2]], catalogue, 4)
    assert not registered.registered_ids(), "every registration was removed"


def test_driver_refuses_a_string_set_over_another_vocabulary(llm, tiny):
    """Issue 29: a string set built over another vocabulary (the model's
    token bytes shifted by one id: same width) was searched, and its
    hypotheses spelled other bytes. Its fingerprint must be the model's."""
    model_vocab = treemask.Vocab.from_tokenizer(tiny.tokenizer, VOCAB)
    n = model_vocab.n_tokens
    other = treemask.Vocab.from_token_bytes([model_vocab.token_bytes((i + 1) % n) for i in range(n)], VOCAB)
    foreign = treemask.Trie.from_strings(["cat", "dog"], other, [tiny.eos], prefix=" ")
    with pytest.raises(tv.RequestError, match=r"trie is a string set over another vocabulary \(fingerprint "
                                              r"[0-9a-f]{16}, vocab_size %d\) than this model's" % VOCAB):
        tv.beam_search(llm, [[1, 2, 3]], foreign, 2)
    narrow = treemask.Trie.from_strings(["cat", "dog"], treemask.Vocab.from_tokenizer(tiny.tokenizer), [tiny.eos],
                                        prefix=" ")
    with pytest.raises(tv.RequestError, match="trie is a string set over another vocabulary"):
        tv.beam_search(llm, [[1, 2, 3]], narrow, 2)
    assert not registered.registered_ids(), "nothing was registered"
    # over the model's own vocabulary: searched, every hypothesis spells a string of the set
    own = treemask.Trie.from_strings(["cat", "dog"], model_vocab, [tiny.eos], prefix=" ")
    (hyps,) = tv.beam_search(llm, [[1, 2, 3]], own, 2)
    assert hyps
    for tokens, _ in hyps:
        assert tokens[-1] == tiny.eos
        assert tiny.tokenizer.decode(tokens[:-1]) in (" cat", " dog"), tokens


# ---- the OpenAI server: client-side driver, prefix caching off ------------------


@pytest.fixture(scope="module")
def tries_dir(tmp_path_factory, catalogue):
    """An allowed directory and one outside every allowed directory (the
    session's temporary directory is allowed: conftest)."""
    allowed = tmp_path_factory.mktemp("allowed")
    catalogue.save(allowed / "catalogue.tmtrie")
    with tempfile.TemporaryDirectory(prefix="treemask-outside-") as outside:
        catalogue.save(pathlib.Path(outside) / "catalogue.tmtrie")
        yield types.SimpleNamespace(allowed=allowed, outside=pathlib.Path(outside))


@pytest.fixture(scope="module")
def server(tiny, tries_dir, tmp_path_factory):
    """Prefix caching off; the operator allows tries_dir.allowed only."""
    with vllm_server(tiny.path, tmp_path_factory.mktemp("server"),
                     env={"TREEMASK_VLLM_TRIE_DIRS": str(tries_dir.allowed)},
                     extra_args=["--max-model-len", "512", "--max-num-seqs", "256", "--no-enable-prefix-caching",
                                 "--logprobs-mode", "processed_logits", "--max-logprobs", str(MAX_LOGPROBS)]) as s:
        yield s.base


@pytest.mark.parametrize("B", [16, 50])
def test_server_without_prefix_caching_gives_the_same_results(server, llm, tiny, catalogue, tries_dir, prompts, B):
    keys = {"treemask_trie": str(tries_dir.allowed / "catalogue.tmtrie")}
    got = vllm_client.beam_search(server, "tiny", prompts, catalogue, B, keys=keys)
    offline = tv.beam_search(llm, prompts, catalogue, B)  # prefix caching on
    for prompt, hyps, cached in zip(prompts, got, offline):
        context = (B, prompt if isinstance(prompt, str) else len(prompt))
        assert_same(hyps, cached, context)
        assert_same(hyps, reference(tiny, prompt, catalogue, B), context)


def test_server_string_sets_return_distinct_strings(server, llm, tiny):
    vocab = treemask.Vocab.from_tokenizer(tiny.tokenizer, VOCAB)
    strings = [*COLORS, "re", "redd", "bl"]
    trie = treemask.Trie.from_strings(strings, vocab, [tiny.eos], prefix=" ")
    keys = {"treemask_choices": strings, "treemask_prefix": " ", "treemask_tokenization": "any"}
    got = vllm_client.beam_search(server, "tiny", ["My favourite color is"], trie, 8, keys=keys)[0]
    assert_same(got, tv.beam_search(llm, ["My favourite color is"], keys, 8)[0], "server vs offline")
    texts = _texts(tiny.tokenizer, got, tiny.eos)
    assert len(texts) == len(set(texts)), texts


def completion(server, xargs):
    return requests.post(server + "/v1/completions", json={
        "model": "tiny", "prompt": [1, 2, 3], "max_tokens": 1, "temperature": 0, "logprobs": 4,
        "vllm_xargs": xargs}, timeout=120)


def test_server_refuses_foreign_states_and_unregistered_tries(server, tries_dir):
    allowed = str(tries_dir.allowed / "catalogue.tmtrie")
    for xargs, message in [
        ({"treemask_trie": allowed, "treemask_beam_tokens": [3000, 3001]}, "token 3000 does not continue"),
        ({"treemask_trie_id": "0123456789abcdef" * 2, "treemask_beam_tokens": []}, "no trie is registered"),
        ({"treemask_trie_id": "/tmp/x.tmtrie", "treemask_beam_tokens": []}, "want the 32 hex digits"),
    ]:
        r = completion(server, xargs)
        assert r.status_code == 400, (xargs, r.status_code, r.text)
        assert message in r.json()["error"]["message"], r.text
    assert requests.get(server + "/health", timeout=10).status_code == 200


def test_server_refuses_a_trie_outside_the_allowed_directories(server, tries_dir, catalogue):
    """A beam request's file is subject to the operator's allowlist, with the
    one answer of every refused name."""
    code = minionerec_paths()[0]
    for name in (str(tries_dir.outside / "catalogue.tmtrie"), "../" + tries_dir.outside.name + "/catalogue.tmtrie",
                 str(tries_dir.allowed / ".." / "nothing.tmtrie")):
        r = completion(server, {"treemask_trie": name, "treemask_beam_tokens": code[:1]})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"] == "treemask: " + REFUSED, r.text
    with pytest.raises(vllm_client.ServerError, match=re.escape("HTTP 400: treemask: " + REFUSED)):
        vllm_client.beam_search(server, "tiny", [[1, 2, 3]], catalogue, 4,
                                keys={"treemask_trie": str(tries_dir.outside / "catalogue.tmtrie")})


def test_client_driver_detects_a_server_trie_that_is_not_its_own(server, tiny, tries_dir):
    other = treemask.Trie.from_paths([[2001, 2002], [2003]], VOCAB, [tiny.eos])
    with pytest.raises(EngineMismatchError, match="does not allow"):
        vllm_client.beam_search(server, "tiny", [[1, 2, 3]], other, 4,
                                keys={"treemask_trie": str(tries_dir.allowed / "catalogue.tmtrie")})
    with pytest.raises(vllm_client.ServerError, match="HTTP 400"):
        vllm_client.beam_search(server, "tiny", [[1, 2, 3]], other, MAX_LOGPROBS + 1,
                                keys={"treemask_trie": str(tries_dir.allowed / "catalogue.tmtrie")})
