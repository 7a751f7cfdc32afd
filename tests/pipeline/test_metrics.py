"""The GenAI metrics from spans: exact values from the SDK's in-memory reader, after the adapters and the redactor.

Every test configures the real pipeline (a real SQLite store) with a real SDK ``MeterProvider`` whose
``InMemoryMetricReader`` gives back exactly what was recorded; the store is the reference for the spans.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from hostile_vocabulary import DATA_SEGMENTS
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.trace import StatusCode
from pipeline_support import HASH_KEY

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.pipeline.metrics import (
    COST_BUCKETS,
    DURATION_BUCKETS,
    MAX_VALUES_PER_KEY,
    TOKEN_BUCKETS,
)
from otel_agentdiag.storage import SpanStore, StoredSpan

AGENT = "metrics-agent"
CONVERSATION = "conv-SENTINEL-metrics-7f3a"
USER = "jane.doe@example.com"


class Meters:
    """A real SDK meter provider and its in-memory reader; the points of one metric, by attributes."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])

    def metrics(self) -> dict[str, Any]:
        data = self.reader.get_metrics_data()
        found: dict[str, Any] = {}
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found[metric.name] = metric
        return found

    def points(self, name: str) -> list[HistogramDataPoint]:
        metric = self.metrics().get(name)
        return [] if metric is None else list(metric.data.data_points)

    def point(self, name: str, **attributes: str) -> HistogramDataPoint:
        wanted = {key.replace("__", "."): value for key, value in attributes.items()}
        matching = [p for p in self.points(name) if dict(p.attributes or {}) == wanted]
        assert len(matching) == 1, (wanted, [dict(p.attributes or {}) for p in self.points(name)])
        return matching[0]


@pytest.fixture
def meters() -> Iterator[Meters]:
    found = Meters()
    yield found
    found.provider.shutdown()


def _trace(store: Path) -> list[StoredSpan]:
    with SpanStore(store, create=False) as reader:
        (summary,) = reader.list_traces()
        return list(reader.get_trace(summary.trace_id))


def _scripted_run() -> None:
    """agent_run → iterations → llm_call with usage (one with a cost) → tool_call, with one failing tool."""
    agentdiag.register_names(tools=["lookup", "explode"])
    with agentdiag.agent_run(AGENT, conversation_id=CONVERSATION, user_id=USER):
        with agentdiag.iteration(0):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.record_response(response_model="gpt-4o-mini-2024-07-18", input_tokens=120, output_tokens=30)
                call.span.set_attribute(sc.AGENTDIAG_COST_USD, 0.000036)
            with agentdiag.tool_call("lookup", call_id="call-SENTINEL-1"):
                pass
            with pytest.raises(ValueError), agentdiag.tool_call("explode", call_id="call-SENTINEL-2"):
                raise ValueError("boom with SENTINEL data")
        with agentdiag.iteration(1):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.record_response(response_model="gpt-4o-mini-2024-07-18", input_tokens=300, output_tokens=7)


