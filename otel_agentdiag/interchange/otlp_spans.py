"""OTLP requests to SDK spans: ids, parent, times, kind, status, attributes, events, links, resource and scope.

:func:`request_to_spans` takes a request whole or not at all
(:class:`~otel_agentdiag.interchange.otlp_errors.InvalidRequest` says why); :func:`request_session_ids` names
the sessions of a rejected one so that it can still be filed under them (after hashing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_agentdiag.interchange.otlp_errors import INVALID_ID, INVALID_SPAN, INVALID_TIME, InvalidRequest
from otel_agentdiag.interchange.otlp_request import SESSION_KEYS

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["request_session_ids", "request_to_spans"]

_OTLP_KINDS = {
    1: SpanKind.INTERNAL,
    2: SpanKind.SERVER,
    3: SpanKind.CLIENT,
    4: SpanKind.PRODUCER,
    5: SpanKind.CONSUMER,
}
"""OTLP ``Span.SpanKind`` -> SDK kind; 0 (unspecified) reads as internal, as the SDK's default."""
_OTLP_STATUS = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}
_SAMPLED = trace.TraceFlags(trace.TraceFlags.SAMPLED)


def _value(value: AnyValue) -> Any:
    """An ``AnyValue`` as Python: str, bool, int, float, bytes, tuple (array), dict (key-value list), None."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which)


def _attributes(key_values: Iterable[KeyValue]) -> dict[str, Any]:
    """Every attribute as Python (see :func:`_value`); the policy decides what may stay."""
    out: dict[str, Any] = {}
    for kv in key_values:
        converted = _value(kv.value)
        if converted is not None:
            out[kv.key] = converted
    return out


_PRIMITIVES = (str, bool, int, float)


def _sdk_attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """Only the values the SDK's ``Resource``/``InstrumentationScope`` accept (they log and drop the others):
    scalars and arrays of one scalar type. The policy then decides which of them stay."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, _PRIMITIVES):
            out[key] = value
        elif isinstance(value, tuple) and all(isinstance(v, _PRIMITIVES) for v in value):
            if len({type(v) for v in value}) <= 1:
                out[key] = value
    return out


def _context(trace_id: bytes, span_id: bytes, *, remote: bool = False) -> trace.SpanContext:
    if len(trace_id) != 16 or len(span_id) != 8 or not any(trace_id) or not any(span_id):
        raise InvalidRequest(INVALID_ID)
    return trace.SpanContext(
        int.from_bytes(trace_id, "big"), int.from_bytes(span_id, "big"), is_remote=remote, trace_flags=_SAMPLED
    )


def request_to_spans(request: ExportTraceServiceRequest) -> list[ReadableSpan]:
    """The request's spans as ended SDK spans, unredacted: ids, parent, name, kind, times, status (code and
    description), attributes, events, links, resource (with its schema URL) and instrumentation scope.

    A span without an end time (``endTimeUnixNano`` 0) is returned unfinished (``end_time`` None). Raises
    :class:`InvalidRequest` (``invalid_id``, ``invalid_time`` or ``invalid_span``) when any span of the
    request cannot be one: a request is taken whole or not at all.
    """
    spans: list[ReadableSpan] = []
    for resource_spans in request.resource_spans:
        resource = Resource(
            _sdk_attributes(_attributes(resource_spans.resource.attributes)), resource_spans.schema_url or None
        )
        for scope_spans in resource_spans.scope_spans:
            scope = None
            if scope_spans.HasField("scope") or scope_spans.schema_url:
                scope = InstrumentationScope(
                    scope_spans.scope.name,
                    scope_spans.scope.version or None,
                    scope_spans.schema_url or None,
                    _sdk_attributes(_attributes(scope_spans.scope.attributes)) or None,
                )
            for span in scope_spans.spans:
                spans.append(_span(span, resource, scope))
    return spans


def _span(span: Any, resource: Resource, scope: InstrumentationScope | None) -> ReadableSpan:
    context = _context(span.trace_id, span.span_id)
    parent = None
    if span.parent_span_id:
        # Span flags bit 9 (CONTEXT_IS_REMOTE) says whether the parent was in another process.
        parent = _context(span.trace_id, span.parent_span_id, remote=bool(span.flags & 0x200))
    kind = _OTLP_KINDS.get(span.kind, SpanKind.INTERNAL if span.kind == 0 else None)
    status_code = _OTLP_STATUS.get(span.status.code)
    if kind is None or status_code is None:
        raise InvalidRequest(INVALID_SPAN)
    start = span.start_time_unix_nano
    end = span.end_time_unix_nano or None
    if start <= 0 or (end is not None and end < start):
        raise InvalidRequest(INVALID_TIME)
    events = []
    for event in span.events:
        if event.time_unix_nano <= 0:
            raise InvalidRequest(INVALID_TIME)
        events.append(Event(event.name, _attributes(event.attributes), event.time_unix_nano))
    links = [
        trace.Link(_context(link.trace_id, link.span_id, remote=True), _attributes(link.attributes))
        for link in span.links
    ]
    description = span.status.message if status_code is StatusCode.ERROR and span.status.message else None
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=parent,
        resource=resource,
        attributes=_attributes(span.attributes),
        events=events,
        links=links,
        kind=kind,
        status=Status(status_code, description),
        start_time=start,
        end_time=end,
        instrumentation_scope=scope,
    )


def request_session_ids(request: ExportTraceServiceRequest) -> set[str | int]:
    """The raw session ids (``gen_ai.conversation.id``, else ``session.id``) the request's spans carry, so a
    rejected request can still be filed under its sessions (after hashing)."""
    found: set[str | int] = set()
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                attributes = {kv.key: kv.value for kv in span.attributes if kv.key in SESSION_KEYS}
                for key in SESSION_KEYS:
                    if key in attributes:
                        value = _value(attributes[key])
                        if isinstance(value, (str, int)) and not isinstance(value, bool):
                            found.add(value)
                        break
    return found
