"""A scripted model server on 127.0.0.1 speaking the OpenAI and Anthropic wire formats, for driving the real
``openai`` and ``anthropic`` clients in tests.

Usage::

    with FakeModelServer() as server:  # FakeOpenAIServer is the same class
        client = OpenAI(api_key=SENTINEL_API_KEY, base_url=server.base_url)
        client.chat.completions.create(model="gpt-4o-mini", messages=[...], tools=[...])
        assert server.requests[0].path == "/v1/chat/completions"
        claude = Anthropic(api_key=SENTINEL_API_KEY, base_url=server.anthropic_base_url)
        claude.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=[...])

Endpoints (the wire formats of the OpenAI and Anthropic REST APIs, trimmed to the fields clients and
instrumentations read):

* ``POST /v1/chat/completions``: with ``tools`` and no ``tool`` message yet, the answer is a call of
  :data:`TOOL_NAME` whose arguments carry :data:`SENTINEL_TOOL_ARGS`; otherwise a text answer carrying
  :data:`SENTINEL_OUTPUT`. ``stream=true`` sends the same answer as server-sent events (``data: {...}``
  chunks, then ``data: [DONE]``), the text one carrying :data:`SENTINEL_STREAM_OUTPUT`, with a final usage
  chunk when ``stream_options.include_usage`` is set.
* ``POST /v1/embeddings``: one vector per input, as floats or base64 (``encoding_format``).
* ``POST /v1/responses``: a Responses API answer carrying :data:`SENTINEL_OUTPUT`; with ``stream=true`` the
  Responses event stream (``response.created`` ... ``response.output_text.delta`` per piece of
  :data:`STREAM_PIECES` ... ``response.completed``, each with ``type`` and ``sequence_number``). With ``tools``
  and no ``function_call_output`` item in the input, a ``function_call`` of :data:`TOOL_NAME` instead (its
  ``call_id`` carries :data:`SENTINEL_TOOL_CALL_ID`, its arguments :data:`SENTINEL_TOOL_ARGS`), streamed as
  ``response.function_call_arguments.delta`` events.
* ``POST /v1/messages`` (Anthropic Messages API): with ``tools`` and no ``tool_result`` block in the last
  message, a ``tool_use`` block calling :data:`TOOL_NAME` (its ``input`` carries :data:`SENTINEL_TOOL_ARGS`,
  its ``id`` :data:`SENTINEL_TOOL_CALL_ID`); otherwise a text block carrying :data:`SENTINEL_OUTPUT`.
  ``stream=true`` sends Anthropic's named events (``message_start``, ``content_block_start``, a ``ping``,
  ``content_block_delta`` per piece, ``content_block_stop``, ``message_delta``, ``message_stop``).
* Any request whose ``model`` is :data:`ERROR_MODEL` gets an error whose message carries
  :data:`SENTINEL_ERROR`: HTTP 400 with an OpenAI error body, or on ``/v1/messages`` HTTP 404 with an
  Anthropic error body (``not_found_error``).

Scripts, set by a test before the call it concerns (thread-safe; :meth:`FakeOpenAIServer.reset` clears them):

* :meth:`~FakeOpenAIServer.fail_next` makes the next POSTs fail with a status (429, 500, 529, ...), the
  API's error body and ``retry-after-ms`` so the SDKs' retries do not wait.
* :attr:`~FakeOpenAIServer.usage_mode` is ``"full"``, ``"omit"`` (no usage reported) or ``"no_details"``
  (token counts without the cached/reasoning details).
* :meth:`~FakeOpenAIServer.break_next_stream` corrupts the next streamed answer after its first event.
* :meth:`~FakeOpenAIServer.hold_first_chunk` / :meth:`~FakeOpenAIServer.hold_after_first_chunk` hold the
  next streamed answer (after its headers, or after its first event) until the test sets the returned
  event, at most :data:`HOLD_TIMEOUT` seconds; :meth:`~FakeOpenAIServer.stop` releases every hold.

Every identifier the server makes up (completion, response, message and tool call ids, the system
fingerprint) carries a sentinel too: ids are correlation data. The server is ready once the context manager
has entered (the socket is bound and listening); no request ever waits on a timer.
"""

from __future__ import annotations

import base64
import itertools
import json
import struct
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Literal
from urllib.parse import urlsplit

