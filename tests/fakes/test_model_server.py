"""The fake model server, driven by the real ``openai`` and ``anthropic`` clients (sync and async).

Other tests trust the fake to speak each API the way its SDK expects; these tests check that it does, and that
its scripts (failures, usage modes, held streams) do what they promise.
"""

from __future__ import annotations

import asyncio
import base64
import queue
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest

from fakes.openai_server import (
    ANSWER_TEXT,
    ANSWER_USAGE,
    ANTHROPIC_STREAM_USAGE,
    ANTHROPIC_TOOL_USE_USAGE,
    ANTHROPIC_USAGE,
    EMBEDDING_DIMENSIONS,
    EMBEDDING_USAGE,
    ERROR_MESSAGE,
    ERROR_MODEL,
    HOLD_TIMEOUT,
    MODEL_SNAPSHOT_SUFFIX,
    RESPONSES_STREAM_USAGE,
    RESPONSES_USAGE,
    SENTINEL_API_KEY,
    SENTINEL_EMBEDDING_INPUT,
    SENTINEL_ERROR,
    SENTINEL_PROMPT,
    SENTINEL_RESPONSE_ID,
    SENTINEL_STREAM_OUTPUT,
    SENTINEL_TOOL_ARGS,
    SENTINEL_TOOL_CALL_ID,
    SENTINEL_TOOL_DESCRIPTION,
    SENTINEL_TOOL_RESULT,
    STREAM_PIECES,
    STREAM_TEXT,
    STREAM_USAGE,
    TOOL_CALL_USAGE,
    TOOL_NAME,
    AnthropicUsage,
    FakeModelServer,
    FakeOpenAIServer,
)

