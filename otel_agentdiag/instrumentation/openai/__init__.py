"""Auto-instrumentation of the ``openai`` Python SDK: chat completions, the Responses API and embeddings,
sync and async, streamed and not.

Usage::

    from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument()          # or instrument(tracer_provider=...)
    client.chat.completions.create(model="gpt-4o-mini", messages=[...])
    OpenAIInstrumentor().uninstrument()

or with no code at all: ``opentelemetry-instrument python app.py`` (entry point ``agentdiag_openai``).

Each call is one CLIENT span ``{operation} {model}`` (``chat gpt-4o-mini``, ``embeddings text-embedding-3-small``)
with ``agentdiag.kind=llm``, ``gen_ai.operation.name``, ``gen_ai.provider.name=openai``,
``gen_ai.request.model`` and the request parameters set when it starts; response model and id, finish reasons
and the token usage the API reported when it ends (usage it did not report is absent). Streams: see
:mod:`otel_agentdiag.instrumentation._stream`; retries: one ``agentdiag.http.attempt`` event per HTTP
attempt; errors: status ERROR without a description and ``error.type`` = the SDK's exception class
(``openai.RateLimitError``), the exception re-raised unchanged.

Inside ``agentdiag.llm_call()`` (or a framework integration that owns the call) no second span is made: the
owner's span is enriched instead. Message content is never recorded.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap
from wrapt import wrap_function_wrapper

from otel_agentdiag.instrumentation import _attempts
from otel_agentdiag.instrumentation._base import tracer_for
from otel_agentdiag.instrumentation._wrappers import async_call, sync_call
from otel_agentdiag.instrumentation.openai.package import _instruments

_logger = logging.getLogger(__name__)

__all__ = ["OpenAIInstrumentor"]

# (module, class, method, describe, respond, accumulator factory, is_async)
_METHODS = (
    ("openai.resources.chat.completions", "Completions", "create", "chat_request", "chat_response", "ChatAccumulator"),
    ("openai.resources.chat.completions", "Completions", "parse", "chat_request", "chat_response", "ChatAccumulator"),
    (
        "openai.resources.responses",
        "Responses",
        "create",
        "responses_request",
        "responses_response",
        "ResponsesAccumulator",
    ),
    (
        "openai.resources.responses",
        "Responses",
        "parse",
        "responses_request",
        "responses_response",
        "ResponsesAccumulator",
    ),
    ("openai.resources.embeddings", "Embeddings", "create", "embeddings_request", "embeddings_response", "NoStream"),
)


class OpenAIInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """An ``opentelemetry-instrumentation`` instrumentor for the ``openai`` SDK (idempotent, reversible)."""

    # BaseInstrumentor is a singleton whose __init__ runs on every OpenAIInstrumentor(): state is set in
    # _instrument, never in __init__.
    _wrapped: list[tuple[type, str]]
    _holds_attempts: bool

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        # opentelemetry-instrument stops loading every later instrumentor when one raises anything but an
        # ImportError: an SDK layout this code does not know is logged and left untraced, never fatal.
        self._wrapped = []
        try:
            self._wrap_all(kwargs.get("tracer_provider"))
        except ImportError:
            self._unwrap_all()
            raise
        except Exception as exc:  # noqa: BLE001
            self._unwrap_all()
            _logger.warning("otel-agentdiag: cannot instrument openai (%s); it stays untraced", type(exc).__name__)
            return
        _attempts.acquire()
        self._holds_attempts = True

    def _wrap_all(self, tracer_provider: Any) -> None:
        import openai

        from otel_agentdiag.instrumentation.openai import patch

        tracer = tracer_for(__name__, tracer_provider)
        for module_name, class_name, method, describe, respond, accumulate in _METHODS:
            try:
                module = importlib.import_module(module_name)
            except ImportError:  # an older openai without this API
                continue
            for cls_name, is_async in ((class_name, False), ("Async" + class_name, True)):
                cls = getattr(module, cls_name, None)
                if cls is None or not hasattr(cls, method):
                    continue
                factory = async_call if is_async else sync_call
                stream_types = (openai.AsyncStream,) if is_async else (openai.Stream,)
                wrapper = factory(
                    tracer, getattr(patch, describe), getattr(patch, respond), getattr(patch, accumulate), stream_types
                )
                wrap_function_wrapper(cls, method, wrapper)
                self._wrapped.append((cls, method))

    def _uninstrument(self, **kwargs: Any) -> None:
        self._unwrap_all()
        if getattr(self, "_holds_attempts", False):
            self._holds_attempts = False
            _attempts.release()

    def _unwrap_all(self) -> None:
        wrapped = getattr(self, "_wrapped", [])
        while wrapped:
            target, method = wrapped.pop()
            unwrap(target, method)
