"""``agentdiag serve`` as a user runs it: a real subprocess on a free port, its URL line, a GET, Ctrl-C (exit 0);
and its one-line errors (exit 2)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from serve_helpers import demo_store

from otel_agentdiag.cli import cli

DEADLINE_S = 20.0


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_store(tmp_path_factory.mktemp("demo"))


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    return env


def _first_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()  # blocks until the URL line (or the end of output): no sleep
    return line.strip()


def _get(port: int, path: str) -> tuple[int, dict[str, object]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE_S)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_serve_prints_its_url_answers_and_stops_on_ctrl_c(demo: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "otel_agentdiag", "serve", "--store", str(demo), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_environment(),
    ) as process:
        try:
            line = _first_line(process)
            assert line.startswith("agentdiag serve: http://127.0.0.1:"), line
            port = int(line.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])
            status, body = _get(port, "/api/services")
            assert status == 200 and body["data"] == ["agentdiag-demo"]
            process.send_signal(signal.SIGINT)
            _out, err = process.communicate(timeout=DEADLINE_S)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, err
    assert "Traceback" not in err


REMOTE = "192.0.2.10"  # TEST-NET-1: not loopback (never bound: each check below comes before binding)


def _one_error_line(*args: str) -> str:
    result = CliRunner().invoke(cli, ["serve", *args], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentdiag: error:"), result.stderr
    return lines[0]


def test_a_missing_store_is_one_line(tmp_path: Path) -> None:
    assert "no trace store" in _one_error_line("--store", str(tmp_path / "none.db"))


def test_a_remote_host_needs_the_flag_and_a_token(demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "--allow-remote" in _one_error_line("--store", str(demo), "--host", REMOTE)
    assert "AGENTDIAG_SERVE_TOKEN" in _one_error_line("--store", str(demo), "--host", REMOTE, "--allow-remote")
    monkeypatch.setenv("AGENTDIAG_SERVE_TOKEN", "short")
    assert "at least 16" in _one_error_line("--store", str(demo), "--host", REMOTE, "--allow-remote")
    token_file = tmp_path / "token"
    token_file.write_text("a-long-enough-token-0123456789\n")
    token_file.chmod(0o644)
    message = _one_error_line("--store", str(demo), "--host", REMOTE, "--allow-remote", "--token-file", str(token_file))
    assert "readable by group or others" in message


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::", "[::]"])
def test_a_wildcard_host_is_refused(demo: Path, wildcard: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every address at once cannot be matched against the Host header: refused even with the flag and a token."""
    monkeypatch.setenv("AGENTDIAG_SERVE_TOKEN", "a-long-enough-token-0123456789")
    assert "wildcard" in _one_error_line("--store", str(demo), "--host", wildcard, "--allow-remote")


def test_a_port_in_use_is_one_line(demo: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert "in use" in _one_error_line("--store", str(demo), "--port", str(port))
