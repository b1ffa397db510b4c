"""Vocab: a tokenizer's vocabulary at the byte level, for string-set tries.

A :class:`Vocab` gives every token id the bytes it adds to the decoded text
and marks the ids that are never text (special and added tokens, ids with no
piece, and the padded rows of a model's logits past the tokenizer). It is
built once per tokenizer (the vocabulary trie that masks walk takes ~0.1 s for a
150k vocabulary) and shared by every :meth:`Trie.from_strings` over it.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from . import _buffers
from ._ffi import ffi, lib
from ._vocab_bytes import VocabBytes, vocab_bytes
from .errors import InvalidArgumentError, OutOfRangeError, raise_status

__all__ = ["Vocab"]


class Vocab:
    """Each token id's bytes and flags, with the vocabulary trie string-set masks
    walk: immutable, shared by every trie built over it (a trie keeps its
    vocabulary alive). Build one with :meth:`from_tokenizer` or
    :meth:`from_token_bytes`.

    Attributes:
        encoding: how the tokenizer's pieces were read (``"byte_level"``,
            ``"sentencepiece"``, ``"raw"``), or None when the bytes were given.
    """

    __slots__ = ("_ptr", "encoding", "__weakref__")
    _ptr: Any
    encoding: Optional[str]

    def __init__(self) -> None:
        raise TypeError("use Vocab.from_tokenizer or Vocab.from_token_bytes")

    @classmethod
    def _adopt(cls, ptr: Any, encoding: Optional[str]) -> "Vocab":
        self = object.__new__(cls)
        self._ptr = ffi.gc(ptr, lib.treemask_vocab_free)
        self.encoding = encoding
        return self

    @classmethod
    def _borrow(cls, ptr: Any) -> "Vocab":
        """A Python handle of a vocabulary the C library holds (a trie's)."""
        return cls._adopt(lib.treemask_vocab_retain(ptr), None)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, vocab_size: Optional[int] = None) -> "Vocab":
        """The vocabulary of a ``tokenizers.Tokenizer``, a transformers
        tokenizer or a tiktoken ``Encoding``.

        Args:
            tokenizer: byte-level BPE pieces are read through the GPT-2 byte
                alphabet, SentencePiece pieces with ``▁`` as a space and
                ``<0xNN>`` as byte NN, tiktoken tokens as their bytes. Every
                added token (special or not) is never text: only a stop token.
            vocab_size: the model's logits width (default: the tokenizer's
                length). Ids from the tokenizer's length up to it are padding
                and never allowed; a smaller width may cut off only added
                tokens.

        Raises InvalidArgumentError (naming the token or the width),
        UnsupportedError for a decoder whose tokens have no fixed bytes
        (WordPiece), TypeError for an object of none of the kinds above.
        """
        v = vocab_bytes(tokenizer, vocab_size)
        return cls._from_vocab_bytes(v)

    @classmethod
    def from_token_bytes(cls, tokens: Sequence[bytes], vocab_size: Optional[int] = None,
                         special: Optional[Sequence[bool]] = None) -> "Vocab":
        """A vocabulary from each token's bytes (``tokens[i]`` for id i):
        ``special[i]`` (default False) marks a token that is never text;
        ``vocab_size`` (default ``len(tokens)``) is the logits width."""
        tokens = list(tokens)
        for i, t in enumerate(tokens):
            if not isinstance(t, (bytes, bytearray)):
                raise InvalidArgumentError("tokens[%d] is %s, not bytes" % (i, type(t).__name__))
        flags = [False] * len(tokens) if special is None else [bool(s) for s in special]
        if len(flags) != len(tokens):
            raise InvalidArgumentError("special has %d entries for %d tokens" % (len(flags), len(tokens)))
        width = len(tokens) if vocab_size is None else vocab_size
        return cls._from_vocab_bytes(VocabBytes([bytes(t) for t in tokens], flags, width, "raw"), encoding=None)

    @classmethod
    def _from_vocab_bytes(cls, v: VocabBytes, encoding: Any = ...) -> "Vocab":
        if not isinstance(v.vocab_size, (int, np.integer)) or isinstance(v.vocab_size, bool) \
                or not 0 < v.vocab_size <= _buffers.INT32_MAX:
            raise InvalidArgumentError("vocab_size %r: want 1 .. 2^31 - 1" % (v.vocab_size,))
        if not v.tokens:
            raise InvalidArgumentError("a vocabulary needs at least one token")
        data, offsets, flags = v.packed()
        out = ffi.new("treemask_vocab **")
        buf = ffi.from_buffer("uint8_t[]", data) if data else ffi.NULL
        status = lib.treemask_vocab_create(buf, _buffers.host_buffer(offsets, "uint64_t[]"), len(v.tokens),
                                           _buffers.host_buffer(flags, "uint8_t[]"), int(v.vocab_size), out)
        if status:
            raise_status(status, "Vocab")
        return cls._adopt(out[0], v.encoding if encoding is ... else encoding)

    @property
    def vocab_size(self) -> int:
        """The logits width every mask row covers."""
        return lib.treemask_vocab_size(self._ptr)

    @property
    def n_tokens(self) -> int:
        """The tokenizer's tokens (ids past it are padding)."""
        return lib.treemask_vocab_n_tokens(self._ptr)

    @property
    def fingerprint(self) -> int:
        """XXH64 of everything a mask depends on (vocab_size, every token's
        bytes and flags): equal fingerprints, equal masks. A saved string-set
        trie records its vocabulary's."""
        return int(lib.treemask_vocab_fingerprint(self._ptr))

    @property
    def memory_bytes(self) -> int:
        """Bytes held: token bytes, offsets, flags and the vocabulary trie."""
        return int(lib.treemask_vocab_memory_bytes(self._ptr))

    def token_bytes(self, token: int) -> bytes:
        """The bytes of a token id in [0, vocab_size) (b"" for the padding
        ids past the tokenizer); OutOfRangeError for any other int."""
        if not isinstance(token, (int, np.integer)) or isinstance(token, bool):
            raise InvalidArgumentError("token must be an int, got %s" % type(token).__name__)
        if not 0 <= token < self.vocab_size:
            raise OutOfRangeError("token %d is outside [0, vocab_size=%d)" % (token, self.vocab_size))
        n = lib.treemask_vocab_token_bytes(self._ptr, int(token), ffi.NULL, 0)
        buf = ffi.new("uint8_t[]", max(n, 1))
        lib.treemask_vocab_token_bytes(self._ptr, int(token), buf, n)
        return bytes(ffi.buffer(buf, n))

    def _tokens(self):
        """(bytes, offsets uint64, flags uint8) of every token, as
        treemask_vocab_create takes them."""
        n_tokens = self.n_tokens
        n_bytes = lib.treemask_vocab_copy_tokens(self._ptr, ffi.NULL, 0, ffi.NULL, ffi.NULL)
        data = bytearray(n_bytes)
        offsets = np.empty(n_tokens + 1, dtype=np.uint64)
        flags = np.empty(n_tokens, dtype=np.uint8)
        lib.treemask_vocab_copy_tokens(self._ptr, ffi.from_buffer("uint8_t[]", data) if n_bytes else ffi.NULL,
                                       n_bytes, ffi.from_buffer("uint64_t[]", offsets),
                                       ffi.from_buffer("uint8_t[]", flags))
        return bytes(data), offsets, flags

    def __reduce__(self):
        """Pickles by value (multiprocessing, Ray): the tokens' bytes and
        flags and the width; the receiver rebuilds the token trie (~0.1 s
        for 150k tokens) and gets an equal vocabulary (same fingerprint)."""
        data, offsets, flags = self._tokens()
        return (_vocab_from_tokens, (data, offsets.tobytes(), flags.tobytes(), self.vocab_size, self.encoding))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and other.fingerprint == self.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return "<treemask.Vocab vocab_size=%d n_tokens=%d fingerprint=%016x%s>" % (
            self.vocab_size, self.n_tokens, self.fingerprint,
            " encoding=%s" % self.encoding if self.encoding else "")