def test_a_scripted_run_gives_exact_token_sums_durations_errors_and_cost(tmp_path: Path, meters: Meters) -> None:
    store = tmp_path / "t.db"
    with agentdiag.configure(store=store, hash_key=HASH_KEY, set_global=False, meter_provider=meters.provider) as diag:
        _scripted_run()
        assert diag.force_flush()
        stats = diag.stats()["metrics"]
    spans = _trace(store)
    (run,) = [s for s in spans if s.attributes.get(sc.AGENTDIAG_KIND) == sc.KIND_RUN]

    # Model and tool calls name the run's agent (the sequencer, from the context): per-agent tokens and cost.
    llm = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.agent.name": AGENT}
    models = {"gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18"}
    assert {s.attributes.get(sc.GEN_AI_AGENT_NAME) for s in spans} == {AGENT, None}  # iterations name none
    tokens = sc.GEN_AI_CLIENT_TOKEN_USAGE
    input_point = meters.point(tokens, **_keys(llm, models, {"gen_ai.token.type": "input"}))
    output_point = meters.point(tokens, **_keys(llm, models, {"gen_ai.token.type": "output"}))
    # The metric's sums are the stored leaves' usage: every token counted once (the roll-ups: the next tests).
    assert (input_point.sum, input_point.count) == (420, 2)
    assert (output_point.sum, output_point.count) == (37, 2)
    leaves = [s for s in spans if s.attributes.get(sc.AGENTDIAG_KIND) == sc.KIND_LLM]
    assert sum(s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in leaves) == input_point.sum
    assert sum(s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in leaves) == output_point.sum
    # ... and the run's roll-ups: metrics and roll-ups agree.
    assert run.attributes["agentdiag.usage.input_tokens"] == input_point.sum
    assert run.attributes["agentdiag.usage.output_tokens"] == output_point.sum
    assert tuple(input_point.explicit_bounds) == TOKEN_BUCKETS

    duration = sc.GEN_AI_CLIENT_OPERATION_DURATION
    chat = meters.point(duration, **_keys(llm, models))
    assert chat.count == 2
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.agent.name": AGENT}
    ok_tool = meters.point(duration, **_keys(tool, {"gen_ai.tool.name": "lookup"}))
    failed_tool = meters.point(duration, **_keys(tool, {"gen_ai.tool.name": "explode", "error.type": "ValueError"}))
    agent = meters.point(duration, **_keys({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT}))
    assert (ok_tool.count, failed_tool.count, agent.count) == (1, 1, 1)
    # Durations once per span: 2 model calls, 2 tools, 1 run (iterations are no operation).
    assert sum(p.count for p in meters.points(duration)) == 5
    assert tuple(chat.explicit_bounds) == DURATION_BUCKETS
    by_name = {s.name: s for s in spans}
    run_seconds = run.duration_ns / 1e9
    assert agent.sum == pytest.approx(run_seconds)
    tool_seconds = by_name["execute_tool explode"].duration_ns / 1e9
    assert failed_tool.sum == pytest.approx(tool_seconds)

    cost = meters.point(sc.GEN_AI_CLIENT_COST, **_keys(llm, models))
    # One cost set by hand (kept), one from the bundled price table: the metric, the leaves and the roll-up agree.
    leaf_costs = [s.attributes[sc.AGENTDIAG_COST_USD] for s in leaves]
    assert leaf_costs[0] == 0.000036 or leaf_costs[1] == 0.000036
    assert (cost.sum, cost.count) == (pytest.approx(sum(leaf_costs)), 2)
    assert run.attributes[sc.AGENTDIAG_USAGE_COST_USD] == pytest.approx(cost.sum)
    assert tuple(cost.explicit_bounds) == COST_BUCKETS
    assert meters.points(sc.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK) == []  # nothing streamed
    metrics = meters.metrics()
    assert metrics[tokens].unit == "{token}"
    assert metrics[duration].unit == "s"
    assert metrics[sc.GEN_AI_CLIENT_COST].unit == "{USD}"
    assert stats == {
        "where": "meter_provider",
        "branch": "local",
        "spans": 5,
        "measurements": 5 + 4 + 2,  # durations, token points (2 calls, in and out), costs
        "failed": 0,
        "folded_values": 0,
    }


