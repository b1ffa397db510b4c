"""The vLLM V1 logits processor: request validation at submission, the
persistent batch's bookkeeping, and one masking step per decode step.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import logging
import threading
import weakref
from typing import Any, ClassVar, Dict, List, Optional, Tuple

import numpy as np

try:
    import torch
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality
except ImportError as _e:  # pragma: no cover - vLLM is what this module is for
    raise ImportError("treemask.vllm needs vLLM (V1 engine, tested with 0.32.0) and torch: %s" % _e) from _e

from .. import _buffers
from .._device_mask import DeviceMasker
from ..batch import BatchMatcher
from ..bitmask import apply_token_bitmask_inplace
from ..errors import Error
from ..failure_policy import adapter_policy_code
from ..matcher import Matcher
from ..trie import Trie
from . import beam, frontend
from .keys import RequestError, RequestSpec, has_treemask_keys, parse_extra_args
from .model import ModelInfo, frontend_model
from .trie_registry import TrieRegistry

__all__ = ["TrieLogitsProcessor", "registry"]

logger = logging.getLogger("treemask.vllm")

#: The registry of this process (the API server and each worker have one).
registry = TrieRegistry()


class _Row:
    __slots__ = ("output", "consumed", "beam")

    def __init__(self, output: List[int], beam: bool = False) -> None:
        self.output = output  # vLLM's running list of the request's output tokens
        self.consumed = 0  # how many of them the matcher has seen
        # A beam request's row (treemask.vllm.beam): rewritten as its
        # log-softmax over the whole unmasked row, then masked as every row.
        self.beam = beam


class TrieLogitsProcessor(LogitsProcessor):
    """vLLM V1 logits processor for requests with ``treemask_trie``,
    ``treemask_choices`` or ``treemask_trie_id`` in their ``extra_args``
    (see :mod:`treemask.vllm`).

    Each persistent-batch row of a constrained request has a matcher in a
    :class:`treemask.BatchMatcher` slot of the same index. Before every
    sampling step the tokens the request generated since the last step are
    accepted (all of them for a request resumed after preemption, which
    comes back with its earlier output), the rows' bitmasks are filled in
    one C call and applied to their logits rows (on a CUDA device: copied
    there from pinned memory without a host synchronisation and applied by
    treemask's CUDA kernel on the current stream). Unconstrained rows are
    not touched. A beam request's row (``treemask_beam_tokens``:
    :mod:`treemask.vllm.beam`) starts at the beam's position in its trie and
    holds the log-softmax of the whole unmasked row at the allowed tokens.
    vLLM drives it from one thread; a second thread's call raises
    InvalidStateError.
    """

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Refuses a request treemask cannot serve (RequestError, a
        ValueError: HTTP 400), and adds its stop tokens to the ones vLLM
        stops on. On the API server the trie was loaded off the event loop
        before this runs (:mod:`treemask.vllm.frontend`); here it is looked
        up."""
        if not has_treemask_keys(sampling_params.extra_args):
            return  # not ours: untouched
        spec = parse_extra_args(sampling_params.extra_args, registry.settings)
        assert spec is not None
        if sampling_params.min_tokens:
            raise RequestError("min_tokens (%d) cannot be combined with a trie: a path may end before it"
                               % sampling_params.min_tokens)
        model = frontend_model()
        if model is not None and model.speculative:
            raise RequestError("speculative decoding is on, and vLLM runs no custom logits processor then: this"
                               " engine cannot constrain the request")
        if model is None:
            registry.check_source(spec)
            return  # no model here: the engine checks the rest
        trie = frontend.take_prepared(sampling_params)
        if trie is None:
            frontend.warn_if_on_event_loop()
            trie = registry.trie_for(spec, model)
        if spec.beam_tokens is not None:
            # One step of a beam: a walk of its own trie, one token, no
            # length budget (the driver bounds the steps).
            beam.check_beam_request(trie, spec.beam_tokens, spec.stop_tokens, sampling_params.max_tokens)
        else:
            _check_length_budget(sampling_params, trie)
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
        self._busy = threading.RLock()  # concurrent use raises (_buffers.exclusive)
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
        self.n_threads = registry.settings.threads  # CPU masking threads
        self._masker = DeviceMasker(self.n_slots, self._words, self.device, is_pin_memory) \
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
        """The matcher of a new request (a beam request's walked to the
        beam's position, checked against the end of its prompt); on any
        error one that offers only stop tokens (fail closed: never an
        unconstrained answer)."""
        spec: Optional[RequestSpec] = None
        try:
            spec = parse_extra_args(params.extra_args, registry.settings)
            assert spec is not None  # the row has treemask keys
            trie = registry.trie_for(spec, self.model)
            in_beam = spec.beam_tokens is not None
            # A string set has no length budget (it is defined in tokens over
            # token paths; any tokenization of a string may be longer).
            budget = params.max_tokens is not None and not in_beam and not trie.is_string_set
            m = Matcher(trie, failure_policy=adapter_policy_code(spec.failure_policy),
                        max_new_tokens=max(params.max_tokens - 1, 0) if budget else None,
                        override_stop_tokens=spec.stop_tokens)
            if spec.beam_tokens is not None:
                beam.walk_beam_tokens(m, spec.beam_tokens, prompt)
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
            if params is None or not has_treemask_keys(params.extra_args):
                continue
            self.batch.set_matcher(index, self._matcher_for(params, prompt))
            self.rows[index] = _Row(output, beam=beam.is_beam_request(params.extra_args))
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
        beam_rows = [s for s in slots if self.rows[s].beam]
        if beam_rows:  # the log-softmax over the whole unmasked row, then masked as every row
            beam.normalize_beam_rows(logits, beam_rows)
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


_buffers.exclusive(TrieLogitsProcessor)


def _check_length_budget(sampling_params: Any, trie: Trie) -> None:
    """RequestError when max_tokens cannot hold the trie's shortest sequence
    and its stop token: the output would be a label cut by the length limit
    (finish_reason "length"), which treemask never returns."""
    max_tokens = sampling_params.max_tokens
    if max_tokens is None:
        return
    shortest = registry.shortest_path(trie)
    if shortest + 1 > max_tokens:
        raise RequestError("max_tokens %d cannot hold the trie's shortest sequence (%d tokens) and its stop"
                           " token: give max_tokens >= %d" % (max_tokens, shortest, shortest + 1))



# Loads off the API server's event loop, beam search refused (see frontend).
frontend.install()
