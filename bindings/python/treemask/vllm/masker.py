"""Bitmask rows filled on the host, masked on the logits' device (the vLLM
processor's device path).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

from typing import Any, List

import torch

from ..bitmask import apply_token_bitmask_inplace, cuda_available

__all__ = ["DeviceMasker"]


class DeviceMasker:
    """Bitmask rows filled on the host, masked on the logits' device.

    The host buffer is pinned; a step copies the rows to the device with a
    non-blocking copy on the current stream and records an event. The next
    fill waits for that event, which has long passed in practice (vLLM has
    since waited for the step's sampled tokens), so the host does not wait
    on the device in steady state. The mask is applied by treemask's CUDA
    kernel on the current stream, or, when this libtreemask has no CUDA (or
    for a non-CUDA device), by the equivalent torch expression.
    """

    def __init__(self, n_slots: int, words: int, device: torch.device, pin_memory: bool) -> None:
        self.device = device
        self._host_tensor = torch.zeros((n_slots, words), dtype=torch.int32, pin_memory=pin_memory)
        self.host = self._host_tensor.numpy()
        self._event: Any = None
        self._device = torch.zeros((n_slots, words), dtype=torch.int32, device=device)
        self._cuda = device.type == "cuda"
        self._kernel = self._cuda and cuda_available()

    def wait_host(self) -> None:
        """Before the host buffer is written: the last copy out of it is done."""
        if self._event is not None:
            self._event.synchronize()
            self._event = None

    def apply(self, logits: torch.Tensor, n_rows: int, rows: List[int], vocab_size: int) -> None:
        mask = self._device[:n_rows]
        mask.copy_(self._host_tensor[:n_rows], non_blocking=True)
        if self._cuda:
            self._event = torch.cuda.Event()
            self._event.record()
        if self._kernel:
            apply_token_bitmask_inplace(logits, mask, vocab_size=vocab_size, indices=rows)
            return
        index = torch.tensor(rows, dtype=torch.long, device=logits.device)
        sub = mask.index_select(0, index)
        shifts = torch.arange(32, dtype=torch.int32, device=logits.device)
        allowed = ((sub.unsqueeze(-1) >> shifts) & 1).view(len(rows), -1)[:, :logits.shape[1]]
        if allowed.shape[1] < logits.shape[1]:
            allowed = torch.nn.functional.pad(allowed, (0, logits.shape[1] - allowed.shape[1]))
        allowed[:, vocab_size:] = 0
        masked = logits.index_select(0, index).masked_fill_(allowed == 0, float("-inf"))
        logits.index_copy_(0, index, masked)