# --- sentinels ------------------------------------------------------------------------------------------
# Each is distinct, none contains another, and each holds characters a hex digest cannot (so an HMAC digest
# never matches one by chance). Tests search for them byte-for-byte and case-insensitively.
SENTINEL_PROMPT: Final = "SENTINEL-PROMPT-7f3a"
"""The user's prompt."""
SENTINEL_SYSTEM: Final = "SENTINEL-SYSPROMPT-1c8d"
"""The system prompt."""
SENTINEL_TOOL_DESCRIPTION: Final = "SENTINEL-TOOLDESC-52ae"
"""The description of the tool offered to the model."""
SENTINEL_TOOL_ARGS: Final = "SENTINEL-TOOLARG-3e91"
"""Inside the arguments JSON of the model's tool call."""
SENTINEL_TOOL_CALL_ID: Final = "SENTINEL-CALLID-80f2"
"""Inside the id of the model's tool call."""
SENTINEL_TOOL_RESULT: Final = "SENTINEL-TOOLRESULT-d4c7"
"""The tool's result, sent back to the model."""
SENTINEL_OUTPUT: Final = "SENTINEL-OUTPUT-9c2e"
"""The model's text answer (non-streaming)."""
SENTINEL_STREAM_OUTPUT: Final = "SENTINEL-STREAMOUT-6b17"
"""The model's text answer (streaming)."""
SENTINEL_RESPONSE_ID: Final = "SENTINEL-RESPID-4b9c"
"""Inside every completion/response/message id the server hands out."""
SENTINEL_FINGERPRINT: Final = "SENTINEL-FPRINT-a0d5"
"""Inside the ``system_fingerprint`` of chat completions."""
SENTINEL_EMBEDDING_INPUT: Final = "SENTINEL-EMBEDIN-77e0"
"""The text sent to the embeddings endpoint."""
SENTINEL_ERROR: Final = "SENTINEL-ERR-e5f1"
"""The message of the error the server returns for :data:`ERROR_MODEL`."""
SENTINEL_CONVERSATION: Final = "SENTINEL-CONV-2a6f"
"""The agent run's conversation id (set by the app, not by the server)."""
SENTINEL_USER: Final = "SENTINEL-USER-f31b"
"""The agent run's user id (set by the app)."""
SENTINEL_END_USER: Final = "SENTINEL-OAIUSER-0d4e"
"""The ``user`` / ``safety_identifier`` request field."""
SENTINEL_METADATA: Final = "SENTINEL-META-5f60"
"""A value in the request's ``metadata``."""
SENTINEL_HEADER: Final = "SENTINEL-HEADER-b8a3"
"""The value of a custom request header (``default_headers``)."""
SENTINEL_INSTRUCTIONS: Final = "SENTINEL-INSTRUCT-19fd"
"""The ``instructions`` of the Responses API call."""
SENTINEL_API_KEY: Final = "sk-SENTINELKEY" + "Q7rT2vX9" * 4 + "z4"
"""The API key the client sends (``Authorization: Bearer``); 40+ characters, shaped like a real one."""

SENTINELS: Final[tuple[str, ...]] = (
    SENTINEL_PROMPT,
    SENTINEL_SYSTEM,
    SENTINEL_TOOL_DESCRIPTION,
    SENTINEL_TOOL_ARGS,
    SENTINEL_TOOL_CALL_ID,
    SENTINEL_TOOL_RESULT,
    SENTINEL_OUTPUT,
    SENTINEL_STREAM_OUTPUT,
    SENTINEL_RESPONSE_ID,
    SENTINEL_FINGERPRINT,
    SENTINEL_EMBEDDING_INPUT,
    SENTINEL_ERROR,
    SENTINEL_CONVERSATION,
    SENTINEL_USER,
    SENTINEL_END_USER,
    SENTINEL_METADATA,
    SENTINEL_HEADER,
    SENTINEL_INSTRUCTIONS,
    SENTINEL_API_KEY,
)
"""Every sentinel, for leak checks."""

# --- the script -----------------------------------------------------------------------------------------
TOOL_NAME: Final = "get_weather"
ERROR_MODEL: Final = "error-model"
MODEL_SNAPSHOT_SUFFIX: Final = "-2024-07-18"
"""The response's ``model`` is the requested model plus this suffix (as OpenAI answers with a snapshot)."""
EMBEDDING_DIMENSIONS: Final = 8
HOLD_TIMEOUT: Final = 10.0
"""Seconds a held stream waits for its event at most (then it goes on as if the event had been set)."""

UsageMode = Literal["full", "omit", "no_details"]
USAGE_MODES: Final[tuple[UsageMode, ...]] = ("full", "omit", "no_details")


