"""Jaeger-JSON: the trace format Jaeger UI's "upload JSON" and Grafana's Jaeger "Import trace" render.

It is the shape of Jaeger's query API (``GET /api/traces/{id}``), written with the mapping Jaeger's own OTLP
translator uses::

    {"data": [{"traceID": "<32 hex>",
               "spans": [{"traceID", "spanID": "<16 hex>", "operationName",
                          "references": [{"refType": "CHILD_OF", "traceID", "spanID"}],   # the parent
                          "startTime": <µs since the epoch>, "duration": <µs>,
                          "tags": [{"key", "type": "string|bool|int64|float64", "value"}],
                          "logs": [{"timestamp": <µs>, "fields": [{"key": "event", ...}, ...]}],
                          "processID": "p1", "warnings": null, "flags": 1}],
               "processes": {"p1": {"serviceName", "tags": [...]}},
               "warnings": null}],
     "total": 0, "limit": 0, "offset": 0, "errors": null}

- a link becomes a ``FOLLOWS_FROM`` reference;
- span kind, status and instrumentation scope become the tags ``span.kind``, ``otel.status_code``
  (``OK``/``ERROR``), ``otel.status_description``, ``error`` (``true`` on an error) and ``otel.scope.name`` /
  ``otel.scope.version``;
- an event becomes a log whose first field is ``event`` (its name);
- array values are JSON text in a ``string`` tag, as Jaeger writes them;
- a span that never ended has ``duration`` 0 and a warning saying so.

Every process is one distinct resource of the trace (``service.name`` becomes ``serviceName``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.files import write_private_file

__all__ = ["jaeger_document", "write_jaeger_json"]

_UNFINISHED = "the span never ended: its duration is unknown"
_KINDS = {
    SpanKind.INTERNAL: "internal",
    SpanKind.SERVER: "server",
    SpanKind.CLIENT: "client",
    SpanKind.PRODUCER: "producer",
    SpanKind.CONSUMER: "consumer",
}


def _tag(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        if not math.isfinite(value):  # JSON has no NaN or infinity
            return {"key": key, "type": "string", "value": str(value)}
        return {"key": key, "type": "float64", "value": value}
    if isinstance(value, str):
        return {"key": key, "type": "string", "value": value}
    if isinstance(value, (bytes, bytearray)):
        return {"key": key, "type": "binary", "value": bytes(value).hex()}
    # arrays (and anything else) as JSON text, as Jaeger's translator writes them
    return {"key": key, "type": "string", "value": json.dumps(_plain(value), ensure_ascii=False)}


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _tags(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [_tag(key, value) for key, value in (attributes or {}).items()]


def _us(ns: int | None) -> int:
    return 0 if ns is None else ns // 1000


def _span(span: ReadableSpan, process_id: str) -> dict[str, Any]:
    context = span.context
    assert context is not None
    trace_id = f"{context.trace_id:032x}"
    references = []
    if span.parent is not None:
        references.append({"refType": "CHILD_OF", "traceID": trace_id, "spanID": f"{span.parent.span_id:016x}"})
    for link in span.links:
        references.append(
            {
                "refType": "FOLLOWS_FROM",
                "traceID": f"{link.context.trace_id:032x}",
                "spanID": f"{link.context.span_id:016x}",
            }
        )
    tags = _tags(span.attributes)
    tags.append({"key": "span.kind", "type": "string", "value": _KINDS.get(span.kind, "internal")})
    status = span.status
    if status.status_code is not StatusCode.UNSET:
        tags.append({"key": "otel.status_code", "type": "string", "value": status.status_code.name})
    if status.status_code is StatusCode.ERROR:
        tags.append({"key": "error", "type": "bool", "value": True})
        if status.description:
            tags.append({"key": "otel.status_description", "type": "string", "value": status.description})
    scope = span.instrumentation_scope
    if scope is not None and scope.name:
        tags.append({"key": "otel.scope.name", "type": "string", "value": scope.name})
        if scope.version:
            tags.append({"key": "otel.scope.version", "type": "string", "value": scope.version})
    logs = [
        {
            "timestamp": _us(event.timestamp),
            "fields": [{"key": "event", "type": "string", "value": event.name}, *_tags(event.attributes)],
        }
        for event in span.events
    ]
    start = span.start_time or 0
    end = span.end_time
    return {
        "traceID": trace_id,
        "spanID": f"{context.span_id:016x}",
        "operationName": span.name,
        "references": references,
        "startTime": _us(start),
        "duration": 0 if end is None else max(_us(end) - _us(start), 0),
        "tags": tags,
        "logs": logs,
        "processID": process_id,
        "warnings": [_UNFINISHED] if end is None else None,
        "flags": int(context.trace_flags),
    }


def _process(attributes: Mapping[str, Any]) -> dict[str, Any]:
    service = attributes.get("service.name")
    return {
        "serviceName": service if isinstance(service, str) and service else sc.UNKNOWN_SERVICE,
        "tags": [_tag(key, value) for key, value in attributes.items() if key != "service.name"],
    }


def jaeger_document(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The Jaeger-JSON document of ``spans``: one entry of ``data`` per trace (first seen first), spans in the
    order given."""
    traces: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        if span.context is None:
            continue
        traces.setdefault(span.context.trace_id, []).append(span)
    data = []
    for trace_id, members in traces.items():
        processes: dict[str, dict[str, Any]] = {}
        ids: dict[str, str] = {}
        out = []
        for span in members:
            process = _process(span.resource.attributes)
            key = json.dumps(process, sort_keys=True)
            process_id = ids.get(key)
            if process_id is None:
                process_id = ids[key] = f"p{len(ids) + 1}"
                processes[process_id] = process
            out.append(_span(span, process_id))
        data.append({"traceID": f"{trace_id:032x}", "spans": out, "processes": processes, "warnings": None})
    return {"data": data, "total": 0, "limit": 0, "offset": 0, "errors": None}


def write_jaeger_json(spans: Sequence[ReadableSpan], path: Path) -> int:
    """Write ``spans`` to ``path`` as one Jaeger-JSON document (mode 0600, atomic); returns the file's size in
    bytes.

    The spans are written as given: pass the strict-policy projection, never raw spans.
    """
    document = jaeger_document(spans)

    def write(stream: IO[str]) -> None:
        json.dump(document, stream, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        stream.write("\n")

    return write_private_file(path, write)
