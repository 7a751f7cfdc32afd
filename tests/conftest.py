"""Hermetic tests: no AGENTDIAG_*, OTEL_*, OPENAI_* or ANTHROPIC_* settings leak in from the environment."""

from __future__ import annotations

import os

import pytest

_PREFIXES = ("AGENTDIAG_", "OTEL_", "OPENAI_", "ANTHROPIC_")


@pytest.fixture(autouse=True)
def _hermetic_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(_PREFIXES):
            monkeypatch.delenv(name, raising=False)
