"""``agentdiag push`` over gRPC to a real plaintext collector (rotel on 127.0.0.1): which endpoint spelling is
plaintext, and what a failed TLS handshake tells the user to write instead."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from rotel_collector import RotelCollector, unavailable_reason

import otel_agentdiag as agentdiag
from otel_agentdiag.cli import cli
from otel_agentdiag.demo import run_demo_agent
from otel_agentdiag.storage import SpanStore

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=unavailable_reason() or "")

WAIT_S = 10.0
TOKEN = "push-tls-token-5f0c1d2e"


@pytest.fixture
def rotel(tmp_path: Path) -> Iterator[RotelCollector]:
    with RotelCollector(tmp_path / "rotel") as collector:
        yield collector


@pytest.fixture
def store(tmp_path: Path, clean_env: None) -> Path:
    path = tmp_path / "t.db"
    with agentdiag.configure(service_name="push-grpc-tls", store=path, set_global=False) as diag:
        run_demo_agent()
        diag.force_flush()
    return path


def stored_count(path: Path) -> int:
    with SpanStore(path, create=False) as opened:
        return sum(len(opened.get_trace(summary.trace_id)) for summary in opened.list_traces())


def push(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, ["push", "--protocol", "grpc", *(str(a) for a in args)], catch_exceptions=False)


def test_a_bare_loopback_host_and_port_is_plaintext(store: Path, rotel: RotelCollector) -> None:
    endpoint = f"127.0.0.1:{rotel.grpc_port}"

    result = push("--endpoint", endpoint, "--store", store, "--timeout", "5")

    assert result.exit_code == 0, result.output
    count = stored_count(store)
    assert result.output.startswith(f"pushed {count} new spans to {endpoint} (grpc)")
    assert rotel.wait_for_spans(count, timeout=WAIT_S), f"rotel got {len(rotel.spans())} spans, expected {count}"


def test_a_failed_tls_handshake_says_to_write_http_and_echoes_no_query(store: Path, rotel: RotelCollector) -> None:
    endpoint = f"https://127.0.0.1:{rotel.grpc_port}/?token={TOKEN}"

    result = push("--endpoint", endpoint, "--store", store, "--timeout", "2")

    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.startswith("agentdiag:")]
    assert len(lines) == 1, result.stderr
    (line,) = lines
    assert line.startswith(f"agentdiag: error: push to https://127.0.0.1:{rotel.grpc_port} (grpc) failed at batch 1")
    assert "the TLS handshake failed" in line
    assert f"for a plaintext collector write --endpoint http://127.0.0.1:{rotel.grpc_port}" in line
    assert TOKEN not in result.output and "token" not in result.output
    assert rotel.spans() == []

    again = push("--endpoint", f"http://127.0.0.1:{rotel.grpc_port}", "--store", store)

    assert again.exit_code == 0, again.output
    assert rotel.wait_for_spans(stored_count(store), timeout=WAIT_S)
