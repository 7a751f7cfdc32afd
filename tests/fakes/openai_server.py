"""A scripted, OpenAI-compatible HTTP server on 127.0.0.1 for driving the real ``openai`` client in tests.

Usage::

    with FakeOpenAIServer() as server:
        client = OpenAI(api_key=SENTINEL_API_KEY, base_url=server.base_url)
        client.chat.completions.create(model="gpt-4o-mini", messages=[...], tools=[...])
        assert server.requests[0].path == "/v1/chat/completions"

Endpoints (the wire format of the OpenAI REST API, trimmed to the fields clients and instrumentations read):

* ``POST /v1/chat/completions``: with ``tools`` and no ``tool`` message yet, the answer is a call of
  :data:`TOOL_NAME` whose arguments carry :data:`SENTINEL_TOOL_ARGS`; otherwise a text answer carrying
  :data:`SENTINEL_OUTPUT`. ``stream=true`` sends the same answer as server-sent events (``data: {...}``
  chunks, then ``data: [DONE]``), the text one carrying :data:`SENTINEL_STREAM_OUTPUT`, with a final usage
  chunk when ``stream_options.include_usage`` is set.
* ``POST /v1/embeddings``: one vector per input, as floats or base64 (``encoding_format``).
* ``POST /v1/responses``: a non-streaming Responses API answer carrying :data:`SENTINEL_OUTPUT`.
* Any request whose ``model`` is :data:`ERROR_MODEL` gets HTTP 400 with an OpenAI error body whose message
  carries :data:`SENTINEL_ERROR`.

Every identifier the server makes up (completion, response, message and tool call ids, the system
fingerprint) carries a sentinel too: ids are correlation data. The server is ready once the context manager
has entered (the socket is bound and listening); no request ever waits on a timer.
"""

from __future__ import annotations

import base64
import itertools
import json
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

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