GPT = "gpt-4o-mini"
CLAUDE = "claude-haiku-4-5"  # not claude-sonnet-4-5: this SDK warns (DeprecationWarning) for that one
MESSAGES: list[Any] = [{"role": "user", "content": f"Weather in Paris? {SENTINEL_PROMPT}"}]
OPENAI_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": SENTINEL_TOOL_DESCRIPTION,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
ANTHROPIC_TOOLS: list[Any] = [
    {
        "name": TOOL_NAME,
        "description": SENTINEL_TOOL_DESCRIPTION,
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
RESPONSE_EVENT_TYPES = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    *["response.output_text.delta"] * len(STREAM_PIECES),
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]
ANTHROPIC_EVENT_TYPES = [  # the SDK drops the ``ping`` the server sends after content_block_start
    "message_start",
    "content_block_start",
    *["content_block_delta"] * len(STREAM_PIECES),
    "content_block_stop",
    "message_delta",
    "message_stop",
]


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as fake:
        yield fake
    assert fake.errors == []  # no handler raised, even for clients that went away mid-stream


# The fake speaks plain HTTP, so TLS settings never apply; one shared context spares each client loading the CA
# bundle (about 0.1 s a client).
_UNUSED_TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def oai(server: FakeModelServer, max_retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(
        api_key=SENTINEL_API_KEY,
        base_url=server.base_url,
        max_retries=max_retries,
        http_client=openai.DefaultHttpxClient(verify=_UNUSED_TLS),
    )


def async_oai(server: FakeModelServer, max_retries: int = 0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key=SENTINEL_API_KEY,
        base_url=server.base_url,
        max_retries=max_retries,
        http_client=openai.DefaultAsyncHttpxClient(verify=_UNUSED_TLS),
    )


def claude(server: FakeModelServer, max_retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key=SENTINEL_API_KEY,
        base_url=server.anthropic_base_url,
        max_retries=max_retries,
        http_client=anthropic.DefaultHttpxClient(verify=_UNUSED_TLS),
    )


def async_claude(server: FakeModelServer, max_retries: int = 0) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key=SENTINEL_API_KEY,
        base_url=server.anthropic_base_url,
        max_retries=max_retries,
        http_client=anthropic.DefaultAsyncHttpxClient(verify=_UNUSED_TLS),
    )


def astuple(usage: Any) -> tuple[int, int]:
    return usage.prompt_tokens, usage.completion_tokens


def astuple_responses(usage: Any) -> tuple[int, int]:
    return usage.input_tokens, usage.output_tokens


def assert_anthropic_usage(usage: Any, expected: AnthropicUsage) -> None:
    assert (usage.input_tokens, usage.output_tokens) == (expected.input_tokens, expected.output_tokens)
    assert usage.cache_read_input_tokens == expected.cache_read_input_tokens
    assert usage.cache_creation_input_tokens == expected.cache_creation_input_tokens


def test_one_server_serves_both_apis(server: FakeModelServer) -> None:
    assert FakeModelServer is FakeOpenAIServer
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert server.anthropic_base_url == f"http://127.0.0.1:{server.port}"


# --- OpenAI ----------------------------------------------------------------------------------------------
def test_openai_chat_create_answers_text_then_a_tool_call(server: FakeModelServer) -> None:
    with oai(server) as client:
        answer = client.chat.completions.create(model=GPT, messages=MESSAGES)
        call = client.chat.completions.create(model=GPT, messages=MESSAGES, tools=OPENAI_TOOLS)

    assert answer.choices[0].message.content == ANSWER_TEXT
    assert (answer.model, answer.choices[0].finish_reason) == (GPT + MODEL_SNAPSHOT_SUFFIX, "stop")
    assert SENTINEL_RESPONSE_ID in answer.id
    assert answer.usage is not None
    assert astuple(answer.usage) == astuple(ANSWER_USAGE)
    tool_call = call.choices[0].message.tool_calls[0]
    assert call.choices[0].finish_reason == "tool_calls"
    assert tool_call.function.name == TOOL_NAME
    assert SENTINEL_TOOL_ARGS in tool_call.function.arguments
    assert SENTINEL_TOOL_CALL_ID in tool_call.id
    assert call.usage is not None and call.usage.prompt_tokens == TOOL_CALL_USAGE.prompt_tokens
    assert [request.path for request in server.requests] == ["/v1/chat/completions"] * 2


def test_openai_chat_stream_sends_the_pieces_then_usage(server: FakeModelServer) -> None:
    with oai(server) as client:
        chunks = list(
            client.chat.completions.create(
                model=GPT, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
            )
        )

    pieces = [chunk.choices[0].delta.content for chunk in chunks if chunk.choices and chunk.choices[0].delta.content]
    assert tuple(pieces) == STREAM_PIECES
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert astuple(chunks[-1].usage) == astuple(STREAM_USAGE)


def test_openai_chat_async_create_and_stream(server: FakeModelServer) -> None:
    async def main() -> tuple[Any, list[Any]]:
        async with async_oai(server) as client:
            answer = await client.chat.completions.create(model=GPT, messages=MESSAGES)
            stream = await client.chat.completions.create(model=GPT, messages=MESSAGES, tools=OPENAI_TOOLS, stream=True)
            return answer, [chunk async for chunk in stream]

    answer, chunks = asyncio.run(main())
    assert answer.choices[0].message.content == ANSWER_TEXT
    arguments = "".join(
        call.function.arguments or ""
        for chunk in chunks
        for call in (chunk.choices[0].delta.tool_calls or [] if chunk.choices else [])
    )
    assert SENTINEL_TOOL_ARGS in arguments
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_openai_responses_create_stream_and_stream_helper(server: FakeModelServer) -> None:
    with oai(server) as client:
        created = client.responses.create(model=GPT, input=SENTINEL_PROMPT)
        events = list(client.responses.create(model=GPT, input=SENTINEL_PROMPT, stream=True))
        with client.responses.stream(model=GPT, input=SENTINEL_PROMPT) as stream:
            deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
            final = stream.get_final_response()

    assert created.output_text == ANSWER_TEXT
    assert created.usage is not None and astuple_responses(created.usage) == astuple(RESPONSES_USAGE)
    assert [event.type for event in events] == RESPONSE_EVENT_TYPES
    assert [event.sequence_number for event in events] == list(range(len(RESPONSE_EVENT_TYPES)))
    assert events[0].response.id == events[-1].response.id
    assert tuple(deltas) == STREAM_PIECES
    assert final.output_text == STREAM_TEXT and SENTINEL_STREAM_OUTPUT in final.output_text
    assert final.model == GPT + MODEL_SNAPSHOT_SUFFIX and SENTINEL_RESPONSE_ID in final.id
    assert final.usage is not None and astuple_responses(final.usage) == astuple(RESPONSES_STREAM_USAGE)


def test_openai_responses_async_stream_and_stream_helper(server: FakeModelServer) -> None:
    async def main() -> tuple[list[Any], Any]:
        async with async_oai(server) as client:
            stream = await client.responses.create(model=GPT, input=SENTINEL_PROMPT, stream=True)
            events = [event async for event in stream]
            async with client.responses.stream(model=GPT, input=SENTINEL_PROMPT) as helper:
                final = await helper.get_final_response()
            return events, final

    events, final = asyncio.run(main())
    assert [event.type for event in events] == RESPONSE_EVENT_TYPES
    assert final.output_text == STREAM_TEXT
    assert astuple_responses(final.usage) == astuple(RESPONSES_STREAM_USAGE)


def test_openai_embeddings_as_floats_and_base64(server: FakeModelServer) -> None:
    async def as_base64() -> Any:
        async with async_oai(server) as client:
            return await client.embeddings.create(
                model="text-embedding-3-small", input=[SENTINEL_EMBEDDING_INPUT], encoding_format="base64"
            )

    with oai(server) as client:
        floats = client.embeddings.create(model="text-embedding-3-small", input=[SENTINEL_EMBEDDING_INPUT, "two"])
    decoded = asyncio.run(as_base64())

    assert [len(item.embedding) for item in floats.data] == [EMBEDDING_DIMENSIONS] * 2
    assert floats.usage.prompt_tokens == EMBEDDING_USAGE.prompt_tokens
    raw = base64.b64decode(decoded.data[0].embedding)  # asked for base64, the SDK hands the string over
    assert list(struct.unpack(f"<{EMBEDDING_DIMENSIONS}f", raw)) == floats.data[0].embedding


def test_openai_error_model_gets_a_400_carrying_the_sentinel(server: FakeModelServer) -> None:
    with oai(server) as client, pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=ERROR_MODEL, messages=MESSAGES)
    assert raised.value.status_code == 400 and SENTINEL_ERROR in str(raised.value)


