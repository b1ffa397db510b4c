"""llama-cpp-python adapter: constrain ``Llama`` generation to the sequences of a trie.

    from llama_cpp import Llama, LogitsProcessorList
    from treemask import Trie
    from treemask.llama_cpp import TrieLogitsProcessor

    llm = Llama("model.gguf")
    eos = llm.token_eos()
    paths = [llm.tokenize((" " + label).encode(), add_bos=False) for label in labels]
    trie = Trie.from_paths(paths, llm.n_vocab(), [eos])
    out = llm("Topic:", max_tokens=64,
              logits_processor=LogitsProcessorList([TrieLogitsProcessor(trie)]))

A string set (:meth:`Trie.from_strings`) also needs the model's vocabulary,
to check that the set was compiled for this model's tokenizer (one compiled
for another tokenizer would mask by other tokens' bytes):
``TrieLogitsProcessor(strings, vocab=llm)``, or a :class:`treemask.Vocab`
made once with :func:`vocab_of` (``vocab=vocab_of(llm)``).

llama-cpp-python calls a logits processor from inside its C sampler chain
(a ctypes callback). An exception raised there is printed and swallowed, and
generation goes on *unconstrained*. So this processor never raises once
constructed: on any internal error it prints the error to stderr once and
fails closed (only the trie's stop tokens from then on, until ``reset``).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import sys
import threading
import traceback
from typing import Any, Optional

import numpy as np

from . import _buffers
from .errors import InvalidArgumentError, InvalidStateError
from .matcher import Matcher
from .trie import Trie
from .vocab import Vocab, model_vocab

__all__ = ["TrieLogitsProcessor", "vocab_of"]

# llama_token_attr (llama.h): tokens with any of these bits, or none at all,
# are never text (as treemask_llama_vocab reads them).
_ATTR_UNKNOWN, _ATTR_UNUSED, _ATTR_CONTROL, _ATTR_USER_DEFINED = 1 << 0, 1 << 1, 1 << 3, 1 << 4
_NEVER_TEXT = _ATTR_UNKNOWN | _ATTR_UNUSED | _ATTR_CONTROL | _ATTR_USER_DEFINED


def vocab_of(llm: Any) -> Vocab:
    """The vocabulary of a ``llama_cpp.Llama`` at the byte level, read as the
    llama.cpp sampler's ``treemask_llama_vocab`` reads it: token t's bytes
    are its piece (``llama_token_to_piece`` without specials: what it adds to
    the text); control, user-defined (added), unused, unknown and undefined
    tokens are never text; the width is ``n_vocab()``. Build it once per
    model (~0.5 s for 150k tokens) and pass it as ``vocab=``; compile string
    sets over it, or over the model's Hugging Face tokenizer
    (:meth:`Vocab.from_tokenizer`): both give the same masks."""
    import ctypes

    try:
        import llama_cpp as engine
    except ImportError:
        raise InvalidArgumentError("vocab_of: llama_cpp (llama-cpp-python) is not importable") from None
    vocab_p = getattr(getattr(llm, "_model", None), "vocab", None)
    if vocab_p is None or not hasattr(llm, "n_vocab"):
        raise InvalidArgumentError("vocab_of: want a llama_cpp.Llama (llama-cpp-python >= 0.3), got %s"
                                   % type(llm).__name__)
    n = int(llm.n_vocab())
    buf = ctypes.create_string_buffer(256)
    tokens = []
    special = []
    for t in range(n):
        attr = int(engine.llama_vocab_get_attr(vocab_p, t))
        text = attr != 0 and not attr & _NEVER_TEXT
        piece = b""
        if text:
            # llama-cpp-python's own token_to_piece returns its whole 32-byte
            # buffer; the C function returns the length (or -needed).
            k = int(engine.llama_token_to_piece(vocab_p, t, buf, len(buf), 0, False))
            if k < 0:
                buf = ctypes.create_string_buffer(-k)
                k = int(engine.llama_token_to_piece(vocab_p, t, buf, len(buf), 0, False))
            piece = buf.raw[:k] if k > 0 else b""
        tokens.append(piece)
        special.append(not text)
    return Vocab.from_token_bytes(tokens, n, special)

# Above this many allowed tokens (a think phase) the mask is built from a
# bitmask row instead of a token list.
_LIST_MAX = 4096


class TrieLogitsProcessor:
    """A llama-cpp-python logits processor (``LogitsProcessorList([...])``)
    that lets a generation produce only sequences of ``trie``, each ending with
    one of its stop tokens (make them the model's EOS: ``llm.token_eos()``).

    Each call receives every token evaluated so far (``input_ids``: the prompt,
    then the generated tokens) and the scores of the next token (the whole
    vocabulary, in id order). The processor accepts the tokens generated since
    its last call, then sets every score the trie does not allow to -inf (an
    O(allowed tokens) step plus one vectorised fill of the row).

    One processor follows one generation at a time. The prompt length is the
    first call's ``input_ids`` length; a call whose ``input_ids`` do not extend
    the previous call's by exactly one token starts a new generation, so a
    processor can serve successive calls of the same ``Llama`` one at a time.
    Pass ``prompt_length`` to fix it, or call :meth:`reset` between
    generations (needed only if a new prompt equals the previous generation
    plus one token); a new processor per call is cheap too.

    Args:
        trie: the allowed sequences.
        prompt_length: where generation starts in ``input_ids`` (None: inferred).
        vocab: the model's vocabulary: the ``llama_cpp.Llama`` itself, a
            :class:`treemask.Vocab` (:func:`vocab_of`, made once) or the
            model's Hugging Face tokenizer. Required for a string set, which
            is checked against it (:meth:`Trie.check_vocab`: compiled for
            another tokenizer, other bytes or a smaller vocabulary, it is
            refused with InvalidArgumentError naming both fingerprints);
            for token paths it checks the width only.
        **matcher_options: passed to :class:`treemask.Matcher` (think mode,
            ``max_new_tokens``, multi-label, ``override_stop_tokens``...). The
            failure policy is always ``"fail_closed"``
            (:mod:`treemask.failure_policy` says why).

    Attributes:
        error: the first internal error (a string), or None. While set, only
            stop tokens are allowed; :meth:`reset` clears it.
    """

    def __init__(self, trie: Trie, prompt_length: Optional[int] = None, *, vocab: Any = None,
                 **matcher_options: Any) -> None:
        if not isinstance(trie, Trie):
            raise InvalidArgumentError("trie must be a treemask.Trie, got %s" % type(trie).__name__)
        if vocab is None and trie.is_string_set:
            raise InvalidArgumentError(
                "a string-set trie needs the model's vocabulary, to check that it was compiled for this model's"
                " tokenizer: TrieLogitsProcessor(trie, vocab=llm) (or vocab=treemask.llama_cpp.vocab_of(llm),"
                " made once)")
        if vocab is not None:
            if not isinstance(vocab, Vocab) and hasattr(vocab, "n_vocab") and hasattr(vocab, "_model"):
                vocab = vocab_of(vocab)  # a llama_cpp.Llama
            trie.check_vocab(model_vocab(vocab, trie.vocab_size))
        if prompt_length is not None and prompt_length < 0:
            raise InvalidArgumentError("prompt_length %d must be >= 0" % prompt_length)
        matcher_options.pop("failure_policy", None)
        self.trie = trie
        self._matcher = Matcher(trie, failure_policy="fail_closed", **matcher_options)
        self._stops = np.asarray(self._matcher.stop_tokens(), dtype=np.intp)
        self._fixed_prompt_length = prompt_length
        self._bitmask = np.zeros(trie.bitmask_words, dtype=np.int32)
        self._next = np.zeros(_LIST_MAX, dtype=np.int32)
        self.error: Optional[str] = None
        # One generation at a time: a call while another thread is inside one
        # fails both closed (__call__); the other methods raise
        # InvalidStateError (_buffers.exclusive).
        self._busy = threading.RLock()
        self.reset()

    def reset(self) -> None:
        """Starts a new generation (and clears :attr:`error`)."""
        self._matcher.reset()
        self.prompt_length = self._fixed_prompt_length
        self._seen: Optional[np.ndarray] = None  # input_ids of the last call
        self.error = None

    @property
    def matcher(self) -> Matcher:
        """The matcher following the current generation (labels, counters)."""
        return self._matcher

    def is_terminated(self) -> bool:
        """True once the processor saw a stop token end the generation. (It
        usually does not: llama-cpp-python stops at EOS without another
        call, so after a finished generation ``matcher.can_terminate()`` is
        the check that the text is a complete sequence.)"""
        return self._matcher.is_terminated()

    # ---- the call ------------------------------------------------------------

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if not self._busy.acquire(False):
            # Two generations share this processor at once: raising here would
            # leave this one unconstrained (llama-cpp-python swallows it), so
            # both fail closed instead.
            self._fail(InvalidStateError("TrieLogitsProcessor: used by two threads at once; give each"
                                         " generation its own processor"))
            self._keep_stop_tokens(scores)
            return scores
        try:
            if self.error is None:
                self._catch_up(np.asarray(input_ids))
                if self.error is None:
                    self._mask(scores)
                    return scores
        except BaseException as e:
            self._fail(e)
        finally:
            self._busy.release()
        self._keep_stop_tokens(scores)
        return scores

    def _fail(self, e: BaseException) -> None:
        if self.error is None:
            self.error = "%s: %s" % (type(e).__name__, e)
            try:
                sys.stderr.write("treemask.llama_cpp: internal error, generation limited to stop tokens: %s\n"
                                 % self.error)
                traceback.print_exc(file=sys.stderr)
            except BaseException:
                pass

    def _keep_stop_tokens(self, scores: Any) -> None:
        try:
            saved = scores[self._stops].copy()
            scores[:] = -np.inf
            scores[self._stops] = saved
        except BaseException:
            try:
                scores[:] = -np.inf
            except BaseException:
                pass

    def _catch_up(self, input_ids: np.ndarray) -> None:
        """Accepts what was generated since the last call, or starts anew."""
        ids = input_ids.reshape(-1)
        if not np.issubdtype(ids.dtype, np.integer):
            raise InvalidArgumentError("input_ids must hold token ids, got dtype %s" % ids.dtype)
        n = ids.size
        seen = self._seen
        continued = seen is not None and n == seen.size + 1 and np.array_equal(ids[:-1], seen)
        if seen is not None and not continued and not (n == seen.size and np.array_equal(ids, seen)):
            # A new generation (or one this processor did not follow).
            self._matcher.reset()
            self.prompt_length = self._fixed_prompt_length
            seen = None
        if seen is None:
            if self.prompt_length is None:
                self.prompt_length = n
            if n < self.prompt_length:
                raise InvalidArgumentError("input_ids has %d tokens, fewer than prompt_length %d"
                                           % (n, self.prompt_length))
            new_tokens = ids[self.prompt_length:]
        elif continued:
            new_tokens = ids[-1:]
        else:
            new_tokens = ids[:0]  # the same input_ids again: nothing new
        for token in new_tokens.tolist():
            if not self._matcher.accept_token(int(token)):
                # Only another processor or a forced token can get here; the
                # fail_closed matcher now allows only stop tokens.
                pass
        self._seen = ids.copy()

    def _mask(self, scores: Any) -> None:
        n = self._matcher.next_tokens_into(self._next)
        if n == 0:
            raise RuntimeError("the matcher allows no token")  # failed state: close
        if n <= _LIST_MAX:
            index = self._next[:n].astype(np.intp)
            index = index[index < scores.shape[0]]
            saved = scores[index].copy()
            scores[:] = -np.inf
            scores[index] = saved
            return
        if not self._matcher.fill_next_token_bitmask(self._bitmask):
            return  # every token allowed
        bits = np.unpackbits(self._bitmask.view(np.uint8), bitorder="little")[:scores.shape[0]]
        if bits.size < scores.shape[0]:
            bits = np.concatenate([bits, np.zeros(scores.shape[0] - bits.size, dtype=np.uint8)])
        scores[bits == 0] = -np.inf


_buffers.exclusive(TrieLogitsProcessor)
