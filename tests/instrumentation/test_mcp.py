"""MCPInstrumentor in process: a real ``MCPServer`` and a real ``Client``/``ClientSession``, on a fresh provider.

The mcp SDK's own spans follow the process's first global provider, which other tests may have set; so here the
server's built-in ``OpenTelemetryMiddleware`` is dropped (the SDK's documented opt-out) and our middleware starts
the server span itself, on this test's provider. The SDK's span, enriched by ours, is covered end to end in
``tests/e2e/test_mcp.py`` (fresh interpreters, one store, both transports).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK (the `mcp` extra) is not installed")

import anyio
from conftest import Spans
from content_sink import RecordingSink, content_sink  # noqa: F401
from mcp import Client
from mcp.client.session import ClientSession
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.memory import create_client_server_memory_streams
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from otel_agentdiag._internal.names import default_registry
from otel_agentdiag.instrumentation.mcp import MCPInstrumentor
from otel_agentdiag.instrumentation.mcp.patch import ServerSpanMiddleware, register_listed_tools
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.testing import capture_spans

SECRET_ARGUMENT = "SENTINEL-MCP-UNIT-ARGUMENT-31c9"
SECRET_RESULT = "SENTINEL-MCP-UNIT-RESULT-a0d4"
SECRET_ERROR = "SENTINEL-MCP-UNIT-ERROR-6e12"
MADE_UP = "hallucinated_unit_tool_5f7e"
SECRETS = (SECRET_ARGUMENT, SECRET_RESULT, SECRET_ERROR)


def build_server(*, sdk_spans: bool = False) -> MCPServer:
    server = MCPServer("unit-server")

    @server.tool()
    def mcp_lookup_word(word: str) -> str:
        return f"{SECRET_RESULT} {word}"

    @server.tool()
    def mcp_record_score(word: str, score: int) -> str:
        return f"{SECRET_RESULT} {word} {score}"

    @server.tool()
    def mcp_failing_tool(word: str) -> str:
        raise ValueError(f"{SECRET_ERROR} {word}")

    if not sdk_spans:
        server.middleware[:] = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    return server


@pytest.fixture
def instrumented(spans: Spans) -> Iterator[MCPInstrumentor]:
    instrumentor = MCPInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    yield instrumentor
    instrumentor.uninstrument()


async def drive(server: MCPServer) -> list[Any]:
    """List the tools, call two, one that fails and one no listing declared; return what the client got."""
    async with Client(server, cache=None) as client:
        listed = await client.list_tools()
        out: list[Any] = [sorted(tool.name for tool in listed.tools)]
        out.append(await client.call_tool("mcp_lookup_word", {"word": SECRET_ARGUMENT}))
        out.append(await client.call_tool("mcp_record_score", {"word": SECRET_ARGUMENT, "score": 2}))
        out.append(await client.call_tool("mcp_failing_tool", {"word": SECRET_ARGUMENT}))
        out.append(await client.call_tool(MADE_UP, {"word": SECRET_ARGUMENT}))
        return out


def _comparable(results: list[Any]) -> list[Any]:
    return [r if isinstance(r, list) else r.model_dump(mode="json") for r in results]


def _tools(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return [
        s for s in spans if s.kind is SpanKind.CLIENT and (s.attributes or {}).get("mcp.method.name") == "tools/call"
    ]


def test_each_tool_call_is_a_client_tool_span_with_the_server_span_under_it(spans: Spans, instrumented: Any) -> None:
    anyio.run(drive, build_server())
    finished = spans.finished()
    tools = _tools(finished)
    assert [s.name for s in tools] == [
        "execute_tool mcp_lookup_word",
        "execute_tool mcp_record_score",
        "execute_tool mcp_failing_tool",
        f"execute_tool {MADE_UP}",  # raw here; the redacting processors replace it (see below)
    ]
    for tool in tools:
        attributes = dict(tool.attributes or {})
        assert attributes["agentdiag.kind"] == "tool"
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.type"] == "extension"
        assert isinstance(attributes["mcp.protocol.version"], str)
        served = [s for s in finished if s.parent is not None and s.parent.span_id == tool.context.span_id]
        assert len(served) == 1, [s.name for s in served]
        server = served[0]
        assert server.kind is SpanKind.SERVER
        assert server.context.trace_id == tool.context.trace_id
        assert server.name == tool.name
        assert (server.attributes or {})["agentdiag.kind"] == "other"  # the caller's span is the tool span
        assert (server.attributes or {})["mcp.method.name"] == "tools/call"
    statuses = [(s.status.status_code, (s.attributes or {}).get("error.type")) for s in tools]
    assert statuses == [
        (StatusCode.UNSET, None),
        (StatusCode.UNSET, None),
        (StatusCode.ERROR, "tool_error"),
        (StatusCode.ERROR, "tool_error"),
    ]
    assert all(s.status.description is None for s in finished)
    others = [s for s in finished if s.kind is SpanKind.CLIENT and s not in tools]
    assert {s.name for s in others} >= {"tools/list"}
    assert all((s.attributes or {})["agentdiag.kind"] == "other" for s in others)


def test_no_content_and_no_raw_ids_on_any_span(spans: Spans, instrumented: Any) -> None:
    anyio.run(drive, build_server())
    for span in spans.finished():
        text = repr(dict(span.attributes or {})) + repr([(e.name, dict(e.attributes or {})) for e in span.events])
        assert not [s for s in SECRETS if s in text], span.name
        assert "jsonrpc.request.id" not in (span.attributes or {})


def test_listed_names_are_registered_and_made_up_ones_leave_as_other() -> None:
    assert not default_registry.is_tool(MADE_UP)
    with capture_spans(redact=True, policy=STRICT) as capture:
        instrumentor = MCPInstrumentor()
        instrumentor.instrument()  # no provider: the one in use (here the capture's, redacting with STRICT)
        try:
            anyio.run(drive, build_server())
        finally:
            instrumentor.uninstrument()
    assert default_registry.is_tool("mcp_lookup_word") and default_registry.is_tool("mcp_failing_tool")
    assert not default_registry.is_tool(MADE_UP)
    names = [s.name for s in capture.spans() if s.kind is SpanKind.CLIENT]
    assert "execute_tool mcp_lookup_word" in names
    assert "execute_tool _OTHER" in names
    assert not [n for n in names if MADE_UP in n]
    assert {"tools/list"} <= set(names)  # other requests: named by their method


def test_results_and_errors_reach_the_caller_unchanged(spans: Spans) -> None:
    plain = anyio.run(drive, build_server())

    async def missing_resource(server: MCPServer) -> MCPError:
        async with Client(server, cache=None) as client:
            with pytest.raises(MCPError) as caught:
                await client.read_resource("resource://nothing-here")
            return caught.value

    plain_error = anyio.run(missing_resource, build_server())
    instrumentor = MCPInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    try:
        traced = anyio.run(drive, build_server())
        traced_error = anyio.run(missing_resource, build_server())
    finally:
        instrumentor.uninstrument()
    assert _comparable(traced) == _comparable(plain)
    assert type(traced_error) is type(plain_error)
    assert traced_error.error.code == plain_error.error.code
    assert traced_error.error.message == plain_error.error.message
    (failed,) = [s for s in spans.finished() if s.kind is SpanKind.CLIENT and s.name == "resources/read"]
    code = str(plain_error.error.code)
    assert (failed.attributes or {})["error.type"] == code
    assert (failed.attributes or {})["rpc.response.status_code"] == code
    assert failed.status.status_code is StatusCode.ERROR
    assert [e.name for e in failed.events] == ["exception"]
    assert dict(failed.events[0].attributes or {}) == {"exception.type": "mcp.MCPError"}


def test_the_memory_transport_carries_the_trace_context_in_meta(spans: Spans, instrumented: Any) -> None:
    server = build_server()

    async def over_memory() -> None:
        lowlevel = server._lowlevel_server
        async with create_client_server_memory_streams() as (client_streams, server_streams):
            async with anyio.create_task_group() as group:
                options = lowlevel.create_initialization_options()
                group.start_soon(lowlevel.run, server_streams[0], server_streams[1], options)
                async with ClientSession(client_streams[0], client_streams[1]) as session:
                    await session.initialize()
                    await session.list_tools()
                    await session.call_tool("mcp_lookup_word", {"word": SECRET_ARGUMENT})
                group.cancel_scope.cancel()

    anyio.run(over_memory)
    finished = spans.finished()
    (tool,) = _tools(finished)
    (server_span,) = [s for s in finished if s.kind is SpanKind.SERVER and s.name == "execute_tool mcp_lookup_word"]
    # Over a stream the SDK's dispatcher starts its own send span under ours and injects *its* context: the server
    # span's parent is that span when the process's global provider records it, else ours.
    assert server_span.context.trace_id == tool.context.trace_id
    assert server_span.parent is not None and server_span.parent.is_remote
    assert (server_span.attributes or {})["agentdiag.kind"] == "other"
    # A notification has no SDK send span: the server's span is the direct child of ours, through params._meta.
    (sent,) = [s for s in finished if s.kind is SpanKind.CLIENT and s.name == "notifications/initialized"]
    (handled,) = [s for s in finished if s.kind is SpanKind.SERVER and s.name == "notifications/initialized"]
    assert handled.parent is not None and handled.parent.is_remote
    assert handled.parent.span_id == sent.context.span_id
    assert (sent.attributes or {})["agentdiag.kind"] == "other"


def test_uninstrument_restores_everything(spans: Spans) -> None:
    original_send, original_init = ClientSession.send_request, Server.__init__
    instrumentor = MCPInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    assert ClientSession.send_request is not original_send and Server.__init__ is not original_init
    server = build_server()
    assert [m for m in server.middleware if isinstance(m, ServerSpanMiddleware)]
    instrumentor.uninstrument()
    assert ClientSession.send_request is original_send
    assert Server.__init__ is original_init
    assert not [m for m in server.middleware if isinstance(m, ServerSpanMiddleware)]
    anyio.run(drive, server)
    anyio.run(drive, build_server())
    assert spans.finished() == []


def test_instrument_twice_is_idempotent(spans: Spans) -> None:
    instrumentor = MCPInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    try:
        MCPInstrumentor().instrument(tracer_provider=spans.provider)  # a second call: a warning, nothing else
        server = build_server()
        assert len([m for m in server.middleware if isinstance(m, ServerSpanMiddleware)]) == 1
        anyio.run(drive, server)
    finally:
        instrumentor.uninstrument()
    finished = spans.finished()
    assert len(_tools(finished)) == 4
    assert len([s for s in finished if s.kind is SpanKind.SERVER and s.name.startswith("execute_tool")]) == 4
    assert ClientSession.send_request.__qualname__ == "ClientSession.send_request"


def test_content_is_captured_beside_the_tool_span_only_when_capture_is_on(
    spans: Spans,
    instrumented: Any,
    content_sink: RecordingSink,  # noqa: F811 - the fixture imported above
) -> None:
    anyio.run(drive, build_server())
    tools = _tools(spans.finished())
    first = content_sink.for_span(tools[0])
    assert first["gen_ai.tool.call.arguments"] == {"word": SECRET_ARGUMENT}
    result = first["gen_ai.tool.call.result"]
    assert result["content"][0]["text"] == f"{SECRET_RESULT} {SECRET_ARGUMENT}"
    assert result.get("isError") is False
    assert content_sink.for_span(tools[2])["gen_ai.tool.call.result"]["isError"] is True
    captured = {span_id for span_id, _name, _role, _value in content_sink.records}
    assert captured == {s.context.span_id for s in tools}  # tool calls only: no other request, no server span
    for span in spans.finished():  # still never an attribute
        assert not [v for v in (span.attributes or {}).values() if SECRET_ARGUMENT in str(v)]


def test_a_listing_registers_spec_shaped_names_only() -> None:
    listing = {"tools": [{"name": "mcp_listed_ok_7"}, {"name": "Jane Doe mcp7"}, {"name": "sk-proj-" + "a1B2" * 12}]}
    register_listed_tools(listing)
    assert default_registry.is_tool("mcp_listed_ok_7")
    assert not default_registry.is_tool("Jane Doe mcp7")  # a name with spaces, from another party's server: data
    assert not default_registry.is_tool("sk-proj-" + "a1B2" * 12)  # fails the public-safety check


def test_concurrent_calls_each_parent_their_own_server_span(spans: Spans, instrumented: Any) -> None:
    async def gathered(server: MCPServer) -> None:
        async with Client(server, cache=None) as client:
            await client.list_tools()
            calls = [
                client.call_tool("mcp_lookup_word", {"word": SECRET_ARGUMENT}),
                client.call_tool("mcp_record_score", {"word": SECRET_ARGUMENT, "score": 1}),
                client.call_tool("mcp_failing_tool", {"word": SECRET_ARGUMENT}),
            ]
            await asyncio.gather(*calls)

    asyncio.run(gathered(build_server()))
    finished = spans.finished()
    tools = _tools(finished)
    assert sorted(s.name for s in tools) == [
        "execute_tool mcp_failing_tool",
        "execute_tool mcp_lookup_word",
        "execute_tool mcp_record_score",
    ]
    for tool in tools:
        (served,) = [s for s in finished if s.parent is not None and s.parent.span_id == tool.context.span_id]
        assert served.name == tool.name and served.kind is SpanKind.SERVER


def test_with_the_sdk_middleware_kept_our_provider_still_gets_the_server_spans(spans: Spans, instrumented: Any) -> None:
    """The SDK's own server span goes to the global provider (another one here, or none): ours starts its own."""
    server = build_server(sdk_spans=True)
    assert [type(m).__name__ for m in server.middleware][:1] == ["OpenTelemetryMiddleware"]
    anyio.run(drive, server)
    finished = spans.finished()
    for tool in _tools(finished):
        (served,) = [s for s in finished if s.parent is not None and s.parent.span_id == tool.context.span_id]
        assert served.kind is SpanKind.SERVER and served.name == tool.name