# --- Anthropic -------------------------------------------------------------------------------------------
def test_anthropic_create_answers_a_tool_use_then_text_after_the_tool_result(server: FakeModelServer) -> None:
    with claude(server) as client:
        call = client.messages.create(model=CLAUDE, max_tokens=64, messages=MESSAGES, tools=ANTHROPIC_TOOLS)
        tool_use = call.content[0]
        assert tool_use.type == "tool_use"
        follow_up = [
            *MESSAGES,
            {"role": "assistant", "content": [tool_use.to_dict()]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": SENTINEL_TOOL_RESULT}],
            },
        ]
        answer = client.messages.create(model=CLAUDE, max_tokens=64, messages=follow_up, tools=ANTHROPIC_TOOLS)

    assert (call.stop_reason, tool_use.name) == ("tool_use", TOOL_NAME)
    assert SENTINEL_TOOL_CALL_ID in tool_use.id and SENTINEL_TOOL_ARGS in tool_use.input["city"]
    assert_anthropic_usage(call.usage, ANTHROPIC_TOOL_USE_USAGE)
    assert answer.stop_reason == "end_turn" and answer.stop_sequence is None
    assert answer.content[0].type == "text" and answer.content[0].text == ANSWER_TEXT
    assert answer.id.startswith("msg_") and SENTINEL_RESPONSE_ID in answer.id
    assert answer.model == CLAUDE + MODEL_SNAPSHOT_SUFFIX
    assert_anthropic_usage(answer.usage, ANTHROPIC_USAGE)
    assert [request.path for request in server.requests] == ["/v1/messages"] * 2


def test_anthropic_usage_constants_are_distinct_and_non_zero() -> None:
    numbers = [
        n for usage in (ANTHROPIC_USAGE, ANTHROPIC_TOOL_USE_USAGE, ANTHROPIC_STREAM_USAGE) for n in vars(usage).values()
    ]
    assert all(numbers) and len(set(numbers)) == len(numbers)


def test_anthropic_raw_stream_events(server: FakeModelServer) -> None:
    with claude(server) as client:
        events = list(client.messages.create(model=CLAUDE, max_tokens=64, messages=MESSAGES, stream=True))

    assert [event.type for event in events] == ANTHROPIC_EVENT_TYPES
    start, delta = events[0], events[-2]
    assert start.type == "message_start" and delta.type == "message_delta"
    assert start.message.usage.output_tokens == 1
    assert start.message.usage.input_tokens == ANTHROPIC_STREAM_USAGE.input_tokens
    assert start.message.usage.cache_read_input_tokens == ANTHROPIC_STREAM_USAGE.cache_read_input_tokens
    assert delta.usage.output_tokens == ANTHROPIC_STREAM_USAGE.output_tokens
    assert delta.delta.stop_reason == "end_turn"
    texts = [event.delta.text for event in events if event.type == "content_block_delta"]
    assert tuple(texts) == STREAM_PIECES


