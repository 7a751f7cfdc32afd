"""The rules of receipts and status, on hand-made rows and ledgers.

These pin the arithmetic of each rule in isolation (which number is a gap, which parent is unfinished, which
reason maps to which status). The rows are written to a real store and its ledger and bookkeeping set by hand,
then read back as every receipt is (the receipt's SQL, then the one judge). Every status and reason is also
produced from real runs of the real pipeline in ``test_scenarios.py``; nothing here stands in for those.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest

from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.receipt import (
    COUNT_KEYS,
    REASONS,
    Receipt,
    combine,
    session_receipt,
)
from otel_agentdiag.diagnostics.status import project
from otel_agentdiag.storage import RetentionLimits, SessionStats, SpanRow, SpanStore, StoredSpan

OBS = "0123456789abcdef"
OTHER_OBS = "fedcba9876543210"
SESSION = "hmac-sha256:00000000:" + "ab" * 32
TRACE = "1" * 32


def span(
    n: int,
    *,
    parent: int | None = None,
    kind: str = "other",
    observer: str | None = OBS,
    sequence: int | None = -1,
    status: str = "unset",
    start: int | None = None,
    end: int | None = -1,
    attributes: dict[str, Any] | None = None,
    corrupt: bool = False,
    trace: str = TRACE,
) -> StoredSpan:
    start_ns = 1_000_000_000 * (n + 1) if start is None else start
    return StoredSpan(
        trace_id=trace,
        span_id=f"{n + 1:016x}",
        parent_span_id=None if parent is None else f"{parent + 1:016x}",
        name=f"span {n}",
        kind=kind,
        span_kind="internal",
        start_ns=start_ns,
        end_ns=start_ns + 500_000_000 if end == -1 else end,
        status=status,
        session=SESSION,
        attributes=attributes or {},
        events=[],
        links=[],
        resource={},
        scope=None,
        observer=observer,
        sequence=n if sequence == -1 else sequence,
        corrupt=corrupt,
    )


def stats(
    observed: int,
    *,
    accepted: int | None = None,
    stored: int | None = None,
    duplicates: int = 0,
    rejected: dict[str, int] | None = None,
    dropped: dict[str, int] | None = None,
    observer: str = OBS,
) -> SessionStats:
    rejected = rejected or {}
    dropped = dropped or {}
    if accepted is None:
        accepted = observed - sum(rejected.values()) - sum(dropped.values())
    return SessionStats(
        observer=observer,
        session=SESSION,
        observed=observed,
        accepted=accepted,
        stored=accepted - duplicates + rejected.get("redactor_error", 0) if stored is None else stored,
        duplicates=duplicates,
        rejected=rejected,
        dropped=dropped,
    )


def _row(s: StoredSpan, session: str | None) -> SpanRow:
    return SpanRow(
        trace_id=s.trace_id,
        span_id=s.span_id,
        parent_span_id=s.parent_span_id,
        name=s.name,
        kind=s.kind,
        span_kind=s.span_kind,
        start_ns=s.start_ns,
        end_ns=s.end_ns,
        status=s.status,
        session=session,
        attributes=s.attributes,
        events=s.events,
        links=s.links,
        resource=s.resource,
        scope=s.scope,
        observer=s.observer,
        sequence=s.sequence,
    )


def receipt_of(
    spans: list[StoredSpan],
    ledger: list[SessionStats],
    *,
    pruned_spans: int = 0,
    cleared_spans: int = 0,
    outside_span_ids: dict[str, frozenset[str]] | None = None,
) -> Receipt:
    """The receipt of SESSION in a store holding ``spans`` (written by the store's writer; a ``corrupt`` one then
    damaged), with ``ledger`` as its ledger, the deletion counts given, and ``outside_span_ids`` stored in the
    same trace outside the session."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "traces.db"
        outside = [
            span(int(span_id, 16) - 1, trace=trace_id, observer=OTHER_OBS)
            for trace_id, ids in (outside_span_ids or {}).items()
            for span_id in ids
        ]
        with SpanStore(path, retention=RetentionLimits(max_session_age_s=None)) as store:
            store.write_batch([_row(s, SESSION) for s in spans] + [_row(s, "elsewhere") for s in outside])
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            for s in spans:
                if s.corrupt:
                    conn.execute("UPDATE spans SET attributes = '{broken' WHERE span_id = ?", (s.span_id,))
            conn.execute("DELETE FROM session_stats WHERE session = ?", (SESSION,))
            conn.executemany(
                "INSERT INTO session_stats (observer, session, observed, accepted, stored, duplicates, rejected,"
                " dropped) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        r.observer,
                        SESSION,
                        r.observed,
                        r.accepted,
                        r.stored,
                        r.duplicates,
                        json.dumps(r.rejected),
                        json.dumps(r.dropped),
                    )
                    for r in ledger
                ],
            )
            conn.execute(
                "INSERT INTO sessions (session, pruned_spans, cleared_spans) VALUES (?, ?, ?)"
                " ON CONFLICT (session) DO UPDATE SET pruned_spans = excluded.pruned_spans,"
                " cleared_spans = excluded.cleared_spans",
                (SESSION, pruned_spans, cleared_spans),
            )
        finally:
            conn.close()
        with SpanStore(path, create=False, read_only=True) as store:
            return session_receipt(store, SESSION)


