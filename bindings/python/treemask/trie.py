"""Trie: an immutable set of allowed token sequences, built once and shared.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import json
import os
from typing import (TYPE_CHECKING, Any, Callable, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple,
                    Union, cast)

import numpy as np

from . import _buffers
from ._ffi import ffi, lib
from .errors import CorruptFileError, InvalidArgumentError, OutOfRangeError, raise_status
from .failure_policy import LIBRARY_DEFAULT, failure_policy_code

if TYPE_CHECKING:
    from .vocab import Vocab

__all__ = ["Trie", "TrieStats", "SkippedLabel", "STATE_ROOT", "STATE_TERMINATED", "STATE_FAILED", "failure_policy_code"]

StrPath = Union[str, "os.PathLike[str]"]

STATE_ROOT = lib.TREEMASK_STATE_ROOT
STATE_TERMINATED = lib.TREEMASK_STATE_TERMINATED
STATE_FAILED = lib.TREEMASK_STATE_FAILED

# Metadata keys under which save() stores what only Python knows; the
# prefix is reserved (save refuses it in the caller's metadata).
_META_RESERVED = "treemask.python."
_META_LABELS = _META_RESERVED + "labels"
_META_SKIPPED = _META_RESERVED + "skipped_labels"


class TrieStats(NamedTuple):
    """Counts and sizes of a trie (treemask_trie_stats)."""

    n_nodes: int
    n_edges: int
    n_terminals: int
    n_labels: int
    max_depth: int
    max_fanout: int
    bytes: int
    dense_row_cache_bytes: int
    n_warnings: int
    max_label_id: int  # -1 without labels


def _stop_token_list(stop_tokens: Union[int, Iterable[int], None]) -> np.ndarray:
    if stop_tokens is None:
        return np.zeros(0, dtype=np.int32)
    if isinstance(stop_tokens, (int, np.integer)):
        stop_tokens = [stop_tokens]
    return _buffers.int32_array(list(stop_tokens), "stop_tokens")


_BOM_AND_SPACE = "\ufeff \t\r\n"


def _rtp_options(*, start_token_id: Optional[int] = None, end_token_id: Optional[int] = None,
                 sep: Optional[str] = None, rtp_llm_defaults: bool = False, rtp_compat: bool = False):
    """A filled treemask_rtp_options (its sep is owned by the returned cdata)."""
    rtp = ffi.new("treemask_rtp_options *")
    lib.treemask_rtp_options_init(rtp)
    for name, value in (("start_token_id", start_token_id), ("end_token_id", end_token_id)):
        if value is None:
            continue
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise TypeError("%s must be an int, got %s" % (name, type(value).__name__))
        if not 0 <= value <= _buffers.INT32_MAX:
            raise OutOfRangeError("%s %d: want 0 .. 2^31 - 1" % (name, value))
        setattr(rtp, name, int(value))
    rtp.rtp_llm_defaults = bool(rtp_llm_defaults)
    rtp.rtp_llm_compat = bool(rtp_compat)
    if sep is None:
        return rtp
    sep_c = ffi.new("char[]", sep.encode("utf-8"))
    rtp.sep = sep_c
    # The struct must keep sep alive: tie them with ffi.gc's finaliser.
    return ffi.gc(rtp, lambda _p, _keep=sep_c: None)


def _options(vocab_size: int, stop_tokens: np.ndarray, dense_row_cache_bytes: Optional[int]):
    """A filled treemask_trie_options; stop_tokens must stay alive while it is used."""
    # The library checks that vocab_size is positive; only what its int32
    # cannot hold stops here.
    if not isinstance(vocab_size, (int, np.integer)) or isinstance(vocab_size, bool):
        raise InvalidArgumentError("vocab_size must be an int, got %r" % (vocab_size,))
    if not _buffers.INT32_MIN <= vocab_size <= _buffers.INT32_MAX:
        raise InvalidArgumentError("vocab_size %d: want 1 .. 2^31 - 1" % vocab_size)
    opts = ffi.new("treemask_trie_options *")
    lib.treemask_trie_options_init(opts)
    opts.vocab_size = int(vocab_size)
    if stop_tokens.size:
        opts.stop_tokens = _buffers.host_buffer(stop_tokens, "int32_t[]")
        opts.n_stop_tokens = stop_tokens.size
    if dense_row_cache_bytes is not None:
        if dense_row_cache_bytes < 0:
            raise InvalidArgumentError("dense_row_cache_bytes must be >= 0")
        opts.dense_row_cache_bytes = dense_row_cache_bytes
    return opts


def _fs_path(path: StrPath, what: str = "path") -> bytes:
    try:
        raw = os.fsencode(path)
    except TypeError:
        raise InvalidArgumentError("%s: want a str or os.PathLike, got %s" % (what, type(path).__name__)) from None
    if b"\0" in raw:
        raise InvalidArgumentError("%s %r contains a NUL byte" % (what, path))
    return raw


_JSON_CHUNK = 4096


def _json_list(items: Sequence[Any]) -> str:
    """``json.dumps(list(items), ensure_ascii=False)``, the same text, built
    4,096 items at a time: one call over a million labels holds the GIL for
    ~2 s (a server's event loop waits that long)."""
    if len(items) <= _JSON_CHUNK:
        return json.dumps(list(items), ensure_ascii=False)
    return "[" + ", ".join(json.dumps(list(items[i:i + _JSON_CHUNK]), ensure_ascii=False)[1:-1]
                           for i in range(0, len(items), _JSON_CHUNK)) + "]"


class _PathsCSR(NamedTuple):
    """Paths as one flat token array and its offsets (path i is
    ``tokens[offsets[i]:offsets[i + 1]]``), for callers that build many
    paths without a Python list per path (the vLLM plugin's choice lists)."""

    tokens: np.ndarray
    offsets: np.ndarray


def _paths_csr(paths: Any) -> Tuple[np.ndarray, np.ndarray]:
    """(tokens int32, offsets uintp) of a list of token sequences, a 2-D
    array or a _PathsCSR."""
    if isinstance(paths, _PathsCSR):
        tokens = _buffers.int32_array(paths.tokens, "paths (flattened)")
        offsets = np.ascontiguousarray(paths.offsets, dtype=np.uintp)
        if offsets.ndim != 1 or offsets.size == 0 or offsets[0] != 0 or offsets[-1] != tokens.size \
                or (offsets.size > 1 and bool((np.diff(offsets.astype(np.int64)) < 0).any())):
            raise InvalidArgumentError("paths: the offsets do not cut the flat token array into paths")
        return tokens, offsets
    if isinstance(paths, np.ndarray) or _buffers.torch_tensor_module(paths) is not None:
        arr = paths.numpy() if _buffers.torch_tensor_module(paths) is not None else paths
        if arr.ndim != 2:
            raise InvalidArgumentError("paths: a numpy array must be 2-D (one path per row), got shape %s"
                                       % (arr.shape,))
        n, length = arr.shape
        tokens = _buffers.int32_array(arr.reshape(-1), "paths (flattened)")
        return tokens, np.arange(n + 1, dtype=np.uintp) * length
    try:
        seqs = [p if isinstance(p, np.ndarray) else list(p) for p in paths]
    except TypeError:
        raise InvalidArgumentError("paths: want a sequence of token sequences") from None
    lengths = np.fromiter((len(p) for p in seqs), dtype=np.uintp, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.uintp)
    np.cumsum(lengths, out=offsets[1:])
    flat: List[int] = []
    for p in seqs:
        flat.extend(p.tolist() if isinstance(p, np.ndarray) else p)
    try:
        tokens = _buffers.int32_array(flat, "paths")
    except (InvalidArgumentError, OutOfRangeError) as e:
        # Name the path and position instead of the flattened index.
        flat_index = getattr(e, "index", 0)
        path = int(np.searchsorted(offsets, flat_index, side="right")) - 1
        raise type(e)("paths[%d][%d] = %r is not an int32 token id"
                      % (path, flat_index - int(offsets[path]), flat[flat_index])) from None
    return tokens, offsets


class Trie:
    """An immutable set of allowed token sequences plus the stop tokens that
    end them. Build one with a ``from_*`` class method or :meth:`load`.

    A trie is shared, read-only, by any number of matchers and threads. A
    matcher keeps its own reference to the C trie, so dropping the Python
    object never invalidates a matcher.
    """

    __slots__ = ("_ptr", "_words", "_labels", "_skipped_labels", "__weakref__")
    _ptr: Any
    _words: int
    _labels: Optional[Tuple[str, ...]]
    _skipped_labels: List[str]

    def __init__(self) -> None:
        raise TypeError("use Trie.from_paths, from_labels, from_strings, from_rtp_json, from_rtp_tsv, from_jsonl"
                        " or load")

    @classmethod
    def _adopt(cls, out, labels: Optional[Sequence[str]] = None,
               skipped: Optional[Sequence[str]] = None) -> "Trie":
        self = object.__new__(cls)
        self._ptr = ffi.gc(out[0], lib.treemask_trie_free)
        self._words = lib.treemask_bitmask_words(lib.treemask_trie_vocab_size(self._ptr))
        self._labels = tuple(labels) if labels is not None else None
        self._skipped_labels = list(skipped or [])
        return self

    # ---- construction -------------------------------------------------

    @classmethod
    def from_paths(cls, paths: Union[Iterable[Sequence[int]], np.ndarray], vocab_size: int,
                   stop_tokens: Union[int, Iterable[int]], labels: Optional[Iterable[int]] = None, *,
                   dense_row_cache_bytes: Optional[int] = None, no_labels: bool = False) -> "Trie":
        """Builds a trie from token sequences.

        Args:
            paths: token-id sequences (lists, tuples or 1-D arrays), or a 2-D
                integer array with one equal-length path per row. The empty
                path makes the root terminal; duplicates merge.
            vocab_size: every token id and stop token must be below it.
            stop_tokens: one id or several (a model may have several EOS ids).
            labels: an integer label id per path (default: path i carries
                label i), reported by :meth:`Matcher.label_ids`.
            dense_row_cache_bytes: memory budget for cached dense rows of
                high-fanout nodes (default 64 MiB; 0 disables).
            no_labels: terminals carry no label ids (``labels`` must then be
                None): a catalogue whose paths are the items themselves
                saves the label array (4 or 8 bytes per item).

        Raises:
            InvalidArgumentError / OutOfRangeError: naming the path and
            position of a bad token, or the bad argument.
        """
        tokens, offsets = _paths_csr(paths)
        n_paths = offsets.size - 1
        if n_paths == 0:
            raise InvalidArgumentError("paths is empty: a trie needs at least one path")
        stops = _stop_token_list(stop_tokens)
        opts = _options(vocab_size, stops, dense_row_cache_bytes)
        opts.no_labels = 1 if no_labels else 0
        label_ptr = ffi.NULL
        if labels is not None:
            label_arr = _buffers.int64_array(list(labels), "labels")
            if label_arr.size != n_paths:
                raise InvalidArgumentError("labels has %d entries for %d paths" % (label_arr.size, n_paths))
            label_ptr = _buffers.host_buffer(label_arr, "int64_t[]")
        out = ffi.new("treemask_trie **")
        token_ptr = _buffers.host_buffer(tokens, "int32_t[]") if tokens.size else ffi.NULL
        status = lib.treemask_trie_from_paths(opts, token_ptr, _buffers.host_buffer(offsets, "size_t[]"),
                                              n_paths, label_ptr, out)
        if status:
            raise_status(status)
        return cls._adopt(out)

    @classmethod
    def from_labels(cls, labels: Sequence[str], tokenizer: Any, vocab_size: int,
                    stop_tokens: Union[int, Iterable[int]], prefix: str = " ", strict: bool = False, *,
                    decode: Optional[Callable[[List[int]], str]] = None,
                    progress: Optional[Callable[[int, int], None]] = None) -> "Trie":
        """Builds a trie of label strings tokenized by ``tokenizer``.

        Label ``i`` is tokenized as ``prefix + labels[i]`` and carries label id
        ``i`` (:meth:`label` maps it back to the string).

        ``tokenizer`` may be:

        - a transformers tokenizer: called as ``encode(text,
          add_special_tokens=False)``, checked with ``decode``;
        - a ``tokenizers.Tokenizer``: ``encode(text,
          add_special_tokens=False).ids``, checked with ``decode``;
        - a plain callable ``text -> list[int]``: not checked unless
          ``decode`` (``ids -> text``) is given.

        A label round-trips when its ids decode to ``prefix + label`` (or to
        the label alone, for tokenizers that drop a leading space when
        decoding). One that does not, whose ids contain a stop token, or that
        tokenizes to nothing (it would make the empty sequence complete) is
        left out and listed in :attr:`skipped_labels` (each entry is the label
        string, with the reason in its ``reason`` attribute); with
        ``strict=True`` it raises :class:`InvalidArgumentError` instead.

        ``progress(done, total)``, if given, is called every 1,000 labels and
        at the end (``python -m treemask compile-labels`` draws a bar with it).

        Raises TypeError naming ``tokenizer`` when it is not one of the kinds
        above or returns something other than a list of int token ids.
        """
        labels = list(labels)
        if not labels:
            raise InvalidArgumentError("no labels: a trie needs at least one label")
        if not isinstance(prefix, str) or not _encodable(prefix):
            raise InvalidArgumentError("prefix %r: want text (a str without lone surrogates, such as undecodable"
                                       " bytes of a command line)" % (prefix,))
        encode, check = _tokenizer_functions(tokenizer, decode)
        stops = _stop_token_list(stop_tokens)
        stop_set = set(stops.tolist())
        paths: List[List[int]] = []
        ids: List[int] = []
        skipped: List[SkippedLabel] = []
        for i, label in enumerate(labels):
            if progress is not None and i % 1000 == 0:
                progress(i, len(labels))
            if not isinstance(label, str):
                raise InvalidArgumentError("labels[%d] is %s, not a str" % (i, type(label).__name__))
            if not label.isascii() and not _encodable(label):
                raise InvalidArgumentError("labels[%d] %r is not valid Unicode text (a lone surrogate)" % (i, label))
            text = prefix + label
            tokens = _token_ids(encode(text), i)
            wide = [t for t in tokens if not 0 <= t < vocab_size] if isinstance(vocab_size, (int, np.integer)) else []
            if wide:
                raise OutOfRangeError("labels[%d] %r: the tokenizer gives token %d, outside vocab_size %d (give the"
                                      " model's vocab_size: its logits width, at least the tokenizer's size)"
                                      % (i, label, wide[0], vocab_size))
            problem = None
            inside = sorted(stop_set.intersection(tokens))
            if not tokens:
                problem = "it tokenizes to no tokens (an empty path would let a sequence end at once)"
            elif inside:
                problem = "the stop token %d is inside its path %s" % (inside[0], tokens)
            elif check is not None:
                decoded = check(tokens)
                if decoded != text and decoded != label:
                    problem = "it does not round-trip: tokens %s decode to %r, not %r" % (tokens, decoded, text)
            if problem is not None:
                if strict:
                    raise InvalidArgumentError("labels[%d] %r: %s" % (i, label, problem))
                skipped.append(SkippedLabel(label, problem))
                continue
            paths.append(tokens)
            ids.append(i)
        if progress is not None:
            progress(len(labels), len(labels))
        if not paths:
            raise InvalidArgumentError("none of the %d labels round-trips through the tokenizer" % len(labels))
        trie = cls.from_paths(paths, vocab_size, stops, ids)
        trie._labels = tuple(labels)
        trie._skipped_labels = list(skipped)
        return trie

    @classmethod
    def from_strings(cls, strings: Sequence[Union[str, bytes]], vocab: "Vocab",
                     stop_tokens: Union[int, Iterable[int]], *, prefix: Union[str, bytes] = "",
                     labels: Optional[Iterable[int]] = None, dense_row_cache_bytes: Optional[int] = None,
                     no_labels: bool = False) -> "Trie":
        """A string set at the byte level: any tokenization of
        ``prefix + strings[i]`` is allowed (``pos`` + ``itive`` as well as
        ``positive``), as engines match ``choice`` (xgrammar, llguidance,
        outlines). No tokenizer runs: the strings' bytes are matched against
        ``vocab``'s tokens as the sequence goes (150k names build in ~30 ms).

        Token t is allowed iff its bytes spell a path from the state in the
        byte trie of the strings (it may end inside a string, or run from one
        string's end into a longer one); a stop token iff a string ends at
        the state. Special and added tokens, tokens without bytes and padded
        ids are never allowed as text; a stop token is only ever a stop token.
        :meth:`from_labels` is the other semantics: each label's canonical
        tokenization only.

        Args:
            strings: ``str`` (UTF-8 encoded) or ``bytes``; duplicates merge,
                the empty string lets the sequence end right after ``prefix``.
            vocab: a :class:`treemask.Vocab` (shared: build it once per model).
            stop_tokens: the model's EOS id(s).
            prefix: put before every string (``" "`` for a label that follows
                a word, as SentencePiece and GPT-style tokenizers spell it).
            labels: an integer label id per string (default: string i carries
                label i; :meth:`label` maps it back to the string).
            dense_row_cache_bytes: budget of the cache of expensive rows (the
                root's, default 64 MiB; 0 disables).
            no_labels: terminals carry no label ids.

        The trie works with :class:`Matcher`, :class:`BatchMatcher`, the state
        arrays, the beam step and top-k, :mod:`treemask.hf` and
        :mod:`treemask.llama_cpp`; the decoding modes but
        ``override_stop_tokens``, exclusion sets and the CUDA device trie
        refuse it (``UnsupportedError``). Its state is a node of the byte trie.

        Raises InvalidArgumentError / OutOfRangeError naming the string or
        the argument.
        """
        from .vocab import Vocab

        if not isinstance(vocab, Vocab):
            raise InvalidArgumentError("vocab must be a treemask.Vocab (Vocab.from_tokenizer), got %s"
                                       % type(vocab).__name__)
        if isinstance(strings, (str, bytes)):
            raise InvalidArgumentError("strings: want a sequence of strings, got one %s" % type(strings).__name__)
        strings = list(strings)
        if not strings:
            raise InvalidArgumentError("no strings: a trie needs at least one string")
        data, lengths = _utf8_concat(strings)
        if isinstance(prefix, str):
            if not _encodable(prefix):
                raise InvalidArgumentError("prefix %r is not valid Unicode text (a lone surrogate, such as undecodable"
                                           " bytes of a command line); pass bytes for a prefix of any bytes"
                                           % prefix)
            prefix_bytes = prefix.encode("utf-8")
        elif isinstance(prefix, (bytes, bytearray)):
            prefix_bytes = bytes(prefix)
        else:
            raise InvalidArgumentError("prefix is %s, not a str or bytes" % type(prefix).__name__)
        offsets = np.zeros(len(strings) + 1, dtype=np.uintp)
        np.cumsum(lengths, out=offsets[1:])
        del lengths
        stops = _stop_token_list(stop_tokens)
        opts = _options(vocab.vocab_size, stops, dense_row_cache_bytes)
        opts.no_labels = 1 if no_labels else 0
        sopts = ffi.new("treemask_strings_options *")
        lib.treemask_strings_options_init(sopts)
        prefix_c = ffi.from_buffer("char[]", prefix_bytes) if prefix_bytes else ffi.NULL
        sopts.prefix = prefix_c
        sopts.prefix_len = len(prefix_bytes)
        if labels is not None:
            label_arr = _buffers.int64_array(list(labels), "labels")
            if label_arr.size != len(strings):
                raise InvalidArgumentError("labels has %d entries for %d strings" % (label_arr.size, len(strings)))
            sopts.label_ids = _buffers.host_buffer(label_arr, "int64_t[]")
        out = ffi.new("treemask_trie **")
        status = lib.treemask_trie_from_strings(opts, vocab._ptr, ffi.from_buffer("char[]", data) if data else ffi.NULL,
                                                _buffers.host_buffer(offsets, "size_t[]"), len(strings), sopts, out)
        if status:
            raise_status(status)
        names: Optional[Sequence[str]] = None
        if labels is None and not no_labels:
            names = cast(Sequence[str], strings) if all(isinstance(s, str) for s in strings) else \
                [s if isinstance(s, str) else s.decode("utf-8", "replace") for s in strings]
        return cls._adopt(out, names)

    @classmethod
    def from_rtp_json(cls, source: Union[bytes, str, "os.PathLike[str]"], vocab_size: int,
                      stop_tokens: Union[int, Iterable[int], None] = None, *,
                      rtp_llm_defaults: bool = False, rtp_compat: bool = False) -> "Trie":
        """Loads an RTP-LLM tree-decode dictionary (``{"start_token_id",
        "end_token_id", "sep", "prefix_dict"}``).

        ``source``: ``bytes`` or a ``str`` starting with ``{`` is the JSON text;
        an ``os.PathLike`` or any other ``str`` is a file path. With
        ``stop_tokens=None`` the dictionary's ``end_token_id`` is the stop
        token. ``rtp_llm_defaults`` accepts files without start/end ids
        (RTP-LLM's 225 / 2). ``rtp_compat=True`` loads exactly what RTP-LLM
        loads: negative and non-int32 list ids are skipped, keys that do not
        start with the start token are ignored and the separator ``"-"`` is
        allowed, each counted in ``stats().n_warnings`` instead of an error.

        Raises ParseError (with the byte offset), InvalidArgumentError /
        OutOfRangeError (naming the key), FileError (saying when a ``str`` was
        read as a path), UnsupportedError (library built without JSON support).
        """
        stops = _stop_token_list(stop_tokens)
        opts = _options(vocab_size, stops, None)
        rtp = _rtp_options(rtp_llm_defaults=rtp_llm_defaults, rtp_compat=rtp_compat)
        return cls._from_text_or_file(
            source, lambda text: text.lstrip(_BOM_AND_SPACE).startswith("{"),
            lambda data, n, out: lib.treemask_trie_from_rtp_json(opts, rtp, data, n, out),
            lambda path, out: lib.treemask_trie_from_rtp_json_file(opts, rtp, path, out),
            "it does not start with '{'")

    @classmethod
    def from_rtp_tsv(cls, source: Union[bytes, str, "os.PathLike[str]"], vocab_size: int,
                     start_token_id: int, end_token_id: int, sep: str = "_", *,
                     stop_tokens: Union[int, Iterable[int], None] = None,
                     rtp_compat: bool = False) -> "Trie":
        """Loads RTP-LLM's text form: lines ``key<TAB>id\\x02id\\x02...``.

        ``source``: ``bytes``, or a ``str`` containing a tab, is the text; an
        ``os.PathLike`` or any other ``str`` is a file path. The text has no
        header, so the start and end token ids are arguments.
        ``rtp_compat``: as for :meth:`from_rtp_json`.
        """
        stops = _stop_token_list(stop_tokens)
        opts = _options(vocab_size, stops, None)
        if not isinstance(sep, str):
            raise TypeError("sep must be a str, got %s" % type(sep).__name__)
        rtp = _rtp_options(start_token_id=start_token_id, end_token_id=end_token_id, sep=sep,
                           rtp_compat=rtp_compat)
        return cls._from_text_or_file(
            source, lambda text: "\t" in text,
            lambda data, n, out: lib.treemask_trie_from_rtp_tsv(opts, rtp, data, n, out),
            lambda path, out: lib.treemask_trie_from_rtp_tsv_file(opts, rtp, path, out),
            "it contains no tab")

    @classmethod
    def from_jsonl(cls, source: Union[bytes, str, "os.PathLike[str]"], vocab_size: int,
                   stop_tokens: Union[int, Iterable[int]]) -> "Trie":
        """Loads token paths as JSON Lines (``[t0, t1, ...]`` or ``{"tokens":
        [...], "label": L}`` per line). ``bytes`` or a ``str`` starting with
        ``[`` or ``{`` is the text; anything else a path."""
        stops = _stop_token_list(stop_tokens)
        opts = _options(vocab_size, stops, None)
        return cls._from_text_or_file(
            source, lambda text: text.lstrip()[:1] in ("[", "{"),
            lambda data, n, out: lib.treemask_trie_from_jsonl(opts, data, n, out),
            lambda path, out: lib.treemask_trie_from_jsonl_file(opts, path, out))

    @classmethod
    def _from_text_or_file(cls, source: Any, str_is_text: Callable[[str], bool], from_text, from_file,
                           why_a_path: str = "") -> "Trie":
        """Loads from bytes, a str that str_is_text says is text, or a path.
        A str read as a path that cannot be opened says so (why_a_path)."""
        out = ffi.new("treemask_trie **")
        str_path = False
        if isinstance(source, str) and str_is_text(source):
            source = source.encode("utf-8")
        elif isinstance(source, str):
            str_path = True
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = ffi.from_buffer("char[]", source)
            status = from_text(data, len(data), out)
        else:
            status = from_file(_fs_path(source), out)
        if status:
            if str_path and status == lib.TREEMASK_ERR_IO:
                raise_status(status, context="the str %r was read as a file path (%s; pass bytes "
                             "to give the text itself)" % (source[:40], why_a_path or "not text"))
            raise_status(status)
        return cls._adopt(out)

    @classmethod
    def load(cls, path: StrPath, *, trusted: bool = False, vocab: Optional["Vocab"] = None) -> "Trie":
        """Maps a ``.tmtrie`` file written by :meth:`save` (or ``treemask
        compile``). ``trusted=True`` skips only the payload checksum (the
        linear structural check of the arrays still runs). Label names saved with the trie
        come back.

        The file is mapped, not read: while the trie (or a matcher,
        processor or batch that holds it) is alive, the file must not be
        truncated or rewritten in place (the C API's rule,
        ``treemask_trie_load``): the checked arrays would change under the
        trie or their pages vanish, and the process dies (SIGSEGV, SIGBUS).
        ``cp new.tmtrie served.tmtrie``, ``scp``, ``rsync --inplace``, an
        editor's save or a sync job rewrite in place. Replace a file that a
        process may have loaded by writing the new file beside it and
        renaming it over the old one (``os.replace``, ``mv``): the loaded
        trie keeps the old file. :meth:`save` and ``treemask compile`` do
        this. A process that serves files others may change in place maps
        a private copy instead, as the vLLM plugin does
        (:mod:`treemask.vllm.snapshots`).

        A string-set file (:meth:`from_strings`) holds its vocabulary, which
        the load rebuilds; ``vocab`` shares one instead (its fingerprint must
        be the file's, else InvalidArgumentError naming both). A token-path
        file ignores ``vocab``.

        Raises FileError, CorruptFileError, VersionMismatchError.
        """
        from .vocab import Vocab

        if vocab is not None and not isinstance(vocab, Vocab):
            raise InvalidArgumentError("vocab must be a treemask.Vocab or None, got %s" % type(vocab).__name__)
        out = ffi.new("treemask_trie **")
        flags = lib.TREEMASK_LOAD_TRUSTED if trusted else 0
        if vocab is not None:
            status = lib.treemask_trie_load_with_vocab(_fs_path(path), flags, vocab._ptr, out)
        else:
            status = lib.treemask_trie_load(_fs_path(path), flags, out)
        if status:
            raise_status(status)
        trie = cls._adopt(out)
        # Only the reserved entries are read here, each checked: a file that
        # the C library loads but whose label names Python cannot read is a
        # CorruptFileError naming the key, never a raw JSON or Unicode error.
        labels = _reserved_json(trie, _META_LABELS, path)
        if labels is not None:
            if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
                raise _bad_metadata(path, _META_LABELS, "not a JSON list of strings")
            # Every label id must name a label: a shorter list would load and
            # fail only when a matcher reached the unnamed one.
            top = trie.stats().max_label_id
            if top >= len(labels):
                raise _bad_metadata(path, _META_LABELS, "%d label names, but the trie carries label id %d"
                                    % (len(labels), top))
            trie._labels = tuple(labels)
        skipped = _reserved_json(trie, _META_SKIPPED, path)
        if skipped is not None:
            if not isinstance(skipped, list):
                raise _bad_metadata(path, _META_SKIPPED, "not a JSON list")
            out_skipped: List[str] = []
            for i, e in enumerate(skipped):
                if isinstance(e, str):
                    out_skipped.append(e)
                elif isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) for x in e):
                    out_skipped.append(SkippedLabel(e[0], e[1]))
                else:
                    raise _bad_metadata(path, _META_SKIPPED, "entry %d is neither a string nor a [label, reason]"
                                        " pair of strings" % i)
            trie._skipped_labels = out_skipped
        return trie

    def save(self, path: StrPath, metadata: Optional[Mapping[str, str]] = None) -> None:
        """Writes the trie to a ``.tmtrie`` file (atomically: a temporary file
        renamed over ``path``). ``metadata`` adds key/value strings (a
        tokenizer fingerprint, provenance); label names are stored too.
        """
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidArgumentError("metadata: want a mapping of str to str, got %s" % type(metadata).__name__)
        entries: dict = {}
        for k, v in (metadata or {}).items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise InvalidArgumentError("metadata keys and values must be str, got %r: %r" % (k, v))
            if k.startswith(_META_RESERVED):
                raise InvalidArgumentError(
                    "metadata key %r is reserved: the keys under %r are written by Trie.save itself (the label"
                    " names) and read back by Trie.load" % (k, _META_RESERVED))
            entries[k] = v
        if self._labels is not None:
            entries[_META_LABELS] = _json_text(list(self._labels))
            entries[_META_SKIPPED] = _json_text(
                [[s, s.reason] if isinstance(s, SkippedLabel) else s for s in self._skipped_labels])
        keep: List[Any] = []
        keys = ffi.new("const char *[]", len(entries))
        values = ffi.new("const char *[]", len(entries))
        for i, (k, v) in enumerate(entries.items()):
            try:
                kc, vc = ffi.new("char[]", k.encode("utf-8")), ffi.new("char[]", v.encode("utf-8"))
            except UnicodeEncodeError:
                raise InvalidArgumentError("metadata %r: not valid Unicode text (a lone surrogate)" % k) from None
            keep += (kc, vc)
            keys[i], values[i] = kc, vc
        opts = ffi.new("treemask_save_options *")
        lib.treemask_save_options_init(opts)
        opts.metadata_keys, opts.metadata_values, opts.n_metadata = keys, values, len(entries)
        status = lib.treemask_trie_save(self._ptr, _fs_path(path), opts)
        if status:
            raise_status(status)

    def __reduce__(self):
        """Pickles by value (multiprocessing, Ray): the trie's ``.tmtrie``
        bytes as :meth:`save` writes them (label names, metadata and a
        string set's vocabulary included); the receiver loads them as
        :meth:`load` does (the checksum verified) and gets an equal trie.
        Costs a save and a load through a temporary file (a few ms per MB:
        a 150k-name string set pickles in well under a second)."""
        return (_trie_from_bytes, (self._to_bytes(),))

    def _to_bytes(self) -> bytes:
        import tempfile

        fd, path = tempfile.mkstemp(prefix="treemask-", suffix=".tmtrie")
        try:
            os.close(fd)
            self.save(path)
            with open(path, "rb") as f:
                return f.read()
        finally:
            os.unlink(path)

    # ---- queries ------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """The vocab_size the trie was built with."""
        return lib.treemask_trie_vocab_size(self._ptr)

    @property
    def is_string_set(self) -> bool:
        """True for a string set at the byte level (:meth:`from_strings`):
        any tokenization of its strings; False for token paths."""
        return bool(lib.treemask_trie_is_string_set(self._ptr))

    @property
    def vocab(self) -> Optional["Vocab"]:
        """The vocabulary of a string-set trie (shared), or None."""
        from .vocab import Vocab

        ptr = lib.treemask_trie_vocab(self._ptr)
        return Vocab._borrow(ptr) if ptr != ffi.NULL else None

    def check_vocab(self, vocab: "Vocab") -> None:
        """Raises InvalidArgumentError unless this trie fits the model whose
        vocabulary is ``vocab`` (a :class:`treemask.Vocab` of the model's
        tokenizer, at the model's logits width): the trie is no wider than
        it, and a string set's masks are the same over both vocabularies
        (equal fingerprints, or every id the same text bytes or text in
        neither). The message names both fingerprints and the first token
        that differs. A string set compiled for another tokenizer would mask
        by other tokens' bytes; token paths are checked for their width
        only. The adapters call it when given the model's vocabulary
        (``vocab=`` of :mod:`treemask.hf` and :mod:`treemask.llama_cpp`)."""
        from .vocab import Vocab

        if not isinstance(vocab, Vocab):
            raise InvalidArgumentError("vocab must be a treemask.Vocab (Vocab.from_tokenizer), got %s"
                                       % type(vocab).__name__)
        status = lib.treemask_trie_check_vocab(self._ptr, vocab._ptr)
        if status:
            raise_status(status)

    @property
    def bitmask_words(self) -> int:
        """int32 words in one bitmask row: ceil(vocab_size / 32)."""
        return self._words

    @property
    def stop_tokens(self) -> List[int]:
        """The stop tokens, ascending."""
        n = lib.treemask_trie_stop_tokens(self._ptr, ffi.NULL, 0)
        buf = ffi.new("int32_t[]", n)
        lib.treemask_trie_stop_tokens(self._ptr, buf, n)
        return list(buf)

    def stats(self) -> TrieStats:
        """Node, edge, terminal and label counts, depth, fanout and bytes."""
        return _buffers.sized_result("treemask_trie_stats", lambda out: lib.treemask_trie_get_stats(self._ptr, out),
                                     TrieStats)

    @property
    def metadata(self) -> dict:
        """Key/value strings the trie carries (from its ``.tmtrie`` file).
        An entry that is not UTF-8 text (a file written through the C API
        can hold any bytes) raises CorruptFileError naming it."""
        result = {}
        key, value = ffi.new("const char **"), ffi.new("const char **")
        for i in range(lib.treemask_trie_metadata_count(self._ptr)):
            status = lib.treemask_trie_metadata_at(self._ptr, i, key, value)
            if status:
                raise_status(status)
            k, v = ffi.string(key[0]), ffi.string(value[0])
            try:
                result[k.decode("utf-8")] = v.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CorruptFileError("metadata entry %d (key %r) is not UTF-8 text: %s" % (i, k, e)) from None
        return result

    @property
    def labels(self) -> Optional[Tuple[str, ...]]:
        """The label strings (label id = index), or None for a trie built
        without names."""
        return self._labels

    @property
    def skipped_labels(self) -> List[str]:
        """Labels :meth:`from_labels` left out (each a :class:`SkippedLabel`:
        the string, with why in ``.reason``)."""
        return list(self._skipped_labels)

    def label(self, label_id: int) -> str:
        """The string of a label id (tries built by :meth:`from_labels`)."""
        if self._labels is None:
            raise InvalidArgumentError("this trie has no label names: build it with Trie.from_labels")
        if not 0 <= label_id < len(self._labels):
            raise OutOfRangeError("label id %d is outside [0, %d)" % (label_id, len(self._labels)))
        return self._labels[label_id]

    # ---- state arrays -------------------------------------------------

    def fill_states(self, states: Any, bitmask: Any) -> None:
        """Writes bitmask row i from ``states[i]`` (a node id, or
        STATE_TERMINATED / STATE_FAILED): the state-array form of a fill, for
        engines that keep one uint32 per sequence themselves (no modes, no
        rollback). ``bitmask`` needs at least ``len(states)`` rows.
        """
        arr = _state_array(states, writable=False)
        pointer, n_rows, words = _buffers.int32_rows(bitmask)
        if n_rows < arr.size:
            raise _buffers.BufferTooSmallError("bitmask has %d rows for %d states" % (n_rows, arr.size))
        status = lib.treemask_trie_fill_states(self._ptr, _buffers.host_buffer(arr, "uint32_t[]"), arr.size,
                                               pointer, words)
        if status:
            raise_status(status)

    def advance_states(self, states: np.ndarray, tokens: Any,
                       failure_policy: Union[str, int] = LIBRARY_DEFAULT) -> np.ndarray:
        """Advances ``states`` (a writable C-contiguous numpy uint32 array) in
        place by ``tokens`` (token < 0: no token for that row) and returns
        the accepted flags (False only where a token was rejected)."""
        arr = _state_array(states, writable=True)
        tok = _buffers.int32_array(tokens, "tokens")
        if tok.size != arr.size:
            raise InvalidArgumentError("tokens has %d entries for %d states" % (tok.size, arr.size))
        accepted = np.ones(arr.size, dtype=np.bool_)
        status = lib.treemask_trie_advance_states(
            self._ptr, _buffers.host_buffer(arr, "uint32_t[]"), _buffers.host_buffer(tok, "int32_t[]"),
            arr.size, failure_policy_code(failure_policy), _buffers.host_buffer(accepted, "bool[]"))
        if status:
            raise_status(status)
        return accepted

    def __repr__(self) -> str:
        s = self.stats()
        return "<treemask.Trie%s vocab_size=%d nodes=%d terminals=%d max_depth=%d%s>" % (
            " string set" if self.is_string_set else "", self.vocab_size, s.n_nodes, s.n_terminals, s.max_depth,
            " labels=%d" % len(self._labels) if self._labels is not None else "")


