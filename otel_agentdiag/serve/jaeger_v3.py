"""The Jaeger query API, v3 (`/api/v3/...`): services, operations, trace search and a trace as OTLP-JSON.

As Jaeger's ``api_v3`` HTTP gateway serves it (``jaegertracing/jaeger-idl`` ``proto/api_v3`` and
``swagger/api_v3``; the gateway of Jaeger v2.19 and later): a trace or a search answers ``{"result": <OTLP-JSON
TracesData>}``, written by the encoder ``agentdiag export --format otlp-json`` uses (ids as hex, enums as
integers, as OTLP/JSON says); trace summaries answer ``{"summaries": [<TraceSummary>]}`` in proto3 JSON (camelCase
names, 64-bit integers as decimal text); an error answers ``{"error": {"httpCode", "message"}}``.

Parameters have the names of proto3 JSON (``query.serviceName``, ``query.startTimeMin``, ``spanKind``...), the
names Jaeger v2.19 made canonical; the snake_case names they replaced (``query.service_name``, ``span_kind``...)
are kept as aliases, the canonical name winning when both are given, as in Jaeger. A search that finds nothing
is 404 ``no traces found``, as Jaeger answers it; trace summaries that find nothing are 200 with no summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from otel_agentdiag._internal.inputs import describe_input
from otel_agentdiag.interchange.otlp_json import otlp_json_line
from otel_agentdiag.serve import queries
from otel_agentdiag.serve.params import (
    MAX_NS,
    BadParameter,
    go_duration_ns,
    parse_int,
    parse_tags,
    rfc3339_ns,
    trace_id_hex,
)
from otel_agentdiag.serve.stores import StoreAccess

__all__ = ["ALIASES", "error_response", "routes"]

ALIASES = {
    "query.serviceName": "query.service_name",
    "query.operationName": "query.operation_name",
    "query.startTimeMin": "query.start_time_min",
    "query.startTimeMax": "query.start_time_max",
    "query.durationMin": "query.duration_min",
    "query.durationMax": "query.duration_max",
    "query.searchDepth": "query.search_depth",
    "query.rawTraces": "query.raw_traces",
    "startTime": "start_time",
    "endTime": "end_time",
    "rawTraces": "raw_traces",
    "spanKind": "span_kind",
}
"""Each canonical (proto3 JSON) parameter name and the snake_case name kept as its alias."""
DEFAULT_SEARCH_DEPTH = 20
"""Traces a search returns when ``query.searchDepth`` is not given (Jaeger UI always sends it)."""
_BOOLEANS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_BOOLEANS.update({"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False})
"""Go's ``strconv.ParseBool``, which Jaeger reads its boolean parameters with."""


def error_response(code: int, message: str) -> JSONResponse:
    """Jaeger v3's error shape."""
    return JSONResponse({"error": {"httpCode": code, "message": message}}, status_code=code)


def _result(spans: Sequence[ReadableSpan]) -> Response:
    line = otlp_json_line(spans)
    body = '{"result":' + (line if line != "{}" else '{"resourceSpans":[]}') + "}"
    return Response(body, media_type="application/json")


def _access(request: Request) -> StoreAccess:
    access: StoreAccess = request.app.state.access
    return access


def _param(request: Request, name: str) -> tuple[str | None, str]:
    """The value of the canonical parameter ``name``, else of its alias, and the name it came under (Jaeger's
    rule: an empty value counts as absent)."""
    params = request.query_params
    value = params.get(name)
    if value:
        return value, name
    alias = ALIASES[name]
    return params.get(alias) or None, alias


def _boolean(request: Request, name: str) -> bool | None:
    value, given = _param(request, name)
    if value is None:
        return None
    if value not in _BOOLEANS:
        raise BadParameter(f"{given}: not a boolean ({describe_input(value)}); use true or false")
    return _BOOLEANS[value]


def services(request: Request) -> Response:
    return JSONResponse({"services": queries.list_services(_access(request).reader())})


def operations(request: Request) -> Response:
    service = request.query_params.get("service")
    if not service:
        return error_response(400, "parameter 'service' is required")
    span_kind, _name = _param(request, "spanKind")
    found = queries.list_operations(_access(request).reader(), service, span_kind)
    return JSONResponse({"operations": [{"name": name, "spanKind": kind} for name, kind in found]})


def trace(request: Request) -> Response:
    for name in ("startTime", "endTime"):  # hints, as in Jaeger; the key finds the trace without them
        value, given = _param(request, name)
        if value is not None:
            rfc3339_ns(given, value)
    _boolean(request, "rawTraces")  # read, as Jaeger does; stored spans are served as stored either way
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


