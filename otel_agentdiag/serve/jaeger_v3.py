"""The Jaeger query API, v3 (`/api/v3/...`): services, operations, trace search and a trace as OTLP-JSON.

As Jaeger's ``api_v3`` HTTP gateway serves it (``jaegertracing/jaeger-idl`` ``swagger/api_v3``): a trace or a
search answers ``{"result": <OTLP-JSON TracesData>}``, written by the encoder ``agentdiag export --format
otlp-json`` uses (ids as hex, enums as integers, as OTLP/JSON says); an error answers
``{"error": {"httpCode", "message"}}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from otel_agentdiag.interchange.otlp_json import otlp_json_line
from otel_agentdiag.serve import queries
from otel_agentdiag.serve.params import BadParameter, go_duration_ns, parse_int, parse_tags, rfc3339_ns, trace_id_hex
from otel_agentdiag.serve.stores import StoreAccess

__all__ = ["error_response", "routes"]


def error_response(code: int, message: str) -> JSONResponse:
    """Jaeger v3's error shape."""
    return JSONResponse({"error": {"httpCode": code, "message": message}}, status_code=code)


def _otlp_json(spans: Sequence[ReadableSpan]) -> str:
    """The OTLP-JSON ``TracesData`` of ``spans`` as ``agentdiag export`` writes a line: the fast encoder, or the
    OpenTelemetry exporter's for a value it does not reproduce exactly (as ``write_otlp_json`` does)."""
    try:
        return otlp_json_line(spans)
    except Exception:  # noqa: BLE001 - Unsupported, or a surprise: the exporter's encoder, as export does
        from otel_agentdiag.interchange.otlp_request import request_to_otlp_json, span_encoder

        document = request_to_otlp_json(span_encoder()(spans))
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _result(spans: Sequence[ReadableSpan]) -> Response:
    line = _otlp_json(spans)
    body = '{"result":' + (line if line != "{}" else '{"resourceSpans":[]}') + "}"
    return Response(body, media_type="application/json")


def _access(request: Request) -> StoreAccess:
    access: StoreAccess = request.app.state.access
    return access


def services(request: Request) -> Response:
    return JSONResponse({"services": queries.list_services(_access(request).reader())})


def operations(request: Request) -> Response:
    params = request.query_params
    service = params.get("service")
    if not service:
        return error_response(400, "parameter 'service' is required")
    found = queries.list_operations(_access(request).reader(), service, params.get("span_kind") or None)
    return JSONResponse({"operations": [{"name": name, "spanKind": kind} for name, kind in found]})


def trace(request: Request) -> Response:
    params = request.query_params
    for name in ("start_time", "end_time"):  # hints, as in Jaeger; the key finds the trace without them
        if params.get(name):
            rfc3339_ns(name, params[name])
    trace_id = trace_id_hex(request.path_params["trace_id"])
    access = _access(request)
    spans = queries.project_trace(access.reader(), trace_id, access.hasher())
    if not spans:
        return error_response(404, "trace not found")
    return _result(spans)


def _attributes(text: str) -> dict[str, str]:
    """``query.attributes``: a JSON object of text values (or a ``key:value`` pair)."""
    if text.strip().startswith("{"):
        return parse_tags("query.attributes", [text], [])
    return parse_tags("query.attributes", [], [text])


def search(request: Request) -> Response:
    params = request.query_params
    service = params.get("query.service_name")
    if not service:
        return error_response(400, "parameter 'query.service_name' is required")
    start_min = params.get("query.start_time_min")
    start_max = params.get("query.start_time_max")
    if not start_min or not start_max:
        return error_response(400, "parameters 'query.start_time_min' and 'query.start_time_max' are required")
    tags: dict[str, str] = {}
    for text in params.getlist("query.attributes"):
        tags.update(_attributes(text))
    depth = params.get("query.search_depth")
    limit = min(parse_int("query.search_depth", depth, minimum=1), queries.MAX_LIMIT) if depth else 20
    minimum = params.get("query.duration_min")
    maximum = params.get("query.duration_max")
    query = queries.SearchQuery(
        service=service,
        operation=params.get("query.operation_name") or None,
        tags=tags,
        min_duration_ns=go_duration_ns("query.duration_min", minimum) if minimum else None,
        max_duration_ns=go_duration_ns("query.duration_max", maximum) if maximum else None,
        start_min_ns=rfc3339_ns("query.start_time_min", start_min),
        start_max_ns=rfc3339_ns("query.start_time_max", start_max),
        limit=limit,
    )
    if query.start_min_ns is not None and query.start_max_ns is not None and query.start_min_ns > query.start_max_ns:
        raise BadParameter("query.start_time_min is after query.start_time_max")
    access = _access(request)
    found = queries.search_traces(access.reader(), query, access.hasher())
    return _result([span for _id, spans, _trace in found for span in spans])


def routes() -> list[BaseRoute]:
    return [
        Route("/api/v3/services", services, methods=["GET"]),
        Route("/api/v3/operations", operations, methods=["GET"]),
        Route("/api/v3/traces", search, methods=["GET"]),
        Route("/api/v3/traces/{trace_id}", trace, methods=["GET"]),
    ]
