"""Restart the real Collector in the middle of a session: nothing is lost uncounted.

One ``configure()`` pipeline, three demo runs: the first with the Collector up; the Collector is then stopped
(SIGTERM: it drains what it took to Jaeger and exits); the second run happens while it is down; it is started
again on the same addresses; the third run. Jaeger must then hold the first and third runs whole, and the
OTLP branch's accounting (``diag.stats()``, the counts the receipt is built from) must name every span of the
second run as dropped with its cause, ``export_failure``: observed = accepted + dropped, and accepted is exactly
what reached Jaeger. This test runs its own Collector so the session's stays up for the other tests.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from backend_processes import Binaries, Collector, Jaeger, poll
from otlp_grpc_sink import OTLPGrpcSink
from trace_reading import read_trace

pytestmark = pytest.mark.backends

DEMO_SPANS = 12


@pytest.fixture
def own_collector(binaries: Binaries, jaeger: Jaeger, tempo_sink: OTLPGrpcSink, tmp_path: Path) -> Iterator[Collector]:
    running = Collector(
        binaries.collector,
        tmp_path / "collector",
        jaeger=jaeger.otlp_grpc,
        tempo=tempo_sink.endpoint,
        hash_key=secrets.token_hex(32),
    )
    with running:
        yield running


def totals(diag: Any) -> dict[str, Any]:
    found: dict[str, Any] = diag.stats()["destinations"]["otlp"]["pipeline"]["totals"]
    return found


def test_a_collector_restart_loses_nothing_uncounted(
    own_collector: Collector, jaeger: Jaeger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None
) -> None:
    import otel_agentdiag as agentdiag
    from otel_agentdiag.demo import run_demo_agent

    # The exporter gives up on a Collector that is down within 1 s (retries included), and the pipeline retries
    # a failed batch a bounded number of times before it counts it as export_failure.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    with agentdiag.configure(
        service_name="agentdiag-backends-restart",
        store=tmp_path / "traces.db",
        otlp_endpoint=own_collector.otlp_http,
        hash_key=secrets.token_hex(32).encode(),
        otlp_hash_key=secrets.token_hex(32).encode(),
        set_global=False,
    ) as diag:
        first = run_demo_agent()
        assert diag.force_flush()
        assert totals(diag)["accepted"] == DEMO_SPANS

        assert own_collector.stop() == 0, own_collector.log_tail()  # a clean, draining shutdown
        second = run_demo_agent()
        diag.force_flush()  # returns once the batch has its fate (or at its timeout)
        down = poll("the run in between counted", lambda: t if (t := totals(diag))["pending"] == 0 else None, 60)

        own_collector.start()
        third = run_demo_agent()
        assert diag.force_flush()
        after = totals(diag)

    # The runs before and after the restart arrived whole; the one in between, while the Collector was down,
    # did not arrive at all (the exporter's retries gave up before it came back).
    for run in (first, third):
        _, spans = read_trace(jaeger, run.trace_id, DEMO_SPANS, "v3")
        assert len(spans) == DEMO_SPANS
    status, answer = jaeger.get_json(f"/api/v3/traces/{second.trace_id}")
    assert status == 404 or not (answer or {}).get("result", {}).get("resourceSpans"), "the Collector was down"

    # Every span of the run in between is counted with its cause, already before the restart; none is unaccounted.
    assert down["dropped"] == {"export_failure": DEMO_SPANS}, down
    assert (after["observed"], after["accepted"], after["pending"]) == (3 * DEMO_SPANS, 2 * DEMO_SPANS, 0)
    assert after["dropped"] == {"export_failure": DEMO_SPANS}
    assert after["observed"] == after["accepted"] + sum(after["rejected"].values()) + sum(after["dropped"].values())
    assert own_collector.starts == 2