@dataclass(frozen=True)
class Usage:
    """Token counts the server reports for one kind of answer."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


TOOL_CALL_USAGE: Final = Usage(prompt_tokens=31, completion_tokens=12)
ANSWER_USAGE: Final = Usage(prompt_tokens=57, completion_tokens=9)
STREAM_USAGE: Final = Usage(prompt_tokens=44, completion_tokens=6)
EMBEDDING_USAGE: Final = Usage(prompt_tokens=7, completion_tokens=0)
RESPONSES_USAGE: Final = Usage(prompt_tokens=23, completion_tokens=5)

TOOL_ARGUMENTS: Final = json.dumps({"city": f"Paris {SENTINEL_TOOL_ARGS}", "unit": "celsius"})
ANSWER_TEXT: Final = f"It is sunny in Paris. {SENTINEL_OUTPUT}"
STREAM_PIECES: Final = ("It is ", "sunny. ", SENTINEL_STREAM_OUTPUT, " Enjoy.")
"""The streamed text, one piece per chunk (the sentinel whole in one chunk)."""
ERROR_MESSAGE: Final = f"The model `{ERROR_MODEL}` does not exist or you do not have access to it. {SENTINEL_ERROR}"
CREATED: Final = 1_721_000_000


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: Any
    """The parsed JSON body (``None`` when there was none or it was not JSON)."""


# --- responses ------------------------------------------------------------------------------------------
def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def _wants_tool_call(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    last_role = messages[-1].get("role") if messages and isinstance(messages[-1], dict) else None
    return bool(body.get("tools")) and last_role != "tool"


def _tool_call(index: int, call_id: str, arguments: str) -> dict[str, Any]:
    return {"index": index, "id": call_id, "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}


class FakeOpenAIServer:
    """The scripted OpenAI-compatible server; start and stop it with ``with`` (or :meth:`start`/:meth:`stop`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.requests: list[RecordedRequest] = []
        """Every request received, in arrival order."""
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        """Bind a free port on 127.0.0.1 and serve from a background thread."""
        if self._server is not None:
            raise RuntimeError("server already started")
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and join every handler thread."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._server = self._thread = None
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

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """The requests received for ``path`` (e.g. ``/v1/chat/completions``)."""
        with self._lock:
            return [request for request in self.requests if request.path == path]

    # -- bookkeeping (handler threads) ----------------------------------------------------------------
    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            number = next(self._ids)
        return f"{prefix}-{SENTINEL_RESPONSE_ID}-{number:04d}"

    # -- scripted answers -----------------------------------------------------------------------------
    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """A non-streaming chat completion answering ``body``."""
        model = str(body.get("model")) + MODEL_SNAPSHOT_SUFFIX
        if _wants_tool_call(body):
            call = _tool_call(0, self._next_id(f"call-{SENTINEL_TOOL_CALL_ID}"), TOOL_ARGUMENTS)
            del call["index"]
            message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
            finish_reason, usage = "tool_calls", TOOL_CALL_USAGE
        else:
            message = {"role": "assistant", "content": ANSWER_TEXT, "refusal": None}
            finish_reason, usage = "stop", ANSWER_USAGE
        return {
            "id": self._next_id("chatcmpl"),
            "object": "chat.completion",
            "created": CREATED,
            "model": model,
            "system_fingerprint": f"fp_{SENTINEL_FINGERPRINT}",
            "service_tier": "default",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
            "usage": _usage(usage),
        }

    def chat_chunks(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The ``chat.completion.chunk`` objects of a streamed answer to ``body``."""
        completion_id = self._next_id("chatcmpl")
        model = str(body.get("model")) + MODEL_SNAPSHOT_SUFFIX
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

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
            half = len(TOOL_ARGUMENTS) // 2
            for piece in (TOOL_ARGUMENTS[:half], TOOL_ARGUMENTS[half:]):
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
            final["usage"] = _usage(usage)
            yield final

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        """An embeddings answer: one fixed vector per input."""
        inputs = body.get("input")
        count = len(inputs) if isinstance(inputs, list) and inputs and not isinstance(inputs[0], int) else 1
        vector = [round(0.125 * (i + 1), 3) for i in range(EMBEDDING_DIMENSIONS)]
        encoded: Any = vector
        if body.get("encoding_format") == "base64":
            encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
        return {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": encoded} for i in range(count)],
            "model": str(body.get("model")),
            "usage": {"prompt_tokens": EMBEDDING_USAGE.prompt_tokens, "total_tokens": EMBEDDING_USAGE.total_tokens},
        }

    def response(self, body: dict[str, Any]) -> dict[str, Any]:
        """A Responses API answer (non-streaming) with one output message."""
        usage = RESPONSES_USAGE
        return {
            "id": self._next_id("resp"),
            "object": "response",
            "created_at": CREATED,
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": str(body.get("model")) + MODEL_SNAPSHOT_SUFFIX,
            "output": [
                {
                    "type": "message",
                    "id": self._next_id("msg"),
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": ANSWER_TEXT, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "temperature": body.get("temperature", 1.0),
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": {
                "input_tokens": usage.prompt_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": usage.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage.total_tokens,
            },
            "metadata": body.get("metadata") or {},
        }


def error_body(message: str, *, code: str, param: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error object."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection; a streamed body simply ends when the connection closes, and
    # server_close() can join every handler thread.
    protocol_version = "HTTP/1.0"
    timeout = 10  # seconds: bounds a read from a client that stalls
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # no per-request logging to stderr
        pass

    def _send_json(self, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_events(self, chunks: Iterator[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

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
        if not isinstance(body, dict):
            self._send_json(400, error_body("The request body is not a JSON object", code="invalid_json"))
            return
        if body.get("model") == ERROR_MODEL:
            self._send_json(400, error_body(ERROR_MESSAGE, code="model_not_found", param="model"))
            return
        if self.path == "/v1/chat/completions":
            if body.get("stream"):
                self._send_events(fake.chat_chunks(body))
            else:
                self._send_json(200, fake.chat_completion(body))
        elif self.path == "/v1/embeddings":
            self._send_json(200, fake.embeddings(body))
        elif self.path == "/v1/responses" and not body.get("stream"):
            self._send_json(200, fake.response(body))
        else:
            self._send_json(404, error_body(f"Unknown path {self.path}", code="not_found"))


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # so server_close() joins the handler threads
    block_on_close = True

    def __init__(self, fake: FakeOpenAIServer) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)