def _keys(*parts: dict[str, str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for part in parts:
        merged.update(part)
    return {key.replace(".", "__"): value for key, value in merged.items()}


def test_exemplars_link_each_measurement_to_its_span(tmp_path: Path, meters: Meters) -> None:
    store = tmp_path / "t.db"
    with agentdiag.configure(store=store, hash_key=HASH_KEY, set_global=False, meter_provider=meters.provider):
        _scripted_run()
    spans = _trace(store)
    ids = {(int(s.trace_id, 16), int(s.span_id, 16)) for s in spans}
    points = meters.points(sc.GEN_AI_CLIENT_OPERATION_DURATION)  # one collection: the SDK resets exemplars after it
    exemplars = [e for p in points for e in p.exemplars]
    assert len(exemplars) == len(points)  # one per bucket hit: each of these points took one span per bucket
    assert {(e.trace_id, e.span_id) for e in exemplars} <= ids
    (run,) = [s for s in spans if s.attributes.get(sc.AGENTDIAG_KIND) == sc.KIND_RUN]
    (agent_point,) = [p for p in points if p.attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_INVOKE_AGENT]
    assert [(e.trace_id, e.span_id) for e in agent_point.exemplars] == [(int(run.trace_id, 16), int(run.span_id, 16))]


def test_time_to_first_chunk_of_a_stream_through_the_real_openai_client(tmp_path: Path, meters: Meters) -> None:
    from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

    store = tmp_path / "t.db"
    diag = agentdiag.configure(store=store, hash_key=HASH_KEY, set_global=False, meter_provider=meters.provider)
    OpenAIInstrumentor().instrument()
    try:
        with FakeModelServer() as server:
            client = openai.OpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, max_retries=0)
            with agentdiag.agent_run(AGENT):
                stream = client.chat.completions.create(
                    model="gpt-4o-mini",
                    messages=[{"role": "user", "content": "hi"}],
                    stream=True,
                    stream_options={"include_usage": True},
                )
                text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
                stream.close()
    finally:
        OpenAIInstrumentor().uninstrument()
        gc.collect()
        diag.shutdown()
    assert text
    (llm,) = [s for s in _trace(store) if s.attributes.get(sc.AGENTDIAG_KIND) == sc.KIND_LLM]
    first_chunk = llm.attributes[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
    (point,) = meters.points(sc.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK)
    assert (point.count, point.sum) == (1, pytest.approx(first_chunk))
    assert point.attributes[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert point.attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
    usage = {p.attributes[sc.GEN_AI_TOKEN_TYPE]: p.sum for p in meters.points(sc.GEN_AI_CLIENT_TOKEN_USAGE)}
    assert usage == {
        "input": llm.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS],
        "output": llm.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS],
    }


def test_foreign_spans_are_recorded_after_the_adapters(tmp_path: Path, meters: Meters) -> None:
    store = tmp_path / "t.db"
    with agentdiag.configure(store=store, hash_key=HASH_KEY, set_global=False, meter_provider=meters.provider) as diag:
        tracer = diag.tracer_provider.get_tracer("a-peer-instrumentation")  # type: ignore[union-attr]
        with tracer.start_as_current_span("invoke_agent peer") as run:
            # Pydantic AI's roll-up of the run (the adapter moves it to agentdiag.usage.*): never counted again.
            run.set_attributes(
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.aggregated_usage.input_tokens": 61,
                    "gen_ai.aggregated_usage.output_tokens": 9,
                }
            )
            with tracer.start_as_current_span("chat gpt-4.1") as genai:  # the GenAI conventions, older usage keys
                genai.set_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.system": "openai",
                        "gen_ai.request.model": "gpt-4.1",
                        "gen_ai.usage.prompt_tokens": 50,
                        "gen_ai.usage.completion_tokens": 5,
                    }
                )
            with tracer.start_as_current_span("ChatCompletion") as oi:  # OpenInference
                oi.set_attributes(
                    {
                        "openinference.span.kind": "LLM",
                        "llm.provider": "anthropic",
                        "llm.model_name": "claude-x",
                        "llm.token_count.prompt": 11,
                        "llm.token_count.completion": 4,
                    }
                )
            with tracer.start_as_current_span("a tool") as tool:
                tool.set_attributes({"openinference.span.kind": "TOOL", "tool.name": "unregistered_tool_xyz"})
                tool.set_status(StatusCode.ERROR)
            with tracer.start_as_current_span("retrieve") as other:  # an operation that is no metric
                other.set_attribute("openinference.span.kind", "RETRIEVER")
    keys = (sc.GEN_AI_PROVIDER_NAME, sc.GEN_AI_REQUEST_MODEL, sc.GEN_AI_TOKEN_TYPE)
    tokens = {tuple(p.attributes[k] for k in keys): p.sum for p in meters.points(sc.GEN_AI_CLIENT_TOKEN_USAGE)}
    assert tokens == {
        ("openai", "gpt-4.1", "input"): 50,
        ("openai", "gpt-4.1", "output"): 5,
        ("anthropic", "claude-x", "input"): 11,
        ("anthropic", "claude-x", "output"): 4,
    }
    (run_span,) = [s for s in _trace(store) if s.attributes.get(sc.AGENTDIAG_KIND) == sc.KIND_RUN]
    assert run_span.attributes[sc.AGENTDIAG_USAGE_PREFIX + "input_tokens"] == 61 == 50 + 11  # roll-up and metric
    assert run_span.attributes[sc.AGENTDIAG_USAGE_PREFIX + "output_tokens"] == 9 == 5 + 4
    operations = sorted(
        (p.attributes[sc.GEN_AI_OPERATION_NAME], p.attributes.get(sc.GEN_AI_TOOL_NAME), p.attributes.get(sc.ERROR_TYPE))
        for p in meters.points(sc.GEN_AI_CLIENT_OPERATION_DURATION)
        for _ in range(p.count)
    )
    # The unregistered tool is _OTHER (the policy said so), and failed without a type: error.type _OTHER.
    assert operations == sorted(
        [("chat", None, None), ("chat", None, None), ("execute_tool", "_OTHER", "_OTHER"), ("invoke_agent", None, None)]
    )


