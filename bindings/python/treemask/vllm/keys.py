"""The treemask keys of a vLLM request (``SamplingParams.extra_args``, the
OpenAI API's ``vllm_xargs``), parsed and checked into a :class:`RequestSpec`.

Everything here is cheap and bounded by the request's own size: no file is
touched, no tokenizer runs. A spec says *what* the trie is built from (its
source: a file, or a choice list) and how a request uses it (stop tokens,
failure policy); the registry turns a source into a trie.

Adding a key: one entry in :data:`KEYS` (its name and the sources it applies
to) and its parse in :func:`parse_extra_args`, which stores it in the
source it changes (a field of :class:`ChoiceSource` is part of what is
compiled and cached: a per-request ``treemask_tokenization``, issue 23), or
in :class:`RequestSpec` when it only changes how one request walks the
trie (``treemask_beam_tokens``, a beam's generated tokens). A new kind of
source is a new frozen dataclass with a loader in the registry (as
:class:`RegisteredSource`, ``treemask_trie_id``).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import numpy as np

from ..errors import InvalidArgumentError
from ..failure_policy import ADAPTER_DEFAULT, POLICIES
from .settings import Settings

__all__ = ["RequestError", "RequestSpec", "FileSource", "ChoiceSource", "RegisteredSource", "parse_extra_args",
           "has_treemask_keys", "parse_trie_id", "KEYS", "SOURCE_KEYS", "KEY_TRIE", "KEY_CHOICES", "KEY_PREFIX",
           "KEY_STOP_TOKENS", "KEY_FAILURE_POLICY", "KEY_START_TOKEN", "KEY_END_TOKEN", "KEY_TRIE_ID",
           "KEY_BEAM_TOKENS", "KEY_TOKENIZATION", "KEY_SNAPSHOT", "TOKENIZATIONS", "FORMATS"]

KEY_TRIE = "treemask_trie"
KEY_CHOICES = "treemask_choices"
KEY_PREFIX = "treemask_prefix"
KEY_STOP_TOKENS = "treemask_stop_tokens"
KEY_FAILURE_POLICY = "treemask_failure_policy"
KEY_START_TOKEN = "treemask_start_token_id"
KEY_END_TOKEN = "treemask_end_token_id"
# Beam requests of the exact beam search (treemask.vllm.beam_search).
KEY_TRIE_ID = "treemask_trie_id"
KEY_BEAM_TOKENS = "treemask_beam_tokens"
# How a choice list matches tokens (issue 23): "canonical" (each choice's
# tokenization by the model's tokenizer, the default) or "any" (any token
# sequence whose bytes spell a choice, as vLLM's structured_outputs.choice).
KEY_TOKENIZATION = "treemask_tokenization"
TOKENIZATIONS = ("canonical", "any")
# Set by the front end only (validate_params), never taken from a client:
# the digest of the snapshot of a request's file that the front end checked
# the request against, which the engine's worker maps
# (treemask.vllm.snapshots).
KEY_SNAPSHOT = "treemask_snapshot"

#: The keys that name a request's trie: a request has exactly one of them.
SOURCE_KEYS = (KEY_TRIE, KEY_CHOICES, KEY_TRIE_ID)

#: key -> the sources it applies to ("file", "choices", "registered": a
#: trie registered in process, "tsv": a .tsv file).
KEYS: Dict[str, Tuple[str, ...]] = {
    KEY_TRIE: ("file",),
    KEY_CHOICES: ("choices",),
    KEY_TRIE_ID: ("registered",),
    KEY_PREFIX: ("choices",),
    KEY_TOKENIZATION: ("choices",),
    KEY_STOP_TOKENS: ("file", "choices"),
    KEY_FAILURE_POLICY: ("file", "choices", "registered"),
    KEY_START_TOKEN: ("tsv",),
    KEY_END_TOKEN: ("tsv",),
    KEY_BEAM_TOKENS: ("file", "choices", "registered"),
}
_KIND_NAMES = {"file": KEY_TRIE, "choices": KEY_CHOICES, "registered": KEY_TRIE_ID, "tsv": "a .tsv " + KEY_TRIE}
_TRIE_ID = re.compile(r"[0-9a-f]{32}\Z")
_DIGEST = re.compile(r"[0-9a-f]{64}\Z")

#: file extension -> format
FORMATS = {".tmtrie": "tmtrie", ".json": "rtp_json", ".tsv": "rtp_tsv", ".jsonl": "jsonl"}


class RequestError(InvalidArgumentError):
    """A request treemask refuses. A ValueError (vLLM answers HTTP 400 with
    the message) and a treemask.Error. The message says what is wrong and
    where (key, index, byte offset) and never holds a byte read from a file:
    it goes back to the client."""

    def __init__(self, message: str) -> None:
        super().__init__("treemask: " + message)


@dataclass(frozen=True)
class FileSource:
    """A trie file, named as the request names it (looked up in the
    operator's directories: :mod:`treemask.vllm.files`)."""

    name: str
    format: str  # a value of FORMATS
    start_token_id: Optional[int] = None  # .tsv only (RTP-LLM's text form has no header)
    end_token_id: Optional[int] = None


@dataclass(frozen=True)
class ChoiceSource:
    """A list of strings matched as ``prefix + choice``: by the canonical
    tokenization (the model's tokenizer, ``Trie.from_labels``) or by any
    tokenization (its bytes over the model's vocabulary,
    ``Trie.from_strings``), as ``treemask_tokenization`` says."""

    choices: Tuple[str, ...]
    prefix: str = ""
    tokenization: str = "canonical"  # a value of TOKENIZATIONS

    def __hash__(self) -> int:  # cached: a list may hold a million strings
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.choices, self.prefix, self.tokenization))
            object.__setattr__(self, "_hash", h)
        return h


