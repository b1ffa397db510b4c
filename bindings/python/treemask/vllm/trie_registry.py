"""The tries of one process, keyed by what they are built from (the
process's one registry: :data:`registry`).

A request's :class:`~treemask.vllm.keys.RequestSpec` names a source; the
registry turns it into a :class:`treemask.Trie`, loading or compiling it at
most once per source and keeping it in an LRU bounded by bytes
(``TREEMASK_VLLM_REGISTRY_BYTES``). Concurrent requests for the same source
wait for one load (single flight). Running requests keep their trie alive
through their matchers, whatever the LRU evicts.

- A file is loaded once per version (its identity: device, inode, size,
  modification and change times) and per way of reading it (an RTP-LLM
  ``.tsv``'s start and end ids, the stop tokens a text format is built
  with), whatever stop tokens requests give: those apply per request (the
  matcher's ``override_stop_tokens``). Requests that read one version in
  different ways each have their entry; only a new version of the file
  evicts the old version's entries. What is loaded is never the
  operator's file but a private snapshot of it
  (:mod:`~treemask.vllm.snapshots`), so a file rewritten in place (``cp``,
  an editor, ``truncate``) cannot fault a trie that is being served: new
  requests get the new version, running ones keep theirs. A snapshot the
  front end published in the cache directory is what the engine's worker
  maps (the request carries its digest), so the worker never parses a file
  inside its step.
- A choice list is compiled once per (list, prefix, stop tokens, model) with
  the tokenizer's batch encode and decode, and saved to the
  :class:`~treemask.vllm.choice_cache.ChoiceCache` so that the engine's
  worker maps what the API server compiled. With ``treemask_tokenization:
  "any"`` it is a string set over the model's :class:`treemask.Vocab`
  (built once per model and shared by every such list: no tokenizer runs
  per choice), cached per (list, prefix, stop tokens, vocabulary
  fingerprint), on disk too.
- A registered trie (``treemask_trie_id``, the exact beam search) is the
  ``.tmtrie`` a process of this user wrote into its private directory
  (:mod:`~treemask.vllm.registered`), loaded once per (id, file identity);
  the process that registered it uses its own object.

Errors are :class:`~treemask.vllm.keys.RequestError`: what kind of problem
and where (byte offset, line), never a byte of the file; the library's full
message goes to the server log.

Extending: a new kind of source is a frozen dataclass in ``keys``, a method
here that gets its trie through the shared LRU (``lru.get(key, build)``:
the byte bound and the single flight come with it) and one entry of
``_BUILDERS``.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import collections
import logging
import os
import re
import sys
import threading
import time
import weakref
from concurrent.futures import Future
from typing import Any, Callable, Dict, Hashable, List, Optional, Set, Tuple

import numpy as np

from ..errors import (CorruptFileError, Error, FileError, InvalidArgumentError, OutOfMemoryError, OutOfRangeError,
                      ParseError, VersionMismatchError)
from ..matcher import Matcher
from ..trie import SkippedLabel, Trie, _PathsCSR
from ..vocab import Vocab
from . import registered
from .choice_cache import ChoiceCache, digest_of
from .files import OpenedFile, TrieFiles
from .keys import (KEY_CHOICES, KEY_STOP_TOKENS, KEY_TRIE, KEY_TRIE_ID, ChoiceSource, FileSource, RegisteredSource,
                   RequestError, RequestSpec)
from .model import ModelInfo
from .settings import Settings
from .snapshots import FileChanged, reading_of, take

__all__ = ["TrieRegistry", "ByteLRU", "registry"]

logger = logging.getLogger("treemask.vllm")


class ByteLRU:
    """A least-recently-used map bounded by the bytes of its values, with
    single-flight builds: concurrent ``get`` calls for a missing key run one
    ``build`` and share its value (or its exception). A value larger than
    the bound is returned but not kept. Thread-safe."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: "collections.OrderedDict[Hashable, Tuple[Any, int]]" = collections.OrderedDict()
        self._building: Dict[Hashable, Future] = {}
        self.bytes = 0

    def get(self, key: Hashable, build: Callable[[], Tuple[Any, int]]) -> Any:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit[0]
            future = self._building.get(key)
            owner = future is None
            if owner:
                future = self._building[key] = Future()
        assert future is not None
        if not owner:
            return future.result()
        try:
            value, nbytes = build()
        except BaseException as e:
            with self._lock:
                del self._building[key]
            future.set_exception(e)
            raise
        with self._lock:
            del self._building[key]
            if nbytes <= self.max_bytes:
                self._entries[key] = (value, nbytes)
                self.bytes += nbytes
                while self.bytes > self.max_bytes:
                    _, (_, dropped) = self._entries.popitem(last=False)
                    self.bytes -= dropped
        future.set_result(value)
        return value

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries or key in self._building

    def discard(self, key: Hashable) -> None:
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is not None:
                self.bytes -= entry[1]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


