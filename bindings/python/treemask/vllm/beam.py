"""Exact constrained beam search on vLLM, through its public API.

    from vllm import LLM
    import treemask.vllm

    llm = LLM(model, logprobs_mode="processed_logits", max_logprobs=50)
    hyps = treemask.vllm.beam_search(llm, prompts, trie, 50)  # per prompt [(token_ids, score), ...]

vLLM's own beam search cannot carry a logits processor's keys
(``BeamSearchParams`` has no ``extra_args``), and its structured-output
beam search filters the unmasked top-2B afterwards. This module does what
vLLM's offline beam search does (every live beam re-submitted as a prompt
for one token per step, prefix caching reusing the shared prefix) with an
exact step:

- every beam request carries the trie (``treemask_trie``,
  ``treemask_choices`` or ``treemask_trie_id``: a trie this process
  registered, :mod:`treemask.vllm.registered`) and
  ``treemask_beam_tokens``, the beam's generated tokens. The plugin
  re-walks them from the trie's root (the client never names a state), so
  a request only ever reaches states of its own trie;
- the plugin writes the beam's row as ``x[t] - logsumexp(x)`` (the
  log-softmax over the whole unmasked row, as transformers' beam search
  and :func:`treemask.hf.beam_search` score) at the allowed tokens and
  ``-inf`` elsewhere (:func:`normalize_beam_rows`, then its usual mask);
- with ``logprobs_mode="processed_logits"``, greedy sampling and
  ``logprobs=B``, vLLM returns those values for the beam's B best allowed
  continuations, and the driver runs treemask's own beam step on them
  (:class:`treemask.beam_driver.BeamSearchState`): the result is
  :func:`treemask.hf.beam_search`'s, hypotheses and scores.

The same search through the OpenAI server, driven from the client:
:mod:`treemask.vllm.client`.

A beam request is a request like any other: its trie comes from the same
sources under the same rules (the operator's allowed directories, the
limits, the process's registry: the Python README's "Serving safely"), plus two checks
at submission (:func:`check_beam_request`): ``treemask_beam_tokens``
holds at most the trie's depth and a stop token (what bounds the walk),
every token allowed after the ones before it, and does not end with a
stop token (a finished hypothesis is not extended); and the request asks
for one token (``max_tokens=1``; no length budget applies, the driver
bounds the steps). In the engine the processor walks the tokens again and
checks that the prompt ends with them, else the row fails closed
(:func:`walk_beam_tokens`).

Only :func:`beam_search` imports vLLM, and :func:`normalize_beam_rows`
torch: the rest works without them.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .. import _buffers
from ..beam_driver import BeamSearchState, Candidates
from ..errors import InvalidArgumentError, InvalidStateError, UnsupportedError
from ..matcher import Matcher
from ..trie import Trie
from .keys import KEY_BEAM_TOKENS, KEY_CHOICES, KEY_TRIE, KEY_TRIE_ID, RequestError, parse_extra_args
from .model import ModelInfo, model_of_input_processor
from .registered import register_trie, unregister_trie
from .trie_registry import registry

__all__ = ["beam_search", "check_beam_request", "walk_beam_tokens", "normalize_beam_rows", "is_beam_request"]


# ---- the engine side: validation, the beam's matcher, its row -----------------


def is_beam_request(extra_args: Optional[Mapping[str, Any]]) -> bool:
    """Whether a request's keys make it a beam request."""
    return bool(extra_args) and extra_args.get(KEY_BEAM_TOKENS) is not None  # type: ignore[union-attr]


