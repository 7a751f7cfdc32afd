"""Rows and ledger checks shared by the storage tests (real SQLite files only)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from otel_agentdiag.storage import SpanRow

T0 = (time.time_ns() // 10**9 - 3600) * 10**9
"""Row times are offsets from T0 (an hour ago): the default retention prunes spans older than 30 days."""

TOMBSTONE_KEY = "agentdiag.redaction.redactor_error"
RESOURCE = {"service.name": "storage-test"}


def span_id(i: int) -> str:
    return f"{i:016x}"


def row(
    i: int,
    *,
    session: str | None = "sess-a",
    observer: str | None = "0123456789abcdef",
    sequence: int | None = None,
    trace_id: str = "a" * 32,
    start: int | None = None,
    attributes: dict[str, Any] | None = None,
    events: list[dict[str, Any]] | None = None,
    name: str = "span",
) -> SpanRow:
    """Span ``i`` of a session; starts at ``T0 + i`` unless ``start`` (an offset from T0) is given."""
    start_ns = T0 + (i if start is None else start)
    return SpanRow(
        trace_id=trace_id,
        span_id=span_id(i),
        parent_span_id=None,
        name=name,
        kind="other",
        span_kind="internal",
        start_ns=start_ns,
        end_ns=start_ns + 10,
        status="ok",
        session=session,
        attributes={"k": "v"} if attributes is None else attributes,
        events=[] if events is None else events,
        links=[],
        resource=RESOURCE,
        scope={"name": "tests", "version": "1"},
        observer=observer,
        sequence=i if sequence is None else sequence,
    )


def query(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def stats_rows(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """``session_stats`` as plain data, read with a separate connection."""
    out = {}
    for observer, session, observed, accepted, stored, duplicates, rejected, dropped in query(
        path, "SELECT observer, session, observed, accepted, stored, duplicates, rejected, dropped FROM session_stats"
    ):
        out[(observer, session)] = {
            "observed": observed,
            "accepted": accepted,
            "stored": stored,
            "duplicates": duplicates,
            "rejected": json.loads(rejected),
            "dropped": json.loads(dropped),
        }
    return out


def check_ledger(path: Path, *, sizes: bool = True) -> None:
    """Assert what must hold after every write, from the raw tables (not through the store's read API).

    - per (observer, session): observed == accepted + sum(rejected) + sum(dropped);
    - per session: stored - pruned - cleared == the rows there;
    - the running totals (per session, per store) equal the rows; each row's size is its bytes (``sizes``).
    """
    for key, s in stats_rows(path).items():
        assert s["observed"] == s["accepted"] + sum(s["rejected"].values()) + sum(s["dropped"].values()), key
        assert min([s["observed"], s["accepted"], s["stored"], *s["rejected"].values(), *s["dropped"].values()]) >= 0
    rows = dict(query(path, "SELECT coalesce(session, ''), COUNT(*) FROM spans GROUP BY 1"))
    stored = dict(query(path, "SELECT session, SUM(stored) FROM session_stats GROUP BY session"))
    gone = {s: p + c for s, p, c in query(path, "SELECT session, pruned_spans, cleared_spans FROM sessions")}
    for session in set(rows) | set(stored) | set(gone):
        assert stored.get(session, 0) - gone.get(session, 0) == rows.get(session, 0), session
    actual = {
        s: (n, b) for s, n, b in query(path, "SELECT coalesce(session, ''), COUNT(*), SUM(size) FROM spans GROUP BY 1")
    }
    kept = {s: (n, b) for s, n, b in query(path, "SELECT session, span_count, bytes FROM sessions")}
    for session in set(actual) | set(kept):
        assert kept.get(session, (0, 0)) == actual.get(session, (0, 0)), session
    assert query(path, "SELECT span_count, total_bytes FROM store_stats") == query(
        path, "SELECT COUNT(*), coalesce(SUM(size), 0) FROM spans"
    )
    if not sizes:
        return
    mismatched = query(
        path,
        "SELECT COUNT(*) FROM spans WHERE size <> length(CAST(name AS BLOB)) + length(CAST(attributes AS BLOB))"
        " + length(CAST(events AS BLOB)) + length(CAST(links AS BLOB)) + coalesce(length(CAST(scope AS BLOB)), 0)"
        # captured content counts in its span's size (the table is absent before schema version 5)
        + (
            " + coalesce((SELECT SUM(c.size) FROM span_content c"
            " WHERE c.trace_id = spans.trace_id AND c.span_id = spans.span_id), 0)"
            if query(path, "SELECT 1 FROM sqlite_master WHERE name = 'span_content'")
            else ""
        ),
    )
    assert mismatched == [(0,)]


STORE_FILES = ("", "-wal", "-shm", "-journal")


def files_holding(path: Path, needles: dict[str, bytes]) -> dict[str, list[str]]:
    """Which of the store's files (database, ``-wal``, ``-shm``, ``-journal``) hold each needle byte for byte,
    read raw (not through SQLite): ``{label: [file, ...]}`` for the needles found anywhere."""
    contents = {}
    for suffix in STORE_FILES:
        part = Path(f"{path}{suffix}")
        if part.is_file():
            contents[suffix or "db"] = part.read_bytes()
    found: dict[str, list[str]] = {}
    for label, needle in needles.items():
        where = [name for name, data in contents.items() if needle in data]
        if where:
            found[label] = where
    return found
