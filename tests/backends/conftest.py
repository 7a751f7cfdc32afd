"""Fixtures for the real back ends: the binaries (built once, cached by version) and the running processes.

Without Go and without cached binaries every test here skips with one reason. With Go, a missing binary is
built on first use (``.ci/run`` builds them before the tests; a warm cache builds nothing).

One Jaeger, one Tempo stand-in (an OTLP/gRPC receiver) and one Collector serve the whole session; the restart
test starts its own Collector so that stopping it does not disturb the others.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from backend_processes import Binaries, Collector, Jaeger, Prometheus, build_backends
from otlp_grpc_sink import OTLPGrpcSink


def _binary(name: str) -> Path:
    """The cached binary, built now where Go is present; skips with one reason where neither is there."""
    builder = build_backends()
    found: Path | None = builder.cached(name)
    if found is not None:
        return found
    if builder.go_command() is None:
        pytest.skip(
            "Go is not installed and the back ends are not in the cache "
            f"({builder.cache_root()}): the Collector, Jaeger and Prometheus are built with Go "
            "(python collector-config/build_backends.py)"
        )
    built: Path = builder.ensure(name)
    return built


@pytest.fixture(scope="session")
def binaries() -> Binaries:
    """The three binaries, each found (or built) only when a test first asks for it."""
    return Binaries(lambda: _binary("collector"), lambda: _binary("jaeger"), lambda: _binary("prometheus"))


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OTEL_*/AGENTDIAG_* setting from the surrounding shell may steer a test that asks for this."""
    for name in list(os.environ):
        if name.startswith(("OTEL_", "AGENTDIAG_")):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def jaeger(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    with Jaeger(binaries.jaeger, tmp_path_factory.mktemp("jaeger")) as running:
        assert isinstance(running, Jaeger)
        yield running


@pytest.fixture(scope="session")
def tempo_sink() -> Iterator[OTLPGrpcSink]:
    with OTLPGrpcSink() as sink:
        yield sink


@pytest.fixture(scope="session")
def collector_hash_key() -> str:
    return secrets.token_hex(32)


@pytest.fixture(scope="session")
def collector(
    binaries: Binaries,
    jaeger: Jaeger,
    tempo_sink: OTLPGrpcSink,
    collector_hash_key: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Collector]:
    running = Collector(
        binaries.collector,
        tmp_path_factory.mktemp("collector"),
        jaeger=jaeger.otlp_grpc,
        tempo=tempo_sink.endpoint,
        hash_key=collector_hash_key,
    )
    with running:
        yield running


@pytest.fixture(scope="session")
def prometheus(
    binaries: Binaries, collector: Collector, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    with Prometheus(binaries.prometheus, tmp_path_factory.mktemp("prometheus"), target=collector.metrics_target) as p:
        assert isinstance(p, Prometheus)
        yield p
