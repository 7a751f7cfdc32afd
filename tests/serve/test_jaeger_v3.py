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


def test_search(unicode_store: Path) -> None:
    window = {"query.start_time_min": "2000-01-01T00:00:00Z", "query.start_time_max": "2999-01-01T00:00:00.5+02:00"}
    with client(unicode_store) as http:

        def search(**params: str) -> dict[str, Any]:
            response = http.get("/api/v3/traces", params={"query.service_name": UNICODE_SERVICE, **window, **params})
            assert response.status_code == 200, response.text
            result: dict[str, Any] = response.json()["result"]
            parse(result)
            return result

        everything = search()
        assert len({span["traceId"] for span in spans_of(everything)}) == 2
        assert len({span["traceId"] for span in spans_of(search(**{"query.search_depth": "1"}))}) == 1
        assert spans_of(search(**{"query.operation_name": "nothing"})) == []
        found = search(**{"query.operation_name": "execute_tool lookup", "query.duration_min": "0s"})
        assert len({span["traceId"] for span in spans_of(found)}) == 2
        assert spans_of(search(**{"query.duration_min": "1h"})) == []
        assert len(spans_of(search(**{"query.attributes": json.dumps({"error": "true"})}))) == len(spans_of(everything))
        assert (
            spans_of(
                search(
                    **{"query.start_time_min": "2999-01-01T00:00:00Z", "query.start_time_max": "2999-01-02T00:00:00Z"}
                )
            )
            == []
        )


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/api/v3/traces/" + "0" * 32, 404, "trace not found"),
        ("/api/v3/traces/xyz", 400, "traceID"),
        ("/api/v3/traces/abc?start_time=yesterday", 400, "start_time"),
        ("/api/v3/operations", 400, "service"),
        ("/api/v3/traces", 400, "query.service_name"),
        ("/api/v3/traces?query.service_name=s", 400, "query.start_time_min"),
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
