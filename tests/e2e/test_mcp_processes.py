"""MCP end to end: a real client and server (``mcp_app.py``), instrumented by ``MCPInstrumentor``, exporting
through ``configure()`` into one SQLite store and a real OTLP/HTTP receiver under the strict policy.

Three transports: ``memory`` (client and server in one process, over ``mcp.shared.memory``), ``stdio`` (the server a
subprocess of the client, configuring its own pipeline into the same store file) and ``http`` (Streamable HTTP from
a uvicorn server in the client's process: the one transport with an MCP session id). Either way the tree is one
trace: run → iteration → the client's ``execute_tool {tool}`` (the one tool span of the call) → the mcp SDK's own
send span → the server's span, parented across the process boundary by the W3C trace context in ``params._meta``.
Sentinels planted in tool arguments, results, error messages, the conversation id and a made-up tool name appear
in no store file and no OTLP body.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import mcp_app as app
import pytest
from otlp_receiver import OTLPReceiver, ReceivedSpan

from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.storage import SpanStore, StoredSpan

pytest.importorskip("mcp", reason="the mcp SDK (the `mcp` extra) is not installed")

APP = Path(app.__file__).resolve()
APP_TIMEOUT_S = 120
EXPECTED_STDOUT = [
    "listed ['broken_tool', 'get_vocabulary', 'save_progress']",
    "get_vocabulary False True",
    "save_progress False True",
    "broken_tool True",
    "made_up True",
    "resource True",
    "prompt True",
    "missing resource -32602 True",
    "done",
]


@dataclass
class Run:
    store: Path
    spans: list[StoredSpan]
    received: list[ReceivedSpan]
    bodies: list[bytes]
    transport: str


@pytest.fixture(scope="module", params=["memory", "stdio", "http"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    transport: str = request.param
    base = tmp_path_factory.mktemp(f"mcp-{transport}")
    store = base / "store" / "traces.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTDIAG_"))}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    with OTLPReceiver() as receiver:
        command = [sys.executable, str(APP), "client", transport, str(store), receiver.endpoint]
        done = subprocess.run(command, cwd=base, env=env, capture_output=True, text=True, timeout=APP_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == EXPECTED_STDOUT, done.stderr
        assert receiver.errors == []
        received = receiver.spans()
        bodies = list(receiver.decoded_bodies) + list(receiver.raw_bodies)
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
    return Run(store, spans, received, bodies, transport)


def _by_id(spans: list[StoredSpan]) -> dict[str, StoredSpan]:
    return {span.span_id: span for span in spans}


def _tool_calls(run: Run) -> list[StoredSpan]:
    """The client's tool spans, in call order."""
    tools = [s for s in run.spans if s.kind == "tool" and s.attributes.get("mcp.method.name") == "tools/call"]
    return sorted(tools, key=lambda s: s.start_ns)


def test_one_trace_spans_client_and_server(run: Run) -> None:
    by_id = _by_id(run.spans)
    tools = _tool_calls(run)
    assert [s.name for s in tools] == [
        "execute_tool get_vocabulary",
        "execute_tool save_progress",
        "execute_tool broken_tool",
        "execute_tool _OTHER",  # the made-up name: no listing declared it
    ]
    iteration = next(s for s in run.spans if s.kind == "iteration")
    run_span = next(s for s in run.spans if s.kind == "run")
    assert iteration.parent_span_id == run_span.span_id
    for tool in tools:
        assert tool.parent_span_id == iteration.span_id
        assert tool.trace_id == run_span.trace_id
        # The SDK's own send span under ours, the server's span under that: one trace, across processes too.
        children = [s for s in run.spans if s.parent_span_id == tool.span_id]
        assert [(s.name, s.kind) for s in children] == [("tools/call", "other")]
        served = [s for s in run.spans if s.parent_span_id == children[0].span_id]
        assert len(served) == 1
        server = served[0]
        assert server.kind == "other"  # a traced caller's span is the call's one tool span
        assert server.attributes["mcp.method.name"] == "tools/call"
        assert server.attributes["gen_ai.tool.name"] == tool.attributes["gen_ai.tool.name"]
        assert server.name == tool.name
    # No orphan on the server side: every span it handled (notifications included) has its parent in the store.
    assert all(s.parent_span_id in by_id for s in run.spans if s.span_kind == "server")
    services = {s.span_id: s.resource.get("service.name") for s in run.spans if s.resource}
    server_spans = [s for s in run.spans if s.attributes.get("mcp.method.name") and s.parent_span_id in by_id]
    assert any(services.get(s.span_id) == "mcp-server" for s in server_spans) == (run.transport == "stdio")


def test_attributes_follow_the_mcp_conventions(run: Run) -> None:
    tools = _tool_calls(run)
    for tool in tools:
        attributes = tool.attributes
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.type"] == "extension"
        assert attributes["mcp.protocol.version"] == "2025-11-25"
        assert "jsonrpc.request.id" not in attributes
    assert [s.status for s in tools] == ["unset", "unset", "error", "error"]
    assert [s.attributes.get("error.type") for s in tools] == [None, None, "tool_error", "tool_error"]
    methods = {s.attributes.get("mcp.method.name") for s in run.spans}
    assert {"initialize", "tools/list", "tools/call", "notifications/initialized"} <= methods
    listing = [s for s in run.spans if s.name == "tools/list" and s.parent_span_id is not None]
    assert listing, "the tools/list request has its spans"
    assert all(not any(key.startswith(("mcp.resource", "gen_ai.prompt")) for key in s.attributes) for s in run.spans)


