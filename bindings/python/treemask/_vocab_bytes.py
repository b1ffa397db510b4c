"""A tokenizer's vocabulary as bytes: what each token id contributes to the text.

The byte-level kind of constraint (a string set over a vocabulary) needs, for
every token id, the exact bytes the token adds to the decoded text, and which
ids are never text. :func:`vocab_bytes` reads them from

- a ``tokenizers.Tokenizer`` (its ``tokenizer.json``: the model's pieces, the
  decoder, the added tokens);
- a transformers tokenizer (a fast one through its ``backend_tokenizer``; a
  slow one through ``get_vocab()`` and its added tokens, the encoding being
  read off the pieces);
- a tiktoken ``Encoding`` (``decode_single_token_bytes``, ``special_tokens_set``,
  ``encode_single_token``, ``n_vocab``: its documented API).

Encodings of pieces:

- byte-level BPE (GPT-2, Qwen, Llama 3, Mistral Tekken): each character of a
  piece stands for one byte through the GPT-2 byte alphabet;
- SentencePiece style: ``▁`` is a space and ``<0xNN>`` is the byte NN (byte
  fallback); other characters are their UTF-8;
- raw: the piece's UTF-8 (tiktoken gives bytes directly).

Rules (the C library's vocabulary, ``src/strings/vocab.h``):

- every added token (``added_tokens`` of ``tokenizer.json``, special or not,
  and tiktoken's special tokens) is flagged special: its bytes are its text,
  but it is never allowed as text, only as a stop token;
- ids no piece names (holes in the id space) get no bytes and the special flag;
- ``vocab_size`` is the model's logits width: ids from the tokenizer's length
  up to it are padding (never allowed). A ``vocab_size`` smaller than the
  tokenizer is accepted only if every id it cuts off is an added token (a
  tokenizer may define tokens its model never emits); cutting off a piece of
  the model's own vocabulary is an error.

A SentencePiece tokenizer that adds a space before the first word (``▁Hello``
for ``Hello``) encodes a string as that space plus the string; a string set
built for it takes the prefix ``" "``.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

import numpy as np

from .errors import InvalidArgumentError, UnsupportedError

__all__ = ["VocabBytes", "vocab_bytes", "byte_level_decoder"]

BYTE_LEVEL = "byte_level"
SENTENCEPIECE = "sentencepiece"
RAW = "raw"

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>\Z")


class VocabBytes(NamedTuple):
    """Token ``i``'s bytes are ``tokens[i]``; ``special[i]`` says it is never text.

    ``len(tokens)`` is the tokenizer's length (ids past it, up to
    ``vocab_size``, are padding); ``encoding`` names how pieces were read
    (``"byte_level"``, ``"sentencepiece"`` or ``"raw"``).
    """

    tokens: List[bytes]
    special: List[bool]
    vocab_size: int
    encoding: str

    def packed(self) -> Tuple[bytes, np.ndarray, np.ndarray]:
        """The C library's input: all bytes, ``offsets`` (uint64, ``n + 1``),
        ``flags`` (uint8: bit 0 = special)."""
        lengths = np.fromiter((len(t) for t in self.tokens), dtype=np.uint64, count=len(self.tokens))
        offsets = np.zeros(len(self.tokens) + 1, dtype=np.uint64)
        np.cumsum(lengths, out=offsets[1:])
        flags = np.asarray(self.special, dtype=np.uint8)
        return b"".join(self.tokens), offsets, flags


def byte_level_decoder() -> Dict[str, int]:
    """The GPT-2 byte alphabet, character -> byte: printable Latin-1 bytes
    stand for themselves, the other 68 bytes for U+0100 onwards in order."""
    kept = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    decoder = {chr(b): b for b in kept}
    shifted = 0
    for b in range(256):
        if b not in decoder.values():
            decoder[chr(256 + shifted)] = b
            shifted += 1
    return decoder


_BYTE_LEVEL = byte_level_decoder()
# The alphabet as a str.translate table onto Latin-1 (a byte per character);
# the characters below 256 outside the alphabet are deleted, so that a
# piece with one is caught by its length (one outside it above 255 by the
# Latin-1 encode): ~10x faster than a lookup per character.
_BYTE_LEVEL_TABLE: Dict[int, Optional[int]] = {c: None for c in range(256)}
_BYTE_LEVEL_TABLE.update({ord(ch): b for ch, b in _BYTE_LEVEL.items()})


def _decode_piece(piece: str, encoding: str) -> Optional[bytes]:
    """A model piece's bytes, or None if the encoding cannot spell it."""
    if encoding == BYTE_LEVEL:
        mapped = piece.translate(_BYTE_LEVEL_TABLE)
        if len(mapped) != len(piece):
            return None
        try:
            return mapped.encode("latin-1")
        except UnicodeEncodeError:
            return None
    if encoding == SENTENCEPIECE:
        m = _BYTE_PIECE.match(piece)
        if m:
            return bytes([int(m.group(1), 16)])
        return piece.replace("\u2581", " ").encode("utf-8")
    return piece.encode("utf-8")


