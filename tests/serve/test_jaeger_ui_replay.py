"""Every request Jaeger UI made of ``agentdiag serve`` (``tests/serve/data/jaeger-ui-requests.jsonl``: the
current UI, v2.20.0, and v2.18.0, recorded in a browser) replayed against the real application over a store that
holds what the UI was shown: each answer is 200 and has the shape Jaeger's definitions give it, field by field,
as the UI reads it.

The definitions: api_v3 (``jaegertracing/jaeger-idl`` ``proto/api_v3/query_service.proto``, proto3 JSON: camelCase
names, 64-bit integers as decimal text; the UI checks ``trace-summaries`` with its zod schemas,
``packages/jaeger-ui/src/api/v3/schemas.ts``) and the v1 JSON model (``jaeger`` ``model/json``: ``traceID``,
``spans``, ``processes``; the envelope ``data``/``total``/``limit``/``offset``/``errors``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context
from serve_helpers import client

import otel_agentdiag as agentdiag

REQUESTS_FILE = Path(__file__).with_name("data") / "jaeger-ui-requests.jsonl"
"""The requests Jaeger UI v2.20.0 and v2.18.0 made of ``serve`` (recorded by the project's research,
``shared/research/jaeger-ui-requests.jsonl``), kept with the tests so that every clone replays them."""
AT = int(datetime(2026, 12, 6, 11, 30, tzinfo=timezone.utc).timestamp()) * 1_000_000_000
"""When the stored runs start: inside every time window the recorded searches name (10:56 to 12:05 UTC)."""
MS = 1_000_000

HEX32 = re.compile(r"[0-9a-f]{32}")
HEX16 = re.compile(r"[0-9a-f]{16}")
DECIMAL = re.compile(r"[0-9]+")


def recorded() -> list[dict[str, str]]:
    if not REQUESTS_FILE.is_file():
        pytest.skip(f"the recorded Jaeger UI requests are not here: {REQUESTS_FILE}")
    return [json.loads(line) for line in REQUESTS_FILE.read_text().splitlines() if line.strip()]


class _Ids(RandomIdGenerator):
    """The recorded trace ids for the runs, in order (span ids stay random)."""

    def __init__(self, trace_ids: Sequence[str]) -> None:
        self._trace_ids = [int(t, 16) for t in trace_ids]

    def generate_trace_id(self) -> int:
        return self._trace_ids.pop(0)


def _run(provider: TracerProvider, agent: str, at: int, *, model: str, tool: str | None, slow_error: bool) -> None:
    """An agent run at ``at`` (ns): a chat call, then (``tool``) a tool call, 40 ms and a TimeoutError when
    ``slow_error``. Spans named and attributed by the GenAI conventions, at the given times."""
    tracer = provider.get_tracer("replay")
    root = tracer.start_span(
        f"invoke_agent {agent}",
        start_time=at,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent},
    )
    parent = set_span_in_context(root)
    chat = tracer.start_span(
        f"chat {model}",
        context=parent,
        kind=SpanKind.CLIENT,
        start_time=at + 1 * MS,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": 12,
            "gen_ai.usage.output_tokens": 5,
        },
    )
    chat.end(end_time=at + 11 * MS)
    end = at + 12 * MS
    if tool is not None:
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
        if slow_error:
            attributes["error.type"] = "TimeoutError"
        call = tracer.start_span(f"execute_tool {tool}", context=parent, start_time=end, attributes=attributes)
        if slow_error:
            call.set_status(Status(StatusCode.ERROR))
        end += (40 if slow_error else 5) * MS
        call.end(end_time=end)
    root.end(end_time=end + 1 * MS)


def ui_store(path: Path, trace_ids: Sequence[str]) -> Path:
    """Three services' runs on 2026-12-06 at 11:30 UTC, the recorded trace ids for research-agent's four."""
    agentdiag.register_names(tools=["fetch_page", "lookup"], agents=["researcher", "support", "batcher"])
    plans: list[tuple[str, str, int, list[tuple[str, str | None, bool]]]] = [
        (
            "research-agent",
            "researcher",
            len(trace_ids),
            [("gpt-4o", "fetch_page", n % 2 == 0) for n in range(len(trace_ids))],
        ),
        ("support-bot", "support", 2, [("gpt-4o-mini", "lookup", False)] * 2),
        ("batch-agent", "batcher", 1, [("gpt-4o-mini", None, False)]),
    ]
    for service, agent, count, runs in plans:
        ids = list(trace_ids) if service == "research-agent" else [f"{n + 1:032x}" for n in range(count)]
        provider = TracerProvider(resource=Resource.create({"service.name": service}), id_generator=_Ids(ids))
        with agentdiag.configure(store=path, tracer_provider=provider, set_global=False):
            for n, (model, tool, slow_error) in enumerate(runs):
                _run(provider, agent, AT + n * 1000 * MS, model=model, tool=tool, slow_error=slow_error)
    return path


# -- Jaeger's shapes, as the UI reads them ---------------------------------------------------------------------
def _only(body: dict[str, Any], required: set[str], optional: frozenset[str] | set[str] = frozenset()) -> None:
    assert required <= set(body) <= required | optional, sorted(body)


def check_services(body: dict[str, Any]) -> None:
    _only(body, {"services"})
    assert body["services"] and all(isinstance(s, str) and s for s in body["services"])


def check_operations(body: dict[str, Any]) -> None:
    _only(body, {"operations"})
    assert body["operations"]
    for operation in body["operations"]:
        _only(operation, {"name", "spanKind"})
        assert isinstance(operation["name"], str) and isinstance(operation["spanKind"], str)


def check_trace_summaries(body: dict[str, Any], depth: int) -> list[dict[str, Any]]:
    """``FindTraceSummariesResponse``: ``TraceSummary`` fields by their proto3 JSON names; ``traceId`` 32 hex
    digits; the ``fixed64`` times decimal text (BigInt reads them); the ``int32`` counts numbers of at least 0."""
    _only(body, set(), {"summaries"})
    found: list[dict[str, Any]] = body.get("summaries", [])
    assert 0 < len(found) <= depth
    counts = {"spanCount", "errorSpanCount", "orphanSpanCount"}
    for summary in found:
        _only(
            summary,
            {"traceId"},
            {"rootServiceName", "rootOperationName", "minStartTimeUnixNano", "maxEndTimeUnixNano", "services"} | counts,
        )
        assert HEX32.fullmatch(summary["traceId"])
        for name in ("rootServiceName", "rootOperationName"):
            assert isinstance(summary.get(name, ""), str)
        start, end = summary["minStartTimeUnixNano"], summary["maxEndTimeUnixNano"]
        assert isinstance(start, str) and DECIMAL.fullmatch(start) and isinstance(end, str) and DECIMAL.fullmatch(end)
        assert int(end) >= int(start) > 0
        for name in counts:
            value = summary.get(name, 0)
            assert type(value) is int and 0 <= value < 2**31
        for service in summary.get("services", []):
            _only(service, {"name"}, {"spanCount", "errorSpanCount"})
            assert isinstance(service["name"], str)
            assert all(
                type(service.get(n, 0)) is int and service.get(n, 0) >= 0 for n in ("spanCount", "errorSpanCount")
            )
        assert sum(s.get("spanCount", 0) for s in summary.get("services", [])) == summary.get("spanCount", 0)
    return found


_TAG_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "bool": bool,
    "int64": int,
    "float64": (int, float),
    "binary": str,
}


def check_v1_traces(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The v1 envelope and each trace of Jaeger's JSON model."""
    _only(body, {"data", "total", "limit", "offset", "errors"})
    assert body["errors"] is None and isinstance(body["data"], list) and body["total"] == len(body["data"])
    for trace in body["data"]:
        _only(trace, {"traceID", "spans", "processes"}, {"warnings"})
        assert HEX32.fullmatch(trace["traceID"]) and trace["spans"]
        for span in trace["spans"]:
            assert span["traceID"] == trace["traceID"] and HEX16.fullmatch(span["spanID"])
            assert isinstance(span["operationName"], str) and span["processID"] in trace["processes"]
            assert type(span["startTime"]) is int and span["startTime"] > 1_500_000_000_000_000  # µs
            assert type(span["duration"]) is int and span["duration"] >= 0
            for reference in span["references"]:
                _only(reference, {"refType", "traceID", "spanID"})
                assert reference["refType"] in ("CHILD_OF", "FOLLOWS_FROM")
            for tag in span["tags"]:
                _only(tag, {"key", "type", "value"})
                assert isinstance(tag["value"], _TAG_TYPES[tag["type"]]), tag
            for log in span["logs"]:
                assert type(log["timestamp"]) is int and isinstance(log["fields"], list)
        for process in trace["processes"].values():
            assert isinstance(process["serviceName"], str) and process["serviceName"]
            assert isinstance(process["tags"], list)
    traces: list[dict[str, Any]] = body["data"]
    return traces


