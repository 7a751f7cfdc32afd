"""End to end with real third-party instrumentations: no sentinel reaches the SQLite store or an OTLP payload.

For each OpenAI instrumentation (OpenInference, OpenLLMetry, the official OpenTelemetry GenAI one), a fresh
interpreter runs ``third_party_app.py``: ``configure()`` with a SQLite store and an OTLP endpoint, the library
instrumenting the provider ``configure()`` built with content capture at its most permissive, and the real
``openai`` client talking to the fake OpenAI server (``tests/fakes/openai_server.py``). Every value the app
sends and every value the server answers carries a sentinel. An in-memory exporter beside our pipeline keeps
the spans as the library made them (the control: content really was captured).

The test process runs the fake server and a real OTLP/HTTP receiver (``otlp_receiver.py``) and then checks,
byte for byte and case-insensitively, every file in the store's folder, the store's logical content, and every
OTLP request body; that the spans arrived; that correlation ids are keyed digests; and that the safe GenAI
facts (model, token counts, finish reasons, operation) survive under each library's own keys.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from fakes import openai_server as fake
from fakes.openai_server import FakeOpenAIServer, RecordedRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Status as OtlpStatus
from otlp_receiver import OTLPReceiver, ReceivedSpan

import otel_agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.storage import SpanStore, StoredSpan

APP = Path(__file__).with_name("third_party_app.py")
APP_TIMEOUT_S = 120.0
WAIT_S = 10.0
HASH_KEY = (
    b"809a371a6ec77b2072275a5c0cbb7cf7ee3189e49a72e9c6fb0798d4eacdbcfe"  # the app's key (third_party_app.HASH_KEY)
)
MODEL = "gpt-4o-mini"
MODEL_SNAPSHOT = MODEL + fake.MODEL_SNAPSHOT_SUFFIX
EMBEDDING_MODEL = "text-embedding-3-small"
OUR_SCOPE = "otel_agentdiag"
DIGEST = re.compile(r"hmac-sha256:([0-9a-f]{8}):([0-9a-f]{64})")

INSTRUMENTATIONS: dict[str, str] = {
    # parameter -> distribution that must be installed
    "openinference": "openinference-instrumentation-openai",
    "openllmetry": "opentelemetry-instrumentation-openai",
    "otel-genai": "opentelemetry-instrumentation-genai-openai",
    # Ours, held to the same checks (and to a stricter control: it captures no content at all).
    "agentdiag": "otel-agentdiag",
}

CALLS = ("chat-tool-call", "chat-answer", "stream-answer", "stream-tool-call", "embeddings", "responses", "error")
"""The app's OpenAI calls, in order; one span each (spans end, and reach the control, in this order)."""
OUR_SPANS = {"invoke_agent trip-planner": 1, "agent.iteration": 2, "execute_tool get_weather": 1}

# -- what the libraries capture (the control) -------------------------------------------------------------
_CAPTURED_BY_ALL = frozenset(
    {
        fake.SENTINEL_PROMPT,
        fake.SENTINEL_SYSTEM,
        fake.SENTINEL_TOOL_DESCRIPTION,
        fake.SENTINEL_TOOL_ARGS,
        fake.SENTINEL_TOOL_CALL_ID,
        fake.SENTINEL_TOOL_RESULT,
        fake.SENTINEL_OUTPUT,
        fake.SENTINEL_STREAM_OUTPUT,
        fake.SENTINEL_RESPONSE_ID,
        fake.SENTINEL_FINGERPRINT,
        fake.SENTINEL_ERROR,
        fake.SENTINEL_INSTRUCTIONS,
    }
)
NEVER_IN_THE_CONTROL = frozenset({fake.SENTINEL_CONVERSATION, fake.SENTINEL_USER})
"""The ids the app gives our ``agent_run()``: they travel beside the spans to our redactors, so a processor of
the user's (the control) never sees them raw, on our spans or on the library's spans inside the run."""
RAW_CAPTURED: dict[str, frozenset[str]] = {
    "openinference": _CAPTURED_BY_ALL | {fake.SENTINEL_EMBEDDING_INPUT, fake.SENTINEL_END_USER, fake.SENTINEL_METADATA},
    "openllmetry": _CAPTURED_BY_ALL | {fake.SENTINEL_EMBEDDING_INPUT, fake.SENTINEL_END_USER},
    "otel-genai": _CAPTURED_BY_ALL,
    # Ours records no content, and its ids (response, tool call, the run's) go beside the spans to our
    # redactors: a foreign processor sees none of them. Only the system fingerprint is an attribute (our
    # policies drop it).
    "agentdiag": frozenset({fake.SENTINEL_FINGERPRINT}),
}
"""Sentinels each library's raw spans are known to carry (found empirically; a library may capture more)."""