def check_beam_request(trie: Trie, tokens: Sequence[int], stop_tokens: Optional[Sequence[int]] = None,
                       max_tokens: Optional[int] = 1) -> None:
    """At submission: the request asks for one token, and the beam's tokens
    are a walk of ``trie`` from its root that has not ended (RequestError
    otherwise, naming the first bad token). Costs at most the trie's depth
    + 1 matcher steps."""
    if max_tokens != 1:
        raise RequestError("a beam request (%s) asks for one token: max_tokens must be 1, got %s"
                           % (KEY_BEAM_TOKENS, max_tokens))
    depth = trie.stats().max_depth
    if len(tokens) > depth + 1:
        raise RequestError("%s has %d tokens, more than the trie's longest sequence (%d) and a stop token"
                           % (KEY_BEAM_TOKENS, len(tokens), depth))
    m = Matcher(trie, failure_policy="reject", override_stop_tokens=stop_tokens)
    for i, t in enumerate(tokens):
        if m.is_terminated():
            raise RequestError("%s[%d]: the beam ended with a stop token at [%d]; a finished hypothesis is not"
                               " extended" % (KEY_BEAM_TOKENS, i, i - 1))
        if not m.accept_token(t):
            raise RequestError("%s[%d]: token %d does not continue a sequence of the request's trie"
                               % (KEY_BEAM_TOKENS, i, t))
    if m.is_terminated():
        raise RequestError("%s ends with a stop token: a finished hypothesis is not extended" % KEY_BEAM_TOKENS)


def walk_beam_tokens(matcher: Any, tokens: Sequence[int], prompt: Optional[Sequence[int]]) -> None:
    """In the engine: moves a new beam row's matcher (created without a
    length budget) to the beam's position. Raises ValueError when the
    prompt is unknown or does not end with the beam's tokens, or the walk
    fails (the processor then fails the row closed)."""
    if tokens and (prompt is None or list(prompt[len(prompt) - len(tokens):]) != list(tokens)):
        raise ValueError("%s are not the last tokens of the request's prompt" % KEY_BEAM_TOKENS)
    if matcher.accept_tokens(tokens) != len(tokens) or matcher.is_terminated():
        raise ValueError("%s are not an unfinished walk of the request's trie" % KEY_BEAM_TOKENS)


def normalize_beam_rows(logits: Any, rows: Sequence[int]) -> None:
    """Rewrites the beam rows ``rows`` of ``logits`` (a torch tensor of
    float rows over the whole vocabulary, on any device; in place) as their
    log-softmax over the whole unmasked row, ``x - logsumexp(x)``: what
    transformers' beam search and :func:`treemask.hf.beam_search` score a
    token by. The processor then masks them like every constrained row, so
    a beam row ends as that log-softmax at its allowed tokens and ``-inf``
    elsewhere. Cost: one ``torch.log_softmax`` of the rows and a copy; a
    fixed number of torch operations whatever the number of rows (each is a
    parallel region: milliseconds on a busy CPU) and no per-token Python."""
    import torch

    if not rows:
        return
    first, n = rows[0], len(rows)
    if list(rows) == list(range(first, first + n)):
        block = logits[first:first + n]
        block.copy_(torch.log_softmax(block, dim=-1, dtype=torch.float32))
        return
    index = torch.tensor(list(rows), dtype=torch.long, device=logits.device)
    normalized = torch.log_softmax(logits.index_select(0, index), dim=-1, dtype=torch.float32)
    logits.index_copy_(0, index, normalized.to(logits.dtype))


# ---- the offline driver ---------------------------------------------------------


def _engine_checks(llm: Any, beam_width: int) -> Any:
    """The engine's model config, after checking the settings a beam search
    needs (clear errors naming them)."""
    engine = getattr(llm, "llm_engine", None)
    config = getattr(engine, "model_config", None)
    if config is None:
        raise InvalidArgumentError("beam_search: want a vllm.LLM, got %s" % type(llm).__name__)
    mode = getattr(config, "logprobs_mode", None)
    if mode != "processed_logits":
        raise InvalidArgumentError("beam_search needs the engine created with logprobs_mode='processed_logits'"
                                   " (--logprobs-mode processed_logits); this one has %r" % (mode,))
    max_logprobs = getattr(config, "max_logprobs", None)
    if max_logprobs is not None and max_logprobs != -1 and beam_width > max_logprobs:
        raise InvalidArgumentError("beam_width %d is more than the engine's max_logprobs %d: create it with"
                                   " max_logprobs >= %d (--max-logprobs)" % (beam_width, max_logprobs, beam_width))
    if getattr(getattr(engine, "vllm_config", None), "speculative_config", None):
        raise UnsupportedError("beam_search: speculative decoding is on, and vLLM runs no custom logits"
                               " processor then")
    try:
        from vllm.v1.sample.logits_processor import cached_load_custom_logitsprocs

        names = config.logits_processors
        classes = cached_load_custom_logitsprocs(tuple(names) if names is not None else None)
        # vLLM imported the classes it loads: treemask's is loaded only if its
        # module is (looked up, not imported: the processor imports this module).
        processor = sys.modules.get(__package__ + ".processor")
        ours = getattr(processor, "TrieLogitsProcessor", None)
        loaded = ours is not None and any(isinstance(c, type) and issubclass(c, ours) for c in classes)
    except Exception:  # vLLM's internals moved: the first step's check says it instead
        loaded = True
    if not loaded:
        raise UnsupportedError("beam_search: treemask's logits processor is not loaded in this engine: install"
                               " the treemask wheel in the engine's environment (its vllm.logits_processors"
                               " entry point), or pass logits_processors=['treemask.vllm:TrieLogitsProcessor']")
    return config


