"""Every endpoint of ``agentdiag serve`` against a million-span store (the benchmark builder's ``runs25`` store:
40,000 runs of 25 spans; every tenth run fails, every tenth other recovers from a tool error), checked for
correctness, not speed, against SQL run directly on the rows and against ``agentdiag export``.

The store is built once per module (about 30 s on two busy cores) and removed afterwards (it is 1.1 GB).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import run_cli
from starlette.testclient import TestClient

from benchmarks._bigstore import build_store, remove_store
from otel_agentdiag.serve import ServeSettings, create_app
from otel_agentdiag.serve.settings import DEFAULT_PORT
from otel_agentdiag.testing import TEST_HASH_KEY

SPANS = 1_000_000
SERVICE = "store-bench"
AGENT = "bench-agent"
LOOPBACK = ("127.0.0.1", 50000)


@dataclass(frozen=True)
class Trace:
    """One trace as the rows tell it (read with plain SQL, not through the library)."""

    trace_id: str
    session: str
    start_ns: int
    last_ns: int
    spans: int
    errors: int
    root_status: str


@dataclass(frozen=True)
class Million:
    path: Path
    traces: list[Trace]
    """Newest first (earliest start descending, ties by trace id): the order every list promises."""

    def newest(self, n: int, *, where: Any = None) -> list[str]:
        return [t.trace_id for t in self.traces if where is None or where(t)][:n]


def _traces(path: Path) -> list[Trace]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT trace_id, MAX(session), MIN(start_ns), MAX(coalesce(end_ns, start_ns)), COUNT(*),"
            " SUM(status = 'error'), MAX(CASE WHEN parent_span_id IS NULL THEN status END)"
            " FROM spans GROUP BY trace_id"
        ).fetchall()
    finally:
        conn.close()
    traces = [Trace(*row) for row in rows]
    traces.sort(key=lambda t: (-t.start_ns, t.trace_id))
    return traces


@pytest.fixture(scope="module")
def million(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Million]:
    folder = tmp_path_factory.mktemp("million")
    path = folder / "traces.db"
    (folder / "hash.key").write_bytes(TEST_HASH_KEY)  # the key the corpus was digested with, as a store keeps it
    (folder / "hash.key").chmod(0o600)
    try:
        built = build_store(path, SPANS, run_shape="runs25")
        assert built.spans == SPANS and built.traces == 40_000
        traces = _traces(path)
        assert len(traces) == built.traces and len({t.session for t in traces}) == built.traces  # a run, a session
        assert {t.spans for t in traces} == {25}
        yield Million(path, traces)
    finally:
        remove_store(path)


@pytest.fixture(scope="module")
def http(million: Million) -> Iterator[TestClient]:
    """The real application over the store, for a loopback client of a loopback server."""
    settings = ServeSettings(store_path=million.path)
    app = create_app(settings)
    headers = {"authorization": f"Bearer {settings.token}"}
    with TestClient(app, base_url=f"http://127.0.0.1:{DEFAULT_PORT}", client=LOOPBACK, headers=headers) as client:
        yield client


def get(http: TestClient, url: str, **params: Any) -> Any:
    response = http.get(url, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_services_and_operations_are_the_rows(http: TestClient, million: Million) -> None:
    conn = sqlite3.connect(f"file:{million.path}?mode=ro", uri=True)
    try:
        operations = conn.execute("SELECT DISTINCT name, span_kind FROM spans ORDER BY name, span_kind").fetchall()
    finally:
        conn.close()
    assert len(operations) == 5
    assert get(http, "/api/services")["data"] == [SERVICE]
    assert get(http, "/api/v3/services") == {"services": [SERVICE]}
    assert get(http, f"/api/services/{SERVICE}/operations")["data"] == sorted({name for name, _kind in operations})
    expected = [{"name": name, "spanKind": kind} for name, kind in operations]
    assert get(http, "/api/operations", service=SERVICE)["data"] == expected
    assert get(http, "/api/v3/operations", service=SERVICE) == {"operations": expected}
    clients = [{"name": name, "spanKind": kind} for name, kind in operations if kind == "client"]
    assert clients and get(http, "/api/operations", service=SERVICE, spanKind="client")["data"] == clients


def _ids(body: dict[str, Any]) -> list[str]:
    for trace in body["data"]:
        assert trace["spans"], "never a trace without spans"
    return [trace["traceID"] for trace in body["data"]]


def test_search_by_service_returns_the_newest_traces(http: TestClient, million: Million) -> None:
    found = get(http, "/api/traces", service=SERVICE, limit="20")
    assert _ids(found) == million.newest(20)
    assert all(len(trace["spans"]) == 25 for trace in found["data"])
    assert _ids(get(http, "/api/traces", service=SERVICE)) == million.newest(20)  # Jaeger UI's default limit
    assert _ids(get(http, "/api/traces", service=SERVICE, operation="all", limit="100")) == million.newest(100)
    window = {"query.start_time_min": "1970-01-01T00:00:00Z", "query.start_time_max": "2999-01-01T00:00:00Z"}
    v3 = get(http, "/api/v3/traces", **{"query.service_name": SERVICE, **window, "query.search_depth": "7"})
    served = [s["traceId"] for r in v3["result"]["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]
    assert list(dict.fromkeys(served)) == million.newest(7)


def test_search_in_a_time_range_deep_in_the_store(http: TestClient, million: Million) -> None:
    """``start``/``end`` (µs) move the newest-first walk to their range: traces far older than the 2,000 newest."""
    low_us, high_us = million.traces[30_000].start_ns // 1000, million.traces[29_000].start_ns // 1000
    inside = [t for t in million.traces if low_us * 1000 <= t.start_ns <= high_us * 1000]
    assert len(inside) > 900
    found = get(http, "/api/traces", service=SERVICE, start=str(low_us), end=str(high_us), limit="50")
    assert _ids(found) == [t.trace_id for t in inside[:50]]
    failed = get(
        http, "/api/traces", service=SERVICE, start=str(low_us), end=str(high_us), limit="5", tags='{"error":"true"}'
    )
    assert _ids(failed) == [t.trace_id for t in inside if t.errors][:5]


def test_a_tag_search_matches_on_what_the_client_sees(http: TestClient, million: Million) -> None:
    failed = get(http, "/api/traces", service=SERVICE, tags='{"error":"true"}', limit="10")
    assert _ids(failed) == million.newest(10, where=lambda t: t.errors > 0)
    # One span must hold every filter: the failed tool call is not the chat span.
    both = get(http, "/api/traces", service=SERVICE, operation="chat gpt-4o-mini", tags='{"error":"true"}')
    assert both["data"] == []
    # A tag no span has: the search checks its 2,000 newest candidates and answers, empty (a bounded scan).
    assert get(http, "/api/traces", service=SERVICE, tags='{"no.such.tag":"x"}', limit="1")["data"] == []


@pytest.mark.parametrize("position", [0, 20_000, 39_999])
def test_a_trace_by_id_v1_and_v3_equals_the_export(
    http: TestClient, million: Million, tmp_path: Path, position: int
) -> None:
    trace = million.traces[position]
    out = tmp_path / "trace.json"
    run_cli("export", "--store", million.path, "--session", trace.session, "--format", "jaeger-json", "--out", out)
    (expected,) = json.loads(out.read_text())["data"]
    assert get(http, f"/api/traces/{trace.trace_id}")["data"] == [expected]
    assert len(expected["spans"]) == 25
    (otlp,) = export_otlp_session(million.path, trace.session, tmp_path / "trace.jsonl")
    assert get(http, f"/api/v3/traces/{trace.trace_id}") == {"result": otlp}
    assert http.get(f"/api/traces/{'0' * 31}1").status_code == 404


def export_otlp_session(store: Path, session: str, out: Path) -> list[dict[str, Any]]:
    run_cli("export", "--store", store, "--session", session, "--format", "otlp-json", "--out", out)
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def _runs(http: TestClient, **params: Any) -> Iterator[dict[str, Any]]:
    """Every run the viewer lists for ``params``, walking its pages with the ``next`` cursor."""
    cursor: str | None = None
    while True:
        body = get(http, "/ui/api/runs", **params, **({"before": cursor} if cursor else {}))
        yield from body["runs"]
        cursor = body["next"]
        if cursor is None:
            return


def test_the_runs_list_walks_the_whole_store_in_order(http: TestClient, million: Million) -> None:
    first = get(http, "/ui/api/runs")["runs"]
    assert [r["trace_id"] for r in first] == million.newest(50)
    by_id = {t.trace_id: t for t in million.traces}
    for row in first:
        trace = by_id[row["trace_id"]]
        assert (row["agent"], row["service"], row["session"]) == (AGENT, SERVICE, trace.session)
        assert (row["span_count"], row["iterations"], row["llm_calls"], row["tool_calls"]) == (25, 8, 8, 8)
        assert row["error_count"] == trace.errors and row["status"] == trace.root_status
        assert row["receipt"] == "valid"
    walked = [r["trace_id"] for r in _runs(http, limit="500")]
    assert walked == million.newest(len(million.traces))  # every run once, in order: no gap, no repeat


def test_a_filtered_runs_page_and_its_next_pages(http: TestClient, million: Million) -> None:
    failed = [t.trace_id for t in million.traces if t.errors]  # status=error: a failed span, the root or another
    assert len(failed) >= 4_000 == sum(t.root_status == "error" for t in million.traces)
    pages = _runs(http, status="error", limit="50")
    assert [next(pages)["trace_id"] for _ in range(150)] == failed[:150]
    since, until = million.traces[12_000].start_ns, million.traces[11_000].start_ns
    window = [t for t in million.traces if since <= t.start_ns < until]
    found = [r["trace_id"] for r in _runs(http, agent=AGENT, since=str(since), until=str(until), status="unset")]
    assert found == [t.trace_id for t in window if t.root_status == "unset"]
    assert 800 < len(found) < len(window)


def test_a_run_page_deep_in_the_store(http: TestClient, million: Million) -> None:
    oldest = million.traces[-1]
    body = get(http, f"/ui/api/runs/{oldest.trace_id}")
    assert body["trace_id"] == oldest.trace_id and body["session"] == oldest.session
    assert len(body["spans"]) == 25 and body["view"] == "stored"
    assert body["receipt"]["status"] == "valid" and body["receipt"]["counts"]["spans"] == 25


def test_conversations_pages(http: TestClient, million: Million) -> None:
    by_activity = sorted(million.traces, key=lambda t: (-t.last_ns, t.session))
    first = get(http, "/ui/api/conversations", limit="100")
    assert [c["conversation"] for c in first["conversations"]] == [t.session for t in by_activity[:100]]
    second = get(http, "/ui/api/conversations", limit="100", before=first["next"])
    assert [c["conversation"] for c in second["conversations"]] == [t.session for t in by_activity[100:200]]
    for row, trace in zip(first["conversations"] + second["conversations"], by_activity, strict=False):
        assert (row["span_count"], row["trace_count"], row["run_count"]) == (25, 1, 1)
        assert (row["llm_calls"], row["tool_calls"], row["error_count"]) == (8, 8, trace.errors)
        assert row["failed_runs"] == (trace.root_status == "error")
