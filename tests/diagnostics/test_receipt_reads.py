"""A session's receipt reads that session only, and agrees with the store-wide reading of every session."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from otel_agentdiag.diagnostics.receipt import combine, session_receipt, session_receipts, store_receipt
from otel_agentdiag.diagnostics.status import session_status
from otel_agentdiag.storage import Accounting, RetentionLimits, SpanRow, SpanStore

T0 = (time.time_ns() // 10**9 - 3600) * 10**9
OBS = "0123456789abcdef"


def _row(
    i: int, session: str | None, sequence: int, *, trace: str, parent: int | None = None, days_ago: int = 0
) -> SpanRow:
    start = T0 + i * 1_000 - days_ago * 86_400 * 10**9
    return SpanRow(
        trace_id=trace,
        span_id=f"{i:016x}",
        parent_span_id=None if parent is None else f"{parent:016x}",
        name=f"span-{i}",
        kind="run" if parent is None else "tool",
        span_kind="internal",
        start_ns=start,
        end_ns=start + 500,
        status="ok",
        session=session,
        attributes={"k": "v"},
        events=[],
        links=[],
        resource={"service.name": "receipt-reads"},
        scope=None,
        observer=OBS,
        sequence=sequence,
    )


def _store(path: Path) -> SpanStore:
    """Sessions a (pruned to 4 spans), b (cleared, then written again), c (a dropped span and an ingest
    violation), d (valid), and spans outside any session, all pruned away by age (the ledger has them, the
    rows do not)."""
    store = SpanStore(path, retention=RetentionLimits(max_session_spans=4))
    i = 0
    for session, n, trace, days_ago in (
        ("s-a", 6, "a" * 32, 0),
        ("s-b", 3, "b" * 32, 0),
        ("s-c", 3, "c" * 32, 0),
        ("s-d", 2, "f" * 32, 0),
        (None, 3, "d" * 32, 40),
    ):
        rows = [_row(i + k, session, k, trace=trace, parent=None if k == 0 else i, days_ago=days_ago) for k in range(n)]
        store.write_batch(rows, Accounting(observer=OBS))
        i += n
    store.clear_session("s-b", now_ns=T0 + 9_000)  # after its rows, before the one written next
    store.write_batch([_row(i, "s-b", 3, trace="e" * 32)], Accounting(observer=OBS))
    store.record_accounting(Accounting(observer=OBS, dropped={"s-c": {"queue_full": 1}}))
    store.record_violations("ingest", [("s-c", "malformed_json", "line 3")])
    return store


def test_session_receipt_agrees_with_the_store_wide_reading(tmp_path: Path) -> None:
    with _store(tmp_path / "traces.db") as store:
        receipts, _malformed = session_receipts(store)
        by_session = {r.session: r.status for r in receipts}
        # None: every span outside a session was pruned, nothing is left to judge.
        assert by_session == {"s-a": "valid", "s-b": "valid", "s-c": "invalid", "s-d": "valid", None: "invalid"}
        for expected in receipts:
            assert session_receipt(store, expected.session) == expected


def test_session_receipt_and_status_of_a_named_session_do_not_list_every_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing every session groups every row of the store: a named session's receipt needs only its own."""
    with _store(tmp_path / "traces.db") as store:
        expected = {r.session: r for r in session_receipts(store)[0]}

        def refuse() -> None:
            raise AssertionError("list_sessions() was called")

        monkeypatch.setattr(store, "list_sessions", refuse)
        for session in ("s-a", "s-b", "s-c", "s-d"):
            assert session_receipt(store, session) == expected[session]
            assert session_status(store, session, as_of_ns=None).receipt == expected[session]


def test_alike_sessions_judged_once_give_each_its_own_receipt(tmp_path: Path) -> None:
    """Sessions that differ only by their observer are judged once for the whole store: each still gets its own
    receipt (its session and observer), and the store's receipt is every session's combined."""
    with SpanStore(tmp_path / "traces.db") as store:
        for n in range(6):
            observer = f"{n:016x}"
            rows = [
                replace(
                    _row(100 * n + k, f"alike-{n}", k, trace=f"{n + 1:032x}", parent=None if k == 0 else 100 * n),
                    observer=observer,
                )
                for k in range(3)
            ]
            store.write_batch(rows[: 2 if n == 5 else 3], Accounting(observer=observer))  # the last: a gap
        store.record_violations("ingest", [("alike-2", "malformed_json", "line 1")])
        receipts, _malformed = session_receipts(store)
        assert {r.session: r.observers for r in receipts} == {f"alike-{n}": [f"{n:016x}"] for n in range(6)}
        for expected in receipts:
            assert session_receipt(store, expected.session) == expected
        assert {r.session: r.status for r in receipts}["alike-2"] == "invalid"
        assert store_receipt(store) == combine(receipts, violations=1)
