"""The Jaeger query API v1 against stores written by the real pipeline: the envelope, the trace model, search
filters, errors, equality with ``agentdiag export``, a unicode service, a 10,000-span trace, Grafana's calls."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from serve_helpers import (
    UNICODE_AGENT,
    UNICODE_SERVICE,
    agent_store,
    big_trace_store,
    client,
    demo_store,
    export_jaeger,
    only_trace_id,
)

_TAG_TYPES = {"string": str, "bool": bool, "int64": int, "float64": (int, float), "binary": str}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_store(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def unicode_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return agent_store(tmp_path_factory.mktemp("unicode") / "traces.db", runs=3)


def check_envelope(body: dict[str, Any]) -> list[Any]:
    assert set(body) == {"data", "total", "limit", "offset", "errors"}
    assert body["errors"] is None
    assert isinstance(body["data"], list)
    assert body["total"] == len(body["data"])
    return body["data"]


def check_trace(trace: dict[str, Any], *, complete: bool = True) -> None:
    """Jaeger's trace model, as its UI and Grafana's plugin read it."""
    assert re.fullmatch(r"[0-9a-f]{32}", trace["traceID"])
    assert trace["spans"], "a trace is never served without spans"
    ids = {span["spanID"] for span in trace["spans"]}
    for span in trace["spans"]:
        assert span["traceID"] == trace["traceID"]
        assert re.fullmatch(r"[0-9a-f]{16}", span["spanID"])
        assert span["processID"] in trace["processes"]
        assert isinstance(span["startTime"], int) and span["startTime"] > 1_500_000_000_000_000  # µs, not ns or s
        assert isinstance(span["duration"], int) and span["duration"] >= 0
        for reference in span["references"]:
            assert reference["refType"] in ("CHILD_OF", "FOLLOWS_FROM")
            if reference["refType"] == "CHILD_OF" and complete:
                assert reference["spanID"] in ids
        for tag in span["tags"]:
            assert isinstance(tag["value"], _TAG_TYPES[tag["type"]]), tag
        assert isinstance(span["logs"], list)
    for process in trace["processes"].values():
        assert isinstance(process["serviceName"], str) and process["serviceName"]


def test_services_operations_and_the_trace_of_the_demo(demo: Path) -> None:
    trace_id = only_trace_id(demo)
    with client(demo) as http:
        services = check_envelope(http.get("/api/services").json())
        assert services == ["agentdiag-demo"]
        operations = check_envelope(http.get("/api/operations", params={"service": "agentdiag-demo"}).json())
        assert {"name": "invoke_agent trip-planner", "spanKind": "internal"} in operations
        assert {"name": "chat demo-model-1", "spanKind": "client"} in operations
        clients = check_envelope(
            http.get("/api/operations", params={"service": "agentdiag-demo", "spanKind": "client"}).json()
        )
        assert clients == [{"name": "chat demo-model-1", "spanKind": "client"}]
        names = check_envelope(http.get("/api/services/agentdiag-demo/operations").json())
        assert names == sorted({op["name"] for op in operations})
        assert check_envelope(http.get("/api/services/nobody/operations").json()) == []

        body = http.get(f"/api/traces/{trace_id}").json()
        (trace,) = check_envelope(body)
        check_trace(trace)
        assert trace["traceID"] == trace_id
        assert {p["serviceName"] for p in trace["processes"].values()} == set(services)
        by_name = {span["operationName"]: span for span in trace["spans"]}
        assert by_name["invoke_agent trip-planner"]["references"] == []
        assert by_name["agent.iteration"]["references"][0]["refType"] == "CHILD_OF"
        failed = [s for s in trace["spans"] if {"key": "error", "type": "bool", "value": True} in s["tags"]]
        assert [s["operationName"] for s in failed] == ["execute_tool convert_currency"]
        assert http.get(f"/api/traces/{trace_id.upper()}").json() == body  # hex in any case
        assert http.head(f"/api/traces/{trace_id}").status_code == 200


def test_a_trace_equals_what_export_writes(demo: Path, tmp_path: Path) -> None:
    exported = export_jaeger(demo, tmp_path / "out.json")
    (expected,) = exported["data"]
    with client(demo) as http:
        (served,) = http.get(f"/api/traces/{expected['traceID']}").json()["data"]
        (searched,) = http.get("/api/traces", params={"service": "agentdiag-demo"}).json()["data"]
    assert served == expected
    assert searched == expected


def test_search_filters(unicode_store: Path) -> None:
    with client(unicode_store) as http:

        def search(**params: Any) -> list[dict[str, Any]]:
            response = http.get("/api/traces", params=params)
            assert response.status_code == 200, response.text
            found = check_envelope(response.json())
            for trace in found:
                check_trace(trace)
            return found

        everything = search(service=UNICODE_SERVICE)
        assert len(everything) == 3
        starts = [min(s["startTime"] for s in t["spans"]) for t in everything]
        assert starts == sorted(starts, reverse=True)  # newest first
        assert len(search(service=UNICODE_SERVICE, limit=2)) == 2
        assert len(search(service=UNICODE_SERVICE, operation="execute_tool lookup")) == 3
        assert len(search(service=UNICODE_SERVICE, operation="all")) == 3
        assert search(service=UNICODE_SERVICE, operation="no such operation") == []
        assert search(service="nobody") == []
        assert len(search(service=UNICODE_SERVICE, tags=json.dumps({"error": "true"}))) == 3
        assert len(search(service=UNICODE_SERVICE, tag="error:true")) == 3  # Jaeger UI's logfmt-ish form
        assert search(service=UNICODE_SERVICE, tags=json.dumps({"error": "true", "span.kind": "client"})) == []
        assert len(search(service=UNICODE_SERVICE, tags=json.dumps({"otel.status_code": "ERROR"}))) == 3
        assert search(service=UNICODE_SERVICE, minDuration="1h") == []
        assert len(search(service=UNICODE_SERVICE, minDuration="0", maxDuration="1m30s")) == 3
        newest = everything[0]
        first_start = min(s["startTime"] for s in newest["spans"])
        only_newest = search(service=UNICODE_SERVICE, start=str(first_start), end=str(first_start + 60_000_000))
        assert [t["traceID"] for t in only_newest] == [newest["traceID"]]
        assert len(search(service=UNICODE_SERVICE, lookback="1h")) == 3
        assert len(search(service=UNICODE_SERVICE, lookback="custom")) == 3
        both = search(traceID=[everything[0]["traceID"], everything[2]["traceID"][16:]])  # compare: by id
        assert [t["traceID"] for t in both] == [everything[0]["traceID"]]


def test_unicode_names_and_process_agree_with_the_service_list(unicode_store: Path) -> None:
    with client(unicode_store) as http:
        services = http.get("/api/services").json()["data"]
        assert services == [UNICODE_SERVICE]
        operations = http.get(f"/api/services/{quote(UNICODE_SERVICE)}/operations").json()["data"]
        assert f"invoke_agent {UNICODE_AGENT}" in operations
        for trace in http.get("/api/traces", params={"service": UNICODE_SERVICE}).json()["data"]:
            assert {p["serviceName"] for p in trace["processes"].values()} == {UNICODE_SERVICE}
            text = json.dumps(trace, ensure_ascii=False)
            assert "SENTINEL" not in text  # the strict projection: raw ids and error text never leave


def test_spans_without_a_service_name_are_listed_as_their_process_says(tmp_path: Path) -> None:
    from otel_agentdiag.storage import SpanStore
    from otel_agentdiag.storage.operations import rebuild_operations

    path = agent_store(tmp_path / "traces.db", tools=1)
    with SpanStore(path) as store:  # a resource without service.name (an imported span, say)
        store._conn.execute("UPDATE resources SET attributes = '{}'")
        rebuild_operations(store._conn)  # the summary as the rows now say
    with client(path) as http:
        services = http.get("/api/services").json()["data"]
        assert services == ["unknown_service"]
        (trace,) = http.get("/api/traces", params={"service": "unknown_service"}).json()["data"]
        assert {p["serviceName"] for p in trace["processes"].values()} == {"unknown_service"}


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/api/traces?minDuration=fast", "minDuration"),
        ("/api/traces?maxDuration=-1s", "maxDuration"),
        ("/api/traces?minDuration=2s&maxDuration=1s", "minDuration"),
        ("/api/traces?limit=many", "limit"),
        ("/api/traces?start=yesterday", "start"),
        ("/api/traces?start=20&end=10", "start"),
        ("/api/traces?lookback=forever", "lookback"),
        ("/api/traces?tags=not-json", "tags"),
        ("/api/traces?tags=[1,2]", "tags"),
        ("/api/traces?tag=novalue", "tag"),
        ("/api/traces/not-hex", "traceID"),
        ("/api/traces/" + "a" * 33, "traceID"),
        ("/api/traces/abc?start=soon", "start"),
        ("/api/operations", "service"),
        ("/api/dependencies?endTs=later", "endTs"),
    ],
)
def test_bad_parameters_are_400_with_a_message(demo: Path, path: str, message: str) -> None:
    with client(demo) as http:
        response = http.get(path)
    assert response.status_code == 400
    body = response.json()
    assert body["data"] is None and body["total"] == 0
    (error,) = body["errors"]
    assert error["code"] == 400 and message in error["msg"]
    assert "Traceback" not in response.text and len(response.text) < 400


def test_unknown_trace_is_jaeger_404(demo: Path) -> None:
    with client(demo) as http:
        for trace_id in ("0" * 32, "abc", "deadbeefdeadbeef"):
            response = http.get(f"/api/traces/{trace_id}")
            assert response.status_code == 404
            assert response.json() == {
                "data": None,
                "total": 0,
                "limit": 0,
                "offset": 0,
                "errors": [{"code": 404, "msg": "trace not found"}],
            }
        assert http.get("/api/no-such-endpoint").status_code == 404
        assert http.get("/api/dependencies", params={"endTs": "1700000000000", "lookback": "3600000"}).json() == {
            "data": [],
            "total": 0,
            "limit": 0,
            "offset": 0,
            "errors": None,
        }


def test_short_ids_are_left_padded_as_jaeger_does(tmp_path: Path) -> None:
    """A 64-bit trace id (an older tracer's, ingested) is found by its 16 hex digits."""
    path = agent_store(tmp_path / "traces.db", tools=0)
    trace_id = only_trace_id(path)
    short = "00000000000000001234567890abcdef"
    from otel_agentdiag.storage import SpanStore

    with SpanStore(path) as store:
        for table in ("spans", "trace_summaries", "session_traces"):
            store._conn.execute(f"UPDATE {table} SET trace_id = ? WHERE trace_id = ?", (short, trace_id))
    with client(path) as http:
        (trace,) = http.get("/api/traces/1234567890abcdef").json()["data"]
    assert trace["traceID"] == short


def test_a_ten_thousand_span_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "20000")  # the whole run queued, none dropped
    path = big_trace_store(tmp_path / "big" / "traces.db")
    trace_id = only_trace_id(path)
    with client(path) as http:
        (trace,) = check_envelope(http.get(f"/api/traces/{trace_id}").json())
        (found,) = check_envelope(http.get("/api/traces", params={"service": "big", "limit": "1"}).json())
    from otel_agentdiag.storage.reading import ReadOnlyStore

    with ReadOnlyStore(path) as reader:
        stored = reader.span_count()
    assert stored == 10_001
    assert len(trace["spans"]) == stored
    check_trace(trace, complete=True)
    assert found["traceID"] == trace_id and len(found["spans"]) == stored


