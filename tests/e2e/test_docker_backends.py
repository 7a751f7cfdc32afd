"""End to end with the real back ends, in containers: the demo agent → the OpenTelemetry Collector (with
``collector-config/otelcol.yaml`` and its generated ``redaction`` processor) → Jaeger v2 and Grafana Tempo.

The trace is read back from Jaeger's ``/api/v3/traces/{id}`` and Tempo's ``/api/traces/{id}`` and checked
against the local store of the same run: every span arrived, with its parent, its GenAI attributes, correlation
ids that are still the SDK's ``hmac-sha256:<key id>:<hex>`` digests (the Collector neither removed, masked nor
re-hashed anything of ours), and none of the demo's raw ids or content.

The metrics path too: GenAI histograms sent over OTLP to the Collector are scraped by Prometheus under the names
the dashboard queries (with a trace id as exemplar), and Grafana serves the provisioned dashboard and reaches
Prometheus through its data source.

The images are the ones ``docker/docker-compose.yml`` pins. Every test here is marked ``docker`` (run only these
with ``pytest -m docker``) and skips, with the reason, where no Docker engine answers.
"""

from __future__ import annotations

import base64
import binascii
import gc
import json
import os
import re
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OTELCOL_CONFIG = ROOT / "collector-config" / "otelcol.yaml"
TEMPO_CONFIG = ROOT / "collector-config" / "tempo.yaml"
PROMETHEUS_CONFIG = ROOT / "collector-config" / "prometheus.yaml"
GRAFANA = ROOT / "collector-config" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "agentdiag-agents.json"
COMPOSE = ROOT / "docker" / "docker-compose.yml"

SKIP_REASON = (
    "no Docker engine answers (docker.from_env().ping() failed): "
    "these tests need Jaeger, Tempo and the Collector in containers"
)


def _docker_answers() -> bool:
    """Whether a Docker engine answers a ping. Any failure (no socket, no permission, no package) means no."""
    try:
        import docker
    except ImportError:
        return False
    with warnings.catch_warnings():
        # docker-py leaves the socket of a failed version probe to the garbage collector.
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            client = docker.from_env(timeout=10)
            try:
                return bool(client.ping())
            finally:
                client.close()
        except docker.errors.DockerException:
            return False
        except Exception:  # noqa: BLE001 - whatever stops the ping, there is no engine to run containers on
            return False
        finally:
            gc.collect()


pytestmark = [pytest.mark.docker, pytest.mark.skipif(not _docker_answers(), reason=SKIP_REASON)]

SERVICE = "agentdiag-demo"
STARTUP_S = 240  # per container, image pull excluded (start() pulls first)
POLL_S = 90.0
SDK_KEY = b"293dfe7aea075a5640cdd3f24f483954dd3448fbbe02c79264865ab0a014ca2d"
OTLP_KEY = b"2d45f769cb3f44183296b4b2f213a17bb228e87a5b94cbb2c99731e70cfe7b0e"
CORRELATION_KEYS = ("gen_ai.conversation.id", "user.id", "gen_ai.tool.call.id", "gen_ai.response.id")
# What the demo puts in raw (see otel_agentdiag/demo.py): ids, the prompt, tool arguments, the tool error's
# message and the answer. None contains a character of standard base64, so none can turn up inside an id.
RAW = (
    "demo-user@example.com",
    "demo-conversation-",
    "resp_demo_",
    "call_demo_",
    "Plan a day in Lisbon",
    "unknown currency code",
    "'EURO'",
    "budget is",
)


def compose_services() -> dict[str, Any]:
    services = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    assert isinstance(services, dict)
    return services


def compose_images() -> dict[str, str]:
    services = compose_services()
    return {name: services[name]["image"] for name in ("collector", "jaeger", "tempo", "prometheus", "grafana")}


