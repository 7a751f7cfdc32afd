"""The whole-store receipt and ``agentdiag sessions`` from figures kept in the write transaction (issue 22).

Parity is the contract: for stores written by the real pipeline (``configure()`` and scripted agents, real
faults), the receipt read from the figures equals the one every session's rows give (``store_receipt_from_rows``,
the reference path that judges each session with :func:`~otel_agentdiag.diagnostics.verdict.judge` and
combines them), field for field and in JSON; the overview ``agentdiag sessions`` lists equals the reference one;
and the figures the writer kept batch by batch equal a rebuild from the rows.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry import context, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from scripted_agents import AGENT, BlockingExporter, configured, digest, hand_pipeline, llm_step, react_agent, tool_step

import otel_agentdiag as agentdiag
from otel_agentdiag.cli import cli
from otel_agentdiag.diagnostics.receipt import (
    overview_from_rows,
    store_overview,
    store_receipt,
    store_receipt_from_rows,
)
from otel_agentdiag.redaction.policy import LOCAL, Callback
from otel_agentdiag.storage import RetentionLimits, SpanStore, receipt_figures, receipt_schema
from otel_agentdiag.storage.connection import StoreNeedsUpgrade
from otel_agentdiag.storage.receipt_rules import _add_numbers, _missing_below, merge_range

HERE = Path(__file__).resolve().parent
PLAN = [["search"], ["fetch", "convert"]]
FIGURE_TABLES = {
    "receipt_figures": "SELECT * FROM receipt_figures ORDER BY session, observer",
    "receipt_missing": "SELECT * FROM receipt_missing ORDER BY trace_id, parent_span_id, session",
    "receipt_sessions": "SELECT * FROM receipt_sessions ORDER BY session",
    "receipt_totals": "SELECT * FROM receipt_totals WHERE value <> 0 ORDER BY key",
}


def _tables(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        return {name: conn.execute(sql).fetchall() for name, sql in FIGURE_TABLES.items()}
    finally:
        conn.close()


def _rebuilt(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The figures a rebuild from the rows gives, on a copy (the store itself is left as it is)."""
    copy = path.with_name(path.name + ".rebuilt")
    source = sqlite3.connect(path)
    target = sqlite3.connect(copy, isolation_level=None)
    source.backup(target)
    source.close()
    receipt_figures.rebuild(target)
    target.close()
    try:
        return _tables(copy)
    finally:
        copy.unlink()


def _cli_json(*args: str | Path) -> Any:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def assert_figures_agree(path: Path, *, vouch: bool = True) -> dict[str, Any]:
    """The figure-based receipt and overview equal the row-based ones; with ``vouch``, the figures are what was
    read (no fallback) and equal a rebuild. Returns the store receipt's JSON."""
    with SpanStore(path, create=False, read_only=True) as store:
        vouched = store.receipt_figures() is not None
        whole = store_receipt(store)
        reference = store_receipt_from_rows(store)
        overview = store_overview(store)
        listing = overview_from_rows(store)
        paged = store_overview(store, limit=2)
        paged_reference = overview_from_rows(store, limit=2)
    assert vouched or not vouch
    assert whole == reference
    assert whole.to_json() == reference.to_json()
    assert overview == listing
    assert overview.receipt() == whole
    assert paged == paged_reference
    if vouch:
        assert _tables(path) == _rebuilt(path)
    # The CLI prints what the library reads.
    assert _cli_json("receipt", "--format", "json", "--store", path) == reference.to_json()
    listed = _cli_json("sessions", "--format", "json", "--store", path)
    assert [(row["session"], row["receipt_status"]) for row in listed] == [
        (summary.session, receipt.status) for summary, receipt in listing.sessions if summary is not None
    ]
    return whole.to_json()


