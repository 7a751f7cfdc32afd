"""Shared set-up for the redaction policy and property tests.

``tests/conftest.py`` clears a fixed list of variables; the policy variables (``AGENTDIAG_LOCAL_POLICY``,
``AGENTDIAG_OTLP_POLICY``, ``AGENTDIAG_OTLP_HASH_KEY``) and every other ``AGENTDIAG_*``/``OTEL_*`` setting
are cleared here as well, so no shell setting can steer which policy or key a test gets.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_agentdiag_or_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("AGENTDIAG_", "OTEL_")):
            monkeypatch.delenv(name)
