"""Auto-instrumentation of the ``openai`` Python SDK.

Covers chat completions, the Responses API and embeddings, sync and async, streamed and not.

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
owner's span is enriched instead.

Content (messages, ``instructions``, tool definitions, the answer) is never a span attribute. With
``configure(capture_content=True)`` it is captured beside the span for the local store only: chat
``messages`` and ``tools`` (or ``functions``) and the choices; Responses ``input``, ``instructions``, ``tools``
and ``output``; embeddings ``input``. A streamed answer is rebuilt from its chunks and captured once when the
stream ends. Inside an owner that captures the content itself (a framework step) nothing is captured here.
"""

from __future__ import annotations

import importlib

from opentelemetry import trace

from otel_agentdiag.instrumentation._instrumentor import ClientInstrumentor, Target
from otel_agentdiag.instrumentation._wrappers import llm_call
from otel_agentdiag.instrumentation.openai.package import _instruments

__all__ = ["OpenAIInstrumentor"]

_CHAT = ("chat_request", "chat_response", "ChatAccumulator", "chat_inputs", "chat_outputs")
_RESPONSES = (
    "responses_request",
    "responses_response",
    "ResponsesAccumulator",
    "responses_inputs",
    "responses_outputs",
)
_EMBEDDINGS = ("embeddings_request", "embeddings_response", "no_stream", "embeddings_inputs", None)

# (module, class, method, (describe, respond, accumulator factory, content inputs, content outputs)): names in
# ``patch``, looked up at instrument time.
_METHODS: tuple[tuple[str, str, str, tuple[str, str, str, str, str | None]], ...] = (
    ("openai.resources.chat.completions", "Completions", "create", _CHAT),
    ("openai.resources.chat.completions", "Completions", "parse", _CHAT),
    ("openai.resources.responses", "Responses", "create", _RESPONSES),
    ("openai.resources.responses", "Responses", "parse", _RESPONSES),
    ("openai.resources.embeddings", "Embeddings", "create", _EMBEDDINGS),
)


class OpenAIInstrumentor(ClientInstrumentor):
    """An ``opentelemetry-instrumentation`` instrumentor for the ``openai`` SDK (idempotent, reversible)."""

    _library = "openai"

    _instruments = _instruments

    def _targets(self, tracer: trace.Tracer) -> list[Target]:
        import openai

        from otel_agentdiag.instrumentation.openai import patch

        targets: list[Target] = []
        for module_name, class_name, method, (describe, respond, accumulate, inputs, outputs) in _METHODS:
            try:
                module = importlib.import_module(module_name)
            except ImportError:  # an older openai without this API
                continue
            for cls_name, is_async in ((class_name, False), ("Async" + class_name, True)):
                cls = getattr(module, cls_name, None)
                if cls is None or not hasattr(cls, method):
                    continue
                wrapper = llm_call(
                    tracer,
                    getattr(patch, describe),
                    getattr(patch, respond),
                    getattr(patch, accumulate),
                    (openai.AsyncStream,) if is_async else (openai.Stream,),
                    is_async=is_async,
                    inputs=getattr(patch, inputs),
                    outputs=None if outputs is None else getattr(patch, outputs),
                )
                targets.append((cls, method, wrapper))
        return targets
