"""The real back ends as child processes on 127.0.0.1: the Collector, Jaeger and Prometheus this project builds.

The binaries come from ``collector-config/build_backends.py`` (cached by version). Each process gets free
loopback ports, a work folder holding its config and its console log, and is ready when its own HTTP endpoint
answers (polled with a deadline; never a fixed sleep). ``stop()`` sends SIGTERM to that one PID and waits, so the
Collector drains its queues as it would in production.

- :class:`Collector` runs ``collector-config/otelcol.yaml`` **unchanged**, merged with a second ``--config`` file
  that only re-addresses it (its listeners and health check on free loopback ports, its exporters at the local
  Jaeger and Tempo stand-in instead of the compose network's ``jaeger:4317`` and ``tempo:4317``, its own metrics
  off so two Collectors never share port 8888).
- :class:`Jaeger` runs Jaeger v2 (``cmd/jaeger``) with in-memory storage, OTLP/gRPC in, query API (v1 and v3) out.
- :class:`Prometheus` runs with ``collector-config/prometheus.yaml`` as shipped but for the scrape target (the
  Collector's exporter here, not ``collector:8889``) and a 1 s scrape interval, and with the flags
  docker/docker-compose.yml gives it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
COLLECTOR_CONFIG = ROOT / "collector-config"
OTELCOL_YAML = COLLECTOR_CONFIG / "otelcol.yaml"
PROMETHEUS_YAML = COLLECTOR_CONFIG / "prometheus.yaml"
COMPOSE = ROOT / "docker" / "docker-compose.yml"

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Binaries:
    """The three binaries, each looked up (or built) on first use, so a test needs only the ones it runs."""

    _collector: Callable[[], Path]
    _jaeger: Callable[[], Path]
    _prometheus: Callable[[], Path]

    @property
    def collector(self) -> Path:
        return self._collector()

    @property
    def jaeger(self) -> Path:
        return self._jaeger()

    @property
    def prometheus(self) -> Path:
        return self._prometheus()


def build_backends() -> ModuleType:
    """``collector-config/build_backends.py`` as a module (it is a script, not part of the package)."""
    name = "agentdiag_build_backends"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, COLLECTOR_CONFIG / "build_backends.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the OS's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def http_get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    """GET ``url``: (status, body); an HTTP error status is returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        with contextlib.closing(error):
            return error.code, error.read()


def poll(what: str, probe: Callable[[], Any], timeout: float, alive: Callable[[], str | None] | None = None) -> Any:
    """Call ``probe`` until it returns something truthy, for at most ``timeout`` seconds; fail with ``what``.

    ``alive`` returns why the process it watches is gone (then polling stops at once), or None."""
    deadline = time.monotonic() + timeout
    last: Any = None
    delay = 0.05
    while True:
        try:
            result = probe()
        except (OSError, ValueError, KeyError) as error:  # refused, reset, not JSON yet
            result, last = None, repr(error)
        if result:
            return result
        gone = alive() if alive is not None else None
        if gone is not None:
            raise AssertionError(f"{what}: {gone}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s (last: {last if last is not None else result})")
        time.sleep(delay)  # the interval between two probes, not a wait for an event
        delay = min(delay * 2, 1.0)


