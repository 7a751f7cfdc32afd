"""End to end: configure() exports redacted spans over real OTLP/HTTP (protobuf) to a receiver on 127.0.0.1.

No mocks: the SDK's own OTLP exporter talks HTTP to a stdlib server (``otlp_receiver``), and the test reads
what crossed the socket. Sentinel strings planted through the public API, the raw OpenTelemetry API and the
resource environment must never appear in any request body.
"""

from __future__ import annotations

import gzip
import logging
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.proto.trace.v1.trace_pb2 import Span as OtlpSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as OtlpStatus
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags, TraceState
from otlp_receiver import OTLPReceiver, ReceivedSpan

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.storage import SpanStore

HASH_KEY = "d61734325a10c7ce51048d8e76675c5b6156c191a7008e9066806024697e6fe8"
WAIT_S = 10.0
AGENT = "otlp-agent"
TREE_ORDER = ("invoke_agent otlp-agent", "agent.iteration", "chat gpt-4o-mini", "execute_tool _OTHER")
EXPECTED_NAMES = set(TREE_ORDER)
REDACTION = sc.AGENTDIAG_REDACTION_PREFIX

_tag = uuid.uuid4().hex[:12]
# Each sentinel is distinct and unique to this test run; none can be produced by a digest (hex only).
SENTINEL_CONV = f"SENTINEL_CONV_{_tag}"
SENTINEL_USER = f"SENTINEL_USER_{_tag}"
SENTINEL_RESP = f"SENTINEL_RESP_{_tag}"
SENTINEL_CALL = f"SENTINEL_CALL_{_tag}"
SENTINEL_TOOL = f"hallucinated_SENTINEL_tool_{_tag}"
SENTINEL_EXC = f"boom SENTINEL_EXC_{_tag}"
SENTINEL_PROMPT = f"SENTINEL_PROMPT_{_tag}"
SENTINEL_EVENT = f"SENTINEL_EVENT_{_tag}"
SENTINEL_STATUS = f"SENTINEL_STATUS_{_tag}"
SENTINEL_RESOURCE = f"SENTINEL_RESOURCE_{_tag}"
SENTINEL_TRACESTATE = f"SENTINEL_TRACESTATE_{_tag}"
SENTINEL_LINK = f"SENTINEL_LINK_{_tag}"
SENTINELS = (
    SENTINEL_TRACESTATE,
    SENTINEL_LINK,
    SENTINEL_CONV,
    SENTINEL_USER,
    SENTINEL_RESP,
    SENTINEL_CALL,
    SENTINEL_TOOL,
    SENTINEL_EXC,
    SENTINEL_PROMPT,
    SENTINEL_EVENT,
    SENTINEL_STATUS,
    SENTINEL_RESOURCE,
)
assert len(set(SENTINELS)) == len(SENTINELS)

pytestmark = pytest.mark.usefixtures("clean_env")


UPSTREAM = SpanContext(
    trace_id=0xABC,
    span_id=0xDEF,
    is_remote=True,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
    trace_state=TraceState([("vendor", SENTINEL_TRACESTATE)]),
)


def run_agent() -> str:
    """The agent under test: every sentinel goes in through the public API or the raw OpenTelemetry API.

    The run continues a remote caller's trace whose W3C tracestate carries a vendor value (every span of the
    trace inherits it), and the iteration links to that caller.
    """
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(UPSTREAM)))
    try:
        return _agent()
    finally:
        otel_context.detach(token)


def _agent() -> str:
    with agentdiag.agent_run(AGENT, conversation_id=SENTINEL_CONV, user_id=SENTINEL_USER):
        with agentdiag.iteration(0):
            span = trace.get_current_span()
            span.set_attribute("prompt", SENTINEL_PROMPT)
            span.add_event("debug", {"x": SENTINEL_EVENT})
            span.set_status(Status(StatusCode.ERROR, SENTINEL_STATUS))
            span.add_link(UPSTREAM, {"why": SENTINEL_LINK})
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.record_response(
                    response_id=SENTINEL_RESP, input_tokens=10, output_tokens=5, finish_reasons=["stop"]
                )
            with pytest.raises(ValueError, match="SENTINEL_EXC"):
                with agentdiag.tool_call(SENTINEL_TOOL, call_id=SENTINEL_CALL):
                    raise ValueError(SENTINEL_EXC)
    return "agent-result"


def configure_and_run(tmp_path: Path, **kwargs: object) -> tuple[agentdiag.AgentDiag, str]:
    handle = agentdiag.configure(store=tmp_path / "t.db", hash_key=HASH_KEY, set_global=False, **kwargs)
    try:
        result = run_agent()
    finally:
        handle.shutdown()
    return handle, result


def by_name(spans: list[ReceivedSpan]) -> dict[str, ReceivedSpan]:
    out = {span.name: span for span in spans}
    assert len(out) == len(spans), [span.name for span in spans]
    return out


def counters(attributes: dict[str, object]) -> dict[str, object]:
    return {key[len(REDACTION) :]: value for key, value in attributes.items() if key.startswith(REDACTION)}


