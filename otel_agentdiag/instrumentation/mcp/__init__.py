"""Auto-instrumentation of the ``mcp`` Python SDK (Model Context Protocol), client and server.

Usage::

    from otel_agentdiag.instrumentation.mcp import MCPInstrumentor

    MCPInstrumentor().instrument()       # or instrument(tracer_provider=...)

or with no code at all: ``opentelemetry-instrument python app.py`` (entry point ``agentdiag_mcp``). Instrument
before the server objects are built: a server constructed earlier keeps only the SDK's own span.

**Client** (``ClientSession.send_request``, which every typed request goes through, ``Client`` included): one
CLIENT span per request, following the MCP semantic conventions. ``tools/call`` is ``execute_tool {tool}``
(``agentdiag.kind=tool``, ``gen_ai.operation.name=execute_tool``, ``gen_ai.tool.name``, ``gen_ai.tool.type=extension``);
any other request is ``{mcp.method.name}`` (``agentdiag.kind=other``; its target, a resource URI or a prompt name,
is data and stays out). Both carry ``mcp.method.name``, ``mcp.protocol.version`` and, where the transport has one,
``mcp.session.id`` (beside the span, a keyed digest once exported). A tool result with ``isError: true`` marks the
span ERROR with ``error.type=tool_error``; an error response gives ``error.type`` and ``rpc.response.status_code``
= its JSON-RPC code; any other exception its type. The span is current while the request is sent, and its W3C
trace context goes into the request's ``params._meta`` (a copy; the caller's request is untouched), so the
server's span is its child, in another process too. Notifications the client sends
(``ClientSession.send_notification``) are CLIENT spans ``{mcp.method.name}`` carried the same way.

**Server** (a context-tier middleware added to each ``Server``/``MCPServer`` built while instrumented): one
SERVER span per handled message. mcp 2.x ships its own ``OpenTelemetryMiddleware`` (first in
``Server.middleware``), which starts a SERVER span parented on ``params._meta``; ours then *enriches* that span
(``agentdiag.kind``, protocol version, session id) instead of starting a second one; without it, ours starts the
span itself, parented the same way. A served ``tools/call`` is ``agentdiag.kind=tool`` only when the caller sent no
trace context: a traced caller's span is the one tool span of the call.

**The SDK's own client span.** mcp 2.x's stream dispatcher also starts a CLIENT span (``MCP send {method}``) for
each request it writes; under ours it is a child, renamed ``{mcp.method.name}`` by the redacting processors, with
its JSON-RPC request id dropped.

**Names.** The tool names in a ``tools/list`` result are the server's definitions, so both ends register them;
a tool called by a name no listing declared (one a model made up) leaves as ``_OTHER``.

**Content.** Tool arguments and results, resource contents and prompts never become attributes. With
``configure(capture_content=True)``, a ``tools/call``'s arguments and result are captured beside the client span
for the local store only.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from otel_agentdiag.instrumentation._instrumentor import ClientInstrumentor, Target
from otel_agentdiag.instrumentation.mcp.package import _instruments

__all__ = ["MCPInstrumentor"]


class MCPInstrumentor(ClientInstrumentor):
    """An ``opentelemetry-instrumentation`` instrumentor for the ``mcp`` SDK, client and server (idempotent,
    reversible: ``uninstrument()`` also takes its middleware out of the servers it was added to)."""

    _library = "mcp"
    _records_attempts = False
    _hook: Any = None
    """The server hook of the current instrumentation (``patch.ServerHook``), or None."""

    _instruments = _instruments

    def _targets(self, tracer: trace.Tracer) -> list[Target]:
        from mcp.client.session import ClientSession
        from mcp.server.lowlevel.server import Server

        from otel_agentdiag.instrumentation.mcp import patch

        self._hook = patch.ServerHook(tracer)
        return [
            (ClientSession, "send_request", patch.send_request(tracer)),
            (ClientSession, "send_notification", patch.send_notification(tracer)),
            (Server, "__init__", self._hook.init_wrapper()),
        ]

    def _uninstrument(self, **kwargs: Any) -> None:
        super()._uninstrument(**kwargs)
        hook = getattr(self, "_hook", None)
        if hook is not None:
            self._hook = None
            hook.release()
