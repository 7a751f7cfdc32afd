"""``agentdiag doctor`` and the OTLP endpoint: one without a scheme fails and says why, the endpoint is shown as
written (host and port), and a missing ``[otlp]`` extra is one line with the install command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_ENV_PREFIXES = ("OTEL_", "AGENTDIAG_")
SECRET = "SECRET-doctor-endpoint-41f0"

_WITHOUT_THE_EXTRA = """
import sys

# As if the [otlp] extra were not installed: the SDK's OTLP exporter packages cannot be imported.
sys.modules["opentelemetry.exporter.otlp.proto.http"] = None
sys.modules["opentelemetry.exporter.otlp.proto.grpc"] = None

from otel_agentdiag.cli import cli

cli(["doctor", *sys.argv[1:]], prog_name="agentdiag")
"""


def doctor(tmp_path: Path, *args: str, script: str | None = None, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    env.update(variables)
    command = (
        [sys.executable, "-c", script, *args] if script else [sys.executable, "-m", "otel_agentdiag", "doctor", *args]
    )
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120)


def test_an_endpoint_argument_without_a_scheme_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = doctor(tmp_path, "--otlp-endpoint", f"u:{SECRET}@localhost:4318?t={SECRET}")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("agentdiag: error: ")
    assert "has no scheme" in proc.stderr and "http://localhost:4318" in proc.stderr
    assert SECRET not in proc.stderr + proc.stdout and "Traceback" not in proc.stderr


def test_an_endpoint_variable_without_a_scheme_fails_and_is_shown_as_written(tmp_path: Path) -> None:
    proc = doctor(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="localhost:4318")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "otlp endpoint  localhost:4318 (from OTEL_EXPORTER_OTLP_ENDPOINT" in proc.stdout
    assert "localhost://" not in proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("agentdiag: error: ")
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in proc.stderr and "http://localhost:4318" in proc.stderr
    assert "the OTLP export is off" in proc.stderr
    assert "destination otlp" not in proc.stdout  # configure() would not build it, so it is not checked

    report = json.loads(doctor(tmp_path, "--format", "json", OTEL_EXPORTER_OTLP_ENDPOINT="localhost:4318").stdout)
    assert report["configuration"]["otlp_endpoint"].startswith("localhost:4318 (from OTEL_EXPORTER_OTLP_ENDPOINT")
    assert [r["destinations"] for r in report["refused"]] == [["otlp"]]
    assert [d["destination"] for d in report["destinations"]] == ["local"]


def test_a_bare_grpc_endpoint_passes_and_is_shown_as_written(tmp_path: Path) -> None:
    proc = doctor(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="127.0.0.1:4317", OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "otlp endpoint  127.0.0.1:4317 (from OTEL_EXPORTER_OTLP_ENDPOINT)" in proc.stdout


def test_a_missing_otlp_extra_is_one_line_with_the_install_command(tmp_path: Path) -> None:
    proc = doctor(tmp_path, script=_WITHOUT_THE_EXTRA, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("agentdiag: error: ")
    assert "'otlp' extra" in proc.stderr and "pip install -e '.[otlp]'" in proc.stderr
    assert "otlp endpoint  http://127.0.0.1:4318 (from OTEL_EXPORTER_OTLP_ENDPOINT)" in proc.stdout

    installed = doctor(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318")
    assert installed.returncode == 0, installed.stdout + installed.stderr  # with the extra, the same set-up passes
