"""Fixtures shared by the end-to-end tests: a clean environment and a loopback OTLP receiver."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from otlp_receiver import OTLPReceiver


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OTEL_*/AGENTDIAG_* setting from the surrounding shell may steer a test that asks for this."""
    for name in list(os.environ):
        if name.startswith(("OTEL_", "AGENTDIAG_")):
            monkeypatch.delenv(name)


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    """A real OTLP/HTTP receiver on 127.0.0.1; the test fails if it saw a request it could not decode."""
    with OTLPReceiver() as running:
        yield running
        assert running.errors == []
