"""``configure(metrics=True)`` → the real Collector (``transform/metrics`` → ``prometheus`` exporter) → the real
Prometheus scraping it with ``collector-config/prometheus.yaml``; every PromQL query of the versioned Grafana
dashboard (``collector-config/grafana/dashboards/agentdiag-agents.json``) asked of Prometheus' HTTP API returns a
series for the run.

Grafana itself is AGPL and is not run: its template variables are filled in as a user choosing this run's
services would (``$job``) and "All" (``.*``) for the rest, ``$__range`` and ``$__rate_interval`` as ten minutes.
The runs: the demo agent in this process (tokens, cost, a failed tool call, agent runs) and the LangGraph example
streaming in its own process (``AGENTDIAG_METRICS=true``: the time to first chunk).
"""

from __future__ import annotations

import importlib.resources
import json
import math
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from backend_processes import COLLECTOR_CONFIG, ROOT, Collector, Prometheus, poll

pytestmark = pytest.mark.backends

DEMO_PRICES = Path(str(importlib.resources.files("otel_agentdiag.cost") / "demo_prices.toml"))

DASHBOARD = COLLECTOR_CONFIG / "grafana" / "dashboards" / "agentdiag-agents.json"
DEMO_SERVICE = "agentdiag-backends-metrics"
STREAM_SERVICE = "langgraph-react"  # the example names its service itself
JOBS = f"{DEMO_SERVICE}|{STREAM_SERVICE}"
WINDOW = "10m"


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel, variables filled in for this run."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    found = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            found.append((panel["title"], fill(target["expr"])))
    return found


def fill(expr: str) -> str:
    expr = expr.replace("$__rate_interval", WINDOW).replace("$__range", WINDOW)
    expr = expr.replace('job=~"$job"', f'job=~"{JOBS}"')
    return re.sub(r"\$\w+", ".*", expr)


@pytest.fixture(scope="module")
def runs(collector: Collector, prometheus: Prometheus, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo (in process) and the streaming LangGraph example (its own process), metrics on, to the Collector;
    the demo's trace id."""
    import otel_agentdiag as agentdiag
    from otel_agentdiag.demo import run_demo_agent

    pytest.importorskip("langgraph", reason="the LangGraph example (time to first chunk) needs the langchain extra")
    folder = tmp_path_factory.mktemp("metrics-runs")
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith(("OTEL_", "AGENTDIAG_")):
                patch.delenv(name)
        diag = agentdiag.configure(
            service_name=DEMO_SERVICE,
            store=folder / "demo.db",
            otlp_endpoint=collector.otlp_http,
            metrics=True,
            hash_key=secrets.token_hex(32).encode(),
            set_global=False,
            prices=DEMO_PRICES,  # the demo model's invented price, as `agentdiag demo` uses
        )
        try:
            result = run_demo_agent()
            assert result.tool_errors == 1
        finally:
            diag.shutdown()  # exports the metrics once more at the end
        assert diag.stats()["metrics"]["failed"] == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTDIAG_"))}
    env.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.otlp_http,
            "AGENTDIAG_METRICS": "true",
            "AGENTDIAG_HASH_KEY": secrets.token_hex(32),
        }
    )
    script = ROOT / "examples" / "langgraph_react.py"
    completed = subprocess.run(
        [sys.executable, str(script), "--store", str(folder / "stream.db"), "--stream"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return result.trace_id


def _positive(series: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(s["value"][1])) and float(s["value"][1]) > 0 for s in series)


def test_the_dashboard_has_queries() -> None:
    assert len(dashboard_queries()) >= 12


@pytest.mark.parametrize("title,query", dashboard_queries(), ids=lambda value: str(value)[:60])
def test_every_dashboard_query_returns_a_series_for_the_run(
    runs: str, prometheus: Prometheus, title: str, query: str
) -> None:
    series = poll(f"{title}: {query}", lambda: found if _positive(found := prometheus.query(query)) else None, 90)
    for one in series:
        job = one["metric"].get("job")
        assert job is None or re.fullmatch(JOBS, job), one["metric"]


def test_the_template_variables_find_the_run(runs: str, prometheus: Prometheus) -> None:
    """Each dashboard variable's ``label_values(selector, label)`` finds the label on this run's series."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for variable in dashboard["templating"]["list"]:
        match = re.fullmatch(r"label_values\((.+), *(\w+)\)", variable["definition"])
        assert match, variable["definition"]
        selector, label = fill(match.group(1)), match.group(2)
        if selector == match.group(1):  # no $job in it: restrict to this run
            selector = f'{selector}{{job=~"{JOBS}"}}'
        values = poll(
            f"label {label} on {selector}",
            lambda s=selector, name=label: {x["metric"][name] for x in prometheus.query(s) if name in x["metric"]},
            90,
        )
        assert values, variable["name"]


def test_only_the_closed_attribute_set_reaches_prometheus(runs: str, prometheus: Prometheus) -> None:
    allowed = {
        "__name__",
        "job",
        "instance",
        "le",
        "gen_ai_operation_name",
        "gen_ai_provider_name",
        "gen_ai_request_model",
        "gen_ai_response_model",
        "gen_ai_agent_name",
        "gen_ai_tool_name",
        "error_type",
        "gen_ai_token_type",
        "otel_scope_name",
        "otel_scope_version",
        "otel_scope_schema_url",
    }
    series = prometheus.query(f'{{job=~"{JOBS}"}}')
    assert series
    extra = {label for one in series for label in one["metric"]} - allowed
    assert not {label for label in extra if not label.startswith("otel_scope_")}, sorted(extra)


def test_prometheus_keeps_the_runs_trace_ids_as_exemplars(runs: str, prometheus: Prometheus) -> None:
    """The trace links of the dashboard's panels: exemplars carrying the demo run's trace id."""
    import time
    from urllib.parse import urlencode

    from backend_processes import http_get

    def trace_ids() -> set[str]:
        now = time.time()
        query = urlencode(
            {"query": f'gen_ai_client_token_usage_bucket{{job=~"{JOBS}"}}', "start": now - 600, "end": now + 60}
        )
        status, body = http_get(f"{prometheus.api}/api/v1/query_exemplars?{query}")
        assert status == 200, body
        found = json.loads(body)["data"]
        ids = {e["labels"].get("trace_id") for series in found for e in series["exemplars"]}
        return ids if runs in ids else set()

    poll("an exemplar with the demo's trace id", trace_ids, 90)
