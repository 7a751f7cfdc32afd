"""The metrics path of docker/ and the Grafana dashboard: every query of the dashboard names only series and labels
the SDK's GenAI metrics become in Prometheus, and the provisioning, compose and Collector files are wired together.

The Prometheus names are derived here, once, from the ``sc.GEN_AI_CLIENT_*`` constants and the rule of the
Collector's ``prometheus`` exporter (``translation_strategy: UnderscoreEscapingWithSuffixes``, see
:func:`prometheus_series`). Queries are parsed with ``promql-parser`` (the Rust PromQL parser's Python binding),
after Grafana's variables are replaced by values of the same kind. No container runs here:
tests/e2e/test_docker_backends.py sends metrics through the real stack where Docker exists.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from otel_agentdiag import semconv as sc

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "collector-config"
DASHBOARD = CONFIG / "grafana" / "dashboards" / "agentdiag-agents.json"
PROVIDERS = CONFIG / "grafana" / "provisioning" / "dashboards" / "dashboards.yaml"
DATASOURCES = CONFIG / "grafana" / "provisioning" / "datasources" / "datasources.yaml"
PROMETHEUS = CONFIG / "prometheus.yaml"
OTELCOL = CONFIG / "otelcol.yaml"
COMPOSE = ROOT / "docker" / "docker-compose.yml"

DASHBOARD_UID = "agentdiag-agents"
DASHBOARD_TITLE = "Agents (otel-agentdiag)"

# The metrics the SDK records (all histograms) and their units: docs/dashboard.md, issue 25.
METRIC_UNITS = {
    sc.GEN_AI_CLIENT_TOKEN_USAGE: "{token}",
    sc.GEN_AI_CLIENT_OPERATION_DURATION: "s",
    sc.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK: "s",
    sc.GEN_AI_CLIENT_COST: "{USD}",
}
# Their closed attribute set (gen_ai.token.type only on the token metric).
METRIC_ATTRIBUTES = (
    sc.GEN_AI_OPERATION_NAME,
    sc.GEN_AI_PROVIDER_NAME,
    sc.GEN_AI_REQUEST_MODEL,
    sc.GEN_AI_RESPONSE_MODEL,
    sc.GEN_AI_AGENT_NAME,
    sc.GEN_AI_TOOL_NAME,
    sc.ERROR_TYPE,
    sc.GEN_AI_TOKEN_TYPE,
)
# Labels the translation adds: `job` and `instance` from the resource (service.namespace/service.name and
# service.instance.id), `le` on a histogram's buckets.
TRANSLATION_LABELS = {"job", "instance", "le"}
# The Collector's unit suffixes for the units we use (the full table is in the Collector's Prometheus translator).
UNIT_SUFFIXES = {"s": "seconds"}
GRAFANA_DURATIONS = re.compile(r"\$__(?:rate_interval|interval|range)\b|\$\{__(?:rate_interval|interval|range)\}")
GRAFANA_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")
GRAFANA_BUILTINS = {"__from", "__to", "__rate_interval", "__interval", "__range"}


# --- the translation rule, written once -------------------------------------------------------------------------
def prometheus_series(name: str, unit: str) -> set[str]:
    """The series a histogram ``name`` with ``unit`` becomes (UnderscoreEscapingWithSuffixes): every character
    outside ``[a-zA-Z0-9_:]`` becomes ``_``; a unit in braces is an annotation and adds nothing, another unit adds
    its word (``s`` -> ``_seconds``) unless the name already ends with it; a histogram has three series."""
    base = re.sub(r"[^a-zA-Z0-9_:]", "_", name)
    unit = re.sub(r"\{[^}]*\}", "", unit)
    if unit:
        suffix = UNIT_SUFFIXES[unit]
        if not base.endswith("_" + suffix):
            base = f"{base}_{suffix}"
    return {f"{base}_bucket", f"{base}_sum", f"{base}_count"}


def prometheus_label(key: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


EMITTED_SERIES = set().union(*(prometheus_series(name, unit) for name, unit in METRIC_UNITS.items()))
EMITTED_LABELS = {prometheus_label(key) for key in METRIC_ATTRIBUTES} | TRANSLATION_LABELS


def test_the_rule_gives_the_names_of_the_contract() -> None:
    """The names issue 25's helpers agreed on (shared with the metrics, display and docs)."""
    assert {
        "gen_ai_client_token_usage_bucket",
        "gen_ai_client_token_usage_sum",
        "gen_ai_client_token_usage_count",
        "gen_ai_client_operation_duration_seconds_bucket",
        "gen_ai_client_operation_duration_seconds_sum",
        "gen_ai_client_operation_duration_seconds_count",
        "gen_ai_client_operation_time_to_first_chunk_seconds_bucket",
        "gen_ai_client_operation_time_to_first_chunk_seconds_sum",
        "gen_ai_client_operation_time_to_first_chunk_seconds_count",
        "gen_ai_client_cost_bucket",
        "gen_ai_client_cost_sum",
        "gen_ai_client_cost_count",
    } == EMITTED_SERIES
    assert {
        "gen_ai_operation_name",
        "gen_ai_provider_name",
        "gen_ai_request_model",
        "gen_ai_response_model",
        "gen_ai_agent_name",
        "gen_ai_tool_name",
        "error_type",
        "gen_ai_token_type",
    } == EMITTED_LABELS - TRANSLATION_LABELS