def test_no_id_or_free_string_is_ever_a_metric_attribute(tmp_path: Path, meters: Meters) -> None:
    store = tmp_path / "t.db"
    with agentdiag.configure(
        store=store, hash_key=HASH_KEY, set_global=False, meter_provider=meters.provider, local_policy="strict"
    ):
        with agentdiag.agent_run("customer_4111111111111111", conversation_id=CONVERSATION, user_id=USER):
            for hostile in DATA_SEGMENTS:
                with agentdiag.tool_call(hostile, call_id=f"call-{hostile}", arguments={"q": hostile}):
                    pass
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    call.record_response(response_id=f"resp-{hostile}", input_tokens=1, output_tokens=1)
    values = {
        str(value)
        for metric in meters.metrics().values()
        for point in metric.data.data_points
        for value in (point.attributes or {}).values()
    }
    keys = {key for metric in meters.metrics().values() for p in metric.data.data_points for key in p.attributes or {}}
    assert keys <= {
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.response.model",
        "gen_ai.agent.name",
        "gen_ai.tool.name",
        "error.type",
        "gen_ai.token.type",
    }
    assert values == {"invoke_agent", "execute_tool", "chat", "openai", "gpt-4o-mini", "_OTHER", "input", "output"}
    for value in values:
        for secret in (*DATA_SEGMENTS, CONVERSATION, USER, "hmac-sha256", "4111111111111111"):
            assert secret not in value


def test_thousands_of_tool_names_leave_the_series_bounded(tmp_path: Path, meters: Meters) -> None:
    registered = [f"registered_tool_{i}" for i in range(1500)]
    agentdiag.register_names(tools=registered)
    store = tmp_path / "t.db"
    with agentdiag.configure(store=store, hash_key=HASH_KEY, set_global=False, meter_provider=meters.provider) as diag:
        with agentdiag.agent_run(AGENT):
            for i, name in enumerate(registered + [f"invented_tool_{i}" for i in range(1500)]):
                with agentdiag.tool_call(name):
                    pass
                if i % 500 == 499:
                    assert diag.force_flush()  # within the queue's bound: every span recorded
        assert diag.force_flush()
        stats = diag.stats()["metrics"]
    tools = [p for p in meters.points(sc.GEN_AI_CLIENT_OPERATION_DURATION) if sc.GEN_AI_TOOL_NAME in p.attributes]
    names = {p.attributes[sc.GEN_AI_TOOL_NAME] for p in tools}
    assert len(tools) == len(names) == MAX_VALUES_PER_KEY + 1  # the first 200 names seen, and _OTHER
    assert sc.OTHER_VALUE in names
    assert sum(p.count for p in tools) == 3000  # every call counted, in a bounded number of series
    assert stats["spans"] == 3001
    assert stats["folded_values"] == 1500 - MAX_VALUES_PER_KEY  # registered names past the bound


