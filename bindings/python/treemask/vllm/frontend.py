"""treemask in vLLM's API server process: loads off the event loop, and
beam-search requests refused.

vLLM validates a request (``validate_params``) synchronously inside
``AsyncLLM.add_request``, on the server's asyncio event loop. Loading a trie
file or compiling a choice list there would stall every other request and
``/health`` for as long as it takes. So :func:`install` wraps
``AsyncLLM.add_request``: a request with treemask keys has its trie loaded
or compiled, and checked against the model (:mod:`treemask.vllm.boundary`),
on a small thread pool first (awaited, so the loop serves others meanwhile;
an error becomes the request's HTTP 400 exactly as from
``validate_params``), and ``validate_params`` then only looks it up.

vLLM's beam search (``use_beam_search``) takes ``BeamSearchParams``, which
carry no ``extra_args``: the constraint would be dropped silently and the
answer unconstrained. :func:`install` makes the OpenAI requests'
``to_beam_search_params`` refuse a request with treemask keys (HTTP 400),
pointing to the exact beam search (:mod:`treemask.vllm.beam`, driven from
the client by :mod:`treemask.vllm.client`).

A third hook warms the model's vocabulary: every vLLM InputProcessor built
after :func:`install` starts building the model's :class:`treemask.Vocab`
on a thread of its own (:func:`warm_up`) as soon as it exists, while vLLM
still starts its engine, so the first string set a cold server compiles
does not stall ``/health`` while a tokenizer is copied and read (calls that
hold Python's GIL for up to half a second each), and vLLM's shared
tokenizer is read before any request uses it.

vLLM imports the logits processors lazily: in the API server, at the first
request's validation, on the event loop, so that request is validated
there before any hook exists (a cold server's first two lists in any
tokenization kept ``/health`` waiting 3 to 6 s). :func:`register`, vLLM's
general plugin (the ``vllm.general_plugins`` entry point, which vLLM loads
in every process at start), installs the hooks before the engine is built.
The module of the processor installs them too, when vLLM imports it. If
vLLM's internals are not as expected, nothing is patched and a warning says
what is lost: loads then run on the event loop (bounded by the operator's
limits), and beam search is only documented as unconstrained.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import functools
import inspect
import logging
import threading
import time
from typing import Any, Dict, Optional, Tuple

from ..errors import Error
from ..trie import Trie
from .boundary import check_request
from .keys import RequestError, RequestSpec, has_treemask_keys, parse_extra_args
from .model import model_of_input_processor
from .trie_registry import registry

__all__ = ["install", "register", "take_prepared", "warn_if_on_event_loop", "installed", "warm_up"]

logger = logging.getLogger("treemask.vllm")

#: Loads and compiles at once; more requests wait their turn (awaiting).
PREPARE_THREADS = 2

_lock = threading.Lock()
_executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
# id(params) -> (params, (spec, trie)): what add_request prepared for validate_params.
_prepared: Dict[int, Tuple[Any, Tuple[RequestSpec, Trie]]] = {}
installed = {"prepare": False, "beam_search": False, "warm_up": False}
_warned_on_loop = False


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(PREPARE_THREADS, thread_name_prefix="treemask-load")
        return _executor


def take_prepared(params: Any) -> Optional[Tuple[RequestSpec, Trie]]:
    """The request keys and the trie add_request prepared for these very
    params, if any."""
    entry = _prepared.get(id(params))
    return entry[1] if entry is not None and entry[0] is params else None


def warn_if_on_event_loop() -> None:
    """Logs once that a trie is being loaded on a running event loop (the
    add_request hook is not active)."""
    global _warned_on_loop
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    if not _warned_on_loop:
        _warned_on_loop = True
        logger.warning("treemask: loading a trie on the API server's event loop (treemask's add_request hook"
                       " is not installed: %s); other requests wait meanwhile", installed)


async def _prepare(engine: Any, params: Any) -> None:
    model = model_of_input_processor(engine.input_processor)
    if model.speculative:
        return  # validate_params refuses it
    loop = asyncio.get_running_loop()

    def load() -> Optional[Tuple[RequestSpec, Trie]]:
        # Parsed here too, off the loop: the keys of a list of a million
        # strings take a second or two to check.
        spec = parse_extra_args(params.extra_args, registry.settings)
        if spec is None:
            return None
        trie = registry.trie_for(spec, model)
        # Every check of the boundary, here off the loop: what it builds (the
        # model's Vocab, the trie's token index, its shortest sequence) is
        # cached, so validate_params' second check costs microseconds.
        check_request(spec, trie, model, params.max_tokens)
        return spec, trie

    prepared = await loop.run_in_executor(_pool(), load)
    if prepared is not None:
        _prepared[id(params)] = (params, prepared)


def _install_prepare() -> None:
    from vllm.exceptions import VLLMValidationError
    from vllm.v1.engine.async_llm import AsyncLLM

    original = AsyncLLM.add_request
    if getattr(original, "_treemask_hook", False):
        return
    if not inspect.iscoroutinefunction(original) or "params" not in inspect.signature(original).parameters:
        raise TypeError("AsyncLLM.add_request is not the coroutine (self, request_id, prompt, params, ...)"
                        " treemask knows")

    @functools.wraps(original)
    async def add_request(self, *args: Any, **kwargs: Any) -> Any:
        params = kwargs.get("params", args[2] if len(args) > 2 else None)
        if params is None or not has_treemask_keys(getattr(params, "extra_args", None)):
            return await original(self, *args, **kwargs)
        try:
            await _prepare(self, params)
        except RequestError as e:
            # What vLLM does with validate_params' ValueError: a client error
            # (HTTP 400); any other exception from add_request is a 500.
            raise VLLMValidationError(str(e)) from e
        except Error as e:  # a check the boundary did not word: still the request's fault, never a 500
            logger.warning("treemask: a request's trie could not be prepared: %s: %s", type(e).__name__, e)
            raise VLLMValidationError("treemask: the request's trie cannot be used: %s (the server log has the"
                                      " details)" % type(e).__name__) from e
        try:
            return await original(self, *args, **kwargs)
        finally:
            _prepared.pop(id(params), None)

    add_request._treemask_hook = True  # type: ignore[attr-defined]
    AsyncLLM.add_request = add_request  # type: ignore[method-assign]


def _install_beam_search_refusal() -> None:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest

    for cls in (CompletionRequest, ChatCompletionRequest):
        original = cls.to_beam_search_params
        if getattr(original, "_treemask_hook", False):
            continue

        def refusing(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if has_treemask_keys(getattr(self, "vllm_xargs", None)):
                raise RequestError("use_beam_search cannot carry a trie: vLLM's beam search takes"
                                   " BeamSearchParams, which have no extra_args, so the answer would be"
                                   " unconstrained. Use treemask's exact constrained beam search, driven from"
                                   " the client over /v1/completions (treemask.vllm.client.beam_search; the"
                                   " server needs --logprobs-mode processed_logits), or n > 1 sampling with"
                                   " the trie (rank by cumulative_logprob)")
            return _original(self, *args, **kwargs)

        functools.update_wrapper(refusing, original)
        refusing._treemask_hook = True  # type: ignore[attr-defined]
        cls.to_beam_search_params = refusing  # type: ignore[method-assign]


def warm_up(input_processor: Any) -> threading.Thread:
    """Builds the model's Vocab of a vLLM InputProcessor on a daemon thread
    (returned). A tokenizer whose bytes cannot be read is logged, and
    string sets are refused later as before."""
    def run() -> None:
        try:
            start = time.monotonic()
            vocab = model_of_input_processor(input_processor).vocab
            _trim_heap()  # the tokenizer's copy and the transient arrays are freed: give the pages back
            logger.info("treemask: the model's vocabulary (%d tokens) is ready for string sets, in %.1f s",
                        vocab.n_tokens, time.monotonic() - start)
        except Exception as e:  # a request meets the same error, worded for its client
            logger.info("treemask: the model's vocabulary is not built ahead (%s: %s)", type(e).__name__,
                        str(e)[:500])

    thread = threading.Thread(target=run, name="treemask-warm-up", daemon=True)
    thread.start()
    return thread


def _trim_heap() -> None:
    """Returns the C heap's free pages to the system (glibc's malloc_trim;
    nothing elsewhere)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _install_warm_up() -> None:
    from vllm.v1.engine.input_processor import InputProcessor

    original = InputProcessor.__init__
    if getattr(original, "_treemask_hook", False):
        return

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        warm_up(self)

    __init__._treemask_hook = True  # type: ignore[attr-defined]
    InputProcessor.__init__ = __init__  # type: ignore[method-assign]


def install() -> None:
    """Installs the three hooks (idempotent); see the module doc."""
    for name, hook in (("prepare", _install_prepare), ("beam_search", _install_beam_search_refusal),
                       ("warm_up", _install_warm_up)):
        if installed[name]:
            continue
        try:
            hook()
            installed[name] = True
        except Exception as e:  # another vLLM: keep the documented fallback
            logger.warning("treemask: could not install the %s hook into this vLLM (%s: %s)", name,
                           type(e).__name__, e)


def register() -> None:
    """vLLM's general plugin (entry point group ``vllm.general_plugins``,
    loaded in every vLLM process at start): installs the hooks before the
    API server builds its engine (see the module doc)."""
    install()
