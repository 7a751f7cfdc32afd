"""Hermetic tests: no AGENTDIAG_* or OTLP settings leak in from the environment that runs them."""

from __future__ import annotations

import pytest

_ENVIRONMENT = (
    "AGENTDIAG_ENABLED",
    "AGENTDIAG_STORE",
    "AGENTDIAG_HASH_KEY",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)


@pytest.fixture(autouse=True)
def _hermetic_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
