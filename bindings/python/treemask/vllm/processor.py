"""The vLLM V1 logits processor: request validation at submission, the
persistent batch's bookkeeping, and one masking step per decode step.

One request never takes the engine down: vLLM runs ``update_state`` and
``apply`` inside its step loop, where an exception kills the engine core
(and the API server with it). Every part of them that concerns one row
runs under its own guard; a row whose part raises, whatever the exception,
fails closed: from then on it offers only its stop tokens (so the request
ends at once with what it had generated, never unconstrained), and the log
says why, with the request's id. A batch-wide call that fails is redone row
by row where that is safe (filling, masking, normalizing beam rows), so the
failure stays with the row that caused it; the batch's token accept and
reorder, which cannot be redone, fail closed the rows they touched.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import logging
import sys
import threading
import types
import weakref
from typing import Any, ClassVar, Dict, Iterable, List, Optional, Tuple

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
from ..matcher import Matcher
from ..trie import Trie
from . import beam, frontend
from .boundary import check_request, request_matcher
from .keys import KEY_SNAPSHOT, RequestError, has_treemask_keys, parse_extra_args
from .model import ModelInfo, frontend_model
from .trie_registry import registry

__all__ = ["TrieLogitsProcessor", "registry"]

logger = logging.getLogger("treemask.vllm")


class _Row:
    __slots__ = ("output", "consumed", "beam", "stops")

    def __init__(self, output: List[int], beam: bool = False, stops: Tuple[int, ...] = ()) -> None:
        self.output = output  # vLLM's running list of the request's output tokens
        self.consumed = 0  # how many of them the matcher has seen
        # A beam request's row (treemask.vllm.beam): rewritten as its
        # log-softmax over the whole unmasked row, then masked as every row.
        self.beam = beam
        # What the row offers if it fails: ids vLLM stops this request on,
        # each below the model's vocab size.
        self.stops = stops


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
    InvalidStateError. A failure that concerns one row fails that row
    closed, never the engine (see the module doc).
    """

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Refuses a request treemask cannot serve (RequestError, a
        ValueError: HTTP 400), and adds its stop tokens to the ones vLLM
        stops on. On the API server the trie was loaded and checked off the
        event loop before this runs (:mod:`treemask.vllm.frontend`); here it
        is looked up and checked again (microseconds: what the check builds
        is cached per trie). Every token id the request or its trie brings
        is checked against the trie and the model (:mod:`treemask.vllm.boundary`)."""
        if not has_treemask_keys(sampling_params.extra_args):
            return  # not ours: untouched
        prepared = frontend.take_prepared(sampling_params)
        spec = prepared[0] if prepared is not None else parse_extra_args(sampling_params.extra_args,
                                                                         registry.settings)
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
            _stamp_snapshot(sampling_params, None)
            return  # no model here: the engine checks the rest
        if prepared is not None:
            trie = prepared[1]
        else:
            frontend.warn_if_on_event_loop()
            trie = registry.trie_for(spec, model)
        stops = check_request(spec, trie, model, sampling_params.max_tokens)
        # The worker maps the very snapshot checked here (a client's value is
        # replaced: only this line sets the key).
        _stamp_snapshot(sampling_params, registry.snapshot_of(trie))
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

    # ---- failing one row closed ---------------------------------------------

    def _valid_stops(self, *candidates: Optional[Iterable[int]]) -> Tuple[int, ...]:
        """The first candidate list with ids below the model's vocab size
        (those ids only)."""
        for ids in candidates:
            try:
                valid = tuple(sorted({int(t) for t in ids or () if 0 <= int(t) < self.model.vocab_size}))
            except (TypeError, ValueError):
                continue
            if valid:
                return valid
        return ()

    def _stop_only_trie(self, stops: Tuple[int, ...]) -> Trie:
        if not stops:
            # Neither the request nor the model names a stop token (the front
            # end refuses such a request; this is for one that bypassed it):
            # the row can end only at max_tokens, and offers token 0 until then.
            stops = (0,)
        trie = self._fallback.get(stops)
        if trie is None:
            trie = self._fallback[stops] = Trie.from_paths([[]], self.model.vocab_size, list(stops))
        return trie

    def _fail_closed(self, index: int, why: Any) -> None:
        """From now on row ``index`` offers only its stop tokens (logged with
        the request's id and the reason)."""
        row = self.rows.get(index)
        logger.error("treemask: request %s (batch row %d) fails closed, only stop tokens from now on: %s: %s",
                     _request_id(index), index, type(why).__name__ if isinstance(why, BaseException) else "",
                     str(why)[:2000])
        stops = row.stops if row is not None and row.stops else self._valid_stops(self.model.eos_token_ids)
        self.batch.set_matcher(index, Matcher(self._stop_only_trie(stops)))
        if row is not None:
            row.beam = False
            row.consumed = len(row.output)

    def _fail_rows(self, indices: Iterable[int], why: Any) -> None:
        for index in list(indices):
            self._fail_closed(index, why)

    # ---- batch bookkeeping ------------------------------------------------

    def _matcher_for(self, params: Any, prompt: Optional[List[int]] = None) -> Matcher:
        """The matcher of a new request, built by the same function the front
        end checked the request with (:func:`treemask.vllm.boundary.request_matcher`;
        a beam request's walked to the beam's position and checked against
        the end of its prompt). Raises whatever goes wrong: the caller fails
        the row closed."""
        spec = parse_extra_args(params.extra_args, registry.settings, snapshot=True)
        assert spec is not None  # the row has treemask keys
        trie = registry.trie_for(spec, self.model)  # checked against the model
        m = request_matcher(spec, trie, params.max_tokens)
        if spec.beam_tokens is not None:
            beam.walk_beam_tokens(m, spec.beam_tokens, prompt)
        return m

    def _clear(self, index: int) -> None:
        if self.rows.pop(index, None) is not None:
            self.batch.set_matcher(index, None)

    def _add(self, index: int, params: Any, prompt: Optional[List[int]], output: List[int]) -> None:
        # The ids vLLM stops this request on (validate_params added the
        # request's own), else the model's EOS ids: what a failure offers.
        stops = self._valid_stops(getattr(params, "stop_token_ids", None), self.model.eos_token_ids,
                                  getattr(params, "all_stop_token_ids", None))
        self.rows[index] = _Row(output, stops=stops)
        try:
            self.batch.set_matcher(index, self._matcher_for(params, prompt))
            self.rows[index].beam = beam.is_beam_request(params.extra_args)
        except Exception as e:  # any failure of one request fails that request only
            self._fail_closed(index, e)

    def update_state(self, batch_update: Optional[BatchUpdate]) -> None:
        if batch_update is None or self.inert:
            return
        try:
            self._update(batch_update)
        except Exception as e:  # the bookkeeping itself broke: never the engine
            logger.exception("treemask: the batch update failed; every constrained row fails closed")
            self._fail_rows(self.rows, e)

    def _update(self, batch_update: BatchUpdate) -> None:
        for index in batch_update.removed:
            self._clear(index)
        for index, params, prompt, output in batch_update.added:
            self._clear(index)  # an added request may replace the one at its index
            if params is None or not has_treemask_keys(params.extra_args):
                continue
            self._add(index, params, prompt, output)
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
            try:
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
            except Exception as e:  # this row only
                tokens[index] = -1
                self._fail_closed(index, e)
        if single:
            try:
                self.batch.accept_tokens(tokens)
            except Exception as e:  # cannot be redone row by row: the rows it fed fail
                self._fail_rows((int(i) for i in np.flatnonzero(tokens >= 0) if int(i) in self.rows), e)

    def _accept(self, index: int, m: Any, token: int) -> None:
        try:
            m.accept_token(token)
        except Exception as e:  # sticky failure, or anything else: the row ends with a stop token
            self._fail_closed(index, e)

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
        self._fail_closed(index, "an output token is a -1 placeholder")

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        try:
            return self._apply(logits)
        except Exception as e:  # never the engine
            logger.exception("treemask: the masking step failed; every constrained row fails closed")
            # Every constrained row to its stop tokens, with torch alone
            # (if even that fails, the step is not answered unconstrained:
            # the exception goes to vLLM).
            self._fail_rows(self.rows, e)
            for index, row in self.rows.items():
                _keep_only(logits, index, row.stops or self._valid_stops(self.model.eos_token_ids) or (0,))
            return logits

    def _apply(self, logits: torch.Tensor) -> torch.Tensor:
        self._catch_up()
        slots = sorted(self.rows)
        n_rows, width = logits.shape
        host = self._host
        if self._masker is not None:
            self._masker.wait_host()
        try:
            need = self.batch.fill_bound(slots)
        except Exception as e:  # redone row by row: only the row that fails fails
            logger.error("treemask: batch fill failed (%s: %s); filling row by row", type(e).__name__, e)
            need = self._fill_rows(host, slots)
        beam_rows = [s for s in slots if self.rows[s].beam]
        if beam_rows:  # the log-softmax over the whole unmasked row, then masked as every row
            for s in self._normalize(logits, beam_rows):
                need[s] = True  # failed closed: its new row is applied
        rows = [s for s in slots if need[s]]
        if not rows:
            return logits
        vocab = min(width, self.model.vocab_size)
        try:
            if self._masker is None:
                apply_token_bitmask_inplace(logits, host[:n_rows], vocab_size=vocab, indices=rows,
                                            n_threads=self.n_threads)
            else:
                self._masker.apply(logits, n_rows, rows, vocab)
        except Exception as e:  # redone row by row with torch
            logger.error("treemask: the mask kernel failed (%s: %s); masking row by row", type(e).__name__, e)
            for s in rows:
                try:
                    _mask_row(logits, host[s], s, vocab)
                except Exception as e_row:  # this row only
                    self._fail_closed(s, e_row)
                    _keep_only(logits, s, self.rows[s].stops or (0,))
        return logits

    def _normalize(self, logits: torch.Tensor, beam_rows: List[int]) -> List[int]:
        """Normalizes the beam rows; returns those that failed closed instead."""
        try:
            beam.normalize_beam_rows(logits, beam_rows)
            return []
        except Exception:  # redone row by row
            failed = []
            for s in beam_rows:
                try:
                    beam.normalize_beam_rows(logits, [s])
                except Exception as e:  # this row only
                    self._fail_closed(s, e)
                    self._refill(s)
                    failed.append(s)
            return failed

    def _refill(self, s: int) -> None:
        """Writes row s of the bound bitmask in full (after its matcher changed)."""
        self.batch[s].fill_next_token_bitmask(self._host, s)
        self.batch.invalidate([s])

    def _fill_rows(self, host: np.ndarray, slots: List[int]) -> np.ndarray:
        need = np.ones(self.n_slots, dtype=np.bool_)
        for s in slots:
            try:
                need[s] = self.batch[s].fill_next_token_bitmask(host, s)
            except Exception as e:  # this row only
                self._fail_closed(s, e)
                self.batch[s].fill_next_token_bitmask(host, s)
        self.batch.invalidate(slots)  # written behind the batch's back
        return need


_buffers.exclusive(TrieLogitsProcessor)


def _mask_row(logits: torch.Tensor, words: np.ndarray, row: int, vocab: int) -> None:
    """``logits[row, t] = -inf`` where bit t of ``words`` is 0 or t >= vocab:
    what the mask kernel does, in torch (the fallback when it fails)."""
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")[:vocab].astype(np.bool_)
    keep = torch.zeros(logits.shape[1], dtype=torch.bool)
    keep[:bits.size] = torch.from_numpy(bits)
    logits[row].masked_fill_(~keep.to(logits.device), float("-inf"))


def _keep_only(logits: torch.Tensor, row: int, tokens: Iterable[int]) -> None:
    """``logits[row]`` ``-inf`` everywhere but at ``tokens``."""
    keep = torch.zeros(logits.shape[1], dtype=torch.bool)
    keep[[t for t in tokens if t < logits.shape[1]]] = True
    logits[row].masked_fill_(~keep.to(logits.device), float("-inf"))


def _request_id(index: int) -> str:
    """The vLLM request id of persistent-batch row ``index``, for the log:
    read from the caller's InputBatch (vLLM calls the processor from its
    ``refresh_metadata``, and ``apply`` from its model runner, which holds
    it), since vLLM gives a logits processor no request ids. "?" when it
    cannot be found."""
    try:
        frame: Optional[types.FrameType] = sys._getframe(1)
        for _ in range(40):
            if frame is None:
                break
            obj = frame.f_locals.get("self")
            if obj is not None and not isinstance(obj, TrieLogitsProcessor):
                holder = obj if type(obj).__name__ == "InputBatch" else getattr(obj, "input_batch", None)
                ids = getattr(holder, "req_ids", None)
                if isinstance(ids, list) and 0 <= index < len(ids) and ids[index] is not None:
                    return str(ids[index])
            frame = frame.f_back
    except Exception:  # only a log line depends on it
        pass
    return "?"


def _stamp_snapshot(params: Any, digest: Optional[str]) -> None:
    """Sets the request's KEY_SNAPSHOT to the digest of the file snapshot
    the front end checked it against, or removes it (whatever a client
    sent)."""
    extra = params.extra_args
    if digest is not None:
        extra[KEY_SNAPSHOT] = digest
    elif extra is not None:
        extra.pop(KEY_SNAPSHOT, None)


# Loads off the API server's event loop, beam search refused (see frontend).
frontend.install()
