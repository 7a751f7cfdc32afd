"""``python -m benchmarks --quick`` runs every benchmark to the end (CI runs it here).

Only that it *runs* is tested: every benchmark completes without an error and reports its goals with finite
values. Whether a goal is met is a measurement on a shared machine, reported in the JSON and the README,
never asserted.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = {
    "pipeline",
    "redaction_vs_logfire",
    "throughput",
    "instrumentation_overhead",
    "memory",
    "read_path",
    "startup",
    "push_throughput",
    "serve",
    "metrics",
    "disabled",
}


@pytest.mark.benchmarks
def test_the_quick_benchmark_run_completes_and_reports_every_goal(tmp_path: Path) -> None:
    output = tmp_path / "latest.json"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]
    report = json.loads(output.read_text())
    assert report["errors"] == {}
    assert set(report["benchmarks"]) == EXPECTED
    assert report["quick"] is True
    by_benchmark: dict[str, list[dict]] = {}
    for goal in report["goals"]:
        by_benchmark.setdefault(goal["benchmark"], []).append(goal)
        assert {"id", "what", "value", "target", "op", "met"} <= set(goal)
        assert math.isfinite(goal["value"]) and goal["op"] in ("<=", ">=")
        assert goal["met"] == (
            goal["value"] <= goal["target"] if goal["op"] == "<=" else goal["value"] >= goal["target"]
        )
    assert set(by_benchmark) == EXPECTED  # every benchmark reports at least one goal
    ids = {goal["id"] for goal in report["goals"]}
    assert {
        "pipeline_local_span_caller_cpu",
        "disabled_vs_unconfigured_caller_cpu",
        "pipeline_otlp_iteration_caller_cpu",
        "redaction_vs_logfire",
        "store_throughput_vs_raw",
        "memory_growth_stalled_mib",
        "drops_counted",
        "read_show_1m_vs_1k",
        "read_status_1m_vs_1k",
        "instrumentation_chat_vs_openinference",
        "startup_import_vs_sdk",
        "startup_quickstart_import_vs_sdk",
        "startup_version_vs_python",
        "startup_help_vs_python",
        "startup_show_vs_python",
        "pipeline_local_span_all_cpu",
        "pipeline_local_iteration_all_cpu",
        "pipeline_local_foreign_all_cpu",
        "pipeline_local_foreign_caller_cpu",
        "pipeline_local_vs_logfire_all_cpu",
        "memory_growth_sessions_ratio",
        "read_sessions_1m_vs_1k",
        "read_receipt_store_1m_vs_1k",
        "read_receipt_session_1m_vs_1k",
        "read_export_session_1m_vs_1k",
        "read_prune_1m_vs_1k",
        "read_clear_1m_vs_1k",
        "push_spans_per_s",
        "export_otlp_json_spans_per_s",
        "push_vs_sdk_encode",
        "serve_search_1m_vs_1k",
        "serve_trace_1m_vs_1k",
        "serve_trace_v3_1m_vs_1k",
        "serve_trace_rps_vs_direct",
        "serve_start_seconds",
    } <= ids
    # The goal table is printed for a reader of the CI log.
    assert "verdict" in completed.stdout and "results:" in completed.stdout