def test_anthropic_stream_helper_text_and_tool_use(server: FakeModelServer) -> None:
    with claude(server) as client:
        with client.messages.stream(model=CLAUDE, max_tokens=64, messages=MESSAGES) as stream:
            pieces = list(stream.text_stream)
            final = stream.get_final_message()
        with client.messages.stream(model=CLAUDE, max_tokens=64, messages=MESSAGES, tools=ANTHROPIC_TOOLS) as stream:
            tool_final = stream.get_final_message()

    assert tuple(pieces) == STREAM_PIECES
    assert final.content[0].type == "text" and final.content[0].text == STREAM_TEXT
    assert final.stop_reason == "end_turn"
    assert_anthropic_usage(final.usage, ANTHROPIC_STREAM_USAGE)
    tool_use = tool_final.content[0]
    assert tool_use.type == "tool_use" and tool_use.name == TOOL_NAME and SENTINEL_TOOL_CALL_ID in tool_use.id
    assert SENTINEL_TOOL_ARGS in tool_use.input["city"]
    assert tool_final.stop_reason == "tool_use"
    assert_anthropic_usage(tool_final.usage, ANTHROPIC_TOOL_USE_USAGE)


def test_anthropic_async_create_stream_and_stream_helper(server: FakeModelServer) -> None:
    async def main() -> tuple[Any, list[Any], Any]:
        async with async_claude(server) as client:
            call = await client.messages.create(model=CLAUDE, max_tokens=64, messages=MESSAGES, tools=ANTHROPIC_TOOLS)
            stream = await client.messages.create(model=CLAUDE, max_tokens=64, messages=MESSAGES, stream=True)
            events = [event async for event in stream]
            async with client.messages.stream(model=CLAUDE, max_tokens=64, messages=MESSAGES) as helper:
                final = await helper.get_final_message()
            return call, events, final

    call, events, final = asyncio.run(main())
    assert call.content[0].type == "tool_use" and call.stop_reason == "tool_use"
    assert [event.type for event in events] == ANTHROPIC_EVENT_TYPES
    assert final.content[0].text == STREAM_TEXT
    assert_anthropic_usage(final.usage, ANTHROPIC_STREAM_USAGE)


def test_anthropic_error_model_gets_a_404_not_found_error(server: FakeModelServer) -> None:
    with claude(server) as client, pytest.raises(anthropic.NotFoundError) as raised:
        client.messages.create(model=ERROR_MODEL, max_tokens=64, messages=MESSAGES)
    assert raised.value.status_code == 404
    assert raised.value.body == {"type": "error", "error": {"type": "not_found_error", "message": ERROR_MESSAGE}}
    assert SENTINEL_ERROR in str(raised.value)


# --- scripted failures -----------------------------------------------------------------------------------
def _openai_chat(server: FakeModelServer, retries: int) -> Any:
    with oai(server, retries) as client:
        return client.chat.completions.create(model=GPT, messages=MESSAGES).choices[0].message.content


def _openai_responses_async(server: FakeModelServer, retries: int) -> Any:
    async def main() -> Any:
        async with async_oai(server, retries) as client:
            return (await client.responses.create(model=GPT, input=SENTINEL_PROMPT)).output_text

    return asyncio.run(main())


def _anthropic(server: FakeModelServer, retries: int) -> Any:
    with claude(server, retries) as client:
        return client.messages.create(model=CLAUDE, max_tokens=64, messages=MESSAGES).content[0].text


def _anthropic_stream_async(server: FakeModelServer, retries: int) -> Any:
    async def main() -> Any:
        async with async_claude(server, retries) as client:
            async with client.messages.stream(model=CLAUDE, max_tokens=64, messages=MESSAGES) as stream:
                return (await stream.get_final_message()).content[0].text

    return asyncio.run(main())


CALLS: dict[str, tuple[Callable[[FakeModelServer, int], Any], str, str, type[Exception]]] = {
    "openai-chat": (_openai_chat, ANSWER_TEXT, "/v1/chat/completions", openai.RateLimitError),
    "openai-responses-async": (_openai_responses_async, ANSWER_TEXT, "/v1/responses", openai.RateLimitError),
    "anthropic": (_anthropic, ANSWER_TEXT, "/v1/messages", anthropic.RateLimitError),
    "anthropic-stream-async": (_anthropic_stream_async, STREAM_TEXT, "/v1/messages", anthropic.RateLimitError),
}