def chain(n: int) -> list[StoredSpan]:
    """n spans, each the parent of the next (0 is the root)."""
    return [span(i, parent=None if i == 0 else i - 1) for i in range(n)]


def test_a_complete_session_is_valid_and_every_count_key_is_there() -> None:
    r = receipt_of(chain(4), [stats(4)])
    assert r.status == "valid"
    assert r.reasons == []
    assert list(r.counts) == list(COUNT_KEYS)
    assert r.counts["spans"] == 4
    assert r.counts["observed"] == r.counts["accepted"] == r.counts["stored"] == 4
    assert r.observers == [OBS]
    assert set(r.to_json()) == {"session", "status", "reasons", "counts", "observers", "provenance"}
    assert r.provenance == "observed"


def test_a_missing_number_in_the_middle_is_a_gap() -> None:
    spans = [span(0), span(1, parent=0), span(3, parent=0), span(4, parent=0)]
    r = receipt_of(spans, [stats(4)])
    assert r.counts["sequence_gaps"] == 1
    assert r.reasons == ["sequence_gap"]
    assert r.status == "degraded"


def test_numbers_below_the_oldest_survivor_are_not_gaps_once_pruned() -> None:
    spans = [span(i, parent=0) for i in range(5, 9)]
    assert receipt_of(spans, [stats(9)], pruned_spans=5).counts["sequence_gaps"] == 0
    assert receipt_of(spans, [stats(9)], cleared_spans=5).counts["sequence_gaps"] == 0
    # without pruning or clearing, 0..4 are missing
    unexplained = receipt_of(spans, [stats(9, stored=4)])
    assert unexplained.counts["sequence_gaps"] == 5
    # and a gap above the oldest survivor is still a gap
    holes = [span(5), span(7, parent=5)]
    assert receipt_of(holes, [stats(7)], pruned_spans=5).counts["sequence_gaps"] == 1


def test_gaps_are_per_observer() -> None:
    spans = [span(0), span(1, parent=0), span(2, observer=OTHER_OBS, sequence=0, parent=0)]
    r = receipt_of(spans, [stats(2), stats(1, observer=OTHER_OBS)])
    assert r.counts["sequence_gaps"] == 0
    assert r.observers == [OBS, OTHER_OBS]


def test_duplicates_come_from_the_ledger_and_from_rows_sharing_a_number() -> None:
    ledger_only = receipt_of(chain(3), [stats(5, duplicates=2, stored=3)])
    assert ledger_only.counts["duplicate_sequences"] == 2
    assert ledger_only.reasons == ["duplicate_sequence"]
    assert ledger_only.status == "degraded"
    shared = [span(0), span(1, parent=0), span(2, parent=0, sequence=1)]
    rows = receipt_of(shared, [stats(3)])
    assert rows.counts["duplicate_sequences"] == 1
    assert "duplicate_sequence" in rows.reasons


@pytest.mark.parametrize(
    ("cause", "reason"),
    [("queue_full", "backpressure_drop"), ("shutdown", "backpressure_drop"), ("export_failure", "export_failure")],
)
def test_drops_degrade(cause: str, reason: str) -> None:
    r = receipt_of(chain(3), [stats(5, dropped={cause: 2})])
    assert r.counts[f"dropped_{cause}"] == 2
    assert r.counts["dropped"] == 2
    assert r.reasons == [reason]
    assert r.status == "degraded"


def test_spans_dropped_because_their_session_was_cleared_do_not_degrade() -> None:
    r = receipt_of([span(3), span(4, parent=3)], [stats(5, dropped={"cleared": 1}, stored=4)], cleared_spans=2)
    assert r.counts["dropped_cleared"] == 1
    assert r.status == "valid", r


def test_redactor_errors_and_public_safety_quarantine_and_win_over_degraded() -> None:
    tomb = receipt_of(chain(2), [stats(3, rejected={"redactor_error": 1}, dropped={"queue_full": 1}, stored=2)])
    assert tomb.counts["rejected_redactor_error"] == 1
    assert tomb.reasons == ["backpressure_drop", "redactor_error"]
    assert tomb.status == "quarantined"
    unsafe = [span(0, attributes={"agentdiag.redaction.public_safety_violation": 2}), span(1, parent=0)]
    r = receipt_of(unsafe, [stats(2)])
    assert r.counts["public_safety_violations"] == 2
    assert r.reasons == ["public_safety_violation"]
    assert r.status == "quarantined"


