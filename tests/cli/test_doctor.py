"""``agentdiag doctor``: resolved configuration without secrets, policies per destination, and the canary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from otel_agentdiag.cli import cli
from otel_agentdiag.destinations import resolve_destinations
from otel_agentdiag.diagnostics.canary import SURFACES, _sentinels, run_canary
from otel_agentdiag.options import resolve_options as _resolve
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.redaction.rules import IntRange, Scalar, StringArray, Token

_ENV_PREFIXES = ("AGENTDIAG_", "OTEL_", "TRACELOOP_")
SECRET_KEY = "488d2ac24446d55e765298cf8605e2af0eb8072cf0491a3c2bd6d70e41e23470"


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, ["doctor", *(str(a) for a in args)], catch_exceptions=False)


def leaky_policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "leaky.toml"
    path.write_text(
        'extends = "strict"\n[allowed_keys]\n"app.prompt" = { type = "token", pattern = ".*", max_length = 1000 }\n',
        encoding="utf-8",
    )
    return path


def test_default_configuration_passes_and_writes_nothing(tmp_path: Path) -> None:
    result = invoke("--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["configuration"]["store"] == str(tmp_path / ".agentdiag" / "traces.db")
    assert report["configuration"]["otlp_endpoint"] is None
    assert report["configuration"]["otlp_protocol"] is None
    (local,) = report["destinations"]
    assert (local["destination"], local["policy"], local["policy_source"]) == ("local", "local", "default")
    assert local["key_source"].startswith("ephemeral (a key file would be created")
    (outcome,) = report["canary"]["results"]
    assert outcome["ok"] and outcome["ids_hashed"]
    assert outcome["spans_received"] == outcome["spans_sent"] == 3
    assert outcome["surfaces"] == dict.fromkeys(SURFACES, "clean")
    assert report["canary"]["leaked"] is False
    # The doctor only reads: no store, no key file.
    assert list(tmp_path.iterdir()) == []


def test_both_destinations_are_checked_with_their_own_policy_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDIAG_HASH_KEY", SECRET_KEY)
    monkeypatch.setenv("AGENTDIAG_OTLP_HASH_KEY", SECRET_KEY[::-1])
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "https://svc:hunter2pass@collector.example:4318/base?token=abc123"
    )
    result = invoke("--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    by_name = {d["destination"]: d for d in report["destinations"]}
    assert (by_name["local"]["policy"], by_name["otlp"]["policy"]) == ("local", "strict")
    assert by_name["local"]["key_source"] == "AGENTDIAG_HASH_KEY"
    assert by_name["otlp"]["key_source"] == "AGENTDIAG_OTLP_HASH_KEY"
    assert by_name["local"]["key_id"] != by_name["otlp"]["key_id"]
    assert [r["destination"] for r in report["canary"]["results"]] == ["local", "otlp"]
    assert report["configuration"]["otlp_endpoint"] == (
        "https://collector.example:4318/base (from OTEL_EXPORTER_OTLP_ENDPOINT)"
    )
    assert report["configuration"]["otlp_protocol"] == "http/protobuf (default)"
    # Neither the keys nor the endpoint's credentials or query are printed, in any format.
    text = invoke().output
    for output in (result.output, text):
        for secret in (SECRET_KEY, SECRET_KEY[::-1], "hunter2pass", "abc123", "svc:"):
            assert secret not in output


def test_a_leaky_policy_is_caught_and_exits_1(tmp_path: Path) -> None:
    result = invoke("--local-policy", leaky_policy_file(tmp_path), "--format", "json")
    assert result.exit_code == 1, result.output
    (outcome,) = json.loads(result.output)["canary"]["results"]
    assert outcome["surfaces"]["attributes"] == "LEAKED"
    assert {"surface": "attributes", "found_in": ["attributes"]} in outcome["leaks"]
    assert not outcome["ok"]
    text = invoke("--local-policy", leaky_policy_file(tmp_path))
    assert text.exit_code == 1
    assert "FAIL" in text.output and "a attributes sentinel survived in: attributes" in text.output


def test_a_policy_that_does_not_hash_ids_fails(tmp_path: Path) -> None:
    path = tmp_path / "raw-ids.toml"
    path.write_text(
        '[allowed_keys]\n"gen_ai.conversation.id" = { type = "token", pattern = "[a-z0-9]+", max_length = 64 }\n',
        encoding="utf-8",
    )
    result = invoke("--local-policy", path, "--format", "json")
    assert result.exit_code == 1
    (outcome,) = json.loads(result.output)["canary"]["results"]
    assert outcome["surfaces"]["ids"] == "LEAKED"


def test_disabled_means_nothing_to_check() -> None:
    result = CliRunner(env={"AGENTDIAG_ENABLED": "false"}).invoke(cli, ["doctor"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "nothing is exported" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--local-policy", "missing.toml"], "cannot read policy file missing.toml"),
        (["--otlp-endpoint", "http://127.0.0.1:9", "--otlp-policy", "local-debug.toml"], "local store only"),
        (["--format", "yaml"], "Invalid value for '--format'"),
    ],
)
def test_configuration_errors_are_one_line_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "local-debug.toml").write_text('extends = "local"\nsummary = "debug"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    proc = subprocess.run(
        [sys.executable, "-m", "otel_agentdiag", "doctor", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("agentdiag: error: ")
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_content_capture_switches_are_warned_about(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_AND_EVENT")
    result = invoke("--format", "json")
    (warning,) = json.loads(result.output)["warnings"]
    assert warning.startswith("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")


def test_canary_puts_a_sentinel_in_every_surface_it_reports() -> None:
    sentinels = _sentinels()
    assert set(sentinels) == set(SURFACES)
    assert all(labelled for labelled in sentinels.values())


def test_canary_detects_a_leak_in_each_surface_it_claims_to_cover(tmp_path: Path) -> None:
    """The canary is only worth something if it can fail: open each surface in turn and see it caught.

    (Event names are random per run and matched literally, so no policy can open them; span names are rebuilt,
    never copied, unless listed — both are covered by the clean-run test above.)"""
    permissive = Token(__import__("re").compile(r"(?s).*"), 10_000)
    options = _resolve(None, tmp_path / "t.db", None)
    openings: dict[str, Policy] = {
        "attributes": STRICT.derive("open-attributes", allowed_keys={"app.prompt": permissive}),
        "ids": STRICT.derive("open-ids", allowed_keys={"gen_ai.conversation.id": permissive}),
        "names": STRICT.derive("open-names", allowed_keys={"gen_ai.tool.name": permissive}),
        "resource": STRICT.derive("open-resource", resource_keys={"host.name": permissive}),
        "scope": STRICT.derive("open-scope", scope_keys={"canary.scope": permissive}),
        "links": STRICT.derive("open-links", allowed_keys={"why": permissive}),
        "exception": STRICT.derive(
            "open-exception",
            allowed_events={"exception": frozenset({"exception.type", "exception.message"})},
            allowed_keys={"exception.message": permissive},
        ),
    }
    for surface, policy in openings.items():
        (destination,) = resolve_destinations(options, local_policy=policy, create_key_file=False)
        (outcome,) = run_canary([destination]).results
        assert surface in outcome.leaks, (surface, outcome.leaks)
        assert not outcome.ok


def test_canary_catches_an_open_key_pattern_and_an_open_finish_reason(tmp_path: Path) -> None:
    """Classes of issue 20: a ``*`` under an allowed family and finish reasons outside the documented set."""
    options = _resolve(None, tmp_path / "t.db", None)
    anything = Token(__import__("re").compile(r"(?s).*"), 10_000)
    for policy in (
        STRICT.derive("open-usage", allowed_keys={"gen_ai.usage.*": IntRange(0, 10**12)}),
        STRICT.derive("open-reasons", allowed_keys={"gen_ai.response.finish_reasons": StringArray(anything, 16)}),
        STRICT.derive("open-sdk", resource_keys={"telemetry.sdk.*": Scalar(256)}),
    ):
        (destination,) = resolve_destinations(options, local_policy=policy, create_key_file=False)
        (outcome,) = run_canary([destination]).results
        assert not outcome.ok, policy.name
        assert set(outcome.leaks) == {"resource" if policy.name == "open-sdk" else "attributes"}, policy.name


def test_canary_schema_url_sentinels_are_really_sent_and_searched() -> None:
    """No policy setting opens schema URLs, so check the other way: unredacted, the canary finds its sentinels in
    the resource and scope schema URLs."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_agentdiag.diagnostics import canary

    sentinels = canary._sentinels()
    sink = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({}, sentinels["resource"]["schema_url"]), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(sink))
    canary._emit(provider, sentinels)
    spans = list(sink.get_finished_spans())
    only_schemas = {"resource": {"schema_url": sentinels["resource"]["schema_url"]}}
    only_schemas["scope"] = {"schema_url": sentinels["scope"]["schema_url"]}
    leaks = canary._search(spans, only_schemas)
    assert "resource" in leaks["resource"] and "scope" in leaks["scope"], leaks