class TrieRegistry:
    """The tries of one process (see the module doc). ``settings`` default
    to the environment's, read at first use. Thread-safe."""

    def __init__(self, settings: Optional[Settings] = None) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._lru: Optional[ByteLRU] = None
        self._files: Optional[TrieFiles] = None
        self._cache: Optional[ChoiceCache] = None
        # real path -> (identity of its loaded version, that version's keys)
        self._versions: Dict[str, Tuple[Tuple[int, ...], Set[Hashable]]] = {}
        self._shortest: "weakref.WeakKeyDictionary[Trie, int]" = weakref.WeakKeyDictionary()
        self._snapshots: "weakref.WeakKeyDictionary[Trie, str]" = weakref.WeakKeyDictionary()
        self.n_file_loads = 0
        self.n_choice_compiles = 0

    # ---- configuration ------------------------------------------------

    @property
    def settings(self) -> Settings:
        with self._lock:
            if self._settings is None:
                self._settings = Settings.from_env()
            return self._settings

    def _parts(self) -> Tuple[ByteLRU, TrieFiles, Optional[ChoiceCache]]:
        settings = self.settings
        with self._lock:
            if self._lru is None:
                self._lru = ByteLRU(settings.registry_bytes)
                self._files = TrieFiles(settings.trie_dirs, settings.max_file_bytes)
                cache_dir = settings.default_cache_dir() if settings.cache_dir is None else settings.cache_dir
                self._cache = ChoiceCache(cache_dir, settings.cache_bytes) if cache_dir else None
            assert self._files is not None
            return self._lru, self._files, self._cache

    @property
    def cache(self) -> Optional[ChoiceCache]:
        return self._parts()[2]

    @property
    def bytes(self) -> int:
        """Bytes of the tries the registry holds."""
        return self._parts()[0].bytes

    def configure(self, settings: Optional[Settings]) -> None:
        """Replaces the settings (None: the environment's, read at next use)
        and forgets every trie."""
        with self._lock:
            if self._cache is not None:
                self._cache.close()
            self._settings = settings
            self._lru = self._files = self._cache = None
            self._versions.clear()
            self.n_file_loads = 0
            self.n_choice_compiles = 0

    def clear(self) -> None:
        """Forgets every trie and zeroes the counters (running requests keep
        theirs)."""
        lru, _, _ = self._parts()
        lru.clear()
        with self._lock:
            self._versions.clear()
            self.n_file_loads = 0
            self.n_choice_compiles = 0

    # ---- requests -----------------------------------------------------

    def trie_for(self, spec: RequestSpec, model: ModelInfo) -> Trie:
        """The trie of a request, loading or compiling it if needed. Raises
        RequestError."""
        trie = getattr(self, _BUILDERS[type(spec.source)])(spec, model)
        model.check_trie(trie, _name(spec))
        return trie

    def check_source(self, spec: RequestSpec) -> None:
        """RequestError unless the request's file is allowed or its
        registered trie exists (what can be checked without the model)."""
        source = spec.source
        if isinstance(source, FileSource):
            self._parts()[1].open(source).close()
        elif isinstance(source, RegisteredSource) and registered.local_trie(source.trie_id) is None:
            os.close(registered.open_registered(source.trie_id)[0])

    def shortest_path(self, trie: Trie) -> int:
        """Tokens in the trie's shortest complete sequence (its stop token
        not counted). A matcher whose budget nothing fits offers the
        shortest branches, so following it reaches the nearest end."""
        with self._lock:
            cached = self._shortest.get(trie)
        if cached is not None:
            return cached
        if trie.is_string_set:
            n = _fewest_tokens_to_an_end(trie)
            with self._lock:
                self._shortest[trie] = n
            return n
        m = Matcher(trie, max_new_tokens=0)
        stops = set(trie.stop_tokens)
        n = 0
        while not m.can_terminate():
            step = [t for t in m.next_tokens() if t not in stops]
            if not step or not m.accept_token(step[0]):
                break
            n += 1
        with self._lock:
            self._shortest[trie] = n
        return n

    # ---- files ----------------------------------------------------------

    def snapshot_of(self, trie: Trie) -> Optional[str]:
        """The digest of the published snapshot a file's trie was loaded
        from (what the front end hands the worker), None for any other."""
        with self._lock:
            return self._snapshots.get(trie)

    def _file_trie(self, spec: RequestSpec, model: ModelInfo) -> Trie:
        lru, files, cache = self._parts()
        source = spec.source
        assert isinstance(source, FileSource)
        # jsonl and tsv carry no stop tokens: built with the model's EOS ids
        # (requests override them per matcher).
        build_stops: Tuple[int, ...] = ()
        if source.format in ("jsonl", "rtp_tsv"):
            build_stops = model.eos_token_ids or spec.stop_tokens or ()
            if not build_stops:
                raise RequestError("the model names no EOS token: give %s" % KEY_STOP_TOKENS)
            model.check_stop_tokens(build_stops)
        reading = reading_of(source.format, model.vocab_size, source.start_token_id, source.end_token_id,
                             build_stops)
        if spec.snapshot is not None and cache is not None:
            # The engine's worker: the snapshot the front end checked this
            # request against, mapped, never the file parsed in the step.
            digest = spec.snapshot
            try:
                return lru.get(("snapshot", digest), lambda: self._mapped_snapshot(digest, cache))
            except _NoSnapshot:
                logger.warning("treemask: the snapshot of %s %r left the cache before the worker mapped it; loading"
                               " the file here", KEY_TRIE, source.name[:200])
        for attempt in range(FILE_READ_ATTEMPTS):
            with files.open(source) as opened:
                key = ("file", opened.identity, reading)
                try:
                    trie = lru.get(key, lambda: self._load_file(opened, source, model, build_stops, reading))
                except FileChanged:
                    logger.warning("treemask: %s %r (%s) changed while it was being read (try %d of %d)", KEY_TRIE,
                                   source.name[:200], opened.real_path, attempt + 1, FILE_READ_ATTEMPTS)
                    time.sleep(0.01 * (attempt + 1))
                    continue
                self._note_version(lru, opened.real_path, opened.identity, key)
                return trie
        raise RequestError("%s %r changed while it was being read, %d times: try again (an operator replaces a"
                           " served file by writing a new file and renaming it over the old one)"
                           % (KEY_TRIE, _clip(source.name), FILE_READ_ATTEMPTS))

    def _note_version(self, lru: ByteLRU, real_path: str, identity: Tuple[int, ...], key: Hashable) -> None:
        """Records that key reads this version of the file: a new version
        evicts every entry of the old one; another key of the same version
        evicts nothing."""
        with self._lock:
            version = self._versions.get(real_path)
            if version is not None and version[0] == identity:
                keys = version[1]
                keys.add(key)
                if len(keys) > _KEYS_PER_VERSION:  # forget keys the LRU no longer holds
                    version[1].intersection_update({k for k in keys if k in lru})
                return
            self._versions[real_path] = (identity, {key})
        for old in version[1] if version is not None else ():
            lru.discard(old)  # an older version of the file

    def _load_file(self, opened: OpenedFile, source: FileSource, model: ModelInfo, stops: Tuple[int, ...],
                   reading: Tuple[Any, ...]) -> Tuple[Trie, int]:
        def parse(path: str) -> Trie:
            arg = _PathArg(path)
            if opened.format == "tmtrie":
                return Trie.load(arg)
            if opened.format == "rtp_json":
                return Trie.from_rtp_json(arg, model.vocab_size)
            if opened.format == "jsonl":
                return Trie.from_jsonl(arg, model.vocab_size, stops)
            assert source.start_token_id is not None  # parse_extra_args requires it for .tsv
            end = source.end_token_id if source.end_token_id is not None else stops[0]
            return Trie.from_rtp_tsv(arg, model.vocab_size, source.start_token_id, end, stop_tokens=stops)

        start = time.monotonic()
        try:
            trie, digest, parsed = take(opened, reading, parse, self._parts()[2])
        except FileChanged:
            raise
        except Exception as e:  # a treemask error, or anything a malformed file raises
            logger.warning("treemask: %s %r (%s) does not load: %s: %s", KEY_TRIE, source.name[:200],
                           opened.real_path, type(e).__name__, str(e)[:2000])
            raise RequestError(_load_problem(source, e)) from None
        logger.info("treemask: read %s %r (%s, %d bytes): %s in %.2f s (process %d)", KEY_TRIE, source.name[:200],
                    opened.real_path, opened.size, ("copied and checked" if opened.format == "tmtrie" else "parsed")
                    if parsed else "its snapshot of the same bytes mapped", time.monotonic() - start, os.getpid())
        with self._lock:
            self.n_file_loads += 1
            if digest is not None:
                self._snapshots[trie] = digest
        return trie, trie.stats().bytes

    def _mapped_snapshot(self, digest: str, cache: ChoiceCache) -> Tuple[Trie, int]:
        start = time.monotonic()
        trie = cache.load_snapshot(digest)
        if trie is None:
            raise _NoSnapshot()
        logger.info("treemask: mapped the snapshot %s in %.2f s (process %d)", digest[:16], time.monotonic() - start,
                    os.getpid())
        with self._lock:
            self._snapshots[trie] = digest
        return trie, trie.stats().bytes

    # ---- choice lists ---------------------------------------------------------

    def _choice_trie(self, spec: RequestSpec, model: ModelInfo) -> Trie:
        """A choice list's trie, compiled once per (list, prefix, stops,
        semantics) and kept in the LRU and the disk cache. "canonical":
        each choice's tokenization by the model's tokenizer
        (Trie.from_labels); "any": a string set over the model's
        vocabulary (Trie.from_strings, the vocabulary shared), cached per
        vocabulary."""
        lru, _, cache = self._parts()
        source = spec.source
        assert isinstance(source, ChoiceSource)
        stops = spec.stop_tokens or model.eos_token_ids
        if not stops:
            raise RequestError("the model names no EOS token: give %s" % KEY_STOP_TOKENS)
        model.check_stop_tokens(stops)  # before compiling: the list is built with them
        vocab: Optional[Vocab] = None
        if source.tokenization == "any":
            vocab = model.vocab
            key: Tuple[Any, ...] = ("strings", source, stops, vocab.fingerprint)
            identity = "any:%016x" % vocab.fingerprint
        else:
            key = ("choices", source, stops, model.vocab_size, model.tokenizer_id)
            identity = model.tokenizer_id

        def compile_choices() -> Trie:
            if vocab is None:
                return _compile_choices(source, model, stops)
            try:
                trie = Trie.from_strings(source.choices, vocab, stops, prefix=source.prefix)
            except Error as e:  # the request's own strings: its message may quote them
                raise RequestError("%s: %s" % (KEY_CHOICES, e)) from None
            trie._labels = source.choices  # the request's tuple, not a second one
            return trie

        def build() -> Tuple[Trie, int]:
            digest = digest_of(source.choices, source.prefix, stops, model.vocab_size, identity)
            trie = cache.load(digest, source.choices, stops, model.vocab_size, vocab=vocab) if cache else None
            if trie is None:
                trie = compile_choices()
                with self._lock:
                    self.n_choice_compiles += 1
                if cache:
                    cache.save(digest, trie, trie.stats().bytes)
            # The label strings live in Python too (the request's own objects).
            return trie, trie.stats().bytes + sum(map(sys.getsizeof, source.choices)) + 8 * len(source.choices)

        return lru.get(key, build)

    # ---- registered tries (the exact beam search) -----------------------------

    def _registered_trie(self, spec: RequestSpec, model: ModelInfo) -> Trie:
        source = spec.source
        assert isinstance(source, RegisteredSource)
        mine = registered.local_trie(source.trie_id)
        if mine is not None:
            return mine
        lru, _, _ = self._parts()
        fd, st = registered.open_registered(source.trie_id)
        try:
            if st.st_size > self.settings.max_file_bytes:
                logger.warning("treemask: registered trie %s has %d bytes, more than the limit of %d",
                               source.trie_id, st.st_size, self.settings.max_file_bytes)
                raise RequestError("%s: the registered trie is larger than this server's limit of %d bytes"
                                   % (KEY_TRIE_ID, self.settings.max_file_bytes))
            key = ("registered", source.trie_id, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))

            def build() -> Tuple[Trie, int]:
                proc = "/proc/self/fd/%d" % fd
                try:
                    trie = Trie.load(_PathArg(proc if os.path.exists(proc) else
                                              os.path.join(registered.directory(), source.trie_id + ".tmtrie")))
                except Exception as e:  # as a file's: never a raw exception
                    logger.warning("treemask: registered trie %s does not load: %s: %s", source.trie_id,
                                   type(e).__name__, str(e)[:2000])
                    raise RequestError(registered.UNKNOWN) from None
                return trie, trie.stats().bytes

            return lru.get(key, build)
        finally:
            os.close(fd)