# --- reading OTLP JSON back -------------------------------------------------------------------------------------
@dataclass
class BackendSpan:
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def hex_id(value: str) -> str:
    """Jaeger writes ids in hex (OTLP JSON); Tempo writes them in base64 (protobuf JSON)."""
    if not value:
        return ""
    if re.fullmatch(r"[0-9a-fA-F]{16}|[0-9a-fA-F]{32}", value):
        return value.lower()
    try:
        return base64.b64decode(value, validate=True).hex()
    except (binascii.Error, ValueError):
        return value


def any_value(value: dict[str, Any]) -> Any:
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return tuple(any_value(item) for item in value["arrayValue"].get("values", []))
    return None


def attributes(items: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {item["key"]: any_value(item.get("value", {})) for item in items or []}


def documents(body: str) -> list[dict[str, Any]]:
    """One JSON document, or several on separate lines (a streamed response)."""
    try:
        return [json.loads(body)]
    except json.JSONDecodeError:
        return [json.loads(line) for line in body.splitlines() if line.strip()]


def otlp_spans(body: str) -> list[BackendSpan]:
    spans: list[BackendSpan] = []
    for document in documents(body):
        data = document.get("result", document)  # Jaeger api_v3 wraps the trace in "result"
        data = data.get("trace", data)
        for resource_spans in data.get("resourceSpans") or data.get("batches") or []:
            resource = attributes(resource_spans.get("resource", {}).get("attributes"))
            scopes = resource_spans.get("scopeSpans") or resource_spans.get("instrumentationLibrarySpans") or []
            for scope in scopes:
                for span in scope.get("spans", []):
                    spans.append(
                        BackendSpan(
                            trace_id=hex_id(span["traceId"]),
                            span_id=hex_id(span["spanId"]),
                            parent_span_id=hex_id(span.get("parentSpanId", "")) or None,
                            name=span["name"],
                            attributes=attributes(span.get("attributes")),
                            resource=resource,
                            events=[(e["name"], attributes(e.get("attributes"))) for e in span.get("events", [])],
                        )
                    )
    return spans


def poll_trace(url: str, expected: int) -> tuple[str, list[BackendSpan]]:
    """GET ``url`` until the trace has ``expected`` spans, for at most ``POLL_S`` seconds."""
    deadline = time.monotonic() + POLL_S
    last = "no answer yet"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = response.read().decode("utf-8")
            spans = otlp_spans(body)
            if len(spans) >= expected:
                return body, spans
            last = f"{len(spans)} of {expected} spans"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
            exc.close()
        except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
            last = repr(exc)
        if time.monotonic() > deadline:
            pytest.fail(f"{url}: the trace did not arrive within {POLL_S:.0f}s ({last})")
        time.sleep(1.0)


# --- the containers -----------------------------------------------------------------------------------------------
@dataclass
class Backends:
    collector_otlp_http: str
    jaeger_api: str
    tempo_api: str
    prometheus_api: str
    grafana_api: str


def _loopback_only() -> bool:
    """Whether the engine is on this machine and the tests reach containers through the host's ports."""
    from testcontainers.core.utils import inside_container

    host = os.environ.get("DOCKER_HOST", "")
    return (host == "" or host.startswith(("unix://", "npipe://"))) and not inside_container()


def _publish(container: Any, *ports: int) -> Any:
    """Publish ``ports`` on the host's loopback only where that is enough to reach them (a local engine)."""
    loopback = _loopback_only()
    for port in ports:
        if loopback:
            container.ports[f"{port}/tcp"] = ("127.0.0.1", None)  # docker-py: (host ip, any free port)
        else:
            container.with_exposed_ports(port)
    return container


def _url(container: Any, port: int) -> str:
    return f"http://{container.get_container_host_ip()}:{container.get_exposed_port(port)}"


@pytest.fixture(scope="module")
def backends() -> Iterator[Backends]:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network
    from testcontainers.core.wait_strategies import HttpWaitStrategy

    from otel_agentdiag.redaction.collector import COLLECTOR_HASH_KEY_ENV

    images = compose_images()
    with Network() as network:
        jaeger = (
            DockerContainer(images["jaeger"])
            .with_network(network)
            .with_network_aliases("jaeger")
            .with_env("JAEGER_LISTEN_HOST", "0.0.0.0")
            .waiting_for(HttpWaitStrategy(16686, "/").with_startup_timeout(STARTUP_S))
        )
        # Root, so Tempo can create /var/tempo in the container (compose chowns a volume with an init container).
        tempo = (
            DockerContainer(images["tempo"], user="0:0")
            .with_network(network)
            .with_network_aliases("tempo")
            .with_copy_into_container(TEMPO_CONFIG, "/etc/tempo.yaml")
            .with_command(["-config.file=/etc/tempo.yaml"])
            .waiting_for(HttpWaitStrategy(3200, "/ready").with_startup_timeout(STARTUP_S))
        )
        collector = (
            DockerContainer(images["collector"])
            .with_network(network)
            .with_network_aliases("collector")  # Prometheus scrapes collector:8889
            .with_copy_into_container(OTELCOL_CONFIG, "/etc/otelcol-contrib/config.yaml")
            .with_command(["--config=/etc/otelcol-contrib/config.yaml"])
            .with_env(COLLECTOR_HASH_KEY_ENV, secrets.token_hex(32))
            .waiting_for(HttpWaitStrategy(13133, "/").with_startup_timeout(STARTUP_S))
        )
        services = compose_services()
        prometheus = (
            DockerContainer(images["prometheus"])
            .with_network(network)
            .with_network_aliases("prometheus")
            .with_copy_into_container(PROMETHEUS_CONFIG, "/etc/prometheus/prometheus.yml")
            .with_command(services["prometheus"]["command"])
            .waiting_for(HttpWaitStrategy(9090, "/-/ready").with_startup_timeout(STARTUP_S))
        )
        grafana = DockerContainer(images["grafana"]).with_network(network)
        for name, value in services["grafana"]["environment"].items():
            grafana = grafana.with_env(name, value)
        # The local-store data source points at no `agentdiag serve` here (its own tests are in tests/serve/).
        grafana = grafana.with_env("AGENTDIAG_SERVE_URL", "http://127.0.0.1:16687").with_env(
            "AGENTDIAG_SERVE_TOKEN", ""
        )
        for source, target in (
            (GRAFANA / "provisioning" / "datasources" / "datasources.yaml", "/etc/grafana/provisioning/datasources/"),
            (GRAFANA / "provisioning" / "dashboards" / "dashboards.yaml", "/etc/grafana/provisioning/dashboards/"),
            (DASHBOARD, "/var/lib/grafana/dashboards/agentdiag/"),
        ):
            grafana = grafana.with_copy_into_container(source, target + source.name)
        grafana = grafana.waiting_for(HttpWaitStrategy(3000, "/api/health").with_startup_timeout(STARTUP_S))
        _publish(jaeger, 16686)
        _publish(tempo, 3200)
        _publish(collector, 4318, 13133)
        _publish(prometheus, 9090)
        _publish(grafana, 3000)
        # The exporters address the back ends by their network aliases (jaeger:4317, tempo:4317): start them first.
        with jaeger, tempo, collector, prometheus, grafana:
            yield Backends(
                collector_otlp_http=_url(collector, 4318),
                jaeger_api=_url(jaeger, 16686),
                tempo_api=_url(tempo, 3200),
                prometheus_api=_url(prometheus, 9090),
                grafana_api=_url(grafana, 3000),
            )


@dataclass
class DemoRun:
    trace_id: str
    tree: dict[str, tuple[str | None, str]]
    """span id → (parent span id, name), from the local store of the same run."""
    key_id: str


@pytest.fixture(scope="module")
def demo_run(backends: Backends, tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    import otel_agentdiag as agentdiag
    from otel_agentdiag.demo import run_demo_agent
    from otel_agentdiag.redaction.hashing import key_id_for
    from otel_agentdiag.storage import SpanStore

    store = tmp_path_factory.mktemp("docker-e2e") / "traces.db"
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith(("OTEL_", "AGENTDIAG_")):
                patch.delenv(name)
        with agentdiag.configure(
            service_name=SERVICE,
            store=store,
            otlp_endpoint=backends.collector_otlp_http,
            hash_key=SDK_KEY,
            otlp_hash_key=OTLP_KEY,
            set_global=False,
        ) as diag:
            result = run_demo_agent()
            assert diag.force_flush(), "the OTLP export to the Collector did not finish"
    with SpanStore(store, create=False) as reader:
        stored = reader.get_trace(result.trace_id)
    assert len(stored) == 12, "the demo makes 12 spans: a run, 4 iterations, 4 model calls, 3 tool calls"
    tree = {span.span_id: (span.parent_span_id, span.name) for span in stored}
    return DemoRun(trace_id=result.trace_id, tree=tree, key_id=key_id_for(OTLP_KEY))


# --- the checks ---------------------------------------------------------------------------------------------------
def assert_redacted_tree(body: str, spans: list[BackendSpan], run: DemoRun) -> None:
    assert {span.trace_id for span in spans} == {run.trace_id}
    tree = {span.span_id: (span.parent_span_id, span.name) for span in spans}
    assert tree == run.tree, "the back end's spans, parents and names differ from the local store's"
    (root,) = [span for span in spans if span.parent_span_id is None]
    assert root.name == "invoke_agent trip-planner"
    assert sorted(span.name for span in spans) == sorted(name for _, name in run.tree.values())

    digest = re.compile(rf"hmac-sha256:{run.key_id}:[0-9a-f]{{64}}")
    seen: set[str] = set()
    for span in spans:
        assert span.resource.get("service.name") == SERVICE
        attrs = span.attributes
        assert attrs.get("gen_ai.operation.name") in {"invoke_agent", "chat", "execute_tool", None}, span.name
        for key in CORRELATION_KEYS:
            if key in attrs:
                assert digest.fullmatch(attrs[key]), f"{span.name}: {key} is not the SDK's digest"
                seen.add(key)
        # The Collector removed and masked nothing of ours (summary: info would count it on the span).
        for surface in (attrs, span.resource):
            assert "redaction.redacted.count" not in surface, f"{span.name}: the Collector removed keys"
            assert "redaction.masked.count" not in surface, f"{span.name}: the Collector masked values"
        if span.name.startswith("chat "):
            assert attrs["gen_ai.request.model"] == "demo-model-1"
            assert attrs["gen_ai.provider.name"] == "demo"
            assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
        if span.name.startswith("execute_tool "):
            assert attrs["gen_ai.tool.name"] in {"get_weather", "convert_currency"}
            for name, event_attributes in span.events:
                assert name == "exception", name
                assert "exception.type" in event_attributes
                assert set(event_attributes) <= {"exception.type", "exception.escaped"}, "no message, no stack"
        if span is root:
            assert attrs["gen_ai.agent.name"] == "trip-planner"
    assert seen == set(CORRELATION_KEYS)
    assert any(span.events for span in spans), "the failed tool call keeps its exception event (type only)"
    for raw in RAW:
        assert raw not in body, f"{raw!r} reached the back end"


def test_jaeger_has_the_redacted_trace(backends: Backends, demo_run: DemoRun) -> None:
    body, spans = poll_trace(f"{backends.jaeger_api}/api/v3/traces/{demo_run.trace_id}", len(demo_run.tree))
    assert_redacted_tree(body, spans, demo_run)


def test_tempo_has_the_redacted_trace(backends: Backends, demo_run: DemoRun) -> None:
    body, spans = poll_trace(f"{backends.tempo_api}/api/traces/{demo_run.trace_id}", len(demo_run.tree))
    assert_redacted_tree(body, spans, demo_run)


def test_jaeger_lists_the_service(backends: Backends, demo_run: DemoRun) -> None:
    poll_trace(f"{backends.jaeger_api}/api/v3/traces/{demo_run.trace_id}", len(demo_run.tree))
    with urllib.request.urlopen(f"{backends.jaeger_api}/api/v3/services", timeout=10) as response:
        services = json.loads(response.read().decode("utf-8"))
    assert SERVICE in services.get("services", [])


# --- the metrics path: Collector -> Prometheus -> Grafana ---------------------------------------------------------
METRICS_SERVICE = "agentdiag-metrics-e2e"
CHAT = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "demo",
    "gen_ai.request.model": "demo-model-1",
    "gen_ai.agent.name": "trip-planner",
}


def send_metrics(collector_otlp_http: str) -> str:
    """Record one model call's GenAI histograms inside a sampled span (so they carry its trace id as exemplar),
    export them once over OTLP/HTTP and return the trace id. Names and units are the SDK's (semconv).

    One export only: a second one (a periodic reader's at shutdown) would repeat the points without exemplars,
    and the Collector's exporter serves the latest point of a series."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    from otel_agentdiag import semconv as sc

    reader = InMemoryMetricReader()
    resource = Resource.create({"service.name": METRICS_SERVICE, "service.instance.id": "e2e-1"})
    meters = MeterProvider(metric_readers=[reader], resource=resource)
    traces = TracerProvider(resource=resource)
    try:
        meter = meters.get_meter("agentdiag-e2e")
        tokens = meter.create_histogram(sc.GEN_AI_CLIENT_TOKEN_USAGE, unit="{token}")
        duration = meter.create_histogram(sc.GEN_AI_CLIENT_OPERATION_DURATION, unit="s")
        cost = meter.create_histogram(sc.GEN_AI_CLIENT_COST, unit="{USD}")
        with traces.get_tracer("agentdiag-e2e").start_as_current_span("chat demo-model-1") as span:
            tokens.record(42, {**CHAT, sc.GEN_AI_TOKEN_TYPE: "input"})
            tokens.record(7, {**CHAT, sc.GEN_AI_TOKEN_TYPE: "output"})
            duration.record(0.25, CHAT)
            # A key outside the closed set, as a foreign sender might add: the Collector drops it.
            cost.record(0.0125, {**CHAT, "user.id": "alice"})
            trace_id = format(span.get_span_context().trace_id, "032x")
        data = reader.get_metrics_data()
        assert data is not None
    finally:
        meters.shutdown()
        traces.shutdown()
    exporter = OTLPMetricExporter(endpoint=f"{collector_otlp_http}/v1/metrics")
    try:
        assert exporter.export(data, timeout_millis=30_000) is MetricExportResult.SUCCESS, "the Collector refused"
    finally:
        exporter.shutdown()
    return trace_id


def prometheus_get(api: str, path: str, **params: str) -> Any:
    with urllib.request.urlopen(f"{api}{path}?{urllib.parse.urlencode(params)}", timeout=10) as response:
        body = json.loads(response.read().decode("utf-8"))
    assert body["status"] == "success", body
    return body["data"]


def poll_prometheus(api: str, query: str, expected: int) -> list[dict[str, Any]]:
    """Query until ``expected`` series answer (Prometheus scrapes the Collector every 10 s)."""
    deadline = time.monotonic() + POLL_S
    last: Any = "no answer yet"
    while True:
        try:
            result = prometheus_get(api, "/api/v1/query", query=query)["result"]
            if len(result) >= expected:
                assert isinstance(result, list)
                return result
            last = result
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = repr(exc)
        if time.monotonic() > deadline:
            pytest.fail(f"{query}: {expected} series did not arrive within {POLL_S:.0f}s (last: {last})")
        time.sleep(1.0)


@pytest.fixture(scope="module")
def metrics_trace_id(backends: Backends) -> str:
    return send_metrics(backends.collector_otlp_http)


def test_prometheus_has_the_metrics_under_the_dashboards_names(backends: Backends, metrics_trace_id: str) -> None:
    job = f'job="{METRICS_SERVICE}"'
    counts = poll_prometheus(backends.prometheus_api, f"gen_ai_client_token_usage_count{{{job}}}", 2)
    by_type = {series["metric"]["gen_ai_token_type"]: series for series in counts}
    assert set(by_type) == {"input", "output"}
    for series in counts:
        labels = series["metric"]
        assert labels["job"] == METRICS_SERVICE and labels["instance"] == "e2e-1"
        assert labels["gen_ai_request_model"] == "demo-model-1" and labels["gen_ai_agent_name"] == "trip-planner"
        assert float(series["value"][1]) == 1.0
    (tokens,) = poll_prometheus(backends.prometheus_api, f"sum(gen_ai_client_token_usage_sum{{{job}}})", 1)
    assert float(tokens["value"][1]) == 49.0
    poll_prometheus(backends.prometheus_api, f"gen_ai_client_operation_duration_seconds_count{{{job}}}", 1)
    (cost,) = poll_prometheus(backends.prometheus_api, f"gen_ai_client_cost_sum{{{job}}}", 1)
    assert "user_id" not in cost["metric"], "the Collector keeps only the metrics' closed attribute set"
    assert float(cost["value"][1]) == pytest.approx(0.0125)


def test_prometheus_keeps_the_trace_id_as_exemplar(backends: Backends, metrics_trace_id: str) -> None:
    query = f'gen_ai_client_token_usage_bucket{{job="{METRICS_SERVICE}"}}'
    poll_prometheus(backends.prometheus_api, query, 1)
    deadline = time.monotonic() + POLL_S
    while True:
        now = time.time()
        found = prometheus_get(
            backends.prometheus_api, "/api/v1/query_exemplars", query=query, start=str(now - 3600), end=str(now + 60)
        )
        trace_ids = {e["labels"].get("trace_id") for series in found for e in series["exemplars"]}
        if metrics_trace_id in trace_ids:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"no exemplar with trace id {metrics_trace_id} (saw {sorted(map(str, trace_ids))})")
        time.sleep(1.0)


def test_the_dashboards_queries_return_data(backends: Backends, metrics_trace_id: str) -> None:
    poll_prometheus(backends.prometheus_api, f'gen_ai_client_cost_count{{job="{METRICS_SERVICE}"}}', 1)
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    answered = 0
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            if "gen_ai_client_token_usage_sum" not in target["expr"] and "gen_ai_client_cost_sum" not in target["expr"]:
                continue
            query = re.sub(r"\$__(rate_interval|range)", "1h", target["expr"])
            query = query.replace('job=~"$job"', f'job=~"{METRICS_SERVICE}"')
            query = re.sub(r"\$\w+", ".*", query)
            poll_prometheus(backends.prometheus_api, query, 1)
            answered += 1
    assert answered >= 4


def test_grafana_serves_the_dashboard_and_reaches_prometheus(backends: Backends) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    with urllib.request.urlopen(f"{backends.grafana_api}/api/dashboards/uid/{dashboard['uid']}", timeout=10) as r:
        served = json.loads(r.read().decode("utf-8"))
    assert served["dashboard"]["title"] == "Agents (otel-agentdiag)"
    assert served["dashboard"]["version"] >= dashboard["version"]
    assert served["meta"]["provisioned"] is True
    # The data source's own health check (it queries Prometheus from inside the network); it needs an admin.
    request = urllib.request.Request(
        f"{backends.grafana_api}/api/datasources/uid/prometheus/health",
        headers={"Authorization": "Basic " + base64.b64encode(b"admin:admin").decode("ascii")},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        health = json.loads(response.read().decode("utf-8"))
    assert health["status"] == "OK", health
