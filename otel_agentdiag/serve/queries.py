"""What the Jaeger APIs ask of the store: services, operations, a trace's strict projection, and trace search.

Every trace leaves as the strict projection :command:`agentdiag export` writes (the same rows, the same key, the
same encoders), so a Jaeger client sees what an export file holds, never captured content. Services and
operations come from the ``operations`` summary the writer keeps (migration 11); search walks the trace summaries
newest first and checks each candidate trace through its key, a bounded number of candidates per request.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_agentdiag.diagnostics.projection import strict_projection
from otel_agentdiag.interchange.jaeger_json import jaeger_document
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.storage.codec import given_conditions
from otel_agentdiag.storage.operations import SERVICE_SQL as _SERVICE_SQL
from otel_agentdiag.storage.operations import UNKNOWN_SERVICE
from otel_agentdiag.storage.reading import ReadOnlyStore

__all__ = [
    "MAX_CANDIDATES",
    "MAX_LIMIT",
    "UNKNOWN_SERVICE",
    "SearchQuery",
    "ServiceFigures",
    "TraceFigures",
    "jaeger_trace",
    "list_operations",
    "list_services",
    "matching_trace_ids",
    "project_trace",
    "search_traces",
    "trace_figures",
]

MAX_LIMIT = 1000
"""The most traces one search returns."""
MAX_CANDIDATES = 2000
"""The most traces one search checks (newest first in its time range): a search never reads the whole store."""


def _has_operations(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'operations'").fetchone()
    return row is not None


def _catalog(store: ReadOnlyStore, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` over ``operations(service, name, span_kind)``: the summary table, or for a store made
    before it, the same rows computed from the spans (a full read, as such a store allows)."""
    with store.reading() as conn:
        if _has_operations(conn):  # entries with spans left (a count reaches 0 just before it is removed)
            source = "(SELECT service, name, span_kind FROM operations WHERE span_count > 0)"
            return conn.execute(sql.format(source=source), args).fetchall()
        source = (
            f"(SELECT DISTINCT {_SERVICE_SQL} AS service, s.name AS name, s.span_kind AS span_kind"
            " FROM spans s LEFT JOIN resources r ON r.id = s.resource_id)"
        )
        return conn.execute(sql.format(source=source), args).fetchall()


def list_services(store: ReadOnlyStore) -> list[str]:
    """Every service with spans, sorted."""
    return [str(r[0]) for r in _catalog(store, "SELECT DISTINCT service FROM {source} ORDER BY service", ())]


def list_operations(store: ReadOnlyStore, service: str, span_kind: str | None = None) -> list[tuple[str, str]]:
    """``(operation name, span kind)`` of ``service`` (only ``span_kind``'s when given), sorted."""
    sql = "SELECT DISTINCT name, span_kind FROM {source} WHERE service = ?"
    args: tuple[Any, ...] = (service,)
    if span_kind:
        sql += " AND span_kind = ?"
        args = (service, span_kind.lower())
    return [(str(n), str(k)) for n, k in _catalog(store, sql + " ORDER BY name, span_kind", args)]


def project_trace(store: ReadOnlyStore, trace_id: str, hasher: IdHasher | None) -> list[ReadableSpan]:
    """The strict projection of one trace's rows (what ``agentdiag export`` writes of it); empty when the store
    has no row of it or none passes."""
    rows = store.get_trace(trace_id)
    if not rows:
        return []
    return strict_projection(rows, hasher=hasher).spans


def jaeger_trace(spans: list[ReadableSpan]) -> dict[str, Any] | None:
    """The Jaeger-JSON trace (``traceID``, ``spans``, ``processes``) of one trace's projected spans; None when
    there are none (a trace is never served with an empty span list)."""
    data = jaeger_document(spans)["data"]
    return data[0] if data and data[0]["spans"] else None


@dataclass(frozen=True)
class SearchQuery:
    """A trace search: every filter optional. Times and durations in nanoseconds; ``tags`` compared as text
    against a span's tags (as the Jaeger-JSON encoder writes them) and its process's tags."""

    service: str | None = None
    operation: str | None = None
    span_kind: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    min_duration_ns: int | None = None
    max_duration_ns: int | None = None
    start_min_ns: int | None = None
    start_max_ns: int | None = None
    limit: int = 20


