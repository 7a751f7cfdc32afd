"""Every receipt status and reason, and the status projection, from real runs of the real pipeline.

Agents are scripted with the public wrappers; spans go through the sequencer, the redacting processor, the
accounting batcher and the SQLite exporter into a real store file, and are read back with ``SpanStore``.
Where a scenario needs a fault, the fault is real (a database locked by another connection, a child process
killed with SIGKILL, a policy callback that raises, rows changed behind the store's back), except the one
test double the spec allows: an exporter that loses one span between the processor and the store.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from scripted_agents import (
    AGENT,
    BlockingExporter,
    configured,
    digest,
    hand_pipeline,
    llm_step,
    react_agent,
    react_span_count,
    tool_step,
)

import otel_agentdiag as agentdiag
from otel_agentdiag.cli import cli
from otel_agentdiag.diagnostics.receipt import (
    Receipt,
    combine,
    session_receipt,
    store_overview,
    store_receipt,
)
from otel_agentdiag.diagnostics.status import Status, session_status
from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
from otel_agentdiag.redaction.presets import LOCAL
from otel_agentdiag.redaction.processor import RedactingSpanProcessor
from otel_agentdiag.redaction.rules import Callback
from otel_agentdiag.storage import Accounting, RetentionLimits, SpanStore
from otel_agentdiag.storage.migrations import MIGRATIONS

HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def _one_judge_for_one_session_and_for_all(tmp_path: Path) -> Iterator[None]:
    """After every scenario: in each store it left, every session's receipt read alone (its rows' SQL restricted
    to it) is the one the whole-store reading gives it, and the store's receipt combines those."""
    yield
    for path in sorted(tmp_path.glob("*.db")):
        with SpanStore(path, create=False, read_only=True) as store:
            overview = store_overview(store)
            for _summary, expected in overview.sessions:
                assert session_receipt(store, expected.session) == expected, path
            receipts = [receipt for _summary, receipt in overview.sessions]
            assert store_receipt(store) == overview.receipt(), path
            assert overview.receipt() == combine(
                receipts, malformed_rows=overview.malformed_rows, violations=overview.violations
            ), path


def receipt(path: Path, session: str | None = None, *, store_wide: bool = False) -> Receipt:
    with SpanStore(path, create=False) as store:
        return store_receipt(store) if store_wide else session_receipt(store, session)


def status(path: Path, session: str | None, *, as_of_ns: int | None = None, threshold: float = 300.0) -> Status:
    with SpanStore(path, create=False) as store:
        return session_status(store, session, as_of_ns=as_of_ns, stall_threshold_s=threshold)


def cli_json(*args: str | Path) -> Any:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def assert_ledger_balances(path: Path) -> None:
    """The invariant every scenario keeps: per (observer, session), observed = accepted + rejected + dropped."""
    with SpanStore(path, create=False) as store:
        rows = store.session_stats()
    assert rows
    for row in rows:
        assert row.observed == row.accepted + sum(row.rejected.values()) + sum(row.dropped.values()), row


# -- valid ---------------------------------------------------------------------------------------------------
PLAN = [["search"], ["fetch", "convert"]]


def test_a_clean_run_is_valid_and_its_status_counts_what_ran(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path) as diag:
        react_agent("conv-clean", PLAN)
        observer = diag.observer_id
    session = digest("conv-clean")
    r = receipt(path, session)
    assert (r.status, r.reasons) == ("valid", []), r
    n = react_span_count(PLAN)
    assert r.counts["spans"] == r.counts["observed"] == r.counts["accepted"] == r.counts["stored"] == n
    assert r.observers == [observer]
    assert receipt(path, store_wide=True).status == "valid"

    s = status(path, session)
    assert (s.stage, s.active, s.signals) == ("finished", False, [])
    assert s.counts == {
        "runs": 1,
        "iterations": 3,
        "llm_calls": 3,
        "tool_calls": 3,
        "errors": 0,
        "input_tokens": 100 + 101 + 200,
        "output_tokens": 20 + 21 + 40,
    }
    assert (s.repetition_longest, s.repetition_suspected) == (1, False)
    assert_ledger_balances(path)


