"""Content capture in the OpenAI and Anthropic client instrumentations: what each call hands to the content seam.

Real ``openai`` / ``anthropic`` clients against the fake model server on 127.0.0.1; the ``content_sink`` fixture
stands at the seam (``_internal.content.capture``) and snapshots what it is given, as the recorder does.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from conftest import Spans
from content_sink import RecordingSink, content_sink  # noqa: F401
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import otel_agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag.instrumentation import llm_call_owned_by
from otel_agentdiag.instrumentation._stream import TextBuffer
from otel_agentdiag.instrumentation.anthropic.patch import MessagesAccumulator
from otel_agentdiag.instrumentation.manual import use_tracer_provider
from otel_agentdiag.instrumentation.openai.patch import ChatAccumulator

pytestmark = [pytest.mark.anyio]

INPUT, OUTPUT = sc.CONTENT_INPUT_MESSAGES, sc.CONTENT_OUTPUT_MESSAGES
SYSTEM, TOOL_DEFS = sc.CONTENT_SYSTEM_INSTRUCTIONS, sc.CONTENT_TOOL_DEFINITIONS

GPT, CLAUDE = "gpt-4o-mini", "claude-haiku-4-5"
CHAT_MESSAGES: list[Any] = [
    {"role": "system", "content": fake.SENTINEL_SYSTEM},
    {"role": "user", "content": fake.SENTINEL_PROMPT},
]
CHAT_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": fake.TOOL_NAME,
            "description": fake.SENTINEL_TOOL_DESCRIPTION,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
RESPONSES_TOOLS: list[Any] = [
    {
        "type": "function",
        "name": fake.TOOL_NAME,
        "description": fake.SENTINEL_TOOL_DESCRIPTION,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": False,
    }
]
CLAUDE_MESSAGES: list[Any] = [{"role": "user", "content": fake.SENTINEL_PROMPT}]
CLAUDE_TOOLS: list[Any] = [
    {"name": fake.TOOL_NAME, "description": fake.SENTINEL_TOOL_DESCRIPTION, "input_schema": {"type": "object"}}
]

CONTENT_SENTINELS = (
    fake.SENTINEL_PROMPT,
    fake.SENTINEL_SYSTEM,
    fake.SENTINEL_TOOL_DESCRIPTION,
    fake.SENTINEL_TOOL_ARGS,
    fake.SENTINEL_OUTPUT,
    fake.SENTINEL_STREAM_OUTPUT,
    fake.SENTINEL_INSTRUCTIONS,
    fake.SENTINEL_EMBEDDING_INPUT,
)
"""What the prompts, instructions, tool definitions and answers carry: none may reach a span."""


# --- helpers -------------------------------------------------------------------------------------------
def oai(server: FakeModelServer) -> openai.OpenAI:
    return openai.OpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, max_retries=0)


def aoai(server: FakeModelServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, max_retries=0)


def claude(server: FakeModelServer, **kwargs: Any) -> anthropic.Anthropic:
    kwargs.setdefault("open_telemetry", False)
    return anthropic.Anthropic(
        api_key=fake.SENTINEL_API_KEY, base_url=server.anthropic_base_url, max_retries=0, **kwargs
    )


def aclaude(server: FakeModelServer) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key=fake.SENTINEL_API_KEY, base_url=server.anthropic_base_url, max_retries=0, open_telemetry=False
    )


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def without_none(value: Any) -> Any:
    """``value`` with every ``None``-valued dict entry dropped (SDK models dump their unset optional fields)."""
    if isinstance(value, dict):
        return {k: without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [without_none(v) for v in value]
    return value


def same_answer(value: Any, *, text: str | None = None) -> Any:
    """An answer with its made-up ids (counters in the fake server) and, given ``text``, that text replaced by
    ``<text>``, for comparing the answers of two calls."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in ("id", "call_id") and isinstance(item, str):
                out[key] = "<id>"
            elif text is not None and item == text:
                out[key] = "<text>"
            else:
                out[key] = same_answer(item, text=text)
        return out
    if isinstance(value, list):
        return [same_answer(v, text=text) for v in value]
    return value


def llm_span(spans: Spans) -> ReadableSpan:
    (span,) = spans.llm()
    return span


def assert_no_content_on(span: ReadableSpan) -> None:
    texts = [span.name, str(span.status.description)]
    texts += [repr(v) for v in (span.attributes or {}).values()]
    for event in span.events:
        texts.append(event.name)
        texts += [repr(v) for v in (event.attributes or {}).values()]
    for text in texts:
        for sentinel in CONTENT_SENTINELS:
            assert sentinel.lower() not in text.lower(), (sentinel, text)