def test_the_names_and_labels_are_what_a_run_really_records(tmp_path: Path) -> None:
    """The loop closed: a run through ``configure(metrics=...)`` (manual wrappers, a streamed-like call with a time
    to first chunk, a failing tool, a priced call) records exactly these metrics, units and attribute keys."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    import otel_agentdiag as agentdiag

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    agentdiag.register_names(tools=["lookup"])
    with agentdiag.configure(store=tmp_path / "t.db", set_global=False, meter_provider=provider) as diag:
        with agentdiag.agent_run("dash-agent"), agentdiag.iteration(0):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.span.set_attribute(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, 0.05)
                call.record_response(response_model="gpt-4o-mini", input_tokens=10, output_tokens=5)
            with pytest.raises(KeyError), agentdiag.tool_call("lookup"):
                raise KeyError("x")
        assert diag.force_flush()
    data = reader.get_metrics_data()
    units: dict[str, str] = {}
    keys: set[str] = set()
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                units[metric.name] = metric.unit or ""
                for point in metric.data.data_points:
                    keys.update(point.attributes or {})
    provider.shutdown()
    assert units == METRIC_UNITS
    assert keys == set(METRIC_ATTRIBUTES)  # the run above gives every key of the closed set a value


# --- reading the dashboard --------------------------------------------------------------------------------------
def load_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    data = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = load_yaml(COMPOSE)
    assert isinstance(data, dict)
    return data


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row holds its panels


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield panel["title"], target


def as_promql(expression: str) -> str:
    """Grafana's text as PromQL: its interval variables become a duration, the others (used inside label
    matchers) a regular expression."""
    expression = GRAFANA_DURATIONS.sub("5m", expression)
    return GRAFANA_VARIABLE.sub(".*", expression)


def selectors_and_labels(expression: str) -> tuple[set[str], set[str], set[str]]:
    """The metric names, the labels of matchers, and the labels of by/without/on/ignoring clauses."""
    names: set[str] = set()
    matched: set[str] = set()
    grouped: set[str] = set()

    def visit(node: Any) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"{expression}: a selector without a metric name"
            names.add(node.name)
            matched.update(m.name for m in node.matchers.matchers if m.name != "__name__")
        elif isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            grouped.update(node.modifier.labels)
        elif isinstance(node, promql_parser.BinaryExpr) and node.modifier is not None:
            matching = node.modifier.matching
            if matching is not None:
                grouped.update(matching.labels)
        return True

    promql_parser.walk(promql_parser.parse(as_promql(expression)), visit)
    return names, matched, grouped


def referenced_variables(text: str) -> set[str]:
    return {a or b for a, b in GRAFANA_VARIABLE.findall(text)} - GRAFANA_BUILTINS


# --- the dashboard ---------------------------------------------------------------------------------------------
def test_the_dashboard_is_versioned_and_identified(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == DASHBOARD_UID
    assert dashboard["title"] == DASHBOARD_TITLE
    assert isinstance(dashboard["version"], int) and dashboard["version"] >= 1
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 39
    assert dashboard["editable"] is False, "the file in the repository is the dashboard"
    ids = [panel["id"] for panel in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    assert "id" not in dashboard, "a provisioned dashboard has no database id"


def test_every_query_parses_and_names_only_emitted_series_and_labels(dashboard: dict[str, Any]) -> None:
    seen: set[str] = set()
    count = 0
    for title, target in queries(dashboard):
        names, matched, grouped = selectors_and_labels(target["expr"])
        assert names <= EMITTED_SERIES, f"{title}: {sorted(names - EMITTED_SERIES)} are not series we emit"
        assert matched <= EMITTED_LABELS, f"{title}: matchers on {sorted(matched - EMITTED_LABELS)}"
        assert grouped <= EMITTED_LABELS, f"{title}: grouping by {sorted(grouped - EMITTED_LABELS)}"
        legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
        assert legend <= grouped, f"{title}: the legend names {sorted(legend - grouped)}, which the query drops"
        seen |= names
        count += 1
    assert count >= 12
    families = {re.sub(r"_(bucket|sum|count)$", "", name) for name in seen}
    assert len(families) == len(METRIC_UNITS), f"every metric is on the dashboard, saw {sorted(families)}"


def test_every_variable_is_defined_and_queries_emitted_labels(dashboard: dict[str, Any]) -> None:
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert {"job", "agent", "model", "provider"} <= set(variables)
    used: set[str] = set()
    for _, target in queries(dashboard):
        used |= referenced_variables(target["expr"])
    for panel in panels(dashboard):
        for link in panel.get("links", []):
            used |= referenced_variables(link["url"])
    assert used <= set(variables), f"undefined variables: {sorted(used - set(variables))}"
    assert set(variables) <= used, f"variables no query uses: {sorted(set(variables) - used)}"
    for name, variable in variables.items():
        assert variable["datasource"]["uid"] == "prometheus"
        call = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["query"]["query"])
        assert call, f"{name}: expected label_values(<selector>, <label>)"
        selector, label = call.groups()
        names, matched, _ = selectors_and_labels(selector)
        assert names <= EMITTED_SERIES and matched <= EMITTED_LABELS and label in EMITTED_LABELS, name
        # "All" must also match series without the label (a tool call has no model): `.*` does, `$__all` not.
        assert variable["includeAll"] and variable["allValue"] == ".*", name


def test_the_panels_the_issue_asks_for(dashboard: dict[str, Any]) -> None:
    text = "\n".join(target["expr"] for _, target in queries(dashboard))
    assert 'gen_ai_operation_name="invoke_agent"' in text, "runs: the count of invoke_agent durations"
    assert 'error_type!=""' in text, "errors: operations with error.type set"
    assert 'gen_ai_operation_name="execute_tool"' in text, "tool calls and tool errors"
    assert "histogram_quantile(0.95, sum by (le, gen_ai_operation_name)" in text, "latency per operation"
    assert re.search(r"histogram_quantile\(0\.5, .*gen_ai_client_operation_time_to_first_chunk_seconds_bucket", text)
    assert "by (gen_ai_agent_name, gen_ai_request_model, gen_ai_token_type)" in text, "tokens per agent/model/type"
    assert "by (gen_ai_agent_name, gen_ai_request_model) (increase(gen_ai_client_cost_sum" in text, "cost"
    for title, target in queries(dashboard):
        if "histogram_quantile" in target["expr"]:
            assert target.get("exemplar") is True, f"{title}: exemplars link a percentile to its traces"


def test_every_panel_reads_the_provisioned_prometheus(dashboard: dict[str, Any]) -> None:
    sources = {source["uid"]: source for source in load_yaml(DATASOURCES)["datasources"]}
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] in sources, panel["title"]
        assert sources[panel["datasource"]["uid"]]["type"] == panel["datasource"]["type"] == "prometheus"
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]


def test_links_to_tempo_open_explore_on_the_tempo_data_source(dashboard: dict[str, Any]) -> None:
    links = [link for panel in panels(dashboard) for link in panel.get("links", [])] + dashboard["links"]
    assert len(links) >= 2
    for link in links:
        url = urllib.parse.urlsplit(link["url"])
        assert url.path == "/explore" and not url.netloc, "a link inside this Grafana"
        panes_text = urllib.parse.parse_qs(url.query)["panes"][0]
        panes = json.loads(GRAFANA_VARIABLE.sub("x", panes_text))
        for pane in panes.values():
            assert pane["datasource"] == "tempo"
            for query in pane["queries"]:
                assert query["datasource"] == {"type": "tempo", "uid": "tempo"}


# --- provisioning -----------------------------------------------------------------------------------------------
def host_path(compose: dict[str, Any], service: str, container_path: str) -> Path:
    """The file or folder of the repository that compose mounts at ``container_path`` in ``service``."""
    for volume in compose["services"][service].get("volumes", []):
        source, _, rest = volume.partition(":")
        target = rest.split(":", 1)[0]
        if source.startswith(".") and (container_path == target or container_path.startswith(target + "/")):
            return (COMPOSE.parent / source / container_path[len(target) :].lstrip("/")).resolve()
    raise AssertionError(f"{service} mounts nothing at {container_path}")


def test_the_provider_loads_the_dashboard_folder_compose_mounts(compose: dict[str, Any]) -> None:
    (provider,) = load_yaml(PROVIDERS)["providers"]
    assert provider["type"] == "file" and provider["allowUiUpdates"] is False and provider["disableDeletion"] is True
    folder = host_path(compose, "grafana", provider["options"]["path"])
    assert folder == DASHBOARD.parent.resolve()
    uids = [json.loads(path.read_text(encoding="utf-8"))["uid"] for path in sorted(folder.glob("*.json"))]
    assert DASHBOARD_UID in uids and len(uids) == len(set(uids))
    assert host_path(compose, "grafana", "/etc/grafana/provisioning/dashboards") == PROVIDERS.parent.resolve()
    assert host_path(compose, "grafana", "/etc/grafana/provisioning/datasources") == DATASOURCES.parent.resolve()


def test_every_file_compose_mounts_exists(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (COMPOSE.parent / source).exists(), f"{name} mounts {source}, which does not exist"


def test_the_prometheus_data_source_links_exemplars_to_tempo(compose: dict[str, Any]) -> None:
    sources = {source["uid"]: source for source in load_yaml(DATASOURCES)["datasources"]}
    prometheus = sources["prometheus"]
    assert (prometheus["type"], prometheus["url"], prometheus["editable"]) == (
        "prometheus",
        "http://prometheus:9090",
        False,
    )
    assert "prometheus" in compose["services"]
    (destination,) = prometheus["jsonData"]["exemplarTraceIdDestinations"]
    # The Collector's prometheus exporter names the exemplar's trace id label `trace_id`.
    assert destination == {"name": "trace_id", "datasourceUid": "tempo"}
    assert sources["tempo"]["type"] == "tempo"


# --- Prometheus and the Collector ------------------------------------------------------------------------------
def test_prometheus_is_pinned_local_and_keeps_exemplars(compose: dict[str, Any]) -> None:
    service = compose["services"]["prometheus"]
    assert re.fullmatch(r"prom/prometheus:v3\.\d+\.\d+", service["image"])
    assert service["ports"] and all(port.startswith("127.0.0.1:") for port in service["ports"])
    assert "--enable-feature=exemplar-storage" in service["command"]
    # Without it, increase() misses the first run of every new process (its series starts at 1, not 0).
    assert "--enable-feature=created-timestamp-zero-ingestion" in service["command"]
    config = next(arg.split("=", 1)[1] for arg in service["command"] if arg.startswith("--config.file="))
    assert host_path(compose, "prometheus", config) == PROMETHEUS.resolve()
    assert compose["services"]["grafana"]["depends_on"]["prometheus"]["condition"] == "service_healthy"


def test_prometheus_scrapes_the_collectors_exporter(compose: dict[str, Any]) -> None:
    otelcol = load_yaml(OTELCOL)
    exporter_port = otelcol["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1]
    (job,) = load_yaml(PROMETHEUS)["scrape_configs"]
    ((target,),) = [group["targets"] for group in job["static_configs"]]
    host, port = target.split(":")
    assert host in compose["services"] and host == "collector" and port == exporter_port
    assert job["honor_labels"] is True, "`job` is the service's name, as the Collector set it"
    # Protobuf carries exemplars and start times (tests/backends/test_backends_metrics.py runs it for real).
    assert job["scrape_protocols"][:2] == ["PrometheusProto", "OpenMetricsText1.0.0"]
    assert exporter_port in compose["services"]["collector"]["expose"]


def test_the_collectors_metrics_pipeline(compose: dict[str, Any]) -> None:
    otelcol = load_yaml(OTELCOL)
    metrics = otelcol["service"]["pipelines"]["metrics"]
    assert metrics == {
        "receivers": ["otlp"],
        "processors": ["memory_limiter", "transform/metrics", "batch"],
        "exporters": ["prometheus"],
    }
    exporter = otelcol["exporters"]["prometheus"]
    assert exporter["enable_open_metrics"] is True
    assert exporter["translation_strategy"] == "UnderscoreEscapingWithSuffixes", "the rule prometheus_series states"
    assert "redaction" not in metrics["processors"], "the span policy would remove gen_ai.token.type"


def test_the_collector_keeps_exactly_the_metric_attributes() -> None:
    statements = [s for group in load_yaml(OTELCOL)["processors"]["transform/metrics"]["metric_statements"]
                  for s in group["statements"]]  # fmt: skip
    kept: dict[str, list[str]] = {}
    for statement in statements:
        call = re.fullmatch(r"keep_keys\((\w+)\.attributes, (\[.*\])\)", statement)
        assert call, statement
        kept[call.group(1)] = json.loads(call.group(2))
    assert set(kept["datapoint"]) == set(METRIC_ATTRIBUTES)
    assert {"service.name", "service.namespace", "service.instance.id"} <= set(kept["resource"])
