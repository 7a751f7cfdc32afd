"""``GET /api/v3/trace-summaries`` (Jaeger v2.19+): one summary per matching trace, read from the trace summaries
the writer keeps, equal to what Jaeger's own summary of the served trace (``querysvc/summary.go``: root, earliest
start, latest end, span, error and orphan counts, services by name) would say; the filters of ``/api/v3/traces``;
no span decoded unless the search has tags."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from serve_helpers import UNICODE_SERVICE, agent_store, client, demo_store

import otel_agentdiag as agentdiag
from otel_agentdiag.serve import queries

WINDOW = {"query.startTimeMin": "2000-01-01T00:00:00Z", "query.startTimeMax": "2200-01-01T00:00:00Z"}


@pytest.fixture(scope="module")
def unicode_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return agent_store(tmp_path_factory.mktemp("unicode") / "traces.db", runs=3)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_store(tmp_path_factory.mktemp("demo"))


def jaeger_summary(result: dict[str, Any]) -> dict[str, Any]:
    """What Jaeger's ``summarizeTrace`` makes of one served OTLP-JSON trace, in proto3 JSON as serve writes it."""
    spans = [
        (rs["resource"], span) for rs in result["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]
    ]
    ids = {span["spanId"] for _resource, span in spans}
    services: dict[str, list[int]] = {}
    root: tuple[int, str, str] | None = None
    orphans = errors = 0
    for resource, span in spans:
        names = [a["value"]["stringValue"] for a in resource.get("attributes", []) if a["key"] == "service.name"]
        service = names[0] if names else "unknown_service"
        error = span.get("status", {}).get("code") == 2
        entry = services.setdefault(service, [0, 0])
        entry[0] += 1
        entry[1] += error
        errors += error
        start = int(span["startTimeUnixNano"])
        if not span.get("parentSpanId"):
            if root is None or start < root[0]:
                root = (start, service, span["name"])
        elif span["parentSpanId"] not in ids:
            orphans += 1
    (trace_id,) = {span["traceId"] for _resource, span in spans}
    summary: dict[str, Any] = {"traceId": trace_id}
    if root is not None:
        summary["rootServiceName"], summary["rootOperationName"] = root[1], root[2]
    summary["minStartTimeUnixNano"] = str(min(int(span["startTimeUnixNano"]) for _r, span in spans))
    summary["maxEndTimeUnixNano"] = str(max(int(span["endTimeUnixNano"]) for _r, span in spans))
    summary["spanCount"] = len(spans)
    summary["errorSpanCount"] = errors
    summary["orphanSpanCount"] = orphans
    summary["services"] = [
        {"name": name, "spanCount": count, "errorSpanCount": error} for name, (count, error) in sorted(services.items())
    ]
    return summary


def summaries(http: Any, **params: str) -> list[dict[str, Any]]:
    response = http.get("/api/v3/trace-summaries", params={**WINDOW, **params})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"summaries"}
    found: list[dict[str, Any]] = body["summaries"]
    return found


def check_against_served_traces(http: Any, found: list[dict[str, Any]]) -> None:
    for summary in found:
        served = http.get(f"/api/v3/traces/{summary['traceId']}")
        assert served.status_code == 200
        assert summary == jaeger_summary(served.json()["result"])


def test_each_summary_is_what_jaeger_would_make_of_the_served_trace(unicode_store: Path, demo: Path) -> None:
    with client(unicode_store) as http:
        found = summaries(http, **{"query.serviceName": UNICODE_SERVICE, "query.searchDepth": "20"})
        assert len(found) == 3
        starts = [int(s["minStartTimeUnixNano"]) for s in found]
        assert starts == sorted(starts, reverse=True)  # newest first
        check_against_served_traces(http, found)
        first = found[0]
        assert first["rootServiceName"] == UNICODE_SERVICE
        assert first["rootOperationName"] == "invoke_agent unicode_agent"
        assert (first["spanCount"], first["errorSpanCount"], first["orphanSpanCount"]) == (6, 1, 0)
        assert first["services"] == [{"name": UNICODE_SERVICE, "spanCount": 6, "errorSpanCount": 1}]
    with client(demo) as http:
        (only,) = summaries(http, **{"query.serviceName": "agentdiag-demo"})
        check_against_served_traces(http, [only])


