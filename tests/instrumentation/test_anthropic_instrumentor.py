"""AnthropicInstrumentor against the real ``anthropic`` SDK and the fake model server on 127.0.0.1.

The clients are built with ``open_telemetry=False`` (the SDK's own spans off: this instrumentor owns the LLM
span) except in the tests of the other case, where the SDK's own span is the one LLM span.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import anthropic
import pytest
from conftest import Spans
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from llm_spans import attempts, raw_ids, usage_keys
from opentelemetry.trace import SpanKind, StatusCode

import otel_agentdiag
from otel_agentdiag.instrumentation.anthropic import AnthropicInstrumentor
from otel_agentdiag.pipeline.adapters import map_span
from otel_agentdiag.storage import SpanStore

pytestmark = [pytest.mark.usefixtures("anthropic_instrumented"), pytest.mark.anyio]

MODEL = "claude-haiku-4-5"
MESSAGES: list[Any] = [{"role": "user", "content": fake.SENTINEL_PROMPT}]
TOOLS: list[Any] = [{"name": fake.TOOL_NAME, "description": "weather", "input_schema": {"type": "object"}}]


def client(server: FakeModelServer, **kwargs: Any) -> anthropic.Anthropic:
    kwargs.setdefault("open_telemetry", False)
    return anthropic.Anthropic(api_key=fake.SENTINEL_API_KEY, base_url=server.anthropic_base_url, **kwargs)


def aclient(server: FakeModelServer, **kwargs: Any) -> anthropic.AsyncAnthropic:
    kwargs.setdefault("open_telemetry", False)
    return anthropic.AsyncAnthropic(api_key=fake.SENTINEL_API_KEY, base_url=server.anthropic_base_url, **kwargs)


def assert_usage(attributes: Any, usage: fake.AnthropicUsage) -> None:
    # The semantic conventions' Anthropic refinement: input = input + cache read + cache creation.
    whole = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    assert attributes["gen_ai.usage.input_tokens"] == whole
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == usage.cache_read_input_tokens
    assert attributes["gen_ai.usage.cache_creation.input_tokens"] == usage.cache_creation_input_tokens
    assert attributes["gen_ai.usage.output_tokens"] == usage.output_tokens


def test_messages_create(server: FakeModelServer, spans: Spans) -> None:
    message = client(server).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
    assert message.content[0].text == fake.ANSWER_TEXT  # type: ignore[union-attr]
    span = spans.one()
    assert span.name == f"chat {MODEL}"
    assert span.kind is SpanKind.CLIENT
    started = spans.started_with(span)
    assert started["agentdiag.kind"] == "llm"
    assert started["gen_ai.provider.name"] == "anthropic"
    assert started["gen_ai.request.model"] == MODEL
    assert started["gen_ai.request.max_tokens"] == 64
    attributes = span.attributes or {}
    assert raw_ids(span)["gen_ai.response.id"] == message.id  # beside the span, for the redactors
    assert attributes["gen_ai.response.model"] == MODEL + fake.MODEL_SNAPSHOT_SUFFIX
    assert attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert_usage(attributes, fake.ANTHROPIC_USAGE)
    assert attempts(span) == [{"http.request.resend_count": 0, "http.response.status_code": 200}]


def test_tool_use(server: FakeModelServer, spans: Spans) -> None:
    client(server).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, tools=TOOLS)
    attributes = spans.one().attributes or {}
    assert attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert_usage(attributes, fake.ANTHROPIC_TOOL_USE_USAGE)


def test_usage_the_server_did_not_report_is_absent(server: FakeModelServer, spans: Spans) -> None:
    server.usage_mode = "omit"
    client(server).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
    assert usage_keys(spans.one()) == set()


def test_usage_without_cache_fields(server: FakeModelServer, spans: Spans) -> None:
    server.usage_mode = "no_details"
    client(server).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
    span = spans.one()
    assert usage_keys(span) == {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"}
    assert (span.attributes or {})["gen_ai.usage.input_tokens"] == fake.ANTHROPIC_USAGE.input_tokens


def test_create_stream_exhausted(server: FakeModelServer, spans: Spans) -> None:
    stream = client(server).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=True)
    assert isinstance(stream, anthropic.Stream)
    kinds = [event.type for event in stream]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    span = spans.one()
    attributes = span.attributes or {}
    assert spans.started_with(span)["gen_ai.request.stream"] is True
    assert attributes["agentdiag.stream.end"] == "exhausted"
    assert attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert_usage(attributes, fake.ANTHROPIC_STREAM_USAGE)
    assert attributes["gen_ai.response.time_to_first_chunk"] > 0


def test_create_stream_closed_early(server: FakeModelServer, spans: Spans) -> None:
    stream = client(server).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=True)
    next(iter(stream))
    stream.close()
    span = spans.one()
    assert (span.attributes or {})["agentdiag.stream.end"] == "closed"
    assert span.status.status_code is StatusCode.UNSET


# Abandoning a stream also abandons its HTTP connection: the socket's own ResourceWarning when the collector
# frees it is the point of the test, not a failure of it.
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_create_stream_abandoned(server: FakeModelServer, spans: Spans) -> None:
    stream = client(server).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=True)
    next(iter(stream))
    del stream
    gc.collect()
    gc.collect()  # and the connection it held, while this test's warning filter is in force
    span = spans.one()
    assert (span.attributes or {})["error.type"] == "agentdiag.stream_abandoned"
    assert span.status.status_code is StatusCode.ERROR


async def test_async_stream_that_breaks_mid_way_ends_as_error(server: FakeModelServer, spans: Spans) -> None:
    server.break_next_stream()
    stream = await aclient(server).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=True)
    with pytest.raises(ValueError):
        async for _ in stream:
            pass
    await stream.close()
    span = spans.one()
    assert (span.attributes or {})["agentdiag.stream.end"] == "error"
    assert span.status.status_code is StatusCode.ERROR


def test_stream_helper_with_final_message(server: FakeModelServer, spans: Spans) -> None:
    with client(server).messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as stream:
        assert spans.finished() == []
        message = stream.get_final_message()  # reads the stream itself, behind the proxy
    assert message.content[0].text == fake.STREAM_TEXT  # type: ignore[union-attr]
    span = spans.one()
    attributes = span.attributes or {}
    assert span.name == f"chat {MODEL}"
    assert spans.started_with(span)["gen_ai.request.stream"] is True
    assert attributes["agentdiag.stream.end"] == "exhausted"
    assert attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert_usage(attributes, fake.ANTHROPIC_STREAM_USAGE)
    assert len(attempts(span)) == 1


def test_stream_helper_iterated_text(server: FakeModelServer, spans: Spans) -> None:
    with client(server).messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES, tools=TOOLS) as stream:
        for _ in stream:
            pass
    attributes = spans.one().attributes or {}
    assert attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert_usage(attributes, fake.ANTHROPIC_TOOL_USE_USAGE)


def test_stream_helper_left_early_is_closed(server: FakeModelServer, spans: Spans) -> None:
    with client(server).messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as stream:
        next(iter(stream))
    assert (spans.one().attributes or {})["agentdiag.stream.end"] == "closed"


async def test_async_create_and_stream_helper(server: FakeModelServer, spans: Spans) -> None:
    claude = aclient(server)
    await claude.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
    async with claude.messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as stream:
        text = "".join([piece async for piece in stream.text_stream])
    assert text == fake.STREAM_TEXT
    first, second = spans.finished()
    assert_usage(first.attributes, fake.ANTHROPIC_USAGE)
    assert (second.attributes or {})["agentdiag.stream.end"] == "exhausted"
    assert_usage(second.attributes, fake.ANTHROPIC_STREAM_USAGE)


async def test_async_create_stream_cancelled(server: FakeModelServer, spans: Spans) -> None:
    release = server.hold_after_first_chunk()
    stream = await aclient(server).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=True)
    await stream.__anext__()
    waiting = asyncio.Event()

    async def read_rest() -> None:
        waiting.set()
        async for _ in stream:
            pass

    task = asyncio.create_task(read_rest())
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    await stream.close()
    attributes = spans.one().attributes or {}
    assert attributes["agentdiag.stream.end"] == "cancelled"
    assert attributes["error.type"] == "asyncio.CancelledError"


def test_error_is_reraised_and_typed(server: FakeModelServer, spans: Spans) -> None:
    with pytest.raises(anthropic.NotFoundError) as raised:
        client(server).messages.create(model=fake.ERROR_MODEL, max_tokens=64, messages=MESSAGES)
    assert fake.SENTINEL_ERROR in str(raised.value)
    span = spans.one()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description is None
    assert (span.attributes or {})["error.type"] == "anthropic.NotFoundError"


@pytest.mark.parametrize("status", [429, 529])
def test_retried_call_is_one_span_with_usage_once(server: FakeModelServer, spans: Spans, status: int) -> None:
    server.fail_next(status)
    client(server, max_retries=2).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
    span = spans.one()
    assert [a.get("http.response.status_code") for a in attempts(span)] == [status, 200]
    assert [a["http.request.resend_count"] for a in attempts(span)] == [0, 1]
    assert_usage(span.attributes, fake.ANTHROPIC_USAGE)


def test_stream_helper_retries_then_streams(server: FakeModelServer, spans: Spans) -> None:
    server.fail_next(529)
    with client(server, max_retries=2).messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as stream:
        stream.get_final_message()
    span = spans.one()
    assert [a.get("http.response.status_code") for a in attempts(span)] == [529, 200]


def test_retries_exhausted(server: FakeModelServer, spans: Spans) -> None:
    server.fail_next(429, times=5)
    with pytest.raises(anthropic.RateLimitError):
        client(server, max_retries=1).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
    span = spans.one()
    assert (span.attributes or {})["error.type"] == "anthropic.RateLimitError"
    assert len(attempts(span)) == 2


# --- the SDK's own spans -----------------------------------------------------------------------------------
def test_sdk_span_is_the_one_llm_span_when_the_sdk_traces(server: FakeModelServer, spans: Spans) -> None:
    claude = client(server, open_telemetry={"tracer_provider": spans.provider})
    server.fail_next(429)
    claude.with_options(max_retries=2).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
    span = spans.one()  # not two
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name != "otel_agentdiag.instrumentation.anthropic"
    attributes = span.attributes or {}
    # Left the SDK's: the convention adapter maps it (not ours, so never taken for a copy of a call of ours).
    assert "agentdiag.kind" not in attributes
    assert attributes["gen_ai.provider.name"] == "anthropic"
    assert [a["http.request.resend_count"] for a in attempts(span)] == [0, 1]
    mapped = map_span(attributes, span.name)
    assert mapped is not None and mapped.kind == "llm"
    # The SDK's cache-write and stop-reason keys become ours; the usage it reports stays on the leaf.
    assert mapped.set["gen_ai.usage.cache_creation.input_tokens"] == attributes["gen_ai.usage.cache_write.input_tokens"]
    assert mapped.set["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert attributes["gen_ai.usage.input_tokens"] > 0


def test_sdk_span_is_priced_and_named_in_the_pipeline(server: FakeModelServer, tmp_path: Any) -> None:
    """Through configure(): the SDK's own span is the call's one LLM leaf, named, with its usage and its cost."""
    diag = otel_agentdiag.configure(service_name="anthropic-sdk", store=tmp_path / "t.db", set_global=False)
    try:
        claude = client(server, open_telemetry={"tracer_provider": diag.tracer_provider})
        claude.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=MESSAGES)
    finally:
        diag.shutdown()
    with SpanStore(tmp_path / "t.db", create=False) as store:
        (trace,) = store.list_traces()
        (span,) = store.get_trace(trace.trace_id)
    assert (span.kind, span.name) == ("llm", "chat claude-haiku-4-5")
    assert span.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert span.attributes["gen_ai.usage.cache_creation.input_tokens"] > 0
    assert span.attributes["agentdiag.cost.usd"] > 0


def test_sdk_span_owns_the_stream_helper_too(server: FakeModelServer, spans: Spans) -> None:
    claude = client(server, open_telemetry={"tracer_provider": spans.provider})
    with claude.messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as stream:
        stream.get_final_message()
    gc.collect()
    (span,) = spans.finished()
    assert map_span(span.attributes or {}, span.name) is not None
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name != "otel_agentdiag.instrumentation.anthropic"
    assert len(spans.finished()) == 1


def test_uninstrument_reverses(server: FakeModelServer, spans: Spans) -> None:
    AnthropicInstrumentor().uninstrument()
    try:
        client(server).messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
        with client(server).messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as stream:
            assert type(stream).__name__ == "MessageStream"
            stream.get_final_message()
        assert spans.finished() == []
    finally:
        AnthropicInstrumentor().instrument(tracer_provider=spans.provider)
