"""The GenAI metrics over OTLP to a real receiver on 127.0.0.1: rotel (Rust; tonic/prost), http/protobuf and gRPC.

``configure(metrics=True)`` with an OTLP branch builds a ``MeterProvider`` of its own beside the trace branch, same
collector and protocol. rotel's metrics processor writes every data point it decoded to JSON lines
(``rotel_collector``): our metric names, units, buckets and closed attributes arrive, the resource passed the strict
policy, and each exemplar points at a span the same collector received.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rotel_collector import RotelCollector, unavailable_reason

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.pipeline.metrics import DURATION_BUCKETS, TOKEN_BUCKETS

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

HASH_KEY = "1e2465a30609a8555ff019345962296a8cd236ca47116f7b0582449c8f0bc2e4"
SERVICE = "metrics-e2e"
SENTINEL_HOST = "SENTINEL-HOST-metrics-e2e"
SENTINEL_CONV = "SENTINEL-CONV-metrics-e2e"
WAIT_S = 15.0
ATTRIBUTES = {
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.agent.name",
    "gen_ai.tool.name",
    "error.type",
    "gen_ai.token.type",
}


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_metrics_reach_a_real_collector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"host.name={SENTINEL_HOST},deployment.environment=e2e")
    with RotelCollector(tmp_path / "rotel") as rotel:
        diag = agentdiag.configure(
            service_name=SERVICE,
            store=tmp_path / "t.db",
            hash_key=HASH_KEY,
            otlp_endpoint=rotel.endpoint(protocol),
            otlp_protocol=protocol,
            set_global=False,
            metrics=True,
        )
        agentdiag.register_names(tools=["lookup"])
        with agentdiag.agent_run("metrics-e2e-agent", conversation_id=SENTINEL_CONV):
            with agentdiag.iteration(0):
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    call.record_response(response_model="gpt-4o-mini-2024-07-18", input_tokens=100, output_tokens=20)
                    call.span.set_attribute(sc.AGENTDIAG_COST_USD, 0.00003)
                with agentdiag.tool_call("lookup"):
                    pass
                with pytest.raises(KeyError), agentdiag.tool_call("unregistered_SENTINEL_tool"):
                    raise KeyError("nope")
        assert diag.metrics is not None and (diag.metrics.where, diag.metrics.branch) == ("otlp", "otlp")
        diag.shutdown()  # the batch workers record the last spans, then our meter provider exports them
        assert diag.stats()["metrics"]["spans"] == 4
        assert rotel.wait_for_spans(5, timeout=WAIT_S)
        assert rotel.wait_for_metric(sc.GEN_AI_CLIENT_COST, timeout=WAIT_S)
        points = rotel.metric_points()
        spans = rotel.spans()

    by_name: dict[str, list[dict]] = {}
    for point in points:
        by_name.setdefault(point["name"], []).append(point)
    assert set(by_name) == {sc.GEN_AI_CLIENT_TOKEN_USAGE, sc.GEN_AI_CLIENT_OPERATION_DURATION, sc.GEN_AI_CLIENT_COST}
    units = {point["name"]: point["unit"] for point in points}
    assert units == {
        sc.GEN_AI_CLIENT_TOKEN_USAGE: "{token}",
        sc.GEN_AI_CLIENT_OPERATION_DURATION: "s",
        sc.GEN_AI_CLIENT_COST: "{USD}",
    }
    assert {point["type"] for point in points} == {"Histogram"}
    tokens = {p["attributes"]["gen_ai.token.type"]: p["sum"] for p in by_name[sc.GEN_AI_CLIENT_TOKEN_USAGE]}
    assert tokens == {"input": 100, "output": 20}
    assert by_name[sc.GEN_AI_CLIENT_TOKEN_USAGE][0]["explicit_bounds"] == list(TOKEN_BUCKETS)
    durations = sorted(
        (
            p["attributes"]["gen_ai.operation.name"],
            p["attributes"].get("gen_ai.tool.name"),
            p["attributes"].get("error.type"),
        )
        for p in by_name[sc.GEN_AI_CLIENT_OPERATION_DURATION]
    )
    assert durations == [
        ("chat", None, None),
        ("execute_tool", "_OTHER", "KeyError"),
        ("execute_tool", "lookup", None),
        ("invoke_agent", None, None),
    ]
    assert by_name[sc.GEN_AI_CLIENT_OPERATION_DURATION][0]["explicit_bounds"] == list(DURATION_BUCKETS)
    (cost,) = by_name[sc.GEN_AI_CLIENT_COST]
    assert (cost["count"], cost["sum"]) == (1, pytest.approx(0.00003))
    assert cost["attributes"] == {
        "gen_ai.operation.name": "chat",
        "gen_ai.agent.name": "metrics-e2e-agent",  # the run's, set on its model calls at start
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    }
    for point in points:
        assert set(point["attributes"]) <= ATTRIBUTES
        # The resource passed the strict policy's resource rules, as the spans' did: never raw.
        assert point["resource"]["service.name"] == SERVICE
        assert point["resource"]["deployment.environment"] == "e2e"
        assert "host.name" not in point["resource"]
        assert point["scope"] == "otel_agentdiag"
    text = repr(points)
    for secret in (SENTINEL_HOST, SENTINEL_CONV, "unregistered_SENTINEL_tool", "hmac-sha256"):
        assert secret not in text
    # Exemplars (trace-based: our spans are sampled) point at spans this collector received.
    received = {(s["trace_id"], s["span_id"]) for s in spans}
    exemplars = [(e["trace_id"], e["span_id"]) for p in points for e in p["exemplars"]]
    assert exemplars and set(exemplars) <= received
