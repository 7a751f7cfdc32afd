"""End to end against a real, independent OTLP collector: rotel (Rust; tonic/prost) on 127.0.0.1, no Docker.

The SDK's own OTLP exporters (http/protobuf and gRPC) send what ``configure()``'s strict branch produced; rotel
decodes it and its trace processor writes every span it received to a JSON-lines file (``rotel_collector``).
The local SQLite store is the reference: every span it holds must have crossed the wire exactly once, with the
same parent, the GenAI attributes, keyed digests for correlation ids, and none of the raw strings the agent
used. Then the unhappy paths: collector down at start, killed mid-run, and slow to answer. The agent must not
notice any of them, and every span's fate must be counted (``AgentDiag.stats()``).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags, TraceState
from rotel_collector import RotelCollector, free_port, unavailable_reason

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.demo import AGENT_NAME, run_demo_agent
from otel_agentdiag.destinations import LOCAL_DESTINATION, OTLP_DESTINATION
from otel_agentdiag.pipeline.handle import AgentDiag
from otel_agentdiag.storage import SpanStore, StoredSpan

HASH_KEY = "1e2465a30609a8555ff019345962296a8cd236ca47116f7b0582449c8f0bc2e4"
OTLP_HASH_KEY = "ded07de393dc3895e25eb956c87a7585220fddac5016e878795b4205987062f7"
SERVICE = "rotel-e2e"
WAIT_S = 10.0
DEMO_SPANS = 12
"""The demo agent's trace: 1 run, 4 iterations, 4 LLM calls, 3 tool calls."""
DEMO_ANSWER = "Lisbon looks sunny at 24 C; your 120 USD budget is 111.11 EUR."
EXPORT_TIMEOUT_S = "1"
"""``OTEL_EXPORTER_OTLP_TIMEOUT`` for the failure tests (the Python SDK reads it in seconds)."""

_tag = uuid.uuid4().hex[:12]
# Distinct, unique to this run, and impossible in a digest (digests are lower-case hex).
SENTINEL_CONV = f"SENTINEL_CONV_{_tag}"
SENTINEL_USER = f"SENTINEL_USER_{_tag}@example.com"
SENTINEL_AGENT_ID = f"SENTINEL_AGENT_{_tag}"
SENTINEL_RESP = f"SENTINEL_RESP_{_tag}"
SENTINEL_CALL = f"SENTINEL_CALL_{_tag}"
SENTINEL_ARGS = f"SENTINEL_ARGS_{_tag}"
SENTINEL_PROMPT = f"SENTINEL_PROMPT_{_tag}"
SENTINEL_EXC = f"SENTINEL_EXC_{_tag}"
SENTINEL_EVENT = f"SENTINEL_EVENT_{_tag}"
SENTINEL_STATUS = f"SENTINEL_STATUS_{_tag}"
SENTINEL_LINK = f"SENTINEL_LINK_{_tag}"
SENTINEL_TRACESTATE = f"SENTINEL_TRACESTATE_{_tag}"
SENTINEL_HEADER = f"SENTINEL_HEADER_{_tag}"
SENTINELS = (
    SENTINEL_CONV,
    SENTINEL_USER,
    SENTINEL_AGENT_ID,
    SENTINEL_RESP,
    SENTINEL_CALL,
    SENTINEL_ARGS,
    SENTINEL_PROMPT,
    SENTINEL_EXC,
    SENTINEL_EVENT,
    SENTINEL_STATUS,
    SENTINEL_LINK,
    SENTINEL_TRACESTATE,
)
DEMO_RAW = ("demo-conversation-", "resp_demo_", "call_demo_", "unknown currency code", "Plan a day", "120 USD")
"""Raw strings of the demo agent (conversation, response and tool-call ids, an exception message, the prompt)."""

SENTINEL_AGENT = "rotel-sentinel-agent"
SENTINEL_TOOL = "get_weather"  # declared by otel_agentdiag.demo, so its name is allowed through

