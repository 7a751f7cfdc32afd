"""Which gRPC endpoints ``agentdiag push`` reaches in plaintext and which over TLS, as ``--help`` says.

The real handshake (a plaintext rotel on 127.0.0.1) is in ``tests/e2e/test_push_grpc_tls.py``.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from otel_agentdiag.cli import cli
from otel_agentdiag.cli.push import plaintext_endpoint
from otel_agentdiag.diagnostics.push import grpc_plaintext, is_loopback_host

INSECURE_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_INSECURE", "OTEL_EXPORTER_OTLP_INSECURE")


@pytest.fixture(autouse=True)
def _no_insecure_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in INSECURE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    "endpoint",
    ["127.0.0.1:4317", "localhost:4317", "LOCALHOST:4317", "127.10.20.30:4317", "[::1]:4317", "localhost"],
)
def test_a_bare_loopback_endpoint_is_plaintext(endpoint: str) -> None:
    assert grpc_plaintext(endpoint)


@pytest.mark.parametrize(
    "endpoint",
    [
        "collector.example.com:4317",
        "10.0.0.5:4317",
        "192.168.1.2:4317",
        "[2001:db8::1]:4317",
        "localhost.example.com:4317",
        "128.0.0.1:4317",
        "0.0.0.0:4317",
    ],
)
def test_a_bare_endpoint_elsewhere_is_tls(endpoint: str) -> None:
    assert not grpc_plaintext(endpoint)


@pytest.mark.parametrize("host", ["127.0.0.1", "collector.example.com", "[::1]", "10.0.0.5"])
def test_the_scheme_decides_when_there_is_one(host: str) -> None:
    assert grpc_plaintext(f"http://{host}:4317")
    assert not grpc_plaintext(f"https://{host}:4317")


@pytest.mark.parametrize("variable", INSECURE_VARIABLES)
def test_an_insecure_setting_decides_for_a_bare_endpoint_but_not_over_https(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "false")
    assert not grpc_plaintext("127.0.0.1:4317")
    monkeypatch.setenv(variable, "true")
    assert grpc_plaintext("collector.example.com:4317")
    assert not grpc_plaintext("https://collector.example.com:4317")


def test_an_unreadable_endpoint_is_tls() -> None:
    assert not grpc_plaintext("[::1:4317")
    assert not grpc_plaintext("")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("localhost.", True),
        ("127.255.255.254", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost2", False),
        ("126.0.0.1", False),
        ("::2", False),
        ("example.com", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


@pytest.mark.parametrize(
    ("shown", "plain"),
    [
        ("127.0.0.1:4317", "http://127.0.0.1:4317"),
        ("https://collector.example.com:4317", "http://collector.example.com:4317"),
        ("https://[::1]:4318/v1/traces", "http://[::1]:4318"),
    ],
)
def test_the_plaintext_spelling_of_a_shown_endpoint(shown: str, plain: str) -> None:
    assert plaintext_endpoint(shown) == plain


def test_help_says_which_spelling_is_plaintext() -> None:
    result = CliRunner().invoke(cli, ["push", "--help"], terminal_width=200)

    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "gRPC: http://host:port is plaintext, https://host:port is TLS, a bare host:port is plaintext" in text
    assert "when the host is loopback (localhost, 127.0.0.0/8, ::1) and TLS otherwise." in text