def _search_query(request: Request) -> queries.SearchQuery:
    """The ``query.*`` parameters of a search or of trace summaries (Jaeger's ``TraceQueryParameters``): the
    time range is required (RFC 3339, the minimum before the maximum), every other filter optional."""
    start_min, min_name = _param(request, "query.startTimeMin")
    start_max, max_name = _param(request, "query.startTimeMax")
    if start_min is None or start_max is None:
        raise BadParameter(
            "parameters 'query.startTimeMin' and 'query.startTimeMax' are required"
            " (or 'query.start_time_min' and 'query.start_time_max')"
        )
    start_min_ns = rfc3339_ns(min_name, start_min)
    start_max_ns = rfc3339_ns(max_name, start_max)
    # Jaeger's rule: the minimum before the maximum. Two times past what SQLite's integers hold (the year 2262) are
    # both capped at its end: not an error, a range no span is in.
    if start_min_ns > start_max_ns or (start_min_ns == start_max_ns and abs(start_max_ns) != MAX_NS):
        raise BadParameter(f"{min_name} must be before {max_name}")
    tags: dict[str, str] = {}
    for text in request.query_params.getlist("query.attributes"):
        tags.update(_attributes(text))
    depth, depth_name = _param(request, "query.searchDepth")
    if depth is None and request.query_params.get("query.num_traces"):
        depth, depth_name = request.query_params["query.num_traces"], "query.num_traces"  # Jaeger's older alias
    limit = (
        min(parse_int(depth_name, depth, minimum=1), queries.MAX_LIMIT) if depth is not None else DEFAULT_SEARCH_DEPTH
    )
    minimum, minimum_name = _param(request, "query.durationMin")
    maximum, maximum_name = _param(request, "query.durationMax")
    _boolean(request, "query.rawTraces")  # no enrichment to leave out: read, so a malformed value is a 400
    return queries.SearchQuery(
        service=_param(request, "query.serviceName")[0],
        operation=_param(request, "query.operationName")[0],
        tags=tags,
        min_duration_ns=go_duration_ns(minimum_name, minimum) if minimum is not None else None,
        max_duration_ns=go_duration_ns(maximum_name, maximum) if maximum is not None else None,
        start_min_ns=start_min_ns,
        start_max_ns=start_max_ns,
        limit=limit,
    )


def search(request: Request) -> Response:
    query = _search_query(request)
    access = _access(request)
    found = queries.search_traces(access.reader(), query, access.hasher())
    if not found:
        return error_response(404, "no traces found")
    return _result([span for _id, spans, _trace in found for span in spans])


def _summary_json(figures: queries.TraceFigures) -> dict[str, Any]:
    """Jaeger's ``TraceSummary`` in proto3 JSON: camelCase names, the ``fixed64`` times as decimal text."""
    summary: dict[str, Any] = {"traceId": figures.trace_id}
    if figures.root_service is not None:
        summary["rootServiceName"] = figures.root_service
    if figures.root_name is not None:
        summary["rootOperationName"] = figures.root_name
    summary["minStartTimeUnixNano"] = str(max(figures.start_ns, 0))
    summary["maxEndTimeUnixNano"] = str(max(figures.end_ns, 0))
    summary["spanCount"] = figures.span_count
    summary["errorSpanCount"] = figures.error_span_count
    summary["orphanSpanCount"] = figures.orphan_span_count
    summary["services"] = [
        {"name": s.name, "spanCount": s.span_count, "errorSpanCount": s.error_span_count} for s in figures.services
    ]
    return summary


def trace_summaries(request: Request) -> Response:
    """``GET /api/v3/trace-summaries``: a search (the same parameters and matching as ``/api/v3/traces``)
    answered with one summary per trace, newest first, from the trace summaries the writer keeps."""
    query = _search_query(request)
    access = _access(request)
    store = access.reader()
    trace_ids = queries.matching_trace_ids(store, query, access.hasher())
    return JSONResponse({"summaries": [_summary_json(f) for f in queries.trace_figures(store, trace_ids)]})


def routes() -> list[BaseRoute]:
    return [
        Route("/api/v3/services", services, methods=["GET"]),
        Route("/api/v3/operations", operations, methods=["GET"]),
        Route("/api/v3/traces", search, methods=["GET"]),
        Route("/api/v3/traces/{trace_id}", trace, methods=["GET"]),
        Route("/api/v3/trace-summaries", trace_summaries, methods=["GET"]),
    ]
