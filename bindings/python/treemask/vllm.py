"""vLLM V1 adapter: constrain requests to the sequences of a trie.

Installing the treemask wheel next to vLLM is all the set-up: the
``vllm.logits_processors`` entry point loads :class:`TrieLogitsProcessor`
in every engine. (It can also be named explicitly:
``LLM(..., logits_processors=[TrieLogitsProcessor])`` or
``--logits-processors treemask.vllm:TrieLogitsProcessor``.) A request opts
in through ``SamplingParams.extra_args`` (``vllm_xargs`` in the OpenAI API):

    params = SamplingParams(max_tokens=32, extra_args={"treemask_trie": "/data/catalog.tmtrie"})
    params = SamplingParams(extra_args={"treemask_choices": ["red", "green", "blue"]})

Keys (flat, since ``vllm_xargs`` carries only strings, numbers and lists):

- ``treemask_trie``: a ``.tmtrie`` (mapped), RTP-LLM ``.json`` / ``.tsv``
  or ``.jsonl`` file; the vocab size is the model's.
- ``treemask_choices``: a list of strings, each tokenized canonically by the
  model's own tokenizer as ``treemask_prefix + choice`` (``treemask_prefix``
  defaults to ``""``: right for chat, where the answer starts a new message;
  use ``" "`` after a completion prompt that ends in a word).
- ``treemask_stop_tokens`` (optional): the ids that end a sequence. Default:
  the model's EOS ids (its generation config); a ``.tmtrie`` keeps its own
  unless this is given, an RTP-LLM dictionary its ``end_token_id``.
- ``treemask_failure_policy`` (optional): ``"fail_closed"`` (default),
  ``"reject"`` or ``"sticky_error"`` (behaves as fail_closed here: a failed
  row only offers stop tokens).
- ``treemask_start_token_id`` / ``treemask_end_token_id``: ``.tsv`` files
  only (RTP-LLM's text form has no header).
- ``treemask_beam_tokens`` / ``treemask_trie_id``: beam requests of the exact
  beam search :func:`beam_search` (:mod:`treemask.vllm_beam`).

A request without these keys is untouched. Bad input (a missing or corrupt
file, an unknown key, a choice list of which nothing round-trips, ...)
fails the request when it is submitted: ``ValueError`` from ``LLM``, HTTP
400 with the message from the server.

Stop tokens: vLLM stops a request only on tokens it knows. Every stop token
of a constrained request is added to its ``stop_token_ids`` when it is
submitted, so the request ends on the token that terminated the trie path,
which is the last token of the output.

Length budget: a path is offered only if it fits in the request's
``max_tokens`` with its stop token (treemask's budget is ``max_tokens -
1``), so a ``max_tokens`` shorter than the longest path never returns a
truncated label, and the output still ends with the stop token (a label
that would fit only without it is not offered).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
import types
import weakref
from typing import Any, ClassVar, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

try:
    import torch
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality
except ImportError as _e:  # pragma: no cover - vLLM is what this module is for
    raise ImportError("treemask.vllm needs vLLM (V1 engine, tested with 0.32.0) and torch: %s" % _e) from _e

from . import vllm_beam as _beam
from .batch import BatchMatcher
from .bitmask import apply_token_bitmask_inplace, cuda_available
from .errors import Error
from .matcher import Matcher
from .trie import Trie, failure_policy_code

__all__ = ["TrieLogitsProcessor", "TrieRegistry", "RequestSpec", "parse_extra_args", "ModelInfo", "registry",
           "beam_search"]

logger = logging.getLogger(__name__)

KEY_TRIE = "treemask_trie"
KEY_CHOICES = "treemask_choices"
KEY_PREFIX = "treemask_prefix"
KEY_STOP_TOKENS = "treemask_stop_tokens"
KEY_FAILURE_POLICY = "treemask_failure_policy"
KEY_START_TOKEN = "treemask_start_token_id"
KEY_END_TOKEN = "treemask_end_token_id"
KEYS = (KEY_TRIE, KEY_CHOICES, KEY_PREFIX, KEY_STOP_TOKENS, KEY_FAILURE_POLICY, KEY_START_TOKEN, KEY_END_TOKEN,
        _beam.KEY_TRIE_ID, _beam.KEY_BEAM_TOKENS)  # beam requests (issue 24): treemask.vllm_beam
_POLICIES = ("fail_closed", "reject", "sticky_error")
_FORMATS = {".tmtrie": "tmtrie", ".json": "rtp_json", ".tsv": "rtp_tsv", ".jsonl": "jsonl"}


def _fail(message: str) -> "ValueError":
    return ValueError("treemask: " + message)


# ---- request keys -------------------------------------------------------------


class RequestSpec(NamedTuple):
    """The treemask keys of one request, checked."""

    trie_path: Optional[str]
    choices: Optional[Tuple[str, ...]]
    prefix: str
    stop_tokens: Optional[Tuple[int, ...]]
    failure_policy: str
    start_token_id: Optional[int]
    end_token_id: Optional[int]
    # Beam requests (issue 24, treemask.vllm_beam): a trie registered in
    # process, and the beam's generated tokens (re-walked from the root).
    trie_id: Optional[str] = None
    beam_tokens: Optional[Tuple[int, ...]] = None

    @property
    def file_format(self) -> Optional[str]:
        if self.trie_path is None:
            return None
        return _FORMATS[os.path.splitext(self.trie_path)[1].lower()]


def _token_id(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise _fail("%s: want a token id (an integer), got %r" % (key, value))
    if not 0 <= int(value) < 2**31 - 1:
        raise _fail("%s: token id %d is out of range" % (key, int(value)))
    return int(value)


def parse_extra_args(extra_args: Optional[Dict[str, Any]]) -> Optional[RequestSpec]:
    """The :class:`RequestSpec` of ``extra_args``, or None when it has no
    ``treemask_`` key. Raises ValueError naming the bad key."""
    if not extra_args:
        return None
    ours = [k for k in extra_args if isinstance(k, str) and k.startswith("treemask_")]
    if not ours:
        return None
    unknown = sorted(set(ours) - set(KEYS))
    if unknown:
        raise _fail("unknown key %s (known: %s)" % (", ".join(map(repr, unknown)), ", ".join(KEYS)))
    path = extra_args.get(KEY_TRIE)
    choices = extra_args.get(KEY_CHOICES)
    trie_id = extra_args.get(_beam.KEY_TRIE_ID)
    if sum(v is not None for v in (path, choices, trie_id)) != 1:
        raise _fail("a request needs exactly one of %s, %s and %s" % (KEY_TRIE, KEY_CHOICES, _beam.KEY_TRIE_ID))
    beam_tokens = _beam.parse_beam_tokens(extra_args.get(_beam.KEY_BEAM_TOKENS))
    if trie_id is not None:
        trie_id = _beam.parse_trie_id(trie_id)
        for key in (KEY_PREFIX, KEY_STOP_TOKENS, KEY_START_TOKEN, KEY_END_TOKEN):
            if key in extra_args:
                raise _fail("%s does not apply to %s (a registered trie keeps its own)" % (key, _beam.KEY_TRIE_ID))
    elif path is not None:
        if not isinstance(path, str) or not path:
            raise _fail("%s: want a file path (a non-empty string), got %r" % (KEY_TRIE, path))
        ext = os.path.splitext(path)[1].lower()
        if ext not in _FORMATS:
            raise _fail("%s %r: unknown format %r (want one of %s)" % (KEY_TRIE, path, ext, ", ".join(_FORMATS)))
        if KEY_PREFIX in extra_args:
            raise _fail("%s applies to %s only" % (KEY_PREFIX, KEY_CHOICES))
    else:
        if isinstance(choices, str) or not isinstance(choices, (list, tuple)):
            raise _fail("%s: want a list of strings, got %s" % (KEY_CHOICES, type(choices).__name__))
        if not choices:
            raise _fail("%s is empty" % KEY_CHOICES)
        for i, c in enumerate(choices):
            if not isinstance(c, str):
                raise _fail("%s[%d] is %s, not a string" % (KEY_CHOICES, i, type(c).__name__))
        choices = tuple(choices)
    prefix = extra_args.get(KEY_PREFIX, "")
    if not isinstance(prefix, str):
        raise _fail("%s: want a string, got %r" % (KEY_PREFIX, prefix))
    stops = extra_args.get(KEY_STOP_TOKENS)
    if stops is not None:
        if not isinstance(stops, (list, tuple)):
            stops = [stops]
        if not stops:
            raise _fail("%s is empty" % KEY_STOP_TOKENS)
        stops = tuple(sorted(set(_token_id(t, KEY_STOP_TOKENS) for t in stops)))
    policy = extra_args.get(KEY_FAILURE_POLICY, "fail_closed")
    if policy not in _POLICIES:
        raise _fail("%s: want one of %s, got %r" % (KEY_FAILURE_POLICY, ", ".join(_POLICIES), policy))
    start = extra_args.get(KEY_START_TOKEN)
    end = extra_args.get(KEY_END_TOKEN)
    is_tsv = path is not None and os.path.splitext(path)[1].lower() == ".tsv"
    if (start is not None or end is not None) and not is_tsv:
        raise _fail("%s and %s apply to .tsv files only" % (KEY_START_TOKEN, KEY_END_TOKEN))
    if is_tsv and start is None:
        raise _fail("a .tsv trie needs %s (RTP-LLM's text form has no header)" % KEY_START_TOKEN)
    return RequestSpec(path, choices, prefix, stops, policy,
                       None if start is None else _token_id(start, KEY_START_TOKEN),
                       None if end is None else _token_id(end, KEY_END_TOKEN), trie_id, beam_tokens)


# ---- the model ------------------------------------------------------------------


class ModelInfo:
    """What compiling a request's trie needs from the model: its vocab size,
    its EOS ids and (for choice lists, loaded on first use) its tokenizer."""

    def __init__(self, vocab_size: int, eos_token_ids: Sequence[int], tokenizer: Any = None,
                 tokenizer_loader: Any = None) -> None:
        self.vocab_size = int(vocab_size)
        self.eos_token_ids = tuple(sorted(set(int(t) for t in eos_token_ids)))
        self._tokenizer = tokenizer
        self._loader = tokenizer_loader
        self._lock = threading.Lock()
        self.speculative = False  # the engine runs speculative decoding (frontend only)

    @property
    def tokenizer(self) -> Any:
        with self._lock:
            if self._tokenizer is None:
                if self._loader is None:
                    raise _fail("%s needs the model's tokenizer, and this engine has none" % KEY_CHOICES)
                self._tokenizer = self._loader()
            return self._tokenizer

    @classmethod
    def from_model_config(cls, model_config: Any, tokenizer: Any = None) -> "ModelInfo":
        eos: List[int] = []
        try:
            generation = model_config.try_get_generation_config() or {}
        except Exception:  # a model without a generation config
            generation = {}
        ids = generation.get("eos_token_id")
        if ids is None:
            ids = getattr(model_config.hf_text_config, "eos_token_id", None)
        if ids is not None:
            eos = [ids] if isinstance(ids, int) else list(ids)
        if not eos and tokenizer is not None and getattr(tokenizer, "eos_token_id", None) is not None:
            eos = [tokenizer.eos_token_id]

        def load():
            from vllm.tokenizers.registry import cached_tokenizer_from_config, get_tokenizer

            tok = cached_tokenizer_from_config(model_config)
            if tok is None:  # skip_tokenizer_init: the engine has none, load it for choices
                tok = get_tokenizer(model_config.tokenizer, trust_remote_code=model_config.trust_remote_code,
                                    revision=model_config.tokenizer_revision)
            return tok

        return cls(model_config.get_vocab_size(), eos, tokenizer, load)


_frontend_models: Dict[int, Tuple[Any, ModelInfo]] = {}


def _frontend_model() -> Optional[ModelInfo]:
    """The model of the vLLM InputProcessor validating the current request.

    vLLM's ``validate_params`` hook gets only the SamplingParams, yet a
    trie's vocab size and a choice list's tokens depend on the model; the
    caller's frame (vLLM's InputProcessor, which holds the model config and
    the tokenizer) provides them. None when called from elsewhere."""
    frame: Optional[types.FrameType] = sys._getframe(1)
    for _ in range(40):
        if frame is None:
            return None
        obj = frame.f_locals.get("self")
        if obj is not None and type(obj).__name__ == "InputProcessor" and hasattr(obj, "model_config"):
            cached = _frontend_models.get(id(obj))
            if cached is None or cached[0] is not obj:
                info = ModelInfo.from_model_config(obj.model_config, getattr(obj, "tokenizer", None))
                vllm_config = getattr(obj, "vllm_config", None)
                info.speculative = bool(getattr(obj, "speculative_config", None)
                                        or getattr(vllm_config, "speculative_config", None))
                cached = (obj, info)
                _frontend_models[id(obj)] = cached
            return cached[1]
        frame = frame.f_back
    return None


# ---- the registry ---------------------------------------------------------------


class _Snapshot(NamedTuple):
    identity: Tuple[int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns
    trie: Trie


class TrieRegistry:
    """The tries of one process.

    A file is loaded once per (path, format, vocab size, stop tokens) and
    identity (device, inode, size, mtime): a file replaced by an atomic
    rename is loaded again on its next use, so new requests get the new
    snapshot while running ones keep theirs (each matcher holds a reference
    to its trie; the old one is freed with the last). ``.tmtrie`` files are
    mapped, so the worker processes share them through the page cache.

    Choice lists are compiled once per distinct list (keyed by the list,
    prefix and stop tokens) and kept in an LRU cache of ``max_choice_lists``
    entries; a compiled list is also saved as a ``.tmtrie`` named by its
    SHA-256 in a private per-user directory (``cache_dir``, default
    ``$TREEMASK_VLLM_CACHE_DIR`` or ``<tmp>/treemask-vllm-<uid>``; ``"off"``
    disables it; at most ``max_cached_files``), so that the worker maps what
    the frontend compiled when it validated the request.
    """

    def __init__(self, max_choice_lists: int = 64, cache_dir: Optional[str] = None,
                 max_cached_files: int = 256) -> None:
        if max_choice_lists < 1:
            raise ValueError("max_choice_lists %d must be >= 1" % max_choice_lists)
        self.max_choice_lists = max_choice_lists
        self.cache_dir: Any = cache_dir if cache_dir is not None else os.environ.get("TREEMASK_VLLM_CACHE_DIR")
        if self.cache_dir == "off":
            self.cache_dir = False
        self.max_cached_files = max_cached_files
        self._lock = threading.Lock()
        self._files: Dict[tuple, _Snapshot] = {}
        self._choices: "collections.OrderedDict[tuple, Trie]" = collections.OrderedDict()
        self.n_file_loads = 0
        self.n_choice_compiles = 0

    def clear(self) -> None:
        """Forgets every trie and zeroes the counters (running requests keep
        theirs)."""
        with self._lock:
            self._files.clear()
            self._choices.clear()
            self.n_file_loads = 0
            self.n_choice_compiles = 0

    def trie_for(self, spec: RequestSpec, model: ModelInfo) -> Trie:
        """The trie of a request (loading or compiling it if needed). Raises
        ValueError with the library's message."""
        if spec.trie_id is not None:  # beam requests (issue 24)
            return _beam.registered_trie(spec.trie_id)
        try:
            trie = self._file_trie(spec, model) if spec.trie_path is not None else self._choice_trie(spec, model)
        except (Error, OSError) as e:
            message = str(e).replace('"/proc/self/fd/', '"fd ')
            raise _fail("%s: %s" % (spec.trie_path or KEY_CHOICES, message)) from e
        if trie.vocab_size > model.vocab_size:
            raise _fail("%s has vocab_size %d, more than the model's %d"
                        % (spec.trie_path or KEY_CHOICES, trie.vocab_size, model.vocab_size))
        return trie

    def _stop_tokens(self, spec: RequestSpec, model: ModelInfo) -> Tuple[int, ...]:
        if spec.stop_tokens is not None:
            return spec.stop_tokens
        if not model.eos_token_ids:
            raise _fail("the model names no EOS token: give %s" % KEY_STOP_TOKENS)
        return model.eos_token_ids

    def _file_trie(self, spec: RequestSpec, model: ModelInfo) -> Trie:
        assert spec.trie_path is not None and spec.file_format is not None  # trie_for's branch
        fmt = spec.file_format
        stops = spec.stop_tokens if fmt in ("tmtrie", "rtp_json") else self._stop_tokens(spec, model)
        key = (os.path.realpath(spec.trie_path), fmt, model.vocab_size, stops, spec.start_token_id,
               spec.end_token_id)
        # Opened once: the identity and the content come from the same file
        # even while it is being replaced.
        fd = os.open(spec.trie_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            with self._lock:
                snap = self._files.get(key)
                if snap is not None and snap.identity == identity:
                    return snap.trie
            path = "/proc/self/fd/%d" % fd
            if not os.path.exists(path):  # no procfs: the name (a replace in between is caught next time)
                path = spec.trie_path
            trie = self._load(fmt, path, spec, model)
        finally:
            os.close(fd)
        with self._lock:
            self._files[key] = _Snapshot(identity, trie)
            self.n_file_loads += 1
        return trie

    def _load(self, fmt: str, path: str, spec: RequestSpec, model: ModelInfo) -> Trie:
        if fmt == "tmtrie":
            return Trie.load(path)
        if fmt == "rtp_json":
            return Trie.from_rtp_json(_PathArg(path), model.vocab_size, spec.stop_tokens)
        stops = self._stop_tokens(spec, model)
        if fmt == "jsonl":
            return Trie.from_jsonl(_PathArg(path), model.vocab_size, stops)
        end = spec.end_token_id if spec.end_token_id is not None else stops[0]
        if spec.start_token_id is None:  # parse_extra_args requires it for .tsv
            raise _fail("%s: a .tsv trie needs treemask_start_token_id" % spec.trie_path)
        return Trie.from_rtp_tsv(_PathArg(path), model.vocab_size, spec.start_token_id, end, stop_tokens=stops)

    def _choice_trie(self, spec: RequestSpec, model: ModelInfo) -> Trie:
        assert spec.choices is not None  # trie_for's branch
        stops = self._stop_tokens(spec, model)
        # In-process key: Python's string hashes (cheap; a hit is confirmed
        # by comparing the lists, so a collision costs a compile, never a
        # wrong trie). The file cache uses a SHA-256 of the same content.
        key = (spec.prefix, stops, model.vocab_size, len(spec.choices), hash(spec.choices))
        with self._lock:
            trie = self._choices.get(key)
            if trie is not None and trie.labels == spec.choices:
                self._choices.move_to_end(key)
                return trie
        digest = hashlib.sha256(json.dumps([spec.prefix, list(stops), model.vocab_size, spec.choices],
                                           ensure_ascii=False).encode("utf-8")).hexdigest()
        trie = self._disk_load(digest, spec, stops, model)
        if trie is None:
            trie = _compile_choices(spec.choices, spec.prefix, model, stops)
            if trie.skipped_labels:
                logger.warning("treemask: %d of %d choices do not round-trip through the tokenizer and are left"
                               " out (first: %r)", len(trie.skipped_labels), len(spec.choices),
                               trie.skipped_labels[0])
            self._disk_save(digest, trie)
            with self._lock:
                self.n_choice_compiles += 1
        with self._lock:
            self._choices[key] = trie
            while len(self._choices) > self.max_choice_lists:
                self._choices.popitem(last=False)
        return trie

    # A compiled choice list is also written to a per-user cache directory,
    # so that the engine's worker maps what the frontend compiled when it
    # validated the request instead of compiling it again.

    def _cache_dir(self) -> Optional[str]:
        if self.cache_dir is False:
            return None
        path = self.cache_dir or os.path.join(tempfile.gettempdir(), "treemask-vllm-%d" % os.getuid())
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            st = os.stat(path)
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                raise OSError("%s is not a private directory of this user" % path)
        except OSError as e:
            logger.warning("treemask: choice-list file cache off: %s", e)
            self.cache_dir = False
            return None
        return path

    def _disk_load(self, digest: str, spec: RequestSpec, stops: Tuple[int, ...], model: ModelInfo) -> Optional[Trie]:
        path = self._cache_dir()
        if path is None:
            return None
        try:
            trie = Trie.load(os.path.join(path, digest + ".tmtrie"))
        except Error:
            return None  # absent, or being replaced: compile
        if trie.labels != spec.choices or tuple(sorted(trie.stop_tokens)) != stops \
                or trie.vocab_size != model.vocab_size:
            return None
        return trie

    def _disk_save(self, digest: str, trie: Trie) -> None:
        path = self._cache_dir()
        if path is None:
            return
        try:
            trie.save(os.path.join(path, digest + ".tmtrie"))  # atomic (temporary file + rename)
            entries = sorted((e for e in os.scandir(path) if e.name.endswith(".tmtrie")),
                             key=lambda e: e.stat().st_mtime)
            for e in entries[:max(0, len(entries) - self.max_cached_files)]:
                os.unlink(e.path)
        except (Error, OSError) as e:
            logger.warning("treemask: could not write the choice-list cache: %s", e)


def _compile_choices(choices: Tuple[str, ...], prefix: str, model: ModelInfo, stops: Tuple[int, ...]) -> Trie:
    """Trie.from_labels over the model's tokenizer, with the tokenizer's
    batch encode and decode where it has them (a fast tokenizer runs them
    in parallel, in Rust; 100,000 one-by-one calls take seconds)."""
    tokenizer = model.tokenizer
    texts = [prefix + c for c in choices]
    try:
        backend = getattr(tokenizer, "backend_tokenizer", None)  # a transformers fast tokenizer's Rust one
        if backend is not None:
            ids = [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]
        else:
            ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
        decoded = tokenizer.batch_decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if len(ids) != len(texts) or len(decoded) != len(texts):
            raise TypeError("batch sizes differ")
    except Exception:
        return Trie.from_labels(list(choices), tokenizer, model.vocab_size, stops, prefix=prefix)
    encoded = dict(zip(texts, ids))
    text_of = {tuple(i): d for i, d in zip(ids, decoded)}
    return Trie.from_labels(list(choices), lambda text: encoded[text], model.vocab_size, stops, prefix=prefix,
                            decode=lambda tokens: text_of[tuple(tokens)])


class _PathArg(os.PathLike):
    """A path the Trie loaders must read as a file, never as inline text."""

    def __init__(self, path: str) -> None:
        self._path = path

    def __fspath__(self) -> str:
        return self._path


#: The registry of this process (frontend and workers each have one).
registry = TrieRegistry()


# ---- the logits processor -------------------------------------------------------


class _Row:
    __slots__ = ("output", "consumed", "beam")

    def __init__(self, output: List[int], beam: bool = False) -> None:
        self.output = output  # vLLM's running list of the request's output tokens
        self.consumed = 0  # how many of them the matcher has seen
        self.beam = beam  # a beam row (issue 24): normalized to its log-softmax before the mask


class TrieLogitsProcessor(LogitsProcessor):
    """vLLM V1 logits processor for requests with ``treemask_trie`` or
    ``treemask_choices`` in their ``extra_args`` (see the module doc).

    Each persistent-batch row of a constrained request has a matcher in a
    :class:`treemask.BatchMatcher` slot of the same index. Before every
    sampling step the tokens the request generated since the last step are
    accepted (all of them for a request resumed after preemption, which
    comes back with its earlier output), the rows' bitmasks are filled in
    one C call and applied to their logits rows (on a CUDA device: copied
    there from pinned memory without a host synchronisation and applied by
    treemask's CUDA kernel on the current stream). Unconstrained rows are
    not touched.
    """

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        spec = parse_extra_args(sampling_params.extra_args)
        if spec is None:
            return
        if sampling_params.min_tokens:
            raise _fail("min_tokens (%d) cannot be combined with a trie: a path may end before it"
                        % sampling_params.min_tokens)
        model = _frontend_model()
        if model is not None and model.speculative:
            raise _fail("speculative decoding is on, and vLLM runs no custom logits processor then: this"
                        " engine cannot constrain the request")
        if model is None:
            if spec.trie_path is not None and not os.path.isfile(spec.trie_path):
                raise _fail("%s: no such file: %r" % (KEY_TRIE, spec.trie_path))
            if spec.trie_id is not None:
                _beam.registered_trie(spec.trie_id)
            return  # no model here: the engine checks the rest
        trie = registry.trie_for(spec, model)
        if spec.beam_tokens is not None:  # a beam request (issue 24): a walk of its own trie
            _beam.check_beam_request(trie, spec.beam_tokens, spec.stop_tokens)
        stops = list(spec.stop_tokens) if spec.stop_tokens is not None else trie.stop_tokens
        # vLLM ends a request only on the tokens it knows: add ours.
        known = list(sampling_params.stop_token_ids or [])
        missing = [t for t in stops if t not in known]
        if missing:
            sampling_params.stop_token_ids = known + missing
            sampling_params._all_stop_token_ids.update(missing)

    # One active instance per engine: when the class is both installed (entry
    # point) and named in logits_processors, vLLM builds it twice.
    _active: ClassVar["weakref.WeakValueDictionary[int, TrieLogitsProcessor]"] = weakref.WeakValueDictionary()

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.inert = TrieLogitsProcessor._active.get(id(vllm_config)) is not None
        if not self.inert:
            TrieLogitsProcessor._active[id(vllm_config)] = self
        self._config = vllm_config  # keeps the id from being reused while this instance lives
        self.model = ModelInfo.from_model_config(vllm_config.model_config)
        self.device = torch.device(device)
        self.n_slots = int(vllm_config.scheduler_config.max_num_seqs)
        self.batch = BatchMatcher(self.n_slots)
        self.rows: Dict[int, _Row] = {}
        self._tokens = np.full(self.n_slots, -1, dtype=np.int32)
        self._words = (self.model.vocab_size + 31) // 32
        self._fallback: Dict[Tuple[int, ...], Trie] = {}
        self._warned_placeholder = False
        # CPU masking threads (treemask.apply_token_bitmask_inplace's n_threads).
        self.n_threads = max(1, int(os.environ.get("TREEMASK_VLLM_THREADS", "1") or 1))
        self._masker = _DeviceMasker(self.n_slots, self._words, self.device, is_pin_memory) \
            if self.device.type != "cpu" else None
        self._host = np.zeros((self.n_slots, self._words), dtype=np.int32) if self._masker is None \
            else self._masker.host
        # Bound: a step rewrites only the bits that changed since the row's
        # last fill (O(fanout) per row, not O(vocab)).
        self.batch.bind_bitmask(self._host)

    def is_argmax_invariant(self) -> bool:
        return False

    # ---- batch bookkeeping ------------------------------------------------

    def _matcher_for(self, params: Any, prompt: Optional[List[int]] = None) -> Matcher:
        """The matcher of a new request; on any error one that offers only
        stop tokens (fail closed: never an unconstrained answer)."""
        spec: Optional[RequestSpec] = None
        try:
            spec = parse_extra_args(params.extra_args)
            assert spec is not None  # the row has treemask keys
            trie = registry.trie_for(spec, self.model)
            beam = spec.beam_tokens is not None  # a beam row (issue 24): no length budget, walked to its place
            m = Matcher(trie, failure_policy=failure_policy_code(
                "fail_closed" if spec.failure_policy == "sticky_error" else spec.failure_policy),
                max_new_tokens=None if params.max_tokens is None or beam else max(params.max_tokens - 1, 0),
                override_stop_tokens=spec.stop_tokens if spec.file_format == "tmtrie" else None)
            if spec.beam_tokens is not None:
                _beam.walk_beam_tokens(m, spec.beam_tokens, prompt)
            return m
        except Exception as e:
            logger.error("treemask: request fails closed (only stop tokens): %s", e)
            stops = (spec.stop_tokens if spec is not None and spec.stop_tokens else None) or self.model.eos_token_ids
            return Matcher(self._stop_only_trie(tuple(stops)))

    def _stop_only_trie(self, stops: Tuple[int, ...]) -> Trie:
        trie = self._fallback.get(stops)
        if trie is None:
            trie = self._fallback[stops] = Trie.from_paths([[]], self.model.vocab_size, list(stops))
        return trie

    def _clear(self, index: int) -> None:
        if self.rows.pop(index, None) is not None:
            self.batch.set_matcher(index, None)

    def update_state(self, batch_update: Optional[BatchUpdate]) -> None:
        if batch_update is None or self.inert:
            return
        for index in batch_update.removed:
            self._clear(index)
        for index, params, prompt, output in batch_update.added:
            self._clear(index)  # an added request may replace the one at its index
            if params is None or not _has_treemask_keys(params.extra_args):
                continue
            self.batch.set_matcher(index, self._matcher_for(params, prompt))
            self.rows[index] = _Row(output, beam=params.extra_args.get(_beam.KEY_BEAM_TOKENS) is not None)
        if batch_update.moved and self.rows:
            src = list(range(self.n_slots))
            for a, b, direction in batch_update.moved:
                row_a, row_b = self.rows.pop(a, None), self.rows.pop(b, None)
                if row_a is not None:
                    self.rows[b] = row_a
                if direction == MoveDirectionality.SWAP:
                    if row_b is not None:
                        self.rows[a] = row_b
                    src[a], src[b] = src[b], src[a]
                else:
                    src[b] = src[a]
                    src[a] = -1
            self.batch.reorder(src)

    # ---- a step -----------------------------------------------------------

    def _catch_up(self) -> None:
        """Feeds every row the tokens it generated since the last step."""
        tokens = self._tokens
        tokens.fill(-1)
        single = False
        for index, row in self.rows.items():
            out = row.output
            new = len(out) - row.consumed
            if new == 1:
                t = out[-1]
                if t >= 0:
                    tokens[index] = t
                    row.consumed += 1
                    single = True
                else:
                    self._placeholder(index)
            elif new > 1:  # resumed after preemption, or several tokens at once
                m = self.batch[index]
                for t in out[row.consumed:]:
                    if t < 0:
                        self._placeholder(index)
                        break
                    self._accept(index, m, t)
                    row.consumed += 1
        if single:
            self.batch.accept_tokens(tokens)

    def _accept(self, index: int, m: Any, token: int) -> None:
        try:
            m.accept_token(token)
        except Error as e:  # sticky failure: the row ends with a stop token
            logger.error("treemask: row %d fails closed: %s", index, e)
            self.batch.set_matcher(index, Matcher(self._stop_only_trie(tuple(m.stop_tokens()))))

    def _placeholder(self, index: int) -> None:
        """A token still unknown at sampling time (a -1 placeholder of async
        scheduling that vLLM did not repair): the row's state is unknown, so
        it fails closed."""
        if not self._warned_placeholder:
            self._warned_placeholder = True
            logger.error("treemask: an output token is still a -1 placeholder at sampling time; vLLM repairs "
                         "them under async scheduling only for processors named in logits_processors: pass "
                         "logits_processors=['treemask.vllm:TrieLogitsProcessor'] (or --logits-processors), "
                         "or turn async scheduling off. The row fails closed.")
        self.batch.set_matcher(index, Matcher(self._stop_only_trie(self.model.eos_token_ids)))
        self.rows[index].consumed = len(self.rows[index].output)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        self._catch_up()
        slots = sorted(self.rows)
        n_rows, width = logits.shape
        host = self._host
        if self._masker is not None:
            self._masker.wait_host()
        try:
            need = self.batch.fill_bound(slots)
        except Error as e:
            logger.error("treemask: batch fill failed (%s); filling row by row", e)
            need = self._fill_rows(host, slots)
        # Beam rows (issue 24): the log-softmax over the whole unmasked row, then masked as every row.
        beam = [s for s in slots if self.rows[s].beam]
        if beam:
            _beam.normalize_beam_rows(logits, beam)
        rows = [s for s in slots if need[s]]
        if not rows:
            return logits
        if self._masker is None:
            apply_token_bitmask_inplace(logits, host[:n_rows], vocab_size=min(width, self.model.vocab_size),
                                        indices=rows, n_threads=self.n_threads)
        else:
            self._masker.apply(logits, n_rows, rows, min(width, self.model.vocab_size))
        return logits

    def _fill_rows(self, host: np.ndarray, slots: List[int]) -> np.ndarray:
        need = np.ones(self.n_slots, dtype=np.bool_)
        for s in slots:
            try:
                need[s] = self.batch[s].fill_next_token_bitmask(host, s)
            except Error as e:
                logger.error("treemask: row %d fails closed: %s", s, e)
                m = Matcher(self._stop_only_trie(self.model.eos_token_ids))
                self.batch.set_matcher(s, m)
                m.fill_next_token_bitmask(host, s)
        self.batch.invalidate(slots)  # written behind the batch's back
        return need


def _has_treemask_keys(extra_args: Optional[Dict[str, Any]]) -> bool:
    return bool(extra_args) and any(isinstance(k, str) and k.startswith("treemask_") for k in extra_args or ())


class _DeviceMasker:
    """Bitmask rows filled on the host, masked on the logits' device.

    The host buffer is pinned; a step copies the rows to the device with a
    non-blocking copy on the current stream and records an event. The next
    fill waits for that event, which has long passed in practice (vLLM has
    since waited for the step's sampled tokens), so the host does not wait
    on the device in steady state. The mask is applied by treemask's CUDA
    kernel on the current stream, or, when this libtreemask has no CUDA (or
    for a non-CUDA device), by the equivalent torch expression.
    """

    def __init__(self, n_slots: int, words: int, device: torch.device, pin_memory: bool) -> None:
        self.device = device
        self._host_tensor = torch.zeros((n_slots, words), dtype=torch.int32, pin_memory=pin_memory)
        self.host = self._host_tensor.numpy()
        self._event: Any = None
        self._device = torch.zeros((n_slots, words), dtype=torch.int32, device=device)
        self._cuda = device.type == "cuda"
        self._kernel = self._cuda and cuda_available()

    def wait_host(self) -> None:
        """Before the host buffer is written: the last copy out of it is done."""
        if self._event is not None:
            self._event.synchronize()
            self._event = None

    def apply(self, logits: torch.Tensor, n_rows: int, rows: List[int], vocab_size: int) -> None:
        mask = self._device[:n_rows]
        mask.copy_(self._host_tensor[:n_rows], non_blocking=True)
        if self._cuda:
            self._event = torch.cuda.Event()
            self._event.record()
        if self._kernel:
            apply_token_bitmask_inplace(logits, mask, vocab_size=vocab_size, indices=rows)
            return
        index = torch.tensor(rows, dtype=torch.long, device=logits.device)
        sub = mask.index_select(0, index)
        shifts = torch.arange(32, dtype=torch.int32, device=logits.device)
        allowed = ((sub.unsqueeze(-1) >> shifts) & 1).view(len(rows), -1)[:, :logits.shape[1]]
        if allowed.shape[1] < logits.shape[1]:
            allowed = torch.nn.functional.pad(allowed, (0, logits.shape[1] - allowed.shape[1]))
        allowed[:, vocab_size:] = 0
        masked = logits.index_select(0, index).masked_fill_(allowed == 0, float("-inf"))
        logits.index_copy_(0, index, masked)


beam_search = _beam.beam_search  # exact constrained beam search (issue 24): treemask.vllm_beam