OTLP_KIND = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
OTLP_STATUS = {"unset": 0, "ok": 1, "error": 2}
CORRELATION_KEYS = (
    sc.GEN_AI_CONVERSATION_ID,
    sc.USER_ID,
    sc.GEN_AI_AGENT_ID,
    sc.GEN_AI_RESPONSE_ID,
    sc.GEN_AI_TOOL_CALL_ID,
)
SAME_ON_BOTH_SIDES = (
    sc.GEN_AI_OPERATION_NAME,
    sc.GEN_AI_AGENT_NAME,
    sc.GEN_AI_PROVIDER_NAME,
    sc.GEN_AI_REQUEST_MODEL,
    sc.GEN_AI_RESPONSE_MODEL,
    sc.GEN_AI_RESPONSE_FINISH_REASONS,
    sc.GEN_AI_USAGE_INPUT_TOKENS,
    sc.GEN_AI_USAGE_OUTPUT_TOKENS,
    sc.GEN_AI_TOOL_NAME,
    sc.ERROR_TYPE,
    "agentdiag.kind",
    "agentdiag.sequence",
    "agentdiag.observer.id",
)

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=unavailable_reason() or "")


@pytest.fixture
def rotel(tmp_path: Path) -> Iterator[RotelCollector]:
    with RotelCollector(tmp_path / "rotel") as collector:
        yield collector


def configure(tmp_path: Path, **kwargs: Any) -> AgentDiag:
    return agentdiag.configure(
        service_name=SERVICE,
        store=tmp_path / "t.db",
        hash_key=HASH_KEY,
        otlp_hash_key=OTLP_HASH_KEY,
        set_global=False,
        **kwargs,
    )


def stored_spans(tmp_path: Path) -> list[StoredSpan]:
    with SpanStore(tmp_path / "t.db", create=False) as store:
        return [span for summary in store.list_traces() for span in store.get_trace(summary.trace_id)]


def pipeline_totals(diag: AgentDiag, destination: str) -> dict[str, Any]:
    totals: dict[str, Any] = diag.stats()["destinations"][destination]["pipeline"]["totals"]
    return totals


def assert_balanced(totals: dict[str, Any]) -> None:
    """Every span the destination observed has a known fate: ``observed = accepted + rejected + dropped``."""
    assert totals["pending"] == 0, totals
    assert totals["observed"] == totals["accepted"] + sum(totals["rejected"].values()) + sum(
        totals["dropped"].values()
    ), totals


def assert_demo_result(result: Any) -> None:
    assert (result.answer, result.iterations, result.tool_errors) == (DEMO_ANSWER, 4, 1)


# -- the agent with sentinels ---------------------------------------------------------------------------------
def sentinel_agent() -> str:
    """A small agent through the manual wrappers and the raw OpenTelemetry API, a sentinel in every raw value:
    ids, a prompt and tool arguments set as attributes, an exception message, an event, a status description,
    a link's attributes, and the W3C tracestate of the remote caller whose trace it continues."""
    upstream = SpanContext(
        trace_id=secrets.randbits(127) + 1,
        span_id=secrets.randbits(63) + 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", SENTINEL_TRACESTATE)]),
    )
    token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(upstream)))
    try:
        with agentdiag.agent_run(
            SENTINEL_AGENT, conversation_id=SENTINEL_CONV, user_id=SENTINEL_USER, agent_id=SENTINEL_AGENT_ID
        ):
            with agentdiag.iteration(0):
                span = trace.get_current_span()
                span.add_event("debug", {"note": SENTINEL_EVENT})
                span.add_link(upstream, {"why": SENTINEL_LINK})
                span.set_status(Status(StatusCode.ERROR, SENTINEL_STATUS))
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    call.span.set_attribute("gen_ai.input.messages", json.dumps([{"content": SENTINEL_PROMPT}]))
                    call.record_response(
                        response_id=SENTINEL_RESP, input_tokens=7, output_tokens=3, finish_reasons=["tool_calls"]
                    )
                try:
                    with agentdiag.tool_call(SENTINEL_TOOL, call_id=SENTINEL_CALL) as tool:
                        tool.span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"city": SENTINEL_ARGS}))
                        raise ValueError(f"no weather for {SENTINEL_EXC}")
                except ValueError:
                    pass  # the agent handles its tool's failure
    finally:
        otel_context.detach(token)
    return "sentinel-agent-done"