def _trie_from_bytes(data: bytes) -> Trie:
    """The other half of Trie.__reduce__: the bytes through a temporary file
    (the trie maps it; the name is removed at once, the mapping stays)."""
    import tempfile

    if not isinstance(data, (bytes, bytearray)):
        raise InvalidArgumentError("a pickled Trie holds %s, not the bytes of a .tmtrie" % type(data).__name__)
    fd, path = tempfile.mkstemp(prefix="treemask-", suffix=".tmtrie")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return Trie.load(path)
    finally:
        os.unlink(path)


def _json_text(value: Any) -> str:
    """JSON of label names for the file: UTF-8 where it can be, escaped
    where a name holds a lone surrogate (json reads either back the same);
    a list is built in chunks (``_json_list``)."""
    text = _json_list(value) if isinstance(value, list) else json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(value)


def _reserved_json(trie: "Trie", key: str, path: Any) -> Any:
    """The JSON value of a reserved metadata entry, None when absent;
    CorruptFileError when it is not UTF-8 JSON."""
    raw = lib.treemask_trie_metadata_get(trie._ptr, key.encode("ascii"))
    if raw == ffi.NULL:
        return None
    data = ffi.string(raw)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise _bad_metadata(path, key, "not UTF-8 text (%s)" % e) from None
    except ValueError as e:  # json.JSONDecodeError, or a number too large to convert
        raise _bad_metadata(path, key, "not JSON (%s)" % e) from None
    except RecursionError:
        raise _bad_metadata(path, key, "JSON nested too deeply") from None