def test_grafana_jaeger_data_source_calls(demo: Path) -> None:
    """The HTTP calls Grafana's Jaeger data source makes (its health check, the service and operation pickers,
    a search, a trace by id), replayed, with what the plugin reads from each answer."""
    trace_id = only_trace_id(demo)
    with client(demo) as http:
        health = http.get("/api/services")  # testDatasource: 200 and a non-empty list
        assert health.status_code == 200 and health.json()["data"]
        service = health.json()["data"][0]
        operations = http.get(f"/api/services/{quote(service, safe='')}/operations").json()["data"]
        assert operations and all(isinstance(name, str) for name in operations)
        search = http.get(
            "/api/traces",
            params={
                "service": service,
                "operation": operations[0],
                "tags": "{}",
                "limit": "20",
                "start": "0",
                "end": "9999999999999999",
                "minDuration": "",
            },
        )
        assert search.status_code == 200
        (row,) = search.json()["data"]
        first = row["spans"][0]  # the plugin indexes the first span of every trace
        assert row["processes"][first["processID"]]["serviceName"] == service
        by_id = http.get(f"/api/traces/{trace_id}").json()["data"][0]
        assert by_id["spans"][0]["processID"] in by_id["processes"]
        for span in by_id["spans"]:
            assert span["processID"] in by_id["processes"]
