"""OTLP-JSON: the ``ExportTraceServiceRequest`` JSON encoding, one compact document per line.

This is what the OpenTelemetry Collector's ``file`` exporter writes and its ``otlpjsonfile`` receiver reads,
what Jaeger's backend accepts on ``/v1/traces`` and in the UI's "upload JSON", and what any OTLP/HTTP receiver
accepts as ``application/json``. The encoding is protobuf's JSON mapping of the OpenTelemetry proto messages
(built by the OpenTelemetry exporter's own encoder, not by hand) with the two differences the OTLP
specification makes (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding):

- ``traceId``, ``spanId`` and ``parentSpanId`` (of spans and links) are lowercase hex strings, not base64;
- enum values (``kind``, ``status.code``) are integers.

Keys are lowerCamelCase; 64-bit integers (times in nanoseconds, ``intValue``) are decimal strings.

Reading (:func:`read_otlp_json`) accepts one request per line (JSON Lines) or one document over several
lines (pretty-printed), validates every document on its own, and reports the bad ones by line number and
reason code, never by content. :func:`request_to_spans` turns a request into SDK spans (ids, parent, times,
kind, status, attributes of every ``AnyValue`` type, events, links, resource, scope) or says why it cannot.

Needs ``opentelemetry-proto`` and ``opentelemetry-exporter-otlp-proto-common`` (the ``otlp`` extra); they are
imported when a function needs them.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.files import write_private_file

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = [
    "INVALID_ID",
    "INVALID_SPAN",
    "INVALID_TIME",
    "LINE_TOO_LONG",
    "LINE_REASONS",
    "MALFORMED_JSON",
    "MAX_LINE_BYTES",
    "NOT_OTLP",
    "InvalidRequest",
    "LineResult",
    "MissingDependency",
    "read_otlp_json",
    "request_session_ids",
    "request_to_spans",
    "write_otlp_json",
]

MALFORMED_JSON = "malformed_json"
"""The line is not JSON (or not UTF-8)."""
NOT_OTLP = "not_otlp"
"""The line is JSON but not an ``ExportTraceServiceRequest`` (no ``resourceSpans`` list, wrong field types)."""
INVALID_ID = "invalid_id"
"""A trace, span, parent or link id is not lowercase hex of the right length, or is all zeros."""
INVALID_TIME = "invalid_time"
"""A span without a start time, ending before it starts, or an event without a time."""
INVALID_SPAN = "invalid_span"
"""A span kind or status code the OTLP specification does not define."""
LINE_TOO_LONG = "line_too_long"
"""The line is longer than :data:`MAX_LINE_BYTES`."""
LINE_REASONS = (MALFORMED_JSON, NOT_OTLP, INVALID_ID, INVALID_TIME, INVALID_SPAN, LINE_TOO_LONG)
"""Why a line of OTLP-JSON is rejected (the ``reason`` of a violation record)."""
_CONTENT_REASONS = frozenset({INVALID_ID, INVALID_TIME, INVALID_SPAN})

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line read (a Collector batch of thousands of spans fits many times over)."""
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
"""The largest file read as ONE pretty-printed document (a larger one is read line by line)."""
SPANS_PER_LINE = 512
"""At most this many spans per written request (one trace per request unless it is larger)."""

_HEX = frozenset("0123456789abcdef")
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
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
_SESSION_KEYS = (sc.GEN_AI_CONVERSATION_ID, sc.SESSION_ID)


class MissingDependency(RuntimeError):
    """The OpenTelemetry proto packages are not installed (``pip install 'otel-agentdiag[otlp]'``)."""


class InvalidRequest(ValueError):
    """A well-formed request whose content cannot be a span; ``reason`` is one of :data:`LINE_REASONS`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class LineResult:
    """One document of an OTLP-JSON file: the parsed request, or why there is none.

    ``line`` is the 1-based line the document starts on; ``item`` its 1-based index when the line holds a JSON
    array of requests (None otherwise). ``reason`` (one of :data:`LINE_REASONS`) is set exactly when
    ``request`` is None. ``session_ids`` are the raw session ids the spans of a rejected request name, so that
    it can be filed under its sessions (after hashing; never stored as they are).
    """

    line: int
    request: ExportTraceServiceRequest | None
    reason: str | None = None
    item: int | None = None
    session_ids: frozenset[str | int] = frozenset()

    @property
    def is_otlp(self) -> bool:
        """Whether the document is an OTLP request at all (parsed, or rejected only for the content of a span)."""
        return self.request is not None or self.reason in _CONTENT_REASONS

    @property
    def location(self) -> str:
        """``line N`` (or ``line N item K``): where the document is, never what it holds."""
        return f"line {self.line}" if self.item is None else f"line {self.line} item {self.item}"


# -- dependencies ----------------------------------------------------------------------------------------------
def _request_type() -> type[ExportTraceServiceRequest]:
    try:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError as exc:
        raise MissingDependency(
            "OTLP-JSON needs the OpenTelemetry proto packages: pip install 'otel-agentdiag[otlp]'"
        ) from exc
    return ExportTraceServiceRequest


def _encoder() -> Callable[[Sequence[ReadableSpan]], ExportTraceServiceRequest]:
    try:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    except ImportError:
        try:
            from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import encode_spans
        except ImportError as exc:
            raise MissingDependency(
                "OTLP-JSON needs opentelemetry-exporter-otlp-proto-common: pip install 'otel-agentdiag[otlp]'"
            ) from exc
    encoder: Callable[[Sequence[ReadableSpan]], ExportTraceServiceRequest] = encode_spans
    return encoder


# -- files -----------------------------------------------------------------------------------------------------


# -- writing ---------------------------------------------------------------------------------------------------
def _b64_to_hex(value: Any) -> Any:
    return base64.b64decode(value).hex() if isinstance(value, str) else value


def _hex_ids(span_like: dict[str, Any]) -> None:
    for key in _ID_FIELDS:
        if key in span_like:
            span_like[key] = _b64_to_hex(span_like[key])


def request_to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """The OTLP/JSON object of a request: protobuf's JSON mapping, with hex ids and integer enums."""
    from google.protobuf import json_format  # type: ignore[import-untyped]

    document: dict[str, Any] = json_format.MessageToDict(
        request, preserving_proto_field_name=False, use_integers_for_enums=True
    )
    for resource_spans in document.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return document


