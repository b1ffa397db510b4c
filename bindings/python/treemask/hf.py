"""transformers adapter: constrain ``model.generate`` to the sequences of a trie.

    from treemask import Trie
    from treemask.hf import TrieLogitsProcessor

    trie = Trie.from_labels(labels, tokenizer, model.config.vocab_size, [tokenizer.eos_token_id])
    out = model.generate(**inputs, logits_processor=[TrieLogitsProcessor(trie)],
                         num_beams=4, num_return_sequences=4)

Works with greedy search, sampling, beam search and num_return_sequences.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import os
import sys
import threading
import weakref
from collections import OrderedDict
from typing import Any, Dict, NamedTuple, Optional, Union

import numpy as np

from . import _buffers
from .bitmask import apply_token_bitmask, cuda_available
from .errors import InvalidArgumentError, UnsupportedError
from .failure_policy import ADAPTER_DEFAULT, failure_policy_code
from .trie import STATE_ROOT, STATE_TERMINATED, Trie
from .vocab import model_vocab

try:  # Subclassing lets transformers' LogitsProcessorList treat it as its own.
    from transformers import LogitsProcessor as _LogitsProcessorBase
except ImportError:  # pragma: no cover - transformers is what this module is for
    _LogitsProcessorBase = object  # type: ignore[misc,assignment]

__all__ = ["TrieLogitsProcessor", "beam_search", "BeamSearchOutput", "clear_compiled"]

# Stands in for ids no int32 can hold (and negative ones): an id past any
# vocab_size, so the trie rejects it. (A negative state-array token would mean
# "no token" and leave the row's state as it was.)
_NOT_A_TOKEN = 2**31 - 1


class TrieLogitsProcessor(_LogitsProcessorBase):
    """A transformers ``LogitsProcessor`` that lets every row generate only
    sequences of ``trie``, each ending with one of its stop tokens.

    transformers passes no beam indices to logits processors, so the state
    of each row follows from the row's own generated tokens (``input_ids[:,
    prompt_length:]``). States are cached by prefix: a row whose prefix
    minus its last token was seen at the previous step costs one dictionary
    lookup and one transition, so a step is O(rows) whatever the beam
    reordering did. Tokens after a stop token (padding of finished rows) are
    ignored. Each step fills every row's bitmask in one C call and masks the
    scores in one more.

    Args:
        trie: the allowed sequences. Its stop tokens should be the model's
            EOS ids (``generation_config.eos_token_id``).
        prompt_length: where generation starts in ``input_ids``; None means
            the first call's ``input_ids.shape[1]``. When inferred, a call
            whose ``input_ids`` are not longer than the previous call's starts
            a new generation (so one processor can serve successive
            ``generate`` calls one at a time).
        pad_token_id: also allowed in finished rows, for engines that pad
            them with it.
        failure_policy: what a token the trie does not allow does to its row
            (it can only come from another processor or a forced token):
            ``"fail_closed"`` (default: only stop tokens from then on),
            ``"reject"`` (the token is ignored), ``"sticky_error"``; see
            :mod:`treemask.failure_policy` for why adapters default to
            fail_closed.
        n_threads: threads that mask CPU scores (see
            :func:`treemask.apply_token_bitmask_inplace`). Default 1: inside
            ``generate`` torch's own intra-op workers keep spinning on the
            other cores after each operation, so on a 2-core machine a second
            masking thread made the step slower (1.8 vs 1.4 ms,
            ``tests/bench/bench_python.py``); more may pay on larger machines.

    The processor returns a new tensor and never modifies ``scores``
    (transformers requires this: with ``output_logits=True`` it returns the
    raw logits it passed in). On the CPU the copy and the mask are one fused
    pass (:func:`treemask.apply_token_bitmask`).

    Scores on a CUDA device stay there, and so does everything else: the
    trie is uploaded once per device (:class:`treemask.torch.DeviceTrie`,
    the one synchronisation), and each step is one kernel launch
    (``treemask_cuda_trie_follow_rows_mask_logits``) that derives every
    row's state from the previous step's rows (a row equal to a previous
    row but for its last id takes one trie step from that row's state,
    found by a hash of the ids and then compared id by id, so beam search's
    reordering changes nothing; any other row walks from the root), keeps a
    copy of the ids for the next step, and writes the scores masked into
    the output (masked scores are never read). No host synchronisation, no
    trie walk on the host; the states are exactly the host path's. Where
    this libtreemask has no usable CUDA, the host path fills a pinned
    bitmask, copies it up and masks with torch.

    A string-set trie (:meth:`Trie.from_strings`) always takes the host path:
    its masks come from a walk of the vocabulary trie, which only the
    host runs; the device applies them (a pinned bitmask copied up, then the
    CUDA apply kernel).

    ``vocab``: the model's vocabulary, to check the trie against at
    construction (:meth:`Trie.check_vocab`): the model's tokenizer (read
    with :meth:`Vocab.from_tokenizer` at ``max(its length,
    trie.vocab_size)``) or a :class:`Vocab`. A string set compiled for
    another tokenizer (other bytes, or a smaller vocabulary) is then refused
    with InvalidArgumentError naming both fingerprints, instead of letting
    the model write text outside the set. The processor never sees the
    model, so without ``vocab`` nothing is checked: pass it whenever the
    trie comes from a file or another process.
    """

    def __init__(self, trie: Trie, prompt_length: Optional[int] = None, *, pad_token_id: Optional[int] = None,
                 failure_policy: Union[str, int] = ADAPTER_DEFAULT, n_threads: int = 1, vocab: Any = None) -> None:
        if not isinstance(trie, Trie):
            raise InvalidArgumentError("trie must be a treemask.Trie, got %s" % type(trie).__name__)
        if vocab is not None:
            trie.check_vocab(model_vocab(vocab, trie.vocab_size))
        if prompt_length is not None and prompt_length < 0:
            raise InvalidArgumentError("prompt_length %d must be >= 0" % prompt_length)
        if pad_token_id is not None and not 0 <= pad_token_id < trie.vocab_size:
            raise InvalidArgumentError("pad_token_id %d is outside [0, %d)" % (pad_token_id, trie.vocab_size))
        self.trie = trie
        self.pad_token_id = pad_token_id
        self.n_threads = _buffers.thread_count(n_threads)
        self._fixed_prompt_length = prompt_length
        self._policy = failure_policy_code(failure_policy)
        self._words = trie.bitmask_words
        self._host_mask: Any = None  # the host bitmask (CPU scores)
        self._masker: Any = None  # the staging of host-walk rows to a device (_device_mask.DeviceMasker)
        self._out: Any = None  # the last returned scores, reused once nothing else holds them
        if pad_token_id is not None:
            self._pad_bit = np.array([1 << (pad_token_id & 31)], dtype=np.uint32).view(np.int32)[0]
        self._one_state = np.zeros(1, dtype=np.uint32)
        self._one_token = np.zeros(1, dtype=np.int32)
        self._device_tries: Dict[Any, Any] = {}  # torch.device -> DeviceTrie
        self._device_rows: Any = None  # treemask.torch.DeviceRowStates on the scores' device
        self._cuda_usable: Optional[bool] = None
        # One generate() at a time: a second thread's call raises
        # InvalidStateError instead of mixing two generations' row states.
        self._busy = threading.RLock()
        self.reset()

    def reset(self) -> None:
        """Forgets every row: the next call starts a new generation."""
        self.prompt_length = self._fixed_prompt_length
        self._last_length = -1
        self._previous: Dict[bytes, int] = {b"": STATE_ROOT}
        if self._device_rows is not None:
            self._device_rows.reset()

    # ---- states ----------------------------------------------------------

    def _advance(self, states: np.ndarray, tokens: np.ndarray) -> None:
        self.trie.advance_states(states, tokens, self._policy)

    def _state_from_root(self, generated: np.ndarray) -> int:
        """The state after a whole prefix, when no cached parent exists (the
        processor was skipped for a step, or a row appeared from nowhere)."""
        state = self._one_state
        state[0] = STATE_ROOT
        for token in generated.tolist():
            self._one_token[0] = token if 0 <= token < _NOT_A_TOKEN else _NOT_A_TOKEN
            self._advance(state, self._one_token)
        return int(state[0])

    def _row_states(self, generated: np.ndarray) -> np.ndarray:
        n_rows, length = generated.shape
        if length == 0:
            self._previous = {b"": STATE_ROOT}
            return np.zeros(n_rows, dtype=np.uint32)
        # Each row's tokens as one bytes object: the dictionary key of its
        # prefix; key[:-8] is the key of the prefix one token shorter.
        keys = generated.view(np.dtype((np.void, 8 * length))).ravel().tolist()
        unique = list(dict.fromkeys(keys))
        previous = self._previous
        parents = [previous.get(key[:-8]) for key in unique]
        if None in parents:
            parents = [self._state_from_root(np.frombuffer(key[:-8], dtype=np.int64)) if p is None else p
                       for key, p in zip(unique, parents)]
        states = np.array(parents, dtype=np.uint32)
        last = np.frombuffer(b"".join([key[-8:] for key in unique]), dtype=np.int64)
        tokens = np.where((last >= 0) & (last < _NOT_A_TOKEN), last, _NOT_A_TOKEN).astype(np.int32)
        self._advance(states, tokens)
        current = dict(zip(unique, states.tolist()))
        self._previous = current
        if len(unique) == n_rows:
            return states
        return np.array([current[key] for key in keys], dtype=np.uint32)

    # ---- masks -----------------------------------------------------------

    def _staged(self, scores: Any) -> bool:
        """Whether the host-filled rows are copied to the scores' device and
        masked there (scores not on the CPU, and not on the device path)."""
        return scores.device.type != "cpu"

    def _host_bitmask(self, n_rows: int, staged: bool, device: Any) -> np.ndarray:
        """Where this call's rows are filled: a host array, or for staged
        scores the host side of a DeviceMasker (pinned), once its last copy
        to the device is done."""
        if not staged:
            if self._host_mask is None or self._host_mask.shape[0] != n_rows:
                self._host_mask = np.empty((n_rows, self._words), dtype=np.int32)
            return self._host_mask
        if self._masker is None or self._masker.n_rows < n_rows or self._masker.device != device:
            from ._device_mask import DeviceMasker

            self._masker = DeviceMasker(n_rows, self._words, device, pin_memory=device.type != "cpu")
        self._masker.wait_host()
        return self._masker.host[:n_rows]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        n_rows, length = input_ids.shape
        if self._fixed_prompt_length is None:
            if self.prompt_length is None or length <= self._last_length:
                self.reset()
                self.prompt_length = length
        elif length <= self._last_length:
            self.reset()
        assert self.prompt_length is not None  # set above on the first call
        if length < self.prompt_length:
            raise InvalidArgumentError("input_ids has %d columns, fewer than prompt_length %d"
                                       % (length, self.prompt_length))
        self._last_length = length
        if self._device_path(scores):
            return self._call_on_device(input_ids, scores)
        generated = input_ids[:, self.prompt_length:]
        if generated.device.type != "cpu":
            generated = generated.cpu()  # a few bytes per row; the trie walk is on the host
        generated = np.ascontiguousarray(generated.numpy(), dtype=np.int64)
        states = self._row_states(generated)

        staged = self._staged(scores)
        bitmask = self._host_bitmask(n_rows, staged, scores.device)
        self.trie.fill_states(states, bitmask)
        if self.pad_token_id is not None:
            finished = states == STATE_TERMINATED
            if finished.any():
                bitmask[finished, self.pad_token_id >> 5] |= self._pad_bit

        out = self._output_buffer(scores)
        if not staged:
            return apply_token_bitmask(scores, bitmask, out=out, n_threads=self.n_threads)
        out.copy_(scores)
        self._masker.apply(out, n_rows)
        return out

    # ---- the device path ----------------------------------------------------

    def _device_path(self, scores: Any) -> bool:
        """Whether scores are masked by the device path: a CUDA tensor and a
        libtreemask with usable CUDA (asked once)."""
        if scores.device.type != "cuda" or self.trie.is_string_set:
            return False
        if self._cuda_usable is None:
            self._cuda_usable = cuda_available()
        return self._cuda_usable

    def _call_on_device(self, input_ids: Any, scores: Any) -> Any:
        device = scores.device
        if input_ids.device != device:
            raise InvalidArgumentError("input_ids are on %s but the scores on %s (treemask never copies between"
                                       " devices)" % (input_ids.device, device))
        rows = self._device_rows
        if rows is None or rows.trie.device != device:
            from .torch import DeviceRowStates, DeviceTrie

            device_trie = self._device_tries.get(device)
            if device_trie is None:
                device_trie = self._device_tries[device] = DeviceTrie(self.trie, device)
            rows = self._device_rows = DeviceRowStates(device_trie, failure_policy=self._policy)
        out = self._output_buffer(scores)
        # The generated ids are input_ids[:, prompt_length:], read in place;
        # the kernel keeps pad_token_id's score in finished rows.
        rows.update_mask_logits(input_ids, scores, out, start=self.prompt_length, finished_token=self.pad_token_id)
        return out

    def _output_buffer(self, scores: Any) -> Any:
        """Where this step's masked scores go: the tensor returned last step
        when provably nothing else references it any more (no Python
        reference, no view, no autograd use: transformers drops it once the
        next scores are computed, unless output_scores keeps it), else a new
        one. A fresh 32 x 152k float32 tensor costs ~5 ms of page faults per
        step, more than the masking itself."""
        import torch

        out, self._out = self._out, None
        # 2: the local `out` and getrefcount's argument.
        reusable = (out is not None and sys.getrefcount(out) == 2 and out.dtype is scores.dtype
                    and out.shape == scores.shape and out.device == scores.device and _sole_owner(torch, out))
        if not reusable:
            out = torch.empty_like(scores, memory_format=torch.contiguous_format)
        self._out = out
        return out


def _sole_owner(torch: Any, tensor: Any) -> bool:
    """True iff nothing but the caller's Python reference holds ``tensor``
    or its memory: no other C++ reference to the tensor (autograd), no view
    or alias of its storage. torch has no public API for this: its own
    ``swap_tensors`` and CUDA-graph trees ask the same private accessors
    (``Tensor._use_count``, ``torch._C._storage_Use_Count``). A torch
    without them gets False: the processor then allocates a fresh output
    each step, which is always correct, only slower."""
    storage_use_count = getattr(torch._C, "_storage_Use_Count", None)
    use_count = getattr(tensor, "_use_count", None)
    if storage_use_count is None or use_count is None:
        return False
    # 2 for the storage: the tensor's own reference and the temporary
    # storage object untyped_storage() returns.
    return use_count() == 1 and storage_use_count(tensor.untyped_storage()._cdata) == 2


_buffers.exclusive(TrieLogitsProcessor, also=("__call__",))


class BeamSearchOutput(NamedTuple):
    """What :func:`beam_search` returns.

    sequences: (n_requests * num_return_sequences, prompt + generated)
        int64, request-major, best first within each request; the prompt
        columns are ``input_ids``'; a hypothesis that finished before the
        last step is padded with ``pad_token_id`` after its stop token.
    scores: (n_requests * num_return_sequences,) float32, each the
        hypothesis's cumulative log-probability: the sum over its generated
        tokens (its stop token included) of the model's log-softmax over
        the whole vocabulary, unmasked. No length normalization: with
        ``length_penalty=lp``, ``generate``'s ``sequences_scores`` are these
        divided by ``L ** lp`` (L = generated tokens including the stop
        token); on a fixed-length catalogue (every item L - 1 codes) that is
        one constant factor, so the ranking is the same, and
        ``length_penalty=0.0`` makes the scores equal. -inf marks a dead
        hypothesis (the trie offered fewer than ``num_beams``).
    """

    sequences: Any
    scores: Any


def _prompt_positions(mask: Any) -> Any:
    """Each prompt token's position: its index among the prompt's real
    tokens (left padding gets 0), as generate computes it."""
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)


def _next_logits(model: Any, cache: Any, src: Any, tok: Any, mask: Any, positions: Any):
    """One decode step of every slot: the KV cache reordered by src (slot i
    takes row src[i], an index_select as transformers' beam search does),
    then one token per slot. Returns (last logits, cache, mask, positions)."""
    import torch

    if hasattr(model, "_reorder_cache"):
        cache = model._reorder_cache(cache, src)
    else:
        cache.reorder_cache(src)
    mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
    positions = positions + 1
    out = model(input_ids=tok, attention_mask=mask, position_ids=positions, past_key_values=cache,
                use_cache=True, logits_to_keep=1)
    return out.logits[:, -1, :], out.past_key_values, mask, positions


def _static_prefill(model: Any, input_ids: Any, mask: Any, positions: Any, attention: str) -> Any:
    """compile=True's prefill: the prompts' forward pass with the path's own
    attention mask (as its steps: transformers' mask builder asks the host
    whether there is padding, which a CUDA graph cannot), causal over each
    prompt's real tokens; a padding position attends to itself only (its
    keys are masked for every other position, and a row masked whole would
    give NaN). Returns (last logits, the prefill's cache)."""
    import torch

    length = input_ids.shape[1]
    causal = torch.ones((length, length), dtype=torch.bool, device=input_ids.device).tril()
    diagonal = torch.eye(length, dtype=torch.bool, device=input_ids.device)
    allowed = (causal & mask.bool()[:, None, None, :]) | diagonal
    if attention == "eager":  # additive: 0 where allowed, the dtype's lowest elsewhere
        dtype = getattr(model, "dtype", torch.float32)
        zero = torch.zeros((), dtype=dtype, device=input_ids.device)
        allowed = torch.where(allowed, zero, torch.finfo(dtype).min)
    out = model(input_ids=input_ids, attention_mask={"full_attention": allowed}, position_ids=positions,
                use_cache=True, logits_to_keep=1)
    return out.logits[:, -1, :], out.past_key_values


def _compilable_attention(config: Any) -> str:
    """The attention implementation of a model beam_search(compile=True) can
    run (it passes its own full-attention mask): 'sdpa' or 'eager'; else
    UnsupportedError, before any work."""
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    layer_types = set(getattr(text, "layer_types", None) or ["full_attention"])
    if layer_types != {"full_attention"}:
        raise UnsupportedError("beam_search(compile=True): the model has %s layers; the compiled path masks"
                               " full attention only (use compile=False)"
                               % ", ".join(sorted(layer_types - {"full_attention"})))
    attention = getattr(config, "_attn_implementation", None) or "eager"
    if attention not in ("sdpa", "eager"):
        raise UnsupportedError("beam_search(compile=True): attention implementation %r; the compiled path"
                               " passes its own mask to 'sdpa' or 'eager' attention (use compile=False)"
                               % attention)
    _check_static_cache_api()
    return attention


def _check_static_cache_api() -> None:
    """UnsupportedError, before any work, where the installed transformers'
    StaticCache layers lack what the compiled path sets: lazy_initialization
    (the prompt's keys and values copied in) and a cumulative_length tensor
    (the next column each layer writes, kept on the device so that a
    captured step advances it)."""
    import importlib

    import torch
    import transformers

    try:
        layer_class = getattr(importlib.import_module("transformers.cache_utils"), "StaticLayer", None)
    except ImportError:
        layer_class = None
    problem = None
    if layer_class is None:
        problem = "has no cache_utils.StaticLayer"
    elif not callable(getattr(layer_class, "lazy_initialization", None)):
        problem = "has a StaticLayer without lazy_initialization"
    else:
        try:
            length = getattr(layer_class(max_cache_len=1), "cumulative_length", None)
        except TypeError as e:
            length, problem = None, "has a StaticLayer that cannot be made as StaticLayer(max_cache_len=n): %s" % e
        if problem is None and not isinstance(length, torch.Tensor):
            problem = "has a StaticLayer whose cumulative_length is %s, not a tensor" % type(length).__name__
    if problem is not None:
        raise UnsupportedError("beam_search(compile=True): transformers %s %s (the compiled path needs the static"
                               " cache layers of transformers 5; use compile=False)"
                               % (getattr(transformers, "__version__", "?"), problem))


class _EndProbe:
    """Whether the search has ended (every slot finished), learned without
    waiting for the device: on CUDA the flag is copied to pinned host memory
    behind an event, and read once the event has passed, a step or two
    later. Steps run after the end change nothing (_DeviceLoop.step), so
    the lag costs at most those steps' time, never a different result. On
    CPU tensors (the tests' host mode) it is read at once."""

    def __init__(self, torch: Any, device: Any) -> None:
        self._cuda = device.type == "cuda"
        self._ended = False
        if self._cuda:
            self._flag = torch.zeros(1, dtype=torch.bool).pin_memory()
            self._event = torch.cuda.Event()

    def post(self, finished: Any) -> None:
        ended = finished.all().view(1)
        if not self._cuda:
            self._ended = bool(ended)
            return
        self._flag.copy_(ended, non_blocking=True)
        self._event.record()

    def ended(self) -> bool:
        # query() of an event never recorded is True; the flag starts False.
        if self._cuda and not self._ended and self._event.query():
            self._ended = bool(self._flag[0])
        return self._ended


class _DeviceLoop:
    """beam_search's steps on a CUDA device over a DeviceBeam, every per-step
    tensor allocated once and updated in place, no host synchronisation
    (the end is learned through _EndProbe). With a static KV cache
    (use_static_cache: compile=True) each step has fixed shapes and
    addresses, so on CUDA it is captured once in a CUDA graph and replayed;
    with transformers' dynamic cache (use_dynamic_cache) it runs eagerly.
    On CPU tensors (the tests' host mode, host_cuda.py) both run eagerly."""

    def __init__(self, torch: Any, model: Any, beam: Any, n_requests: int, B: int, max_new_tokens: int,
                 pad_token_id: int, first_tokens: Any, mask: Any, positions: Any) -> None:
        # A cached loop (compile=True) must not keep its model alive: the
        # cache holds it by a weak reference to the model.
        self.torch, self._model, self.beam = torch, weakref.ref(model), beam
        dev = self.device = first_tokens.device
        n = n_requests * B
        self.max_new_tokens = max_new_tokens
        self.pad = torch.full((n,), pad_token_id, dtype=torch.long, device=dev)
        self.request_base = torch.arange(n_requests, device=dev).repeat_interleave(B) * B
        self.slot_in_request = torch.arange(B, device=dev).repeat(n_requests)
        self.beam_width = B
        self.generated = torch.empty((n, max_new_tokens), dtype=torch.long, device=dev)
        self.tok = torch.empty((n, 1), dtype=torch.long, device=dev)
        self._first_tokens(first_tokens)
        # Each beam's row of the prompt's cache: its request's.
        self.request_of_slot = torch.arange(n_requests, device=dev).repeat_interleave(B)
        self.src = self.request_of_slot.clone()
        self.mask, self.positions = mask, positions.clone()
        self.step_index = torch.ones(1, dtype=torch.long, device=dev)  # the column a step writes
        self.n_steps = torch.ones((), dtype=torch.long, device=dev)  # columns written before the end
        self.saved_states = torch.empty_like(beam.states)
        self.saved_scores = torch.empty_like(beam.scores)
        self.cache: Any = None
        self.static = False
        self.graph: Any = None
        self.capture_failed = False
        # compile=True's later searches: the prompts' ids and mask copied in,
        # then the prefill, the beam's start and restart() (start_search)
        # as one captured graph.
        self.start_graph: Any = None
        self.start_capture_failed = False
        self.lock = threading.Lock()  # a cached loop serves one search at a time

    @property
    def model(self) -> Any:
        return self._model()

    def use_dynamic_cache(self, cache: Any) -> None:
        self.cache = cache

    def use_static_cache(self, cache: Any, prompt_length: int, input_ids: Any, mask: Any) -> None:
        """A transformers StaticCache of n_slots rows and prompt +
        max_new_tokens columns, the prompt's keys and values copied in once
        per beam; the attention mask is one boolean (or, for eager
        attention, additive) tensor over the whole cache, a column turned
        on as each generated token enters it. input_ids and mask (the
        prompts, one row per request) size the buffers a later search's
        prompts are copied into (start_search)."""
        torch, model = self.torch, self.model
        from transformers import StaticCache

        config = model.config
        attention = _compilable_attention(config)
        if not all(hasattr(layer, "keys") for layer in getattr(cache, "layers", [None])):
            raise UnsupportedError("beam_search(compile=True): the model's prefill cache (%s) has no per-layer"
                                   " keys and values to copy into a static cache (use compile=False)"
                                   % type(cache).__name__)
        n = self.src.shape[0]
        max_len = prompt_length + self.max_new_tokens
        static: Any = StaticCache(config=config, max_cache_len=max_len)
        for layer, prompt in zip(static.layers, cache.layers):
            layer.lazy_initialization(prompt.keys.index_select(0, self.request_of_slot),
                                      prompt.values.index_select(0, self.request_of_slot))
        self.cache, self.static = static, True
        self.attention = attention
        self.allowed = torch.zeros((n, 1, 1, max_len), dtype=torch.bool, device=self.device)
        self.prompt_length = prompt_length
        self._load_prompt(cache, self.mask)
        # Where a later search's prompts go (start_search).
        self.in_ids: Any = input_ids.clone()
        self.in_mask: Any = mask.clone()
        self.additive = None
        if attention == "eager":
            dtype = getattr(model, "dtype", torch.float32)
            self.additive = torch.empty((n, 1, 1, max_len), dtype=dtype, device=self.device)
            self.zero = torch.zeros((), dtype=dtype, device=self.device)
            self.lowest = torch.full((), torch.finfo(dtype).min, dtype=dtype, device=self.device)
        self.newest_column = self.step_index + (prompt_length - 1)  # updated in place with step_index

    def _load_prompt(self, cache: Any, mask: Any) -> None:
        """The prompt's keys and values (cache: the prefill's, one row per
        request) into the static cache's first columns, once per beam, and
        its attention mask into `allowed`; in place (a captured step reads
        these tensors at their addresses)."""
        torch, length = self.torch, self.prompt_length
        for layer, prompt in zip(self.cache.layers, cache.layers):
            layer.keys[:, :, :length].copy_(prompt.keys.index_select(0, self.request_of_slot))
            layer.values[:, :, :length].copy_(prompt.values.index_select(0, self.request_of_slot))
            layer.cumulative_length.fill_(length)
        # Its rows are the beams already: the first step reorders nothing.
        torch.arange(self.src.shape[0], device=self.device, out=self.src)
        self.allowed.zero_()
        self.allowed[:, 0, 0, :length] = mask.bool()

    def _first_tokens(self, first_tokens: Any) -> None:
        """The beam's first tokens (-1, a dead slot: padding) as column 0 of
        the sequences and the next step's input, in place."""
        tok = self.torch.where(first_tokens < 0, self.pad, first_tokens.long())
        self.generated[:, 0] = tok
        self.tok.copy_(tok.view(-1, 1))

    def restart(self, first_tokens: Any, mask: Any, positions: Any, cache: Any) -> None:
        """The same loop (a static one, from an earlier search of the same
        shapes) ready for a new search whose beam has just started: every
        tensor a step reads is rewritten in place, so a captured step
        replays from the first step on."""
        self._first_tokens(first_tokens)
        self.positions.copy_(positions)
        self.step_index.fill_(1)
        self.n_steps.fill_(1)
        self._load_prompt(cache, mask)

    def _start(self) -> None:
        """A search's start from in_ids / in_mask: the prefill
        (_static_prefill), the beam's first step and restart()."""
        B, mask = self.beam_width, self.in_mask
        positions = _prompt_positions(mask)
        logits, cache = _static_prefill(self.model, self.in_ids, mask, positions, self.attention)
        self.beam.n_bad_rows.zero_()
        tokens, _scores = self.beam.start(logits)
        del logits
        self.restart(tokens, mask.repeat_interleave(B, dim=0), positions[:, -1:].repeat_interleave(B, dim=0), cache)

    def start_search(self, input_ids: Any, mask: Any) -> None:
        """A later search of this (static) loop's shapes: its prompts copied
        in, then _start, captured on CUDA the first time (once the step's
        own graph exists: the kernels have run before) and replayed after;
        eagerly where the capture fails (with a RuntimeWarning) or on CPU
        tensors."""
        import warnings

        torch = self.torch
        self.in_ids.copy_(input_ids)
        self.in_mask.copy_(mask)
        if self.start_graph is not None:
            self.start_graph.replay()
            return
        if self.device.type != "cuda" or self.graph is None or self.start_capture_failed:
            self._start()
            return
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self._start()
        except RuntimeError as e:
            self.start_capture_failed = True
            warnings.warn("treemask.hf.beam_search(compile=True): the model's prefill could not be captured in a"
                          " CUDA graph (%s); it runs eagerly" % e, RuntimeWarning, stacklevel=3)
            self._start()
            return
        self.start_graph = graph
        graph.replay()

    def _logits(self) -> Any:
        if not self.static:
            logits, self.cache, self.mask, self.positions = _next_logits(self.model, self.cache, self.src, self.tok,
                                                                         self.mask, self.positions)
            return logits
        torch = self.torch
        for layer in self.cache.layers:  # the KV cache follows the parents, in place
            layer.keys.copy_(layer.keys.index_select(0, self.src))
            layer.values.copy_(layer.values.index_select(0, self.src))
        # The previous step's token enters the cache at column prompt + step - 1.
        torch.add(self.step_index, self.prompt_length - 1, out=self.newest_column)
        self.allowed.index_fill_(3, self.newest_column, True)
        mask = self.allowed
        if self.additive is not None:
            torch.where(self.allowed, self.zero, self.lowest, out=self.additive)
            mask = self.additive
        self.positions.add_(1)
        out = self.model(input_ids=self.tok, attention_mask={"full_attention": mask}, position_ids=self.positions,
                         past_key_values=self.cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :]

    def step(self) -> None:
        """One step, enqueued: the forward pass, the beam step, the parents'
        sequences and the next tokens. A step after the end (every slot
        finished before it) leaves the beam, the sequences' columns so far
        and n_steps as they were."""
        torch, beam = self.torch, self.beam
        from .torch import TERMINATED_INT32

        logits = self._logits()
        before = beam.finished().all()
        self.saved_states.copy_(beam.states)
        self.saved_scores.copy_(beam.scores)
        was_finished = beam.states == TERMINATED_INT32
        parents, tokens, _ = beam.step(logits)
        del logits
        beam.states.copy_(torch.where(before, self.saved_states, beam.states))
        beam.scores.copy_(torch.where(before, self.saved_scores, beam.scores))
        parent = torch.where(before, self.slot_in_request, parents.long().clamp(min=0))
        torch.add(self.request_base, parent, out=self.src)
        # A carried-over finished hypothesis (or a dead slot) gets padding.
        tok = torch.where((parents < 0) | was_finished.index_select(0, self.src) | before, self.pad, tokens.long())
        self.generated.copy_(self.generated.index_select(0, self.src))
        self.generated.index_copy_(1, self.step_index, tok.view(-1, 1))
        self.tok.copy_(tok.view(-1, 1))
        self.n_steps.copy_(torch.where(before, self.n_steps, self.step_index[0] + 1))
        self.step_index.add_(1)

    def _capture(self) -> Any:
        """The step captured in a CUDA graph (nothing runs while capturing),
        or None, with a warning, when the model cannot be captured (the
        steps then run eagerly)."""
        import warnings

        torch = self.torch
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.step()
        except RuntimeError as e:
            warnings.warn("treemask.hf.beam_search(compile=True): the model's decode step could not be captured"
                          " in a CUDA graph (%s); the steps run eagerly" % e, RuntimeWarning, stacklevel=3)
            return None
        return graph

    def run(self) -> int:
        """Steps 1 .. max_new_tokens - 1 or until the end; returns the
        number of generated columns (the one synchronisation, at the
        end)."""
        torch = self.torch
        probe = _EndProbe(torch, self.device)
        capture = self.static and self.device.type == "cuda" and self.graph is None and not self.capture_failed
        for step in range(1, self.max_new_tokens):
            if probe.ended():
                break
            if self.graph is not None:
                self.graph.replay()
            elif capture and step >= 2:  # step 1 ran eagerly: the warm-up
                capture = False
                self.graph = self._capture()
                if self.graph is not None:
                    self.graph.replay()
                else:
                    self.capture_failed = True
                    self.step()
            else:
                self.step()
            probe.post(self.beam.finished())
        return int(self.n_steps)


class _CompiledLoops:
    """compile=True's loops, kept for the next search of the same shapes on
    the same model and trie: a static KV cache, the loop's tensors and its
    captured CUDA graph, which then replays every step from the first (a
    search of a few tokens would otherwise spend most of its time in the
    capture). At most kPerModel per model (LRU); an entry dies with its
    model (weak keys) or a change of its weights' storage, and
    clear_compiled() drops them. A loop serves one search at a time: a
    search that finds its loop busy builds its own, uncached."""

    kPerModel = 2

    def __init__(self) -> None:
        self._by_model: Any = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def take(self, model: Any, key: Any, trie: Trie, weights: Any) -> Optional[_DeviceLoop]:
        """The cached loop for key, locked for the caller, or None."""
        with self._lock:
            try:
                loops = self._by_model.get(model)
            except TypeError:  # a model that cannot be weakly referenced is never cached
                return None
            entry = loops.get(key) if loops is not None else None
            if entry is None:
                return None
            loop, trie_ref, entry_weights = entry
            if trie_ref() is not trie or entry_weights != weights:
                del loops[key]  # the id was reused, or the weights moved (model.to(...))
                return None
            if not loop.lock.acquire(blocking=False):
                return None
            loops.move_to_end(key)
            return loop

    def put(self, model: Any, key: Any, trie: Trie, weights: Any, loop: _DeviceLoop) -> bool:
        """Keeps loop (locked by the caller) for key; False where the model
        cannot be cached or another search has stored one meanwhile."""
        with self._lock:
            try:
                loops = self._by_model.setdefault(model, OrderedDict())
            except TypeError:
                return False
            if key in loops:
                return False
            loops[key] = (loop, weakref.ref(trie), weights)
            while len(loops) > self.kPerModel:
                loops.popitem(last=False)
            return True

    def clear(self, model: Any = None) -> None:
        with self._lock:
            if model is None:
                self._by_model = weakref.WeakKeyDictionary()
            else:
                try:
                    self._by_model.pop(model, None)
                except TypeError:  # no weak reference to it: it was never cached
                    pass


_COMPILED = _CompiledLoops()


def clear_compiled(model: Any = None) -> None:
    """Drops what ``beam_search(..., compile=True)`` keeps for the next search
    of the same shapes (per model, the two most recent: a static KV cache of
    ``n_requests * num_beams`` rows, the loop's tensors and its CUDA graph):
    every model's, or ``model``'s. They also go with their model."""
    _COMPILED.clear(model)


def _weights_of(model: Any) -> Any:
    """Where the model's weights live (a captured step reads them there):
    a cached loop serves only while this is unchanged."""
    parameters = getattr(model, "parameters", None)
    if parameters is None:
        return None
    return tuple((p.data_ptr(), p.dtype) for p in parameters())


def _beam_search_device(model: Any, input_ids: Any, trie: Trie, B: int, R: int, max_new_tokens: int,
                        attention_mask: Any, pad_token_id: int, compile: bool = False) -> BeamSearchOutput:
    """beam_search on a CUDA device: the same loop over a
    :class:`treemask.torch.DeviceBeam` (its first step by top-k at the
    root, then its graph-capturable beam step); states, scores and
    sequences stay on the device, and the host never waits for it until
    the end (_DeviceLoop). With compile: a static KV cache and, on CUDA,
    every step after the first replayed from one CUDA graph (every step, on
    a later search of the same shapes: _CompiledLoops)."""
    import torch

    from .torch import DeviceBeam

    device = input_ids.device
    n_requests, prompt_length = input_ids.shape
    loop: Optional[_DeviceLoop] = None
    if compile:
        attention = _compilable_attention(model.config)
        key = (id(trie), str(device), n_requests, B, prompt_length, max_new_tokens, pad_token_id, attention)
        weights = _weights_of(model)
        loop = _COMPILED.take(model, key, trie, weights)
    locked = loop is not None
    mask = attention_mask.to(device=device, dtype=torch.long)
    positions = _prompt_positions(mask)
    try:
        with torch.no_grad():
            if loop is not None:  # a loop of an earlier search of these shapes: rewritten in place
                loop.start_search(input_ids, mask)
            else:
                if compile:
                    logits, cache = _static_prefill(model, input_ids, mask, positions, attention)
                else:
                    out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True,
                                logits_to_keep=1)
                    logits, cache = out.logits[:, -1, :], out.past_key_values
                    del out
                beam = DeviceBeam(trie, n_requests, B, device=device)
                tokens, _scores = beam.start(logits)
                del logits
                loop = _DeviceLoop(torch, model, beam, n_requests, B, max_new_tokens, pad_token_id, tokens,
                                   mask.repeat_interleave(B, dim=0), positions[:, -1:].repeat_interleave(B, dim=0))
                if compile:
                    loop.use_static_cache(cache, prompt_length, input_ids, mask)
                    locked = loop.lock.acquire(blocking=False)
                    if locked and not _COMPILED.put(model, key, trie, weights, loop):
                        loop.lock.release()
                        locked = False
                else:
                    loop.use_dynamic_cache(cache)
                del cache
            steps = loop.run()

        ids = input_ids.repeat_interleave(R, dim=0)
        keep = (torch.arange(n_requests, device=device)[:, None] * B
                + torch.arange(R, device=device)[None, :]).reshape(-1)
        # Copies (the loop's tensors serve the next search).
        sequences = torch.cat([ids, loop.generated[keep, :steps]], dim=1)
        return BeamSearchOutput(sequences, loop.beam.scores[keep].clone())
    finally:
        if locked and loop is not None:
            loop.lock.release()