def _candidates(store: ReadOnlyStore, query: SearchQuery) -> Iterator[str]:
    """Trace ids newest first (by their earliest start) within the query's time range, at most
    :data:`MAX_CANDIDATES`, read page by page through the trace summaries' start index."""
    where, args = given_conditions(("start_ns >= ?", query.start_min_ns), ("start_ns <= ?", query.start_max_ns))
    cursor: tuple[int, str] | None = None
    seen = 0
    while seen < MAX_CANDIDATES:
        page_where = list(where)
        page_args = list(args)
        if cursor is not None:
            page_where.append("(start_ns < ? OR (start_ns = ? AND trace_id > ?))")
            page_args += [cursor[0], cursor[0], cursor[1]]
        clause = f" WHERE {' AND '.join(page_where)}" if page_where else ""
        with store.reading() as conn:
            rows = conn.execute(
                f"SELECT start_ns, trace_id FROM trace_summaries INDEXED BY trace_summaries_start{clause}"
                " ORDER BY start_ns DESC, trace_id LIMIT ?",
                (*page_args, min(200, MAX_CANDIDATES - seen)),
            ).fetchall()
        if not rows:
            return
        for _start, trace_id in rows:
            seen += 1
            yield str(trace_id)
        cursor = (int(rows[-1][0]), str(rows[-1][1]))


def _prefilter(store: ReadOnlyStore, trace_id: str, query: SearchQuery) -> bool:
    """Whether some stored span of the trace has the query's service, operation, kind and duration (read
    through the key; the tags are checked on the projection)."""
    where, args = given_conditions(
        ("s.trace_id = ?", trace_id),
        (f"{_SERVICE_SQL} = ?", query.service),
        ("s.name = ?", query.operation),
        ("s.span_kind = ?", query.span_kind.lower() if query.span_kind else None),
        ("s.end_ns IS NOT NULL AND s.end_ns / 1000 - s.start_ns / 1000 >= ? / 1000", query.min_duration_ns),
        ("s.end_ns IS NOT NULL AND s.end_ns / 1000 - s.start_ns / 1000 <= ? / 1000", query.max_duration_ns),
    )
    with store.reading() as conn:
        row = conn.execute(
            f"SELECT 1 FROM spans s LEFT JOIN resources r ON r.id = s.resource_id WHERE {' AND '.join(where)} LIMIT 1",
            args,
        ).fetchone()
    return row is not None


def _tag_text(tag: dict[str, Any]) -> str:
    value = tag.get("value")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _span_matches(span: dict[str, Any], processes: dict[str, Any], query: SearchQuery) -> bool:
    """Jaeger's rule: one span has every filter (its service, name, kind, duration and all the tags)."""
    process = processes.get(span["processID"], {})
    if query.service is not None and process.get("serviceName") != query.service:
        return False
    if query.operation is not None and span["operationName"] != query.operation:
        return False
    tags = {t["key"]: _tag_text(t) for t in (*process.get("tags", ()), *span["tags"])}
    if query.span_kind and tags.get("span.kind") != query.span_kind.lower():
        return False
    duration_us = int(span["duration"])
    if query.min_duration_ns is not None and duration_us < query.min_duration_ns // 1000:
        return False
    if query.max_duration_ns is not None and duration_us > query.max_duration_ns // 1000:
        return False
    return all(tags.get(key) == value for key, value in query.tags.items())


def search_traces(
    store: ReadOnlyStore, query: SearchQuery, hasher: IdHasher | None
) -> list[tuple[str, list[ReadableSpan], dict[str, Any]]]:
    """Up to ``query.limit`` traces that match, newest first: ``(trace id, projected spans, Jaeger-JSON
    trace)`` each. Matching is Jaeger's (one span has every filter), checked on what the client is shown."""
    found: list[tuple[str, list[ReadableSpan], dict[str, Any]]] = []
    if query.limit <= 0:
        return found
    if query.service is not None and query.service not in list_services(store):
        return found
    for trace_id in _candidates(store, query):
        if not _prefilter(store, trace_id, query):
            continue
        spans = project_trace(store, trace_id, hasher)
        trace = jaeger_trace(spans)
        if trace is None:
            continue
        if not any(_span_matches(span, trace["processes"], query) for span in trace["spans"]):
            continue
        found.append((trace_id, spans, trace))
        if len(found) >= query.limit:
            break
    return found


# -- trace summaries (Jaeger v3's ``/api/v3/trace-summaries``) ------------------------------------------------
@dataclass(frozen=True)
class ServiceFigures:
    """One service's share of a trace: its spans and those with status error."""

    name: str
    span_count: int
    error_span_count: int


