"""Where a request meets a trie and a model: the one place that decides
whether treemask can serve a request, and that builds the matcher its row
starts with.

At submission, in the front end (off the API server's event loop first,
:mod:`treemask.vllm.frontend`, then again in ``validate_params``, where
it costs microseconds), :func:`check_request` checks every token id the
request or its trie file brings against the trie and the model, and
refuses what the engine could not serve with a
:class:`~treemask.vllm.keys.RequestError` (HTTP 400) naming the key and
the token:

- the trie fits the model (:meth:`ModelInfo.check_trie
  <treemask.vllm.model.ModelInfo.check_trie>`, run by every
  :meth:`TrieRegistry.trie_for <treemask.vllm.trie_registry.TrieRegistry.trie_for>`):
  its vocab_size is at most the model's, so its own tokens and stop
  tokens are the model's ids, and a string set is over exactly the model's
  vocabulary (equal :class:`treemask.Vocab` fingerprints; the model's is
  built once per process);
- the request's stop tokens (``treemask_stop_tokens``) are valid for the
  trie. They are checked by building the row's matcher exactly as the
  engine's worker will (:func:`request_matcher`), so the rule is the C
  library's (``override_stop_tokens``, src/rules/modes.cc) and is not
  restated here: every id below the trie's vocab_size (hence the model's);
  over token paths, no id that is a token inside the trie's paths (a stop
  token only ends a sequence: a sequence that needs the token as text could
  never be generated, and the row would stop before it); over a string set,
  any id in range (a stop token is only ever a stop token there, whatever
  its bytes, and the strings are spelled by the other tokens);
- a beam request's tokens (``treemask_beam_tokens``) are a walk of the
  trie that has not ended, and it asks for one token
  (:func:`treemask.vllm.beam.check_beam_request`);
- any other request has room for the trie's shortest sequence and its stop
  token in ``max_tokens``.

In the engine's worker the processor builds the row's matcher with the same
:func:`request_matcher`, over the very snapshot of a file the front end
checked (:mod:`treemask.vllm.snapshots`); a request that passed the front
end only fails there if something changed since (the snapshot left the
cache and the file is now another version), and then that row alone fails
closed.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import logging
import re
from typing import List, Optional

from ..errors import Error, OutOfRangeError
from ..failure_policy import adapter_policy_code
from ..matcher import Matcher
from ..trie import Trie
from .beam import check_beam_request
from .keys import KEY_STOP_TOKENS, RequestError, RequestSpec
from .model import ModelInfo
from .trie_registry import registry

__all__ = ["check_request", "request_matcher", "stop_tokens_of"]

logger = logging.getLogger("treemask.vllm")

_OVERRIDE = re.compile(r"override_stop_tokens\[\d+\] = (-?\d+)")


def request_matcher(spec: RequestSpec, trie: Trie, max_tokens: Optional[int]) -> Matcher:
    """The matcher a request's row starts with: its failure policy, its
    stop tokens (``treemask_stop_tokens`` replace the trie's) and its length
    budget (``max_tokens - 1``, room for the stop token; none for a beam
    request, which the driver bounds, nor for a string set, whose strings
    may be spelled in more tokens than their shortest). Raises RequestError
    naming the stop token the trie cannot take."""
    budget = max_tokens is not None and spec.beam_tokens is None and not trie.is_string_set
    try:
        return Matcher(trie, failure_policy=adapter_policy_code(spec.failure_policy),
                       max_new_tokens=max(max_tokens - 1, 0) if budget and max_tokens is not None else None,
                       override_stop_tokens=spec.stop_tokens)
    except Error as e:
        raise RequestError(_matcher_problem(spec, trie, e)) from None


def check_request(spec: RequestSpec, trie: Trie, model: ModelInfo, max_tokens: Optional[int]) -> List[int]:
    """Everything the front end checks once the request's trie is known
    (see the module doc); returns the request's stop tokens (what vLLM
    must stop on). Raises RequestError. ``trie`` comes from
    ``registry.trie_for(spec, model)``, which checked it against the model."""
    request_matcher(spec, trie, max_tokens)
    if spec.beam_tokens is not None:
        # One step of a beam: a walk of its own trie, one token, no length
        # budget (the driver bounds the steps).
        check_beam_request(trie, spec.beam_tokens, spec.stop_tokens, max_tokens)
    elif max_tokens is not None:
        shortest = registry.shortest_path(trie)
        if shortest + 1 > max_tokens:
            raise RequestError("max_tokens %d cannot hold the trie's shortest sequence (%d tokens) and its stop"
                               " token: give max_tokens >= %d" % (max_tokens, shortest, shortest + 1))
    return stop_tokens_of(spec, trie)


def stop_tokens_of(spec: RequestSpec, trie: Trie) -> List[int]:
    """The ids that end the request's sequences: its ``treemask_stop_tokens``,
    else the trie's own."""
    return list(spec.stop_tokens) if spec.stop_tokens is not None else trie.stop_tokens


def _matcher_problem(spec: RequestSpec, trie: Trie, e: Error) -> str:
    """What the client is told when the row's matcher cannot be made: the
    key and the token, never the trie's content (the library's message,
    which may quote a path of the trie, goes to the log)."""
    logger.warning("treemask: a request's matcher cannot be made: %s", str(e)[:2000])
    found = _OVERRIDE.search(str(e)) if spec.stop_tokens is not None else None
    if found is not None:
        token = int(found.group(1))
        if isinstance(e, OutOfRangeError):
            return ("%s: token %d is outside the trie's vocabulary (its vocab_size is %d): a stop token must be one"
                    " of the trie's token ids" % (KEY_STOP_TOKENS, token, trie.vocab_size))
        return ("%s: token %d is used inside the trie's sequences, and a stop token may only end a sequence"
                " (the sequences that need it as text could never be generated): give stop tokens that no"
                " sequence of the trie uses before its end" % (KEY_STOP_TOKENS, token))
    return "the request's trie and keys cannot be combined: %s" % _kind(e)


def _kind(e: Exception) -> str:
    return {"UnsupportedError": "an option the trie does not support",
            "OutOfRangeError": "a value out of range",
            "InvalidArgumentError": "an invalid value"}.get(type(e).__name__, type(e).__name__) + \
        " (the server log has the details)"