#: The registry of this process (the API server and each engine worker have
#: one); every part of the plugin uses this one.
registry = TrieRegistry()

#: Reads of a file that keeps changing while it is copied before the
#: request is refused (each waits 10 ms more than the last).
FILE_READ_ATTEMPTS = 4
#: The keys one version of a file may hold before those the LRU dropped
#: are forgotten (each request may add one: a client's distinct end ids).
_KEYS_PER_VERSION = 64


class _NoSnapshot(Exception):
    """The snapshot a request names is not in the cache (evicted)."""


#: source type -> the TrieRegistry method that gets its trie.
_BUILDERS: Dict[type, str] = {FileSource: "_file_trie", ChoiceSource: "_choice_trie",
                              RegisteredSource: "_registered_trie"}


#: Choices tokenized at once. It bounds what the tokenizer allocates (a fast
#: tokenizer's Encoding holds ids, offsets and token strings: ~1 KB a
#: choice, so a million at once took gigabytes); what is kept per choice is
#: its token ids, 4 bytes each.
COMPILE_CHUNK = 4096
#: Skipped choices kept with their reasons (for the log and the cache file);
#: the rest are only counted.
SKIPPED_KEPT = 1000


def _compile_choices(source: ChoiceSource, model: ModelInfo, stops: Tuple[int, ...]) -> Trie:
    """``Trie.from_labels`` over the model's tokenizer, the same trie, built
    chunk by chunk with the tokenizer's batch encode and decode where it has
    them (a fast tokenizer runs them in parallel, in Rust; 100,000 one-by-one
    calls take seconds), and only the kept choices' token ids held between
    chunks (one flat int32 array). One thread at a time per tokenizer.
    A choice is left out, as from_labels does, when it tokenizes to nothing,
    its tokens hold a stop token, or they do not decode back to it."""
    choices, prefix = source.choices, source.prefix
    with model.tokenizer_lock:
        tokenizer = model.tokenizer
        batch = _batch_calls(tokenizer)
        try:
            if batch is None:  # no batch calls: one by one
                trie = Trie.from_labels(list(choices), tokenizer, model.vocab_size, stops, prefix=prefix)
                n_skipped = len(trie.skipped_labels)
            else:
                trie, n_skipped = _compile_in_chunks(choices, prefix, batch, model.vocab_size, stops)
        except Error as e:  # the request's own strings: its message may quote them
            raise RequestError("%s: %s" % (KEY_CHOICES, e)) from None
    if n_skipped:
        logger.warning("treemask: %d of %d choices do not round-trip through the tokenizer and are left out"
                       " (first: %r)", n_skipped, len(choices), trie.skipped_labels[0][:80])
    return trie