def _check_beam_memory(model: Any, trie: Trie, n_requests: int, num_beams: int, max_new_tokens: int,
                       device: Any) -> None:
    """OutOfMemoryError when one step of the search cannot fit the device's
    memory: each beam gets a logits row of the model's whole vocabulary, so
    a num_beams of millions is refused here, clearly, instead of by the
    kernel's OOM killer halfway through the search."""
    import torch

    from .errors import OutOfMemoryError

    config = getattr(model, "config", None)
    width = max(int(getattr(config, "vocab_size", 0) or 0), trie.vocab_size)
    element = torch.empty((), dtype=getattr(model, "dtype", torch.float32)).element_size()
    n_slots = n_requests * num_beams
    need = n_slots * (width * element + max_new_tokens * 8)  # logits rows, generated tokens
    if device.type == "cuda":
        have = torch.cuda.get_device_properties(device).total_memory
    else:
        have = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if need > have:
        raise OutOfMemoryError(
            "hf.beam_search: num_beams %d x %d requests need at least %.1f GiB per step (a logits row of %d"
            " x %d bytes per beam), more than the %.1f GiB of this %s: lower num_beams"
            % (num_beams, n_requests, need / 2**30, width, element, have / 2**30, device.type))


def beam_search(model: Any, input_ids: Any, trie: Trie, num_beams: int, *, max_new_tokens: Optional[int] = None,
                attention_mask: Any = None, num_return_sequences: Optional[int] = None,
                pad_token_id: Optional[int] = None, n_threads: int = 1, vocab: Any = None,
                compile: bool = False) -> BeamSearchOutput:
    """Constrained beam search for a transformers causal LM, with the exact
    beam step of :class:`treemask.Beam` instead of full-vocabulary masks:
    the prompt runs once per request (all beams start identical, so the
    first step is :func:`treemask.topk_states` at the root and the KV cache
    is then expanded to the beams); then per step one forward pass of the
    ``n_requests * num_beams`` beams, one C call (log-softmax normalizer,
    gather of the allowed tokens, top-B over beams x candidates, trie states
    advanced) and the KV cache reordered by the parents
    (``Cache.reorder_cache``, an ``index_select`` on the batch dimension, as
    transformers' own beam search does).

    Finished hypotheses (their stop token chosen) carry over with their
    score and compete by cumulative log-probability with the running ones;
    the search stops when every beam of every request is finished (or dead),
    or after ``max_new_tokens`` steps. On a fixed-length catalogue (every
    item the same number of codes, no item a prefix of another, as
    MiniOneRec's semantic IDs) the result equals ``model.generate(
    input_ids, num_beams=B, num_return_sequences=R, do_sample=False,
    logits_processor=[TrieLogitsProcessor(trie)], length_penalty=0.0)``'s
    sequences and ``sequences_scores`` (to float rounding); with another
    length_penalty only the scores differ, by the factor ``L ** lp``
    (see :class:`BeamSearchOutput`). With items of different lengths the two
    can differ: generate keeps finished hypotheses apart from the running
    beams (and normalizes their scores by length); here they share the B
    slots.

    Over a string set (:meth:`Trie.from_strings`) the hypotheses are
    distinct strings: candidates that spell the same bytes (another
    tokenization of the same text) merge, the best kept, so the
    ``num_return_sequences`` results are different items (fewer live ones
    when the search finds fewer; the rest are dead, score ``-inf``).

    Args:
        model: a transformers causal LM (``model(input_ids=...,
            attention_mask=..., position_ids=..., past_key_values=...,
            use_cache=True)`` returning ``logits`` and ``past_key_values``).
        input_ids: (n_requests, prompt) int64 CPU tensor (left-padded when
            prompts differ in length, with ``attention_mask``).
        trie: the allowed sequences; its stop tokens are the model's EOS ids.
            Its vocab_size must not exceed the model's logits width; every
            column of the logits is in the log-softmax.
        num_beams: B >= 1.
        max_new_tokens: default ``trie.stats().max_depth + 1`` (the longest
            item plus its stop token).
        attention_mask: (n_requests, prompt), 1 for real tokens.
        num_return_sequences: R <= B best per request (default B).
        pad_token_id: fills finished hypotheses (default the model's
            generation_config.pad_token_id, else the trie's first stop token).
        n_threads: threads of the beam step (requests are split between them).
        vocab: the model's tokenizer or :class:`Vocab`: the trie is checked
            against it first (:meth:`Trie.check_vocab`, the tokenizer read
            at the model's logits width), so that a string set compiled for
            another tokenizer is refused naming both fingerprints.

    With ``input_ids`` on a CUDA device (and the model there too) every
    step runs on the device: a :class:`treemask.torch.DeviceBeam` (the trie
    uploaded once, its tensors allocated once) takes the first step's top-B
    and each beam step, the states, scores and sequences stay device
    tensors, and the host never waits for the device until the end: the
    "all finished?" test is read a step or two late through an event (the
    steps after the end change nothing). The result's tensors are then on
    that device.

    ``compile=True`` (CUDA): the beams' KV cache is a transformers
    ``StaticCache`` (prompt + max_new_tokens columns, the prompt copied in
    once per beam, reordered in place by the parents), the attention mask
    one preallocated tensor over it, and every step after the first (the
    forward pass, the beam step, the sequences' update) is captured once in
    a CUDA graph and replayed: eager transformers spends most of a small
    model's step launching kernels from Python. The same sequences as
    ``compile=False``, the scores to float rounding (attention runs over
    the whole static cache, masked). It needs full attention through
    'sdpa' or 'eager' (UnsupportedError names what the model has
    instead) and transformers 5's static cache layers (a transformers
    whose ``StaticLayer`` keeps no ``cumulative_length`` tensor is refused
    the same way, naming its version); a model whose step cannot be captured (a host
    synchronisation inside its forward) runs the static steps eagerly,
    with a RuntimeWarning. The prompts' forward pass then uses the same
    kind of mask (causal over each prompt's real tokens). The loop (static
    cache, tensors, graph) is kept for the next search of the same shapes
    (model, trie, device, number of prompts and their length, num_beams,
    max_new_tokens, pad_token_id), which copies its prompts in and replays
    everything: its start (the prompts' forward pass, the first step, the
    loop rewritten in place; captured once, the second time those shapes
    come) and every step. Two such loops per model at most, dropped with
    the model, when its weights move (``model.to``) or by
    :func:`clear_compiled`. On CPU tensors there is nothing to compile: the
    argument is accepted and the host loop runs as without it.
    """
    import torch

    from .beam import Beam, DeviceTensorError, initial_ends, initial_scores, topk_states

    if not isinstance(trie, Trie):
        raise InvalidArgumentError("trie must be a treemask.Trie, got %s" % type(trie).__name__)
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise InvalidArgumentError("input_ids: want a 2-D torch tensor (n_requests, prompt), got %s"
                                   % _buffers.describe(input_ids))
    if input_ids.device.type not in ("cpu", "cuda"):
        raise DeviceTensorError("input_ids: %s is on a device treemask has no beam step for (CPU and CUDA only)"
                                % _buffers.describe(input_ids))
    num_beams = _buffers.positive_int(num_beams, "num_beams")
    if vocab is not None:
        width = int(getattr(getattr(model, "config", None), "vocab_size", 0) or 0)
        trie.check_vocab(model_vocab(vocab, width or trie.vocab_size))
    n_requests, prompt_length = input_ids.shape
    B = num_beams
    R = B if num_return_sequences is None else num_return_sequences
    if not isinstance(R, int) or isinstance(R, bool) or not 1 <= R <= B:
        raise InvalidArgumentError("num_return_sequences %r: want 1 .. num_beams (%d)" % (R, B))
    if max_new_tokens is None:
        max_new_tokens = trie.stats().max_depth + 1
    max_new_tokens = _buffers.positive_int(max_new_tokens, "max_new_tokens")
    if pad_token_id is None:
        config = getattr(model, "generation_config", None)
        pad_token_id = getattr(config, "pad_token_id", None)
        if isinstance(pad_token_id, (list, tuple)):
            pad_token_id = pad_token_id[0] if pad_token_id else None
        if pad_token_id is None:
            pad_token_id = trie.stop_tokens[0]
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    elif tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise InvalidArgumentError("attention_mask has shape %s, input_ids %s"
                                   % (tuple(attention_mask.shape), tuple(input_ids.shape)))
    n_slots = n_requests * B
    if n_slots == 0:
        return BeamSearchOutput(input_ids.new_zeros((0, prompt_length)),
                                torch.zeros(0, dtype=torch.float32, device=input_ids.device))
    if input_ids.device.type == "cuda" and trie.is_string_set:
        raise UnsupportedError("beam_search: a string-set trie (Trie.from_strings) has no device beam step: its"
                               " candidates come from a walk of the vocabulary on the host; run the search on"
                               " CPU tensors, or build the trie with Trie.from_labels")
    _check_beam_memory(model, trie, n_requests, B, max_new_tokens, input_ids.device)
    if input_ids.device.type == "cuda":
        return _beam_search_device(model, input_ids, trie, B, R, max_new_tokens, attention_mask, pad_token_id,
                                   compile=bool(compile))
    beam = Beam(B, n_threads=n_threads)

    # The prompt runs once per request, not once per beam: every beam of a
    # request starts identical (transformers' scores [0, -inf, ...]), so the
    # first step is the top-B allowed tokens of the root by log-probability
    # (treemask.topk_states: the beam step's tie rule with one live beam),
    # and the KV cache is then expanded to B rows per request.
    mask = attention_mask.to(torch.long)
    positions = _prompt_positions(mask)
    request_base = np.repeat(np.arange(n_requests, dtype=np.int64) * B, B)
    generated = np.empty((n_slots, max_new_tokens), dtype=np.int64)

    # A string set's step merges hypotheses that spell the same string
    # (treemask.h): ends records where each finished one ended.
    ends = initial_ends(n_requests, B) if trie.is_string_set else None

    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True,
                    logits_to_keep=1)
        last = out.logits[:, -1, :]
        cache = out.past_key_values
        del out
        states = np.full(n_slots, STATE_ROOT, dtype=np.uint32)
        if ends is None:
            first = topk_states(trie, np.full(n_requests, STATE_ROOT, dtype=np.uint32), last, B)
            tokens = first.tokens.reshape(-1)
            scores = np.ascontiguousarray(first.scores.reshape(-1))
            trie.advance_states(states, tokens)  # -1 (dead slot): no token
            states[tokens < 0] = STATE_TERMINATED
        else:
            # Top-B at the root could hold two tokens that spell the same
            # bytes: the beam step from scores [0, -inf, ...] merges them.
            # It reads only row r * B of each request (the others' scores
            # are -inf), so the rest stay unwritten.
            rows = last.new_empty((n_slots, last.shape[1]))
            rows[::B] = last
            scores = initial_scores(n_requests, B)
            _, tokens = beam.step_states(trie, states, rows, scores, ends=ends)
            del rows
        del last
        tok = np.where(tokens < 0, pad_token_id, tokens).astype(np.int64)
        generated[:, 0] = tok
        src = np.repeat(np.arange(n_requests, dtype=np.int64), B)
        mask = mask.repeat_interleave(B, dim=0)
        positions = positions[:, -1:].repeat_interleave(B, dim=0)
        steps = 1
        for step in range(1, max_new_tokens):
            if bool((states == STATE_TERMINATED).all()):
                break
            logits, cache, mask, positions = _next_logits(model, cache, torch.from_numpy(src),
                                                          torch.from_numpy(tok).view(n_slots, 1), mask, positions)
            was_finished = states == STATE_TERMINATED
            parents, tokens = beam.step_states(trie, states, logits, scores, ends=ends)
            del logits
            src = request_base + np.maximum(parents, 0)
            # A carried-over finished hypothesis (or a dead slot) gets padding.
            tok = np.where((parents < 0) | was_finished[src], pad_token_id, tokens).astype(np.int64)
            generated[:, :step] = generated[src, :step]
            generated[:, step] = tok
            steps = step + 1

    ids = input_ids.repeat_interleave(R, dim=0)
    keep = (np.arange(n_requests)[:, None] * B + np.arange(R)[None, :]).reshape(-1)
    sequences = torch.cat([ids, torch.from_numpy(generated[keep, :steps])], dim=1)
    return BeamSearchOutput(sequences, torch.from_numpy(scores[keep].copy()))
