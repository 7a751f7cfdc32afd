"""An OTLP endpoint without a scheme: http/protobuf needs ``http://`` or ``https://``.

``localhost:4318`` used to be taken as it was (the scheme ``localhost``, the path ``4318``), so nothing was ever
exported. As an argument it is a programming error (``ValueError``, one line that says what to write); from the
environment it fails closed (one logged error, the OTLP branch off, the local store working). gRPC keeps its
bare ``host:port``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import otel_agentdiag as agentdiag
from otel_agentdiag.destinations import LOCAL_DESTINATION, OTLP_DESTINATION
from otel_agentdiag.storage import SpanStore

HASH_KEY = "5f0a9bfb7740e2f5ce64d9ee6a8875283bc78032bd5c2ff8e65a69a50376460f"
SECRET = "SECRET-endpoint-7d1e"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OTEL_", "AGENTDIAG_")):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("endpoint", "suggested"),
    [
        ("localhost:4318", "http://localhost:4318"),
        ("collector.internal", "http://collector.internal"),
        ("grpc://127.0.0.1:4317", "http://127.0.0.1:4317"),
    ],
)
def test_an_http_endpoint_without_http_or_https_raises_one_clear_line(
    tmp_path: Path, endpoint: str, suggested: str
) -> None:
    with pytest.raises(ValueError) as raised:
        agentdiag.configure(store=tmp_path / "t.db", otlp_endpoint=endpoint, hash_key=HASH_KEY, set_global=False)
    message = str(raised.value)
    assert "\n" not in message
    assert "otlp_endpoint" in message and "http://" in message and f"e.g. {suggested}" in message
    assert not (tmp_path / "t.db").exists()  # raised before anything was installed


def test_the_message_never_echoes_credentials(tmp_path: Path) -> None:
    endpoint = f"user:{SECRET}@collector:4318/v1/traces?token={SECRET}#{SECRET}"
    with pytest.raises(ValueError) as raised:
        agentdiag.configure(store=tmp_path / "t.db", otlp_endpoint=endpoint, hash_key=HASH_KEY, set_global=False)
    assert SECRET not in str(raised.value)
    assert "collector:4318" in str(raised.value)


def test_grpc_keeps_a_bare_host_and_port(tmp_path: Path) -> None:
    diag = agentdiag.configure(
        store=tmp_path / "t.db",
        otlp_endpoint="127.0.0.1:4317",
        otlp_protocol="grpc",
        hash_key=HASH_KEY,
        set_global=False,
    )
    try:
        assert [d.name for d in diag.destinations] == [LOCAL_DESTINATION, OTLP_DESTINATION]
    finally:
        diag.shutdown(timeout_s=0.5)


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
def test_such_a_variable_logs_one_error_and_only_the_otlp_branch_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, variable: str
) -> None:
    monkeypatch.setenv(variable, f"u:{SECRET}@localhost:4318?key={SECRET}")
    store = tmp_path / "t.db"
    with caplog.at_level(logging.WARNING):
        diag = agentdiag.configure(store=store, hash_key=HASH_KEY, set_global=False)
    try:
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1, errors
        assert variable in errors[0] and "http://localhost:4318" in errors[0] and "OTLP export is off" in errors[0]
        assert all(SECRET not in r.getMessage() for r in caplog.records)
        assert [d.name for d in diag.destinations] == [LOCAL_DESTINATION]
        assert diag.tracer_provider is not None
        with diag.tracer_provider.get_tracer("test").start_as_current_span("still recorded"):
            pass
    finally:
        diag.shutdown()
    with SpanStore(store, create=False) as opened:
        assert opened.span_count() == 1


def test_a_grpc_variable_keeps_a_bare_host_and_port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    diag = agentdiag.configure(store=tmp_path / "t.db", hash_key=HASH_KEY, set_global=False)
    try:
        assert [d.name for d in diag.destinations] == [LOCAL_DESTINATION, OTLP_DESTINATION]
    finally:
        diag.shutdown(timeout_s=0.5)