def test_stats_missing_ledger_invalid_malformed_and_nothing_to_judge_are_invalid() -> None:
    missing = receipt_of(chain(2), [])
    assert missing.reasons == ["stats_missing"]
    assert missing.status == "invalid"
    unnumbered = receipt_of([span(0, observer=None, sequence=None)], [stats(1, observer=OTHER_OBS)])
    assert "stats_missing" in unnumbered.reasons
    unbalanced = receipt_of(chain(2), [stats(3, accepted=2, stored=2)])
    assert unbalanced.reasons == ["ledger_invalid"]
    assert unbalanced.status == "invalid"
    too_few_rows = receipt_of(chain(2), [stats(3)])  # the ledger stored 3, pruned and cleared none: one vanished
    assert too_few_rows.reasons == ["ledger_invalid"]
    explained = receipt_of([span(1)], [stats(3)], pruned_spans=1, cleared_spans=1)
    assert explained.status == "valid"
    corrupt = receipt_of([span(0, corrupt=True)], [stats(1)])
    assert corrupt.counts["malformed_rows"] == 1
    assert (corrupt.status, corrupt.reasons) == ("invalid", [])
    empty = receipt_of([], [stats(2, stored=2)], cleared_spans=2)
    assert (empty.status, empty.reasons, empty.counts["spans"]) == ("invalid", ["no_observations"], 0)


def test_a_parent_that_started_and_never_ended_is_unfinished_once() -> None:
    # 0 (the run) is open: numbered before its children, never accounted for by the ledger.
    spans = [span(1, parent=0), span(2, parent=1), span(3, parent=1), span(4, parent=0)]
    r = receipt_of(spans, [stats(4)])
    assert r.counts["unfinished_spans"] == 1
    assert r.counts["sequence_gaps"] == 0  # the open span holds the missing number: nothing was lost
    assert r.reasons == ["unfinished_span"]
    assert r.status == "degraded"


def test_a_remote_or_outside_parent_is_not_unfinished() -> None:
    # The first span of the session names a parent it never numbered: a remote parent.
    remote = [span(0, parent=40), span(1, parent=0)]
    assert receipt_of(remote, [stats(2)]).counts["unfinished_spans"] == 0
    # A parent stored in the same trace outside the session.
    outside = [span(1, parent=0, sequence=0)]
    r = receipt_of(outside, [stats(1)], outside_span_ids={TRACE: frozenset({f"{1:016x}"})})
    assert r.counts["unfinished_spans"] == 0
    assert r.status == "valid"


def test_a_parent_lost_to_a_counted_drop_is_not_unfinished() -> None:
    # 0 ended but was dropped (queue full): the ledger accounts for it, so it is not open.
    spans = [span(1, parent=0), span(2, parent=0)]
    r = receipt_of(spans, [stats(3, dropped={"queue_full": 1})])
    assert r.counts["unfinished_spans"] == 0
    assert r.counts["sequence_gaps"] == 0  # the missing number is the counted drop: explained, not a gap
    assert r.reasons == ["backpressure_drop"]


def test_a_gap_beyond_what_the_ledger_explains_is_still_a_gap() -> None:
    # Two numbers missing (3 and 4), one drop counted: one loss nothing accounts for.
    spans = [span(0), span(1), span(2), span(5)]
    r = receipt_of(spans, [stats(5, dropped={"queue_full": 1})])
    assert r.counts["sequence_gaps"] == 1
    assert r.reasons == ["backpressure_drop", "sequence_gap"]


def test_a_pruned_parent_is_not_unfinished() -> None:
    spans = [span(i, parent=0) for i in range(3, 6)]
    r = receipt_of(spans, [stats(6)], pruned_spans=3)
    assert r.counts["unfinished_spans"] == 0
    assert r.status == "valid"


def test_combine_sums_counts_and_does_not_let_an_emptied_session_invalidate_the_store() -> None:
    a = receipt_of(chain(2), [stats(2)])
    emptied = receipt_of([], [stats(2, stored=2)], cleared_spans=2)
    both = combine([a, emptied])
    assert both.status == "valid"
    assert both.counts["spans"] == 2
    assert both.counts["stored"] == 4
    assert both.session is None
    assert both.scope == "store"
    assert combine([]).status == "invalid"
    assert combine([a], malformed_rows=1).status == "invalid"


def test_reason_codes_are_the_documented_ones() -> None:
    assert set(REASONS) == {
        "sequence_gap",
        "duplicate_sequence",
        "backpressure_drop",
        "export_failure",
        "redactor_error",
        "public_safety_violation",
        "unfinished_span",
        "stats_missing",
        "ledger_invalid",
        "ingest_violation",
        "imported",
        "no_observations",
    }