def _batch_calls(tokenizer: Any) -> Optional[Tuple[Callable[[List[str]], List[List[int]]],
                                                    Callable[[List[List[int]]], List[str]]]]:
    """(encode a list of texts, decode a list of id lists) with the
    tokenizer's batch calls, checked on one text; None when it has none."""
    backend = getattr(tokenizer, "backend_tokenizer", None)  # a transformers fast tokenizer's Rust one

    def encode(texts: List[str]) -> List[List[int]]:
        if backend is not None:
            return [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]
        return tokenizer(texts, add_special_tokens=False)["input_ids"]

    def decode(ids: List[List[int]]) -> List[str]:
        return tokenizer.batch_decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    try:
        ids = encode(["a b", "c"])
        if len(ids) != 2 or len(decode(ids)) != 2:
            return None
    except Exception:
        return None
    return encode, decode


def _compile_in_chunks(choices: Tuple[str, ...], prefix: str, batch: Any, vocab_size: int,
                       stops: Tuple[int, ...]) -> Tuple[Trie, int]:
    encode, decode = batch
    stop_set = set(stops)
    flat: List[np.ndarray] = []  # the kept choices' token ids, chunk by chunk
    lengths: List[np.ndarray] = []
    kept: List[np.ndarray] = []  # their indices (label ids)
    skipped: List[str] = []  # SkippedLabel (a str with its reason)
    n_skipped = 0
    for begin in range(0, len(choices), COMPILE_CHUNK):
        chunk = choices[begin:begin + COMPILE_CHUNK]
        texts = [prefix + c for c in chunk]
        ids = encode(texts)
        decoded = decode(ids)
        if len(ids) != len(texts) or len(decoded) != len(texts):
            raise InvalidArgumentError("the tokenizer's batch calls returned %d and %d results for %d texts"
                                       % (len(ids), len(decoded), len(texts)))
        keep = []
        for j, (label, text, tokens, back) in enumerate(zip(chunk, texts, ids, decoded)):
            if not tokens:
                problem = "it tokenizes to no tokens (an empty path would let a sequence end at once)"
            elif not stop_set.isdisjoint(tokens):
                problem = "the stop token %d is inside its path %s" % (min(stop_set.intersection(tokens)), tokens)
            elif back != text and back != label:
                problem = "it does not round-trip: tokens %s decode to %r, not %r" % (tokens, back, text)
            else:
                keep.append(j)
                continue
            n_skipped += 1
            if len(skipped) < SKIPPED_KEPT:
                skipped.append(SkippedLabel(label, problem))
        if keep:
            kept.append(np.array(keep, dtype=np.int64) + begin)
            lengths.append(np.fromiter((len(ids[j]) for j in keep), dtype=np.uint32, count=len(keep)))
            chunk_tokens = np.fromiter((t for j in keep for t in ids[j]), dtype=np.int64)
            if chunk_tokens.size and (chunk_tokens.min() < 0 or chunk_tokens.max() >= vocab_size):
                bad = int(chunk_tokens[(chunk_tokens < 0) | (chunk_tokens >= vocab_size)][0])
                raise OutOfRangeError("the tokenizer gave the token id %d, outside the model's vocab_size %d"
                                      % (bad, vocab_size))
            flat.append(chunk_tokens.astype(np.int32))
        del ids, decoded, texts
    if not kept:
        raise InvalidArgumentError("none of the %d labels round-trips through the tokenizer" % len(choices))
    offsets = np.zeros(sum(a.size for a in lengths) + 1, dtype=np.uintp)
    np.cumsum(np.concatenate(lengths), out=offsets[1:])
    del lengths
    paths: Any = _PathsCSR(np.concatenate(flat), offsets)  # from_paths' private form
    del flat
    # Path i carries label i unless a choice was left out (from_paths makes
    # a list of a label array: 40 bytes a choice, only then).
    trie = Trie.from_paths(paths, vocab_size, stops, np.concatenate(kept) if n_skipped else None)
    trie._labels = choices
    trie._skipped_labels = skipped
    return trie, n_skipped