def test_a_session_run_by_two_processes_is_valid_with_two_observers(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, str(HERE / "scripted_agents.py"), str(path), "finish", "conv-shared"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    r = receipt(path, digest("conv-shared"))
    assert (r.status, r.reasons) == ("valid", []), r
    assert len(r.observers) == 2
    assert r.counts["spans"] == 2 * react_span_count([["search"], ["fetch"]])
    s = status(path, digest("conv-shared"))
    assert s.counts["runs"] == 2
    assert s.stage == "finished"


def test_retention_pruning_keeps_a_session_valid(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    plan = [["search"], ["fetch"], ["convert"]]
    with configured(path, retention=RetentionLimits(max_session_spans=5)):
        react_agent("conv-pruned", plan)
    r = receipt(path, digest("conv-pruned"))
    assert (r.status, r.reasons) == ("valid", []), r
    assert r.counts["spans"] == 5
    assert r.counts["pruned_spans"] == react_span_count(plan) - 5
    assert r.counts["sequence_gaps"] == 0
    assert_ledger_balances(path)


def test_spans_outside_any_session_pruned_away_keep_the_store_valid(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        for _ in range(3):
            tool_step("search")  # outside any agent run: no session
        between = time.time_ns()
        react_agent("conv-after", PLAN)
    with SpanStore(path, create=False, retention=RetentionLimits(max_session_age_s=1.0)) as store:
        assert store.prune(now_ns=between + 10**9).spans == 3  # only what started before `between`
        assert store.session_spans(None) == []
    outside = receipt(path, None)
    assert outside.counts["pruned_spans"] == 3
    assert (outside.status, outside.reasons) == ("invalid", ["no_observations"])  # nothing left to judge there
    whole = receipt(path, store_wide=True)
    assert (whole.status, whole.reasons) == ("valid", []), whole
    assert whole.counts["spans"] == react_span_count(PLAN)


def test_a_session_cleared_mid_run_drops_its_in_flight_spans_and_stays_valid(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    session = digest("conv-cleared")
    with configured(path) as diag:
        with agentdiag.agent_run(AGENT, conversation_id="conv-cleared"):
            with agentdiag.iteration(0):
                llm_step()
                tool_step("search")
            assert diag.force_flush()
            before = receipt(path, session)
            assert before.counts["spans"] == 3
            cleared = cli_json("clear", "--session", session[-64:-52], "--yes", "--format", "json", "--store", path)
            assert cleared == {"session": session, "cleared_spans": 3}
            with agentdiag.iteration(1):
                llm_step("stop")
        # the run span started before the clear and ends after it
    r = receipt(path, session)
    assert r.counts["spans"] == 2  # iteration 1 and its LLM call
    assert r.counts["dropped_cleared"] == 1
    assert (r.status, r.reasons) == ("valid", []), r
    assert r.counts["sequence_gaps"] == 0
    assert r.counts["unfinished_spans"] == 0
    assert status(path, session).active is False
    assert_ledger_balances(path)


def test_the_demo_store_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    result = CliRunner().invoke(cli, ["demo", "--store", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = cli_json("status", "--with-receipt", "--format", "json", "--store", path)
    assert doc["receipt"]["status"] == "valid", doc
    assert doc["receipt"]["reasons"] == []
    assert doc["stage"] == "finished"
    assert doc["recovery"] == {"errors": 1, "recovered": 1, "unrecovered": 0}
    assert doc["signals"] == []
    assert cli_json("receipt", "--format", "json", "--store", path)["status"] == "valid"


# -- degraded ------------------------------------------------------------------------------------------------
def test_forced_overflow_is_degraded_with_the_exact_number_of_dropped_spans(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    exporter = BlockingExporter(path)
    with hand_pipeline(exporter, max_queue_spans=3, max_export_batch=1) as pipeline:
        with agentdiag.agent_run(AGENT, conversation_id="conv-overflow"):
            with agentdiag.iteration(0):
                pass
            assert exporter.entered.wait(10)  # iteration 0 is in the exporter; the queue is empty
            for index in range(1, 9):
                with agentdiag.iteration(index):
                    pass  # 1..3 are queued, 4..8 dropped
        # the run span is dropped too
        dropped = pipeline.batching.stats().totals.dropped
        exporter.release.set()
        assert pipeline.force_flush()
    assert dropped == {"queue_full": 6}
    session = digest("conv-overflow")
    r = receipt(path, session)
    assert r.status == "degraded", r
    assert r.reasons == ["backpressure_drop"]
    assert r.counts["dropped_queue_full"] == 6
    assert r.counts["spans"] == 4
    assert r.counts["observed"] == 10
    assert r.counts["sequence_gaps"] == 0  # the missing numbers are the 6 counted drops: explained
    assert r.counts["unfinished_spans"] == 0  # the run ended: the ledger accounts for it
    assert_ledger_balances(path)

    doc = cli_json("status", "--with-receipt", "--format", "json", "--store", path)
    assert doc["session"] == session
    assert doc["receipt"]["status"] == "degraded"
    assert "backpressure_drop" in doc["receipt"]["reasons"]
    assert doc["receipt"]["counts"]["dropped_queue_full"] == 6
    assert doc["signals"] == ["event_loss", "integrity_not_valid"]
    assert doc["active"] is False


def test_a_database_locked_past_every_retry_is_an_export_failure(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    store = SpanStore(path, busy_timeout=0.05)
    exporter = SQLiteSpanExporter(store, owns_store=True)
    with hand_pipeline(exporter, retry_backoff_s=0.01) as pipeline:
        with agentdiag.agent_run(AGENT, conversation_id="conv-locked"):
            with agentdiag.iteration(0):
                llm_step()
                tool_step("search")
            other = sqlite3.connect(path, isolation_level=None)
            try:
                other.execute("BEGIN EXCLUSIVE")
                assert pipeline.force_flush()  # 1 + 3 attempts, each refused: the batch is counted lost
                failed = pipeline.batching.stats().totals.dropped
                other.execute("ROLLBACK")
            finally:
                other.close()
            with agentdiag.iteration(1):
                llm_step("stop")
    assert failed == {"export_failure": 3}
    r = receipt(path, digest("conv-locked"))
    assert r.status == "degraded", r
    assert r.reasons == ["export_failure"]
    assert r.counts["dropped_export_failure"] == 3
    assert r.counts["sequence_gaps"] == 0  # iteration 0, its LLM call and its tool call: lost, and counted
    assert r.counts["spans"] == 3
    assert_ledger_balances(path)


class LosingExporter(SQLiteSpanExporter):
    """Test double for a span lost between processor and store: the first ``fetch`` tool span never arrives."""

    lost = False

    def export_with_accounting(self, spans: Sequence[ReadableSpan], accounting: Accounting | None) -> bool:
        kept = [s for s in spans if self.lost or s.name != "execute_tool fetch"]
        self.lost = self.lost or len(kept) < len(spans)
        return super().export_with_accounting(kept, accounting)


def test_a_span_lost_on_the_way_to_the_store_is_a_sequence_gap(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    exporter = LosingExporter(path)
    with hand_pipeline(exporter):
        react_agent("conv-lost", PLAN)
    assert exporter.lost
    r = receipt(path, digest("conv-lost"))
    assert r.status == "degraded", r
    assert r.reasons == ["sequence_gap"]
    assert r.counts["sequence_gaps"] == 1
    assert r.counts["spans"] == react_span_count(PLAN) - 1
    assert r.counts["dropped"] == 0  # nobody counted it: only the numbering shows the loss
    doc = status(path, digest("conv-lost"))
    assert doc.signals == ["event_loss", "integrity_not_valid"]


def test_the_same_batch_exported_twice_is_a_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    captured = InMemorySpanExporter()
    with configured(path) as diag:
        local = diag.destinations[0]
        assert diag.tracer_provider is not None
        diag.tracer_provider.add_span_processor(
            RedactingSpanProcessor(SimpleSpanProcessor(captured), policy=local.policy, hasher=local.hasher)
        )
        react_agent("conv-twice", PLAN)
        assert diag.force_flush()
    spans = captured.get_finished_spans()
    assert len(spans) == react_span_count(PLAN)
    again = SQLiteSpanExporter(path)
    try:
        assert again.export(spans).name == "SUCCESS"
    finally:
        again.shutdown()
    r = receipt(path, digest("conv-twice"))
    assert r.status == "degraded", r
    assert r.reasons == ["duplicate_sequence"]
    assert r.counts["duplicate_sequences"] == len(spans)
    assert r.counts["spans"] == len(spans)
    assert_ledger_balances(path)


def test_a_killed_agent_leaves_unfinished_spans_an_active_status_and_a_stall(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    child = subprocess.Popen(
        [sys.executable, str(HERE / "scripted_agents.py"), str(path), "hang", "conv-killed"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "READY", (line, child.stderr.read() if child.stderr else "")
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL

    session = digest("conv-killed")
    r = receipt(path, session)
    assert r.status == "degraded", r
    assert r.reasons == ["unfinished_span"]
    assert r.counts["unfinished_spans"] == 2  # the run and iteration 1 (the tool call in flight left no child)
    assert r.counts["sequence_gaps"] == 0
    assert r.counts["spans"] == 4

    quiet = status(path, session)
    assert (quiet.active, quiet.stage) == (True, "tool_running")
    assert (quiet.as_of_source, quiet.silent_seconds, quiet.stall_suspected) == ("last_event", 0.0, False)
    assert quiet.last_event_ns is not None
    later = status(path, session, as_of_ns=quiet.last_event_ns + 301 * 10**9)
    assert later.stall_suspected
    assert later.signals == ["stall_suspected", "integrity_not_valid"]
    soon = status(path, session, as_of_ns=quiet.last_event_ns + 10 * 10**9)
    assert not soon.stall_suspected
    tight = status(path, session, as_of_ns=quiet.last_event_ns + 10 * 10**9, threshold=5)
    assert tight.stall_suspected


def test_a_live_run_is_active_until_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    session = digest("conv-live")
    with configured(path) as diag:
        with agentdiag.agent_run(AGENT, conversation_id="conv-live"):
            with agentdiag.iteration(0):
                llm_step("tool_calls")
                tool_step("search")
            assert diag.force_flush()
            live = status(path, session)
            assert (live.active, live.stage) == (True, "llm_running")
            assert live.receipt.reasons == ["unfinished_span"]
            assert live.last_event_ns is not None
            assert status(path, session, as_of_ns=live.last_event_ns + 600 * 10**9).stall_suspected
        assert diag.force_flush()
        done = status(path, session, as_of_ns=(live.last_event_ns or 0) + 600 * 10**9)
    assert (done.active, done.stage, done.stall_suspected) == (False, "finished", False)
    assert done.receipt.status == "valid"


# -- quarantined ---------------------------------------------------------------------------------------------
def _exploding(value: Any) -> Any:
    if value == "explode-model":
        raise RuntimeError("the policy callback failed")
    return value


EXPLODING = LOCAL.derive(
    "local-exploding", allowed_keys={"gen_ai.response.model": Callback(_exploding, label="explodes")}
)


def test_a_redactor_failure_quarantines_its_session_and_the_store(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path, local_policy=EXPLODING):
        with agentdiag.agent_run(AGENT, conversation_id="conv-tomb"):
            with agentdiag.iteration(0):
                llm_step("stop", model="explode-model")
    for r in (receipt(path, store_wide=True), receipt(path, digest("conv-tomb"))):
        assert r.status == "quarantined", r
        assert r.reasons == ["redactor_error"], r  # the tombstone keeps its sequence number: no gap
        assert r.counts["rejected_redactor_error"] == 1
    with SpanStore(path, create=False) as store:
        names = [s.name for s in store.session_spans(digest("conv-tomb"))]
    assert "agentdiag.redaction_error" in names  # the tombstone, stored in place of the span, in its session
    assert_ledger_balances(path)


def test_a_span_the_redactor_dropped_quarantines_its_session(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    dropping = EXPLODING.derive("local-exploding-drop", on_error="drop")
    with configured(path, local_policy=dropping):
        with agentdiag.agent_run(AGENT, conversation_id="conv-dropped"):
            with agentdiag.iteration(0):
                llm_step("stop", model="explode-model")
    r = receipt(path, digest("conv-dropped"))
    assert r.status == "quarantined", r
    assert "redactor_error" in r.reasons
    assert r.counts["rejected_redactor_error"] == 1
    assert r.counts["spans"] == 2
    assert_ledger_balances(path)


def test_a_credential_in_an_allowed_attribute_quarantines_the_session(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        with agentdiag.agent_run(AGENT, conversation_id="conv-secret"):
            with agentdiag.iteration(0):
                llm_step("stop", model="sk-proj-Abc123Def456Ghi789Jkl012Mno345")
    r = receipt(path, digest("conv-secret"))
    assert r.status == "quarantined", r
    assert r.reasons == ["public_safety_violation"]
    assert r.counts["public_safety_violations"] == 1
    with SpanStore(path, create=False) as store:
        stored = json.dumps([s.attributes for s in store.session_spans(digest("conv-secret"))])
    assert "sk-proj" not in stored
    assert status(path, digest("conv-secret")).signals == ["integrity_not_valid"]


# -- invalid -------------------------------------------------------------------------------------------------
def test_spans_from_a_store_older_than_accounting_are_stats_missing(tmp_path: Path) -> None:
    """A store written before accounting existed: schema version 1, then opened (migrated) by this version."""
    current = tmp_path / "current.db"
    with configured(current):
        react_agent("conv-old", PLAN)
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old, isolation_level=None)
    conn.execute(f"PRAGMA application_id = {0x41474447}")
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT)")
    for statement in MIGRATIONS[0].statements:
        conn.execute(statement)
    conn.execute("INSERT INTO schema_migrations VALUES (1, ?, '2025-01-01T00:00:00+00:00')", (MIGRATIONS[0].name,))
    conn.execute("ATTACH DATABASE ? AS cur", (str(current),))
    columns = (
        "trace_id, span_id, parent_span_id, name, kind, span_kind, start_ns, end_ns, status, session,"
        " attributes, events, links, resource_id, scope"
    )
    conn.execute("INSERT INTO resources SELECT id, digest, attributes FROM cur.resources")
    conn.execute(f"INSERT INTO spans ({columns}) SELECT {columns} FROM cur.spans")
    conn.execute("DETACH DATABASE cur")
    conn.close()

    r = receipt(old, digest("conv-old"))
    assert r.status == "invalid", r
    assert r.reasons == ["stats_missing"]
    assert r.counts["spans"] == react_span_count(PLAN)
    assert r.counts["observed"] == 0
    assert receipt(old, store_wide=True).status == "invalid"


def test_rows_deleted_behind_the_stores_back_make_the_ledger_invalid(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        react_agent("conv-tampered", PLAN)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM spans WHERE name = 'execute_tool search'")
    conn.close()
    r = receipt(path, digest("conv-tampered"))
    assert r.status == "invalid", r
    assert "ledger_invalid" in r.reasons
    assert r.counts["stored"] - r.counts["spans"] == 1


def test_a_ledger_row_that_does_not_balance_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        react_agent("conv-unbalanced", PLAN)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE session_stats SET observed = observed + 1")
    conn.close()
    r = receipt(path, digest("conv-unbalanced"))
    assert (r.status, r.reasons) == ("invalid", ["ledger_invalid"])


def test_a_malformed_row_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        react_agent("conv-corrupt", PLAN)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE spans SET attributes = '{broken' WHERE name = 'execute_tool fetch'")
    conn.close()
    r = receipt(path, digest("conv-corrupt"))
    assert r.status == "invalid", r
    assert r.counts["malformed_rows"] == 1
    store_wide = receipt(path, store_wide=True)
    assert store_wide.status == "invalid"
    assert store_wide.counts["malformed_rows"] == 1


def test_an_empty_store_has_nothing_to_judge(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    SpanStore(path).close()
    r = receipt(path, store_wide=True)
    assert (r.status, r.reasons, r.counts["spans"]) == ("invalid", ["no_observations"], 0)
    s = status(path, None)
    assert (s.stage, s.active) == ("idle", False)


# -- status: repetition, recovery ----------------------------------------------------------------------------
def test_the_same_tool_called_again_and_again_is_suspected_repetition(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        react_agent("conv-loop", [["search"], ["search"], ["fetch"], ["search"], ["search"], ["search"], ["search"]])
    s = status(path, digest("conv-loop"))
    assert (s.repetition_tool, s.repetition_longest, s.repetition_suspected) == ("search", 4, True)
    assert s.signals == ["repetition_suspected"]
    assert s.receipt.status == "valid"


def test_two_calls_of_a_tool_are_not_repetition(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        react_agent("conv-twice-ok", [["search"], ["search"], ["fetch"]])
    s = status(path, digest("conv-twice-ok"))
    assert (s.repetition_longest, s.repetition_suspected, s.signals) == (2, False, [])


def test_an_error_followed_by_a_successful_step_is_recovered(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        react_agent("conv-recovered", [["!convert"], ["convert"]])
    s = status(path, digest("conv-recovered"))
    assert (s.errors, s.recovered, s.unrecovered) == (1, 1, 0)
    assert s.counts["errors"] == 1
    assert s.stage == "finished"
    assert s.signals == []


def test_an_error_that_ends_the_run_is_unrecovered_and_errored(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"

    class Fatal(RuntimeError):
        pass

    with configured(path):
        try:
            with agentdiag.agent_run(AGENT, conversation_id="conv-fatal"):
                with agentdiag.iteration(0):
                    llm_step()
                    with agentdiag.tool_call("fetch"):
                        raise Fatal("no way forward")
        except Fatal:
            pass
    s = status(path, digest("conv-fatal"))
    # one exception, recorded on the tool, the iteration and the run: one error where it started
    assert (s.errors, s.recovered, s.unrecovered) == (1, 0, 1)
    assert s.stage == "errored"
    assert s.signals == ["unrecovered_error"]
    assert s.receipt.status == "valid"


def test_a_later_run_that_succeeds_recovers_an_earlier_failure(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with configured(path):
        react_agent("conv-retry", [["!fetch"]])
        react_agent("conv-retry", [["fetch"]])
    s = status(path, digest("conv-retry"))
    assert (s.errors, s.recovered, s.unrecovered, s.counts["runs"]) == (1, 1, 0, 2)


def test_readers_never_write(tmp_path: Path) -> None:
    """Receipts and status leave the store file byte for byte as it was."""
    path = tmp_path / "traces.db"
    with configured(path):
        react_agent("conv-read", PLAN)
    with SpanStore(path, create=False):
        pass  # let the store settle its WAL once
    before = path.read_bytes(), (Path(f"{path}-wal").read_bytes() if Path(f"{path}-wal").exists() else b"")
    receipt(path, digest("conv-read"))
    receipt(path, store_wide=True)
    status(path, digest("conv-read"), as_of_ns=1)
    after = path.read_bytes(), (Path(f"{path}-wal").read_bytes() if Path(f"{path}-wal").exists() else b"")
    assert before == after