SCOPES: dict[str, str] = {
    "openinference": "openinference.instrumentation.openai",
    "openllmetry": "opentelemetry.instrumentation.openai.v1",
    "otel-genai": "opentelemetry.instrumentation.genai.openai",
    "agentdiag": "otel_agentdiag.instrumentation.openai",
}


# -- what must survive redaction, per library and call ----------------------------------------------------
class _Same:
    """Expected value: whatever the library emitted (timings, ports)."""

    def __repr__(self) -> str:
        return "<as emitted>"


SAME: Any = _Same()


def _openinference() -> dict[str, dict[str, Any]]:
    llm = {"llm.system": "openai", "openinference.span.kind": "LLM", "llm.model_name": MODEL_SNAPSHOT}

    def usage(u: fake.Usage) -> dict[str, Any]:
        return {
            "llm.token_count.prompt": u.prompt_tokens,
            "llm.token_count.completion": u.completion_tokens,
            "llm.token_count.total": u.total_tokens,
        }

    chat_details = {
        "llm.token_count.prompt_details.cache_read": 0,
        "llm.token_count.prompt_details.audio": 0,
        "llm.token_count.completion_details.reasoning": 0,
        "llm.token_count.completion_details.audio": 0,
    }
    return {
        "chat-tool-call": {**llm, **usage(fake.TOOL_CALL_USAGE), **chat_details, "llm.finish_reason": "tool_calls"},
        "chat-answer": {**llm, **usage(fake.ANSWER_USAGE), **chat_details, "llm.finish_reason": "stop"},
        "stream-answer": {**llm, **usage(fake.STREAM_USAGE), **chat_details, "llm.finish_reason": "stop"},
        "stream-tool-call": {**llm, "llm.finish_reason": "tool_calls"},
        "embeddings": {
            "llm.system": "openai",
            "openinference.span.kind": "EMBEDDING",
            "embedding.model_name": EMBEDDING_MODEL,
            "llm.token_count.prompt": fake.EMBEDDING_USAGE.prompt_tokens,
            "llm.token_count.total": fake.EMBEDDING_USAGE.total_tokens,
        },
        "responses": {
            **llm,
            **usage(fake.RESPONSES_USAGE),
            "llm.token_count.prompt_details.cache_read": 0,
            "llm.token_count.completion_details.reasoning": 0,
        },
        "error": {"llm.system": "openai", "openinference.span.kind": "LLM"},
    }


def _openllmetry() -> dict[str, dict[str, Any]]:
    chat = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": MODEL}
    params = {"gen_ai.request.max_tokens": 256, "gen_ai.request.temperature": 0.2, "gen_ai.request.top_p": 0.9}
    answered = {**chat, "gen_ai.response.model": MODEL_SNAPSHOT}

    def usage(u: fake.Usage, *, reasoning: bool = True) -> dict[str, Any]:
        out = {
            "gen_ai.usage.input_tokens": u.prompt_tokens,
            "gen_ai.usage.output_tokens": u.completion_tokens,
            "gen_ai.usage.total_tokens": u.total_tokens,
            "gen_ai.usage.cache_read.input_tokens": 0,
        }
        if reasoning:
            out["gen_ai.usage.reasoning_tokens"] = 0
        return out

    # OpenLLMetry maps OpenAI's "tool_calls" to the semconv's "tool_call".
    return {
        "chat-tool-call": {
            **answered,
            **params,
            **usage(fake.TOOL_CALL_USAGE),
            "gen_ai.response.finish_reasons": ["tool_call"],
        },
        "chat-answer": {**answered, **params, **usage(fake.ANSWER_USAGE), "gen_ai.response.finish_reasons": ["stop"]},
        "stream-answer": {
            **answered,
            **params,
            **usage(fake.STREAM_USAGE, reasoning=False),
            "gen_ai.response.finish_reasons": ["stop"],
        },
        "stream-tool-call": {**answered, **params, "gen_ai.response.finish_reasons": ["tool_call"]},
        "embeddings": {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": EMBEDDING_MODEL,
            "gen_ai.response.model": EMBEDDING_MODEL,
            "gen_ai.usage.input_tokens": fake.EMBEDDING_USAGE.prompt_tokens,
            "gen_ai.usage.total_tokens": fake.EMBEDDING_USAGE.total_tokens,
            "gen_ai.usage.cache_read.input_tokens": 0,
        },
        "responses": {**answered, **usage(fake.RESPONSES_USAGE), "gen_ai.response.finish_reasons": ["stop"]},
        "error": {**chat, "gen_ai.request.model": fake.ERROR_MODEL, "error.type": "BadRequestError"},
    }


