"""vLLM V1 adapter: constrain requests to the sequences of a trie.

Installing the treemask wheel next to vLLM is all the set-up: the
``vllm.logits_processors`` entry point loads :class:`TrieLogitsProcessor`
in every engine. (It can also be named explicitly:
``LLM(..., logits_processors=[TrieLogitsProcessor])`` or
``--logits-processors treemask.vllm:TrieLogitsProcessor``.) A request opts
in through ``SamplingParams.extra_args`` (``vllm_xargs`` in the OpenAI API):

    params = SamplingParams(max_tokens=32, extra_args={"treemask_trie": "catalog.tmtrie"})
    params = SamplingParams(extra_args={"treemask_choices": ["red", "green", "blue"]})

Keys (flat, since ``vllm_xargs`` carries only strings, numbers and lists):

- ``treemask_trie``: a ``.tmtrie``, RTP-LLM ``.json`` / ``.tsv``
  or ``.jsonl`` file inside the directories the operator allows
  (``TREEMASK_VLLM_TRIE_DIRS``; unset: no file may be named), by absolute
  path or relative to those directories; a name without extension is a
  ``.tmtrie`` (``"catalog"``: ``catalog.tmtrie``). The vocab size is the
  model's. What is served is a private snapshot of the file
  (:mod:`~treemask.vllm.snapshots`), so the operator may change it in place.
- ``treemask_choices``: a list of strings, each tokenized canonically by the
  model's own tokenizer as ``treemask_prefix + choice`` (``treemask_prefix``
  defaults to ``""``: right for chat, where the answer starts a new message;
  use ``" "`` after a completion prompt that ends in a word).
- ``treemask_stop_tokens`` (optional): the ids that end a sequence. Default:
  the model's EOS ids (its generation config); a ``.tmtrie`` keeps its own
  unless this is given, an RTP-LLM dictionary its ``end_token_id``.
- ``treemask_failure_policy`` (optional): ``"fail_closed"`` (default),
  ``"reject"`` or ``"sticky_error"`` (behaves as fail_closed here: a failed
  row only offers stop tokens; :mod:`treemask.failure_policy`).
- ``treemask_start_token_id`` / ``treemask_end_token_id``: ``.tsv`` files
  only (RTP-LLM's text form has no header).
- ``treemask_beam_tokens`` / ``treemask_trie_id``: the beam requests of the
  exact beam search :func:`beam_search` (:mod:`treemask.vllm.beam`): a
  beam's generated tokens, and a trie a process of the server's user
  registered (:func:`register_trie`; 32 hex digits, never a path). A
  request names its trie with exactly one of ``treemask_trie``,
  ``treemask_choices`` and ``treemask_trie_id``.

A request without these keys is untouched. Bad input (a name outside the
allowed directories, a corrupt file, an unknown key, a choice list over the
limits or of which nothing round-trips, a ``max_tokens`` too small for the
shortest sequence, ...) fails the request when it is submitted: a
``ValueError`` (:class:`~treemask.vllm.keys.RequestError`) from ``LLM``,
HTTP 400 with the message from the server. What a client can and cannot
make the server do, and the operator's limits, are in bindings/python/README.md
("Serving safely") and :mod:`treemask.vllm.settings`.

Stop tokens: vLLM stops a request only on tokens it knows. Every stop token
of a constrained request is added to its ``stop_token_ids`` when it is
submitted, so the request ends on the token that terminated the trie path,
which is the last token of the output.

Length budget: a path is offered only if it fits in the request's
``max_tokens`` with its stop token (treemask's budget is ``max_tokens -
1``), and a request whose ``max_tokens`` cannot hold even the shortest
sequence with its stop token is refused at submission, so an output is
never a cut label: it ends with its stop token (``finish_reason ==
"stop"``).

Beam search: vLLM's own (``use_beam_search``, ``LLM.beam_search``) cannot
carry the constraint (its ``BeamSearchParams`` have no ``extra_args``), so
the server refuses such a request with treemask keys (HTTP 400). Use
:func:`treemask.vllm.beam_search`, the exact constrained beam search on a
``vllm.LLM`` (the same hypotheses and scores as
:func:`treemask.hf.beam_search`), or against a server
:func:`treemask.vllm.client.beam_search`; see bindings/python/README.md
("Beam search on vLLM").

The modules, one job each: :mod:`~treemask.vllm.keys` (request keys),
:mod:`~treemask.vllm.settings` (the operator's limits),
:mod:`~treemask.vllm.files` (the allowed files),
:mod:`~treemask.vllm.snapshots` (the private copy of a file that is
served, so that one changed in place never faults a trie),
:mod:`~treemask.vllm.trie_registry` (the tries of a process),
:mod:`~treemask.vllm.choice_cache` (compiled choice lists and file
snapshots on disk),
:mod:`~treemask.vllm.model` (the model's vocab, EOS ids and tokenizer),
:mod:`~treemask.vllm.frontend` (the API server's hooks),
:mod:`~treemask.vllm.processor` (the logits processor; on a device it
stages its bitmask rows with the helper it shares with treemask.hf),
:mod:`~treemask.vllm.registered` (tries registered for a beam search),
:mod:`~treemask.vllm.beam` (the beam rows and the offline beam search) and
:mod:`~treemask.vllm.client` (the beam search over the OpenAI server). Only
the processor and the frontend import vLLM and torch (and
:func:`beam_search` when called); importing this package does not.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

from typing import Any

from .keys import ChoiceSource, FileSource, RegisteredSource, RequestError, RequestSpec, parse_extra_args
from .model import ModelInfo
from .registered import register_trie, unregister_trie
from .trie_registry import TrieRegistry
from .settings import Settings

__all__ = ["TrieLogitsProcessor", "TrieRegistry", "RequestSpec", "RequestError", "FileSource", "ChoiceSource",
           "RegisteredSource", "Settings", "parse_extra_args", "ModelInfo", "registry", "beam_search",
           "register_trie", "unregister_trie"]


def __getattr__(name: str) -> Any:
    # The processor imports vLLM and torch: only when asked for, so that the
    # request keys and the registry work (and are tested) without them.
    if name in ("TrieLogitsProcessor", "registry"):
        from . import processor

        return getattr(processor, name)
    if name == "beam_search":  # imports vLLM only when called
        from .beam import beam_search

        return beam_search
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