@pytest.mark.parametrize("name", CALLS)
def test_fail_next_429_then_the_retry_succeeds(server: FakeModelServer, name: str) -> None:
    call, expected, path, _ = CALLS[name]
    server.fail_next(429)
    assert call(server, 2) == expected
    assert [request.path for request in server.requests] == [path, path]


@pytest.mark.parametrize("name", CALLS)
def test_fail_next_more_times_than_the_retries_raises_rate_limit_error(server: FakeModelServer, name: str) -> None:
    call, expected, path, error = CALLS[name]
    server.fail_next(429, times=5)
    with pytest.raises(error) as raised:
        call(server, 1)
    assert [request.path for request in server.requests] == [path, path]
    assert SENTINEL_ERROR in str(raised.value)
    headers = raised.value.response.headers
    assert (headers["retry-after-ms"], headers["retry-after"]) == ("1", "0")
    server.reset()
    assert call(server, 0) == expected  # reset dropped the three failures left


def test_fail_next_bodies_follow_each_api(server: FakeModelServer) -> None:
    server.fail_next(529, retry_after_ms=None)
    server.fail_next(500, error_code="server_boom")
    with claude(server) as client, pytest.raises(anthropic.OverloadedError) as overloaded:
        client.messages.create(model=CLAUDE, max_tokens=64, messages=MESSAGES)
    with oai(server) as client, pytest.raises(openai.InternalServerError) as internal:
        client.embeddings.create(model="text-embedding-3-small", input="x")

    assert overloaded.value.status_code == 529
    body = overloaded.value.body
    assert isinstance(body, dict) and body["type"] == "error" and body["error"]["type"] == "overloaded_error"
    assert SENTINEL_ERROR in body["error"]["message"]
    assert "retry-after-ms" not in overloaded.value.response.headers
    assert internal.value.status_code == 500 and internal.value.code == "server_boom"
    assert internal.value.type == "server_error" and SENTINEL_ERROR in internal.value.message


def test_fail_next_rejects_nonsense() -> None:
    fake = FakeModelServer()
    with pytest.raises(ValueError):
        fake.fail_next(200)
    with pytest.raises(ValueError):
        fake.fail_next(429, times=0)


# --- usage modes -----------------------------------------------------------------------------------------
def test_usage_mode_omit_reports_no_usage(server: FakeModelServer) -> None:
    server.usage_mode = "omit"
    with oai(server) as client:
        chat = client.chat.completions.create(model=GPT, messages=MESSAGES)
        chunks = list(
            client.chat.completions.create(
                model=GPT, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
            )
        )
        with client.responses.stream(model=GPT, input=SENTINEL_PROMPT) as stream:
            response = stream.get_final_response()
        embeddings = client.embeddings.create(model="text-embedding-3-small", input="x")
    with claude(server) as anthropic_client:
        message = anthropic_client.messages.create(model=CLAUDE, max_tokens=64, messages=MESSAGES)
        with anthropic_client.messages.stream(model=CLAUDE, max_tokens=64, messages=MESSAGES) as anthropic_stream:
            streamed = anthropic_stream.get_final_message()

    assert chat.usage is None
    assert all(chunk.usage is None and chunk.choices for chunk in chunks)  # no usage chunk either
    assert response.usage is None and response.output_text == STREAM_TEXT
    assert embeddings.usage is None
    assert message.usage is None
    assert streamed.usage.input_tokens is None and streamed.usage.output_tokens is None  # empty usage: {}


def test_usage_mode_no_details_drops_details_and_cache_fields(server: FakeModelServer) -> None:
    server.usage_mode = "no_details"
    with oai(server) as client:
        chat = client.chat.completions.create(model=GPT, messages=MESSAGES)
        response = client.responses.create(model=GPT, input=SENTINEL_PROMPT)
    with claude(server) as anthropic_client:
        message = anthropic_client.messages.create(model=CLAUDE, max_tokens=64, messages=MESSAGES)
        with anthropic_client.messages.stream(model=CLAUDE, max_tokens=64, messages=MESSAGES) as stream:
            streamed = stream.get_final_message()

    assert chat.usage is not None and astuple(chat.usage) == astuple(ANSWER_USAGE)
    assert chat.usage.prompt_tokens_details is None and chat.usage.completion_tokens_details is None
    assert response.usage is not None and astuple_responses(response.usage) == astuple(RESPONSES_USAGE)
    assert response.usage.input_tokens_details is None and response.usage.output_tokens_details is None
    for usage, expected in ((message.usage, ANTHROPIC_USAGE), (streamed.usage, ANTHROPIC_STREAM_USAGE)):
        assert (usage.input_tokens, usage.output_tokens) == (expected.input_tokens, expected.output_tokens)
        assert usage.cache_read_input_tokens is None and usage.cache_creation_input_tokens is None