def _vocab_from_tokens(data: bytes, offsets: bytes, flags: bytes, vocab_size: int, encoding: Optional[str]) -> Vocab:
    """The other half of Vocab.__reduce__."""
    offs = np.frombuffer(offsets, dtype=np.uint64)
    fl = np.frombuffer(flags, dtype=np.uint8)
    if offs.size != fl.size + 1 or not isinstance(data, bytes):
        raise InvalidArgumentError("a pickled Vocab with %d offsets for %d flags" % (offs.size, fl.size))
    out = ffi.new("treemask_vocab **")
    buf = ffi.from_buffer("uint8_t[]", data) if data else ffi.NULL
    status = lib.treemask_vocab_create(buf, _buffers.host_buffer(offs, "uint64_t[]"), fl.size,
                                       _buffers.host_buffer(fl, "uint8_t[]"), int(vocab_size), out)
    if status:
        raise_status(status, "Vocab (unpickled)")
    return Vocab._adopt(out[0], encoding)


def model_vocab(vocab: Any, width: int, what: str = "vocab") -> Vocab:
    """The model's vocabulary as the adapters' ``vocab=`` takes it: a
    :class:`Vocab` as it is, or a tokenizer read at ``width`` (the model's
    logits width; the tokenizer's length when larger)."""
    if isinstance(vocab, Vocab):
        return vocab
    try:
        v = vocab_bytes(vocab, None)
    except TypeError as e:
        raise InvalidArgumentError("%s: want a treemask.Vocab or the model's tokenizer (%s)" % (what, e)) from None
    if width > len(v.tokens):
        v = v._replace(vocab_size=width)
    return Vocab._from_vocab_bytes(v)
