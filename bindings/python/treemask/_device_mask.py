"""Bitmask rows filled on the host, masked on the logits' device: the
staging both engine adapters use when the trie walk runs on the host (the
vLLM processor on any device; transformers' processor when this
libtreemask has no usable CUDA).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from .bitmask import apply_token_bitmask_inplace, cuda_available

__all__ = ["DeviceMasker"]


class DeviceMasker:
    """Bitmask rows filled on the host, masked on the logits' device.

    ``host`` (a numpy view of a pinned buffer of ``n_rows`` rows) is where
    the library fills the rows; :meth:`apply` copies the first rows to the
    device with a non-blocking copy on the current stream, records an event
    (CUDA) and masks. Call :meth:`wait_host` before writing ``host`` again:
    it waits for that event, which has long passed in practice (the engine
    has since waited for the step's sampled tokens), so the host does not
    wait on the device in steady state. The mask is applied by treemask's
    CUDA kernel on the current stream, or, when this libtreemask has no
    usable CUDA (or for a non-CUDA device), by the equivalent torch
    expression.
    """

    def __init__(self, n_rows: int, words: int, device: torch.device, pin_memory: bool) -> None:
        self.device = device
        self.n_rows = n_rows
        self._host_tensor = torch.zeros((n_rows, words), dtype=torch.int32, pin_memory=pin_memory)
        self.host = self._host_tensor.numpy()
        self._event: Any = None
        self._device = torch.zeros((n_rows, words), dtype=torch.int32, device=device)
        self._cuda = device.type == "cuda"
        self._kernel = self._cuda and cuda_available()

    def wait_host(self) -> None:
        """Before the host buffer is written: the last copy out of it is done."""
        if self._event is not None:
            self._event.synchronize()
            self._event = None

    def apply(self, logits: torch.Tensor, n_rows: int, rows: Optional[Sequence[int]] = None,
              vocab_size: Optional[int] = None) -> None:
        """Copies host rows ``[0, n_rows)`` to the device, then sets
        ``logits[r, t] = -inf`` where bit t of row r is 0 or t >= vocab_size,
        for each r in ``rows`` (default: every row), as
        :func:`treemask.apply_token_bitmask_inplace` does (vocab_size
        defaults to ``min(width, 32 * words)``)."""
        mask = self._device[:n_rows]
        mask.copy_(self._host_tensor[:n_rows], non_blocking=True)
        if self._cuda:
            self._event = torch.cuda.Event()
            self._event.record()
        if self._kernel:
            apply_token_bitmask_inplace(logits, mask, vocab_size=vocab_size, indices=rows)
            return
        width = logits.shape[1]
        if vocab_size is None:
            vocab_size = min(width, 32 * mask.shape[1])
        if rows is None:
            logits.masked_fill_(~_allowed(mask, width, vocab_size), float("-inf"))
            return
        index = torch.tensor(rows, dtype=torch.long, device=logits.device)
        allowed = _allowed(mask.index_select(0, index), width, vocab_size)
        logits.index_copy_(0, index, logits.index_select(0, index).masked_fill_(~allowed, float("-inf")))


def _allowed(mask: torch.Tensor, width: int, vocab_size: int) -> torch.Tensor:
    """Bitmask rows unpacked by torch: (rows, width) bool, True where the
    token's bit is set and the token is below vocab_size."""
    shifts = torch.arange(32, dtype=torch.int32, device=mask.device)
    bits = ((mask.unsqueeze(-1) >> shifts) & 1).reshape(mask.shape[0], 32 * mask.shape[1])[:, :width]
    if bits.shape[1] < width:
        bits = torch.nn.functional.pad(bits, (0, width - bits.shape[1]))
    bits[:, vocab_size:] = 0
    return bits != 0