def assert_no_sentinel(blob: bytes, where: str) -> None:
    for sentinel in SENTINELS:
        assert sentinel.encode() not in blob, f"{sentinel!r} leaked into {where}"


# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_redacted_spans_reach_a_real_otlp_receiver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: OTLPReceiver, compression: str
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"secret.attr={SENTINEL_RESOURCE},deployment.environment=test")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", compression)

    handle, result = configure_and_run(tmp_path, otlp_endpoint=receiver.endpoint)

    assert result == "agent-result"
    assert receiver.wait_for_spans(4, timeout=WAIT_S), f"only {receiver.span_count} spans arrived"
    spans = receiver.spans()
    assert len(spans) == 4
    assert [p.failed for p in handle.processors] == [0, 0]

    # -- what crossed the wire ----------------------------------------------------------------------
    assert receiver.raw_bodies
    for headers in receiver.headers:
        assert headers.get("content-type") == "application/x-protobuf"
        assert headers.get("content-encoding", "none") == compression
    for index, (raw, decoded) in enumerate(zip(receiver.raw_bodies, receiver.decoded_bodies, strict=True)):
        assert_no_sentinel(raw, f"request body {index} as sent")
        assert_no_sentinel(decoded, f"request body {index} decoded")
        if compression == "gzip":
            assert raw[:2] == b"\x1f\x8b"  # really compressed
            assert gzip.decompress(raw) == decoded
            assert_no_sentinel(gzip.decompress(raw), f"request body {index} gunzipped")
        else:
            assert raw == decoded
    # The byte search is meaningful: names that are allowed out are visible in the same bytes.
    assert any(b"invoke_agent otlp-agent" in body for body in receiver.decoded_bodies)
    assert any(b"deployment.environment" in body for body in receiver.decoded_bodies)

    # -- names and tree -----------------------------------------------------------------------------
    named = by_name(spans)
    assert set(named) == EXPECTED_NAMES
    run, it, llm, tool = (named[name] for name in TREE_ORDER)
    assert {span.trace_id for span in spans} == {f"{0xABC:032x}"}
    assert run.parent_span_id == f"{0xDEF:016x}"  # the remote caller
    assert all(span.span.trace_state == "" for span in spans)
    assert it.parent_span_id == run.span_id
    assert llm.parent_span_id == it.span_id
    assert tool.parent_span_id == it.span_id
    assert llm.span.kind == OtlpSpan.SPAN_KIND_CLIENT
    assert {span.scope_name for span in spans} == {"otel_agentdiag"}

    # -- correlation ids: digests, identical across spans ------------------------------------------
    conversations = {span.attributes.get(sc.GEN_AI_CONVERSATION_ID) for span in spans}
    assert len(conversations) == 1
    (conversation,) = conversations
    assert isinstance(conversation, str)
    assert conversation.startswith(f"hmac-sha256:{handle.key_id}:")
    assert agentdiag.IdHasher(HASH_KEY.encode()).digest("conversation", SENTINEL_CONV) == conversation
    assert run.attributes[sc.USER_ID].startswith("hmac-sha256:")
    assert llm.attributes[sc.GEN_AI_RESPONSE_ID].startswith("hmac-sha256:")
    assert tool.attributes[sc.GEN_AI_TOOL_CALL_ID].startswith("hmac-sha256:")

    # -- allowed data kept --------------------------------------------------------------------------
    assert run.attributes[sc.GEN_AI_AGENT_NAME] == AGENT
    assert llm.attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert llm.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert llm.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
    assert llm.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert tool.attributes[sc.GEN_AI_TOOL_NAME] == "_OTHER"
    assert it.attributes[sc.AGENTDIAG_ITERATION_INDEX] == 0

    # -- errors: status without description, exception event reduced to its type --------------------
    assert tool.span.status.code == OtlpStatus.STATUS_CODE_ERROR
    assert tool.span.status.message == ""
    assert tool.attributes[sc.ERROR_TYPE] == "ValueError"
    events = tool.events()
    assert [name for name, _ in events] == ["exception"]
    (_, exception) = events[0]
    assert exception["exception.type"] == "ValueError"
    assert set(exception) <= {"exception.type", "exception.escaped"}
    assert it.span.status.code == OtlpStatus.STATUS_CODE_ERROR
    assert it.span.status.message == ""
    assert it.events() == []  # the "debug" event is not on the allowlist
    assert "prompt" not in it.attributes
    assert run.span.status.code == OtlpStatus.STATUS_CODE_UNSET
    assert llm.span.status.code == OtlpStatus.STATUS_CODE_UNSET

    # -- resource: allowed prefixes only ------------------------------------------------------------
    resources = {tuple(sorted(span.resource.items())) for span in spans}
    assert len(resources) == 1
    resource = spans[0].resource
    assert resource["deployment.environment"] == "test"
    assert "service.name" in resource
    assert "secret.attr" not in resource
    assert all(key.startswith(("service.", "telemetry.sdk.", "deployment.environment")) for key in resource)

    # -- redaction counters where something was removed, none where nothing was --------------------
    # iteration: "prompt" and the link's "why" attributes, "debug" event, status description; conversation hashed
    assert counters(it.attributes) == {"unknown_key": 2, "event": 1, "status_description": 1, "hashed": 1}
    (link,) = it.span.links
    assert link.span_id == (0xDEF).to_bytes(8, "big")
    assert link.trace_state == ""
    assert list(link.attributes) == []
    tool_counts = counters(tool.attributes)
    assert tool_counts["unregistered_name"] == 1
    assert tool_counts["span_name"] == 1
    assert tool_counts["hashed"] == 2  # conversation id, call id
    assert tool_counts["unknown_key"] >= 2  # exception.message, exception.stacktrace
    assert "status_description" not in tool_counts
    assert counters(run.attributes) == {"hashed": 2}  # conversation id, user id
    assert counters(llm.attributes) == {"hashed": 2}  # conversation id, response id