class BackendProcess:
    """One child process with its work folder and console log; stopped by its own PID."""

    name = "backend"

    def __init__(self, binary: Path, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / "console.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "AGENTDIAG_"))}

    def ready(self) -> bool:
        raise NotImplementedError

    def start(self) -> None:
        """Start the process and return once it answers (fails with its log's tail otherwise)."""
        assert self.process is None or self.process.poll() is not None, f"{self.name} is running already"
        self.starts += 1
        with self.log.open("ab") as out:
            out.write(f"--- start {self.starts}: {' '.join(self.command())}\n".encode())
            out.flush()
            self.process = subprocess.Popen(
                self.command(),
                cwd=self.workdir,
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            poll(f"{self.name} did not become ready", self.ready, START_TIMEOUT_S, self._gone)
        except AssertionError as error:
            self.stop()
            raise AssertionError(f"{error}\n--- {self.log} (tail):\n{self.log_tail()}") from None

    def _gone(self) -> str | None:
        if self.process is None:
            return "not started"
        code = self.process.poll()
        return None if code is None else f"exited with code {code}; log tail:\n{self.log_tail()}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> int | None:
        """SIGTERM, then wait for a clean exit (SIGKILL only past the deadline); the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        return self.process.returncode

    def log_tail(self, size: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def __enter__(self) -> BackendProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Jaeger(BackendProcess):
    """Jaeger v2 with in-memory storage: OTLP/gRPC in on ``otlp_grpc``; the query API at ``api``."""

    name = "jaeger"

    def __init__(self, binary: Path, workdir: Path) -> None:
        super().__init__(binary, workdir)
        self.otlp_grpc_port = free_port()
        self.query_port = free_port()
        self.query_grpc_port = free_port()
        config = {
            "service": {
                "extensions": ["jaeger_storage", "jaeger_query"],
                "pipelines": {
                    "traces": {
                        "receivers": ["otlp"],
                        "processors": ["batch"],
                        "exporters": ["jaeger_storage_exporter"],
                    }
                },
                "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "info"}},
            },
            "extensions": {
                "jaeger_query": {
                    "storage": {"traces": "memstore"},
                    "http": {"endpoint": f"127.0.0.1:{self.query_port}"},
                    "grpc": {"endpoint": f"127.0.0.1:{self.query_grpc_port}"},
                    # On by default: Jaeger would send its own traces to 127.0.0.1:4317 (a Collector, maybe).
                    "enable_tracing": False,
                },
                "jaeger_storage": {"backends": {"memstore": {"memory": {"max_traces": 100_000}}}},
            },
            "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": f"127.0.0.1:{self.otlp_grpc_port}"}}}},
            "processors": {"batch": {"timeout": "200ms"}},
            "exporters": {"jaeger_storage_exporter": {"trace_storage": "memstore"}},
        }
        self.config = workdir / "jaeger.yaml"
        self.config.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

    @property
    def otlp_grpc(self) -> str:
        return f"127.0.0.1:{self.otlp_grpc_port}"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.query_port}"

    def command(self) -> list[str]:
        return [str(self.binary), f"--config={self.config}"]

    def ready(self) -> bool:
        status, _ = http_get(f"{self.api}/api/v3/services", timeout=2)
        return status == 200

    def get_json(self, path: str) -> tuple[int, Any]:
        status, body = http_get(f"{self.api}{path}")
        return status, json.loads(body) if body.strip() else None


class Collector(BackendProcess):
    """The Collector running ``collector-config/otelcol.yaml`` unchanged, re-addressed by a second config file.

    Ports are chosen once, so :meth:`start` after :meth:`stop` brings it back on the same addresses."""

    name = "collector"

    def __init__(self, binary: Path, workdir: Path, *, jaeger: str, tempo: str, hash_key: str) -> None:
        super().__init__(binary, workdir)
        self.hash_key = hash_key
        self.grpc_port = free_port()
        self.http_port = free_port()
        self.health_port = free_port()
        self.metrics_port = free_port()
        addresses = {
            "extensions": {"health_check": {"endpoint": f"127.0.0.1:{self.health_port}"}},
            "receivers": {
                "otlp": {
                    "protocols": {
                        "grpc": {"endpoint": f"127.0.0.1:{self.grpc_port}"},
                        "http": {"endpoint": f"127.0.0.1:{self.http_port}"},
                    }
                }
            },
            "exporters": {
                "otlp_grpc/jaeger": {"endpoint": jaeger},
                "otlp_grpc/tempo": {"endpoint": tempo},
                "prometheus": {"endpoint": f"127.0.0.1:{self.metrics_port}"},
            },
            # The Collector's own metrics would listen on localhost:8888: one per machine. Not part of the pipeline.
            "service": {"telemetry": {"metrics": {"level": "none"}}},
        }
        self.addresses = workdir / "addresses.yaml"
        self.addresses.write_text(yaml.safe_dump(addresses, sort_keys=False), encoding="utf-8")

    @property
    def otlp_http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def metrics_target(self) -> str:
        return f"127.0.0.1:{self.metrics_port}"

    def command(self) -> list[str]:
        return [str(self.binary), f"--config=file:{OTELCOL_YAML}", f"--config=file:{self.addresses}"]

    def environment(self) -> dict[str, str]:
        env = super().environment()
        env["AGENTDIAG_COLLECTOR_HASH_KEY"] = self.hash_key
        return env

    def ready(self) -> bool:
        status, _ = http_get(f"http://127.0.0.1:{self.health_port}/", timeout=2)
        return status == 200


class Prometheus(BackendProcess):
    """Prometheus with ``collector-config/prometheus.yaml`` (target and interval re-set) and compose's flags."""

    name = "prometheus"

    def __init__(self, binary: Path, workdir: Path, *, target: str) -> None:
        super().__init__(binary, workdir)
        self.port = free_port()
        config = yaml.safe_load(PROMETHEUS_YAML.read_text(encoding="utf-8"))
        config["global"]["scrape_interval"] = "1s"
        (job,) = config["scrape_configs"]
        job["scrape_interval"] = "1s"
        job["static_configs"] = [{"targets": [target]}]
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]["prometheus"]["command"]
        flags = [flag for flag in compose if flag.startswith("--enable-feature=")]
        return [
            str(self.binary),
            f"--config.file={self.config}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            *flags,
        ]

    def ready(self) -> bool:
        status, _ = http_get(f"{self.api}/-/ready", timeout=2)
        return status == 200

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant query's result vector (fails on an error answer)."""
        from urllib.parse import urlencode

        status, body = http_get(f"{self.api}/api/v1/query?{urlencode({'query': promql})}")
        answer = json.loads(body)
        assert status == 200 and answer["status"] == "success", (promql, answer)
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result