def test_the_otlp_protocol_and_its_source_are_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    report = json.loads(invoke("--format", "json").output)
    assert report["configuration"]["otlp_protocol"] == "grpc (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)"
    assert "otlp protocol  grpc (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)" in invoke().output


def test_the_batch_settings_are_reported_from_the_standard_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    default = json.loads(invoke("--format", "json").output)["configuration"]["batch"]
    assert default == {"max_queue_spans": 2048, "max_export_batch": 512, "schedule_delay_ms": 500}
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "400")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "2000")
    report = json.loads(invoke("--format", "json").output)
    assert report["configuration"]["batch"] == {
        "max_queue_spans": 100,
        "max_export_batch": 100,
        "schedule_delay_ms": 2000,
    }
    text = invoke().output
    assert "up to 100 spans queued per destination, 100 per export, every 2000 ms at most" in text


def test_metrics_and_the_price_table_are_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from otel_agentdiag.cost.pricing import bundled_table

    monkeypatch.delenv("AGENTDIAG_METRICS", raising=False)
    monkeypatch.delenv("AGENTDIAG_PRICES", raising=False)
    text = invoke().output
    assert "metrics        off (configure(metrics=True) or AGENTDIAG_METRICS=true turns them on)" in text
    bundled = f"the bundled price table ({len(bundled_table())} entries, as of {bundled_table().as_of})"
    assert f"cost           {bundled}" in text
    monkeypatch.setenv("AGENTDIAG_METRICS", "true")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    ours = tmp_path / "prices.toml"
    ours.write_text('[[price]]\nprovider = "acme"\nmodel = "m-1"\ninput_per_million = 1\noutput_per_million = 2\n')
    monkeypatch.setenv("AGENTDIAG_PRICES", str(ours))
    configuration = json.loads(invoke("--format", "json").output)["configuration"]
    assert configuration["metrics"].startswith("on: OTLP http/protobuf, beside the traces")
    assert configuration["cost"] == f"{bundled}, overridden by 1 entries of AGENTDIAG_PRICES"
    ours.write_text('[[price]]\nprovider = "acme"\nmodel = "m-1"\ninput_per_million = -1\noutput_per_million = 2\n')
    cost = json.loads(invoke("--format", "json").output)["configuration"]["cost"]
    assert cost.startswith(f"{bundled}: AGENTDIAG_PRICES is not used ({ours}:4: ")
    monkeypatch.setenv("AGENTDIAG_PRICES", "off")
    assert "cost           off (AGENTDIAG_PRICES=off)" in invoke().output