def check_dependencies(body: dict[str, Any]) -> None:
    assert isinstance(body["data"], list)
    for link in body["data"]:
        assert {"parent", "child", "callCount"} <= set(link)


# -- the replay ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def requests() -> list[dict[str, str]]:
    return recorded()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, requests: list[dict[str, str]]) -> Path:
    opened = sorted({r["path"].split("/")[3].split("?")[0] for r in requests if r["path"].startswith("/api/traces/")})
    assert len(opened) == 4, opened
    return ui_store(tmp_path_factory.mktemp("ui") / "traces.db", opened)


def test_every_recorded_request_is_answered_in_jaeger_shape(store: Path, requests: list[dict[str, str]]) -> None:
    answered: dict[str, int] = {}
    with client(store) as http:
        for request in requests:
            assert request["method"] == "GET"
            path = request["path"]
            response = http.get(path)
            assert response.status_code == 200, (request, response.text[:300])
            assert response.headers["content-type"].startswith("application/json")
            body = response.json()
            route = urlsplit(path).path
            query = parse_qs(urlsplit(path).query, keep_blank_values=True)
            if route == "/api/v3/services":
                check_services(body)
            elif route == "/api/v3/operations":
                check_operations(body)
            elif route == "/api/v3/trace-summaries":
                found = check_trace_summaries(body, int(query["query.searchDepth"][0]))
                assert {s["rootServiceName"] for s in found} == set(query["query.serviceName"])
            elif route.startswith("/api/traces/"):
                (trace,) = check_v1_traces(body)
                assert trace["traceID"] == route.rsplit("/", 1)[1]
            elif route == "/api/traces":
                traces = check_v1_traces(body)
                if "traceID" in query:
                    assert sorted(t["traceID"] for t in traces) == sorted(query["traceID"])
                elif "start" in query:  # a search inside the stored runs' window finds them
                    assert traces
            elif route == "/api/dependencies":
                check_dependencies(body)
            else:
                pytest.fail(f"a recorded request this test does not know: {path}")
            answered[request["ui"]] = answered.get(request["ui"], 0) + 1
    assert sum(answered.values()) == len(requests) and len(answered) == 2, answered