class _BrokenMeterProvider(MeterProvider):
    """A user's provider whose histograms fail on every measurement."""

    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        meter = super().get_meter(*args, **kwargs)
        original = meter.create_histogram

        def create_histogram(*a: Any, **k: Any) -> Any:
            histogram = original(*a, **k)

            class Broken:
                def record(self, *_: Any, **__: Any) -> None:
                    raise RuntimeError("the user's meter failed")

            del histogram
            return Broken()

        meter.create_histogram = create_histogram  # type: ignore[method-assign]
        return meter


def test_a_failing_meter_is_counted_logged_once_and_hurts_no_span(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = _BrokenMeterProvider()
    store = tmp_path / "t.db"
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        with agentdiag.configure(store=store, hash_key=HASH_KEY, set_global=False, meter_provider=provider) as diag:
            _scripted_run()
            assert diag.force_flush()
            stats = diag.stats()
    provider.shutdown()
    assert len(_trace(store)) == 7  # run, 2 iterations, 2 model calls, 2 tools: all stored
    assert stats["metrics"]["failed"] == 5
    assert stats["metrics"]["spans"] == 0
    failures = [r for r in caplog.records if "recording GenAI metrics" in r.getMessage()]
    assert len(failures) == 1
    assert "RuntimeError" in failures[0].getMessage() and "failed" in failures[0].getMessage()


def test_metrics_are_off_by_default_and_the_switches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with agentdiag.configure(store=tmp_path / "a.db", hash_key=HASH_KEY, set_global=False) as diag:
        assert diag.metrics is None
        assert "metrics" not in diag.stats()
    monkeypatch.setenv("AGENTDIAG_METRICS", "true")
    with agentdiag.configure(store=tmp_path / "b.db", hash_key=HASH_KEY, set_global=False) as diag:
        assert diag.metrics is not None
        assert (diag.metrics.where, diag.metrics.branch) == ("global", "local")  # no OTLP branch: the global one
    with agentdiag.configure(store=tmp_path / "c.db", hash_key=HASH_KEY, set_global=False, metrics=False) as diag:
        assert diag.metrics is None  # the argument wins
    with pytest.raises(ValueError, match="metrics=False"):
        agentdiag.configure(store=tmp_path / "d.db", meter_provider=MeterProvider(), metrics=False)
    with pytest.raises(ValueError, match="MeterProvider"):
        agentdiag.configure(store=tmp_path / "d.db", meter_provider=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="metrics must be"):
        agentdiag.configure(store=tmp_path / "d.db", metrics="yes")  # type: ignore[arg-type]


def test_a_malformed_switch_means_off_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENTDIAG_METRICS", "perhaps")
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        with agentdiag.configure(store=tmp_path / "a.db", hash_key=HASH_KEY, set_global=False) as diag:
            assert diag.metrics is None
    assert any("AGENTDIAG_METRICS" in r.getMessage() and "perhaps" not in r.getMessage() for r in caplog.records)


def test_doctor_says_whether_metrics_are_on_and_where_they_go(monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_agentdiag.options import resolve_options
    from otel_agentdiag.pipeline.metrics_setup import describe_metrics

    assert describe_metrics(resolve_options(None, False, None)).startswith("off")
    monkeypatch.setenv("AGENTDIAG_METRICS", "true")
    assert "global MeterProvider" in describe_metrics(resolve_options(None, False, None))
    on = describe_metrics(resolve_options(None, False, "http://127.0.0.1:4318", "grpc"))
    assert on.startswith("on: OTLP grpc")