def test_usage_mode_rejects_unknown_modes_and_reset_restores_full(server: FakeModelServer) -> None:
    with pytest.raises(ValueError):
        server.usage_mode = "none"
    server.usage_mode = "omit"
    server.reset()
    assert server.usage_mode == "full"


# --- held streams ----------------------------------------------------------------------------------------
def test_hold_first_chunk_holds_the_first_chunk_until_the_event_is_set(server: FakeModelServer) -> None:
    release = server.hold_first_chunk()
    first: queue.Queue[tuple[Any, bool]] = queue.Queue()
    with oai(server) as client:
        stream = client.chat.completions.create(model=GPT, messages=MESSAGES, stream=True)
        # create() returned: the headers came while the event was still unset.
        assert not release.is_set()

        def read_first() -> None:
            chunk = next(stream)
            first.put((chunk, release.is_set()))  # whether the event was set when next() returned

        reader = threading.Thread(target=read_first)
        reader.start()
        assert first.empty()
        release.set()
        chunk, released_before_return = first.get(timeout=HOLD_TIMEOUT)
        reader.join()
        rest = list(stream)

    assert released_before_return
    assert chunk.choices[0].delta.role == "assistant"
    assert len(rest) == len(STREAM_PIECES) + 1


def test_hold_after_first_chunk_and_a_client_that_hangs_up(server: FakeModelServer) -> None:
    release = server.hold_after_first_chunk()
    with claude(server) as client:
        stream = client.messages.create(model=CLAUDE, max_tokens=64, messages=MESSAGES, stream=True)
        first = next(iter(stream))
        stream.close()  # hang up while the server holds the rest
    release.set()
    server.stop()  # joins the handler, which wrote into a closed connection

    assert first.type == "message_start"
    assert server.errors == []


def test_hold_lets_an_async_reader_be_cancelled_mid_stream(server: FakeModelServer) -> None:
    release = server.hold_after_first_chunk()

    async def main() -> tuple[str, bool]:
        async with async_claude(server) as client:
            stream = await client.messages.create(model=CLAUDE, max_tokens=64, messages=MESSAGES, stream=True)
            first = await stream.__anext__()
            reading = asyncio.Event()

            async def read_next() -> Any:
                reading.set()  # the task runs on into the read, and suspends there: the server holds the rest
                return await stream.__anext__()

            waiting = asyncio.ensure_future(read_next())
            await reading.wait()
            waiting.cancel()
            try:
                await waiting
            except asyncio.CancelledError:
                cancelled = True
            else:
                cancelled = False
            await stream.close()
            return first.type, cancelled

    assert asyncio.run(main()) == ("message_start", True)
    release.set()


def test_holds_apply_to_the_next_stream_only_and_stop_releases_them(server: FakeModelServer) -> None:
    never_set = server.hold_first_chunk()
    with oai(server) as client, claude(server) as anthropic_client:
        not_held = client.chat.completions.create(model=GPT, messages=MESSAGES)  # not a stream: not held
        stream = anthropic_client.messages.create(model=CLAUDE, max_tokens=64, messages=MESSAGES, stream=True)
        started = time.monotonic()
        server.stop()
        stopped_after = time.monotonic() - started
        events = list(stream)  # the server sent the rest when stop() released the hold

    assert not_held.choices[0].message.content == ANSWER_TEXT
    assert never_set.is_set()
    assert stopped_after < HOLD_TIMEOUT / 2
    assert [event.type for event in events] == ANTHROPIC_EVENT_TYPES


def test_reset_forgets_requests_failures_and_holds(server: FakeModelServer) -> None:
    with oai(server) as client:
        client.embeddings.create(model="text-embedding-3-small", input="x")
        server.fail_next(500)
        server.hold_first_chunk()
        server.reset()
        assert server.requests == []
        started = time.monotonic()
        chunks = list(client.chat.completions.create(model=GPT, messages=MESSAGES, stream=True))
        took = time.monotonic() - started

    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks) == STREAM_TEXT
    assert took < HOLD_TIMEOUT / 2  # not held
    assert len(server.requests) == 1