@dataclass(frozen=True)
class RegisteredSource:
    """A trie a process of this server's user registered for a beam search
    (:func:`treemask.vllm.register_trie`), by its 128-bit random id: a
    ``.tmtrie`` in that user's private directory
    (:mod:`treemask.vllm.registered`), never a path a request names."""

    trie_id: str  # 32 lowercase hex digits


Source = Union[FileSource, ChoiceSource, RegisteredSource]


@dataclass(frozen=True)
class RequestSpec:
    """The treemask keys of one request, checked."""

    source: Source
    stop_tokens: Optional[Tuple[int, ...]] = None  # None: the trie's (or the model's EOS ids)
    failure_policy: str = ADAPTER_DEFAULT
    #: A beam request (treemask.vllm.beam_search): the beam's generated
    #: tokens, re-walked from the trie's root; None for any other request.
    beam_tokens: Optional[Tuple[int, ...]] = None
    #: In the engine's worker, a file's snapshot the front end checked the
    #: request against (its digest: KEY_SNAPSHOT); None elsewhere.
    snapshot: Optional[str] = None


def has_treemask_keys(extra_args: Optional[Mapping[str, Any]]) -> bool:
    """Whether extra_args holds any ``treemask_`` key (the front end's
    KEY_SNAPSHOT alone is none)."""
    return bool(extra_args) and any(isinstance(k, str) and k.startswith("treemask_") and k != KEY_SNAPSHOT
                                    for k in extra_args or ())


