"""An agent run → our OTLP exporter → the real Collector (``collector-config/otelcol.yaml`` unchanged) → Jaeger,
and the same Collector's Tempo leg → a second OTLP receiver standing in for Tempo.

Two runs: the demo agent (in this process, ``configure(otlp_endpoint=...)``) and the LangGraph example
(``examples/langgraph_react.py --stream`` as its own process, configured by ``OTEL_EXPORTER_OTLP_ENDPOINT``
alone). For each, Jaeger's query API v3 (``/api/v3/traces/{id}``) and v1 (``/api/traces/{id}``) return the trace
with the same tree, span names, token counts and costs as ``agentdiag show --format json`` of the local store;
the correlation ids are the OTLP branch's digests, untouched by the Collector; nothing of ours was removed or
masked there; and the Tempo stand-in received the same spans.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import re
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from backend_processes import ROOT, Collector, Jaeger
from click.testing import CliRunner
from otlp_grpc_sink import OTLPGrpcSink
from trace_reading import BackendSpan, read_trace

pytestmark = pytest.mark.backends

DEMO_PRICES = Path(str(importlib.resources.files("otel_agentdiag.cost") / "demo_prices.toml"))

SDK_KEY = secrets.token_hex(32).encode()
OTLP_KEY = secrets.token_hex(32).encode()
TOKEN_OR_COST = re.compile(r"^(gen_ai\.usage\.|agentdiag\.usage\.|agentdiag\.cost\.)")
CORRELATION_KEYS = ("gen_ai.conversation.id", "user.id", "gen_ai.tool.call.id", "gen_ai.response.id")
# Raw values the demo and the example make (otel_agentdiag/demo.py, examples/langgraph_react.py): never exported.
RAW = (
    "demo-user@example.com",
    "demo-conversation-",
    "resp_demo_",
    "call_demo_",
    "Plan a day in Lisbon",
    "unknown currency code",
    "thread-42",
    "call_1",
    "What's the weather in Paris?",
    "Sunny, 21 degrees",
)


@dataclass
class Shown:
    """``agentdiag show --format json`` of one trace in the local store."""

    trace_id: str
    spans: list[dict[str, Any]]

    @property
    def tree(self) -> dict[str, tuple[str | None, str]]:
        return {span["span_id"]: (span["parent_span_id"], span["name"]) for span in self.spans}

    def tokens_and_cost(self) -> dict[str, dict[str, Any]]:
        return {
            span["span_id"]: {k: v for k, v in span["attributes"].items() if TOKEN_OR_COST.match(k)}
            for span in self.spans
        }


def show(store: Path, trace_id: str) -> Shown:
    from otel_agentdiag.cli import cli

    result = CliRunner().invoke(cli, ["show", trace_id, "--store", str(store), "--format", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["trace_id"] == trace_id
    return Shown(trace_id=trace_id, spans=document["spans"])


def assert_same_as_show(spans: list[BackendSpan] | list[Any], shown: Shown, service: str, api: str) -> None:
    """The back end's spans against the local store's: tree, names, tokens and cost; our digests; nothing removed."""
    from otel_agentdiag.redaction.hashing import key_id_for

    assert {span.trace_id for span in spans} == {shown.trace_id}, api
    tree = {span.span_id: (span.parent_span_id, span.name) for span in spans}
    assert tree == shown.tree, f"{api}: the tree or the names differ from agentdiag show"
    expected = shown.tokens_and_cost()
    assert any(expected.values()), "the run has token counts"
    digest = re.compile(rf"hmac-sha256:{key_id_for(OTLP_KEY)}:[0-9a-f]{{64}}")
    for span in spans:
        attributes = dict(span.attributes)
        got = {k: v for k, v in attributes.items() if TOKEN_OR_COST.match(k)}
        assert got == pytest.approx(expected[span.span_id]), f"{api}: {span.name}: tokens or cost differ"
        assert span.resource.get("service.name") == service
        for key in CORRELATION_KEYS:
            if key in attributes:
                assert digest.fullmatch(str(attributes[key])), f"{api}: {span.name}: {key} is not our OTLP digest"
        for surface in (attributes, span.resource):
            for count in ("redaction.redacted.count", "redaction.masked.count"):
                assert count not in surface, f"{api}: {span.name}: the Collector changed our span ({count})"


def assert_no_raw(body: str) -> None:
    for raw in RAW:
        assert raw not in body, f"{raw!r} reached the back end"


def check_everywhere(jaeger: Jaeger, tempo_sink: OTLPGrpcSink, shown: Shown, service: str) -> None:
    count = len(shown.spans)
    for api in ("v3", "v1"):
        body, spans = read_trace(jaeger, shown.trace_id, count, api)
        assert_same_as_show(spans, shown, service, api)
        assert_no_raw(body)
    tempo = tempo_sink.wait_for_trace(shown.trace_id, count, timeout=60)
    assert len(tempo) == count, f"the Tempo stand-in got {len(tempo)} of {count} spans"
    assert_same_as_show(tempo, shown, service, "tempo")
    assert_no_raw(repr(tempo))


def test_the_demo_reaches_jaeger_and_tempo_as_agentdiag_shows_it(
    collector: Collector, jaeger: Jaeger, tempo_sink: OTLPGrpcSink, tmp_path: Path, clean_env: None
) -> None:
    import otel_agentdiag as agentdiag
    from otel_agentdiag.demo import run_demo_agent

    store = tmp_path / "traces.db"
    service = "agentdiag-backends-demo"
    with agentdiag.configure(
        service_name=service,
        store=store,
        otlp_endpoint=collector.otlp_http,
        hash_key=SDK_KEY,
        otlp_hash_key=OTLP_KEY,
        set_global=False,
        prices=DEMO_PRICES,  # the demo model's invented price, as `agentdiag demo` uses
    ) as diag:
        result = run_demo_agent()
        assert diag.force_flush(), "the OTLP export to the Collector did not finish"
        totals = diag.stats()["destinations"]
    shown = show(store, result.trace_id)
    assert len(shown.spans) == 12
    assert any(TOKEN_OR_COST.match(k) and "cost" in k for s in shown.spans for k in s["attributes"]), "priced"
    (otlp,) = [name for name in totals if name != "local"]
    assert totals[otlp]["pipeline"]["totals"]["accepted"] == 12
    check_everywhere(jaeger, tempo_sink, shown, service)


def test_the_langgraph_example_reaches_jaeger_and_tempo_as_agentdiag_shows_it(
    collector: Collector, jaeger: Jaeger, tempo_sink: OTLPGrpcSink, tmp_path: Path
) -> None:
    pytest.importorskip("langgraph", reason="the LangGraph example needs the langchain extra")
    store = tmp_path / "traces.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTDIAG_"))}
    env.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.otlp_http,
            "AGENTDIAG_HASH_KEY": SDK_KEY.decode(),
            "AGENTDIAG_OTLP_HASH_KEY": OTLP_KEY.decode(),
        }
    )
    completed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langgraph_react.py"), "--store", str(store), "--stream"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    from otel_agentdiag.storage import SpanStore

    with SpanStore(store, create=False) as reader:
        (summary,) = reader.list_traces()
    shown = show(store, summary.trace_id)
    assert [s["name"] for s in shown.spans if s["parent_span_id"] is None] == ["invoke_agent weather_agent"]
    check_everywhere(jaeger, tempo_sink, shown, "langgraph-react")
