"""The Jaeger query API v3 against stores written by the real pipeline: OTLP-JSON that protobuf's JSON parser
reads as ``TracesData``, equal to what ``agentdiag export --format otlp-json`` writes; Jaeger v3's error shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from serve_helpers import UNICODE_SERVICE, agent_store, client, demo_store, export_otlp, only_trace_id


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_store(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def unicode_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return agent_store(tmp_path_factory.mktemp("unicode") / "traces.db", runs=2)


def parse(result: dict[str, Any]) -> TracesData:
    message = TracesData()
    json_format.Parse(json.dumps(result), message)
    return message


def spans_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for rs in result["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]


def test_services_and_operations(demo: Path) -> None:
    with client(demo) as http:
        assert http.get("/api/v3/services").json() == {"services": ["agentdiag-demo"]}
        operations = http.get("/api/v3/operations", params={"service": "agentdiag-demo"}).json()["operations"]
        assert {"name": "chat demo-model-1", "spanKind": "client"} in operations
        clients = http.get("/api/v3/operations", params={"service": "agentdiag-demo", "span_kind": "client"}).json()
        assert clients == {"operations": [{"name": "chat demo-model-1", "spanKind": "client"}]}


def test_a_trace_parses_as_traces_data_and_equals_the_export(demo: Path, tmp_path: Path) -> None:
    trace_id = only_trace_id(demo)
    (exported,) = export_otlp(demo, tmp_path / "out.jsonl")
    with client(demo) as http:
        response = http.get(f"/api/v3/traces/{trace_id}")
    assert response.status_code == 200
    result = response.json()["result"]
    assert result == exported
    message = parse(result)
    spans = [span for rs in message.resource_spans for ss in rs.scope_spans for span in ss.spans]
    assert len(spans) == len(spans_of(result)) == 12
    assert {span["traceId"] for span in spans_of(result)} == {trace_id}
    assert sorted(span.name for span in spans) == sorted(span["name"] for span in spans_of(result))


SNAKE = {
    "service": "query.service_name",
    "operation": "query.operation_name",
    "min": "query.start_time_min",
    "max": "query.start_time_max",
    "depth": "query.search_depth",
    "duration_min": "query.duration_min",
}
CAMEL = {
    "service": "query.serviceName",
    "operation": "query.operationName",
    "min": "query.startTimeMin",
    "max": "query.startTimeMax",
    "depth": "query.searchDepth",
    "duration_min": "query.durationMin",
}


@pytest.mark.parametrize("names", [SNAKE, CAMEL], ids=["snake_case", "camelCase"])
def test_search(unicode_store: Path, names: dict[str, str]) -> None:
    window = {names["min"]: "2000-01-01T00:00:00Z", names["max"]: "2999-01-01T00:00:00.5+02:00"}
    with client(unicode_store) as http:

        def search(**params: str) -> list[dict[str, Any]]:
            """The spans found; none: Jaeger's 404 (a v3 search that finds nothing is 404, as in Jaeger)."""
            response = http.get("/api/v3/traces", params={names["service"]: UNICODE_SERVICE, **window, **params})
            if response.status_code == 404:
                assert response.json() == {"error": {"httpCode": 404, "message": "no traces found"}}
                return []
            assert response.status_code == 200, response.text
            result: dict[str, Any] = response.json()["result"]
            parse(result)
            spans = spans_of(result)
            assert spans, "a search that finds something has spans"
            return spans

        everything = search()
        assert len({span["traceId"] for span in everything}) == 2
        assert len({span["traceId"] for span in search(**{names["depth"]: "1"})}) == 1
        assert search(**{names["operation"]: "nothing"}) == []
        found = search(**{names["operation"]: "execute_tool lookup", names["duration_min"]: "0s"})
        assert len({span["traceId"] for span in found}) == 2
        assert search(**{names["duration_min"]: "1h"}) == []
        assert len(search(**{"query.attributes": json.dumps({"error": "true"})})) == len(everything)
        assert search(**{names["min"]: "2999-01-01T00:00:00Z", names["max"]: "2999-01-02T00:00:00Z"}) == []
        assert search(**{names["service"]: "no-such-service"}) == []


