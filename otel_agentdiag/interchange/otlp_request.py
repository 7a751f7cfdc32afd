"""One OTLP/JSON object and one ``ExportTraceServiceRequest``: protobuf's JSON mapping with hex ids, validated.

:func:`request_to_otlp_json` writes the object of a request; :func:`parse_request` reads one back, refusing ids
that are not lowercase hex of the right length (:class:`~otel_agentdiag.interchange.otlp_errors.InvalidRequest`).
The proto packages (the ``otlp`` extra) are imported when a function needs them (:func:`request_type`,
:func:`span_encoder`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_agentdiag import semconv as sc
from otel_agentdiag.interchange.otlp_errors import INVALID_ID, NOT_OTLP, InvalidRequest, MissingDependency

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = [
    "SESSION_KEYS",
    "field",
    "parse_request",
    "raw_session_ids",
    "request_to_otlp_json",
    "request_type",
    "span_encoder",
]

_HEX = frozenset("0123456789abcdef")
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
SESSION_KEYS = (sc.GEN_AI_CONVERSATION_ID, sc.SESSION_ID)
"""The attributes that name a span's session, the first one present winning."""


def request_type() -> type[ExportTraceServiceRequest]:
    """The proto ``ExportTraceServiceRequest`` class; raises :class:`MissingDependency` without the packages."""
    try:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError as exc:
        raise MissingDependency(
            "OTLP-JSON needs the OpenTelemetry proto packages: pip install -e '.[otlp]' in a checkout of otel-agentdiag"
        ) from exc
    return ExportTraceServiceRequest


def span_encoder() -> Callable[[Sequence[ReadableSpan]], ExportTraceServiceRequest]:
    """The OTLP exporter's own encoder of SDK spans into a request; raises :class:`MissingDependency` without it."""
    try:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    except ImportError:
        try:
            from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import encode_spans
        except ImportError as exc:
            raise MissingDependency(
                "OTLP-JSON needs opentelemetry-exporter-otlp-proto-common:"
                " pip install -e '.[otlp]' in a checkout of otel-agentdiag"
            ) from exc
    encoder: Callable[[Sequence[ReadableSpan]], ExportTraceServiceRequest] = encode_spans
    return encoder


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


def parse_request(value: Any) -> ExportTraceServiceRequest:
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
            for scope in field(resource, "scopeSpans", "scope_spans"):
                for span in field(scope, "spans", "spans"):
                    _b64_ids(span, parent=True)
                    if isinstance(span, dict):
                        for link in field(span, "links", "links"):
                            _b64_ids(link, parent=False)
    except InvalidRequest:
        raise
    except (TypeError, AttributeError):
        raise InvalidRequest(NOT_OTLP) from None
    request = request_type()()
    try:
        json_format.ParseDict(value, request, ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError, RecursionError):
        raise InvalidRequest(NOT_OTLP) from None
    except SystemError:
        # protobuf's upb backend reports a lone surrogate (a JSON "\ud800" escape) in a name it looks up, e.g.
        # {"resourceSpans": ["\ud800"]}, as a SystemError wrapping a UnicodeEncodeError.
        raise InvalidRequest(NOT_OTLP) from None
    return request


def field(message: Any, name: str, alias: str) -> list[Any]:
    if not isinstance(message, dict):
        return []
    found = message.get(name, message.get(alias, []))
    return found if isinstance(found, list) else []


def raw_session_ids(value: Any) -> frozenset[str | int]:
    """The session ids (``gen_ai.conversation.id``, else ``session.id``) the spans of an OTLP/JSON object name."""
    found: set[str | int] = set()
    if not isinstance(value, dict):
        return frozenset()
    for resource in field(value, "resourceSpans", "resource_spans"):
        for scope in field(resource, "scopeSpans", "scope_spans"):
            for span in field(scope, "spans", "spans"):
                named: dict[str, Any] = {}
                for kv in field(span, "attributes", "attributes"):
                    if isinstance(kv, dict) and kv.get("key") in SESSION_KEYS and isinstance(kv.get("value"), dict):
                        raw = kv["value"].get("stringValue", kv["value"].get("string_value"))
                        if raw is None:
                            raw = kv["value"].get("intValue", kv["value"].get("int_value"))
                            raw = int(raw) if isinstance(raw, (str, int)) and str(raw).lstrip("-").isdigit() else None
                        if isinstance(raw, (str, int)) and not isinstance(raw, bool):
                            named[kv["key"]] = raw
                for key in SESSION_KEYS:
                    if key in named:
                        found.add(named[key])
                        break
    return frozenset(found)