_PROVIDER_SECRET = "SECRET-doctor-token-5c2a"
_WITH_A_USERS_PROVIDER = f"""
import sys
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

provider = TracerProvider()
url = "https://u:{_PROVIDER_SECRET}@collector.example:4318/v1/traces?key={_PROVIDER_SECRET}"
exporter = OTLPSpanExporter(endpoint=url, headers={{"x-key": "{_PROVIDER_SECRET}"}})
provider.add_span_processor(BatchSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from otel_agentdiag.cli import cli

cli(["doctor", *sys.argv[1:]], prog_name="agentdiag")
"""


def _doctor_beside_a_users_provider(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """doctor in a process whose global provider already exports unredacted (as under opentelemetry-instrument
    with another distro's configurator)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    return subprocess.run(
        [sys.executable, "-c", _WITH_A_USERS_PROVIDER, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_processors_that_see_spans_before_redaction_are_named_with_the_fix(tmp_path: Path) -> None:
    proc = _doctor_beside_a_users_provider(tmp_path, "--format", "json")
    assert proc.returncode == 0, proc.stderr  # a warning: the canary itself passed
    report = json.loads(proc.stdout)
    assert report["span_processors"]["sdk_provider"] is True
    assert report["span_processors"]["foreign"] == [
        {
            "processor": "opentelemetry.sdk.trace.export.BatchSpanProcessor",
            "exporter": "opentelemetry.exporter.otlp.proto.http.trace_exporter.OTLPSpanExporter",
            "name": "BatchSpanProcessor(OTLPSpanExporter)",
        }
    ]
    (warning,) = [w for w in report["warnings"] if "before redaction" in w]
    assert "BatchSpanProcessor(OTLPSpanExporter)" in warning and "redacting_processor" in warning
    text = _doctor_beside_a_users_provider(tmp_path)
    assert "! BatchSpanProcessor(OTLPSpanExporter) (opentelemetry.sdk.trace.export.BatchSpanProcessor)" in text.stdout
    for output in (proc.stdout, proc.stderr, text.stdout, text.stderr):
        assert _PROVIDER_SECRET not in output and "collector.example" not in output  # class names only


def test_without_an_sdk_provider_doctor_says_where_the_check_lives(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    proc = subprocess.run(
        [sys.executable, "-m", "otel_agentdiag", "doctor"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "no SDK TracerProvider here" in proc.stdout and "AgentDiag.foreign_processors()" in proc.stdout


def test_the_service_name_line_does_not_claim_the_sdk_default_for_a_program_that_names_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    line = next(line for line in invoke().output.splitlines() if "service name" in line)
    assert "(SDK default)" not in line
    assert "configure(service_name=...)" in line and "OTEL_SERVICE_NAME" in line
    monkeypatch.setenv("OTEL_SERVICE_NAME", "trip-planner")
    line = next(line for line in invoke().output.splitlines() if "service name" in line)
    assert line.split() == ["service", "name", "trip-planner"]


def test_a_token_that_makes_a_plain_sentinel_look_random_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """About 1 run in 250 drew a token that made ``cnryexceptionmessage{token}`` look random to the public-safety
    check: the opened exception surface then kept it out for that reason, and the canary missed the leak."""
    from otel_agentdiag.diagnostics import canary
    from otel_agentdiag.redaction.recognizers import is_sensitive

    unlucky, fine = "1b5fa3bc8f7b", "0123abcd4567"
    assert is_sensitive(f"cnryexceptionmessage{unlucky}")  # the draw that failed a CI run
    drawn = iter([unlucky, fine])
    monkeypatch.setattr(canary.secrets, "token_hex", lambda n: next(drawn))
    sentinels = canary._sentinels()
    assert sentinels["exception"]["message"] == f"cnryexceptionmessage{fine}"
    assert not is_sensitive(sentinels["exception"]["message"])