def _decoder_types(decoder: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    if decoder is None:
        return []
    if decoder.get("type") == "Sequence":
        return [d for sub in decoder.get("decoders", []) for d in _decoder_types(sub)]
    return [decoder]


def _encoding_of_tokenizer_json(spec: Dict[str, Any]) -> str:
    """How a tokenizer.json's pieces map to bytes, from its decoder."""
    parts = _decoder_types(spec.get("decoder"))
    kinds = {d.get("type") for d in parts}
    if "ByteLevel" in kinds:
        return BYTE_LEVEL
    sentencepiece = "ByteFallback" in kinds or "Metaspace" in kinds or any(
        d.get("type") == "Replace" and d.get("pattern", {}).get("String") == "\u2581" for d in parts)
    if sentencepiece:
        return SENTENCEPIECE
    # WordPiece ("##" continuations), CTC and BPE suffix decoders change text
    # between tokens: a token alone has no fixed bytes.
    unknown = kinds - {"Fuse", "Strip"}
    if unknown:
        raise UnsupportedError("tokenizer decoder %s: a token's bytes do not follow from its piece alone; "
                               "byte-level BPE, SentencePiece and tiktoken vocabularies are supported"
                               % sorted(str(k) for k in unknown))
    return RAW


def _encoding_of_pieces(pieces: Sequence[str]) -> str:
    """The encoding a vocabulary's pieces show (for tokenizers without a
    tokenizer.json): 128+ ``<0xNN>`` pieces mean SentencePiece byte fallback;
    a vocabulary spelled in the byte alphabet (99% of pieces) is byte-level."""
    piece_set = set(pieces)
    if sum(("<0x%02X>" % b) in piece_set for b in range(256)) >= 128:
        return SENTENCEPIECE
    if any("\u2581" in p for p in pieces[:5000]):
        return SENTENCEPIECE
    in_alphabet = sum(all(c in _BYTE_LEVEL for c in p) for p in pieces)
    if pieces and in_alphabet >= 0.99 * len(pieces) and sum(chr(256 + i) in piece_set for i in range(68)) >= 34:
        return BYTE_LEVEL
    return RAW


def _assemble(pieces: Dict[int, str], added: Dict[int, str], encoding: str,
              vocab_size: Optional[int]) -> VocabBytes:
    """Token bytes from model pieces (id -> piece) and added tokens (id -> text)."""
    ids = list(pieces) + list(added)
    if not ids:
        raise InvalidArgumentError("the tokenizer has no tokens")
    if min(ids) < 0:
        raise InvalidArgumentError("the tokenizer has a negative token id %d" % min(ids))
    n = max(ids) + 1
    tokens: List[bytes] = [b""] * n
    special = [True] * n  # holes stay special
    for i, piece in pieces.items():
        if i in added:
            continue
        b = _decode_piece(piece, encoding)
        if b is None:
            raise InvalidArgumentError("token %d: piece %r is not in the %s encoding" % (i, piece, encoding))
        tokens[i] = b
        special[i] = False
    for i, text in added.items():
        tokens[i] = text.encode("utf-8")
        special[i] = True
    return _fit(VocabBytes(tokens, special, n, encoding), vocab_size)


def _fit(v: VocabBytes, vocab_size: Optional[int]) -> VocabBytes:
    n = len(v.tokens)
    if vocab_size is None:
        return v
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size <= 0:
        raise InvalidArgumentError("vocab_size must be a positive int, got %r" % (vocab_size,))
    vocab_size = int(vocab_size)
    if vocab_size >= n:
        return v._replace(vocab_size=vocab_size)
    cut = [i for i in range(vocab_size, n) if not v.special[i]]
    if cut:
        raise InvalidArgumentError("vocab_size %d is smaller than the tokenizer's %d tokens and would cut off "
                                   "token %d (%r), which is not an added token" % (vocab_size, n, cut[0],
                                                                                  v.tokens[cut[0]]))
    return v._replace(tokens=v.tokens[:vocab_size], special=v.special[:vocab_size], vocab_size=vocab_size)


def _from_tokenizers(tok: Any, vocab_size: Optional[int]) -> VocabBytes:
    spec = json.loads(tok.to_str())
    encoding = _encoding_of_tokenizer_json(spec)
    added = {int(a["id"]): str(a["content"]) for a in spec.get("added_tokens", [])}
    pieces = {int(i): p for p, i in tok.get_vocab(with_added_tokens=False).items()}
    return _assemble(pieces, added, encoding, vocab_size)


def _from_transformers(tok: Any, vocab_size: Optional[int]) -> VocabBytes:
    added_decoder = getattr(tok, "added_tokens_decoder", None) or {}
    added = {int(i): str(getattr(t, "content", t)) for i, t in added_decoder.items()}
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        v = _from_tokenizers(backend, None)
        # Tokens added to the transformers wrapper only.
        extra = {i: t for i, t in added.items() if i >= len(v.tokens) or not v.special[i]}
        if extra:
            tokens, special = list(v.tokens), list(v.special)
            grow = max(extra) + 1 - len(tokens)
            if grow > 0:
                tokens += [b""] * grow
                special += [True] * grow
            for i, t in extra.items():
                tokens[i] = t.encode("utf-8")
                special[i] = True
            v = VocabBytes(tokens, special, len(tokens), v.encoding)
        return _fit(v, vocab_size)
    inner = getattr(tok, "tokenizer", None)
    if _is_tiktoken(inner):
        v = _from_tiktoken(inner, None)
        for i in added:
            if i < len(v.special):
                v.special[i] = True
        return _fit(v, vocab_size)
    if not hasattr(tok, "get_vocab"):
        raise TypeError("tokenizer: %s has neither backend_tokenizer nor get_vocab()" % type(tok).__name__)
    vocab: Dict[str, int] = tok.get_vocab()
    pieces = {int(i): p for p, i in vocab.items() if int(i) not in added}
    ordered = [p for _, p in sorted(pieces.items())]
    return _assemble(pieces, added, _encoding_of_pieces(ordered), vocab_size)


def _is_tiktoken(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("decode_single_token_bytes", "special_tokens_set",
                                         "encode_single_token", "n_vocab"))


def _from_tiktoken(enc: Any, vocab_size: Optional[int]) -> VocabBytes:
    n = int(enc.n_vocab)
    specials: Set[int] = {int(enc.encode_single_token(s)) for s in enc.special_tokens_set}
    tokens: List[bytes] = [b""] * n
    special = [True] * n
    for i in range(n):
        if i in specials:
            # A special token's text (tiktoken decodes it to its name).
            tokens[i] = bytes(enc.decode_single_token_bytes(i))
            continue
        try:
            tokens[i] = bytes(enc.decode_single_token_bytes(i))
        except KeyError:
            continue  # a hole in the id space: no bytes, special
        special[i] = False
    return _fit(VocabBytes(tokens, special, n, RAW), vocab_size)


def vocab_bytes(tokenizer: Any, vocab_size: Optional[int] = None) -> VocabBytes:
    """Each token id's bytes and special flag, from a tokenizer.

    ``tokenizer``: a ``tokenizers.Tokenizer``, a transformers tokenizer or a
    tiktoken ``Encoding`` (see the module docstring for what is read and the
    rules). ``vocab_size``: the model's logits width (default: the
    tokenizer's length).

    Raises :class:`InvalidArgumentError` for a piece its encoding cannot spell
    or a ``vocab_size`` that cuts off model tokens, :class:`UnsupportedError`
    for a decoder whose tokens have no fixed bytes (WordPiece), TypeError for
    an object of none of the kinds above.
    """
    if _is_tiktoken(tokenizer):
        return _from_tiktoken(tokenizer, vocab_size)
    if hasattr(tokenizer, "to_str") and hasattr(tokenizer, "get_vocab") and hasattr(tokenizer, "decoder"):
        return _from_tokenizers(tokenizer, vocab_size)
    if hasattr(tokenizer, "get_vocab") or hasattr(tokenizer, "backend_tokenizer"):
        return _from_transformers(tokenizer, vocab_size)
    raise TypeError("tokenizer: expected a tokenizers.Tokenizer, a transformers tokenizer or a tiktoken Encoding, "
                    "got %s" % type(tokenizer).__name__)
