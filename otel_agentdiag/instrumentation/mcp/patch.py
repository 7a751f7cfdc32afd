"""MCP requests → spans: the client's request span and the server's handling span.

Nothing here reads a tool's arguments or result, a resource's URI or contents, or a prompt, except the content
readers that run only when content capture is on (and then hand the values to the local store, never to an
attribute). A tool's name is recorded as ``gen_ai.tool.name`` and the redacting processors keep it only when it is
registered: the names a server declares in a ``tools/list`` result are its definitions (code, like a framework's
tool list), so both ends register them from that result; a name only ever seen in a ``tools/call`` (a model's
made-up one) is never registered, and leaves as ``_OTHER``.

Every function here is safe to call from a wrapper: none raises into the agent (failures are logged by type only),
and neither the request the caller passed nor the result it gets back is changed (the trace context is injected
into a copy of the request).
"""

from __future__ import annotations

import typing
import weakref
from collections.abc import Mapping
from typing import Any

from mcp.shared.exceptions import MCPError
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.errors import handle_internal_errors, log_internal_error
from otel_agentdiag._internal.names import NAME_PATTERN, default_registry
from otel_agentdiag.instrumentation._base import error_type_of
from otel_agentdiag.instrumentation._values import field_of, put
from otel_agentdiag.instrumentation._wrappers import Wrapper

TOOL_TYPE = "extension"
"""``gen_ai.tool.type`` of an MCP tool: an agent-side extension, not a function in the agent's own code."""


# --- reading MCP objects ----------------------------------------------------------------------------------
def _tool_names(result: Any) -> list[str]:
    """The names a ``tools/list`` result declares."""
    tools = field_of(result, "tools")
    if not isinstance(tools, (list, tuple)):
        return []
    return [name for name in (field_of(tool, "name") for tool in tools) if isinstance(name, str)]


def register_listed_tools(result: Any) -> None:
    """Register the tool names of a ``tools/list`` result: the server's declared definitions (see module doc).

    Only names of the shape the MCP specification gives tool names (one token of letters, digits, ``_``, ``-``
    and ``.``; :data:`~otel_agentdiag._internal.names.NAME_PATTERN`) are registered, not the multi-word names a
    framework's own definitions may declare: a listing may come from another party's server, so a name with
    spaces (``Jane Doe``) stays data. Each still passes the public-safety check."""
    with handle_internal_errors("registering MCP tool names"):
        names = [name for name in _tool_names(result) if NAME_PATTERN.fullmatch(name)]
        if names:
            default_registry.register_valid("tool", names)


def is_tool_error(result: Any) -> bool:
    """Whether a ``tools/call`` result reports a tool failure (``isError: true``)."""
    if isinstance(result, Mapping):
        return result.get("isError") is True or result.get("is_error") is True
    return getattr(result, "is_error", None) is True


def _mcp_error_code(exc: BaseException) -> str | None:
    """The JSON-RPC error code of an error response (``MCPError``), as the conventions record it."""
    if not isinstance(exc, MCPError):
        return None
    code = getattr(getattr(exc, "error", None), "code", None)
    return str(code) if type(code) is int else None


def _session_id(value: Any) -> str | None:
    """The transport's session id (Streamable HTTP), where the object exposes one publicly; else None."""
    session_id = getattr(value, "session_id", None)
    return session_id if isinstance(session_id, str) and session_id else None


SESSION_HEADER = "mcp-session-id"
"""The Streamable HTTP header that carries the session id (MCP transports spec)."""


def _header_session_id(request: Any) -> str | None:
    """The session id a Streamable HTTP request carries in its ``mcp-session-id`` header (the server's view), or
    None (stdio, stateless HTTP, the ``initialize`` request before the server assigned one)."""
    headers = getattr(request, "headers", None)
    getter = getattr(headers, "get", None)
    value = getter(SESSION_HEADER) if callable(getter) else None
    return value if isinstance(value, str) and value else None


def request_attributes(method: str, tool: str | None, protocol_version: Any) -> dict[str, Any]:
    """The attributes of a request's span at its start (``tool``: the ``tools/call`` target, raw)."""
    attributes: dict[str, Any] = {sc.MCP_METHOD_NAME: method}
    if isinstance(protocol_version, str):
        attributes[sc.MCP_PROTOCOL_VERSION] = protocol_version
    if method == "tools/call":
        attributes[sc.GEN_AI_OPERATION_NAME] = sc.OP_EXECUTE_TOOL
        attributes[sc.GEN_AI_TOOL_TYPE] = TOOL_TYPE
        put(attributes, sc.GEN_AI_TOOL_NAME, tool)
    return attributes


