"""Failure policies: what a token the trie does not allow does to a sequence.

The one table of the package (the values are ``treemask.h``'s
``TREEMASK_FAILURE_*``):

==================  ==================================================  ===========
name                after a token the trie does not allow               as in
==================  ==================================================  ===========
``"reject"``        the token is refused, the state is unchanged;       xgrammar
                    ``accept_token`` returns False
``"fail_closed"``   only stop tokens are allowed from then on           RTP-LLM
``"sticky_error"``  the sequence is failed until ``reset``: its calls   llguidance
                    raise :class:`InvalidStateError`
==================  ==================================================  ===========

Defaults, and why they differ:

- :data:`LIBRARY_DEFAULT` (``"reject"``) for the primitives that report a
  refusal to their caller (:class:`treemask.Matcher`,
  :meth:`treemask.Trie.advance_states`, :class:`treemask.torch.DeviceTrie`):
  the caller sees the False (or the ``accepted`` flag) and decides, as with
  xgrammar's ``accept_token``; it is also the C library's default
  (``treemask_matcher_options_init``).
- :data:`ADAPTER_DEFAULT` (``"fail_closed"``) for the engine adapters
  (``treemask.hf``, ``treemask.vllm``, ``treemask.llama_cpp``): inside an
  engine's sampling loop nobody reads a False, and a sequence that left the
  trie (a token forced by the application or chosen by another processor)
  must never continue unconstrained, so it may only end.
- An adapter whose engine cannot report an error for a running sequence
  (vLLM's logits processors) runs ``"sticky_error"`` as ``"fail_closed"``
  (:func:`adapter_policy_code`); llama-cpp-python's processor always fails
  closed (an exception there is swallowed and generation goes on
  unconstrained).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

from typing import Dict, Union

from ._ffi import lib
from .errors import InvalidArgumentError

__all__ = ["POLICIES", "LIBRARY_DEFAULT", "ADAPTER_DEFAULT", "failure_policy_code", "adapter_policy_code"]

#: name -> TREEMASK_FAILURE_* value.
POLICIES: Dict[str, int] = {
    "reject": lib.TREEMASK_FAILURE_REJECT,
    "fail_closed": lib.TREEMASK_FAILURE_FAIL_CLOSED,
    "sticky_error": lib.TREEMASK_FAILURE_STICKY_ERROR,
}
LIBRARY_DEFAULT = "reject"
ADAPTER_DEFAULT = "fail_closed"


def failure_policy_code(policy: Union[str, int]) -> int:
    """The TREEMASK_FAILURE_* value of a policy name (or of a value)."""
    if isinstance(policy, str):
        if policy in POLICIES:
            return POLICIES[policy]
    elif not isinstance(policy, bool) and policy in POLICIES.values():
        return int(policy)
    raise InvalidArgumentError("failure_policy %r: want one of %s" % (policy, ", ".join(POLICIES)))


def adapter_policy_code(policy: Union[str, int]) -> int:
    """The policy an adapter that cannot raise mid-sequence runs:
    ``"sticky_error"`` becomes ``"fail_closed"`` (see the module doc)."""
    code = failure_policy_code(policy)
    return POLICIES["fail_closed"] if code == POLICIES["sticky_error"] else code
