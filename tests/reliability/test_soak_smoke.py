"""``python -m benchmarks.soak`` for a few seconds, so the 30-minute soak does not rot between its runs.

The soak itself (benchmarks/soak.py, README "Soak") is a benchmark, not a CI test. Here it runs for about ten
seconds with a small load and a collector that flaps every few seconds, in a real subprocess, and the test
checks what must hold whatever the timing: it exits 0 without a traceback, its JSON report has every
documented key, every check it made passed, the accounting identity holds per destination and in the store
(re-read here through the library, not taken from the report), and the receipts cover the sessions. Nothing
about speed, drops or RSS is asserted: those are measurements.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_agentdiag.storage import SpanStore

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # benchmarks/ is a folder of the repository, not an installed package

from benchmarks.soak import rss_report, slope_per_minute  # noqa: E402

REPORT_KEYS = {
    "benchmark",
    "config",
    "load_seconds",
    "spans_ended",
    "runs",
    "sessions_started",
    "tool_errors",
    "spans_per_second",
    "rss",
    "destinations",
    "content",
    "collector",
    "store",
    "log_records",
    "checks",
    "checks_ok",
    "samples",
    "python",
    "sqlite",
    "otel_agentdiag",
    "machine",
}
RSS_KEYS = {
    "baseline_mib",
    "final_mib",
    "max_mib",
    "warmup_s",
    "samples_after_warmup",
    "slope_mib_per_min",
    "growth_after_warmup_mib",
    "thresholds",
    "rss_flat",
}
DESTINATION_KEYS = {
    "queue_depth",
    "queue_bytes",
    "in_flight",
    "peak_queue",
    "observed",
    "accepted",
    "rejected",
    "dropped",
    "flush_failures",
    "ledger_sessions",
    "evicted_sessions",
    "unpersisted_drop_sessions",
}
SAMPLE_KEYS = {
    "t",
    "rss_mib",
    "threads",
    "fds",
    "spans_ended",
    "collector_up",
    "collector_spans",
    "destinations",
    "store",
}
CHECKS = {
    "workers_stopped",
    "final_flush",
    "local_observed_every_span",
    "local_identity",
    "otlp_observed_every_span",
    "otlp_identity",
    "collector_received_what_otlp_accepted",
    "no_worker_exception",
    "integrity_check",
    "store_rows_balance",
    "store_one_observer",
    "store_totals_equal_pipeline",
    "store_rows_accounted",
    "retention_bounds",
    "no_orphan_content",
    "receipts_ledger_consistent",
}


@pytest.fixture(scope="module")
def soak(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    folder = tmp_path_factory.mktemp("soak")
    output = folder / "soak.json"
    store_dir = folder / "store"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.soak",
            *("--minutes", "0.17", "--sample-seconds", "1", "--threads", "4", "--tasks", "20"),
            *("--up-seconds", "3", "--down-seconds", "2", "--otlp-timeout", "1"),
            *("--store-dir", str(store_dir), "--output", str(output)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    report = json.loads(output.read_text()) if output.exists() else {}
    return completed, report, store_dir / "traces.db"


def test_the_soak_runs_to_the_end_and_writes_its_report(soak: tuple[Any, dict[str, Any], Path]) -> None:
    completed, report, _ = soak
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]
    assert "Traceback" not in completed.stdout + completed.stderr
    assert "rss_flat=" in completed.stdout and "results:" in completed.stdout
    assert set(report) == REPORT_KEYS
    assert set(report["rss"]) == RSS_KEYS and isinstance(report["rss"]["rss_flat"], bool)
    assert set(report["destinations"]) == {"local", "otlp"}
    for figures in report["destinations"].values():
        assert set(figures) == DESTINATION_KEYS
    assert len(report["samples"]) >= 3
    for sample in report["samples"]:
        assert set(sample) == SAMPLE_KEYS
        assert set(sample["destinations"]) == {"local", "otlp"}
    assert report["collector"]["transitions"] >= 1  # it went down at least once (first down within 4.5 s)


def test_every_check_passed_and_the_identity_holds(soak: tuple[Any, dict[str, Any], Path]) -> None:
    _, report, _ = soak
    assert {c["name"] for c in report["checks"]} == CHECKS
    assert [c for c in report["checks"] if not c["ok"]] == []
    assert report["checks_ok"] is True
    ended = report["spans_ended"]
    assert ended > 0
    for figures in report["destinations"].values():
        assert figures["observed"] == ended
        assert figures["observed"] == figures["accepted"] + figures["rejected"] + sum(figures["dropped"].values())
    assert report["content"]["captured"] > 0


def test_the_store_it_leaves_balances_when_read_back(soak: tuple[Any, dict[str, Any], Path]) -> None:
    _, report, path = soak
    local = report["destinations"]["local"]
    store = SpanStore(path, create=False)
    try:
        rows = store.session_stats()
        assert rows
        for row in rows:
            assert row.observed == row.accepted + sum(row.rejected.values()) + sum(row.dropped.values()), row
        assert sum(row.observed for row in rows) == local["observed"] == report["spans_ended"]
        assert sum(row.accepted for row in rows) == local["accepted"]
        assert store.store_summary().pruned_spans == report["store"]["pruned_spans"]
    finally:
        store.close()
    receipts = report["store"]["receipts"]
    assert receipts["sessions"] == sum(receipts["by_status"].values()) == report["store"]["sessions_with_stats"]
    assert receipts["store"]["status"] in {"valid", "degraded"}


def test_the_rss_figures_are_least_squares_over_the_samples_after_warm_up() -> None:
    assert slope_per_minute([(0.0, 10.0), (30.0, 11.0), (60.0, 12.0)]) == pytest.approx(2.0)
    assert slope_per_minute([(0.0, 10.0)]) is None
    samples = [{"t": float(t), "rss_mib": 50.0 + (10.0 if t < 60 else 0.01 * (t - 60))} for t in range(0, 121, 5)]
    found = rss_report(samples, warmup_s=60.0)
    assert found["samples_after_warmup"] == 13
    assert found["slope_mib_per_min"] == pytest.approx(0.6)
    assert found["growth_after_warmup_mib"] == pytest.approx(0.6)
    assert found["rss_flat"] is False  # 0.6 MiB/min is over the 0.5 limit, although it grew only 0.6 MiB
    flat = rss_report([{"t": float(t), "rss_mib": 80.0} for t in range(0, 61, 5)], warmup_s=30.0)
    assert flat["slope_mib_per_min"] == 0.0 and flat["rss_flat"] is True
