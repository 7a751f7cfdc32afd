"""The Jaeger API over stores the real pipeline wrote from real frameworks (the runnable examples: the OpenAI
Agents SDK and LangGraph against the fake model server) and over an ingested store (``agentdiag ingest`` of the
demo's OTLP-JSON export): every service has operations, a search finds every trace, and each trace by id (v1 and
v3) is what ``agentdiag export`` writes for it, in Jaeger's trace model and as protobuf ``TracesData``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from serve_helpers import client, demo_store, export_jaeger, export_otlp, run_cli
from test_jaeger_v1 import check_envelope, check_trace

ROOT = Path(__file__).resolve().parents[2]


def _example(tmp_path: Path, name: str, module: str) -> Path:
    pytest.importorskip(module, reason=f"{module} (the example's extra) is not installed")
    store = tmp_path / name / "traces.db"
    store.parent.mkdir()
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return store


def _ingested(tmp_path: Path) -> Path:
    demo = demo_store(tmp_path)
    exported = tmp_path / "demo.jsonl"
    run_cli("export", "--store", demo, "--format", "otlp-json", "--out", exported)
    store = tmp_path / "ingested" / "traces.db"
    run_cli("ingest", exported, "--store", store)
    return store


@pytest.fixture(params=["openai_agents_weather.py", "langgraph_react.py", "ingested"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "ingested":
        return _ingested(tmp_path)
    module = {"openai_agents_weather.py": "agents", "langgraph_react.py": "langgraph"}[request.param]
    return _example(tmp_path, request.param, module)


def _by_trace(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {trace["traceID"]: trace for trace in document["data"]}


def test_every_service_operation_and_trace_is_served_as_exported(store: Path, tmp_path: Path) -> None:
    exported = _by_trace(export_jaeger(store, tmp_path / "all.json"))
    otlp_lines = export_otlp(store, tmp_path / "all.jsonl")
    assert exported, "the store holds traces"
    with client(store) as http:
        services = check_envelope(http.get("/api/services").json())
        assert services
        found: set[str] = set()
        for service in services:
            operations = check_envelope(http.get(f"/api/services/{quote(service, safe='')}/operations").json())
            assert operations and all(isinstance(name, str) and name for name in operations)
            traces = check_envelope(http.get("/api/traces", params={"service": service, "limit": "100"}).json())
            found |= {trace["traceID"] for trace in traces}
        assert found == set(exported)
        for trace_id, expected in exported.items():
            (trace,) = check_envelope(http.get(f"/api/traces/{trace_id}").json())
            check_trace(trace)
            assert trace == expected
            result = http.get(f"/api/v3/traces/{trace_id}").json()["result"]
            message = json_format.Parse(json.dumps(result), TracesData())  # valid TracesData (ids: OTLP's hex)
            assert sum(len(ss.spans) for rs in message.resource_spans for ss in rs.scope_spans) == len(
                expected["spans"]
            )
            served = {
                span["spanId"] for rs in result["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]
            }
            assert served == {span["spanID"] for span in expected["spans"]}
    exported_v3 = {
        span["spanId"]
        for line in otlp_lines
        for rs in line["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    }
    assert exported_v3 == {span["spanID"] for trace in exported.values() for span in trace["spans"]}