@dataclass(frozen=True)
class Usage:
    """Token counts the server reports for one kind of answer."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class AnthropicUsage:
    """Token counts the server reports for one kind of Anthropic answer (``input_tokens`` excludes the cache)."""

    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int


TOOL_CALL_USAGE: Final = Usage(prompt_tokens=31, completion_tokens=12)
ANSWER_USAGE: Final = Usage(prompt_tokens=57, completion_tokens=9)
STREAM_USAGE: Final = Usage(prompt_tokens=44, completion_tokens=6)
EMBEDDING_USAGE: Final = Usage(prompt_tokens=7, completion_tokens=0)
RESPONSES_USAGE: Final = Usage(prompt_tokens=23, completion_tokens=5)
RESPONSES_STREAM_USAGE: Final = Usage(prompt_tokens=27, completion_tokens=8)
RESPONSES_TOOL_CALL_USAGE: Final = Usage(prompt_tokens=29, completion_tokens=11)
"""A Responses API ``function_call`` answer, streamed or not."""
ANTHROPIC_USAGE: Final = AnthropicUsage(
    input_tokens=63, output_tokens=17, cache_read_input_tokens=38, cache_creation_input_tokens=21
)
"""A non-streamed Anthropic text answer."""
ANTHROPIC_TOOL_USE_USAGE: Final = AnthropicUsage(
    input_tokens=71, output_tokens=26, cache_read_input_tokens=47, cache_creation_input_tokens=13
)
"""An Anthropic ``tool_use`` answer, streamed or not."""
ANTHROPIC_STREAM_USAGE: Final = AnthropicUsage(
    input_tokens=52, output_tokens=11, cache_read_input_tokens=34, cache_creation_input_tokens=15
)
"""A streamed Anthropic text answer (``message_start`` reports ``output_tokens`` 1, ``message_delta`` these)."""

TOOL_ARGUMENTS: Final = json.dumps({"city": f"Paris {SENTINEL_TOOL_ARGS}", "unit": "celsius"})
TOOL_INPUT: Final[dict[str, Any]] = json.loads(TOOL_ARGUMENTS)
"""The same arguments as the ``input`` dict of an Anthropic ``tool_use`` block."""
ANSWER_TEXT: Final = f"It is sunny in Paris. {SENTINEL_OUTPUT}"
ANSWER_JSON: Final = json.dumps({"city": f"Paris {SENTINEL_OUTPUT}"})
"""The text answer when the request's ``response_format`` asks for JSON."""
STREAM_PIECES: Final = ("It is ", "sunny. ", SENTINEL_STREAM_OUTPUT, " Enjoy.")
"""The streamed text, one piece per chunk (the sentinel whole in one chunk)."""
STREAM_TEXT: Final = "".join(STREAM_PIECES)
ERROR_MESSAGE: Final = f"The model `{ERROR_MODEL}` does not exist or you do not have access to it. {SENTINEL_ERROR}"
CREATED: Final = 1_721_000_000

ANTHROPIC_MESSAGES_PATH: Final = "/v1/messages"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: Any
    """The parsed JSON body (``None`` when there was none or it was not JSON)."""


@dataclass
class _Failure:
    """A scripted failure (:meth:`FakeOpenAIServer.fail_next`), shared by its remaining ``times``."""

    status: int
    times: int
    retry_after_ms: int | None
    error_code: str


# --- responses ------------------------------------------------------------------------------------------
def _usage(usage: Usage, mode: UsageMode = "full") -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if mode == "full":
        out["prompt_tokens_details"] = {"cached_tokens": 0, "audio_tokens": 0}
        out["completion_tokens_details"] = {"reasoning_tokens": 0, "audio_tokens": 0}
    return out


def _responses_usage(usage: Usage, mode: UsageMode) -> dict[str, Any]:
    out: dict[str, Any] = {"input_tokens": usage.prompt_tokens}
    if mode == "full":
        out["input_tokens_details"] = {"cached_tokens": 0}
    out["output_tokens"] = usage.completion_tokens
    if mode == "full":
        out["output_tokens_details"] = {"reasoning_tokens": 0}
    out["total_tokens"] = usage.total_tokens
    return out


def _anthropic_usage(usage: AnthropicUsage, mode: UsageMode, *, output_tokens: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"input_tokens": usage.input_tokens}
    if mode == "full":
        out["cache_creation_input_tokens"] = usage.cache_creation_input_tokens
        out["cache_read_input_tokens"] = usage.cache_read_input_tokens
    out["output_tokens"] = usage.output_tokens if output_tokens is None else output_tokens
    return out


