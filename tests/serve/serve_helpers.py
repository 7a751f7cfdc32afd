"""Stores written by the real pipeline for the server's tests, and an in-process client of the real app."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from click.testing import CliRunner
from starlette.testclient import TestClient

import otel_agentdiag as agentdiag
from otel_agentdiag.cli import cli
from otel_agentdiag.serve import ServeSettings, create_app

UNICODE_SERVICE = "сервис-données-🚀"
UNICODE_AGENT = "unicode_agent"


def run_cli(*args: str | Path) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def demo_store(folder: Path, *, capture_content: bool = False) -> Path:
    """A store ``agentdiag demo`` wrote (one run, a recovered tool error)."""
    path = folder / "demo" / "traces.db"
    run_cli("demo", "--store", path, *(["--capture-content"] if capture_content else []))
    return path


def agent_store(path: Path, *, service: str = UNICODE_SERVICE, tools: int = 3, runs: int = 1) -> Path:
    """A store written through ``configure()`` and the manual wrappers: ``runs`` runs of agent
    :data:`UNICODE_AGENT` under ``service``, each with one LLM call and ``tools`` tool calls (the second fails)."""
    agentdiag.register_names(tools=["lookup"], agents=[UNICODE_AGENT])
    with agentdiag.configure(store=path, service_name=service, set_global=False):
        for run in range(runs):
            with agentdiag.agent_run(UNICODE_AGENT, conversation_id=f"SENTINEL-conv-{run}", user_id="SENTINEL-user"):
                with agentdiag.iteration(0):
                    with agentdiag.llm_call(provider="fake", model="fake-1") as call:
                        call.record_response(finish_reasons=["tool_calls"], input_tokens=10, output_tokens=3)
                    for n in range(tools):
                        try:
                            with agentdiag.tool_call("lookup", call_id=f"SENTINEL-call-{n}"):
                                if n == 1:
                                    raise ValueError("SENTINEL-failure")
                        except ValueError:
                            pass
    return path


def big_trace_store(path: Path) -> Path:
    """One run of agent ``big-agent`` (service ``big``): 100 iterations of 99 tool calls, 10,001 spans.
    Set ``OTEL_BSP_MAX_QUEUE_SIZE`` to 20000 first, so that the whole run is queued and none dropped. The
    default retention keeps 10,000 spans a session (it would prune the run's root, counted): room for all."""
    from otel_agentdiag.storage import RetentionLimits

    agentdiag.register_names(tools=["lookup"], agents=["big-agent"])
    retention = RetentionLimits(max_session_spans=20_000)
    with agentdiag.configure(store=path, service_name="big", set_global=False, retention=retention):
        with agentdiag.agent_run("big-agent"):
            for n in range(100):
                with agentdiag.iteration(n):
                    for _ in range(99):
                        with agentdiag.tool_call("lookup"):
                            pass
    return path


def bearer(token: str | None) -> dict[str, str]:
    """The header an API client sends with ``token`` (none for a server without one)."""
    return {} if token is None else {"authorization": f"Bearer {token}"}


@contextmanager
def client(store: Path, **settings: Any) -> Iterator[TestClient]:
    """The real application in process; requests carry the Host header of its bound address and its token as a
    bearer header (``test_client.token``: the token, None with ``insecure_no_token``)."""
    config = ServeSettings(store_path=store, **settings)
    host = f"[{config.host}]" if ":" in config.host else config.host
    app = create_app(config)
    with TestClient(app, base_url=f"http://{host}:{config.port}", headers=bearer(config.token)) as test_client:
        test_client.token = config.token  # type: ignore[attr-defined]
        yield test_client


def export_jaeger(store: Path, out: Path) -> dict[str, Any]:
    run_cli("export", "--store", store, "--format", "jaeger-json", "--out", out)
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def export_otlp(store: Path, out: Path) -> list[dict[str, Any]]:
    run_cli("export", "--store", store, "--format", "otlp-json", "--out", out)
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def only_trace_id(store: Path) -> str:
    from otel_agentdiag.storage.reading import ReadOnlyStore

    with ReadOnlyStore(store) as reader:
        traces = reader.list_traces()
    assert len(traces) == 1
    return traces[0].trace_id


class Served(NamedTuple):
    """A running ``agentdiag serve``: its base URL (no slash at the end), its token (from the URL it printed),
    the line it printed, and what it wrote to stdout and stderr (filled in when it has stopped)."""

    url: str
    token: str | None
    line: str
    output: list[str]

    @property
    def headers(self) -> dict[str, str]:
        """``Authorization: Bearer <token>``: what an API client sends."""
        return bearer(self.token)


def url_token(line: str) -> tuple[str, str | None]:
    """The base URL and the token of the URL line ``agentdiag serve`` prints (None: it has none)."""
    from urllib.parse import parse_qs, urlsplit

    printed = urlsplit(line.split(" ")[2])
    tokens = parse_qs(printed.query).get("token", [])
    assert len(tokens) <= 1, line
    return f"{printed.scheme}://{printed.netloc}", tokens[0] if tokens else None


@contextmanager
def served(store: Path, *args: str) -> Iterator[Served]:
    """A real ``agentdiag serve`` subprocess on a free loopback port (with ``args``), until the block ends
    (Ctrl-C)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "otel_agentdiag", "serve", "--store", str(store), "--port", "0", *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as process:
        output: list[str] = []
        try:
            assert process.stdout is not None
            line = process.stdout.readline().strip()  # the URL line, once the socket listens
            assert line.startswith("agentdiag serve: http://"), line
            output.append(line + "\n")
            yield Served(*url_token(line), line, output)
        finally:
            process.send_signal(signal.SIGINT)
            try:
                out, err = process.communicate(timeout=20)
                output += [out, err]
            finally:
                if process.poll() is None:
                    process.kill()