def span_name(method: str, tool: str | None) -> str:
    """``execute_tool {tool}`` for a tool call, else ``{mcp.method.name}`` (the other targets are data)."""
    if method == "tools/call":
        return f"{sc.OP_EXECUTE_TOOL} {tool}" if tool else sc.OP_EXECUTE_TOOL
    return method


def _fail(span: trace.Span, exc: BaseException) -> None:
    """``error.type`` (the JSON-RPC code of an error response, else the exception's type), an ``exception`` event
    with the type only, status ERROR without a description (an error message may quote the request)."""
    code = _mcp_error_code(exc)
    attributes: dict[str, Any] = {sc.ERROR_TYPE: code if code is not None else error_type_of(exc)}
    put(attributes, sc.RPC_RESPONSE_STATUS_CODE, code)
    span.set_attributes(attributes)
    span.add_event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_TYPE: error_type_of(exc)})
    span.set_status(Status(StatusCode.ERROR))


def _tool_failed(span: trace.Span) -> None:
    span.set_attribute(sc.ERROR_TYPE, sc.MCP_TOOL_ERROR)
    span.set_status(Status(StatusCode.ERROR))


# --- the client ---------------------------------------------------------------------------------------------
class _ClientCall:
    """One request the client sends: its span, started current, ended exactly once."""

    __slots__ = ("method", "span", "tool")

    def __init__(self, span: trace.Span, method: str, tool: str | None) -> None:
        self.span = span
        self.method = method
        self.tool = tool

    @classmethod
    def begin(cls, tracer: trace.Tracer, session: Any, request: Any) -> _ClientCall | None:
        try:
            method = field_of(request, "method")
            if not isinstance(method, str):
                return None
            params = field_of(request, "params")
            tool = field_of(params, "name") if method == "tools/call" else None
            tool = tool if isinstance(tool, str) else None
            attributes = request_attributes(method, tool, getattr(session, "protocol_version", None))
            attributes[sc.AGENTDIAG_KIND] = sc.KIND_TOOL if method == "tools/call" else sc.KIND_OTHER
            session_id = _session_id(session)
            put(attributes, sc.MCP_SESSION_ID, session_id)  # beside the span, hashed by our processors
            span = _ids.start_span(
                tracer,
                span_name(method, tool),
                context=otel_context.get_current(),
                kind=SpanKind.CLIENT,
                attributes=attributes,
            )
            call = cls(span, method, tool)
            if method == "tools/call" and _content.enabled():
                _content.capture(span, sc.CONTENT_TOOL_ARGUMENTS, field_of(params, "arguments"))
            return call
        except Exception as exc:  # noqa: BLE001
            log_internal_error("starting an MCP client span", exc)
            return None

    def carrying_context(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], name: str
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The call's arguments with the message (positional, or keyword ``name``) replaced by a copy whose
        ``params._meta`` carries this span's W3C trace context (``traceparent``, ``tracestate``; SEP-414), so the
        server's span is its child. The caller's message is not changed; on any doubt the arguments are returned as
        they were."""
        try:
            message: Any = args[0] if args else kwargs.get(name)
            copy = with_trace_context(message, trace.set_span_in_context(self.span))
            if copy is None:
                return args, kwargs
            if args:
                return (copy, *args[1:]), kwargs
            return args, {**kwargs, name: copy}
        except Exception as exc:  # noqa: BLE001
            log_internal_error("propagating the trace context to an MCP server", exc)
            return args, kwargs

    def finish(self, session: Any, result: Any) -> None:
        with handle_internal_errors("recording an MCP response"):
            span = self.span
            if self.method == "initialize":
                version = field_of(result, "protocol_version")
                if isinstance(version, str):
                    span.set_attribute(sc.MCP_PROTOCOL_VERSION, version)
            elif self.method == "tools/list":
                register_listed_tools(result)
            elif self.method == "tools/call":
                if _content.enabled():
                    _content.capture(span, sc.CONTENT_TOOL_RESULT, _dump(result))
                if is_tool_error(result):
                    _tool_failed(span)
            session_id = _session_id(session)
            if session_id is not None:
                _ids.set_attributes(span, {sc.MCP_SESSION_ID: session_id})
        self._end()

    def fail(self, exc: BaseException) -> None:
        with handle_internal_errors("recording an MCP error"):
            _fail(self.span, exc)
        self._end()

    def _end(self) -> None:
        with handle_internal_errors("ending an MCP span"):
            self.span.end()


def _params_model(message_type: type) -> Any:
    """The params model of a request or notification type that has none set: the model in its ``params``
    annotation (``PaginatedRequestParams | None``) that has a ``meta`` (``_meta``) field, or None."""
    fields = getattr(message_type, "model_fields", None)
    field = fields.get("params") if isinstance(fields, Mapping) else None
    annotation = getattr(field, "annotation", None)
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and "meta" in (getattr(candidate, "model_fields", None) or {}):
            return candidate
    return None


def with_trace_context(message: Any, ctx: otel_context.Context) -> Any:
    """A copy of an MCP request or notification (a pydantic model) whose ``params._meta`` carries ``ctx`` through
    the configured propagators, or None when there is nothing to inject or no ``_meta`` to carry it. May raise
    (callers contain it)."""
    if not hasattr(message, "model_copy"):
        return None
    params: Any = field_of(message, "params")
    meta = field_of(params, "meta") if params is not None else None
    carrier: dict[str, Any] = dict(meta) if isinstance(meta, Mapping) else {}
    propagate.inject(carrier, context=ctx)
    if not carrier or carrier == meta:
        return None
    if params is None:
        model = _params_model(type(message))
        if model is None:
            return None
        new_params = model.model_validate({"_meta": carrier})
    elif "meta" in (getattr(type(params), "model_fields", None) or {}):
        new_params = params.model_copy(update={"meta": carrier})
    else:
        return None
    return message.model_copy(update={"params": new_params})


def _dump(result: Any) -> Any:
    """A result as plain data for content capture (a pydantic model dumped the way it goes on the wire)."""
    dump = getattr(result, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True, exclude_none=True)
    return result


def _client_wrapper(tracer: trace.Tracer, argument: str, *, with_result: bool) -> Wrapper:
    """A wrapper for a ``ClientSession`` method whose first argument (keyword ``argument``) is the message sent:
    a CLIENT span per message, current while it is sent, its trace context carried in ``params._meta``.
    ``with_result``: the method returns the reply (requests), which the span reads its outcome from."""

    async def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        if not is_instrumentation_enabled():
            return await wrapped(*args, **kwargs)
        call = _ClientCall.begin(tracer, instance, args[0] if args else kwargs.get(argument))
        if call is None:
            return await wrapped(*args, **kwargs)
        call_args, call_kwargs = call.carrying_context(tuple(args), dict(kwargs), argument)
        token = otel_context.attach(trace.set_span_in_context(call.span))
        try:
            result = await wrapped(*call_args, **call_kwargs)
        except BaseException as exc:
            otel_context.detach(token)
            call.fail(exc)
            raise
        otel_context.detach(token)
        call.finish(instance, result if with_result else None)
        return result

    return wrapper


def send_request(tracer: trace.Tracer) -> Wrapper:
    """A wrapper for ``ClientSession.send_request``, the funnel of every typed request the client sends."""
    return _client_wrapper(tracer, "request", with_result=True)


def send_notification(tracer: trace.Tracer) -> Wrapper:
    """A wrapper for ``ClientSession.send_notification``: a CLIENT span ``{mcp.method.name}`` per notification the
    client sends (``notifications/initialized``, ``notifications/cancelled``, ...), its trace context carried in
    ``params._meta`` so the server's span of the notification joins the trace."""
    return _client_wrapper(tracer, "notification", with_result=False)