# The states _fewest_tokens_to_an_end expands before it settles for a lower
# bound, and the rows it fills at once (a row is vocab_size / 8 bytes). At
# 200,000 states a list of 20,000 catalogue names took 26 s of a prepare
# thread for a bound of 10 tokens; at 32,768, 1.5 s for a bound of 8.
_FEWEST_MAX_STATES = 32_768
_FEWEST_CHUNK = 256


def _fewest_tokens_to_an_end(trie: Trie) -> int:
    """Tokens in the shortest way to end a string of a string set (its stop
    token not counted): a breadth-first search over the byte-trie states in
    token steps (state arrays: one fill and one advance per layer and chunk),
    which stops at the first layer where a string ends. A search that would
    expand more than _FEWEST_MAX_STATES states returns the layer it reached,
    a lower bound (so a length check never refuses a request that fits).
    Any tokenization may be longer: a max_tokens that fits the fewest tokens
    can still cut a string the model spells in more."""
    stops = np.array(trie.stop_tokens, dtype=np.int64)
    frontier = np.zeros(1, dtype=np.uint32)
    words = trie.bitmask_words
    expanded = 0
    for layer in range(trie.stats().max_depth + 1):
        next_states = []
        for begin in range(0, frontier.size, _FEWEST_CHUNK):
            chunk = frontier[begin:begin + _FEWEST_CHUNK]
            rows = np.zeros((chunk.size, words), dtype=np.int32)
            trie.fill_states(chunk, rows)
            if ((rows[:, stops >> 5].view(np.uint32) >> (stops & 31).astype(np.uint32)) & 1).any():
                return layer
            # The allowed tokens, from the nonzero words only (a row is
            # mostly zeros).
            which, word = np.nonzero(rows)
            values = rows[which, word].view(np.uint32)
            hit = (values[:, None] >> np.arange(32, dtype=np.uint32)) & 1
            row_of, bit = np.nonzero(hit)
            states = chunk[which[row_of]]
            tokens = word[row_of].astype(np.int64) * 32 + bit
            trie.advance_states(states, tokens.astype(np.int32))
            next_states.append(states)
        expanded += frontier.size
        frontier = np.unique(np.concatenate(next_states)) if next_states else frontier[:0]
        frontier = frontier[frontier < 0xFFFFFFFE]
        if frontier.size == 0 or expanded + frontier.size > _FEWEST_MAX_STATES:
            return layer + 1
    return trie.stats().max_depth