def _wants_tool_call(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    last_role = messages[-1].get("role") if messages and isinstance(messages[-1], dict) else None
    return bool(body.get("tools")) and last_role != "tool"


def _wants_tool_use(body: dict[str, Any]) -> bool:
    """Anthropic: tools offered, and the last message does not carry a ``tool_result`` block."""
    messages = body.get("messages") or []
    content = messages[-1].get("content") if messages and isinstance(messages[-1], dict) else None
    has_result = isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )
    return bool(body.get("tools")) and not has_result


def _wants_function_call(body: dict[str, Any]) -> bool:
    """Responses API: tools offered, and no ``function_call_output`` item in the input yet."""
    items = body.get("input")
    has_output = isinstance(items, list) and any(
        isinstance(item, dict) and item.get("type") == "function_call_output" for item in items
    )
    return bool(body.get("tools")) and not has_output


def _answer_text(body: dict[str, Any]) -> str:
    """The text answer: :data:`ANSWER_TEXT`, or :data:`ANSWER_JSON` when ``response_format`` asks for JSON
    (``chat.completions.parse()`` with a pydantic model)."""
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") in ("json_schema", "json_object"):
        return ANSWER_JSON
    return ANSWER_TEXT


def _tool_call(index: int, call_id: str, arguments: str) -> dict[str, Any]:
    return {"index": index, "id": call_id, "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _halves(text: str) -> tuple[str, str]:
    half = len(text) // 2
    return text[:half], text[half:]


def _sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else json.dumps(data)
    head = b"" if event is None else b"event: " + event.encode() + b"\n"
    return head + b"data: " + payload.encode() + b"\n\n"


class FakeOpenAIServer:
    """The scripted model server; start and stop it with ``with`` (or :meth:`start`/:meth:`stop`).

    One server answers both the OpenAI paths (:attr:`base_url`) and the Anthropic Messages API
    (:attr:`anthropic_base_url`); :data:`FakeModelServer` is another name for it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.requests: list[RecordedRequest] = []
        """Every request received, in arrival order."""
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._usage_mode: UsageMode = "full"
        self._failures: list[_Failure] = []
        self._holds_first: list[threading.Event] = []
        self._holds_after_first: list[threading.Event] = []
        self._hold_events: list[threading.Event] = []  # every hold handed out, so stop() can release them
        self._breaks = 0
        self.errors: list[BaseException] = []
        """Exceptions a request handler raised (a correct fake and a well-behaved client leave this empty)."""

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        """Bind a free port on 127.0.0.1 and serve from a background thread."""
        if self._server is not None:
            raise RuntimeError("server already started")
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release every held stream, stop serving, close the socket and join every handler thread."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._server = self._thread = None
        with self._lock:
            holds = list(self._hold_events)
        for event in holds:
            event.set()
        try:
            server.shutdown()
            if thread is not None:
                thread.join()
        finally:
            server.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """What ``OpenAI(base_url=...)`` takes: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """What ``Anthropic(base_url=...)`` takes: ``http://127.0.0.1:<port>`` (the client adds ``/v1``)."""
        return f"http://127.0.0.1:{self.port}"

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """The requests received for ``path`` (e.g. ``/v1/chat/completions``)."""
        with self._lock:
            return [request for request in self.requests if request.path == path]

    # -- scripts --------------------------------------------------------------------------------------
    def fail_next(
        self,
        status: int,
        *,
        times: int = 1,
        retry_after_ms: int | None = 1,
        error_code: str = "rate_limit_exceeded",
    ) -> None:
        """Answer the next ``times`` POSTs (any path) with HTTP ``status`` and the API's error body.

        The error message carries :data:`SENTINEL_ERROR`; OpenAI paths get ``error_code`` as the error's
        ``code``, ``/v1/messages`` gets Anthropic's error type for the status (``rate_limit_error``,
        ``overloaded_error`` for 529, ...). Unless ``retry_after_ms`` is ``None`` the answer carries
        ``retry-after-ms: <retry_after_ms>`` and ``retry-after: 0``, which both SDKs obey, so their
        retries come after that many milliseconds instead of a backoff. Scripts queue in call order.
        """
        if not 400 <= status <= 599:
            raise ValueError(f"status must be an HTTP error status, got {status}")
        if times < 1:
            raise ValueError(f"times must be at least 1, got {times}")
        with self._lock:
            self._failures.append(_Failure(status, times, retry_after_ms, error_code))

    @property
    def usage_mode(self) -> UsageMode:
        """How answers report token usage.

        * ``"full"`` (default): token counts with the details (OpenAI ``*_tokens_details``, Anthropic
          ``cache_read_input_tokens``/``cache_creation_input_tokens``).
        * ``"no_details"``: token counts without the details and cache fields.
        * ``"omit"``: no ``usage`` object in JSON answers, no usage chunk (or ``usage`` field) in OpenAI
          streams, no ``usage`` in ``response.completed``. Anthropic streams cannot drop the object itself:
          the SDK's stream accumulator (``messages.stream()``) assigns to ``message_start.message.usage``
          and reads ``message_delta.usage``, so both events keep an empty ``usage: {}`` (no token counts).
        """
        return self._usage_mode

    @usage_mode.setter
    def usage_mode(self, mode: UsageMode) -> None:
        if mode not in USAGE_MODES:
            raise ValueError(f"usage_mode must be one of {USAGE_MODES}, got {mode!r}")
        with self._lock:
            self._usage_mode = mode

    def hold_first_chunk(self) -> threading.Event:
        """Hold the next streamed answer after its HTTP headers, before its first event, until the returned
        event is set (or :data:`HOLD_TIMEOUT` seconds pass, or the server stops)."""
        return self._hold(self._holds_first)

    def hold_after_first_chunk(self) -> threading.Event:
        """Hold the next streamed answer after its first event, before the rest, until the returned event is
        set (or :data:`HOLD_TIMEOUT` seconds pass, or the server stops)."""
        return self._hold(self._holds_after_first)

    def break_next_stream(self) -> None:
        """Corrupt the next streamed answer: its first event is sent as usual, its second carries data that is not
        JSON (keeping its ``event:`` line), and the answer ends there. Both SDKs raise while reading the stream."""
        with self._lock:
            self._breaks += 1

    def _take_break(self) -> bool:
        with self._lock:
            if not self._breaks:
                return False
            self._breaks -= 1
            return True

    def reset(self) -> None:
        """Forget the recorded requests, the handler errors and every pending script (failures, holds not yet
        taken by a stream); usage goes back to ``"full"``. A stream held right now stays held until its event is
        set (or the server stops)."""
        with self._lock:
            self.requests.clear()
            self.errors.clear()
            self._failures.clear()
            self._holds_first.clear()
            self._holds_after_first.clear()
            self._hold_events = [event for event in self._hold_events if not event.is_set()]
            self._usage_mode = "full"
            self._breaks = 0

    # -- bookkeeping (handler threads) ----------------------------------------------------------------
    def _hold(self, queue: list[threading.Event]) -> threading.Event:
        event = threading.Event()
        with self._lock:
            queue.append(event)
            self._hold_events.append(event)
        return event

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _record_error(self, error: BaseException) -> None:
        with self._lock:
            self.errors.append(error)

    def _next_id(self, prefix: str, sep: str = "-") -> str:
        with self._lock:
            number = next(self._ids)
        return f"{prefix}{sep}{SENTINEL_RESPONSE_ID}-{number:04d}"

    def _take_failure(self) -> _Failure | None:
        with self._lock:
            if not self._failures:
                return None
            failure = self._failures[0]
            failure.times -= 1
            if failure.times == 0:
                self._failures.pop(0)
            return failure

    def _take_holds(self) -> tuple[threading.Event | None, threading.Event | None]:
        with self._lock:
            first = self._holds_first.pop(0) if self._holds_first else None
            after_first = self._holds_after_first.pop(0) if self._holds_after_first else None
        return first, after_first

    # -- scripted answers: OpenAI ---------------------------------------------------------------------
    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """A non-streaming chat completion answering ``body``."""
        model = str(body.get("model")) + MODEL_SNAPSHOT_SUFFIX
        if _wants_tool_call(body):
            call = _tool_call(0, self._next_id(f"call-{SENTINEL_TOOL_CALL_ID}"), TOOL_ARGUMENTS)
            del call["index"]
            message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
            finish_reason, usage = "tool_calls", TOOL_CALL_USAGE
        else:
            message = {"role": "assistant", "content": _answer_text(body), "refusal": None}
            finish_reason, usage = "stop", ANSWER_USAGE
        out: dict[str, Any] = {
            "id": self._next_id("chatcmpl"),
            "object": "chat.completion",
            "created": CREATED,
            "model": model,
            "system_fingerprint": f"fp_{SENTINEL_FINGERPRINT}",
            "service_tier": "default",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        }
        mode = self._usage_mode
        if mode != "omit":
            out["usage"] = _usage(usage, mode)
        return out

    def chat_chunks(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The ``chat.completion.chunk`` objects of a streamed answer to ``body``."""
        completion_id = self._next_id("chatcmpl")
        model = str(body.get("model")) + MODEL_SNAPSHOT_SUFFIX
        mode = self._usage_mode
        include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and mode != "omit"

        def chunk(delta: dict[str, Any] | None, finish_reason: str | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "system_fingerprint": f"fp_{SENTINEL_FINGERPRINT}",
                "choices": []
                if delta is None
                else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            }
            if include_usage:
                out["usage"] = None
            return out

        if _wants_tool_call(body):
            usage = TOOL_CALL_USAGE
            call_id = self._next_id(f"call-{SENTINEL_TOOL_CALL_ID}")
            yield chunk({"role": "assistant", "content": None, "tool_calls": [_tool_call(0, call_id, "")]})
            for piece in _halves(TOOL_ARGUMENTS):
                yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            yield chunk({}, "tool_calls")
        else:
            usage = STREAM_USAGE
            yield chunk({"role": "assistant", "content": "", "refusal": None})
            for piece in STREAM_PIECES:
                yield chunk({"content": piece})
            yield chunk({}, "stop")
        if include_usage:
            final = chunk(None)
            final["usage"] = _usage(usage, mode)
            yield final

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        """An embeddings answer: one fixed vector per input."""
        inputs = body.get("input")
        count = len(inputs) if isinstance(inputs, list) and inputs and not isinstance(inputs[0], int) else 1
        vector = [round(0.125 * (i + 1), 3) for i in range(EMBEDDING_DIMENSIONS)]
        encoded: Any = vector
        if body.get("encoding_format") == "base64":
            encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
        out: dict[str, Any] = {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": encoded} for i in range(count)],
            "model": str(body.get("model")),
        }
        if self._usage_mode != "omit":
            out["usage"] = {
                "prompt_tokens": EMBEDDING_USAGE.prompt_tokens,
                "total_tokens": EMBEDDING_USAGE.total_tokens,
            }
        return out

    def _response_object(
        self, body: dict[str, Any], response_id: str, *, output: list[dict[str, Any]], usage: Usage | None
    ) -> dict[str, Any]:
        """A Responses API ``response`` object; ``in_progress`` (no output, no usage) when ``usage`` is None."""
        out: dict[str, Any] = {
            "id": response_id,
            "object": "response",
            "created_at": CREATED,
            "status": "in_progress" if usage is None else "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": str(body.get("model")) + MODEL_SNAPSHOT_SUFFIX,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "temperature": body.get("temperature", 1.0),
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "metadata": body.get("metadata") or {},
        }
        mode = self._usage_mode
        if usage is None:
            out["usage"] = None
        elif mode != "omit":
            out["usage"] = _responses_usage(usage, mode)
        return out

    @staticmethod
    def _output_message(message_id: str, content: list[dict[str, Any]] | None) -> dict[str, Any]:
        """A Responses API output message; ``in_progress`` and empty when ``content`` is None."""
        return {
            "type": "message",
            "id": message_id,
            "status": "in_progress" if content is None else "completed",
            "role": "assistant",
            "content": content or [],
        }

    def _function_call_item(self, *, arguments: str | None) -> dict[str, Any]:
        """A Responses API ``function_call`` output item calling :data:`TOOL_NAME`; ``in_progress`` with empty
        arguments when ``arguments`` is None."""
        return {
            "type": "function_call",
            "id": self._next_id("fc"),
            "call_id": self._next_id(f"call_{SENTINEL_TOOL_CALL_ID}"),
            "name": TOOL_NAME,
            "arguments": arguments or "",
            "status": "in_progress" if arguments is None else "completed",
        }

    def response(self, body: dict[str, Any]) -> dict[str, Any]:
        """A Responses API answer (non-streaming): a ``function_call`` when tools are offered and no call
        output came back yet, else one output message."""
        response_id = self._next_id("resp")
        if _wants_function_call(body):
            call = self._function_call_item(arguments=TOOL_ARGUMENTS)
            return self._response_object(body, response_id, output=[call], usage=RESPONSES_TOOL_CALL_USAGE)
        text = {"type": "output_text", "text": ANSWER_TEXT, "annotations": []}
        message = self._output_message(self._next_id("msg"), [text])
        return self._response_object(body, response_id, output=[message], usage=RESPONSES_USAGE)

    def response_events(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The events of a streamed Responses API answer to ``body`` (each with ``type`` and ``sequence_number``)."""
        response_id, item_id = self._next_id("resp"), self._next_id("msg")
        sequence = itertools.count()
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}

        def event(kind: str, **fields: Any) -> dict[str, Any]:
            return {"type": kind, "sequence_number": next(sequence), **fields}

        in_progress = self._response_object(body, response_id, output=[], usage=None)
        yield event("response.created", response=in_progress)
        yield event("response.in_progress", response=in_progress)
        if _wants_function_call(body):
            call = self._function_call_item(arguments=None)
            yield event("response.output_item.added", output_index=0, item=call)
            for piece in _halves(TOOL_ARGUMENTS):
                yield event("response.function_call_arguments.delta", item_id=call["id"], output_index=0, delta=piece)
            yield event(
                "response.function_call_arguments.done", item_id=call["id"], output_index=0, arguments=TOOL_ARGUMENTS
            )
            call = {**call, "arguments": TOOL_ARGUMENTS, "status": "completed"}
            yield event("response.output_item.done", output_index=0, item=call)
            done = self._response_object(body, response_id, output=[call], usage=RESPONSES_TOOL_CALL_USAGE)
            yield event("response.completed", response=done)
            return
        yield event("response.output_item.added", output_index=0, item=self._output_message(item_id, None))
        yield event("response.content_part.added", **where, part=_output_text(""))
        for piece in STREAM_PIECES:
            yield event("response.output_text.delta", **where, delta=piece, logprobs=[])
        yield event("response.output_text.done", **where, text=STREAM_TEXT, logprobs=[])
        yield event("response.content_part.done", **where, part=_output_text(STREAM_TEXT))
        done = self._output_message(item_id, [_output_text(STREAM_TEXT)])
        yield event("response.output_item.done", output_index=0, item=done)
        completed = self._response_object(body, response_id, output=[done], usage=RESPONSES_STREAM_USAGE)
        yield event("response.completed", response=completed)

    # -- scripted answers: Anthropic ------------------------------------------------------------------
    def _tool_use_block(self, *, streamed: bool) -> dict[str, Any]:
        tool_use_id = self._next_id(f"toolu_{SENTINEL_TOOL_CALL_ID}")
        return {"type": "tool_use", "id": tool_use_id, "name": TOOL_NAME, "input": {} if streamed else dict(TOOL_INPUT)}

    def anthropic_message(self, body: dict[str, Any]) -> dict[str, Any]:
        """A non-streaming Anthropic Messages API answer to ``body``."""
        if _wants_tool_use(body):
            content, stop_reason, usage = [self._tool_use_block(streamed=False)], "tool_use", ANTHROPIC_TOOL_USE_USAGE
        else:
            content, stop_reason, usage = [{"type": "text", "text": ANSWER_TEXT}], "end_turn", ANTHROPIC_USAGE
        out: dict[str, Any] = {
            "id": self._next_id("msg", "_"),
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model")) + MODEL_SNAPSHOT_SUFFIX,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
        }
        mode = self._usage_mode
        if mode != "omit":
            out["usage"] = _anthropic_usage(usage, mode)
        return out

    def anthropic_events(self, body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        """The ``(event name, data)`` pairs of a streamed Anthropic answer to ``body``."""
        mode = self._usage_mode
        tool_use = _wants_tool_use(body)
        usage = ANTHROPIC_TOOL_USE_USAGE if tool_use else ANTHROPIC_STREAM_USAGE
        # With usage omitted the SDK's accumulator still needs a usage object on both events (see usage_mode).
        start_usage = {} if mode == "omit" else _anthropic_usage(usage, mode, output_tokens=1)
        delta_usage = {} if mode == "omit" else {"output_tokens": usage.output_tokens}
        message = {
            "id": self._next_id("msg", "_"),
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model")) + MODEL_SNAPSHOT_SUFFIX,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        }
        yield "message_start", {"type": "message_start", "message": message}
        if tool_use:
            block: dict[str, Any] = self._tool_use_block(streamed=True)
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in ("", *_halves(TOOL_ARGUMENTS))]
        else:
            block = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in STREAM_PIECES]
        yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
        yield "ping", {"type": "ping"}
        for delta in deltas:
            yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        stop = {"stop_reason": "tool_use" if tool_use else "end_turn", "stop_sequence": None}
        yield "message_delta", {"type": "message_delta", "delta": stop, "usage": delta_usage}
        yield "message_stop", {"type": "message_stop"}


FakeModelServer = FakeOpenAIServer
"""The same class: one server answers the OpenAI and the Anthropic APIs."""


def error_body(
    message: str, *, code: str | None, param: str | None = None, type: str = "invalid_request_error"
) -> dict[str, Any]:
    """An OpenAI-style error object."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def anthropic_error_body(message: str, *, type: str) -> dict[str, Any]:
    """An Anthropic-style error object (``type`` such as ``rate_limit_error``)."""
    return {"type": "error", "error": {"type": type, "message": message}}


_ANTHROPIC_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _anthropic_error_type(status: int) -> str:
    return _ANTHROPIC_ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def _openai_error_type(status: int) -> str:
    if status == 429:
        return "requests"
    return "server_error" if status >= 500 else "invalid_request_error"


_DISCONNECTED: Final = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
"""What writing to a client that went away raises."""


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection; a streamed body simply ends when the connection closes, and
    # server_close() can join every handler thread.
    protocol_version = "HTTP/1.0"
    timeout = 10  # seconds: bounds a read from a client that stalls
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # no per-request logging to stderr
        pass

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _send_events(self, events: Iterator[bytes]) -> None:
        """Stream ``events`` (encoded server-sent events), honouring the holds; a client that goes away ends it."""
        hold_first, hold_after_first = self.server.fake._take_holds()
        broken = self.server.fake._take_break()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for index, event in enumerate(events):
                hold = hold_first if index == 0 else hold_after_first if index == 1 else None
                if hold is not None:
                    hold.wait(HOLD_TIMEOUT)
                if broken and index == 1:
                    head, _, _ = event.partition(b"data: ")
                    self.wfile.write(head + b"data: {broken\n\n")
                    self.wfile.flush()
                    return
                self.wfile.write(event)
                self.wfile.flush()
        except _DISCONNECTED:
            self.close_connection = True

    def _send_error(self, failure: _Failure, anthropic: bool) -> None:
        message = f"Scripted failure: HTTP {failure.status} ({failure.error_code}). {SENTINEL_ERROR}"
        if anthropic:
            payload = anthropic_error_body(message, type=_anthropic_error_type(failure.status))
        else:
            payload = error_body(message, code=failure.error_code, type=_openai_error_type(failure.status))
        headers = {}
        if failure.retry_after_ms is not None:
            headers = {"retry-after-ms": str(failure.retry_after_ms), "retry-after": "0"}
        self._send_json(failure.status, payload, headers)

    def do_GET(self) -> None:
        fake = self.server.fake
        fake._record(RecordedRequest("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None))
        self._send_json(404, error_body(f"Unknown path {self.path}", code="not_found"))

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        fake._record(RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        path = urlsplit(self.path).path
        anthropic = path == ANTHROPIC_MESSAGES_PATH
        try:
            failure = fake._take_failure()
            if failure is not None:
                self._send_error(failure, anthropic)
            elif anthropic:
                self._answer_anthropic(body)
            else:
                self._answer_openai(path, body)
        except _DISCONNECTED:
            self.close_connection = True

    def _answer_openai(self, path: str, body: Any) -> None:
        fake = self.server.fake
        if not isinstance(body, dict):
            self._send_json(400, error_body("The request body is not a JSON object", code="invalid_json"))
        elif body.get("model") == ERROR_MODEL:
            self._send_json(400, error_body(ERROR_MESSAGE, code="model_not_found", param="model"))
        elif path == "/v1/chat/completions":
            if body.get("stream"):
                chunks = (_sse(chunk) for chunk in fake.chat_chunks(body))
                self._send_events(itertools.chain(chunks, [_sse("[DONE]")]))
            else:
                self._send_json(200, fake.chat_completion(body))
        elif path == "/v1/embeddings":
            self._send_json(200, fake.embeddings(body))
        elif path == "/v1/responses":
            if body.get("stream"):
                self._send_events(_sse(event, event["type"]) for event in fake.response_events(body))
            else:
                self._send_json(200, fake.response(body))
        else:
            self._send_json(404, error_body(f"Unknown path {self.path}", code="not_found"))

    def _answer_anthropic(self, body: Any) -> None:
        fake = self.server.fake
        if not isinstance(body, dict):
            payload = anthropic_error_body("The request body is not a JSON object", type="invalid_request_error")
            self._send_json(400, payload)
        elif body.get("model") == ERROR_MODEL:
            self._send_json(404, anthropic_error_body(ERROR_MESSAGE, type="not_found_error"))
        elif body.get("stream"):
            self._send_events(_sse(data, name) for name, data in fake.anthropic_events(body))
        else:
            self._send_json(200, fake.anthropic_message(body))


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # so server_close() joins the handler threads
    block_on_close = True

    def __init__(self, fake: FakeOpenAIServer) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Record what a handler raised (in :attr:`FakeOpenAIServer.errors`) instead of printing it."""
        error = sys.exc_info()[1]
        if error is not None:
            self.fake._record_error(error)