def _otel_genai() -> dict[str, dict[str, Any]]:
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
        "server.port": SAME,
    }
    params = {
        "gen_ai.request.max_tokens": 256,
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.top_p": 0.9,
        "gen_ai.request.seed": 7,
    }
    answered = {**chat, "gen_ai.response.model": MODEL_SNAPSHOT}
    streamed = {"gen_ai.request.stream": True, "gen_ai.response.time_to_first_chunk": SAME}

    def usage(u: fake.Usage) -> dict[str, Any]:
        return {"gen_ai.usage.input_tokens": u.prompt_tokens, "gen_ai.usage.output_tokens": u.completion_tokens}

    return {
        "chat-tool-call": {
            **answered,
            **params,
            **usage(fake.TOOL_CALL_USAGE),
            "gen_ai.response.finish_reasons": ["tool_calls"],
        },
        "chat-answer": {**answered, **params, **usage(fake.ANSWER_USAGE), "gen_ai.response.finish_reasons": ["stop"]},
        "stream-answer": {
            **answered,
            **params,
            **streamed,
            **usage(fake.STREAM_USAGE),
            "gen_ai.response.finish_reasons": ["stop"],
        },
        "stream-tool-call": {**answered, **params, **streamed, "gen_ai.response.finish_reasons": ["tool_calls"]},
        "embeddings": {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": EMBEDDING_MODEL,
            "gen_ai.response.model": EMBEDDING_MODEL,
            "server.port": SAME,
            "gen_ai.usage.input_tokens": fake.EMBEDDING_USAGE.prompt_tokens,
        },
        "responses": {**answered, **usage(fake.RESPONSES_USAGE), "gen_ai.response.finish_reasons": ["stop"]},
        "error": {**chat, "gen_ai.request.model": fake.ERROR_MODEL, "error.type": "openai.BadRequestError"},
    }


def _agentdiag() -> dict[str, dict[str, Any]]:
    chat = {
        "agentdiag.kind": "llm",
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
        "server.port": SAME,
    }
    params = {
        "gen_ai.request.max_tokens": 256,
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.top_p": 0.9,
        "gen_ai.request.seed": 7,
    }
    answered = {**chat, "gen_ai.response.model": MODEL_SNAPSHOT}
    streamed = {
        "gen_ai.request.stream": True,
        "gen_ai.response.time_to_first_chunk": SAME,
        "agentdiag.stream.end": "exhausted",
    }

    def usage(u: fake.Usage) -> dict[str, Any]:
        return {
            "gen_ai.usage.input_tokens": u.prompt_tokens,
            "gen_ai.usage.output_tokens": u.completion_tokens,
            "gen_ai.usage.cache_read.input_tokens": 0,
            "gen_ai.usage.reasoning.output_tokens": 0,
        }

    return {
        "chat-tool-call": {
            **answered,
            **params,
            **usage(fake.TOOL_CALL_USAGE),
            "gen_ai.response.finish_reasons": ["tool_calls"],
        },
        "chat-answer": {**answered, **params, **usage(fake.ANSWER_USAGE), "gen_ai.response.finish_reasons": ["stop"]},
        "stream-answer": {
            **answered,
            **params,
            **streamed,
            **usage(fake.STREAM_USAGE),
            "gen_ai.response.finish_reasons": ["stop"],
        },
        "stream-tool-call": {**answered, **params, **streamed, "gen_ai.response.finish_reasons": ["tool_calls"]},
        "embeddings": {
            "agentdiag.kind": "llm",
            "gen_ai.operation.name": "embeddings",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": EMBEDDING_MODEL,
            "gen_ai.response.model": EMBEDDING_MODEL,
            "server.port": SAME,
            "gen_ai.usage.input_tokens": fake.EMBEDDING_USAGE.prompt_tokens,
        },
        "responses": {**answered, **usage(fake.RESPONSES_USAGE), "gen_ai.response.finish_reasons": ["stop"]},
        "error": {**chat, "gen_ai.request.model": fake.ERROR_MODEL, "error.type": "openai.BadRequestError"},
    }