def parse_extra_args(extra_args: Optional[Mapping[str, Any]], settings: Optional[Settings] = None,
                     snapshot: bool = False) -> Optional[RequestSpec]:
    """The :class:`RequestSpec` of ``extra_args``, or None when it has no
    ``treemask_`` key. Raises :class:`RequestError` naming the bad key.

    ``KEY_SNAPSHOT`` is the front end's: read only with ``snapshot=True``
    (the engine's worker, which gets the request from the front end), and
    ignored otherwise (the front end replaces a client's)."""
    if not has_treemask_keys(extra_args):
        return None
    assert extra_args is not None
    limits = settings or Settings()
    ours = [k for k in extra_args if isinstance(k, str) and k.startswith("treemask_") and k != KEY_SNAPSHOT]
    unknown = sorted(set(ours) - set(KEYS))
    if unknown:
        raise RequestError("unknown key %s (known: %s)"
                           % (", ".join(repr(_clip(k)) for k in unknown[:5]), ", ".join(KEYS)))
    named = [k for k in SOURCE_KEYS if extra_args.get(k) is not None]
    if len(named) != 1:
        raise RequestError("a request needs exactly one of %s, %s and %s" % SOURCE_KEYS)
    source: Source
    if named[0] == KEY_TRIE:
        source = _file_source(extra_args[KEY_TRIE], extra_args, limits)
    elif named[0] == KEY_CHOICES:
        source = _choice_source(extra_args[KEY_CHOICES], extra_args, limits)
    else:
        source = RegisteredSource(parse_trie_id(extra_args[KEY_TRIE_ID]))
    kind = ("tsv", "file") if isinstance(source, FileSource) and source.format == "rtp_tsv" \
        else ("file",) if isinstance(source, FileSource) \
        else ("choices",) if isinstance(source, ChoiceSource) else ("registered",)
    for key in ours:
        if not set(KEYS[key]) & set(kind):
            raise RequestError("%s applies to %s only" % (key, " and ".join(_KIND_NAMES[k] for k in KEYS[key])))
    policy = extra_args.get(KEY_FAILURE_POLICY, ADAPTER_DEFAULT)
    if not isinstance(policy, str) or policy not in POLICIES:
        raise RequestError("%s: want one of %s, got %s" % (KEY_FAILURE_POLICY, ", ".join(POLICIES), _show(policy)))
    digest = extra_args.get(KEY_SNAPSHOT) if snapshot and isinstance(source, FileSource) else None
    if digest is not None and not (isinstance(digest, str) and _DIGEST.match(digest)):
        raise RequestError("%s: want the 64 hex digits the front end sets, got %s" % (KEY_SNAPSHOT, _show(digest)))
    return RequestSpec(source, _stop_tokens(extra_args.get(KEY_STOP_TOKENS), limits), policy,
                       _beam_tokens(extra_args.get(KEY_BEAM_TOKENS), limits), digest)


def parse_trie_id(value: Any) -> str:
    """``treemask_trie_id`` checked: the 32 lowercase hex digits
    :func:`treemask.vllm.register_trie` returns (so never a path)."""
    if not isinstance(value, str) or not _TRIE_ID.match(value):
        raise RequestError("%s: want the 32 hex digits treemask.vllm.register_trie returned, got %s"
                           % (KEY_TRIE_ID, _show(value)))
    return value


