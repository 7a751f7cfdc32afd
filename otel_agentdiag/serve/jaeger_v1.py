"""The Jaeger query API, v1 (`/api/...`): services, operations, trace search, a trace, dependencies.

As Jaeger's ``cmd/query`` serves it and Grafana's Jaeger data source and Jaeger UI read it: every answer is the
envelope ``{data, total, limit, offset, errors}``; a trace is the Jaeger-JSON ``agentdiag export --format
jaeger-json`` writes for it (the strict projection). An unknown trace is 404 with Jaeger's error shape; a bad
parameter is 400 with a message.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from otel_agentdiag.serve import queries
from otel_agentdiag.serve.params import (
    MAX_NS,
    BadParameter,
    go_duration_ns,
    lookback_ns,
    parse_int,
    parse_tags,
    trace_id_hex,
)
from otel_agentdiag.serve.stores import StoreAccess

__all__ = ["envelope", "error_response", "routes"]

DEFAULT_LIMIT = 20
"""Traces a search returns when it gives no ``limit`` (Jaeger UI's default)."""


def envelope(data: Any, *, total: int | None = None) -> dict[str, Any]:
    """Jaeger's response envelope around ``data``."""
    count = total if total is not None else (len(data) if isinstance(data, list) else 0)
    return {"data": data, "total": count, "limit": 0, "offset": 0, "errors": None}


def error_response(code: int, message: str) -> JSONResponse:
    """Jaeger's error shape: ``{"data": null, ..., "errors": [{"code", "msg"}]}`` with that HTTP status."""
    body = {"data": None, "total": 0, "limit": 0, "offset": 0, "errors": [{"code": code, "msg": message}]}
    return JSONResponse(body, status_code=code)


def _access(request: Request) -> StoreAccess:
    access: StoreAccess = request.app.state.access
    return access


def services(request: Request) -> Response:
    return JSONResponse(envelope(queries.list_services(_access(request).reader())))


def service_operations(request: Request) -> Response:
    """Jaeger's older form: the operation names of a service."""
    service = request.path_params["service"]
    names = sorted({name for name, _kind in queries.list_operations(_access(request).reader(), service)})
    return JSONResponse(envelope(names))


def operations(request: Request) -> Response:
    params = request.query_params
    service = params.get("service")
    if not service:
        return error_response(400, "parameter 'service' is required")
    kind = params.get("spanKind") or None
    found = queries.list_operations(_access(request).reader(), service, kind)
    return JSONResponse(envelope([{"name": name, "spanKind": span_kind} for name, span_kind in found]))


def _us_to_ns(us: int) -> int:
    """µs since the epoch in ns, capped where SQLite's integers end (a far-future ``end`` means no bound)."""
    return max(min(us * 1000, MAX_NS), -MAX_NS)


def _search_query(request: Request) -> queries.SearchQuery:
    """A :class:`~otel_agentdiag.serve.queries.SearchQuery` from Jaeger's v1 search parameters."""
    params = request.query_params
    limit = DEFAULT_LIMIT
    if params.get("limit"):
        limit = min(parse_int("limit", params["limit"]), queries.MAX_LIMIT) or DEFAULT_LIMIT
    end_ns = _us_to_ns(parse_int("end", params["end"])) if params.get("end") else None
    start_ns = _us_to_ns(parse_int("start", params["start"])) if params.get("start") else None
    lookback = lookback_ns("lookback", params.get("lookback", ""))
    if start_ns is None and lookback is not None:
        start_ns = (end_ns if end_ns is not None else time.time_ns()) - lookback
    min_duration = go_duration_ns("minDuration", params["minDuration"]) if params.get("minDuration") else None
    max_duration = go_duration_ns("maxDuration", params["maxDuration"]) if params.get("maxDuration") else None
    if min_duration is not None and max_duration is not None and min_duration > max_duration:
        raise BadParameter("minDuration is greater than maxDuration")
    if start_ns is not None and end_ns is not None and start_ns > end_ns:
        raise BadParameter("start is after end")
    operation = params.get("operation") or None
    if operation == "all":  # Jaeger UI's "all operations"
        operation = None
    return queries.SearchQuery(
        service=params.get("service") or None,
        operation=operation,
        span_kind=params.get("spanKind") or None,
        tags=parse_tags("tags", params.getlist("tags"), params.getlist("tag")),
        min_duration_ns=min_duration,
        max_duration_ns=max_duration,
        start_min_ns=start_ns,
        start_max_ns=end_ns,
        limit=limit,
    )


def search(request: Request) -> Response:
    ids = request.query_params.getlist("traceID")
    access = _access(request)
    reader, hasher = access.reader(), access.hasher()
    if ids:  # Jaeger UI's "compare" form: these traces, by id
        data = []
        for text in ids:
            trace = queries.jaeger_trace(queries.project_trace(reader, trace_id_hex(text), hasher))
            if trace is not None:
                data.append(trace)
        return JSONResponse(envelope(data))
    query = _search_query(request)
    found = queries.search_traces(reader, query, hasher)
    return JSONResponse(envelope([trace for _id, _spans, trace in found]))


def trace(request: Request) -> Response:
    params = request.query_params
    for name in ("start", "end"):  # accepted as Jaeger does (a hint); the key finds the trace without them
        if params.get(name):
            parse_int(name, params[name])
    trace_id = trace_id_hex(request.path_params["trace_id"])
    access = _access(request)
    found = queries.jaeger_trace(queries.project_trace(access.reader(), trace_id, access.hasher()))
    if found is None:
        return error_response(404, "trace not found")
    return JSONResponse(envelope([found]))


def dependencies(request: Request) -> Response:
    params = request.query_params
    if params.get("endTs"):
        parse_int("endTs", params["endTs"])
    if params.get("lookback"):
        parse_int("lookback", params["lookback"])
    return JSONResponse(envelope([]))


def routes() -> list[BaseRoute]:
    return [
        Route("/api/services", services, methods=["GET"]),
        Route("/api/services/{service:path}/operations", service_operations, methods=["GET"]),
        Route("/api/operations", operations, methods=["GET"]),
        Route("/api/traces", search, methods=["GET"]),
        Route("/api/traces/{trace_id}", trace, methods=["GET"]),
        Route("/api/dependencies", dependencies, methods=["GET"]),
    ]