SURVIVORS: dict[str, dict[str, dict[str, Any]]] = {
    "openinference": _openinference(),
    "openllmetry": _openllmetry(),
    "otel-genai": _otel_genai(),
    "agentdiag": _agentdiag(),
}
"""Library -> call -> attribute key -> value: emitted by the library (checked on the control) and kept as is
on the stored and exported span."""

_SNAPSHOT = f"{MODEL}{fake.MODEL_SNAPSHOT_SUFFIX}"
_OI_NAMES = (f"chat {_SNAPSHOT}",) * 4 + (f"embeddings {EMBEDDING_MODEL}", f"chat {_SNAPSHOT}", "chat")
_SEMCONV_NAMES = (f"chat {MODEL}",) * 4 + (f"embeddings {EMBEDDING_MODEL}", f"chat {MODEL}", f"chat {fake.ERROR_MODEL}")
SPAN_NAMES: dict[str, tuple[str, ...]] = {
    # Every library's spans are named "<operation> <request model>" (OpenLLMetry names its spans "openai.chat",
    # "openai.embeddings", ...; OpenInference "ChatCompletion", ...): the convention adapters map OpenInference's
    # kind and llm.model_name (the model the answer names, a snapshot; none on the failed call) onto ours.
    "openinference": _OI_NAMES,
    "openllmetry": _SEMCONV_NAMES,
    "otel-genai": _SEMCONV_NAMES,
    "agentdiag": _SEMCONV_NAMES,
}
ERROR_EVENT: dict[str, str | None] = {
    # the exception.type of the error span's exception event, None: the library records no event
    "openinference": "openai.BadRequestError",
    "openllmetry": "openai.BadRequestError",
    "otel-genai": None,
    "agentdiag": "openai.BadRequestError",
}


# -- running the app --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """One run of the app under one instrumentation, with everything it left behind."""

    library: str
    seconds: float
    report: dict[str, Any] = field(repr=False)
    """What the app dumped: versions, key ids, processor counters and the raw (control) spans."""
    raw_dump: bytes = field(repr=False)
    store_dir: Path = field(repr=False)
    store_path: Path = field(repr=False)
    received: list[ReceivedSpan] = field(repr=False)
    raw_bodies: list[bytes] = field(repr=False)
    decoded_bodies: list[bytes] = field(repr=False)
    otlp_errors: list[str] = field(repr=False)
    requests: list[RecordedRequest] = field(repr=False)

    @property
    def raw_spans(self) -> list[dict[str, Any]]:
        return list(self.report["spans"])

    def raw_llm_spans(self) -> list[dict[str, Any]]:
        """The library's spans, in the order they ended (= the order of :data:`CALLS`)."""
        spans = [s for s in self.raw_spans if (s.get("scope") or {}).get("name") != OUR_SCOPE]
        return sorted(spans, key=lambda s: s["end_time"])

    def stored(self) -> list[StoredSpan]:
        with SpanStore(self.store_path, create=False) as store:
            return [span for trace in store.list_traces() for span in store.get_trace(trace.trace_id)]