# --- the server ---------------------------------------------------------------------------------------------
def _remote_parent(meta: Any) -> otel_context.Context | None:
    """The caller's context from a request's ``params._meta`` (W3C trace context), or None."""
    if not isinstance(meta, Mapping) or "traceparent" not in meta:
        return None
    carrier = {key: value for key, value in meta.items() if isinstance(key, str) and isinstance(value, str)}
    ctx = propagate.extract(carrier)
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def _sdk_server_span(method: str, tracer: trace.Tracer) -> trace.Span | None:
    """The mcp SDK's own server span for this message (its middleware runs before ours), when it is recording into
    the provider ``tracer`` belongs to. The SDK traces into the global provider; when ours is another one (an
    ``instrument(tracer_provider=...)``, a ``configure(set_global=False)``), its span is not ours to enrich: the
    resource of an SDK tracer and of the spans its provider makes is one object (public ``resource`` attributes)."""
    span = trace.get_current_span()
    if not span.is_recording() or getattr(span, "kind", None) is not SpanKind.SERVER:
        return None
    attributes = getattr(span, "attributes", None)
    if not isinstance(attributes, Mapping) or attributes.get(sc.MCP_METHOD_NAME) != method:
        return None
    ours = getattr(tracer, "resource", None)  # None: a proxy of the global provider, the SDK's own
    if ours is not None and getattr(span, "resource", None) is not ours:
        return None
    return span