def test_sqlite_branch_gets_the_same_spans_and_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: OTLPReceiver
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"secret.attr={SENTINEL_RESOURCE},deployment.environment=test")

    configure_and_run(tmp_path, otlp_endpoint=receiver.endpoint)

    assert receiver.wait_for_spans(4, timeout=WAIT_S)
    wire = receiver.spans()
    with SpanStore(tmp_path / "t.db", create=False) as store:
        traces = store.list_traces()
        assert len(traces) == 1
        stored = store.get_trace(traces[0].trace_id)
    assert traces[0].span_count == 4
    assert traces[0].name == "invoke_agent otlp-agent"

    assert {(s.trace_id, s.span_id, s.name) for s in stored} == {(s.trace_id, s.span_id, s.name) for s in wire}
    assert {s.name for s in stored} == EXPECTED_NAMES
    (wire_conversation,) = {s.attributes[sc.GEN_AI_CONVERSATION_ID] for s in wire}
    stored_conversations = {s.attributes[sc.GEN_AI_CONVERSATION_ID] for s in stored}
    assert stored_conversations == {wire_conversation}
    assert traces[0].session == wire_conversation
    assert {s.session for s in stored} == {wire_conversation}
    (stored_resource,) = {tuple(sorted(s.resource.items())) for s in stored}
    assert dict(stored_resource) == wire[0].resource

    for suffix in ("", "-wal"):
        path = Path(f"{tmp_path / 't.db'}{suffix}")
        if path.exists():
            assert_no_sentinel(path.read_bytes(), path.name)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", lambda r: r.endpoint),  # the exporter appends /v1/traces itself
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", lambda r: r.traces_url),  # used as is
    ],
    ids=["base-endpoint", "traces-endpoint"],
)
def test_endpoint_from_environment(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    receiver: OTLPReceiver,
    variable: str,
    value: Callable[[OTLPReceiver], str],
) -> None:
    monkeypatch.setenv(variable, value(receiver))

    handle, result = configure_and_run(tmp_path)

    assert result == "agent-result"
    assert handle.options.otlp_endpoint is None
    assert handle.options.otlp_from_env
    assert receiver.wait_for_spans(4, timeout=WAIT_S), f"only {receiver.span_count} spans arrived"
    assert {s.name for s in receiver.spans()} == EXPECTED_NAMES
    assert receiver.span_count == 4
    for index, raw in enumerate(receiver.raw_bodies):
        assert_no_sentinel(raw, f"request body {index}")
    # The receiver answers 404 to (and records) any path but /v1/traces.
    assert receiver.errors == []


def _unused_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_receiver_down_does_not_reach_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Connection refused is retried with backoff until the export timeout; 1 s keeps the test short.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    endpoint = f"http://127.0.0.1:{_unused_port()}"
    caplog.set_level(logging.ERROR, logger="opentelemetry.exporter.otlp.proto.http")
    caplog.set_level(logging.WARNING, logger="otel_agentdiag.pipeline.worker")

    handle, result = configure_and_run(tmp_path, otlp_endpoint=endpoint)

    assert result == "agent-result"
    # Both branches took all four spans; the OTLP branch then failed downstream, in the exporter.
    assert [p.redacted for p in handle.processors] == [4, 4]
    # The failure was said once, by our worker, which counted it; the SDK exporter's own line about an attempt
    # our worker made is dropped (exporters/otlp.py), so it says nothing more.
    messages = [(record.name, record.getMessage()) for record in caplog.records]
    assert any(
        name == "otel_agentdiag.pipeline.worker"
        and "could not be exported after" in message
        and "export_failure" in message
        for name, message in messages
    ), messages
    assert not [m for name, m in messages if name.startswith("opentelemetry.exporter")], messages
    with SpanStore(tmp_path / "t.db", create=False) as store:
        (summary,) = store.list_traces()
        stored = store.get_trace(summary.trace_id)
    assert {s.name for s in stored} == EXPECTED_NAMES
