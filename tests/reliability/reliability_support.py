"""Shared pieces of the reliability tests: agent loops through the public API, and the checks every scenario ends
with (the accounting identity per observer and session, the store's own bookkeeping, retention bounds,
``PRAGMA integrity_check`` and a receipt per session that agrees with the counts).

Everything is real: ``configure()``'s pipeline, SQLite files, the receipt code. The checks read the raw tables
with their own connection (not through the store's read API) wherever a number is compared, so a bug in the read
API cannot hide a bug in the writer.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import otel_agentdiag as agentdiag
from otel_agentdiag.diagnostics.receipt import Receipt, session_receipts, store_receipt
from otel_agentdiag.redaction import IdHasher
from otel_agentdiag.storage import RetentionLimits, SpanStore

HASH_KEY = b"1758c10a1a8cb3a05014035e4077a09b6bd67c75613ea0b39774041dfa29115b"
"""A distinctive 32-byte key (the secrets tests look for it, in every encoding, where it must never be)."""
AGENT = "reliability-agent"
TOOL = "fetch_page"
MODEL = "gpt-4o-mini"

agentdiag.register_names(tools=[TOOL], agents=[AGENT])


class ToolFailed(Exception):
    """What a failing tool raises (the loop catches it: the agent recovers and goes on)."""


def spans_per_run(steps: int) -> int:
    """Spans one :func:`agent_loop` run ends: the run, and per step an iteration, an LLM call and a tool call."""
    return 1 + 3 * steps


def session_digest(conversation: str, key: bytes = HASH_KEY) -> str:
    """The digest the store files ``conversation`` under."""
    return IdHasher(key).digest("conversation", conversation)


def _llm(i: int, content: bool) -> None:
    with agentdiag.llm_call(provider="openai", model=MODEL) as call:
        if content:
            call.record_content(input_messages=[{"role": "user", "parts": [{"type": "text", "content": f"q{i}"}]}])
        call.record_response(response_model=MODEL, input_tokens=10 + i, output_tokens=3, finish_reasons=["stop"])


def _tool(conversation: str, i: int, fail: bool, content: bool) -> None:
    try:
        with agentdiag.tool_call(TOOL, call_id=f"{conversation}-{i}", arguments={"i": i} if content else None) as t:
            if fail:
                raise ToolFailed("tool failed")
            if content:
                t.record_result({"page": i})
    except ToolFailed:
        pass  # the agent recovers; the span ended with status ERROR


def agent_loop(conversation: str, steps: int, *, fail_every: int = 0, content: bool = False) -> int:
    """One agent run of ``steps`` iterations (LLM call, then tool call) in session ``conversation``.

    Every ``fail_every``-th tool call raises (caught by the loop). Returns the number of spans it ended.
    """
    with agentdiag.agent_run(AGENT, conversation_id=conversation):
        for i in range(steps):
            with agentdiag.iteration(i):
                _llm(i, content)
                _tool(conversation, i, bool(fail_every) and i % fail_every == fail_every - 1, content)
    return spans_per_run(steps)


async def agent_loop_async(conversation: str, steps: int, *, fail_every: int = 0, content: bool = False) -> int:
    """:func:`agent_loop` as an asyncio task: it yields to the event loop inside every iteration, so runs of
    many tasks (and their sessions) interleave. Returns the number of spans it ended."""
    with agentdiag.agent_run(AGENT, conversation_id=conversation):
        for i in range(steps):
            with agentdiag.iteration(i):
                await asyncio.sleep(0)
                _llm(i, content)
                await asyncio.sleep(0)
                _tool(conversation, i, bool(fail_every) and i % fail_every == fail_every - 1, content)
    return spans_per_run(steps)


# -- reading the raw tables ------------------------------------------------------------------------------


def query(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@dataclass
class Ledger:
    """One ``session_stats`` row as plain data."""

    observed: int
    accepted: int
    stored: int
    duplicates: int
    rejected: dict[str, int]
    dropped: dict[str, int]

    @property
    def lost(self) -> int:
        return sum(self.rejected.values()) + sum(self.dropped.values())


def ledger_rows(path: Path) -> dict[tuple[str, str], Ledger]:
    """``(observer, session) -> Ledger`` from the raw table (session ``''``: spans outside any session)."""
    return {
        (observer, session): Ledger(observed, accepted, stored, duplicates, json.loads(rej), json.loads(drop))
        for observer, session, observed, accepted, stored, duplicates, rej, drop in query(
            path,
            "SELECT observer, session, observed, accepted, stored, duplicates, rejected, dropped FROM session_stats",
        )
    }


def integrity(path: Path) -> list[str]:
    return [row[0] for row in query(path, "PRAGMA integrity_check")]


@dataclass
class StoreCheck:
    """What :func:`assert_identity_everywhere` found, for assertions specific to a scenario."""

    ledger: dict[tuple[str, str], Ledger]
    receipts: dict[str | None, Receipt] = field(default_factory=dict)
    store: Receipt | None = None
    """The store's receipt."""
    observed: Counter[str] = field(default_factory=Counter)
    """Per observer: spans observed over all its sessions."""
    dropped: Counter[str] = field(default_factory=Counter)
    """Per drop cause, over the whole store."""
    rejected: Counter[str] = field(default_factory=Counter)
    pruned_spans: int = 0
    span_rows: int = 0