def _bad_metadata(path: Any, key: str, why: str) -> CorruptFileError:
    return CorruptFileError("%s: metadata %r, which Trie.save writes for the label names, is %s"
                            % (os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else path, key, why))


def _utf8_concat(strings: List[Any]) -> Tuple[bytes, np.ndarray]:
    """The strings' UTF-8 bytes in one buffer and each one's length, without a
    bytes object per string where they are all str (a million short strings
    would take ~40 MB of object headers)."""
    for i, item in enumerate(strings):
        if not isinstance(item, (str, bytes, bytearray)):
            raise InvalidArgumentError("strings[%d] is %s, not a str or bytes" % (i, type(item).__name__))
    try:
        if all(isinstance(item, str) for item in strings):
            data = "".join(strings).encode("utf-8")
            lengths = np.fromiter((len(item) if item.isascii() else len(item.encode("utf-8")) for item in strings),
                                  dtype=np.uintp, count=len(strings))
            return data, lengths
        encoded = [item.encode("utf-8") if isinstance(item, str) else bytes(item) for item in strings]
    except UnicodeEncodeError:
        bad = next(i for i, item in enumerate(strings) if isinstance(item, str) and not _encodable(item))
        raise InvalidArgumentError("strings[%d] is not valid Unicode text (a lone surrogate)" % bad) from None
    return b"".join(encoded), np.fromiter(map(len, encoded), dtype=np.uintp, count=len(encoded))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _state_array(states: Any, writable: bool) -> np.ndarray:
    if writable:
        if not isinstance(states, np.ndarray) or states.dtype != np.uint32 or not states.flags.c_contiguous \
                or not states.flags.writeable:
            raise InvalidArgumentError("states: want a writable C-contiguous numpy uint32 array (it is updated"
                                       " in place), got %s" % _buffers.describe(states))
        return states
    if isinstance(states, np.ndarray) and states.dtype == np.uint32:
        return np.ascontiguousarray(states)
    return _buffers.int_array(states, np.uint32, "states", 0, 2**32 - 1)