def _prompt_ids(llm: Any, prompts: Any) -> List[List[int]]:
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, (list, tuple)):
        raise InvalidArgumentError("prompts: want a list of prompts (strings or token-id lists), got %s"
                                   % type(prompts).__name__)
    tokenizer = None
    out = []
    for i, p in enumerate(prompts):
        if isinstance(p, str):
            if tokenizer is None:
                tokenizer = llm.get_tokenizer()
            out.append(list(tokenizer.encode(p)))
        elif isinstance(p, (list, tuple)) and p and all(
                isinstance(t, (int, np.integer)) and not isinstance(t, bool) and t >= 0 for t in p):
            out.append([int(t) for t in p])
        else:
            raise InvalidArgumentError("prompts[%d]: want a string or a non-empty list of token ids" % i)
    return out


def _trie_keys(llm: Any, config: Any, trie: Any) -> Tuple[Dict[str, Any], Trie, Optional[str]]:
    """(the requests' treemask keys, the trie they name, the id registered
    for it or None)."""
    model = _model_of(llm, config)
    if isinstance(trie, Trie):
        model.check_trie(trie, "trie")  # its vocab_size, and a string set's vocabulary: the model's
        trie_id = register_trie(trie)
        return {KEY_TRIE_ID: trie_id}, trie, trie_id

    if isinstance(trie, (str, os.PathLike)):
        keys: Dict[str, Any] = {KEY_TRIE: os.fspath(trie)}
    elif isinstance(trie, Mapping):
        keys = dict(trie)
    elif isinstance(trie, (list, tuple)):
        keys = {KEY_CHOICES: list(trie)}
    else:
        raise InvalidArgumentError("trie: want a treemask.Trie, a trie file name, a list of strings or a dict of"
                                   " treemask keys, got %s" % type(trie).__name__)
    if KEY_BEAM_TOKENS in keys or KEY_TRIE_ID in keys:
        raise InvalidArgumentError("trie: %s and %s are the driver's to set" % (KEY_BEAM_TOKENS, KEY_TRIE_ID))
    spec = parse_extra_args(keys, registry.settings)
    if spec is None:
        raise InvalidArgumentError("trie: the dict holds no treemask key")
    local = registry.trie_for(spec, model)  # checked against the model
    if spec.stop_tokens is not None and tuple(sorted(local.stop_tokens)) != tuple(spec.stop_tokens):
        raise InvalidArgumentError("trie: treemask_stop_tokens %s replace the file's own %s; beam_search steps"
                                   " with the trie's own stop tokens: build the trie with them"
                                   % (list(spec.stop_tokens), local.stop_tokens))
    return keys, local, None


def _model_of(llm: Any, config: Any) -> ModelInfo:
    """The engine's model as its own validation sees it (the ModelInfo of
    its InputProcessor: one Vocab per process), else built from its config."""
    processor = getattr(getattr(llm, "llm_engine", None), "input_processor", None)
    if processor is not None and getattr(processor, "model_config", None) is config:
        return model_of_input_processor(processor)
    return ModelInfo.from_model_config(config, llm.get_tokenizer())