# -- ranges -------------------------------------------------------------------------------------------------
def test_ranges_count_distinct_numbers_and_what_is_missing() -> None:
    ranges: list[list[int]] = []
    assert _add_numbers(ranges, [5, 3, 4, 9, 4, 0]) == 5  # 4 twice: one new
    assert ranges == [[0, 0], [3, 5], [9, 9]]
    assert _missing_below(ranges, 0, 10) == 5  # 1, 2, 6, 7, 8
    assert _missing_below(ranges, 3, 9) == 3  # 6, 7, 8
    assert _missing_below(ranges, 4, 4) == 0
    merge_range(ranges, 1, 2)
    assert ranges == [[0, 5], [9, 9]]
    merge_range(ranges, 6, 12)
    assert ranges == [[0, 12]]
    assert _add_numbers(ranges, [12, 13]) == 1 and ranges == [[0, 13]]


# -- stores written by the real pipeline -------------------------------------------------------------------
def test_clean_runs_are_judged_from_figures_without_an_unsettled_session(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        for i in range(6):
            react_agent(f"conv-{i}", PLAN)
    doc = assert_figures_agree(path)
    assert (doc["status"], doc["reasons"]) == ("valid", [])
    with SpanStore(path, create=False, read_only=True) as store:
        figures = store.receipt_figures()
    assert figures is not None and figures.unsettled == []  # every session settled: no row read for the receipt
    assert figures.totals["count:spans"] == doc["counts"]["spans"] > 0


def test_a_parent_still_open_leaves_its_session_to_its_rows_until_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path) as diag:
        react_agent("conv-done", PLAN)
        with agentdiag.agent_run(AGENT, conversation_id="conv-open"):
            with agentdiag.iteration(0):
                llm_step()
                tool_step("search")
            assert diag.force_flush()
            doc = assert_figures_agree(path)
            assert "unfinished_span" in doc["reasons"]
            with SpanStore(path, create=False, read_only=True) as store:
                figures = store.receipt_figures()
            assert figures is not None and figures.unsettled == [digest("conv-open")]
    doc = assert_figures_agree(path)
    assert (doc["status"], doc["reasons"]) == ("valid", [])
    with SpanStore(path, create=False, read_only=True) as store:
        figures = store.receipt_figures()
    assert figures is not None and figures.unsettled == []  # the parent arrived: settled