def assert_identity_everywhere(
    path: Path,
    *,
    retention: RetentionLimits | None = None,
    ended: Mapping[str, int] | None = None,
) -> StoreCheck:
    """Assert everything that must hold of a store once every writer has finished:

    - ``PRAGMA integrity_check`` is ``ok``;
    - per (observer, session): ``observed == accepted + sum(rejected) + sum(dropped)``, nothing negative,
      ``stored + duplicates <= accepted + rejected redactor_error`` (a tombstone is stored but rejected);
    - per session: ledger ``stored - pruned - cleared`` equals the rows there, and the running totals (per
      session and per store, rows and bytes) equal the rows;
    - retention (when given): spans and bytes per session, bytes per store within their limits;
    - ``ended`` (observer -> spans the workers ended): the observer's ``observed`` over all sessions equals it
      exactly (every span counted once: accepted, rejected or dropped); every observer has its ``observers`` row;
    - every session's receipt agrees with its counts (:func:`assert_receipt_consistent`), and the store's
      receipt is their combination.
    """
    assert integrity(path) == ["ok"]
    rows = ledger_rows(path)
    assert rows, "no session_stats rows"
    check = StoreCheck(ledger=rows)
    for key, s in rows.items():
        assert s.observed == s.accepted + s.lost, (key, s)
        assert min([s.observed, s.accepted, s.stored, s.duplicates, *s.rejected.values(), *s.dropped.values()]) >= 0
        assert s.stored + s.duplicates <= s.accepted + s.rejected.get("redactor_error", 0), (key, s)
        check.observed[key[0]] += s.observed
        check.dropped.update(s.dropped)
        check.rejected.update(s.rejected)
    if ended is not None:
        assert dict(check.observed) == dict(ended), "every span ended must be counted exactly once"
    # every pipeline that wrote left its figures (pid, queue peak and bound, flush attempts)
    observers = {o: pid for o, pid in query(path, "SELECT observer, pid FROM observers")}
    for observer in {o for o, _s in rows if o}:
        assert observers.get(observer) is not None, observer

    span_rows = dict(query(path, "SELECT coalesce(session, ''), COUNT(*) FROM spans GROUP BY 1"))
    stored: Counter[str] = Counter()
    for (_observer, session), s in rows.items():
        stored[session] += s.stored
    gone = {s: (p, c) for s, p, c in query(path, "SELECT session, pruned_spans, cleared_spans FROM sessions")}
    for session in set(span_rows) | set(stored) | set(gone):
        pruned, cleared = gone.get(session, (0, 0))
        assert stored[session] - pruned - cleared == span_rows.get(session, 0), session
    actual = {
        s: (n, b) for s, n, b in query(path, "SELECT coalesce(session, ''), COUNT(*), SUM(size) FROM spans GROUP BY 1")
    }
    kept = {s: (n, b) for s, n, b in query(path, "SELECT session, span_count, bytes FROM sessions") if n or b}
    assert kept == actual
    ((count, total_bytes),) = query(path, "SELECT COUNT(*), coalesce(SUM(size), 0) FROM spans")
    assert query(path, "SELECT span_count, total_bytes FROM store_stats") == [(count, total_bytes)]
    check.span_rows = count
    check.pruned_spans = sum(p for p, _c in gone.values())

    if retention is not None:
        for session, (n, b) in actual.items():
            if retention.max_session_spans is not None:
                assert n <= retention.max_session_spans, (session, n)
            if retention.max_session_bytes is not None:
                assert b <= retention.max_session_bytes, (session, b)
        if retention.max_store_bytes is not None:
            assert total_bytes <= retention.max_store_bytes

    with SpanStore(path, create=False) as store:
        receipts, malformed = session_receipts(store)
        assert malformed == 0
        whole = store_receipt(store)
    for receipt in receipts:
        ledgers = [s for (_o, sess), s in rows.items() if (sess or None) == receipt.session]
        assert_receipt_consistent(receipt, ledgers)
        check.receipts[receipt.session] = receipt
    assert {s or None for (_o, s) in rows} <= set(check.receipts)
    _assert_store_receipt(whole, receipts)
    check.store = whole
    return check