class _PathArg:
    """A path the Trie loaders must read as a file, never as inline text."""

    def __init__(self, path: str) -> None:
        self._path = path

    def __fspath__(self) -> str:
        return self._path


# What a load error tells the client: its kind and where, never the bytes.
_KINDS = (
    (ParseError, "it is not well-formed"),
    (OutOfRangeError, "it holds a token id outside the model's vocabulary or outside int32"),
    (VersionMismatchError, "it is a .tmtrie of another format version"),
    (CorruptFileError, "it fails the .tmtrie integrity checks"),
    (OutOfMemoryError, "it is too large to load"),
    (FileError, "it could not be read"),
)
_WHERE = re.compile(r"\b(line \d+|byte \d+)")


def _load_problem(source: FileSource, e: Exception) -> str:
    kind = next((text for cls, text in _KINDS if isinstance(e, cls)), "its content is not a valid trie")
    where = sorted(set(_WHERE.findall(str(e))), key=lambda w: (w.split()[0], int(w.split()[1])))
    return "%s %r does not load: %s%s (the server log has the details)" % (
        KEY_TRIE, _clip(source.name), kind, " (at %s)" % ", ".join(where) if where else "")


def _name(spec: RequestSpec) -> str:
    if isinstance(spec.source, FileSource):
        return "%s %r" % (KEY_TRIE, _clip(spec.source.name))
    return KEY_CHOICES if isinstance(spec.source, ChoiceSource) else KEY_TRIE_ID


def _clip(text: str, n: int = 120) -> str:
    return text if len(text) <= n else text[:n] + "..."