def test_a_remote_parent_is_ruled_out_by_the_numbering_and_the_session_settles(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    remote = SpanContext(
        trace_id=0x5B8AA5A2D2C872E8321CF37308D69DF2,
        span_id=0x051581BF3CB55C13,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    with configured(path):
        token = context.attach(trace.set_span_in_context(NonRecordingSpan(remote)))
        try:
            react_agent("conv-remote", PLAN)
        finally:
            context.detach(token)
        with agentdiag.iteration(0):  # outside any run and session, under no parent
            tool_step("search")
    doc = assert_figures_agree(path)
    assert (doc["status"], doc["reasons"]) == ("valid", [])
    with SpanStore(path, create=False, read_only=True) as store:
        figures = store.receipt_figures()
    assert figures is not None and figures.unsettled == []


def test_several_observers_and_retention_by_session_spans(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    for _ in range(2):
        with configured(path, retention=RetentionLimits(max_session_spans=7)):
            react_agent("conv-shared", [["search"], ["fetch"], ["convert"]])
            react_agent("conv-small", [["search"]])
    doc = assert_figures_agree(path)
    assert doc["counts"]["pruned_spans"] > 0 and len(doc["observers"]) == 2


def test_pruning_by_age_and_by_store_bytes_and_clearing(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        for i in range(4):
            react_agent(f"conv-{i}", PLAN)
        tool_step("search")  # outside any session
    with SpanStore(path, create=False) as store:
        first = store.list_sessions()[-1].session
        assert first is not None
        store.clear_session(first)
        total = store.store_summary().total_bytes
        store.retention = RetentionLimits(max_store_bytes=total // 2)
        assert store.prune().spans > 0
    assert_figures_agree(path)
    with SpanStore(path, create=False, retention=RetentionLimits(max_session_age_s=1.0)) as store:
        store.prune(now_ns=2**62)  # everything is old by then
        assert store.span_count() == 0
    doc = assert_figures_agree(path)
    assert doc["status"] == "invalid" and doc["counts"]["spans"] == 0


def test_a_session_cleared_mid_run_and_its_in_flight_spans(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    session = digest("conv-cleared")
    with configured(path) as diag:
        with agentdiag.agent_run(AGENT, conversation_id="conv-cleared"):
            with agentdiag.iteration(0):
                llm_step()
                tool_step("search")
            assert diag.force_flush()
            with SpanStore(path, create=False) as store:
                store.clear_session(session)
            assert_figures_agree(path)
            with agentdiag.iteration(1):
                llm_step("stop")
        react_agent("conv-other", PLAN)
    doc = assert_figures_agree(path)
    assert doc["counts"]["dropped_cleared"] == 1


@pytest.mark.parametrize("max_drop_sessions", [64, 1])
def test_queue_full_drops_with_and_without_an_overflow_row(tmp_path: Path, max_drop_sessions: int) -> None:
    path = tmp_path / "traces.db"
    exporter = BlockingExporter(path)
    with hand_pipeline(exporter, max_queue_spans=4, max_export_batch=1, max_drop_sessions=max_drop_sessions) as pipe:
        react_agent("conv-first", [["search"]])  # its first spans go to the blocked export
        assert exporter.entered.wait(30)
        for i in range(4):
            react_agent(f"conv-dropped-{i}", PLAN)  # the queue is full: dropped, counted
        exporter.release.set()
        assert pipe.force_flush()
        react_agent("conv-after", PLAN)
        assert pipe.force_flush()
    doc = assert_figures_agree(path)
    assert doc["counts"]["dropped_queue_full"] > 0 and "backpressure_drop" in doc["reasons"]
    with SpanStore(path, create=False, read_only=True) as store:
        overflow = [row for row in store.session_stats() if row.session == "agentdiag:overflow"]
    assert bool(overflow) == (max_drop_sessions == 1)


def _exploding(value: Any) -> Any:
    if value == "explode-model":
        raise RuntimeError("policy callback failed")
    return value


EXPLODING = LOCAL.derive(
    "local-exploding", allowed_keys={"gen_ai.response.model": Callback(_exploding, label="explodes")}
)


@pytest.mark.parametrize("on_error", ["tombstone", "drop"])
def test_redactor_failures(tmp_path: Path, on_error: str) -> None:
    path = tmp_path / "traces.db"
    policy = EXPLODING if on_error == "tombstone" else EXPLODING.derive("local-exploding-drop", on_error="drop")
    with configured(path, local_policy=policy):
        react_agent("conv-fine", PLAN)
        with agentdiag.agent_run(AGENT, conversation_id="conv-tomb"):
            with agentdiag.iteration(0):
                llm_step("stop", model="explode-model")
    doc = assert_figures_agree(path)
    assert doc["status"] == "quarantined" and "redactor_error" in doc["reasons"]


def test_imports_and_a_violation_are_judged_from_their_rows(tmp_path: Path) -> None:
    source, path = tmp_path / "source.db", tmp_path / "traces.db"
    with configured(source):
        react_agent("conv-exported", PLAN)
    with configured(path):
        react_agent("conv-local", PLAN)
    out = tmp_path / "export.jsonl"
    exporting = ["export", "--out", out, "--format", "otlp-json", "--store", source]
    for args in (exporting, ["ingest", out, "--store", path]):
        result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    doc = assert_figures_agree(path)
    assert doc["provenance"] == "mixed"
    with SpanStore(path, create=False) as store:
        store.record_violations("ingest", [(digest("conv-local"), "malformed_json", "line 1"), (None, "bad", "x")])
    doc = assert_figures_agree(path)
    assert "ingest_violation" in doc["reasons"] and doc["counts"]["ingest_violations"] == 2


def test_a_killed_writer_leaves_unfinished_spans(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        react_agent("conv-before", PLAN)
    with subprocess.Popen(
        [sys.executable, str(HERE / "scripted_agents.py"), str(path), "hang", "conv-killed"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "READY"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(60)
    doc = assert_figures_agree(path)
    assert doc["status"] == "degraded" and "unfinished_span" in doc["reasons"]


# -- rows written by other means ----------------------------------------------------------------------------
def test_rows_changed_behind_the_stores_back_are_judged_from_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        react_agent("conv-a", PLAN)
        react_agent("conv-b", PLAN)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE spans SET attributes = '[' WHERE rowid = (SELECT MIN(rowid) FROM spans)")
    conn.close()
    doc = assert_figures_agree(path, vouch=False)
    assert doc["counts"]["malformed_rows"] == 1
    with SpanStore(path, create=False, read_only=True) as store:
        assert store.receipt_figures() is None  # an UPDATE no transaction of ours settled: the rows decide
    with configured(path):
        react_agent("conv-c", PLAN)  # the writer's next transaction recomputes that session from its rows
    assert assert_figures_agree(path)["counts"]["malformed_rows"] == 1

    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "INSERT INTO spans (trace_id, span_id, name, kind, span_kind, start_ns, status, session, attributes,"
            " events, links) SELECT trace_id, 'ffffffffffffffff', name, kind, span_kind, start_ns, status, session,"
            " attributes, events, links FROM spans WHERE rowid = (SELECT MAX(rowid) FROM spans)"
        )
        conn.execute("DELETE FROM spans WHERE rowid = (SELECT MIN(rowid) FROM spans)")
    conn.close()
    assert_figures_agree(path, vouch=False)
    with configured(path):
        react_agent("conv-d", PLAN)  # a foreign insert: the figures stop vouching until a rebuild
    assert_figures_agree(path, vouch=False)
    with SpanStore(path, create=False) as store:
        assert store.receipt_figures() is None
    conn = sqlite3.connect(path, isolation_level=None)
    receipt_figures.rebuild(conn)
    conn.close()
    assert_figures_agree(path)


def test_a_store_before_migration_10_migrates_to_figures_equal_to_a_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path, retention=RetentionLimits(max_session_spans=6)):
        react_agent("conv-a", PLAN)
        react_agent("conv-b", [["search"], ["fetch"], ["convert"]])
    expected = assert_figures_agree(path)
    snapshot = _tables(path)
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in (
        *(f"DROP TRIGGER {name}" for name in _names("TRIGGER")),
        *(f"DROP TABLE {name}" for name in _names("TABLE")),
        "DELETE FROM schema_migrations WHERE version = 10",
    ):
        conn.execute(statement)
    conn.close()
    with pytest.raises(StoreNeedsUpgrade):
        SpanStore(path, create=False, read_only=True)
    with SpanStore(path, create=False) as store:  # migrates
        assert store.receipt_figures() is not None
    assert _tables(path) == snapshot
    assert assert_figures_agree(path) == expected


def _names(kind: str) -> list[str]:
    return re.findall(rf"CREATE {kind} (\w+)", " ".join(receipt_schema.SCHEMA))


def test_a_copied_store_keeps_its_figures(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        react_agent("conv-a", PLAN)
    copy = tmp_path / "copy.db"
    shutil.copy(path, copy)
    assert assert_figures_agree(copy) == assert_figures_agree(path)


def test_the_usual_sessions_shortcut_gives_what_the_general_rules_give() -> None:
    from otel_agentdiag.storage import SessionStats
    from otel_agentdiag.storage.receipt_rules import Figure, SessionFacts, judge_figures

    def facts(n: int, ranges: list[list[int]], **kw: Any) -> SessionFacts:
        stats = [SessionStats("obs", "s", n, n, n, 0, {}, {})]
        return SessionFacts("s", {"obs": Figure(n, 0, n, ranges, 0, 0)}, stats, **kw)

    general = {"not-an-observer-of-it": {}}  # a truthy overflow map that changes nothing: the general rules
    for case in (facts(3, [[0, 2]]), facts(3, [[0, 0], [2, 3]]), facts(3, [[0, 2]], pruned_spans=1)):
        assert judge_figures(case) == judge_figures(case, general)
    assert judge_figures(facts(3, [[0, 2]])).status == "valid"
    assert judge_figures(facts(3, [[0, 0], [2, 3]])).reasons == ["sequence_gap"]


def test_the_writers_stored_form_of_the_usual_session_is_the_general_one() -> None:
    from otel_agentdiag.storage import SessionStats
    from otel_agentdiag.storage.receipt_rules import (
        CLEAN_CONTRIBUTION,
        CLEAN_COUNTS,
        COUNT_KEYS,
        Figure,
        SessionFacts,
        clean_count,
        contribution,
        judge_figures,
    )

    for n in (1, 3, 25):
        facts = SessionFacts(
            "s", {"obs": Figure(n, 0, n, [[0, n - 1]], 0, 0)}, [SessionStats("obs", "s", n, n, n, 0, {}, {})]
        )
        assert clean_count(facts) == n
        verdict = judge_figures(facts, {"not-an-observer-of-it": {}})  # the general rules
        assert CLEAN_COUNTS.format(n) == ",".join(str(verdict.counts[key]) for key in COUNT_KEYS)
        expected = dict.fromkeys(CLEAN_CONTRIBUTION, n) | {"sessions": 1, "provenance:observed": 1, "observer:obs": 1}
        assert contribution(verdict) == expected
        assert (verdict.status, verdict.reasons, verdict.observers) == ("valid", [], ["obs"])


def test_the_store_receipt_of_settled_sessions_reads_no_span_row(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        for i in range(4):
            react_agent(f"conv-{i}", PLAN)
    statements: list[str] = []
    with SpanStore(path, create=False, read_only=True) as store:
        store._conn.set_trace_callback(statements.append)  # every statement the reading runs
        whole = store_receipt(store)
        store._conn.set_trace_callback(None)
        assert whole == store_receipt_from_rows(store)
    assert statements and whole.counts["spans"] > 0
    # Only the figures and the bookkeeping: spans is touched for its largest rowid only (the watermark check).
    touching_spans = [s for s in statements if re.search(r"\bspans\b", s)]
    assert touching_spans and all("max(rowid)" in s for s in touching_spans), touching_spans


def test_the_writers_per_row_step_counts_what_add_span_counts() -> None:
    from otel_agentdiag import semconv as sc
    from otel_agentdiag.storage import SpanRow
    from otel_agentdiag.storage.receipt_rules import PUBLIC_SAFETY_COUNTER, Figure

    def row(sequence: int | None, name: str = "chat m", flagged: object = None) -> SpanRow:
        attributes = {} if flagged is None else {PUBLIC_SAFETY_COUNTER: flagged}
        return SpanRow(
            "t", "s", None, name, "llm", "internal", 0, 1, "ok", "k", attributes, [], [], {}, None, "o", sequence
        )

    # out of order, a duplicate, a gap, an unnumbered row, a negative number, a tombstone, safety counters
    rows = [
        row(3),
        row(1),
        row(3),
        row(None),
        row(-1),
        row(0, sc.TOMBSTONE_SPAN_NAME),
        row(7, flagged=2),
        row(2, flagged=True),
    ]
    for observer in ("o", ""):
        by_span, by_row, numbers = Figure(), Figure(), []
        for r in rows:
            by_span.add_span(r, corrupt=False, stored_observer=observer)
            by_row.add_plain(r, observer, numbers)
        by_row.add_numbers(numbers)
        assert by_row == by_span
    assert by_span.n_rows == 8 and by_span.safety == 2 and by_span.tombstones == 1
    numbered = Figure()
    for r in rows:
        numbered.add_span(r, corrupt=False, stored_observer="o")
    assert (numbered.numbered, numbered.ranges) == (6, [[0, 3], [7, 7]])


def test_the_writer_hushes_the_ledger_triggers_only_inside_its_transaction(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        react_agent("conv-a", PLAN)
    conn = sqlite3.connect(path, isolation_level=None)
    assert conn.execute("SELECT quiet FROM receipt_state").fetchone() == (0,)  # never left on after a write
    # A ledger row written by other means still notes its session (the figures stop vouching until settled).
    conn.execute("INSERT INTO session_stats (observer, session, observed) VALUES ('other', 'conv-raw', 1)")
    assert conn.execute("SELECT session FROM receipt_touched").fetchall() == [("conv-raw",)]
    conn.close()
    with SpanStore(path, create=False, read_only=True) as store:
        assert store.receipt_figures() is None
    with configured(path):
        react_agent("conv-b", PLAN)  # the writer's next transaction settles it
    assert_figures_agree(path)
