"""The SDK exporter's own lines about an export our worker made are dropped (the worker counts and says it); the
same lines from any other thread, or with AGENTDIAG_DEBUG=1, pass."""

from __future__ import annotations

import logging
import threading

import pytest

from otel_agentdiag.exporters.otlp import WORKER_THREAD, quiet_worker_attempts

SDK_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


def _log_from(thread_name: str, caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.clear()

    def emit() -> None:
        logging.getLogger(SDK_LOGGER).error("Failed to export span batch")

    thread = threading.Thread(target=emit, name=thread_name)
    thread.start()
    thread.join()
    return [r.getMessage() for r in caplog.records if r.name == SDK_LOGGER]


def test_only_the_workers_lines_are_dropped(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTDIAG_DEBUG", raising=False)
    quiet_worker_attempts()
    quiet_worker_attempts()  # idempotent
    assert sum(1 for f in logging.getLogger(SDK_LOGGER).filters if type(f).__name__ == "_CountedByTheWorker") == 1
    assert _log_from(WORKER_THREAD, caplog) == []
    assert _log_from("someone-else", caplog) == ["Failed to export span batch"]
    monkeypatch.setenv("AGENTDIAG_DEBUG", "1")
    assert _log_from(WORKER_THREAD, caplog) == ["Failed to export span batch"]
