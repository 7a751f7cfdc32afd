"""Reading a trace back from Jaeger's query APIs (v3: OTLP JSON; v1: Jaeger's own JSON) into one shape.

Both APIs are asked by the tests, with a deadline, until the trace has every span the run made.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

from backend_processes import Jaeger, poll


@dataclass
class BackendSpan:
    """One span as a back end returned it."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    attributes: dict[str, Any]
    resource: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def hex_id(value: str) -> str:
    """Jaeger writes ids in hex; protobuf JSON would write them in base64."""
    if not value:
        return ""
    if re.fullmatch(r"[0-9a-fA-F]{16}|[0-9a-fA-F]{32}", value):
        return value.lower()
    try:
        return base64.b64decode(value, validate=True).hex()
    except (binascii.Error, ValueError):
        return value


def any_value(value: dict[str, Any]) -> Any:
    """An OTLP JSON ``AnyValue`` as plain Python."""
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return tuple(any_value(item) for item in value["arrayValue"].get("values", []))
    return None


def otlp_attributes(items: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {item["key"]: any_value(item.get("value", {})) for item in items or []}


def v3_spans(document: dict[str, Any]) -> list[BackendSpan]:
    """The spans of a ``GET /api/v3/traces/{id}`` answer (``{"result": {"resourceSpans": [...]}}``)."""
    data = document.get("result", document)
    spans: list[BackendSpan] = []
    for resource_spans in data.get("resourceSpans", []):
        resource = otlp_attributes(resource_spans.get("resource", {}).get("attributes"))
        for scope in resource_spans.get("scopeSpans", []):
            for span in scope.get("spans", []):
                spans.append(
                    BackendSpan(
                        trace_id=hex_id(span["traceId"]),
                        span_id=hex_id(span["spanId"]),
                        parent_span_id=hex_id(span.get("parentSpanId", "")) or None,
                        name=span["name"],
                        attributes=otlp_attributes(span.get("attributes")),
                        resource=resource,
                        events=[(e["name"], otlp_attributes(e.get("attributes"))) for e in span.get("events", [])],
                    )
                )
    return spans


def _tag(tag: dict[str, Any]) -> Any:
    value = tag.get("value")
    if tag.get("type") == "int64":
        return int(value)  # type: ignore[arg-type]
    if tag.get("type") == "float64":
        return float(value)  # type: ignore[arg-type]
    return value


def v1_spans(document: dict[str, Any]) -> list[BackendSpan]:
    """The spans of a ``GET /api/traces/{id}`` answer (``{"data": [{"spans": [...], "processes": {...}}]}``)."""
    spans: list[BackendSpan] = []
    for trace in document.get("data") or []:
        processes = trace.get("processes", {})
        for span in trace.get("spans", []):
            parents = [ref["spanID"] for ref in span.get("references", []) if ref.get("refType") == "CHILD_OF"]
            process = processes.get(span.get("processID"), {})
            resource = {tag["key"]: _tag(tag) for tag in process.get("tags", [])}
            resource["service.name"] = process.get("serviceName")
            spans.append(
                BackendSpan(
                    trace_id=hex_id(span["traceID"]).rjust(32, "0"),
                    span_id=hex_id(span["spanID"]),
                    parent_span_id=hex_id(parents[0]) if parents else None,
                    name=span["operationName"],
                    attributes={tag["key"]: _tag(tag) for tag in span.get("tags", [])},
                    resource=resource,
                    events=[
                        (
                            next((str(f["value"]) for f in log.get("fields", []) if f["key"] == "event"), ""),
                            {f["key"]: _tag(f) for f in log.get("fields", []) if f["key"] != "event"},
                        )
                        for log in span.get("logs", [])
                    ],
                )
            )
    return spans


def read_trace(
    jaeger: Jaeger, trace_id: str, expected: int, api: str, timeout: float = 60.0
) -> tuple[str, list[BackendSpan]]:
    """Ask Jaeger's ``api`` ("v3" or "v1") for the trace until it has ``expected`` spans: (raw body, spans)."""
    path = f"/api/v3/traces/{trace_id}" if api == "v3" else f"/api/traces/{trace_id}"
    parse = v3_spans if api == "v3" else v1_spans

    def probe() -> tuple[str, list[BackendSpan]] | None:
        status, document = jaeger.get_json(path)
        if status != 200 or document is None:
            return None
        spans = parse(document)
        return (json.dumps(document), spans) if len(spans) >= expected else None

    found: tuple[str, list[BackendSpan]] = poll(f"Jaeger {api} trace {trace_id} with {expected} spans", probe, timeout)
    return found
