"""The web viewer for agent runs: its pages, static assets and the JSON they read.

Pages: ``/`` (runs; ``?conversation=<digest>``: one conversation's), ``/runs/<trace id>`` (``?span=<span id>``
selects a span), ``/conversations``: one single-page application in ``serve/static/`` (plain HTML, CSS and
JavaScript, no build step, nothing fetched from elsewhere). JSON, under ``/ui/api/``: ``runs``, ``runs/{trace_id}``
and ``conversations``. A bad parameter is a 400 and an unknown run a 404, each a short JSON ``{"error": ...}``.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from otel_agentdiag._internal.trust import UntrustedPathError
from otel_agentdiag.serve.params import MAX_NS
from otel_agentdiag.serve.viewer_json import conversation_json, dumps, run_json
from otel_agentdiag.serve.viewer_reads import page_receipts, run_detail
from otel_agentdiag.storage.migrations import StoreError

_UNREADABLE = (StoreError, UntrustedPathError, sqlite3.Error, OSError)
"""What opening or reading the store may raise: a 503, never a traceback."""

__all__ = ["STATIC_DIR", "routes"]

STATIC_DIR = Path(__file__).parent / "static"
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
STATUSES = ("ok", "error", "unset")
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_MAX_PARAM = 512
_DIGITS = re.compile(r"[0-9]{1,19}")
"""A whole number as a parameter: ASCII digits (``str.isdigit`` takes ``²``, which ``int()`` refuses), at most 19."""


class BadParameter(ValueError):
    """A query parameter the viewer cannot use (its message names the parameter, never repeats the value)."""


def _json(body: Any, status: int = 200) -> Response:
    return Response(dumps(body), status_code=status, media_type="application/json")


def _error(status: int, message: str) -> Response:
    return _json({"error": message}, status)


def _text(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    if len(value) > _MAX_PARAM:
        raise BadParameter(f"{name} is too long")
    return value


def _limit(request: Request) -> int:
    text = _text(request, "limit")
    if text is None:
        return DEFAULT_LIMIT
    if not _DIGITS.fullmatch(text) or not 1 <= int(text) <= MAX_LIMIT:
        raise BadParameter(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    return int(text)


def _time_ns(request: Request, name: str) -> int | None:
    """An ISO-8601 time (no zone: UTC) or a whole number of nanoseconds since the epoch."""
    text = _text(request, name)
    if text is None:
        return None
    if _DIGITS.fullmatch(text):
        if int(text) > MAX_NS:
            raise BadParameter(f"{name} must be a time, or nanoseconds since 1970 up to {MAX_NS}")
        return int(text)
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise BadParameter(f"{name} must be an ISO-8601 time, such as 2025-01-31T12:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    seconds = int(moment.timestamp())
    if seconds < 0:
        raise BadParameter(f"{name} must not be before 1970")
    return min(seconds * 1_000_000_000 + moment.microsecond * 1000, MAX_NS)  # past 2262: no bound


def _cursor(request: Request) -> tuple[int, str] | None:
    """``before``: the ``next`` cursor of the previous page (``<nanoseconds>:<key>``)."""
    text = _text(request, "before")
    if text is None:
        return None
    ns, sep, key = text.partition(":")
    if not sep or not _DIGITS.fullmatch(ns) or int(ns) > MAX_NS or not key:
        raise BadParameter("before must be the next cursor of a previous page")
    return int(ns), key


def _next(cursor: tuple[int, str] | None) -> str | None:
    return None if cursor is None else f"{cursor[0]}:{cursor[1]}"


def _unknown(request: Request, allowed: tuple[str, ...]) -> None:
    for name in request.query_params:
        if name not in allowed:
            raise BadParameter(f"unknown parameter; this endpoint takes {', '.join(allowed)}")


def runs_api(request: Request) -> Response:
    """``/ui/api/runs``: a page of runs, newest first; ``next`` is the cursor of the page after (None: last).

    ``status``: ``error`` lists the runs with at least one failed span (the root or any other: a run whose tool
    failed and that went on is one; the viewer's filter says "has errors"); ``ok`` and ``unset`` the runs whose
    root has that status. ``conversation``: the runs of one conversation (its digest, as the conversations list
    gives it)."""
    try:
        _unknown(request, ("agent", "service", "status", "conversation", "since", "until", "before", "limit"))
        status = _text(request, "status")
        if status is not None and status not in STATUSES:
            raise BadParameter(f"status must be one of {', '.join(STATUSES)}")
        limit = _limit(request)
        query = {
            "agent": _text(request, "agent"),
            "service": _text(request, "service"),
            "status": None if status == "error" else status,
            "has_errors": status == "error",
            "session": _text(request, "conversation"),
            "since_ns": _time_ns(request, "since"),
            "until_ns": _time_ns(request, "until"),
            "before": _cursor(request),
        }
    except BadParameter as exc:
        return _error(400, str(exc))
    try:
        reader = request.app.state.access.reader()
        runs = reader.list_runs(limit=limit, **query)
        receipts = page_receipts(reader, {r.session for r in runs})
    except _UNREADABLE:
        return _error(503, "the store cannot be read")
    rows = [run_json(r, receipts.get(r.session)) for r in runs]
    return _json({"runs": rows, "next": _next(runs[-1].cursor) if len(runs) == limit else None})


def run_api(request: Request) -> Response:
    """``/ui/api/runs/{trace_id}``: one run's spans, health and receipt (content only for a loopback client)."""
    trace_id = str(request.path_params["trace_id"])
    if not _TRACE_ID.fullmatch(trace_id):
        return _error(400, "a trace id is 32 lowercase hex digits")
    if request.query_params:
        return _error(400, "this endpoint takes no parameters")
    access = request.app.state.access
    local = bool(getattr(request.state, "local", False))
    try:
        detail = run_detail(access.reader(), None if local else access.hasher(), trace_id, local=local)
    except _UNREADABLE:
        return _error(503, "the store cannot be read")
    if detail is None:
        return _error(404, "no run with this trace id in the store")
    return _json(detail)


def conversations_api(request: Request) -> Response:
    """``/ui/api/conversations``: conversations (runs grouped by conversation digest) with totals, paged."""
    try:
        _unknown(request, ("since", "before", "limit"))
        limit = _limit(request)
        since = _time_ns(request, "since")
        before = _cursor(request)
    except BadParameter as exc:
        return _error(400, str(exc))
    try:
        found = request.app.state.access.reader().list_conversations(limit=limit, before=before, since_ns=since)
    except _UNREADABLE:
        return _error(503, "the store cannot be read")
    rows = [conversation_json(c) for c in found]
    return _json({"conversations": rows, "next": _next(found[-1].cursor) if len(found) == limit else None})


def page(request: Request) -> Response:
    """Every page is the one application; it reads the path itself."""
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8")


def routes() -> list[BaseRoute]:
    return [
        Route("/", page, methods=["GET", "HEAD"]),
        Route("/runs/{trace_id}", page, methods=["GET", "HEAD"]),
        Route("/conversations", page, methods=["GET", "HEAD"]),
        Route("/ui/api/runs", runs_api, methods=["GET"]),
        Route("/ui/api/runs/{trace_id}", run_api, methods=["GET"]),
        Route("/ui/api/conversations", conversations_api, methods=["GET"]),
        Mount("/ui/static", app=StaticFiles(directory=STATIC_DIR), name="viewer-static"),
    ]
