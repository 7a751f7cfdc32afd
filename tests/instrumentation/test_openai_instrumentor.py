"""OpenAIInstrumentor against the real ``openai`` SDK and the fake model server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from typing import Any

import openai
import pydantic
import pytest
from conftest import Spans
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from llm_spans import attempts, raw_ids, usage_keys
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.trace import SpanKind, StatusCode

import otel_agentdiag
from otel_agentdiag.instrumentation import llm_call_owned_by
from otel_agentdiag.instrumentation.manual import use_tracer_provider
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

pytestmark = [pytest.mark.usefixtures("openai_instrumented"), pytest.mark.anyio]

MODEL = "gpt-4o-mini"
MESSAGES: list[Any] = [{"role": "user", "content": fake.SENTINEL_PROMPT}]


def client(server: FakeModelServer, **kwargs: Any) -> openai.OpenAI:
    return openai.OpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, **kwargs)


def aclient(server: FakeModelServer, **kwargs: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, **kwargs)


def assert_answer_usage(attributes: Any, usage: fake.Usage) -> None:
    assert attributes["gen_ai.usage.input_tokens"] == usage.prompt_tokens
    assert attributes["gen_ai.usage.output_tokens"] == usage.completion_tokens


# --- chat completions ------------------------------------------------------------------------------------
def test_chat_create_is_one_client_span_with_request_attributes_at_start(server: FakeModelServer, spans: Spans) -> None:
    response = client(server).chat.completions.create(
        model=MODEL, messages=MESSAGES, temperature=0.25, top_p=0.5, max_completion_tokens=99, seed=7
    )

    assert response.choices[0].message.content == fake.ANSWER_TEXT  # the SDK's answer, untouched
    span = spans.one()
    assert span.name == f"chat {MODEL}"
    assert span.kind is SpanKind.CLIENT
    assert span.status.status_code is StatusCode.UNSET
    started = spans.started_with(span)
    assert started["agentdiag.kind"] == "llm"
    assert started["gen_ai.operation.name"] == "chat"
    assert started["gen_ai.provider.name"] == "openai"
    assert started["gen_ai.request.model"] == MODEL
    assert started["gen_ai.request.temperature"] == 0.25
    assert started["gen_ai.request.top_p"] == 0.5
    assert started["gen_ai.request.max_tokens"] == 99
    assert started["gen_ai.request.seed"] == 7
    assert started["server.address"] == "127.0.0.1"
    assert started["server.port"] == server.port
    assert "gen_ai.request.stream" not in started
    attributes = span.attributes or {}
    assert attributes["gen_ai.response.model"] == MODEL + fake.MODEL_SNAPSHOT_SUFFIX
    assert raw_ids(span)["gen_ai.response.id"] == response.id  # beside the span, for the redactors
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert_answer_usage(attributes, fake.ANSWER_USAGE)
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 0  # reported by the server as 0
    assert attempts(span) == [{"http.request.resend_count": 0, "http.response.status_code": 200}]


def test_tool_call_finish_reason(server: FakeModelServer, spans: Spans) -> None:
    tools: Any = [{"type": "function", "function": {"name": fake.TOOL_NAME, "parameters": {"type": "object"}}}]
    client(server).chat.completions.create(model=MODEL, messages=MESSAGES, tools=tools)
    attributes = spans.one().attributes or {}
    assert attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert_answer_usage(attributes, fake.TOOL_CALL_USAGE)


def test_usage_the_server_did_not_report_is_absent(server: FakeModelServer, spans: Spans) -> None:
    server.usage_mode = "omit"
    client(server).chat.completions.create(model=MODEL, messages=MESSAGES)
    assert usage_keys(spans.one()) == set()


def test_usage_without_details_has_no_made_up_detail_counts(server: FakeModelServer, spans: Spans) -> None:
    server.usage_mode = "no_details"
    client(server).chat.completions.create(model=MODEL, messages=MESSAGES)
    assert usage_keys(spans.one()) == {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"}


class Weather(pydantic.BaseModel):
    city: str


def test_chat_parse(server: FakeModelServer, spans: Spans) -> None:
    completion = client(server).chat.completions.parse(model=MODEL, messages=MESSAGES, response_format=Weather)
    assert completion.choices[0].message.parsed == Weather(city=f"Paris {fake.SENTINEL_OUTPUT}")
    span = spans.one()
    assert span.name == f"chat {MODEL}"
    assert spans.started_with(span)["gen_ai.output.type"] == "json"
    assert_answer_usage(span.attributes, fake.ANSWER_USAGE)


async def test_async_chat_create(server: FakeModelServer, spans: Spans) -> None:
    response = await aclient(server).chat.completions.create(model=MODEL, messages=MESSAGES)
    assert response.choices[0].message.content == fake.ANSWER_TEXT
    span = spans.one()
    assert span.name == f"chat {MODEL}"
    assert_answer_usage(span.attributes, fake.ANSWER_USAGE)
    assert len(attempts(span)) == 1


# --- streams ---------------------------------------------------------------------------------------------
def stream_kwargs(include_usage: bool = True) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"model": MODEL, "messages": MESSAGES, "stream": True}
    if include_usage:
        kwargs["stream_options"] = {"include_usage": True}
    return kwargs


def test_exhausted_stream_ends_once_with_final_chunk_usage(server: FakeModelServer, spans: Spans) -> None:
    stream = client(server).chat.completions.create(**stream_kwargs())
    assert isinstance(stream, openai.Stream)  # the proxy is transparent
    assert spans.finished() == []  # the call is not over while the answer streams
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == fake.STREAM_TEXT
    stream.close()  # a second end must not produce a second span
    span = spans.one()
    attributes = span.attributes or {}
    assert spans.started_with(span)["gen_ai.request.stream"] is True
    assert attributes["agentdiag.stream.end"] == "exhausted"
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert_answer_usage(attributes, fake.STREAM_USAGE)
    assert 0 < attributes["gen_ai.response.time_to_first_chunk"] <= (span.end_time - span.start_time) / 1e9
    assert span.status.status_code is StatusCode.UNSET


def test_stream_without_usage_chunk_has_no_usage(server: FakeModelServer, spans: Spans) -> None:
    for _ in client(server).chat.completions.create(**stream_kwargs(include_usage=False)):
        pass
    span = spans.one()
    assert usage_keys(span) == set()
    assert (span.attributes or {})["agentdiag.stream.end"] == "exhausted"


def test_closed_stream_ends_as_closed(server: FakeModelServer, spans: Spans) -> None:
    stream = client(server).chat.completions.create(**stream_kwargs())
    next(stream)
    stream.close()
    span = spans.one()
    assert (span.attributes or {})["agentdiag.stream.end"] == "closed"
    assert span.status.status_code is StatusCode.UNSET
    assert "error.type" not in (span.attributes or {})


def test_stream_left_by_its_with_block_ends_as_closed(server: FakeModelServer, spans: Spans) -> None:
    with client(server).chat.completions.create(**stream_kwargs()) as stream:
        next(stream)
    assert (spans.one().attributes or {})["agentdiag.stream.end"] == "closed"


# Abandoning a stream also abandons its HTTP connection: the socket's own ResourceWarning when the collector
# frees it is the point of the test, not a failure of it.
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_abandoned_stream_ends_as_error_when_collected(server: FakeModelServer, spans: Spans) -> None:
    stream = client(server).chat.completions.create(**stream_kwargs())
    next(stream)
    assert spans.finished() == []
    del stream
    gc.collect()
    gc.collect()  # and the connection it held, while this test's warning filter is in force
    span = spans.one()
    attributes = span.attributes or {}
    assert attributes["agentdiag.stream.end"] == "abandoned"
    assert attributes["error.type"] == "agentdiag.stream_abandoned"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description is None


def test_stream_helper_ends_its_span(server: FakeModelServer, spans: Spans) -> None:
    with client(server).chat.completions.stream(model=MODEL, messages=MESSAGES) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    assert final.choices[0].message.content == fake.STREAM_TEXT
    del stream
    gc.collect()  # the helper closed the HTTP response behind the proxy: the span ends on release
    span = spans.one()
    assert (span.attributes or {})["agentdiag.stream.end"] == "exhausted"
    assert span.status.status_code is StatusCode.UNSET


def test_stream_that_breaks_mid_way_ends_as_error(server: FakeModelServer, spans: Spans) -> None:
    server.break_next_stream()
    stream = client(server).chat.completions.create(**stream_kwargs())
    with pytest.raises(ValueError) as raised:  # the SDK's JSON decoding error, unchanged
        for _ in stream:
            pass
    stream.close()
    span = spans.one()
    attributes = span.attributes or {}
    assert attributes["agentdiag.stream.end"] == "error"
    assert isinstance(raised.value, json.JSONDecodeError)
    assert attributes["error.type"] == "json.JSONDecodeError"
    assert span.status.status_code is StatusCode.ERROR
    assert [e.name for e in span.events].count("exception") == 1


def test_time_to_first_chunk_covers_a_held_first_chunk(server: FakeModelServer, spans: Spans) -> None:
    release = server.hold_first_chunk()
    stream = client(server).chat.completions.create(**stream_kwargs())
    returned = time.monotonic()
    # Not synchronisation: a delay the server is made to add, so the measurement has a lower bound.
    time.sleep(0.05)
    released = time.monotonic()
    release.set()
    for _ in stream:
        pass
    ttfc = (spans.one().attributes or {})["gen_ai.response.time_to_first_chunk"]
    assert ttfc >= released - returned


async def test_async_stream_exhausted(server: FakeModelServer, spans: Spans) -> None:
    stream = await aclient(server).chat.completions.create(**stream_kwargs())
    assert isinstance(stream, openai.AsyncStream)
    pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert "".join(pieces) == fake.STREAM_TEXT
    attributes = spans.one().attributes or {}
    assert attributes["agentdiag.stream.end"] == "exhausted"
    assert_answer_usage(attributes, fake.STREAM_USAGE)


async def test_async_stream_closed(server: FakeModelServer, spans: Spans) -> None:
    async with await aclient(server).chat.completions.create(**stream_kwargs()) as stream:
        await stream.__anext__()
    assert (spans.one().attributes or {})["agentdiag.stream.end"] == "closed"


async def test_cancelled_stream_reader_ends_the_span_as_cancelled(server: FakeModelServer, spans: Spans) -> None:
    release = server.hold_after_first_chunk()
    stream = await aclient(server).chat.completions.create(**stream_kwargs())
    await stream.__anext__()
    waiting = asyncio.Event()

    async def read_rest() -> None:
        waiting.set()
        async for _ in stream:
            pass

    task = asyncio.create_task(read_rest())
    await waiting.wait()  # the task is now blocked inside the stream, on the held chunk
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    await stream.close()
    span = spans.one()
    attributes = span.attributes or {}
    assert attributes["agentdiag.stream.end"] == "cancelled"
    assert attributes["error.type"] == "asyncio.CancelledError"
    assert span.status.status_code is StatusCode.ERROR


# --- errors and retries ----------------------------------------------------------------------------------
def test_api_error_is_reraised_unchanged_and_recorded_without_its_text(server: FakeModelServer, spans: Spans) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client(server).chat.completions.create(model=fake.ERROR_MODEL, messages=MESSAGES)
    assert fake.SENTINEL_ERROR in str(raised.value)  # the agent still sees the full error
    span = spans.one()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description is None
    assert (span.attributes or {})["error.type"] == "openai.BadRequestError"
    exception = [dict(e.attributes or {}) for e in span.events if e.name == "exception"]
    assert exception == [{"exception.type": "openai.BadRequestError"}]
    assert attempts(span) == [{"http.request.resend_count": 0, "http.response.status_code": 400, "error.type": "400"}]


def test_retried_call_is_one_span_with_one_usage_and_an_event_per_attempt(
    server: FakeModelServer, spans: Spans
) -> None:
    server.fail_next(429)
    client(server, max_retries=2).chat.completions.create(model=MODEL, messages=MESSAGES)
    assert len(server.requests_to("/v1/chat/completions")) == 2
    span = spans.one()
    assert span.status.status_code is StatusCode.UNSET
    assert_answer_usage(span.attributes, fake.ANSWER_USAGE)
    assert attempts(span) == [
        {"http.request.resend_count": 0, "http.response.status_code": 429, "error.type": "429"},
        {"http.request.resend_count": 1, "http.response.status_code": 200},
    ]


def test_retries_exhausted_is_a_rate_limit_error(server: FakeModelServer, spans: Spans) -> None:
    server.fail_next(429, times=5)
    with pytest.raises(openai.RateLimitError):
        client(server, max_retries=1).chat.completions.create(model=MODEL, messages=MESSAGES)
    span = spans.one()
    assert (span.attributes or {})["error.type"] == "openai.RateLimitError"
    assert [a["http.request.resend_count"] for a in attempts(span)] == [0, 1]
    assert usage_keys(span) == set()


def test_connection_error_attempt_names_the_transport_error(spans: Spans) -> None:
    with FakeModelServer() as gone:
        base_url = gone.base_url
    dead = openai.OpenAI(api_key="sk-test", base_url=base_url, max_retries=0)
    with pytest.raises(openai.APIConnectionError):
        dead.chat.completions.create(model=MODEL, messages=MESSAGES)
    span = spans.one()
    assert (span.attributes or {})["error.type"] == "openai.APIConnectionError"
    (attempt,) = attempts(span)
    assert attempt["http.request.resend_count"] == 0
    assert "http.response.status_code" not in attempt
    assert attempt["error.type"].endswith("ConnectError")


# --- Responses API and embeddings ------------------------------------------------------------------------
def test_responses_create(server: FakeModelServer, spans: Spans) -> None:
    response = client(server).responses.create(model=MODEL, input=fake.SENTINEL_PROMPT, max_output_tokens=50)
    assert response.output_text == fake.ANSWER_TEXT
    span = spans.one()
    assert span.name == f"chat {MODEL}"
    assert spans.started_with(span)["gen_ai.request.max_tokens"] == 50
    attributes = span.attributes or {}
    assert raw_ids(span)["gen_ai.response.id"] == response.id
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert_answer_usage(attributes, fake.RESPONSES_USAGE)


def test_responses_stream_helper(server: FakeModelServer, spans: Spans) -> None:
    with client(server).responses.stream(model=MODEL, input=fake.SENTINEL_PROMPT) as stream:
        final = stream.get_final_response()
    assert final.output_text == fake.STREAM_TEXT
    del stream
    gc.collect()
    span = spans.one()
    attributes = span.attributes or {}
    assert spans.started_with(span)["gen_ai.request.stream"] is True
    assert attributes["agentdiag.stream.end"] == "exhausted"
    assert_answer_usage(attributes, fake.RESPONSES_STREAM_USAGE)


async def test_async_responses_stream(server: FakeModelServer, spans: Spans) -> None:
    stream = await aclient(server).responses.create(model=MODEL, input=fake.SENTINEL_PROMPT, stream=True)
    kinds = [event.type async for event in stream]
    assert kinds[-1] == "response.completed"
    attributes = spans.one().attributes or {}
    assert attributes["agentdiag.stream.end"] == "exhausted"
    assert_answer_usage(attributes, fake.RESPONSES_STREAM_USAGE)


@pytest.mark.parametrize("is_async", [False, True])
def test_embeddings(server: FakeModelServer, spans: Spans, is_async: bool) -> None:
    kwargs: dict[str, Any] = {"model": "text-embedding-3-small", "input": fake.SENTINEL_EMBEDDING_INPUT}
    if is_async:
        asyncio.run(aclient(server).embeddings.create(**kwargs, encoding_format="float"))
    else:
        client(server).embeddings.create(**kwargs, encoding_format="float")
    span = spans.one()
    assert span.name == "embeddings text-embedding-3-small"
    assert spans.started_with(span)["gen_ai.operation.name"] == "embeddings"
    assert spans.started_with(span)["gen_ai.request.encoding_formats"] == ("float",)
    assert usage_keys(span) == {"gen_ai.usage.input_tokens"}  # embeddings report no output tokens
    assert (span.attributes or {})["gen_ai.usage.input_tokens"] == fake.EMBEDDING_USAGE.prompt_tokens


# --- ownership, suppression, reversibility ---------------------------------------------------------------
def test_manual_llm_call_owns_the_call_and_is_enriched(server: FakeModelServer, spans: Spans) -> None:
    use_tracer_provider(spans.provider)
    try:
        with otel_agentdiag.llm_call(provider="openai", model=MODEL):
            client(server).chat.completions.create(model=MODEL, messages=MESSAGES)
    finally:
        use_tracer_provider(None)
    span = spans.one()  # one LLM span, not two
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "otel_agentdiag"
    assert_answer_usage(span.attributes, fake.ANSWER_USAGE)
    assert len(attempts(span)) == 1


def test_suppressed_instrumentation_makes_no_span(server: FakeModelServer, spans: Spans) -> None:
    with suppress_instrumentation():
        client(server).chat.completions.create(model=MODEL, messages=MESSAGES)
    assert spans.finished() == []


def test_instrument_is_idempotent_and_uninstrument_reverses_it(server: FakeModelServer, spans: Spans) -> None:
    OpenAIInstrumentor().instrument(tracer_provider=spans.provider)  # a second time: no second wrapper
    client(server).chat.completions.create(model=MODEL, messages=MESSAGES)
    assert len(spans.finished()) == 1
    OpenAIInstrumentor().uninstrument()
    try:
        client(server).chat.completions.create(model=MODEL, messages=MESSAGES)
        stream = client(server).chat.completions.create(**stream_kwargs())
        assert type(stream) is openai.Stream  # no proxy once uninstrumented
        stream.close()
        assert len(spans.finished()) == 1
    finally:
        OpenAIInstrumentor().instrument(tracer_provider=spans.provider)  # for the fixture's uninstrument


def test_a_failing_response_reader_does_not_reach_the_agent(
    server: FakeModelServer, spans: Spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_agentdiag.instrumentation.openai import patch

    def broken(response: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    # Our own reader, looked up when the wrapper was built: re-instrument with it broken.
    OpenAIInstrumentor().uninstrument()
    monkeypatch.setattr(patch, "chat_response", broken)
    OpenAIInstrumentor().instrument(tracer_provider=spans.provider)
    response = client(server).chat.completions.create(model=MODEL, messages=MESSAGES)
    assert response.choices[0].message.content == fake.ANSWER_TEXT
    span = spans.one()
    assert span.status.status_code is StatusCode.UNSET
    assert usage_keys(span) == set()


@pytest.mark.parametrize("enrich", [True, False])
def test_an_owner_span_is_enriched_or_left_alone(server: FakeModelServer, spans: Spans, enrich: bool) -> None:
    tracer = spans.provider.get_tracer("framework")
    with tracer.start_as_current_span("framework generation") as owner:
        with llm_call_owned_by(owner, enrich=enrich):
            client(server).chat.completions.create(model=MODEL, messages=MESSAGES)
    span = spans.one()
    assert span.name == "framework generation"
    if enrich:
        assert_answer_usage(span.attributes, fake.ANSWER_USAGE)
        assert (span.attributes or {})["gen_ai.request.model"] == MODEL
        assert len(attempts(span)) == 1
    else:
        assert usage_keys(span) == set()
        assert attempts(span) == []