# -- comparing the wire with the store ------------------------------------------------------------------------
def assert_arrived_once(stored: list[StoredSpan], wire: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each stored span arrived exactly once, with the same trace, parent, name, kind and status code.
    Returns the wire spans by span id."""
    counts = Counter(span["span_id"] for span in wire)
    duplicates = {span_id: n for span_id, n in counts.items() if n > 1}
    assert not duplicates, f"spans received more than once: {duplicates}"
    by_id = {span["span_id"]: span for span in wire}
    assert set(by_id) == {span.span_id for span in stored}
    for span in stored:
        received = by_id[span.span_id]
        assert received["trace_id"] == span.trace_id
        assert received["parent_span_id"] == span.parent_span_id, span.name
        assert received["name"] == span.name
        assert received["kind"] == OTLP_KIND[span.span_kind], span.name
        assert received["status"]["code"] == OTLP_STATUS[span.status], span.name
        assert received["scope"] == (span.scope or {}).get("name")
        assert received["resource"]["service.name"] == SERVICE
    return by_id


def assert_genai_attributes(stored: list[StoredSpan], by_id: dict[str, dict[str, Any]]) -> None:
    for span in stored:
        attributes = by_id[span.span_id]["attributes"]
        for key in SAME_ON_BOTH_SIDES:
            if key in span.attributes:
                expected = span.attributes[key]
                assert attributes.get(key) == (list(expected) if isinstance(expected, tuple) else expected), key
        if span.kind in ("run", "llm", "tool"):
            assert sc.GEN_AI_OPERATION_NAME in attributes, span.name
        if span.kind == "run":
            assert attributes[sc.GEN_AI_AGENT_NAME] in (AGENT_NAME, SENTINEL_AGENT)
        if span.kind == "llm":
            assert isinstance(attributes[sc.GEN_AI_USAGE_INPUT_TOKENS], int)
            assert isinstance(attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS], int)
            assert isinstance(attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS], list)  # an array on the wire


def assert_digests(wire: list[dict[str, Any]], key_id: str) -> int:
    """Every correlation id on the wire is ``hmac-sha256:<the OTLP key id>:<64 hex>``; returns how many."""
    digest = re.compile(rf"hmac-sha256:{re.escape(key_id)}:[0-9a-f]{{64}}")
    seen = 0
    for span in wire:
        for key in CORRELATION_KEYS:
            if key in span["attributes"]:
                assert digest.fullmatch(span["attributes"][key]), (span["name"], key, span["attributes"][key])
                seen += 1
    return seen


def assert_nothing_raw(rotel: RotelCollector, extra: tuple[str, ...] = ()) -> None:
    jsonl = rotel.spans_path.read_text(encoding="utf-8")
    log = rotel.log_text()
    assert "Span #" in log, "rotel's debug log should show every span it received"
    for raw in (*SENTINELS, *DEMO_RAW, *extra):
        assert raw not in jsonl, f"{raw!r} reached rotel (spans.jsonl)"
        assert raw not in log, f"{raw!r} reached rotel (its log)"


# -- a demo run and the sentinel agent, over both protocols ---------------------------------------------------
@pytest.mark.parametrize(
    ("protocol", "chosen_by"),
    [
        pytest.param("http/protobuf", "argument", id="http-argument"),
        pytest.param("grpc", "argument", id="grpc-argument"),
        pytest.param("http/protobuf", "environment", id="http-environment"),
        pytest.param("grpc", "environment", id="grpc-environment"),
    ],
)
def test_every_span_arrives_once_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rotel: RotelCollector, protocol: str, chosen_by: str
) -> None:
    if chosen_by == "argument":
        diag = configure(tmp_path, otlp_endpoint=rotel.endpoint(protocol), otlp_protocol=protocol)
    else:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.endpoint(protocol))
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        diag = configure(tmp_path)
    assert (diag.options.otlp_protocol, diag.options.otlp_protocol_source) == (
        protocol,
        "argument" if chosen_by == "argument" else "OTEL_EXPORTER_OTLP_PROTOCOL",
    )
    try:
        demo = run_demo_agent(user_id=SENTINEL_USER)
        assert sentinel_agent() == "sentinel-agent-done"
    finally:
        diag.shutdown()
    assert_demo_result(demo)

    stored = stored_spans(tmp_path)
    assert len(stored) == DEMO_SPANS + 4
    assert rotel.wait_for_spans(len(stored), WAIT_S), f"{len(rotel.spans())} of {len(stored)} spans arrived"
    rotel.stop()  # drains rotel's pipeline: nothing more can arrive, so "exactly once" is final
    wire = rotel.spans()

    by_id = assert_arrived_once(stored, wire)
    assert_genai_attributes(stored, by_id)
    # The OTLP branch has its own key: its digests name it, and differ from the store's.
    otlp_key, local_key = diag.key_ids[OTLP_DESTINATION], diag.key_ids[LOCAL_DESTINATION]
    assert otlp_key != local_key
    assert assert_digests(wire, otlp_key) >= DEMO_SPANS + 4  # a conversation id on every span, at least
    assert local_key not in rotel.spans_path.read_text()

    sentinel_run = next(s for s in wire if s["name"] == f"invoke_agent {SENTINEL_AGENT}")
    assert {sc.GEN_AI_CONVERSATION_ID, sc.USER_ID, sc.GEN_AI_AGENT_ID} <= set(sentinel_run["attributes"])
    failed_tool = next(s for s in wire if s["name"] == f"execute_tool {SENTINEL_TOOL}" and s["status"]["code"] == 2)
    assert failed_tool["attributes"][sc.ERROR_TYPE] == "ValueError"
    assert "gen_ai.tool.call.arguments" not in failed_tool["attributes"]
    for span in wire:
        for event in span["events"]:
            if event["name"] == sc.EXCEPTION_EVENT_NAME:
                assert set(event["attributes"]) <= {sc.EXCEPTION_TYPE}
        assert span["status"]["message"] == ""
    assert_nothing_raw(rotel)

    totals = pipeline_totals(diag, OTLP_DESTINATION)
    assert (totals["observed"], totals["accepted"], totals["dropped"]) == (len(stored), len(stored), {})
    assert_balanced(totals)


# -- the collector is down, dies, or is slow ------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_collector_down_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, protocol: str
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", EXPORT_TIMEOUT_S)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Bearer {SENTINEL_HEADER}")
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    caplog.set_level(logging.DEBUG)

    diag = configure(tmp_path, otlp_endpoint=closed, otlp_protocol=protocol)
    try:
        result = run_demo_agent(user_id=SENTINEL_USER)  # no exception may reach the agent
    finally:
        diag.shutdown()

    assert_demo_result(result)
    assert len(stored_spans(tmp_path)) == DEMO_SPANS  # the local store is unaffected
    local = pipeline_totals(diag, LOCAL_DESTINATION)
    assert (local["accepted"], local["dropped"]) == (DEMO_SPANS, {})
    remote = pipeline_totals(diag, OTLP_DESTINATION)
    assert (remote["observed"], remote["accepted"], remote["dropped"]) == (
        DEMO_SPANS,
        0,
        {"export_failure": DEMO_SPANS},
    )
    assert_balanced(remote)
    # The exporter said why, and nobody logged the header value.
    assert any("export" in r.getMessage().lower() and r.levelno >= logging.WARNING for r in caplog.records)
    for record in caplog.records:
        assert SENTINEL_HEADER not in record.getMessage()


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_collector_killed_mid_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rotel: RotelCollector, protocol: str
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", EXPORT_TIMEOUT_S)
    diag = configure(tmp_path, otlp_endpoint=rotel.endpoint(protocol), otlp_protocol=protocol)
    try:
        first = run_demo_agent(user_id=SENTINEL_USER)
        assert diag.force_flush()
        assert pipeline_totals(diag, OTLP_DESTINATION)["accepted"] == DEMO_SPANS
        assert rotel.wait_for_spans(DEMO_SPANS, WAIT_S)

        rotel.kill()
        assert not rotel.running
        second = run_demo_agent(user_id=SENTINEL_USER)
    finally:
        diag.shutdown()

    assert_demo_result(first)
    assert_demo_result(second)
    # The first run arrived, whole; nothing of the second.
    wire = rotel.spans()
    assert {s["trace_id"] for s in wire} == {first.trace_id}
    first_stored = [s for s in stored_spans(tmp_path) if s.trace_id == first.trace_id]
    assert_arrived_once(first_stored, wire)
    # The store has both runs; the OTLP branch counted the second one as lost, with its cause.
    assert len(stored_spans(tmp_path)) == 2 * DEMO_SPANS
    remote = pipeline_totals(diag, OTLP_DESTINATION)
    assert (remote["observed"], remote["accepted"], remote["dropped"]) == (
        2 * DEMO_SPANS,
        DEMO_SPANS,
        {"export_failure": DEMO_SPANS},
    )
    assert_balanced(remote)
    assert_balanced(pipeline_totals(diag, LOCAL_DESTINATION))


class HeldCollector:
    """An OTLP/HTTP endpoint on 127.0.0.1 that takes each request and answers 200 only once released."""

    HOLD_LIMIT_S = 30.0
    """A held request is let go unanswered after this long, so a failing test cannot hang."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        """Set when the first request is being held."""
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.received = 0
        self.answered = 0
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with collector._lock:
                    collector.received += 1
                collector.arrived.set()
                if not collector.release.wait(collector.HOLD_LIMIT_S):
                    return
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/x-protobuf")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    return  # the exporter gave up on this request already
                with collector._lock:
                    collector.answered += 1

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = False
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> HeldCollector:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()


def test_collector_slow_but_within_the_export_timeout(tmp_path: Path) -> None:
    with HeldCollector() as held:
        diag = configure(tmp_path, otlp_endpoint=held.endpoint)  # the SDK's default export timeout: 10 s
        try:
            first = run_demo_agent(user_id=SENTINEL_USER)
            assert held.arrived.wait(WAIT_S), "the batch processor never exported"
            # The export is stuck in the collector; the agent carries on regardless.
            second = run_demo_agent(user_id=SENTINEL_USER)
            assert held.answered == 0
            assert pipeline_totals(diag, OTLP_DESTINATION)["pending"] > 0
            held.release.set()
        finally:
            diag.shutdown()

    assert_demo_result(first)
    assert_demo_result(second)
    remote = pipeline_totals(diag, OTLP_DESTINATION)
    assert (remote["observed"], remote["accepted"], remote["dropped"]) == (2 * DEMO_SPANS, 2 * DEMO_SPANS, {})
    assert_balanced(remote)
    assert len(stored_spans(tmp_path)) == 2 * DEMO_SPANS


def test_collector_slower_than_the_export_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", EXPORT_TIMEOUT_S)
    with HeldCollector() as held:
        diag = configure(tmp_path, otlp_endpoint=held.endpoint)
        try:
            first = run_demo_agent(user_id=SENTINEL_USER)
            assert held.arrived.wait(WAIT_S), "the batch processor never exported"
            second = run_demo_agent(user_id=SENTINEL_USER)
            assert held.answered == 0
        finally:
            diag.shutdown()  # bounded: the exporter gives up after its timeout; the collector is never released
        assert held.answered == 0

    assert_demo_result(first)
    assert_demo_result(second)
    remote = pipeline_totals(diag, OTLP_DESTINATION)
    assert (remote["observed"], remote["accepted"]) == (2 * DEMO_SPANS, 0)
    # Each batch failed on the timeout (or, had shutdown's own deadline come first, was dropped at shutdown):
    # counted either way, never lost silently.
    assert set(remote["dropped"]) <= {"export_failure", "shutdown"}
    assert sum(remote["dropped"].values()) == 2 * DEMO_SPANS
    assert_balanced(remote)
    assert len(stored_spans(tmp_path)) == 2 * DEMO_SPANS