class ServerSpanMiddleware:
    """A context-tier server middleware (``Server.middleware``): the server span of every handled message.

    When the mcp SDK's own ``OpenTelemetryMiddleware`` (first in the list, on by default) has started the span,
    this one *enriches* it (one span per message); otherwise it starts the span itself, parented on the context the
    client put in ``params._meta``. A ``tools/call`` span is ``agentdiag.kind=tool`` only when no traced caller
    sent it: a traced client's ``execute_tool`` span is the one tool span of the call (the server's is its child,
    ``other``), so counts and repetition see each call once. Inert once :attr:`active` is False.
    """

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer
        self.active = True

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if not self.active or not is_instrumentation_enabled():
            return await call_next(ctx)
        started = self._begin(ctx)
        if started is None:
            return await call_next(ctx)
        span, owns, method, token = started
        try:
            result = await call_next(ctx)
        except BaseException as exc:
            self._end(span, owns, token, exc=exc)
            raise
        self._end(span, owns, token, method=method, result=result)
        return result

    def _begin(self, ctx: Any) -> tuple[trace.Span, bool, str, object | None] | None:
        try:
            method = getattr(ctx, "method", None)
            if not isinstance(method, str):
                return None
            params = getattr(ctx, "params", None)
            tool = field_of(params, "name") if method == "tools/call" else None
            tool = tool if isinstance(tool, str) else None
            parent = _remote_parent(getattr(ctx, "meta", None))
            attributes = request_attributes(method, tool, getattr(ctx, "protocol_version", None))
            attributes[sc.AGENTDIAG_KIND] = sc.KIND_TOOL if method == "tools/call" and parent is None else sc.KIND_OTHER
            session_id = _session_id(getattr(ctx, "session", None)) or _header_session_id(getattr(ctx, "request", None))
            put(attributes, sc.MCP_SESSION_ID, session_id)
            span = _sdk_server_span(method, self.tracer)
            if span is not None:
                _ids.set_attributes(span, attributes)
                return span, False, method, None
            span = _ids.start_span(
                self.tracer,
                span_name(method, tool),
                context=parent if parent is not None else otel_context.get_current(),
                kind=SpanKind.SERVER,
                attributes=attributes,
            )
            token = otel_context.attach(trace.set_span_in_context(span))
            return span, True, method, token
        except Exception as exc:  # noqa: BLE001
            log_internal_error("starting an MCP server span", exc)
            return None

    @staticmethod
    def _end(
        span: trace.Span,
        owns: bool,
        token: object | None,
        *,
        method: str = "",
        result: Any = None,
        exc: BaseException | None = None,
    ) -> None:
        with handle_internal_errors("ending an MCP server span"):
            if token is not None:
                otel_context.detach(token)  # type: ignore[arg-type]
            if exc is not None:
                if owns:  # the SDK's span records its own failure
                    _fail(span, exc)
            elif method == "tools/list":
                register_listed_tools(result)
            elif method == "tools/call" and owns and is_tool_error(result):
                _tool_failed(span)  # the SDK's span marks its own tool errors
            if owns:
                span.end()


class ServerHook:
    """Adds a :class:`ServerSpanMiddleware` to each server constructed while instrumented, and takes it out of every
    one of them again on :meth:`release`."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.middleware = ServerSpanMiddleware(tracer)
        self._servers: weakref.WeakSet[Any] = weakref.WeakSet()

    def init_wrapper(self) -> Wrapper:
        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            result = wrapped(*args, **kwargs)
            with handle_internal_errors("adding the MCP server middleware"):
                chain = getattr(instance, "middleware", None)
                if isinstance(chain, list) and self.middleware not in chain:
                    chain.append(self.middleware)
                    self._servers.add(instance)
            return result

        return wrapper

    def release(self) -> None:
        self.middleware.active = False
        for server in list(self._servers):
            chain = getattr(server, "middleware", None)
            while isinstance(chain, list) and self.middleware in chain:
                chain.remove(self.middleware)
        self._servers = weakref.WeakSet()