def test_todays_search_finds_what_the_older_ui_found(store: Path, requests: list[dict[str, str]]) -> None:
    """The current UI's search (``/api/v3/trace-summaries``) and v2.18's (``/api/traces``) of the same service,
    with and without the error filter, name the same traces; and the summaries agree with each trace."""
    v3 = [r["path"] for r in requests if r["path"].startswith("/api/v3/trace-summaries")]
    v1 = [r["path"] for r in requests if r["path"].startswith("/api/traces?") and "service=research-agent" in r["path"]]
    plain_v1 = next(p for p in v1 if "operation=" not in p and "tags=" not in p and "minDuration=30ms" not in p)
    error_v1 = f"/api/traces?service=research-agent&start={AT // 1000 - 3_600_000_000}&end={AT // 1000 + 3_600_000_000}"
    error_v1 += "&limit=20&tags=%7B%22error%22%3A%22true%22%7D"
    with client(store) as http:
        plain, errors = (http.get(p).json()["summaries"] for p in v3)
        assert {s["traceId"] for s in plain} == {t["traceID"] for t in http.get(plain_v1).json()["data"]}
        assert {s["traceId"] for s in errors} == {t["traceID"] for t in http.get(error_v1).json()["data"]}
        assert 0 < len(errors) < len(plain)  # the error filter keeps the runs whose tool timed out
        for summary in plain:
            (trace,) = http.get(f"/api/traces/{summary['traceId']}").json()["data"]
            assert summary["spanCount"] == len(trace["spans"])
            assert int(summary["minStartTimeUnixNano"]) // 1000 == min(s["startTime"] for s in trace["spans"])
            error_spans = [s for s in trace["spans"] if {"key": "error", "type": "bool", "value": True} in s["tags"]]
            assert summary["errorSpanCount"] == len(error_spans)
