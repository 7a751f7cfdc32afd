"""collector-config/ and docker/: the YAML parses, pipelines are consistent, images are pinned, ports are local,
and the Collector's ``redaction`` block is the strict policy (generated, never hand-edited).

The last tests emulate the redaction processor's rules in Python on a real demo run: what the SDK exports under
the strict policy must pass the Collector unchanged (nothing removed, masked or re-hashed), while foreign raw
values are caught. No Collector runs here; tests/e2e/test_docker_backends.py does that where Docker exists.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource

from otel_agentdiag import semconv as sc
from otel_agentdiag.demo import run_demo_agent
from otel_agentdiag.redaction import collector as c
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.recognizers import RANDOM_TOKEN, is_sensitive, recognise
from otel_agentdiag.redaction.rules import FloatRange, HashedId, PolicyError
from otel_agentdiag.testing import capture_spans

ROOT = Path(__file__).resolve().parents[2]
OTELCOL = ROOT / "collector-config" / "otelcol.yaml"
TEMPO = ROOT / "collector-config" / "tempo.yaml"
DATASOURCES = ROOT / "collector-config" / "grafana" / "provisioning" / "datasources" / "datasources.yaml"
COMPOSE = ROOT / "docker" / "docker-compose.yml"
REGENERATE = (
    "collector-config/otelcol.yaml: the `redaction` processor differs from the strict policy. Run "
    "`agentdiag policy --collector` and paste its output under `processors: redaction:` (do not edit it by hand)."
)
RE2_UNSUPPORTED = ("(?=", "(?!", "(?<", "(?P=", "(?>")
PIPELINE_SECTIONS = {"receivers": "receivers", "processors": "processors", "exporters": "exporters"}
# Component types of otel/opentelemetry-collector-contrib 0.165.0 that the config may use. `otlp` as an exporter
# is the deprecated alias of `otlp_grpc` since v0.144.0 and must not come back.
KNOWN_TYPES = {
    "receivers": {"otlp"},
    "processors": {"memory_limiter", "redaction", "transform", "batch"},
    "exporters": {"otlp_grpc", "debug", "prometheus"},
    "extensions": {"health_check"},
}
VERSION_TAG = re.compile(r"^v?\d+(\.\d+){1,3}$")
HEX = re.compile(r"[0-9a-f]+")


def load(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope="module")
def otelcol() -> dict[str, Any]:
    return load(OTELCOL)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load(COMPOSE)


@pytest.fixture(scope="module")
def redaction(otelcol: dict[str, Any]) -> dict[str, Any]:
    block = otelcol["processors"]["redaction"]
    assert isinstance(block, dict)
    return block


# --- every YAML file --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [OTELCOL, TEMPO, DATASOURCES, COMPOSE], ids=lambda path: path.name)
def test_yaml_parses_to_a_mapping(path: Path) -> None:
    assert isinstance(load(path), dict), f"{path} is not a YAML mapping"


# --- the Collector pipeline -------------------------------------------------------------------------------
def test_every_pipeline_component_is_defined_and_every_defined_component_is_used(otelcol: dict[str, Any]) -> None:
    service = otelcol["service"]
    pipelines = service["pipelines"]
    assert set(pipelines) == {"traces", "metrics"}, "the metrics pipeline: tests/collector/test_dashboard.py"
    used: dict[str, set[str]] = {section: set() for section in PIPELINE_SECTIONS}
    for name, pipeline in pipelines.items():
        assert pipeline.get("receivers") and pipeline.get("exporters"), f"pipeline {name} needs receivers and exporters"
        for key, section in PIPELINE_SECTIONS.items():
            for component in pipeline.get(key, []):
                assert component in (otelcol.get(section) or {}), f"{name}: {component!r} is not under {section}:"
                used[section].add(component)
    for section, names in used.items():
        unused = set(otelcol.get(section) or {}) - names
        assert not unused, f"{section} defined but in no pipeline: {sorted(unused)}"
    extensions = set(otelcol.get("extensions") or {})
    assert set(service.get("extensions", [])) == extensions, "every extension is defined once and enabled"


def test_component_types_exist_in_the_pinned_release(otelcol: dict[str, Any]) -> None:
    for section, known in KNOWN_TYPES.items():
        for component in otelcol.get(section) or {}:
            kind = component.split("/", 1)[0]
            assert kind in known, f"{section}: {component!r} is not a {c.COLLECTOR_CONTRIB_VERSION} component we expect"


def test_pipeline_order_and_destinations(otelcol: dict[str, Any]) -> None:
    traces = otelcol["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"]
    assert traces["processors"] == ["memory_limiter", "redaction", "batch"], "memory_limiter first, batch last"
    assert traces["exporters"] == ["otlp_grpc/jaeger", "otlp_grpc/tempo", "debug"]
    protocols = otelcol["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318"
    for backend in ("jaeger", "tempo"):
        exporter = otelcol["exporters"][f"otlp_grpc/{backend}"]
        assert exporter["endpoint"] == f"{backend}:4317"
        assert exporter["tls"] == {"insecure": True}
    assert otelcol["exporters"]["debug"] == {"verbosity": "basic"}, "detailed would print attribute values"
    assert otelcol["extensions"]["health_check"]["endpoint"] == "0.0.0.0:13133"
    limiter = otelcol["processors"]["memory_limiter"]
    assert limiter["check_interval"] and 0 < limiter["spike_limit_percentage"] < limiter["limit_percentage"] <= 100


# --- the redaction block is the strict policy --------------------------------------------------------------
def test_redaction_block_is_generated_from_the_strict_policy(redaction: dict[str, Any]) -> None:
    assert redaction == c.collector_redaction_config(STRICT), REGENERATE


def test_redaction_block_is_fail_closed_and_keyed(redaction: dict[str, Any]) -> None:
    assert redaction["allow_all_keys"] is False
    assert redaction["hash_function"] == "hmac-sha256"
    assert redaction["hmac_key"] == "${env:" + c.COLLECTOR_HASH_KEY_ENV + "}"
    assert redaction["summary"] == "info"
    assert redaction["allowed_values"] == [r"^hmac-sha256:[0-9a-f]{8}:[0-9a-f]{64}$"]


def test_generated_config_is_deterministic_and_sorted() -> None:
    first, second = c.collector_redaction_config(), c.collector_redaction_config(STRICT)
    assert first == second
    assert list(first) == sorted(first)
    for value in first.values():
        if isinstance(value, list):
            assert value == sorted(value) and len(value) == len(set(value))


@pytest.mark.parametrize("policy", [STRICT, LOCAL], ids=["strict", "local"])
def test_every_blocked_value_compiles_and_is_re2_syntax(policy: Policy) -> None:
    config = c.collector_redaction_config(policy)
    expressions = config["blocked_values"] + config["blocked_key_patterns"] + config["allowed_values"]
    for expression in expressions:
        re.compile(expression)
        for construct in RE2_UNSUPPORTED:
            assert construct not in expression, f"{expression!r} uses {construct!r}, which RE2 does not have"
        assert not re.search(r"\\[1-9]", expression), f"{expression!r} has a backreference"
        assert c.re2_incompatibility(expression) is None
        assert "${" not in expression and "$$" not in expression, "the Collector would expand it as a variable"


def test_every_key_the_strict_policy_allows_literally_is_kept(redaction: dict[str, Any]) -> None:
    kept = set(redaction["allowed_keys"])
    literal = {key for key in STRICT.allowed_keys if "*" not in key}
    literal |= {key for key in STRICT.resource_keys if "*" not in key}
    literal |= {key for keys in STRICT.allowed_events.values() for key in keys if STRICT.rule_for(key)}
    assert literal <= kept, f"missing from allowed_keys: {sorted(literal - kept)}"


def test_patterns_expand_only_to_keys_the_policy_allows(redaction: dict[str, Any]) -> None:
    assert c.unexpanded_patterns(STRICT) == () and c.unexpanded_patterns(LOCAL) == ()
    for key in redaction["allowed_keys"]:
        assert STRICT.rule_for(key) is not None or STRICT.resource_rule_for(key) is not None, key
    for pattern, keys in c.KNOWN_PATTERN_KEYS.items():
        glob = re.compile(re.escape(pattern).replace(r"\*", ".+"))
        for key in keys:
            assert glob.fullmatch(key), f"{key} is not an instance of {pattern}"


def test_correlation_id_keys_are_hashed_by_the_collector(redaction: dict[str, Any]) -> None:
    hashed = {key for key, rule in STRICT.allowed_keys.items() if isinstance(rule, HashedId)}
    assert hashed >= set(sc.CORRELATION_ID_KINDS)
    patterns = [re.compile(pattern) for pattern in redaction["blocked_key_patterns"]]
    for key in redaction["allowed_keys"]:
        assert any(pattern.search(key) for pattern in patterns) == (key in hashed), key


def test_local_and_unkeyed_policies_map_too(tmp_path: Path) -> None:
    local = c.collector_redaction_config(LOCAL)
    assert {"server.address", "process.pid", "host.arch"} <= set(local["allowed_keys"])
    unkeyed = c.collector_redaction_config(STRICT.derive("strict+sha", hash_function="sha256"))
    assert unkeyed["hash_function"] == "sha3" and "hmac_key" not in unkeyed
    assert unkeyed["allowed_values"] == [r"^sha256:[0-9a-f]{64}$"]


def test_custom_blocked_values_are_added_or_refused_when_re2_cannot_run_them(tmp_path: Path) -> None:
    custom = STRICT.derive("strict+acme", blocked_values=(r"(?i)acme-internal-\d+",))
    assert r"(?i)acme-internal-\d+" in c.collector_redaction_config(custom)["blocked_values"]
    for expression in (r"secret(?=\d)", r"(?<!x)secret", r"(a)\1", r"(?P<x>a)(?P=x)"):
        lookaround = STRICT.derive("strict+bad", blocked_values=(expression,))
        with pytest.raises(PolicyError, match="RE2"):
            c.collector_redaction_config(lookaround)


def test_patterns_without_known_keys_are_reported() -> None:
    custom = STRICT.derive("strict+vendor", allowed_keys={"vendor.metrics.*": FloatRange(0.0, 1.0)})
    assert c.unexpanded_patterns(custom) == ("vendor.metrics.*",)
    assert not any(key.startswith("vendor.") for key in c.collector_redaction_config(custom)["allowed_keys"])


# --- the blocked values are the public-safety check ----------------------------------------------------------
def flagged(text: str) -> bool:
    return any(re.search(expression, text) for expression in c.PUBLIC_SAFETY_PATTERNS)


SENSITIVE = [
    "key sk-abcdefghijklmnop1234",
    "AKIAABCDEFGHIJKLMNOP",
    "ghp_abcdefghijklmnopqrstuvwxyz",
    "github_pat_abcdefghijklmnopqrstuvwxyz",
    "xoxb-123-456",
    "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
    "Authorization: Bearer abc.def",
    "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----",
    "mail demo-user@example.com now",
    "https://user:pw@example.com/a?b=c",
    "s3://bucket/key",
    "/etc/passwd",
    "~/notes.txt",
    "C:\\Users\\me",
    "\\\\server\\share",
    "path=/var/lib/x",
    "x/home/alice/y",
]
SAFE = [
    "gpt-4o-mini",
    "demo-model-1",
    "openai/gpt-4o",
    "claude-3-5-sonnet@20240620",
    "ValueError",
    "get_weather",
    "tool_calls",
    "hmac-sha256:0123abcd:" + "0" * 64,
    "agentdiag-demo",
    "1.45.2",
    "a:b",
]


@pytest.mark.parametrize("text", SENSITIVE)
def test_sensitive_examples_are_flagged_by_both(text: str) -> None:
    assert is_sensitive(text) and flagged(text)


@pytest.mark.parametrize("text", SAFE)
def test_safe_examples_pass_both(text: str) -> None:
    assert not is_sensitive(text) and not flagged(text)


ASCII_PIECES = st.sampled_from(
    ["sk-", "pk-", "AKIA", "ghp_", "github_pat_", "xoxb-", "AIza", "eyJ", ".", "bearer ", "Token ", "-----BEGIN",
     "@", "example.com", "://", "http", "/", "~/", "C:\\", "\\\\", "home/", "tmp/", "=", ":", "'", "(", ",", " ",
     "\n", "abc", "ABC", "0123456789", "_", "-", "x",
     # class 3: the newer formats, digits for card and phone numbers and IP addresses
     "glpat-", "hf_", "sk_live_", "SG.", "1//", ":AA", "sig=", "password", "4111", "1111", "+", "::", "255",
     "10.0.0.1", "0", "4", "\t", "\x7f"]
)  # fmt: skip


@settings(
    derandomize=True, database=None, deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.lists(ASCII_PIECES, max_size=12).map("".join))
def test_collector_patterns_flag_what_the_sdk_flags(text: str) -> None:
    """For ASCII text: a value the SDK would drop is one the Collector masks. The Collector masks exactly the
    candidates of the SDK's expressions; the SDK clears a few of those with a check (Luhn, digit counts, address
    parsing, loopback), so it drops a subset."""
    assert flagged(text) == (recognise(text, confirm=False) is not None), repr(text)
    if is_sensitive(text) and recognise(text) != RANDOM_TOKEN:  # RE2 cannot count: the SDK's step alone
        assert flagged(text), repr(text)


@pytest.mark.parametrize(
    "text",
    ["4111 1111 1111 1112", "01-02-2024 1", "127.0.0.1", "::1", "bad::cafe"],
)
def test_the_collector_masks_candidates_the_sdk_clears(text: str) -> None:
    """Where the two differ: what only a check can tell (a wrong Luhn digit, too few digits, loopback, a name
    pair) the Collector masks, the private side."""
    assert not is_sensitive(text)
    assert flagged(text) and recognise(text, confirm=False) is not None


def test_the_collector_masks_the_whole_of_a_value_with_a_hidden_character() -> None:
    text = "gpt-4o\u202eSECRET"
    matches = [m.group(0) for expression in c.PUBLIC_SAFETY_PATTERNS for m in re.finditer(expression, text)]
    assert text in matches


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("see https://example.com/a?token=1 now", "https://example.com/a?token=1"),
        ("Authorization: Bearer abc.def.ghi", "Bearer abc.def.ghi"),
        ("path=/var/lib/app/secret.txt", "=/var/lib/app/secret.txt"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln end", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln"),
    ],
)
def test_the_collector_masks_the_whole_token(text: str, masked: str) -> None:
    matches = [m.group(0) for expression in c.PUBLIC_SAFETY_PATTERNS for m in re.finditer(expression, text)]
    assert masked in matches or any(masked in match for match in matches), matches


# --- the SDK's strict output passes the Collector unchanged --------------------------------------------------
def collector_verdict(config: dict[str, Any], key: str, value: Any) -> str:
    """What the redaction processor does to one attribute (its documented order): removed/kept/hashed/masked."""
    if key not in set(config["allowed_keys"]):
        return "removed"
    if not isinstance(value, str):
        return "kept"
    if any(re.search(expression, value) for expression in config["allowed_values"]):
        return "kept"
    if any(re.search(expression, key) for expression in config["blocked_key_patterns"]):
        return "hashed"
    if any(re.search(expression, value) for expression in config["blocked_values"]):
        return "masked"
    return "kept"


def test_the_demo_run_under_the_strict_policy_passes_the_collector_unchanged() -> None:
    config = c.collector_redaction_config(STRICT)
    with capture_spans(redact=True, resource=Resource.create({"service.name": "agentdiag-demo"})) as captured:
        run_demo_agent()
    spans = captured.spans()
    assert len(spans) == 12
    seen: set[str] = set()
    for span in spans:
        surfaces = [dict(span.attributes or {}), dict(span.resource.attributes)]
        surfaces += [dict(event.attributes or {}) for event in span.events]
        for attributes in surfaces:
            for key, value in attributes.items():
                items = value if isinstance(value, tuple) else (value,)
                for item in items:
                    verdict = collector_verdict(config, key, item)
                    assert verdict == "kept", f"the Collector would leave {key} {verdict} on {span.name!r}"
                seen.add(key)
    assert {sc.GEN_AI_CONVERSATION_ID, sc.USER_ID, sc.GEN_AI_TOOL_CALL_ID, "service.name"} <= seen


def test_foreign_raw_values_do_not_pass_the_collector() -> None:
    config = c.collector_redaction_config(STRICT)
    assert collector_verdict(config, "gen_ai.prompt", "hello") == "removed"
    assert collector_verdict(config, "process.command_line", "python app.py") == "removed"
    assert collector_verdict(config, sc.USER_ID, "alice") == "hashed"
    assert collector_verdict(config, sc.GEN_AI_CONVERSATION_ID, "conv-42") == "hashed"
    assert collector_verdict(config, sc.ERROR_TYPE, "see https://example.com/x") == "masked"
    assert collector_verdict(config, sc.GEN_AI_REQUEST_MODEL, "sk-abcdefghijklmnop1234") == "masked"
    assert collector_verdict(config, sc.USER_ID, "hmac-sha256:0123abcd:" + "f" * 64) == "kept"
    assert collector_verdict(config, sc.USER_ID, "hmac-sha256:0123abcd:" + "f" * 64 + " alice") == "hashed"


# --- Tempo and Grafana ----------------------------------------------------------------------------------------
def test_tempo_is_a_single_binary_with_local_storage() -> None:
    tempo = load(TEMPO)
    assert tempo["server"]["http_listen_port"] == 3200
    protocols = tempo["distributor"]["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    trace = tempo["storage"]["trace"]
    assert trace["backend"] == "local"
    assert trace["wal"]["path"].startswith("/var/tempo/") and trace["local"]["path"].startswith("/var/tempo/")
    assert tempo["usage_report"]["reporting_enabled"] is False


def test_grafana_has_a_tempo_and_a_jaeger_data_source(compose: dict[str, Any]) -> None:
    sources = {source["uid"]: source for source in load(DATASOURCES)["datasources"]}
    assert set(sources) == {"tempo", "jaeger", "prometheus", "agentdiag-serve"}
    assert (sources["tempo"]["type"], sources["tempo"]["url"]) == ("tempo", "http://tempo:3200")
    assert (sources["jaeger"]["type"], sources["jaeger"]["url"]) == ("jaeger", "http://jaeger:16686")
    for uid in ("tempo", "jaeger"):
        source = sources[uid]
        assert source["access"] == "proxy" and source["editable"] is False
        host = source["url"].split("//", 1)[1].split(":", 1)[0]
        assert host in compose["services"], f"{host} is not a compose service"


def test_grafana_reads_agentdiag_serve_on_the_host_with_its_token(compose: dict[str, Any]) -> None:
    """The third data source is Grafana's Jaeger plugin pointed at `agentdiag serve` on the host: its URL and
    bearer token come from the environment compose passes to Grafana, with the bridge gateway as the default
    (the address `agentdiag serve --host 172.17.0.1 --allow-remote` binds, never 0.0.0.0)."""
    source = {s["uid"]: s for s in load(DATASOURCES)["datasources"]}["agentdiag-serve"]
    assert (source["type"], source["access"], source["editable"]) == ("jaeger", "proxy", False)
    assert source["url"] == "${AGENTDIAG_SERVE_URL}"
    assert source["jsonData"]["httpHeaderName1"] == "Authorization"
    assert source["secureJsonData"]["httpHeaderValue1"] == "Bearer ${AGENTDIAG_SERVE_TOKEN}"
    environment = compose["services"]["grafana"]["environment"]
    assert environment["AGENTDIAG_SERVE_URL"] == "${AGENTDIAG_SERVE_URL:-http://172.17.0.1:16687}"
    assert environment["AGENTDIAG_SERVE_TOKEN"] == "${AGENTDIAG_SERVE_TOKEN:-}"
    default = environment["AGENTDIAG_SERVE_URL"].split(":-", 1)[1].rstrip("}")
    host, port = default.split("//", 1)[1].split(":")
    from otel_agentdiag.serve.settings import DEFAULT_PORT, is_loopback_host

    assert int(port) == DEFAULT_PORT and not is_loopback_host(host) and host != "0.0.0.0"


# --- docker compose ------------------------------------------------------------------------------------------
def test_compose_images_are_pinned(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        image = service["image"]
        repository, _, tag = image.rpartition(":")
        assert repository and "/" not in tag, f"{name}: {image} has no tag"
        assert tag != "latest" and VERSION_TAG.match(tag), f"{name}: {image} is not pinned to a version"
    assert compose["services"]["collector"]["image"] == (
        f"otel/opentelemetry-collector-contrib:{c.COLLECTOR_CONTRIB_VERSION}"
    ), "the image and the version the redaction block targets must agree"
    assert compose["services"]["jaeger"]["image"].startswith("jaegertracing/jaeger:2.")


def test_every_published_port_is_bound_to_loopback(compose: dict[str, Any]) -> None:
    published = []
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert isinstance(port, str), f"{name}: write ports as '127.0.0.1:host:container' strings"
            assert port.startswith("127.0.0.1:"), f"{name}: {port} is reachable from other machines"
            published.append(port)
        assert service.get("network_mode") != "host", name
    assert {
        "127.0.0.1:4317:4317",
        "127.0.0.1:4318:4318",
        "127.0.0.1:13133:13133",
        "127.0.0.1:16686:16686",
        "127.0.0.1:3200:3200",
        "127.0.0.1:3000:3000",
    } <= set(published)


def test_compose_mounts_the_configs_that_exist(compose: dict[str, Any]) -> None:
    services = compose["services"]
    mounts = {}
    for service in services.values():
        for volume in service.get("volumes", []):
            source, target, *_ = volume.split(":")
            if source.startswith("."):
                assert (COMPOSE.parent / source).resolve().exists(), f"{source} does not exist"
                mounts[target] = (COMPOSE.parent / source).resolve()
    assert mounts["/etc/otelcol-contrib/config.yaml"] == OTELCOL
    assert mounts["/etc/tempo.yaml"] == TEMPO
    assert mounts["/etc/grafana/provisioning/datasources"] == DATASOURCES.parent
    assert "-config.file=/etc/tempo.yaml" in services["tempo"]["command"]
    assert c.COLLECTOR_HASH_KEY_ENV in services["collector"]["environment"]
    assert services["tempo"]["depends_on"]["tempo-init"]["condition"] == "service_completed_successfully"


def test_grafana_is_anonymous_and_read_only(compose: dict[str, Any]) -> None:
    environment = compose["services"]["grafana"]["environment"]
    assert environment["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert environment["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"


def test_depends_on_uses_conditions_compose_knows(compose: dict[str, Any]) -> None:
    conditions = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, service in compose["services"].items():
        for dependency, spec in (service.get("depends_on") or {}).items():
            assert dependency in compose["services"], f"{name} depends on unknown {dependency}"
            assert spec["condition"] in conditions, f"{name}: {spec}"
            if spec["condition"] == "service_healthy":
                assert "healthcheck" in compose["services"][dependency], f"{dependency} has no healthcheck"