def test_the_receipt_is_valid(run: Run) -> None:
    digest = IdHasher(app.HASH_KEY).digest("conversation", app.SENTINEL_CONVERSATION)
    run_span = next(s for s in run.spans if s.kind == "run")
    assert run_span.attributes["gen_ai.conversation.id"] == digest
    with SpanStore(run.store, create=False) as reader:
        assert session_receipt(reader, digest).status == "valid"


def test_no_sentinel_in_any_store_file(run: Run) -> None:
    for path in run.store.parent.iterdir():
        blob = path.read_bytes().lower()
        assert not [s for s in app.SENTINELS if s.lower().encode() in blob], path.name


def test_no_sentinel_in_any_otlp_body_and_every_client_span_arrived(run: Run) -> None:
    assert run.bodies
    for body in run.bodies:
        assert not [s for s in app.SENTINELS if s.lower().encode() in body.lower()]
    names = [span.name for span in run.received]
    assert names.count("execute_tool get_vocabulary") >= 1
    assert "execute_tool _OTHER" in names
    assert all("jsonrpc.request.id" not in span.attributes for span in run.received)


def test_the_session_id_is_a_keyed_digest_where_the_transport_has_one(run: Run) -> None:
    served = [s for s in run.spans if s.span_kind == "server" and s.attributes.get("mcp.method.name") == "tools/call"]
    assert len(served) == 4
    digests = {s.attributes.get("mcp.session.id") for s in served}
    if run.transport != "http":
        assert digests == {None}  # stdio and memory have no session id
        return
    (digest,) = digests  # one session, one digest, on every request the server handled in it
    assert isinstance(digest, str) and digest.startswith("hmac-sha256:")
    assert all("mcp.session.id" not in s.attributes for s in run.spans if s.span_kind == "client")
    assert all(span.attributes.get("mcp.session.id") in (None, digest) for span in run.received)


def test_resources_and_prompts_are_named_by_their_method_and_errors_keep_the_code_only(run: Run) -> None:
    iteration = next(s for s in run.spans if s.kind == "iteration")
    direct = sorted((s for s in run.spans if s.parent_span_id == iteration.span_id), key=lambda s: s.start_ns)
    assert [s.name for s in direct[-3:]] == ["resources/read", "prompts/get", "resources/read"]
    read, prompt, missing = direct[-3:]
    assert read.status == "unset" and prompt.status == "unset"
    assert missing.status == "error"
    assert missing.attributes["error.type"] == missing.attributes["rpc.response.status_code"] == "-32602"
    assert [e["name"] for e in missing.events] == ["exception"]
    # Down the chain (the SDK's send span, the server's span): the same code, no message, no URI, no prompt name.
    chain = [s for s in run.spans if s.trace_id == missing.trace_id and s.attributes.get("error.type") == "-32602"]
    assert len(chain) == 3
    for span in run.spans:
        assert not any(key in span.attributes for key in ("mcp.resource.uri", "gen_ai.prompt.name"))


INSTRUMENT = Path(sys.executable).with_name("opentelemetry-instrument")
ROOT = APP.parents[2]


@pytest.mark.skipif(not INSTRUMENT.exists(), reason=f"no opentelemetry-instrument next to {sys.executable}")
@pytest.mark.skipif(
    "agentdiag_mcp" not in {ep.name for ep in metadata.entry_points(group="opentelemetry_instrumentor")},
    reason="the installed otel-agentdiag predates the agentdiag_mcp entry point: pip install -e '.[dev]'",
)
def test_zero_code_traces_client_and_server(tmp_path: Path) -> None:
    store = tmp_path / "store" / "traces.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTDIAG_"))}
    env.update(
        {
            "OTEL_SERVICE_NAME": "mcp-zero-code",
            "AGENTDIAG_STORE": str(store),
            "AGENTDIAG_HASH_KEY": app.HASH_KEY.decode(),
            "PYTHONPATH": str(ROOT),  # this checkout's otel_agentdiag, as the other e2e apps import it
        }
    )
    command = [str(INSTRUMENT), sys.executable, str(APP), "zero-code"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=APP_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == EXPECTED_STDOUT, done.stderr
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
    tools = sorted((s for s in spans if s.kind == "tool"), key=lambda s: s.start_ns)
    assert [s.name for s in tools] == [
        "execute_tool get_vocabulary",
        "execute_tool save_progress",
        "execute_tool broken_tool",
        "execute_tool _OTHER",
    ]
    by_id = _by_id(spans)
    for tool in tools:
        below = [
            s
            for s in spans
            if s.parent_span_id is not None and by_id.get(s.parent_span_id, s).parent_span_id == tool.span_id
        ]
        assert [(s.span_kind, s.name) for s in below] == [("server", tool.name)]
    for path in store.parent.iterdir():
        blob = path.read_bytes().lower()
        assert not [s for s in app.SENTINELS if s.lower().encode() in blob], path.name
