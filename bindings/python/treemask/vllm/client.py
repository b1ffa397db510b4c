"""Exact constrained beam search through vLLM's OpenAI-compatible server,
driven from the client: no patch to vLLM, no treemask code on the client
but this module (the standard library and treemask itself; importing it
imports neither vLLM nor torch).

    from treemask.vllm.client import beam_search

    hyps = beam_search("http://127.0.0.1:8000", "my-model", prompts, trie, 50,
                       keys={"treemask_trie": "catalog"})

The server runs with treemask installed and ``--logprobs-mode
processed_logits --max-logprobs B`` (B the widest beam you will ask for);
``trie`` is the same trie as the one ``keys`` names on the server (the
driver steps with it and checks every answer against it). Each step posts
one ``/v1/completions`` request per live beam, concurrently: the beam's
tokens appended to the prompt's token ids, ``max_tokens=1``, greedy,
``logprobs=B``, ``return_tokens_as_token_ids``, and in ``vllm_xargs`` the
trie's keys plus ``treemask_beam_tokens``; the server's prefix cache keeps
the shared prefix from being recomputed. The hypotheses and scores are
:func:`treemask.vllm.beam_search`'s (and :func:`treemask.hf.beam_search`'s).

vLLM's own ``use_beam_search`` cannot be used: its ``BeamSearchParams``
carry no ``extra_args``, so no logits processor sees its requests (the
plugin refuses it with treemask keys, HTTP 400).

Every beam request is an ordinary request to the server: the trie the
keys name is subject to the operator's allowed directories and limits
(the Python README's "Serving safely"). A client names the trie with ``treemask_trie``
or ``treemask_choices``: ``treemask_trie_id`` finds only tries that a
process of the server's user registered on the server's machine.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import concurrent.futures
import json
import urllib.error
import urllib.request
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import _buffers
from ..beam_driver import BeamSearchState, Candidates
from ..errors import InvalidArgumentError, InvalidStateError
from ..trie import Trie
from .keys import KEY_BEAM_TOKENS

__all__ = ["beam_search", "ServerError"]

_TOKEN_ID_PREFIX = "token_id:"


class ServerError(InvalidStateError):
    """The server refused a request or answered something this driver cannot
    read; the message holds its HTTP status and error message."""


def _post(url: str, body: Dict[str, Any], timeout: float, headers: Mapping[str, str]) -> Dict[str, Any]:
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        text = e.read().decode("utf-8", "replace")
        try:
            message = json.loads(text)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = text[:500]
        raise ServerError("%s: HTTP %d: %s" % (url, e.code, message)) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise ServerError("%s: %s" % (url, e)) from None


def _candidates(reply: Dict[str, Any]) -> Candidates:
    """The (token, log-probability) pairs of a one-token completion."""
    try:
        top = reply["choices"][0]["logprobs"]["top_logprobs"][0]
        out = []
        for key, value in top.items():
            if not key.startswith(_TOKEN_ID_PREFIX):
                raise ValueError("token %r is not in the token_id:N form" % key)
            out.append((int(key[len(_TOKEN_ID_PREFIX):]), float(value)))
        return out
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        raise ServerError("the completion holds no top_logprobs as return_tokens_as_token_ids gives them (%s)"
                          % e) from None


def beam_search(base_url: str, model: str, prompts: Sequence[Any], trie: Trie, beam_width: int, *,
                keys: Mapping[str, Any], max_tokens: Optional[int] = None, n_return: Optional[int] = None,
                concurrency: int = 64, timeout: float = 120.0, headers: Optional[Mapping[str, str]] = None
                ) -> List[List[Tuple[List[int], float]]]:
    """Exact constrained beam search over a vLLM server's ``/v1/completions``:
    per prompt its best ``n_return`` hypotheses, best first, each
    ``(token_ids, score)`` (see :func:`treemask.vllm.beam_search`).

    Args:
        base_url: the server, e.g. ``"http://127.0.0.1:8000"``.
        model: the served model name.
        prompts: strings (tokenized by the server's ``/tokenize``) or
            token-id lists.
        trie: the trie the server constrains to, here (the step runs here).
        beam_width: B >= 1, at most the server's ``--max-logprobs``.
        keys: the treemask keys that name the trie on the server
            (``{"treemask_trie": "catalog"}``, ``{"treemask_choices": [...]}``).
        max_tokens: the most steps (default: the trie's depth + 1).
        n_return: hypotheses per prompt, 1 .. B (default B).
        concurrency: requests in flight at once.
        timeout: seconds per HTTP request.
        headers: extra HTTP headers (``Authorization`` for ``--api-key``).

    Raises :class:`ServerError` when the server refuses a request (its
    message included) and :class:`~treemask.beam_driver.EngineMismatchError`
    when an answer is not a treemask beam row of ``trie`` (the plugin is not
    installed on the server, the server runs without ``--logprobs-mode
    processed_logits``, or ``keys`` name another trie).
    """
    beam_width = _buffers.positive_int(beam_width, "beam_width")
    B = beam_width
    R = B if n_return is None else n_return
    if not isinstance(R, int) or isinstance(R, bool) or not 1 <= R <= B:
        raise InvalidArgumentError("n_return %r: want 1 .. beam_width (%d)" % (R, B))
    if not isinstance(keys, Mapping) or not any(isinstance(k, str) and k.startswith("treemask_") for k in keys):
        raise InvalidArgumentError("keys: want the dict of treemask keys that name the trie on the server")
    if KEY_BEAM_TOKENS in keys:
        raise InvalidArgumentError("keys: %s is the driver's to set" % KEY_BEAM_TOKENS)

    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, (list, tuple)):
        raise InvalidArgumentError("prompts: want a list of prompts (strings or token-id lists)")
    if max_tokens is None:
        max_tokens = trie.stats().max_depth + 1
    max_tokens = _buffers.positive_int(max_tokens, "max_tokens")
    base = base_url.rstrip("/")
    extra_headers = dict(headers or {})
    search = BeamSearchState(trie, len(prompts), B)

    with concurrent.futures.ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="treemask-beam") as pool:
        def post_all(route: str, bodies: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
            futures = [pool.submit(_post, base + route, b, timeout, extra_headers) for b in bodies]
            return [f.result() for f in futures]

        ids: List[List[int]] = []
        texts = [(i, p) for i, p in enumerate(prompts) if isinstance(p, str)]
        tokenized = dict(zip((i for i, _ in texts), post_all("/tokenize", [
            {"model": model, "prompt": p} for _, p in texts])))
        for i, p in enumerate(prompts):
            if isinstance(p, str):
                ids.append([int(t) for t in tokenized[i]["tokens"]])
            elif isinstance(p, (list, tuple)) and p and all(isinstance(t, int) and not isinstance(t, bool)
                                                            and t >= 0 for t in p):
                ids.append(list(p))
            else:
                raise InvalidArgumentError("prompts[%d]: want a string or a non-empty list of token ids" % i)

        while search.steps < max_tokens and not search.done():
            # B log-probabilities per live beam; a string set's beam whose B
            # best spell fewer than B distinct strings is asked again for
            # more (BeamSearchState.more_candidates; the server refuses more
            # than its --max-logprobs, with a message saying so).
            returned: Dict[int, Candidates] = {}
            ask = {slot: B for slot in search.live_slots()}
            while ask:
                slots = sorted(ask)
                replies = post_all("/v1/completions", [{
                    "model": model, "prompt": ids[slot // B] + search.tokens[slot], "max_tokens": 1,
                    "temperature": 0, "logprobs": ask[slot], "return_tokens_as_token_ids": True,
                    "vllm_xargs": dict(keys, **{KEY_BEAM_TOKENS: list(search.tokens[slot])})} for slot in slots])
                returned.update((slot, _candidates(reply)) for slot, reply in zip(slots, replies))
                ask = search.more_candidates(returned)
            search.step(returned)
    return search.results(R)