class SkippedLabel(str):
    """A label :meth:`Trie.from_labels` left out: the label string itself,
    with why in ``reason``."""

    reason: str

    def __new__(cls, label: str, reason: str) -> "SkippedLabel":
        self = super().__new__(cls, label)
        self.reason = reason
        return self


def _token_ids(result: Any, index: int) -> List[int]:
    """The token ids a tokenizer returned for labels[index], checked."""
    if isinstance(result, (str, bytes)):
        raise TypeError("tokenizer returned %s for labels[%d]; want a list of int token ids"
                        % (type(result).__name__, index))
    try:
        items = list(result)
    except TypeError:
        raise TypeError("tokenizer returned %s for labels[%d]; want a list of int token ids"
                        % (type(result).__name__, index)) from None
    for t in items:
        if not isinstance(t, (int, np.integer)) or isinstance(t, bool):
            raise TypeError("tokenizer returned %r (%s) among the ids of labels[%d]; want int token ids"
                            % (t, type(t).__name__, index))
    return [int(t) for t in items]


def _tokenizer_functions(tokenizer: Any, decode: Optional[Callable[[List[int]], str]]):
    """(encode: text -> ids, check: ids -> text or None) for the supported kinds."""
    encode_method = getattr(tokenizer, "encode", None)
    if callable(encode_method):
        def encode(text: str) -> List[int]:
            try:
                result = encode_method(text, add_special_tokens=False)
            except TypeError as e:
                if "add_special_tokens" not in str(e):
                    raise
                raise TypeError("tokenizer: %s.encode() does not take add_special_tokens; want a transformers"
                                " tokenizer, a tokenizers.Tokenizer or a callable text -> ids"
                                % type(tokenizer).__name__) from None
            return result.ids if hasattr(result, "ids") else result

        if decode is None:
            decode_method = getattr(tokenizer, "decode", None)
            if callable(decode_method):
                is_fast_tokenizers = type(tokenizer).__module__.split(".")[0] == "tokenizers"

                def decode(ids: List[int]) -> str:
                    if is_fast_tokenizers:
                        return decode_method(ids, skip_special_tokens=False)
                    return decode_method(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        return encode, decode
    if callable(tokenizer):
        return tokenizer, decode
    raise TypeError("tokenizer: want a transformers tokenizer, a tokenizers.Tokenizer or a callable"
                               " text -> ids, got %s" % type(tokenizer).__name__)