# -- status projection -----------------------------------------------------------------------------------------
def tool(n: int, name: str, *, parent: int = 1, status: str = "unset") -> StoredSpan:
    return span(n, parent=parent, kind="tool", status=status, attributes={"gen_ai.tool.name": name})


def llm(n: int, *, parent: int = 1, tokens: tuple[int, int] = (10, 2), finish: str = "stop") -> StoredSpan:
    return span(
        n,
        parent=parent,
        kind="llm",
        attributes={
            "gen_ai.usage.input_tokens": tokens[0],
            "gen_ai.usage.output_tokens": tokens[1],
            "gen_ai.response.finish_reasons": [finish],
        },
    )


def test_status_counts_tokens_from_llm_spans_only_and_errors_by_origin() -> None:
    spans = [
        span(0, kind="run", status="error", attributes={"gen_ai.usage.input_tokens": 1000}),
        span(1, parent=0, kind="iteration", status="error"),
        llm(2),
        tool(3, "t", status="error"),
    ]
    ledger = [stats(4)]
    s = project(spans, receipt_of(spans, ledger), session=SESSION, as_of_ns=None)
    assert s.counts == {
        "runs": 1,
        "iterations": 1,
        "llm_calls": 1,
        "tool_calls": 1,
        "errors": 1,
        "input_tokens": 10,
        "output_tokens": 2,
    }
    assert (s.errors, s.recovered, s.unrecovered) == (1, 0, 1)
    assert s.stage == "errored"
    assert s.signals == ["unrecovered_error"]


def test_status_repetition_counts_consecutive_calls_of_one_tool() -> None:
    spans = [span(0, kind="run"), span(1, parent=0, kind="iteration")]
    names = ["a", "b", "b", "a", "a", "a", "b"]
    n = 2
    for name in names:
        spans += [llm(n, finish="tool_calls"), tool(n + 1, name)]
        n += 2
    s = project(spans, receipt_of(spans, [stats(n)]), session=SESSION, as_of_ns=None)
    assert (s.repetition_tool, s.repetition_longest, s.repetition_suspected) == ("a", 3, True)
    assert "repetition_suspected" in s.signals


def test_status_repetition_counts_real_names_only() -> None:
    """Different tools whose names all read _OTHER (undeclared) are not one tool called again and again."""
    spans = [span(0, kind="run"), span(1, parent=0, kind="iteration")]
    n = 2
    for name in [sc.OTHER_VALUE, sc.OTHER_VALUE, "a", sc.OTHER_VALUE, sc.OTHER_VALUE, sc.OTHER_VALUE]:
        spans += [llm(n, finish="tool_calls"), tool(n + 1, name)]
        n += 2
    s = project(spans, receipt_of(spans, [stats(n)]), session=SESSION, as_of_ns=None)
    assert (s.repetition_tool, s.repetition_longest, s.repetition_suspected) == ("a", 1, False)
    assert "repetition_suspected" not in s.signals
    only_unknown = spans[:2] + [tool(2 + i, sc.OTHER_VALUE) for i in range(4)]
    s = project(only_unknown, receipt_of(only_unknown, [stats(6)]), session=SESSION, as_of_ns=None)
    assert (s.repetition_tool, s.repetition_longest, s.repetition_suspected) == (None, 0, False)


def test_status_stall_needs_an_active_session_and_a_time() -> None:
    spans = [span(1, parent=0, kind="iteration"), llm(2, finish="tool_calls")]
    receipt = receipt_of(spans, [stats(2)])
    assert receipt.counts["unfinished_spans"] == 1
    last = max(s.end_ns or 0 for s in spans)
    quiet = project(spans, receipt, session=SESSION, as_of_ns=None)
    assert quiet.active
    assert quiet.stage == "tool_running"
    assert (quiet.as_of_source, quiet.silent_seconds, quiet.stall_suspected) == ("last_event", 0.0, False)
    later = project(spans, receipt, session=SESSION, as_of_ns=last + 301 * 10**9)
    assert later.stall_suspected
    assert later.silent_seconds == 301.0
    assert later.as_of_source == "argument"
    assert later.signals[0] == "stall_suspected"
    shorter = project(spans, receipt, session=SESSION, as_of_ns=last + 301 * 10**9, stall_threshold_s=400)
    assert not shorter.stall_suspected
    with pytest.raises(ValueError):
        project(spans, receipt, session=SESSION, as_of_ns=None, stall_threshold_s=0)


def test_status_of_nothing_is_idle() -> None:
    s = project([], receipt_of([], []), session=SESSION, as_of_ns=None)
    assert (s.stage, s.active, s.last_event_ns) == ("idle", False, None)
    doc = s.to_json(with_receipt=True)
    assert doc["receipt"]["status"] == "invalid"
    assert "receipt" not in s.to_json()