def _beam_tokens(value: Any, limits: Settings) -> Optional[Tuple[int, ...]]:
    """``treemask_beam_tokens`` checked as a list of token ids (None when
    absent). Whether they walk the request's trie is checked once the trie
    is known (:func:`treemask.vllm.beam.check_beam_request`)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise RequestError("%s: want a list of token ids, got %s" % (KEY_BEAM_TOKENS, type(value).__name__))
    if len(value) > limits.max_beam_tokens:
        raise RequestError("%s has %d tokens, more than %d" % (KEY_BEAM_TOKENS, len(value), limits.max_beam_tokens))
    out = []
    for i, t in enumerate(value):
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= int(t) < 2**31 - 1:
            raise RequestError("%s[%d]: want a token id (an integer in [0, 2^31 - 1)), got %s"
                               % (KEY_BEAM_TOKENS, i, _show(t)))
        out.append(int(t))
    return tuple(out)


def _file_source(path: Any, extra_args: Mapping[str, Any], limits: Settings) -> FileSource:
    if not isinstance(path, str) or not path:
        raise RequestError("%s: want a trie file name (a non-empty string), got %s" % (KEY_TRIE, _show(path)))
    if len(path.encode("utf-8", "surrogatepass")) > limits.max_name_bytes:
        raise RequestError("%s: the name is longer than %d bytes" % (KEY_TRIE, limits.max_name_bytes))
    _check_text(path, KEY_TRIE)
    if "\0" in path:
        raise RequestError("%s: the name contains a NUL character" % KEY_TRIE)
    ext = os.path.splitext(path)[1].lower()
    if not ext:  # a named trie: catalog -> catalog.tmtrie
        path, ext = path + ".tmtrie", ".tmtrie"
    if ext not in FORMATS:
        raise RequestError("%s: unknown format %s (want one of %s, or a name without extension for a .tmtrie)"
                           % (KEY_TRIE, _show(ext), ", ".join(FORMATS)))
    start, end = extra_args.get(KEY_START_TOKEN), extra_args.get(KEY_END_TOKEN)
    if FORMATS[ext] == "rtp_tsv" and start is None:
        raise RequestError("a .tsv trie needs %s (RTP-LLM's text form has no header)" % KEY_START_TOKEN)
    return FileSource(path, FORMATS[ext], None if start is None else _token_id(start, KEY_START_TOKEN),
                      None if end is None else _token_id(end, KEY_END_TOKEN))


def _choice_source(choices: Any, extra_args: Mapping[str, Any], limits: Settings) -> ChoiceSource:
    if isinstance(choices, str) or not isinstance(choices, (list, tuple)):
        raise RequestError("%s: want a list of strings, got %s" % (KEY_CHOICES, type(choices).__name__))
    if not choices:
        raise RequestError("%s is empty" % KEY_CHOICES)
    if len(choices) > limits.max_choices:
        raise RequestError("%s has %d strings, more than this server's limit of %d"
                           % (KEY_CHOICES, len(choices), limits.max_choices))
    if not _fits(choices, limits.max_choice_bytes):
        # Something is wrong: find the first string that says what, in order.
        total = 0
        for i, c in enumerate(choices):
            if not isinstance(c, str):
                raise RequestError("%s[%d] is %s, not a string" % (KEY_CHOICES, i, type(c).__name__))
            total += _check_text(c, "%s[%d]" % (KEY_CHOICES, i))
            if total > limits.max_choice_bytes:
                raise RequestError("%s: the strings up to [%d] hold more than this server's limit of %d UTF-8"
                                   " bytes" % (KEY_CHOICES, i, limits.max_choice_bytes))
    prefix = extra_args.get(KEY_PREFIX, "")
    if not isinstance(prefix, str):
        raise RequestError("%s: want a string, got %s" % (KEY_PREFIX, _show(prefix)))
    if len(prefix) > limits.max_name_bytes:
        raise RequestError("%s is longer than %d characters" % (KEY_PREFIX, limits.max_name_bytes))
    _check_text(prefix, KEY_PREFIX)
    tokenization = extra_args.get(KEY_TOKENIZATION, "canonical")
    if not isinstance(tokenization, str) or tokenization not in TOKENIZATIONS:
        raise RequestError("%s: want one of %s, got %s" % (KEY_TOKENIZATION, ", ".join(map(repr, TOKENIZATIONS)),
                                                           _show(tokenization)))
    return ChoiceSource(tuple(choices), prefix, tokenization)


#: Strings a fast check of a choice list encodes at once.
_FIT_CHUNK = 4096


def _fits(choices: Any, max_bytes: int) -> bool:
    """Whether every choice is a str that encodes to UTF-8 and all of them
    fit ``max_bytes``: a chunk of them encoded at once (1,000,000 strings
    one by one took 2.2 s, on the API server's event loop)."""
    if not all(type(c) is str for c in choices):
        return False
    total = 0
    for begin in range(0, len(choices), _FIT_CHUNK):
        try:
            total += len("".join(choices[begin:begin + _FIT_CHUNK]).encode("utf-8"))
        except UnicodeEncodeError:
            return False
        if total > max_bytes:
            return False
    return True


def _check_text(text: str, key: str) -> int:
    """The UTF-8 length of text; RequestError naming key when it holds a
    lone surrogate (JSON's "\\ud800" escape), which no tokenizer can encode."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise RequestError("%s is not valid Unicode text: a lone surrogate U+%04X at character %d"
                           % (key, ord(text[e.start]), e.start)) from None


def _stop_tokens(stops: Any, limits: Settings) -> Optional[Tuple[int, ...]]:
    if stops is None:
        return None
    if not isinstance(stops, (list, tuple)):
        stops = [stops]
    if not stops:
        raise RequestError("%s is empty" % KEY_STOP_TOKENS)
    if len(stops) > limits.max_stop_tokens:
        raise RequestError("%s has %d ids, more than %d" % (KEY_STOP_TOKENS, len(stops), limits.max_stop_tokens))
    return tuple(sorted(set(_token_id(t, KEY_STOP_TOKENS) for t in stops)))


def _token_id(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise RequestError("%s: want a token id (an integer), got %s" % (key, _show(value)))
    if not 0 <= int(value) < 2**31 - 1:
        raise RequestError("%s: token id %d is out of range" % (key, int(value)))
    return int(value)


def _clip(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[:n] + "..."


def _show(value: Any) -> str:
    """A short description of a client's value for a message (its repr, cut)."""
    return _clip(repr(value))