def _subprocess_env() -> dict[str, str]:
    """The test's environment without anything that could steer the app, the libraries or the client."""
    prefixes = ("OTEL_", "AGENTDIAG_", "OPENAI_", "TRACELOOP_", "OPENINFERENCE_", "PHOENIX_")
    proxies = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes) and k.lower() not in proxies}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run_app(library: str, base: Path) -> Run:
    store_dir = base / "store"
    store_dir.mkdir()
    store_path = store_dir / "traces.db"
    dump = base / "raw-spans.json"
    with FakeOpenAIServer() as server, OTLPReceiver() as receiver:
        command = [sys.executable, str(APP), library, str(store_path), receiver.endpoint, server.base_url, str(dump)]
        started = time.monotonic()
        try:
            done = subprocess.run(
                command, cwd=base, env=_subprocess_env(), capture_output=True, text=True, timeout=APP_TIMEOUT_S
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{library}: the app did not finish within {APP_TIMEOUT_S} s\nstderr:\n{exc.stderr}")
        seconds = time.monotonic() - started
        if done.returncode != 0:
            pytest.fail(f"{library}: the app exited {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}")
        report = json.loads(dump.read_text(encoding="utf-8"))
        # diag.shutdown() in the app exported everything before it exited; the wait only bounds a straggler.
        receiver.wait_for_spans(len(report["spans"]), timeout=WAIT_S)
        return Run(
            library=library,
            report=report,
            raw_dump=dump.read_bytes(),
            store_dir=store_dir,
            store_path=store_path,
            received=receiver.spans(),
            raw_bodies=list(receiver.raw_bodies),
            decoded_bodies=list(receiver.decoded_bodies),
            otlp_errors=list(receiver.errors),
            requests=list(server.requests),
            seconds=seconds,
        )


@pytest.fixture(scope="module", params=list(INSTRUMENTATIONS))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    library: str = request.param
    for distribution in ("openai", INSTRUMENTATIONS[library]):
        try:
            metadata.version(distribution)
        except metadata.PackageNotFoundError:
            pytest.skip(f"{distribution} is not installed (pip install -e '.[thirdparty-tests]')")
    yield _run_app(library, tmp_path_factory.mktemp(f"third-party-{library}"))


# -- helpers ----------------------------------------------------------------------------------------------
def _found(blob: bytes, sentinels: frozenset[str] | tuple[str, ...]) -> list[str]:
    """The sentinels in ``blob``, as UTF-8 bytes or in any letter case."""
    lower = blob.lower()
    return [s for s in sentinels if s.encode() in blob or s.lower().encode() in lower]


def _hex(span_id: str) -> str:
    return span_id.removeprefix("0x")


def _plain(value: Any) -> Any:
    """Attribute values as the store hands them back (arrays as lists)."""
    return list(value) if isinstance(value, (list, tuple)) else value


def _by_span_id(run: Run) -> tuple[dict[str, StoredSpan], dict[str, ReceivedSpan]]:
    stored = {span.span_id: span for span in run.stored()}
    received = {span.span_id: span for span in run.received}
    return stored, received


def _calls(run: Run) -> dict[str, dict[str, Any]]:
    spans = run.raw_llm_spans()
    assert len(spans) == len(CALLS), [s["name"] for s in spans]
    return dict(zip(CALLS, spans, strict=True))


# -- the control: the libraries really captured content ---------------------------------------------------
def test_the_app_really_called_the_fake_openai_server(run: Run) -> None:
    assert run.report["done"] == {"chat": 2, "stream": 2, "embeddings": 1, "responses": 1, "errors": 1}
    paths = [(r.method, r.path) for r in run.requests]
    chat, embeddings, responses = "/v1/chat/completions", "/v1/embeddings", "/v1/responses"
    assert paths == [("POST", p) for p in (chat, chat, chat, chat, embeddings, responses, chat)]
    for request in run.requests:
        assert request.headers.get("authorization") == f"Bearer {fake.SENTINEL_API_KEY}"
        assert request.headers.get("x-request-tag") == fake.SENTINEL_HEADER
    first, second, stream_text, stream_tool, embedding, response, error = (r.body for r in run.requests)
    assert first["user"] == fake.SENTINEL_END_USER
    assert first["metadata"] == {"ticket": fake.SENTINEL_METADATA}
    assert first["tools"][0]["function"]["name"] == fake.TOOL_NAME
    assert second["messages"][-1]["role"] == "tool"
    assert fake.SENTINEL_TOOL_RESULT in second["messages"][-1]["content"]
    assert stream_text["stream"] is True
    assert stream_text["stream_options"] == {"include_usage": True}
    assert stream_tool["stream"] is True
    assert "tools" in stream_tool
    assert embedding["input"] == [fake.SENTINEL_EMBEDDING_INPUT]
    assert response["instructions"] == fake.SENTINEL_INSTRUCTIONS
    assert error["model"] == fake.ERROR_MODEL


def test_control_spans_carry_the_content(run: Run) -> None:
    raw_names = [s["name"] for s in run.raw_spans]
    assert len(run.raw_spans) == len(CALLS) + sum(OUR_SPANS.values()), raw_names
    calls = _calls(run)  # the library made one span per OpenAI call
    assert {s["scope"]["name"] for s in calls.values()} == {SCOPES[run.library]}
    captured = set(_found(run.raw_dump, fake.SENTINELS))
    missing = RAW_CAPTURED[run.library] - captured
    assert not missing, f"{run.library} no longer captures {sorted(missing)} (captured: {sorted(captured)})"
    # Our wrappers' raw ids never reach a processor of the user's, whichever library traced the calls.
    assert not captured & NEVER_IN_THE_CONTROL, sorted(captured & NEVER_IN_THE_CONTROL)
    if run.library == "agentdiag":
        # Ours produces no content in the first place, and keeps its raw ids from the user's processors.
        assert captured == RAW_CAPTURED["agentdiag"], sorted(captured - RAW_CAPTURED["agentdiag"])
        error = calls["error"]
        assert error["status"]["status_code"] == "ERROR"
        assert "description" not in error["status"] or not error["status"]["description"]
        return
    # The prompt is in the library's own attributes, not only in ours.
    assert fake.SENTINEL_PROMPT in json.dumps(calls["chat-tool-call"]["attributes"])
    error = calls["error"]
    assert error["status"]["status_code"] == "ERROR"
    assert fake.SENTINEL_ERROR in error["status"].get("description", "")


# -- no sentinel anywhere ---------------------------------------------------------------------------------
def test_no_sentinel_in_any_file_of_the_store(run: Run) -> None:
    sentinels = tuple(fake.SENTINELS)
    files = sorted(p for p in run.store_dir.rglob("*") if p.is_file())
    assert run.store_path in files
    leaks = {str(p.relative_to(run.store_dir)): found for p in files if (found := _found(p.read_bytes(), sentinels))}
    assert not leaks, f"sentinels in the store's files: {leaks}"
    # The logical content too (a value spilling over SQLite overflow pages is not contiguous in the file).
    conn = sqlite3.connect(f"file:{run.store_path}?mode=ro", uri=True)
    try:
        dump = "\n".join(conn.iterdump()).encode()
    finally:
        conn.close()
    assert b"trip-planner" in dump  # the search is meaningful: allowed values are visible in the same text
    assert not _found(dump, sentinels), f"sentinels in the store's rows: {_found(dump, sentinels)}"


def test_no_sentinel_in_any_otlp_body(run: Run) -> None:
    assert run.otlp_errors == []
    assert run.raw_bodies, "no OTLP request arrived"
    for index, (raw, decoded) in enumerate(zip(run.raw_bodies, run.decoded_bodies, strict=True)):
        assert not _found(raw, fake.SENTINELS), f"request body {index} as sent: {_found(raw, fake.SENTINELS)}"
        found = _found(decoded, fake.SENTINELS)
        assert not found, f"request body {index} decoded: {found}"
    assert any(b"trip-planner" in body for body in run.decoded_bodies)
    for span in run.received:
        assert span.span.status.message == "", span.name
        for event_name, attributes in span.events():
            assert not _found(json.dumps(attributes).encode(), fake.SENTINELS), event_name


# -- every span arrived, in the store and over OTLP -------------------------------------------------------
def test_every_span_reaches_the_store_and_the_receiver(run: Run) -> None:
    raw_ids = {_hex(s["context"]["span_id"]) for s in run.raw_spans}
    stored, received = _by_span_id(run)
    assert len(received) == len(run.received), "a span arrived twice"
    assert set(stored) == raw_ids
    assert set(received) == raw_ids
    for processor in run.report["processors"]:
        assert processor.get("failed", 0) == 0, processor
        assert processor.get("redacted") == len(raw_ids), processor
    assert len({span.trace_id for span in stored.values()}) == 1  # one agent run, one trace
    names = [span.name for span in stored.values()]
    for name, count in OUR_SPANS.items():
        assert names.count(name) == count, names


def test_span_names(run: Run) -> None:
    stored, received = _by_span_id(run)
    calls = _calls(run)
    expected = dict(zip(CALLS, SPAN_NAMES[run.library], strict=True))
    got = {call: stored[_hex(span["context"]["span_id"])].name for call, span in calls.items()}
    assert got == expected, {call: (span["name"], got[call]) for call, span in calls.items()}
    for span_id, span in received.items():
        assert span.name == stored[span_id].name
    for span in calls.values():
        stored_span = stored[_hex(span["context"]["span_id"])]
        assert stored_span.scope is not None
        assert stored_span.scope["name"] == SCOPES[run.library]


# -- what must survive ------------------------------------------------------------------------------------
def _same(expected: Any, raw: Any, kept: Any) -> bool:
    if expected is SAME:
        return _plain(kept) == _plain(raw)
    return _plain(kept) == _plain(expected)


def test_safe_genai_attributes_survive(run: Run) -> None:
    stored, received = _by_span_id(run)
    not_emitted: list[str] = []
    lost: list[str] = []
    for call, span in _calls(run).items():
        raw = span["attributes"]
        span_id = _hex(span["context"]["span_id"])
        for key, expected in SURVIVORS[run.library][call].items():
            if key not in raw or not _same(expected, raw[key], raw[key]):
                not_emitted.append(f"{call}: {key}={raw.get(key, '<absent>')!r}, expected {expected!r}")
                continue
            for where, attributes in (("store", stored[span_id].attributes), ("otlp", received[span_id].attributes)):
                if key not in attributes or not _same(expected, raw[key], attributes[key]):
                    kept = attributes.get(key, "<dropped>")
                    lost.append(f"{where} {call} ({span['name']}): {key}={raw[key]!r} -> {kept!r}")
    assert not not_emitted, f"{run.library} no longer emits:\n" + "\n".join(not_emitted)
    assert not lost, f"{run.library}: safe attributes lost in redaction:\n" + "\n".join(lost)


TOKEN_COUNT_PREFIXES = (sc.GEN_AI_USAGE_PREFIX, "llm.token_count.", "llm.usage.", sc.AGENTDIAG_USAGE_PREFIX)
FINISH_REASON_KEYS = (sc.GEN_AI_RESPONSE_FINISH_REASONS, "llm.finish_reason")


def test_every_token_count_and_finish_reason_the_library_emits_leaves_unchanged(run: Run) -> None:
    """The presets name token-count keys one by one (no ``*``) and keep only documented finish reasons: every
    such key and reason the library really emits must be among them, or its users would lose their usage."""
    stored, received = _by_span_id(run)
    emitted: set[str] = set()
    lost: list[str] = []
    for span in run.raw_spans:
        span_id = _hex(span["context"]["span_id"])
        for key, value in span["attributes"].items():
            if not (key in FINISH_REASON_KEYS or (key.startswith(TOKEN_COUNT_PREFIXES) and type(value) is int)):
                continue
            emitted.add(key)
            for where, attributes in (("store", stored[span_id].attributes), ("otlp", received[span_id].attributes)):
                if _plain(attributes.get(key)) != _plain(value):
                    lost.append(f"{where} {span['name']}: {key}={value!r} -> {attributes.get(key, '<dropped>')!r}")
    assert any(key.startswith(TOKEN_COUNT_PREFIXES) for key in emitted), sorted(emitted)
    assert set(FINISH_REASON_KEYS) & emitted, sorted(emitted)
    assert not lost, f"{run.library}:\n" + "\n".join(lost)


def test_opentelemetry_schema_urls_survive_and_no_other_leaves(run: Run) -> None:
    emitted = {(span.get("scope") or {}).get("schema_url") or "" for span in run.raw_spans}
    sent = set()
    for body in run.decoded_bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            sent.add(resource_spans.schema_url)
            sent.update(scope_spans.schema_url for scope_spans in resource_spans.scope_spans)
    official = {url for url in emitted if url.startswith("https://opentelemetry.io/schemas/")}
    assert official <= sent  # e.g. the official GenAI instrumentation's schema
    assert sent <= official | {""}


def test_errors_keep_the_type_only(run: Run) -> None:
    stored, received = _by_span_id(run)
    error = _calls(run)["error"]
    span_id = _hex(error["context"]["span_id"])
    assert stored[span_id].status == "error"
    assert received[span_id].span.status.code == OtlpStatus.STATUS_CODE_ERROR
    assert received[span_id].span.status.message == ""
    expected_type = ERROR_EVENT[run.library]
    raw_events = [e for e in error["events"] if e["name"] == "exception"]
    if expected_type is None:
        assert raw_events == []
        assert stored[span_id].events == []
        return
    assert [e["attributes"]["exception.type"] for e in raw_events] == [expected_type]
    for all_events in (stored[span_id].events, [{"name": n, "attributes": a} for n, a in received[span_id].events()]):
        # Ours adds one event per HTTP attempt, with the status code only.
        attempts = [e for e in all_events if e["name"] == sc.AGENTDIAG_HTTP_ATTEMPT_EVENT]
        assert len(attempts) == (1 if run.library == "agentdiag" else 0)
        for attempt in attempts:
            assert attempt["attributes"] == {
                "http.request.resend_count": 0,
                "http.response.status_code": 400,
                "error.type": "400",
            }
        events = [e for e in all_events if e["name"] != sc.AGENTDIAG_HTTP_ATTEMPT_EVENT]
        assert [e["name"] for e in events] == ["exception"]
        (event,) = events
        assert event["attributes"]["exception.type"] == expected_type
        assert set(event["attributes"]) <= {"exception.type", "exception.escaped", sc.AGENTDIAG_EXCEPTION_FINGERPRINT}


# -- correlation ids --------------------------------------------------------------------------------------
def _digests(attributes: Mapping[str, Any]) -> dict[str, str]:
    return {k: v for k, v in attributes.items() if isinstance(v, str) and v.startswith(("hmac-sha256:", "sha256:"))}


def test_correlation_ids_are_keyed_digests(run: Run) -> None:
    stored, received = _by_span_id(run)
    key_ids = set(run.report.get("key_ids", {}).values()) | {run.report["key_id"]}
    correlation_keys = set(sc.CORRELATION_ID_KINDS)
    for where, spans in (("store", {k: s.attributes for k, s in stored.items()}), ("otlp", received)):
        for span_id, span in spans.items():
            attributes = span if isinstance(span, dict) else span.attributes
            for key in correlation_keys & set(attributes):
                assert DIGEST.fullmatch(attributes[key]), f"{where} {span_id}: {key}={attributes[key]!r}"
            for key, value in _digests(attributes).items():
                match = DIGEST.fullmatch(value)
                assert match, f"{where} {span_id}: {key}={value!r}"
                assert match.group(1) in key_ids, f"{where}: {key} digest made with an unknown key"

    hasher = otel_agentdiag.IdHasher(HASH_KEY)
    conversation = hasher.digest(sc.ID_KIND_CONVERSATION, fake.SENTINEL_CONVERSATION)
    # Every span of the run, the library's included, carries the run's conversation id, hashed.
    assert {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in stored.values()} == {conversation}
    assert {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in received.values()} == {conversation}
    assert {s.session for s in stored.values()} == {conversation}
    # Response ids the library recorded are hashed from the raw id (the same digest on both branches).
    for span in run.raw_llm_spans():
        raw_id = span["attributes"].get(sc.GEN_AI_RESPONSE_ID)
        if raw_id is not None:
            span_id = _hex(span["context"]["span_id"])
            digest = hasher.digest(sc.ID_KIND_RESPONSE, raw_id)
            assert stored[span_id].attributes[sc.GEN_AI_RESPONSE_ID] == digest
            assert received[span_id].attributes[sc.GEN_AI_RESPONSE_ID] == digest