def beam_search(llm: Any, prompts: Sequence[Any], trie: Any, beam_width: int, *, max_tokens: Optional[int] = None,
                n_return: Optional[int] = None) -> List[List[Tuple[List[int], float]]]:
    """Exact constrained beam search with a ``vllm.LLM``: per prompt its best
    ``n_return`` hypotheses, best first, each ``(token_ids, score)``:
    ``token_ids`` the generated tokens (the stop token included when the
    hypothesis finished), ``score`` the cumulative log-probability (the
    sum over those tokens of the model's log-softmax over the whole
    vocabulary, unmasked), exactly as :func:`treemask.hf.beam_search`:
    finished hypotheses carry over with their score and compete in the B
    slots; ties go to the lower beam, then the lower token; a prompt whose
    trie has fewer than ``n_return`` hypotheses gets fewer (the dead slots
    are left out).

    Args:
        llm: a ``vllm.LLM`` created with ``logprobs_mode="processed_logits"``
            and ``max_logprobs >= beam_width``, with treemask's logits
            processor loaded (the wheel's entry point, or
            ``logits_processors``). Prefix caching (vLLM's default) keeps each
            step's re-submitted prefix from being recomputed.
        prompts: strings (encoded with the engine's tokenizer, as
            ``LLM.generate`` does) or token-id lists.
        trie: a :class:`treemask.Trie` (registered for the search:
            :func:`register_trie`), a trie file name or a list of strings
            (the plugin's ``treemask_trie`` / ``treemask_choices``), or a
            dict of treemask request keys.
        beam_width: B >= 1.
        max_tokens: the most steps; default the trie's depth + 1 (its
            longest sequence and the stop token).
        n_return: hypotheses per prompt, 1 .. B (default B).

    Each step submits every live beam as one request for one token
    (``max_tokens=1``, greedy, ``logprobs=B``), as vLLM's own beam search
    does; see the Python README's "Beam search on vLLM" for what a step costs.
    Raises :class:`~treemask.beam_driver.EngineMismatchError` when the
    engine's answer is not a treemask beam row of this trie.
    """
    beam_width = _buffers.positive_int(beam_width, "beam_width")
    B = beam_width
    R = B if n_return is None else n_return
    if not isinstance(R, int) or isinstance(R, bool) or not 1 <= R <= B:
        raise InvalidArgumentError("n_return %r: want 1 .. beam_width (%d)" % (R, B))
    config = _engine_checks(llm, B)
    ids = _prompt_ids(llm, prompts)
    from vllm import SamplingParams

    keys, local, trie_id = _trie_keys(llm, config, trie)
    try:
        if max_tokens is None:
            max_tokens = local.stats().max_depth + 1
        max_tokens = _buffers.positive_int(max_tokens, "max_tokens")
        search = BeamSearchState(local, len(ids), B)
        limit = getattr(config, "max_logprobs", None)
        limit = None if limit is None or limit == -1 else int(limit)
        while search.steps < max_tokens and not search.done():
            # B log-probabilities per live beam; a string set's beam whose B
            # best spell fewer than B distinct strings is asked again for
            # more (BeamSearchState.more_candidates).
            returned: Dict[int, Candidates] = {}
            ask = {slot: B for slot in search.live_slots()}
            while ask:
                slots = sorted(ask)
                requests = [{"prompt_token_ids": ids[slot // B] + search.tokens[slot]} for slot in slots]
                params = [SamplingParams(max_tokens=1, temperature=0.0, logprobs=ask[slot], detokenize=False,
                                         skip_clone=True,
                                         extra_args=dict(keys, **{KEY_BEAM_TOKENS: list(search.tokens[slot])}))
                          for slot in slots]
                outputs = llm.generate(requests, params, use_tqdm=False)
                for slot, out in zip(slots, outputs):
                    logprobs = out.outputs[0].logprobs
                    if not logprobs:
                        raise InvalidStateError("the engine returned no logprobs for beam %d" % slot)
                    returned[slot] = [(t, lp.logprob) for t, lp in logprobs[0].items()]
                ask = search.more_candidates(returned, limit)
            search.step(returned)
        return search.results(R)
    finally:
        if trie_id is not None:
            unregister_trie(trie_id)