def test_camel_case_wins_over_its_snake_case_alias(unicode_store: Path) -> None:
    window = {"query.startTimeMin": "2000-01-01T00:00:00Z", "query.startTimeMax": "2999-01-01T00:00:00Z"}
    with client(unicode_store) as http:
        both = http.get(
            "/api/v3/traces",
            params={**window, "query.serviceName": UNICODE_SERVICE, "query.service_name": "no-such-service"},
        )
        assert both.status_code == 200
        swapped = http.get(
            "/api/v3/traces",
            params={**window, "query.serviceName": "no-such-service", "query.service_name": UNICODE_SERVICE},
        )
        assert swapped.status_code == 404
        # An empty canonical value counts as absent (Jaeger's rule): the alias decides.
        empty = http.get(
            "/api/v3/traces", params={**window, "query.serviceName": "", "query.service_name": UNICODE_SERVICE}
        )
        assert empty.status_code == 200
        # The service is optional in v3, as in Jaeger v2.19+: every service's traces.
        assert http.get("/api/v3/traces", params=window).status_code == 200
        kinds = http.get("/api/v3/operations", params={"service": UNICODE_SERVICE, "spanKind": "client"}).json()
        assert (
            kinds == http.get("/api/v3/operations", params={"service": UNICODE_SERVICE, "span_kind": "client"}).json()
        )
        assert {op["spanKind"] for op in kinds["operations"]} == {"client"}


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/api/v3/traces/" + "0" * 32, 404, "trace not found"),
        ("/api/v3/traces/xyz", 400, "traceID"),
        ("/api/v3/traces/abc?start_time=yesterday", 400, "start_time"),
        ("/api/v3/traces/abc?startTime=yesterday", 400, "startTime"),
        ("/api/v3/traces/abc?endTime=2020-01-01", 400, "endTime"),
        ("/api/v3/traces/abc?rawTraces=maybe", 400, "rawTraces"),
        ("/api/v3/traces/abc?raw_traces=yes", 400, "raw_traces"),
        ("/api/v3/operations", 400, "service"),
        ("/api/v3/traces", 400, "query.startTimeMin"),
        ("/api/v3/trace-summaries", 400, "query.startTimeMin"),
        ("/api/v3/traces?query.service_name=s", 400, "query.start_time_min"),
        ("/api/v3/trace-summaries?query.startTimeMin=2020-01-01T00:00:00Z", 400, "query.startTimeMax"),
        (
            "/api/v3/trace-summaries?query.startTimeMin=2020-01-01T00:00:00Z&query.startTimeMax=2020-01-01T00:00:00Z",
            400,
            "query.startTimeMin must be before query.startTimeMax",
        ),
        (
            "/api/v3/trace-summaries?query.startTimeMin=2020-01-01T00:00:00Z&query.startTimeMax=2021-01-01T00:00:00Z"
            "&query.searchDepth=0",
            400,
            "query.searchDepth",
        ),
        (
            "/api/v3/trace-summaries?query.startTimeMin=2020-01-01T00:00:00Z&query.startTimeMax=2021-01-01T00:00:00Z"
            "&query.num_traces=x",
            400,
            "query.num_traces",
        ),
        (
            "/api/v3/trace-summaries?query.startTimeMin=2020-01-01T00:00:00Z&query.startTimeMax=2021-01-01T00:00:00Z"
            "&query.durationMax=slow",
            400,
            "query.durationMax",
        ),
        (
            "/api/v3/trace-summaries?query.startTimeMin=2020-01-01T00:00:00Z&query.startTimeMax=2021-01-01T00:00:00Z"
            "&query.rawTraces=2",
            400,
            "query.rawTraces",
        ),
        (
            "/api/v3/trace-summaries?query.startTimeMin=2020-01-01T00:00:00Z&query.startTimeMax=2021-01-01T00:00:00Z"
            "&query.attributes=%7B%22a%22%3A%5B%5D%7D",
            400,
            "query.attributes",
        ),
        (
            "/api/v3/traces?query.service_name=s&query.start_time_min=2020-01-01&query.start_time_max=2021-01-01T00:00:00Z",
            400,
            "RFC 3339",
        ),
        (
            "/api/v3/traces?query.service_name=s&query.start_time_min=2020-01-01T00:00:00Z"
            "&query.start_time_max=2021-01-01T00:00:00Z&query.duration_min=slow",
            400,
            "query.duration_min",
        ),
        ("/api/v3/nothing", 404, "not found"),
    ],
)
def test_errors_have_jaeger_v3_shape(demo: Path, path: str, status: int, message: str) -> None:
    with client(demo) as http:
        response = http.get(path)
    assert response.status_code == status
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["httpCode"] == status and message in body["error"]["message"]