def _chunks(spans: Sequence[ReadableSpan]) -> Iterator[list[ReadableSpan]]:
    """The spans grouped by trace (first seen first), at most :data:`SPANS_PER_LINE` per group."""
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        context = span.context
        by_trace.setdefault(context.trace_id if context is not None else 0, []).append(span)
    for group in by_trace.values():
        for start in range(0, len(group), SPANS_PER_LINE):
            yield group[start : start + SPANS_PER_LINE]


def write_otlp_json(spans: Sequence[ReadableSpan], path: Path) -> int:
    """Write ``spans`` to ``path`` as OTLP-JSON Lines: one compact ``ExportTraceServiceRequest`` per line (per
    trace, split beyond :data:`SPANS_PER_LINE` spans). Mode 0600, atomic. Returns the size of the file in bytes.

    The spans are written as given: pass the strict-policy projection, never raw spans. Raises
    :class:`MissingDependency` without the ``otlp`` extra, ``OSError`` when the file cannot be written.
    """
    encode = _encoder()
    _request_type()
    lines = [
        json.dumps(request_to_otlp_json(encode(chunk)), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        for chunk in _chunks(spans)
    ]

    def write(stream: IO[str]) -> None:
        for line in lines:
            stream.write(line)
            stream.write("\n")

    return write_private_file(path, write)


# -- reading ---------------------------------------------------------------------------------------------------
def _read_lines(stream: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, bytes)`` per line; ``None`` for a line longer than :data:`MAX_LINE_BYTES` (skipped
    without holding it in memory)."""
    number = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # the rest of the long line
                raw = stream.readline(1024 * 1024)
            yield number, None
            continue
        yield number, raw


def _load(raw: bytes) -> tuple[Any, str | None]:
    try:
        return json.loads(raw.decode("utf-8")), None
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, MALFORMED_JSON


def _hex_to_b64(value: Any, size: int, *, optional: bool = False) -> str:
    """A hex id of ``size`` bytes as protobuf's base64; raises :class:`InvalidRequest` otherwise."""
    if optional and value in (None, ""):
        return ""
    if not isinstance(value, str) or len(value) != 2 * size or not set(value.lower()) <= _HEX:
        raise InvalidRequest(INVALID_ID)
    raw = bytes.fromhex(value)
    if not any(raw):
        raise InvalidRequest(INVALID_ID)
    return base64.b64encode(raw).decode("ascii")


def _b64_ids(span_like: Any, *, parent: bool) -> None:
    if not isinstance(span_like, dict):
        return  # ParseDict reports the wrong type
    for key, alias, size, optional in (
        ("traceId", "trace_id", 16, False),
        ("spanId", "span_id", 8, False),
        ("parentSpanId", "parent_span_id", 8, True),
    ):
        if key == "parentSpanId" and not parent:
            continue
        name = key if key in span_like or alias not in span_like else alias
        if name in span_like or not optional:
            span_like[name] = _hex_to_b64(span_like.get(name), size, optional=optional)


def _parse_request(value: Any) -> ExportTraceServiceRequest:
    """An OTLP/JSON object as a request (ids from hex); raises :class:`InvalidRequest`."""
    from google.protobuf import json_format  # type: ignore[import-untyped]

    if not isinstance(value, dict):
        raise InvalidRequest(NOT_OTLP)
    key = "resourceSpans" if "resourceSpans" in value else "resource_spans"
    resource_spans = value.get(key)
    if not isinstance(resource_spans, list):
        raise InvalidRequest(NOT_OTLP)
    try:
        for resource in resource_spans:
            for scope in _field(resource, "scopeSpans", "scope_spans"):
                for span in _field(scope, "spans", "spans"):
                    _b64_ids(span, parent=True)
                    if isinstance(span, dict):
                        for link in _field(span, "links", "links"):
                            _b64_ids(link, parent=False)
    except InvalidRequest:
        raise
    except (TypeError, AttributeError):
        raise InvalidRequest(NOT_OTLP) from None
    request = _request_type()()
    try:
        json_format.ParseDict(value, request, ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError, RecursionError):
        raise InvalidRequest(NOT_OTLP) from None
    except SystemError:
        # protobuf's upb backend reports a lone surrogate (a JSON "\ud800" escape) in a name it looks up, e.g.
        # {"resourceSpans": ["\ud800"]}, as a SystemError wrapping a UnicodeEncodeError.
        raise InvalidRequest(NOT_OTLP) from None
    return request


def _field(message: Any, name: str, alias: str) -> list[Any]:
    if not isinstance(message, dict):
        return []
    found = message.get(name, message.get(alias, []))
    return found if isinstance(found, list) else []


def _results(value: Any, line: int) -> Iterator[LineResult]:
    if isinstance(value, list):  # an array of requests (as Jaeger UI's upload accepts)
        if not value:
            yield LineResult(line, None, NOT_OTLP)
        for index, element in enumerate(value, start=1):
            yield _result(element, line, index)
        return
    yield _result(value, line, None)


def _result(value: Any, line: int, item: int | None) -> LineResult:
    try:
        return LineResult(line, _parse_request(value), None, item)
    except InvalidRequest as exc:
        return LineResult(line, None, exc.reason, item, _raw_session_ids(value))


def _raw_session_ids(value: Any) -> frozenset[str | int]:
    """The session ids (``gen_ai.conversation.id``, else ``session.id``) the spans of an OTLP/JSON object name."""
    found: set[str | int] = set()
    if not isinstance(value, dict):
        return frozenset()
    for resource in _field(value, "resourceSpans", "resource_spans"):
        for scope in _field(resource, "scopeSpans", "scope_spans"):
            for span in _field(scope, "spans", "spans"):
                named: dict[str, Any] = {}
                for kv in _field(span, "attributes", "attributes"):
                    if isinstance(kv, dict) and kv.get("key") in _SESSION_KEYS and isinstance(kv.get("value"), dict):
                        raw = kv["value"].get("stringValue", kv["value"].get("string_value"))
                        if raw is None:
                            raw = kv["value"].get("intValue", kv["value"].get("int_value"))
                            raw = int(raw) if isinstance(raw, (str, int)) and str(raw).lstrip("-").isdigit() else None
                        if isinstance(raw, (str, int)) and not isinstance(raw, bool):
                            named[kv["key"]] = raw
                for key in _SESSION_KEYS:
                    if key in named:
                        found.add(named[key])
                        break
    return frozenset(found)


def read_otlp_json(path: Path) -> Iterator[LineResult]:
    """Every document of an OTLP-JSON file, in order: a request per line (JSON Lines, blank lines skipped), or
    one document spread over several lines (pretty-printed; its result carries the line it starts on). A line
    holding a JSON array yields one result per element.

    Raises ``OSError`` when the file cannot be opened or read and :class:`MissingDependency` without the proto
    packages; a bad document is a result with a ``reason``, never an exception.
    """
    _request_type()
    with open(path, "rb") as stream:
        lines = _read_lines(stream)
        for number, raw in lines:
            if raw is None:
                yield LineResult(number, None, LINE_TOO_LONG)
                break
            if not raw.strip():
                continue
            value, error = _load(raw)
            if error is not None:
                document = _whole_document(stream)
                if document is not None:
                    yield from _results(document, number)
                    return
                yield LineResult(number, None, error)
            else:
                yield from _results(value, number)
            break
        for number, raw in lines:
            if raw is None:
                yield LineResult(number, None, LINE_TOO_LONG)
                continue
            if not raw.strip():
                continue
            value, error = _load(raw)
            if error is not None:
                yield LineResult(number, None, error)
            else:
                yield from _results(value, number)


def _whole_document(stream: IO[bytes]) -> Any | None:
    """The whole file as one JSON document when it is one (its first line alone was not), else None; leaves the
    stream where it was."""
    position = stream.tell()
    try:
        size = os.fstat(stream.fileno()).st_size
        if size > MAX_DOCUMENT_BYTES:
            return None
        stream.seek(0)
        value, error = _load(stream.read())
        return value if error is None and isinstance(value, (dict, list)) else None
    finally:
        stream.seek(position)


# -- requests to SDK spans ----------------------------------------------------------------------------------------
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
                attributes = {kv.key: kv.value for kv in span.attributes if kv.key in _SESSION_KEYS}
                for key in _SESSION_KEYS:
                    if key in attributes:
                        value = _value(attributes[key])
                        if isinstance(value, (str, int)) and not isinstance(value, bool):
                            found.add(value)
                        break
    return found