def chat_text_answer(text: str, finish_reason: str = "stop") -> list[dict[str, Any]]:
    return [{"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": text}}]


def _chat(server: FakeModelServer, is_async: bool, stream: bool, **kwargs: Any) -> None:
    """One chat completion, read to its end."""
    kwargs = {"model": GPT, "messages": CHAT_MESSAGES, **kwargs}
    if is_async:

        async def call() -> None:
            if stream:
                async for _ in await aoai(server).chat.completions.create(stream=True, **kwargs):
                    pass
            else:
                await aoai(server).chat.completions.create(**kwargs)

        run(call())
    elif stream:
        for _ in oai(server).chat.completions.create(stream=True, **kwargs):
            pass
    else:
        oai(server).chat.completions.create(**kwargs)


@pytest.fixture
def sink(content_sink: RecordingSink) -> RecordingSink:  # noqa: F811 - the fixture imported above
    """Capture on, into a :class:`RecordingSink` (``content_sink``, under a shorter name)."""
    return content_sink


@pytest.fixture
def capture_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every call of the content seam, whether capture is on or not."""
    calls: list[tuple[str, Any]] = []
    real = _content.capture

    def spy(span: Any, role: str, value: Any) -> None:
        calls.append((role, value))
        real(span, role, value)

    monkeypatch.setattr(_content, "capture", spy)
    return calls


# --- OpenAI chat completions ---------------------------------------------------------------------------
@pytest.mark.usefixtures("openai_instrumented")
class TestOpenAIChat:
    @pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
    @pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
    def test_text_answer(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink, is_async: bool, stream: bool
    ) -> None:
        _chat(server, is_async, stream)
        captured = sink.for_span(llm_span(spans))
        assert set(captured) == {INPUT, OUTPUT}
        assert captured[INPUT] == CHAT_MESSAGES
        text = fake.STREAM_TEXT if stream else fake.ANSWER_TEXT
        assert without_none(captured[OUTPUT]) == chat_text_answer(text)

    @pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
    @pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
    def test_tool_call_answer(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink, is_async: bool, stream: bool
    ) -> None:
        _chat(server, is_async, stream, tools=CHAT_TOOLS)
        captured = sink.for_span(llm_span(spans))
        assert captured[INPUT] == CHAT_MESSAGES
        assert captured[TOOL_DEFS] == CHAT_TOOLS
        (choice,) = captured[OUTPUT]
        assert choice["finish_reason"] == "tool_calls"
        (call,) = choice["message"]["tool_calls"]
        assert call["type"] == "function"
        assert fake.SENTINEL_TOOL_CALL_ID in call["id"]
        assert call["function"] == {"name": fake.TOOL_NAME, "arguments": fake.TOOL_ARGUMENTS}

    def test_streamed_answer_equals_the_non_streamed_one(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        for tools in (CHAT_TOOLS, None):
            extra = {"tools": tools} if tools else {}
            _chat(server, False, False, **extra)
            _chat(server, False, True, **extra)
        plain_call, streamed_call, plain_text, streamed_text = (
            without_none(sink.for_span(span)[OUTPUT]) for span in spans.llm()
        )
        assert same_answer(streamed_call) == same_answer(plain_call)
        assert same_answer(streamed_text, text=fake.STREAM_TEXT) == same_answer(plain_text, text=fake.ANSWER_TEXT)

    @pytest.mark.parametrize("tools", [None, CHAT_TOOLS], ids=["text", "tool_call"])
    def test_streamed_answer_equals_the_sdks_own_accumulation(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink, tools: Any
    ) -> None:
        extra = {"tools": tools} if tools else {}
        with oai(server).chat.completions.stream(model=GPT, messages=CHAT_MESSAGES, **extra) as stream:
            final = stream.get_final_completion()
        del stream
        gc.collect()
        sdk = [{"index": c.index, "finish_reason": c.finish_reason, "message": c.message} for c in final.choices]
        captured = sink.for_span(llm_span(spans))
        from otel_agentdiag.content import snapshot

        expected = without_none(snapshot(sdk))
        for call in expected[0]["message"].get("tool_calls", ()):
            del call["index"]  # the SDK's accumulation keeps the chunks' index; a complete answer has none
        assert without_none(captured[OUTPUT]) == expected

    def test_legacy_functions_are_the_tool_definitions(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        functions: list[Any] = [{"name": fake.TOOL_NAME, "description": fake.SENTINEL_TOOL_DESCRIPTION}]
        oai(server).chat.completions.create(model=GPT, messages=CHAT_MESSAGES, functions=functions)
        assert sink.for_span(llm_span(spans))[TOOL_DEFS] == functions

    def test_parse(self, server: FakeModelServer, spans: Spans, sink: RecordingSink) -> None:
        import pydantic

        class Weather(pydantic.BaseModel):
            city: str

        oai(server).chat.completions.parse(model=GPT, messages=CHAT_MESSAGES, response_format=Weather)
        captured = sink.for_span(llm_span(spans))
        assert captured[INPUT] == CHAT_MESSAGES
        (choice,) = captured[OUTPUT]
        assert choice["message"]["content"] == fake.ANSWER_JSON
        assert choice["message"]["parsed"] == {"city": f"Paris {fake.SENTINEL_OUTPUT}"}

    def test_stream_closed_early_captures_what_arrived(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        stream = oai(server).chat.completions.create(model=GPT, messages=CHAT_MESSAGES, stream=True)
        next(stream)  # role and ""
        next(stream)  # the first piece
        stream.close()
        span = llm_span(spans)
        assert (span.attributes or {})["agentdiag.stream.end"] == "closed"
        captured = sink.for_span(span)
        assert without_none(captured[OUTPUT]) == [
            {"index": 0, "message": {"role": "assistant", "content": fake.STREAM_PIECES[0]}}
        ]

    def test_stream_that_fails_captures_what_arrived(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        server.break_next_stream()
        stream = oai(server).chat.completions.create(model=GPT, messages=CHAT_MESSAGES, stream=True)
        with pytest.raises(ValueError):
            for _ in stream:
                pass
        stream.close()
        span = llm_span(spans)
        assert span.status.status_code is StatusCode.ERROR
        captured = sink.for_span(span)
        assert captured[INPUT] == CHAT_MESSAGES
        assert without_none(captured[OUTPUT]) == [{"index": 0, "message": {"role": "assistant", "content": ""}}]

    # Abandoning a stream also abandons its HTTP connection: the socket's ResourceWarning is expected.
    @pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
    def test_abandoned_stream_captures_what_arrived(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        stream = oai(server).chat.completions.create(model=GPT, messages=CHAT_MESSAGES, stream=True)
        next(stream)
        next(stream)
        del stream
        gc.collect()
        gc.collect()
        captured = sink.for_span(llm_span(spans))
        assert without_none(captured[OUTPUT])[0]["message"]["content"] == fake.STREAM_PIECES[0]

    def test_failed_call_captures_the_request_only(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        with pytest.raises(openai.BadRequestError):
            oai(server).chat.completions.create(model=fake.ERROR_MODEL, messages=CHAT_MESSAGES, tools=CHAT_TOOLS)
        captured = sink.for_span(llm_span(spans))
        assert captured == {INPUT: CHAT_MESSAGES, TOOL_DEFS: CHAT_TOOLS}

    def test_raw_response_captures_the_request_and_the_answer_the_sdk_read(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        raw = oai(server).chat.completions.with_raw_response.create(model=GPT, messages=CHAT_MESSAGES)
        assert raw.parse().choices[0].message.content == fake.ANSWER_TEXT  # the caller's response, untouched
        captured = sink.for_span(llm_span(spans))
        assert set(captured) == {INPUT, OUTPUT}
        assert captured[INPUT] == CHAT_MESSAGES
        assert without_none(captured[OUTPUT]) == chat_text_answer(fake.ANSWER_TEXT)

    def test_a_streamed_raw_response_is_never_read(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        raw = oai(server).chat.completions.with_raw_response.create(model=GPT, messages=CHAT_MESSAGES, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices) == fake.STREAM_TEXT
        assert sink.for_span(llm_span(spans)) == {INPUT: CHAT_MESSAGES}

    def test_later_changes_to_the_messages_are_not_captured(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        messages: list[Any] = [{"role": "user", "content": fake.SENTINEL_PROMPT}]
        oai(server).chat.completions.create(model=GPT, messages=messages)
        messages[0]["content"] = "changed"
        messages.append({"role": "assistant", "content": "appended"})
        assert sink.for_span(llm_span(spans))[INPUT] == [{"role": "user", "content": fake.SENTINEL_PROMPT}]


# --- OpenAI Responses API and embeddings ---------------------------------------------------------------
RESPONSES_INPUT: list[Any] = [{"role": "user", "content": fake.SENTINEL_PROMPT}]


@pytest.mark.usefixtures("openai_instrumented")
class TestOpenAIResponses:
    @pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
    @pytest.mark.parametrize("tools", [None, RESPONSES_TOOLS], ids=["text", "function_call"])
    def test_plain(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink, is_async: bool, tools: Any
    ) -> None:
        kwargs: dict[str, Any] = {"model": GPT, "input": RESPONSES_INPUT, "instructions": fake.SENTINEL_INSTRUCTIONS}
        if tools:
            kwargs["tools"] = tools
        if is_async:
            response = run(aoai(server).responses.create(**kwargs))
        else:
            response = oai(server).responses.create(**kwargs)
        captured = sink.for_span(llm_span(spans))
        expected = {INPUT: RESPONSES_INPUT, SYSTEM: fake.SENTINEL_INSTRUCTIONS, OUTPUT: captured[OUTPUT]}
        if tools:
            expected[TOOL_DEFS] = RESPONSES_TOOLS
        assert captured == expected
        assert captured[OUTPUT] == [item.model_dump(mode="python") for item in response.output]
        kinds = [item["type"] for item in captured[OUTPUT]]
        assert kinds == (["function_call"] if tools else ["message"])

    @pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
    @pytest.mark.parametrize("tools", [None, RESPONSES_TOOLS], ids=["text", "function_call"])
    def test_stream_captures_the_terminal_responses_output(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink, is_async: bool, tools: Any
    ) -> None:
        kwargs: dict[str, Any] = {"model": GPT, "input": fake.SENTINEL_PROMPT, "stream": True}
        if tools:
            kwargs["tools"] = tools

        async def read_async() -> list[Any]:
            return [event async for event in await aoai(server).responses.create(**kwargs)]

        events = run(read_async()) if is_async else list(oai(server).responses.create(**kwargs))
        assert events[-1].type == "response.completed"
        captured = sink.for_span(llm_span(spans))
        assert captured[INPUT] == fake.SENTINEL_PROMPT  # a string input stays a string
        assert captured[OUTPUT] == [item.model_dump(mode="python") for item in events[-1].response.output]

    def test_stream_helper(self, server: FakeModelServer, spans: Spans, sink: RecordingSink) -> None:
        with oai(server).responses.stream(
            model=GPT, input=RESPONSES_INPUT, instructions=fake.SENTINEL_INSTRUCTIONS
        ) as stream:
            final = stream.get_final_response()
        del stream
        gc.collect()
        captured = sink.for_span(llm_span(spans))
        assert captured[INPUT] == RESPONSES_INPUT
        assert captured[SYSTEM] == fake.SENTINEL_INSTRUCTIONS
        assert [item["content"][0]["text"] for item in captured[OUTPUT]] == [fake.STREAM_TEXT]
        assert len(captured[OUTPUT]) == len(final.output)

    def test_streamed_output_equals_the_non_streamed_one(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        client = oai(server)
        client.responses.create(model=GPT, input=fake.SENTINEL_PROMPT, tools=RESPONSES_TOOLS)
        for _ in client.responses.create(model=GPT, input=fake.SENTINEL_PROMPT, tools=RESPONSES_TOOLS, stream=True):
            pass
        plain, streamed = (sink.for_span(span)[OUTPUT] for span in spans.llm())
        assert same_answer(streamed) == same_answer(plain)

    def test_stream_ended_before_its_terminal_event_captures_the_items_done(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        stream = oai(server).responses.create(model=GPT, input=fake.SENTINEL_PROMPT, tools=RESPONSES_TOOLS, stream=True)
        for event in stream:
            if event.type == "response.output_item.done":
                done = event.item
                break
        stream.close()
        captured = sink.for_span(llm_span(spans))
        assert captured[OUTPUT] == [done.model_dump(mode="python")]
        assert captured[OUTPUT][0]["arguments"] == fake.TOOL_ARGUMENTS

    def test_stream_closed_before_any_item_has_no_output(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        stream = oai(server).responses.create(model=GPT, input=fake.SENTINEL_PROMPT, stream=True)
        next(stream)
        stream.close()
        assert sink.for_span(llm_span(spans)) == {INPUT: fake.SENTINEL_PROMPT}

    @pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
    @pytest.mark.parametrize("inputs", [fake.SENTINEL_EMBEDDING_INPUT, [fake.SENTINEL_EMBEDDING_INPUT, "two"]])
    def test_embeddings_capture_the_input_only(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink, is_async: bool, inputs: Any
    ) -> None:
        kwargs: dict[str, Any] = {"model": "text-embedding-3-small", "input": inputs}
        if is_async:
            run(aoai(server).embeddings.create(**kwargs))
        else:
            oai(server).embeddings.create(**kwargs)
        assert sink.for_span(llm_span(spans)) == {INPUT: inputs}


# --- Anthropic -------------------------------------------------------------------------------------------
def claude_text_answer(text: str, stop_reason: str = "end_turn") -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": [{"type": "text", "text": text}], "stop_reason": stop_reason}]


@pytest.mark.usefixtures("anthropic_instrumented")
class TestAnthropic:
    @staticmethod
    def _create(server: FakeModelServer, is_async: bool, stream: bool, **kwargs: Any) -> None:
        kwargs = {"model": CLAUDE, "max_tokens": 64, "messages": CLAUDE_MESSAGES, **kwargs}
        if is_async:

            async def call() -> None:
                if stream:
                    async for _ in await aclaude(server).messages.create(stream=True, **kwargs):
                        pass
                else:
                    await aclaude(server).messages.create(**kwargs)

            run(call())
        elif stream:
            for _ in claude(server).messages.create(stream=True, **kwargs):
                pass
        else:
            claude(server).messages.create(**kwargs)

    @pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
    @pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
    def test_text_answer(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink, is_async: bool, stream: bool
    ) -> None:
        self._create(server, is_async, stream, system=fake.SENTINEL_SYSTEM)
        captured = sink.for_span(llm_span(spans))
        assert set(captured) == {INPUT, SYSTEM, OUTPUT}
        assert captured[INPUT] == CLAUDE_MESSAGES
        assert captured[SYSTEM] == fake.SENTINEL_SYSTEM
        text = fake.STREAM_TEXT if stream else fake.ANSWER_TEXT
        assert without_none(captured[OUTPUT]) == claude_text_answer(text)

    @pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
    @pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
    def test_tool_use_answer(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink, is_async: bool, stream: bool
    ) -> None:
        system: list[Any] = [{"type": "text", "text": fake.SENTINEL_SYSTEM}]
        self._create(server, is_async, stream, tools=CLAUDE_TOOLS, system=system)
        captured = sink.for_span(llm_span(spans))
        assert captured[TOOL_DEFS] == CLAUDE_TOOLS
        assert captured[SYSTEM] == system
        (answer,) = captured[OUTPUT]
        assert answer["stop_reason"] == "tool_use"
        (block,) = answer["content"]
        assert block["type"] == "tool_use"
        assert block["name"] == fake.TOOL_NAME
        assert block["input"] == fake.TOOL_INPUT  # the streamed JSON, parsed as the non-streamed answer has it
        assert fake.SENTINEL_TOOL_CALL_ID in block["id"]

    def test_streamed_answer_equals_the_non_streamed_one(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        for tools in (CLAUDE_TOOLS, None):
            extra = {"tools": tools} if tools else {}
            self._create(server, False, False, **extra)
            self._create(server, False, True, **extra)
        plain_use, streamed_use, plain_text, streamed_text = (
            without_none(sink.for_span(span)[OUTPUT]) for span in spans.llm()
        )
        assert same_answer(streamed_use) == same_answer(plain_use)
        assert same_answer(streamed_text, text=fake.STREAM_TEXT) == same_answer(plain_text, text=fake.ANSWER_TEXT)

    @pytest.mark.parametrize("read", ["final_message", "iterate", "text_stream"])
    def test_stream_helper(self, server: FakeModelServer, spans: Spans, sink: RecordingSink, read: str) -> None:
        with claude(server).messages.stream(
            model=CLAUDE, max_tokens=64, messages=CLAUDE_MESSAGES, system=fake.SENTINEL_SYSTEM, tools=CLAUDE_TOOLS
        ) as stream:
            if read == "final_message":
                stream.get_final_message()
            elif read == "iterate":
                for _ in stream:
                    pass
            else:
                for _ in stream.text_stream:
                    pass
        captured = sink.for_span(llm_span(spans))
        assert captured[INPUT] == CLAUDE_MESSAGES
        assert captured[SYSTEM] == fake.SENTINEL_SYSTEM
        assert captured[TOOL_DEFS] == CLAUDE_TOOLS
        (answer,) = captured[OUTPUT]
        assert answer["stop_reason"] == "tool_use"
        assert [(b["type"], b["input"]) for b in answer["content"]] == [("tool_use", fake.TOOL_INPUT)]

    async def test_async_stream_helper(self, server: FakeModelServer, spans: Spans, sink: RecordingSink) -> None:
        async with aclaude(server).messages.stream(model=CLAUDE, max_tokens=64, messages=CLAUDE_MESSAGES) as stream:
            await stream.get_final_message()
        captured = sink.for_span(llm_span(spans))
        assert captured[INPUT] == CLAUDE_MESSAGES
        assert without_none(captured[OUTPUT]) == claude_text_answer(fake.STREAM_TEXT)

    def test_stream_closed_mid_tool_input_keeps_the_raw_json(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        stream = claude(server).messages.create(
            model=CLAUDE, max_tokens=64, messages=CLAUDE_MESSAGES, tools=CLAUDE_TOOLS, stream=True
        )
        pieces = []
        for event in stream:
            if event.type == "content_block_delta":
                pieces.append(event.delta.partial_json)  # type: ignore[union-attr]
                if len(pieces) == 2:  # "" and the first half
                    break
        stream.close()
        (answer,) = sink.for_span(llm_span(spans))[OUTPUT]
        assert answer["stop_reason"] is None
        (block,) = answer["content"]
        assert block["input"] == "".join(pieces) == fake.TOOL_ARGUMENTS[: len(fake.TOOL_ARGUMENTS) // 2]

    def test_stream_closed_early_captures_the_text_so_far(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        stream = claude(server).messages.create(model=CLAUDE, max_tokens=64, messages=CLAUDE_MESSAGES, stream=True)
        for event in stream:
            if event.type == "content_block_delta":
                break
        stream.close()
        answer = without_none(sink.for_span(llm_span(spans))[OUTPUT])
        assert answer == [{"role": "assistant", "content": [{"type": "text", "text": fake.STREAM_PIECES[0]}]}]

    def test_failed_call_captures_the_request_only(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        with pytest.raises(anthropic.NotFoundError):
            claude(server).messages.create(
                model=fake.ERROR_MODEL, max_tokens=64, messages=CLAUDE_MESSAGES, system=fake.SENTINEL_SYSTEM
            )
        assert sink.for_span(llm_span(spans)) == {INPUT: CLAUDE_MESSAGES, SYSTEM: fake.SENTINEL_SYSTEM}

    def test_nothing_is_captured_on_the_sdks_own_span(
        self, server: FakeModelServer, spans: Spans, sink: RecordingSink
    ) -> None:
        client = claude(server, open_telemetry={"tracer_provider": spans.provider})
        client.messages.create(model=CLAUDE, max_tokens=64, messages=CLAUDE_MESSAGES)
        (span,) = spans.finished()  # the SDK's: the one LLM span (the adapter maps it)
        assert span.name == "anthropic.messages.create"
        assert sink.records == []  # the SDK's own content setting governs its span


# --- rebuilding streamed answers from chunks the fake server does not send -------------------------------
def test_chat_accumulator_rebuilds_several_choices_refusals_and_parallel_tool_calls() -> None:
    def chunk(*choices: dict[str, Any]) -> dict[str, Any]:
        return {"object": "chat.completion.chunk", "choices": list(choices)}

    acc = ChatAccumulator(content=True)
    for item in [
        chunk({"index": 1, "delta": {"role": "assistant", "refusal": "I can"}}, {"index": 0, "delta": {"role": "a"}}),
        chunk({"index": 1, "delta": {"refusal": "not."}, "finish_reason": "stop"}),
        chunk({"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {}}]}}),
        chunk({"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f"}}]}}),
        chunk({"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"name": "g", "arguments": "{"}}]}}),
        chunk({"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": "}"}}]}}),
        chunk({"index": 0, "delta": {"function_call": {"name": "old", "arguments": "[]"}}, "finish_reason": "x"}),
    ]:
        acc.on_chunk(item)
    assert acc.output(None) == [
        {
            "index": 0,
            "finish_reason": "x",
            "message": {
                "role": "a",
                "content": None,
                "refusal": None,
                "tool_calls": [
                    {"id": "a", "type": None, "function": {"name": "f", "arguments": None}},
                    {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
                ],
                "function_call": {"name": "old", "arguments": "[]"},
            },
        },
        {
            "index": 1,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": None, "refusal": "I cannot."},
        },
    ]


def test_chat_accumulator_keeps_nothing_without_content() -> None:
    acc = ChatAccumulator()
    acc.on_chunk({"choices": [{"index": 0, "delta": {"content": fake.SENTINEL_OUTPUT}}]})
    assert acc.choices is None
    assert acc.output(None) is None


def test_messages_accumulator_rebuilds_thinking_signatures_and_citations() -> None:
    acc = MessagesAccumulator(content=True)
    citation = {"type": "char_location", "cited_text": "c"}
    for event in [
        {"type": "message_start", "message": {"role": "assistant", "usage": {}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hm"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "m."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "x"}},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": "", "citations": None}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "citations_delta", "citation": citation}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Yes"}},
        {"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "t", "input": {}}},
        {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": ""}},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {}},
    ]:
        acc.on_chunk(event)
    assert acc.output(None) == [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Hmm.", "signature": "sig"},
                {"type": "redacted_thinking", "data": "x"},
                {"type": "text", "text": "Yes", "citations": [citation]},
                {"type": "tool_use", "id": "t", "input": {}},  # no input arrived: as it started
            ],
            "stop_reason": "max_tokens",
        }
    ]


def test_text_buffer_is_lossless_across_blocks() -> None:
    buffer = TextBuffer()
    pieces = [str(i) for i in range(1000)]
    for piece in pieces:
        buffer.add(piece)
    assert buffer.text() == "".join(pieces)
    assert len(buffer._pieces) < 256 and len(buffer._blocks) == 3


# --- never on the span; off means off -------------------------------------------------------------------
@pytest.mark.usefixtures("openai_instrumented", "anthropic_instrumented")
def test_content_never_reaches_a_span(server: FakeModelServer, spans: Spans, sink: RecordingSink) -> None:
    for stream in (False, True):
        for tools in (CHAT_TOOLS, None):
            _chat(server, False, stream, **({"tools": tools} if tools else {}))
        for _ in oai(server).responses.create(
            model=GPT,
            input=RESPONSES_INPUT,
            instructions=fake.SENTINEL_INSTRUCTIONS,
            tools=RESPONSES_TOOLS,
            stream=True,
        ):
            pass
        TestAnthropic._create(server, False, stream, system=fake.SENTINEL_SYSTEM, tools=CLAUDE_TOOLS)
        TestAnthropic._create(server, False, stream, system=fake.SENTINEL_SYSTEM)
    oai(server).embeddings.create(model="text-embedding-3-small", input=fake.SENTINEL_EMBEDDING_INPUT)
    assert len(spans.llm()) == 11
    assert len(sink.records) > 30  # the content went to the seam ...
    for span in spans.finished():
        assert_no_content_on(span)  # ... and nowhere near a span


@pytest.mark.usefixtures("openai_instrumented", "anthropic_instrumented")
def test_capture_off_makes_no_capture_call(server: FakeModelServer, spans: Spans, capture_calls: list[Any]) -> None:
    assert not _content.enabled()
    for stream in (False, True):
        _chat(server, False, stream, tools=CHAT_TOOLS)
        TestAnthropic._create(server, False, stream, system=fake.SENTINEL_SYSTEM)
    with claude(server).messages.stream(model=CLAUDE, max_tokens=64, messages=CLAUDE_MESSAGES) as helper:
        helper.get_final_message()
    oai(server).responses.create(model=GPT, input=fake.SENTINEL_PROMPT)
    oai(server).embeddings.create(model="text-embedding-3-small", input=fake.SENTINEL_EMBEDDING_INPUT)
    late = RecordingSink()
    _content.install(late)
    try:
        gc.collect()  # any stream still unreleased ends now, with a sink installed
    finally:
        _content.uninstall(late)
    assert capture_calls == []
    assert late.records == []
    assert len(spans.llm()) == 7


@pytest.mark.usefixtures("openai_instrumented")
def test_capture_off_streams_keep_no_content(server: FakeModelServer, spans: Spans) -> None:
    stream = oai(server).chat.completions.create(model=GPT, messages=CHAT_MESSAGES, stream=True)
    state = stream._self_state  # type: ignore[attr-defined]
    for _ in stream:
        pass
    assert state.capture is False
    assert state.accumulator.content is False and state.accumulator.choices is None


@pytest.mark.usefixtures("openai_instrumented", "anthropic_instrumented")
def test_span_attributes_are_the_same_with_capture_on(server: FakeModelServer, spans: Spans) -> None:
    def calls() -> None:
        for stream in (False, True):
            _chat(server, False, stream, tools=CHAT_TOOLS)
            TestAnthropic._create(server, False, stream, system=fake.SENTINEL_SYSTEM)

    def shape(span: ReadableSpan) -> dict[str, Any]:
        varying = ("gen_ai.response.id", "gen_ai.response.time_to_first_chunk")
        return {k: v for k, v in (span.attributes or {}).items() if k not in varying}

    calls()
    off = [(s.name, shape(s), [e.name for e in s.events]) for s in spans.llm()]
    spans.exporter.clear()
    sink = RecordingSink()
    _content.install(sink)
    try:
        calls()
    finally:
        _content.uninstall(sink)
    on = [(s.name, shape(s), [e.name for e in s.events]) for s in spans.llm()]
    assert on == off
    assert sink.records


# --- one owner per call's content -----------------------------------------------------------------------
@pytest.mark.usefixtures("openai_instrumented", "anthropic_instrumented")
@pytest.mark.parametrize("content", [True, False])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_owner_decides_whether_the_client_captures(
    server: FakeModelServer, spans: Spans, sink: RecordingSink, content: bool, stream: bool
) -> None:
    tracer = spans.provider.get_tracer("framework")
    with tracer.start_as_current_span("framework generation") as owner:
        with llm_call_owned_by(owner, content=content):
            _chat(server, False, stream)
            with claude(server).messages.stream(model=CLAUDE, max_tokens=64, messages=CLAUDE_MESSAGES) as helper:
                helper.get_final_message()
    (span,) = spans.finished()
    if content:
        captured = sink.for_span(span)
        assert captured[INPUT] == CLAUDE_MESSAGES  # the last call's content wins, as in the store
        assert without_none(captured[OUTPUT]) == claude_text_answer(fake.STREAM_TEXT)
        assert sink.roles().count(("framework generation", INPUT)) == 2
    else:
        assert sink.records == []
    assert (span.attributes or {})["gen_ai.usage.output_tokens"] == fake.ANTHROPIC_STREAM_USAGE.output_tokens


@pytest.mark.usefixtures("openai_instrumented")
def test_manual_llm_call_gets_the_clients_content(server: FakeModelServer, spans: Spans, sink: RecordingSink) -> None:
    use_tracer_provider(spans.provider)
    try:
        with otel_agentdiag.llm_call(provider="openai", model=GPT):
            oai(server).chat.completions.create(model=GPT, messages=CHAT_MESSAGES)
    finally:
        use_tracer_provider(None)
    (span,) = spans.finished()
    captured = sink.for_span(span)
    assert captured[INPUT] == CHAT_MESSAGES
    assert without_none(captured[OUTPUT]) == chat_text_answer(fake.ANSWER_TEXT)


# --- a failing capture never reaches the agent ----------------------------------------------------------
class _BrokenSink:
    def __init__(self) -> None:
        self.calls = 0

    def record(self, span: Any, role: str, value: Any) -> None:
        self.calls += 1
        raise RuntimeError("sink failure")


@pytest.fixture
def broken_sink() -> Iterator[_BrokenSink]:
    sink = _BrokenSink()
    _content.install(sink)
    try:
        yield sink
    finally:
        _content.uninstall(sink)


@pytest.mark.usefixtures("openai_instrumented", "anthropic_instrumented")
def test_a_failing_capture_does_not_reach_the_caller(
    server: FakeModelServer, spans: Spans, broken_sink: _BrokenSink
) -> None:
    response = oai(server).chat.completions.create(model=GPT, messages=CHAT_MESSAGES)
    assert response.choices[0].message.content == fake.ANSWER_TEXT
    text = "".join(
        c.choices[0].delta.content or ""
        for c in oai(server).chat.completions.create(model=GPT, messages=CHAT_MESSAGES, stream=True)
        if c.choices
    )
    assert text == fake.STREAM_TEXT
    message = claude(server).messages.create(model=CLAUDE, max_tokens=64, messages=CLAUDE_MESSAGES)
    assert message.content[0].text == fake.ANSWER_TEXT  # type: ignore[union-attr]
    assert broken_sink.calls >= 6
    assert all(s.status.status_code is StatusCode.UNSET for s in spans.llm())
    assert len(spans.llm()) == 3