def test_the_filters_of_a_search(unicode_store: Path) -> None:
    service = {"query.serviceName": UNICODE_SERVICE}
    with client(unicode_store) as http:
        everything = {s["traceId"] for s in summaries(http, **service)}
        assert len(everything) == 3
        assert len(summaries(http, **service, **{"query.searchDepth": "2"})) == 2
        assert len(summaries(http, **service, **{"query.search_depth": "1"})) == 1  # the snake_case alias
        assert len(summaries(http, **service, **{"query.num_traces": "1"})) == 1  # Jaeger's older alias
        named = summaries(http, **service, **{"query.operationName": "execute_tool lookup"})
        assert {s["traceId"] for s in named} == everything
        assert summaries(http, **service, **{"query.operationName": "nothing"}) == []
        assert summaries(http, **service, **{"query.durationMin": "1h"}) == []
        assert {s["traceId"] for s in summaries(http, **service, **{"query.durationMax": "1h"})} == everything
        assert {s["traceId"] for s in summaries(http, **{"query.service_name": UNICODE_SERVICE})} == everything
        assert summaries(http, **{"query.serviceName": "no-such-service"}) == []
        assert {s["traceId"] for s in summaries(http)} == everything  # the service is optional
        tagged = summaries(http, **service, **{"query.attributes": '{"error":"true"}'})
        assert {s["traceId"] for s in tagged} == everything
        assert summaries(http, **service, **{"query.attributes": '{"error":"false-ish"}'}) == []
        # A value the strict projection removes cannot be searched for: the tool's error message is not served.
        assert summaries(http, **service, **{"query.attributes": '{"exception.message":"SENTINEL-failure"}'}) == []
        late = {"query.startTimeMin": "2150-01-01T00:00:00Z", "query.startTimeMax": "2150-01-02T00:00:00Z"}
        response = http.get("/api/v3/trace-summaries", params={**service, **late})
        # Jaeger answers trace summaries that find nothing with 200 (its /api/v3/traces with 404).
        assert response.status_code == 200 and response.json() == {"summaries": []}
        assert http.get("/api/v3/traces", params={**service, **late}).status_code == 404


def test_summaries_decode_no_span_unless_the_search_has_tags(
    unicode_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a span was decoded")

    with client(unicode_store) as http:
        monkeypatch.setattr(queries, "project_trace", refuse)
        found = summaries(http, **{"query.serviceName": UNICODE_SERVICE, "query.operationName": "execute_tool lookup"})
        assert len(found) == 3 and all(s["spanCount"] == 6 for s in found)
        response = http.get(
            "/api/v3/trace-summaries",
            params={**WINDOW, "query.serviceName": UNICODE_SERVICE, "query.attributes": '{"error":"true"}'},
        )
        assert response.status_code == 500  # tags are compared on the projection, which this test refused


@contextmanager
def remote_parent(trace_id: int, span_id: int) -> Iterator[None]:
    """Spans started inside have a parent that lives elsewhere (another service, another process)."""
    parent = trace.NonRecordingSpan(
        trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    )
    token = otel_context.attach(trace.set_span_in_context(parent))
    try:
        yield
    finally:
        otel_context.detach(token)


def test_two_services_and_an_orphan(tmp_path: Path) -> None:
    """One trace across two services, whose root another process holds: an orphan, no root, two services."""
    path = tmp_path / "traces.db"
    trace_id, missing_root = 0x0AF7651916CD43DD8448EB211C80319C, 0x00F067AA0BA902B7
    agentdiag.register_names(tools=["lookup"], agents=["front", "back"])
    with agentdiag.configure(store=path, service_name="front-svc", set_global=False):
        with remote_parent(trace_id, missing_root):
            with agentdiag.agent_run("front"):
                with agentdiag.tool_call("lookup"):
                    pass
                front_run = trace.get_current_span().get_span_context()
    with agentdiag.configure(store=path, service_name="back-svc", set_global=False):
        with remote_parent(trace_id, front_run.span_id):
            with agentdiag.agent_run("back"):
                try:
                    with agentdiag.tool_call("lookup"):
                        raise ValueError("SENTINEL")
                except ValueError:
                    pass
    with client(path) as http:
        (summary,) = summaries(http)
        check_against_served_traces(http, [summary])
        assert summary["traceId"] == f"{trace_id:032x}"
        assert "rootServiceName" not in summary and "rootOperationName" not in summary  # as Jaeger: no root
        assert summary["orphanSpanCount"] == 1  # the front run, whose parent is elsewhere
        assert summary["services"] == [
            {"name": "back-svc", "spanCount": 2, "errorSpanCount": 1},
            {"name": "front-svc", "spanCount": 2, "errorSpanCount": 0},
        ]
        assert (summary["spanCount"], summary["errorSpanCount"]) == (4, 1)
        assert [s["traceId"] for s in summaries(http, **{"query.serviceName": "back-svc"})] == [summary["traceId"]]
