"""Beam search over string sets returns distinct strings, through every
Python beam API: the state-array step (Beam.step_states with ends=), the
batch form (BatchMatcher.beam_step), the vLLM drivers' sparse step
(treemask.beam_driver.BeamSearchState, with more_candidates when a beam's
best tokens spell fewer than B strings) and treemask.hf.beam_search; each
checked against a brute force written here from treemask.h's words: every
candidate of every beam, spelled out as bytes, ranked (score, beam, token),
the first B whose hypotheses (live: the bytes so far; finished: the whole
string) differ. Random string sets over random small vocabularies with
duplicate tokens (several tokens spelling the same bytes) and several stop
tokens.

Suite `python`.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import random
import zlib

import numpy as np
import pytest

import treemask
from conftest import scaled
from treemask.beam_driver import BeamSearchState

NEG_INF = float("-inf")


class World:
    """A random vocabulary (token bytes over a small alphabet, duplicates,
    specials, padding) and a random string set over it, with the rules
    spelled out: a hypothesis is (bytes, finished)."""

    def __init__(self, seed, n_stops=1, alphabet=b"ab"):
        rng = random.Random(seed)
        pieces = [bytes([rng.choice(alphabet) for _ in range(rng.randint(1, 3))]) for _ in range(rng.randint(4, 14))]
        pieces += [bytes([c]) for c in alphabet]  # every string can be spelled
        pieces += [rng.choice(pieces) for _ in range(rng.randint(0, 3))]  # same bytes, another id
        self.stops = list(range(len(pieces), len(pieces) + n_stops))
        pieces += [b"<s%d>" % i for i in range(n_stops)]
        self.pieces = pieces
        self.special = [t in self.stops for t in range(len(pieces))]
        self.width = len(pieces) + rng.randint(0, 5)
        self.strings = sorted({bytes([rng.choice(alphabet) for _ in range(rng.randint(0, 5))])
                               for _ in range(rng.randint(1, 7))})
        self.vocab = treemask.Vocab.from_token_bytes(pieces, self.width, self.special)
        self.trie = treemask.Trie.from_strings(self.strings, self.vocab, self.stops)

    def allowed(self, text):
        out = []
        for t in range(self.width):
            if t in self.stops:
                if text in self.strings:
                    out.append(t)
            elif t < len(self.pieces) and not self.special[t] and \
                    any(s.startswith(text + self.pieces[t]) for s in self.strings):
                out.append(t)
        return out


def reference_step(world, hyps, scores, rows, B):
    """One request's step from the header's words. hyps[b] = (bytes,
    finished); rows hold log-probabilities (scores add them in float32, as
    the step does). Returns [(parent, token, score, hyp)] * B, (-1, -1,
    -inf, None) past the winners, and how many candidates merged away."""
    cands = []
    for b in range(B):
        s = np.float32(scores[b])
        if not s > NEG_INF:
            continue
        text, finished = hyps[b]
        if finished:
            cands.append((s, b, world.stops[0], (text, True)))
            continue
        for t in world.allowed(text):
            score = np.float32(s + np.float32(rows[b][t]))
            if score > NEG_INF:
                cands.append((score, b, t, (text, True) if t in world.stops else (text + world.pieces[t], False)))
    cands.sort(key=lambda c: (-c[0], c[1], c[2]))
    out, seen, merged = [], set(), 0
    for score, b, t, hyp in cands:
        if len(out) == B:
            break
        if hyp in seen:
            merged += 1  # a better candidate spells the same
            continue
        seen.add(hyp)
        out.append((b, t, score, hyp))
    return out + [(-1, -1, np.float32(NEG_INF), None)] * (B - len(out)), merged


def random_rows(rng, n, width):
    values = np.array([-0.25, -0.5, -0.75, -1.0, -1.5, -2.0, NEG_INF], dtype=np.float32)
    return values[rng.integers(0, len(values), (n, width))]


def test_state_and_batch_forms_match_the_brute_force():
    merged = carried = 0
    for seed in range(scaled(60)):
        m, c = search_against_the_brute_force(seed)
        merged += m
        carried += c
    assert merged > 50 and carried > 20, (merged, carried)


def search_against_the_brute_force(seed):
    world = World(seed, n_stops=1 + seed % 2, alphabet=b"ab" if seed % 3 else b"abc")
    rng = np.random.default_rng(seed)
    B = 1 + seed % 5
    n_requests = 1 + seed % 3
    n = B * n_requests
    beam = treemask.Beam(B, n_threads=1 + seed % 2)
    states = np.full(n, treemask.STATE_ROOT, dtype=np.uint32)
    scores = treemask.initial_scores(n_requests, B)
    ends = treemask.initial_ends(n_requests, B)
    hyps = [(b"", False)] * n
    batch = treemask.BatchMatcher(n)
    for i in range(n):
        batch.set_matcher(i, treemask.Matcher(world.trie))
    batch_scores = scores.copy()
    merged = carried = 0
    for _ in range(10):
        if all(h is None or h[1] or not s > NEG_INF for h, s in zip(hyps, scores)):
            break
        rows = random_rows(rng, n, world.width)
        before = scores.copy()
        parents, tokens = beam.step_states(world.trie, states, rows, scores, ends=ends, log_probs=True)
        step = batch.beam_step(rows, batch_scores, B, log_probs=True)
        np.testing.assert_array_equal(step.parents, parents)
        np.testing.assert_array_equal(step.tokens, tokens)
        assert step.scores.tobytes() == scores.tobytes()
        batch_scores = step.scores
        new = []
        for r in range(n_requests):
            base = r * B
            want, m = reference_step(world, hyps[base:base + B], before[base:base + B], rows[base:base + B], B)
            merged += m
            for i, (p, t, score, hyp) in enumerate(want):
                assert (int(parents[base + i]), int(tokens[base + i])) == (p, t), (seed, r, i, want)
                assert scores[base + i] == score
                carried += p >= 0 and hyps[base + p][1]
                new.append(hyp)
            live = [h for h in new[base:] if h is not None]
            assert len(live) == len(set(live)), "two winners spell the same"
        hyps = new
    for r in range(n_requests):
        finished = [h[0] for h, s in zip(hyps[r * B:(r + 1) * B], scores[r * B:(r + 1) * B])
                    if h is not None and h[1] and s > NEG_INF]
        assert len(finished) == len(set(finished)) and set(finished) <= set(world.strings)
    return merged, carried


def test_the_state_step_of_a_string_set_needs_ends():
    world = World(3)
    beam = treemask.Beam(2)
    states = np.zeros(2, np.uint32)
    scores = treemask.initial_scores(1, 2)
    rows = np.zeros((2, world.width), np.float32)
    with pytest.raises(treemask.UnsupportedError, match="initial_ends"):
        beam.step_states(world.trie, states, rows, scores)
    with pytest.raises(treemask.InvalidArgumentError, match="ends"):
        beam.step_states(world.trie, states, rows, scores, ends=np.zeros(3, np.uint32))
    with pytest.raises(treemask.InvalidArgumentError, match="uint32"):
        beam.step_states(world.trie, states, rows, scores, ends=np.zeros(2, np.int64))
    # Token paths: ends is optional and changes nothing.
    paths = treemask.Trie.from_paths([[1, 2], [1, 3], [4]], 8, [7])
    rng = np.random.default_rng(1)
    a_states, b_states = np.zeros(6, np.uint32), np.zeros(6, np.uint32)
    a_scores, b_scores = treemask.initial_scores(2, 3), treemask.initial_scores(2, 3)
    ends = treemask.initial_ends(2, 3)
    for _ in range(3):
        logits = rng.normal(0, 2, (6, 8)).astype(np.float32)
        pa, ta = treemask.Beam(3).step_states(paths, a_states, logits, a_scores)
        pb, tb = treemask.Beam(3).step_states(paths, b_states, logits, b_scores, ends=ends)
        np.testing.assert_array_equal(pa, pb)
        np.testing.assert_array_equal(ta, tb)
        np.testing.assert_array_equal(a_states, b_states)
        assert a_scores.tobytes() == b_scores.tobytes()
        assert (ends == treemask.STATE_FAILED).all()


# ---- the sparse step of the vLLM drivers --------------------------------------------


def model_row(world, request, tokens):
    """A pseudo-model: log-probabilities that depend only on the hypothesis."""
    rng = np.random.default_rng(zlib.crc32(np.array([request, *tokens], dtype=np.int64).tobytes()))
    x = rng.normal(0.0, 2.0, world.width).astype(np.float32)
    m = x.max()
    return (x - (m + np.log(np.exp(x - m).sum()))).astype(np.float32)


def dense_search(world, n_requests, B, max_tokens):
    beam = treemask.Beam(B)
    states = np.full(n_requests * B, treemask.STATE_ROOT, dtype=np.uint32)
    scores = treemask.initial_scores(n_requests, B)
    ends = treemask.initial_ends(n_requests, B)
    tokens = [[] for _ in range(n_requests * B)]
    for _ in range(max_tokens):
        finished = states == treemask.STATE_TERMINATED
        if finished.all():
            break
        rows = np.stack([model_row(world, s // B, tokens[s]) for s in range(n_requests * B)])
        parents, chosen = beam.step_states(world.trie, states, rows, scores, ends=ends, log_probs=True)
        old = list(tokens)
        for s in range(n_requests * B):
            p = int(parents[s])
            src = (s // B) * B + p
            tokens[s] = [] if p < 0 else old[src] if finished[src] else [*old[src], int(chosen[s])]
    return [[(tokens[s], float(scores[s])) for s in range(r * B, (r + 1) * B) if scores[s] > -np.inf]
            for r in range(n_requests)]


def sparse_search(world, n_requests, B, max_tokens):
    """BeamSearchState fed what an engine returns: each beam's k best allowed
    log-probabilities (k = B, more when more_candidates asks)."""
    search = BeamSearchState(world.trie, n_requests, B)
    asked_again = 0
    while search.steps < max_tokens and not search.done():
        returned = {}
        ask = {s: B for s in search.live_slots()}
        while ask:
            for s, k in ask.items():
                m = treemask.Matcher(world.trie)
                assert m.accept_tokens(search.tokens[s]) == len(search.tokens[s])
                row = model_row(world, s // B, search.tokens[s])
                returned[s] = [(t, float(row[t])) for t in sorted(m.next_tokens(), key=lambda t: (-row[t], t))[:k]]
            ask = search.more_candidates(returned)
            asked_again += len(ask)
        search.step(returned)
    return search.results(B), asked_again


@pytest.mark.parametrize("seed", range(scaled(30)))
def test_sparse_driver_step_equals_the_dense_search(seed):
    # Two stop tokens and duplicate tokens: a beam's B best can spell fewer
    # than B strings, and the driver asks for more.
    world = World(100 + seed, n_stops=2, alphabet=b"abc")
    B = 2 + seed % 4
    dense = dense_search(world, 2, B, 8)
    sparse, _ = sparse_search(world, 2, B, 8)
    assert len(sparse) == len(dense)
    for got, want in zip(sparse, dense):
        assert [t for t, _ in got] == [t for t, _ in want]
        assert [s for _, s in got] == [s for _, s in want]
        texts = [b"".join(world.pieces[t] for t in tokens if t not in world.stops) for tokens, _ in got
                 if tokens and tokens[-1] in world.stops]
        assert len(texts) == len(set(texts))


def test_more_candidates_names_the_beams_short_of_strings():
    # "a" spelled by three tokens, two stop tokens: the root's best two
    # candidates are one string.
    pieces = [b"a", b"a", b"a", b"b", b"<s>", b"<t>"]
    vocab = treemask.Vocab.from_token_bytes(pieces, 6, [False] * 4 + [True, True])
    trie = treemask.Trie.from_strings(["a", "b"], vocab, [4, 5])
    search = BeamSearchState(trie, 1, 2)
    returned = {0: [(0, -0.1), (1, -0.2)]}
    assert search.more_candidates(returned) == {0: 4}  # twice as many (at most the 4 the root allows)
    with pytest.raises(treemask.InvalidArgumentError, match="distinct strings"):
        search.step(returned)
    with pytest.raises(treemask.InvalidStateError, match="max_logprobs"):
        search.more_candidates(returned, limit=2)
    returned = {0: [(0, -0.1), (1, -0.2), (2, -0.3), (3, -0.4)]}
    assert search.more_candidates(returned) == {}
    search.step(returned)
    assert search.tokens[:2] == [[0], [3]]
    # Token paths never need more.
    paths = BeamSearchState(treemask.Trie.from_paths([[1], [2], [3]], 6, [5]), 1, 2)
    assert paths.more_candidates({0: [(1, -0.1), (2, -0.2)]}) == {}


# ---- treemask.hf.beam_search --------------------------------------------------------


def hf_world():
    pieces = [b"<eos>", b"<pad>", b"r", b"e", b"d", b"re", b"ed", b"red", b"b", b"l", b"u", b"lue", b"blue",
              b"bl", b"ue", b"g", b"gr", b"een", b"green", b"n", b"red"]  # 20 spells "red" again
    special = [True, True] + [False] * (len(pieces) - 2)
    vocab = treemask.Vocab.from_token_bytes(pieces, len(pieces) + 3, special)
    return pieces, vocab


def brute_force_search(torch, lm, prompt, trie, pieces, B, steps):
    """A dense beam search written from the header's rules alone: the model
    run on every hypothesis's whole sequence (no cache), every allowed
    token of every live beam, finished hypotheses carried over, the first B
    distinct (bytes, finished) by (score, beam, token)."""
    beams = [([], b"", False, np.float32(0.0))]  # tokens, bytes, finished, score (float32 sums)
    m_cache = {}

    def allowed(tokens):
        m = treemask.Matcher(trie)
        assert m.accept_tokens(tokens) == len(tokens)
        return m.next_tokens()

    for _ in range(steps):
        if all(f for _, _, f, _ in beams):
            break
        cands = []
        for b, (tokens, text, finished, score) in enumerate(beams):
            if finished:
                cands.append((score, b, trie.stop_tokens[0], tokens, text, True))
                continue
            key = tuple(tokens)
            if key not in m_cache:
                with torch.no_grad():
                    logits = lm(input_ids=torch.tensor([prompt + tokens])).logits[0, -1].float()
                m_cache[key] = torch.log_softmax(logits, -1).numpy()
            lp = m_cache[key]
            for t in allowed(tokens):
                stop = t in trie.stop_tokens
                cands.append((np.float32(score + lp[t]), b, t, [*tokens, t], text if stop else text + pieces[t],
                              stop))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        seen, new = set(), []
        for score, _b, _t, tokens, text, finished in cands:
            if (text, finished) in seen:
                continue
            seen.add((text, finished))
            new.append((tokens, text, finished, score))
            if len(new) == B:
                break
        beams = new
    return beams


def test_hf_beam_search_over_a_string_set_is_the_brute_force():
    torch = pytest.importorskip("torch", reason="torch is not installed (./dev installs it)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (./dev installs it)")
    from treemask.hf import beam_search

    pieces, vocab = hf_world()
    config = transformers.Qwen2Config(
        vocab_size=vocab.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64, tie_word_embeddings=True,
        initializer_range=0.6, eos_token_id=0, pad_token_id=1, bos_token_id=None)
    for seed in range(scaled(3)):
        torch.manual_seed(seed)
        lm = transformers.Qwen2ForCausalLM(config).eval()
        trie = treemask.Trie.from_strings(["red", "blue", "green", "re"], vocab, [0])
        prompt = [2 + seed, 8, 15]
        for B in (3, 5):
            out = beam_search(lm, torch.tensor([prompt]), trie, B)
            want = brute_force_search(torch, lm, prompt, trie, pieces, B, trie.stats().max_depth + 1)
            got = []
            for row, score in zip(out.sequences[:, len(prompt):].tolist(), out.scores.tolist()):
                if score == NEG_INF:
                    continue
                m = treemask.Matcher(trie)
                tokens = []
                for t in row:
                    if m.is_terminated():
                        break
                    assert m.accept_token(t)
                    tokens.append(t)
                got.append((tokens, score))
            assert [t for t, _ in got] == [w[0] for w in want], (seed, B)
            np.testing.assert_allclose([s for _, s in got], [w[3] for w in want], atol=1e-4)
            texts = [w[1] for w in want if w[2]]
            assert len(texts) == len(set(texts)) and set(texts) <= {b"red", b"blue", b"green", b"re"}


# ---- the two vLLM drivers' loops, against fake engines --------------------------------
#
# The real engine and server are tests/vllm/test_beam_search.py; the Qwen2.5
# vocabulary there spells no string twice in one beam's best tokens, so the
# loops' "ask again for more" branch runs here, over a World with duplicate
# tokens and two stop tokens, engines that answer each beam with its k best
# allowed log-probabilities (k = the request's logprobs).

PROMPT_BASE = 1000  # request r's prompt is [PROMPT_BASE + r]


def engine_top(world, request, beam_tokens, k):
    m = treemask.Matcher(world.trie)
    assert m.accept_tokens(beam_tokens) == len(beam_tokens)
    row = model_row(world, request, beam_tokens)
    return [(t, float(row[t])) for t in sorted(m.next_tokens(), key=lambda t: (-row[t], t))[:k]]


class FakeLLM:
    """What treemask.vllm.beam_search touches of a vllm.LLM."""

    def __init__(self, world, max_logprobs):
        import types

        self.world = world
        self.asked = []
        config = types.SimpleNamespace(logprobs_mode="processed_logits", max_logprobs=max_logprobs,
                                       get_vocab_size=lambda: world.width, logits_processors=None)
        self.llm_engine = types.SimpleNamespace(model_config=config,
                                                vllm_config=types.SimpleNamespace(speculative_config=None))

    def generate(self, requests, params, use_tqdm=False):
        import types

        outs = []
        for req, p in zip(requests, params):
            ids = req["prompt_token_ids"]
            tokens = list(p.extra_args["treemask_beam_tokens"])
            assert ids[1:] == tokens
            self.asked.append(p.logprobs)
            top = engine_top(self.world, ids[0] - PROMPT_BASE, tokens, p.logprobs)
            logprobs = {t: types.SimpleNamespace(logprob=v) for t, v in top}
            outs.append(types.SimpleNamespace(outputs=[types.SimpleNamespace(logprobs=[logprobs])]))
        return outs


def test_the_offline_driver_asks_again_and_equals_the_dense_search(monkeypatch, tmp_path):
    import sys
    import tempfile
    import types

    from treemask.vllm import beam as vllm_beam, registered

    class SamplingParams:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=SamplingParams))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # The model the driver checks the trie against (the engine's own, in
    # vLLM): the world's vocabulary, so its string set is the model's.
    from treemask.vllm.model import ModelInfo

    monkeypatch.setattr(vllm_beam, "_model_of",
                        lambda llm, config: ModelInfo(llm.world.width, llm.world.stops, vocab=llm.world.vocab))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    asked_again = 0
    try:
        for seed in range(scaled(12)):
            world = World(300 + seed, n_stops=2, alphabet=b"abc")
            B = 2 + seed % 3
            llm = FakeLLM(world, max_logprobs=64)
            prompts = [[PROMPT_BASE + r] for r in range(2)]
            got = vllm_beam.beam_search(llm, prompts, world.trie, B, max_tokens=8)
            want = dense_search(world, 2, B, 8)
            assert got == [[(t, s) for t, s in hyps] for hyps in want], seed
            asked_again += sum(k > B for k in llm.asked)
        assert asked_again > 0, "no beam needed more than B log-probabilities: the test lost its point"
        # An engine limit below what a beam needs: a clear error naming the setting.
        with pytest.raises(treemask.InvalidStateError, match="max_logprobs"):
            for seed in range(40):
                world = World(400 + seed, n_stops=2, alphabet=b"abc")
                vllm_beam.beam_search(FakeLLM(world, max_logprobs=2), [[PROMPT_BASE]], world.trie, 2, max_tokens=8)
    finally:
        for trie_id in registered.registered_ids():
            registered.unregister_trie(trie_id)


def test_the_client_driver_asks_again_and_equals_the_dense_search():
    import http.server
    import json as json_module
    import threading

    from treemask.vllm import client

    state = {"world": None, "asked": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json_module.loads(self.rfile.read(int(self.headers["Content-Length"])))
            ids = body["prompt"]
            tokens = body["vllm_xargs"]["treemask_beam_tokens"]
            state["asked"].append(body["logprobs"])
            top = engine_top(state["world"], ids[0] - PROMPT_BASE, tokens, body["logprobs"])
            reply = {"choices": [{"logprobs": {"top_logprobs": [{"token_id:%d" % t: v for t, v in top}]}}]}
            data = json_module.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = "http://127.0.0.1:%d" % server.server_address[1]
        asked_again = 0
        for seed in range(scaled(8)):
            world = World(500 + seed, n_stops=2, alphabet=b"abc")
            state["world"], state["asked"] = world, []
            B = 2 + seed % 3
            prompts = [[PROMPT_BASE + r] for r in range(2)]
            got = client.beam_search(base, "fake", prompts, world.trie, B, keys={"treemask_choices": ["x"]},
                                     max_tokens=8, concurrency=4, timeout=30)
            assert got == [[(t, s) for t, s in hyps] for hyps in dense_search(world, 2, B, 8)], seed
            asked_again += sum(k > B for k in state["asked"])
        assert asked_again > 0
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
