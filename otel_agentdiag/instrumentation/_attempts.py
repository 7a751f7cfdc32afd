"""One event per HTTP attempt of a model call, the SDK's own retries included.

The OpenAI and Anthropic SDKs retry inside one method call (429, 5xx, connection errors). The LLM span stays
one model step and carries its token usage once; each attempt becomes an ``agentdiag.http.attempt`` event on
it with ``http.request.resend_count`` (0 for the first), ``http.response.status_code`` and, for a failed
attempt, ``error.type`` (the status code, or the transport exception's class).

The hook sits on the public ``send`` method of the HTTP client classes the SDKs use (``httpx2`` for openai 3.x
and anthropic 2.x, ``httpx`` before). Outside an instrumented model call it costs one context lookup and
passes the call through untouched. Installed once for all instrumentors, removed when the last one goes.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from wrapt import wrap_function_wrapper

from otel_agentdiag.instrumentation._base import current_llm_call
from otel_agentdiag.instrumentation._unwrap import unwrap_ours
from otel_agentdiag.instrumentation._values import as_int

_HTTP_MODULES = ("httpx2", "httpx")
_lock = threading.Lock()
_users = 0
_wrapped: list[tuple[Any, str, Any]] = []


def _send(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    call = current_llm_call()
    if call is None:
        return wrapped(*args, **kwargs)
    try:
        response = wrapped(*args, **kwargs)
    except BaseException as exc:
        call.record_attempt(None, exc)
        raise
    call.record_attempt(as_int(getattr(response, "status_code", None)), None)
    return response


async def _asend(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    call = current_llm_call()
    if call is None:
        return await wrapped(*args, **kwargs)
    try:
        response = await wrapped(*args, **kwargs)
    except BaseException as exc:
        call.record_attempt(None, exc)
        raise
    call.record_attempt(as_int(getattr(response, "status_code", None)), None)
    return response


def acquire() -> None:
    """Install the hook (first caller) or count one more user."""
    global _users
    with _lock:
        _users += 1
        if _users > 1:
            return
        for name in _HTTP_MODULES:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            for cls_name, wrapper in (("Client", _send), ("AsyncClient", _asend)):
                cls = getattr(module, cls_name, None)
                if cls is None or not hasattr(cls, "send"):
                    continue
                wrap_function_wrapper(cls, "send", wrapper)
                _wrapped.append((cls, "send", wrapper))


def release() -> None:
    """Count one user less; the last one removes the hook."""
    global _users
    with _lock:
        if _users == 0:
            return
        _users -= 1
        if _users:
            return
        while _wrapped:
            cls, attribute, wrapper = _wrapped.pop()
            unwrap_ours(cls, attribute, wrapper)
