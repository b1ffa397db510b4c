"""What compiling a request's trie needs from the model: its vocab size, its
EOS ids and (for choice lists, loaded on first use) its tokenizer; and
where to find them in the process that validates a request.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import copy
import logging
import sys
import threading
import types
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .keys import KEY_CHOICES, KEY_STOP_TOKENS, KEY_TOKENIZATION, RequestError

__all__ = ["ModelInfo", "frontend_model", "model_of_input_processor"]

logger = logging.getLogger("treemask.vllm")


class ModelInfo:
    """The model side of a request's trie (see the module doc)."""

    def __init__(self, vocab_size: int, eos_token_ids: Sequence[int], tokenizer: Any = None,
                 tokenizer_loader: Any = None, tokenizer_id: str = "", vocab: Any = None) -> None:
        self.vocab_size = int(vocab_size)
        self.eos_token_ids = tuple(sorted(set(int(t) for t in eos_token_ids)))
        #: Names the tokenizer (its path and revision): part of a compiled
        #: choice list's cache key, the same in every process of an engine.
        self.tokenizer_id = tokenizer_id
        self._tokenizer = tokenizer
        self._loader = tokenizer_loader
        self._lock = threading.Lock()
        #: Held while a choice list is tokenized: one tokenizer, one thread.
        self.tokenizer_lock = threading.Lock()
        self.speculative = False  # the engine runs speculative decoding (frontend only)
        self._vocab: Any = vocab  # treemask.Vocab: given, or built on first use (vocab)
        self._vocab_lock = threading.Lock()

    @property
    def vocab(self) -> Any:
        """The model's :class:`treemask.Vocab` (each token's bytes), built
        once from its tokenizer and shared by every any-tokenization choice
        list of this model. Built from the private copy of the tokenizer
        when the process has one (a canonical list made it), else from a
        copy made for it and dropped afterwards: a process that only serves
        string sets keeps the Vocab (~6 MB for Qwen2.5's), not a tokenizer
        (~110 MB). Raises RequestError when the tokenizer is of a kind whose
        token bytes treemask cannot read."""
        with self._vocab_lock:
            if self._vocab is None:
                from ..errors import Error
                from ..vocab import Vocab

                with self._lock:
                    tokenizer = self._tokenizer
                if tokenizer is None:
                    if self._loader is None:
                        raise RequestError("%s needs the model's tokenizer, and this engine has none" % KEY_CHOICES)
                    tokenizer = self._loader()
                try:
                    with self.tokenizer_lock:
                        self._vocab = Vocab.from_tokenizer(tokenizer, self.vocab_size)
                except (Error, TypeError) as e:  # TypeError: a tokenizer of another kind
                    raise RequestError("a string set (%s with %s 'any', or a string-set trie file) needs the bytes"
                                       " of the model's tokens, and they cannot be read from its tokenizer: %s"
                                       % (KEY_CHOICES, KEY_TOKENIZATION, e)) from None
            return self._vocab

    def check_stop_tokens(self, stops: Sequence[int]) -> None:
        """RequestError naming ``treemask_stop_tokens`` and the token unless
        every id is below the model's vocab size (checked before a trie is
        built with them: a choice list, a .jsonl or .tsv file)."""
        for t in stops:
            if not 0 <= t < self.vocab_size:
                raise RequestError("%s: token %d is outside the model's vocabulary (its vocab_size is %d)"
                                   % (KEY_STOP_TOKENS, t, self.vocab_size))

    def check_trie(self, trie: Any, name: str) -> None:
        """RequestError (naming the trie by ``name``) unless ``trie`` is over
        this model's vocabulary: its vocab_size at most the model's (its
        tokens and stop tokens are below its vocab_size), and a string set
        over exactly the model's :class:`treemask.Vocab` (equal
        fingerprints: the same bytes for every token id; the model's is
        built once per process, on the first string set)."""
        if trie.vocab_size > self.vocab_size:
            logger.warning("treemask: %s has vocab_size %d, more than the model's %d", name, trie.vocab_size,
                           self.vocab_size)
            raise RequestError("%s was built for a larger vocabulary (vocab_size %d) than this model's (%d)"
                               % (name, trie.vocab_size, self.vocab_size))
        if trie.is_string_set:
            theirs, ours = trie.vocab.fingerprint, self.vocab.fingerprint
            if theirs != ours:
                logger.warning("treemask: %s is a string set over the vocabulary %016x, not the model's %016x",
                               name, theirs, ours)
                raise RequestError("%s is a string set over another vocabulary (fingerprint %016x, vocab_size %d)"
                                   " than this model's (fingerprint %016x, vocab_size %d): its masks would spell"
                                   " other bytes. Build it over the model's own: Trie.from_strings(strings,"
                                   " Vocab.from_tokenizer(<the model's tokenizer>, %d), ...)"
                                   % (name, theirs, trie.vocab.vocab_size, ours, self.vocab_size, self.vocab_size))

    @property
    def tokenizer(self) -> Any:
        with self._lock:
            if self._tokenizer is None:
                if self._loader is None:
                    raise RequestError("%s needs the model's tokenizer, and this engine has none" % KEY_CHOICES)
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
            # A copy of its own: the engine tokenizes prompts with the shared
            # one on other threads, and a Rust tokenizer used by two threads
            # at once can fail ("Already borrowed").
            if tokenizer is not None:
                return _own_copy(tokenizer)
            from vllm.tokenizers.registry import cached_tokenizer_from_config, get_tokenizer

            tok = cached_tokenizer_from_config(model_config)
            if tok is None:  # skip_tokenizer_init: the engine has none, load it for choices
                tok = get_tokenizer(model_config.tokenizer, trust_remote_code=model_config.trust_remote_code,
                                    revision=model_config.tokenizer_revision)
                return tok
            return _own_copy(tok)

        return cls(model_config.get_vocab_size(), eos, None, load,
                   "%s@%s" % (getattr(model_config, "tokenizer", ""), getattr(model_config, "tokenizer_revision", "")))


def _own_copy(tokenizer: Any) -> Any:
    try:
        return copy.deepcopy(tokenizer)
    except Exception:  # not copyable: share it (under tokenizer_lock on our side)
        return tokenizer


_input_processor_models: Dict[int, Tuple[Any, ModelInfo]] = {}
_models_lock = threading.Lock()


def model_of_input_processor(processor: Any) -> ModelInfo:
    """The ModelInfo of a vLLM InputProcessor (cached per processor)."""
    with _models_lock:
        cached = _input_processor_models.get(id(processor))
        if cached is None or cached[0] is not processor:
            info = ModelInfo.from_model_config(processor.model_config, getattr(processor, "tokenizer", None))
            vllm_config = getattr(processor, "vllm_config", None)
            info.speculative = bool(getattr(processor, "speculative_config", None)
                                    or getattr(vllm_config, "speculative_config", None))
            cached = (processor, info)
            _input_processor_models[id(processor)] = cached
        return cached[1]


def frontend_model() -> Optional[ModelInfo]:
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
            return model_of_input_processor(obj)
        frame = frame.f_back
    return None