@dataclass(frozen=True)
class TraceFigures:
    """What a search result row shows of one trace, without its spans: the root's service and name (None when no
    span without a parent is stored, as Jaeger leaves them empty then), the earliest start and latest end (ns),
    the span, error and orphan counts (an orphan: a span whose parent is not stored), and the services by name."""

    trace_id: str
    root_service: str | None
    root_name: str | None
    start_ns: int
    end_ns: int
    span_count: int
    error_span_count: int
    orphan_span_count: int
    services: tuple[ServiceFigures, ...]


def matching_trace_ids(store: ReadOnlyStore, query: SearchQuery, hasher: IdHasher | None) -> list[str]:
    """Up to ``query.limit`` trace ids that match, newest first, as :func:`search_traces` finds them: a search
    without tags is decided in SQL through the key (service, operation, kind, duration) and decodes no span; a
    search with tags compares them on what a client is shown (the strict projection), as :func:`search_traces`
    does, so a value the projection removes can never be searched for."""
    if query.tags:
        return [trace_id for trace_id, _spans, _trace in search_traces(store, query, hasher)]
    found: list[str] = []
    if query.limit <= 0:
        return found
    if query.service is not None and query.service not in list_services(store):
        return found
    for trace_id in _candidates(store, query):
        if _prefilter(store, trace_id, query):
            found.append(trace_id)
            if len(found) >= query.limit:
                break
    return found


_SUMMARY_ROW = (
    "SELECT start_ns, root_parent, name, service, span_count, error_count FROM trace_summaries WHERE trace_id = ?"
)
_PER_RESOURCE = (
    "SELECT resource_id, COUNT(*), SUM(status = 'error'), MAX(max(coalesce(end_ns, start_ns), start_ns))"
    " FROM spans WHERE trace_id = ? GROUP BY resource_id"
)
_ORPHANS = (
    "SELECT COUNT(*) FROM spans s WHERE s.trace_id = ?1 AND s.parent_span_id IS NOT NULL"
    " AND NOT EXISTS (SELECT 1 FROM spans p WHERE p.trace_id = ?1 AND p.span_id = s.parent_span_id)"
)
_RESOURCE_SERVICE = f"SELECT {_SERVICE_SQL} FROM resources r WHERE r.id = ?"


def trace_figures(store: ReadOnlyStore, trace_ids: list[str]) -> list[TraceFigures]:
    """The :class:`TraceFigures` of each of ``trace_ids`` the store holds (in their order). The root, start and
    counts come from the trace's summary row (kept by the writer); the latest end, the per-service counts and
    the orphans from the indexed columns of the trace's rows, read through the key (no attribute, event or link is
    decoded: a service is its resource's, looked up once per resource)."""
    figures: list[TraceFigures] = []
    services_of: dict[Any, str] = {}
    with store.reading() as conn:
        for trace_id in trace_ids:
            row = conn.execute(_SUMMARY_ROW, (trace_id,)).fetchone()
            if row is None:
                continue
            start_ns, root_parent, name, service, span_count, error_count = row
            per_service: dict[str, list[int]] = {}
            end_ns = int(start_ns)
            for resource_id, count, errors, latest in conn.execute(_PER_RESOURCE, (trace_id,)):
                if resource_id not in services_of:
                    found = conn.execute(_RESOURCE_SERVICE, (resource_id,)).fetchone()
                    services_of[resource_id] = str(found[0]) if found is not None else UNKNOWN_SERVICE
                entry = per_service.setdefault(services_of[resource_id], [0, 0])
                entry[0] += int(count)
                entry[1] += int(errors or 0)
                end_ns = max(end_ns, int(latest))
            (orphans,) = conn.execute(_ORPHANS, (trace_id,)).fetchone()
            has_root = not root_parent
            figures.append(
                TraceFigures(
                    trace_id=trace_id,
                    root_service=(service or UNKNOWN_SERVICE) if has_root else None,
                    root_name=str(name) if has_root else None,
                    start_ns=int(start_ns),
                    end_ns=end_ns,
                    span_count=int(span_count),
                    error_span_count=int(error_count),
                    orphan_span_count=int(orphans),
                    services=tuple(ServiceFigures(n, c, e) for n, (c, e) in sorted(per_service.items())),
                )
            )
    return figures