DEGRADING = {"backpressure_drop", "export_failure"}


def expected_reasons(ledgers: Iterable[Ledger]) -> set[str]:
    """The reason codes a session's ledger rows call for (all spans ended; nothing lost uncounted)."""
    dropped: Counter[str] = Counter()
    rejected: Counter[str] = Counter()
    for s in ledgers:
        dropped.update(s.dropped)
        rejected.update(s.rejected)
    reasons = set()
    if dropped["queue_full"] or dropped["shutdown"]:
        reasons.add("backpressure_drop")
    if dropped["export_failure"]:
        reasons.add("export_failure")
    if rejected["redactor_error"]:
        reasons.add("redactor_error")
    return reasons


def expected_status(reasons: set[str], spans: int) -> str:
    if spans == 0:
        return "invalid"  # nothing left to judge (retention pruned it all): no_observations, or what was lost
    if "redactor_error" in reasons:
        return "quarantined"
    if reasons & (DEGRADING | {"sequence_gap"}):
        return "degraded"
    return "valid"


def assert_receipt_consistent(receipt: Receipt, ledgers: list[Ledger]) -> None:
    """A session's receipt says what its ledger rows and rows say: ``valid`` iff nothing was dropped or rejected
    (retention pruning alone keeps a session valid), otherwise exactly the reason codes of what was lost; its
    counts are the ledger's sums (no ``sequence_gap``: retention deleting spans numbered out of start order is
    not a loss).
    """
    reasons = expected_reasons(ledgers)
    if not reasons and receipt.counts["spans"] == 0 and receipt.counts["malformed_rows"] == 0:
        reasons = {"no_observations"}  # every span pruned: nothing left to vouch for, nothing lost
    gaps = receipt.counts["sequence_gaps"]
    assert set(receipt.reasons) == reasons, (receipt.session, receipt.reasons, receipt.counts)
    assert receipt.status == expected_status(reasons, receipt.counts["spans"]), (receipt.session, receipt)
    counts = receipt.counts
    assert counts["observed"] == sum(s.observed for s in ledgers)
    assert counts["accepted"] == sum(s.accepted for s in ledgers)
    assert counts["stored"] == sum(s.stored for s in ledgers)
    assert counts["dropped"] == sum(sum(s.dropped.values()) for s in ledgers)
    assert counts["rejected"] == sum(sum(s.rejected.values()) for s in ledgers)
    assert counts["observed"] == counts["accepted"] + counts["rejected"] + counts["dropped"]
    for cause in ("queue_full", "export_failure", "shutdown", "cleared"):
        assert counts[f"dropped_{cause}"] == sum(s.dropped.get(cause, 0) for s in ledgers), cause
    assert gaps == counts["duplicate_sequences"] == counts["unfinished_spans"] == 0, receipt


def _assert_store_receipt(whole: Receipt, receipts: list[Receipt]) -> None:
    assert whole.scope == "store"
    judged = {r for receipt in receipts for r in receipt.reasons if r != "no_observations"}
    nothing = not judged and whole.counts["spans"] == 0 and whole.counts["malformed_rows"] == 0
    assert set(whole.reasons) == (judged | {"no_observations"} if nothing else judged)
    for key in ("observed", "accepted", "rejected", "dropped", "stored", "spans", "pruned_spans"):
        assert whole.counts[key] == sum(r.counts[key] for r in receipts), key
    assert whole.status == expected_status(set(whole.reasons), whole.counts["spans"])


def content_orphans(path: Path) -> int:
    """``span_content`` rows whose span is not stored (content must leave with its span)."""
    ((n,),) = query(
        path,
        "SELECT COUNT(*) FROM span_content c WHERE NOT EXISTS"
        " (SELECT 1 FROM spans s WHERE s.trace_id = c.trace_id AND s.span_id = c.span_id)",
    )
    return int(n)
