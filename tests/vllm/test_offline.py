"""treemask inside vLLM's offline LLM (the tiny random Qwen2, on the CPU):
a mixed batch of two tries, a choice list and unconstrained requests
(greedy, sampling with n = 4, a max_tokens shorter than the deepest path);
a trie file replaced between two generate calls; a trie whose stop token
the model's generation config does not list; bad requests refused at
submission. One LLM serves every test of the module.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import json
import os

import pytest

import treemask
from conftest import ANIMALS, COLORS, FRUITS

vllm = pytest.importorskip("vllm")
from vllm import LLM, SamplingParams  # noqa: E402

VOCAB = 151936


@pytest.fixture(scope="module")
def llm(tiny_model):
    path, _, _ = tiny_model
    engine = LLM(model=str(path), gpu_memory_utilization=0.15, max_model_len=256, max_num_seqs=32, seed=0,
                 dtype="float32", enforce_eager=True)
    yield engine
    engine.llm_engine.engine_core.shutdown()


@pytest.fixture(scope="module")
def tries(tiny_model, tmp_path_factory):
    _, tokenizer, info = tiny_model
    d = tmp_path_factory.mktemp("tries")
    colors = treemask.Trie.from_labels(COLORS, tokenizer, VOCAB, [info["eos"]], prefix=" ")
    colors.save(d / "colors.tmtrie")
    with open(d / "animals.jsonl", "w") as f:
        for a in ANIMALS:
            f.write(json.dumps(tokenizer.encode(" " + a, add_special_tokens=False)) + "\n")
    animals = treemask.Trie.from_jsonl(treemask_path(d / "animals.jsonl"), VOCAB, [info["eos"]])
    return {"dir": d, "colors": colors, "animals": animals, "eos": info["eos"], "pad": info["pad"]}


def treemask_path(p):
    return os.fspath(p)


def complete_path(trie, tokens, stops=None):
    """tokens = a whole path of trie followed by one of its stop tokens."""
    m = treemask.Matcher(trie, override_stop_tokens=stops)
    return bool(tokens) and m.accept_tokens(tokens[:-1]) == len(tokens) - 1 and m.accept_token(tokens[-1]) \
        and m.is_terminated()


def check_constrained(completion, trie, max_tokens, stops=None):
    ids = list(completion.token_ids)
    assert completion.finish_reason == "stop", (ids, completion.finish_reason)
    assert len(ids) <= max_tokens
    assert complete_path(trie, ids, stops), ids


def test_mixed_batch(llm, tries, tiny_model):
    _, tokenizer, _ = tiny_model
    colors_file = str(tries["dir"] / "colors.tmtrie")
    animals_file = str(tries["dir"] / "animals.jsonl")
    choice_trie = treemask.Trie.from_labels(FRUITS, tokenizer, VOCAB, [tries["eos"]], prefix=" ")
    deepest = tries["colors"].stats().max_depth
    short = 3  # shorter than the deepest color path plus its stop token
    assert deepest + 1 > short
    prompts = ["Pick a color:", "Name an animal:", "A fruit:", "Once upon a time", "Another color:",
               "The weather today is", "Colors again:"]
    params = [
        SamplingParams(max_tokens=16, temperature=0, extra_args={"treemask_trie": colors_file}),
        SamplingParams(max_tokens=16, temperature=1.0, n=4, seed=7, extra_args={"treemask_trie": animals_file}),
        SamplingParams(max_tokens=16, temperature=0,
                       extra_args={"treemask_choices": FRUITS, "treemask_prefix": " "}),
        SamplingParams(max_tokens=12, temperature=0),
        SamplingParams(max_tokens=short, temperature=1.0, n=4, seed=3, extra_args={"treemask_trie": colors_file}),
        SamplingParams(max_tokens=12, temperature=0),
        SamplingParams(max_tokens=short, temperature=0, extra_args={"treemask_trie": colors_file}),
    ]
    out = llm.generate(prompts, params)
    check_constrained(out[0].outputs[0], tries["colors"], 16)
    assert len(out[1].outputs) == 4
    for c in out[1].outputs:
        check_constrained(c, tries["animals"], 16)
    check_constrained(out[2].outputs[0], choice_trie, 16)
    assert out[2].outputs[0].text.strip() in FRUITS
    for c in out[4].outputs + out[6].outputs:
        check_constrained(c, tries["colors"], short)
    labels = {tokenizer.decode(c.token_ids[:-1]).strip() for c in out[4].outputs + out[6].outputs}
    assert labels <= {c for c in COLORS if len(tokenizer.encode(" " + c)) < short}, labels
    # the unconstrained requests are what they are without any constrained one
    alone = llm.generate([prompts[3], prompts[5]], [params[3], params[5]])
    assert [list(o.outputs[0].token_ids) for o in alone] == [list(out[3].outputs[0].token_ids),
                                                              list(out[5].outputs[0].token_ids)]
    assert len(out[3].outputs[0].token_ids) == 12  # the tiny model does not stop by itself


def test_trie_file_replaced_between_generate_calls(llm, tiny_model, tmp_path):
    _, tokenizer, info = tiny_model
    path = tmp_path / "live.tmtrie"
    first = treemask.Trie.from_labels(COLORS, tokenizer, VOCAB, [info["eos"]], prefix=" ")
    first.save(path)
    params = SamplingParams(max_tokens=16, temperature=1.0, n=4, seed=1, extra_args={"treemask_trie": str(path)})
    for c in llm.generate(["Pick one:"], params)[0].outputs:
        check_constrained(c, first, 16)
    second = treemask.Trie.from_labels(ANIMALS, tokenizer, VOCAB, [info["eos"]], prefix=" ")
    second.save(path)  # atomic: a temporary file renamed over the old one
    for c in llm.generate(["Pick one:"], params)[0].outputs:
        check_constrained(c, second, 16)
        assert tokenizer.decode(c.token_ids[:-1]).strip() in ANIMALS


def test_stop_token_the_generation_config_does_not_list(llm, tiny_model, tries):
    _, tokenizer, info = tiny_model
    extra_stop = info["pad"]  # <|endoftext|>: not an EOS of the generation config
    params = SamplingParams(max_tokens=16, temperature=1.0, n=4, seed=5, extra_args={
        "treemask_trie": str(tries["dir"] / "animals.jsonl"), "treemask_stop_tokens": [extra_stop]})
    for c in llm.generate(["Name an animal:"], params)[0].outputs:
        check_constrained(c, tries["animals"], 16, stops=[extra_stop])
        assert c.token_ids[-1] == extra_stop


def test_any_tokenization_choices(llm, tiny_model):
    """treemask_tokenization "any": sampled outputs spell a choice in any
    tokenization (the random model picks among every allowed token, so the
    paths are mostly not the tokenizer's), each ending with the stop token;
    the canonical list of the same choices allows only canonical paths."""
    _, tokenizer, info = tiny_model
    eos = info["eos"]
    vocab = treemask.Vocab.from_tokenizer(tokenizer, VOCAB)
    choices = FRUITS + ["passion", "pass"]
    string_set = treemask.Trie.from_strings(choices, vocab, [eos], prefix=" ")
    canonical = treemask.Trie.from_labels(choices, tokenizer, VOCAB, [eos], prefix=" ")
    params = SamplingParams(max_tokens=24, temperature=1.5, n=8, seed=11, extra_args={
        "treemask_choices": choices, "treemask_prefix": " ", "treemask_tokenization": "any"})
    outputs = llm.generate(["Pick a fruit:", "Another one:"], params)
    non_canonical = 0
    for out in outputs:
        for c in out.outputs:
            check_constrained(c, string_set, 24)
            assert tokenizer.decode(c.token_ids[:-1]).strip() in choices
            non_canonical += not complete_path(canonical, list(c.token_ids))
    assert non_canonical > 0  # a sampled spelling the canonical list would refuse
    greedy = SamplingParams(max_tokens=24, temperature=0, extra_args={
        "treemask_choices": choices, "treemask_prefix": " ", "treemask_tokenization": "canonical"})
    for c in llm.generate(["Pick a fruit:"], greedy)[0].outputs:
        check_constrained(c, canonical, 24)


@pytest.mark.parametrize("extra, message", [
    ({"treemask_choices": ["a"], "treemask_tokenization": "bpe"}, "treemask_tokenization: want one of"),
    ({"treemask_trie": "/nonexistent/catalog.tmtrie"}, "no trie file of that name is available"),
    ({"treemask_choices": ["a b c d e f g"], "max_tokens": 2}, "cannot hold the trie's shortest sequence"),
    ({"treemask_choices": ["a"], "treemask_trie": "x.tmtrie"}, "exactly one of"),
    ({"treemask_choices": ["a"], "treemask_stop_tokens": [VOCAB + 5]},
     "treemask_stop_tokens: token %d is outside the model's vocabulary" % (VOCAB + 5)),
])
def test_bad_requests_raise_value_error(llm, extra, message):
    # vLLM turns the ValueError of validate_params into its VLLMValidationError
    from vllm.exceptions import VLLMValidationError

    extra = dict(extra)
    max_tokens = extra.pop("max_tokens", 4)
    with pytest.raises((ValueError, VLLMValidationError), match="treemask: .*" + message):
        llm.generate(["x"], SamplingParams(max_tokens=max_tokens, extra_args=extra))
    # the engine is still fine
    assert llm.generate(["x"], SamplingParams(max_tokens=2, temperature=0))[0].outputs[0].token_ids
