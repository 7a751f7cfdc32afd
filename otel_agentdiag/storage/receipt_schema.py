"""Migration 10's tables and triggers: the receipt figures the writer keeps (see ``storage/receipt_figures.py``)."""

from __future__ import annotations


def _touch(table: str, expr: str) -> str:
    """SQL (in a trigger): note the session ``expr`` in ``table`` unless noted. A guarded INSERT, not INSERT OR
    IGNORE: an outer upsert's conflict handling would override the IGNORE."""
    guard = f"NOT EXISTS (SELECT 1 FROM {table} WHERE session = {expr})"
    return f"INSERT INTO {table} (session) SELECT {expr} WHERE {guard};"


_LOUD = "WHEN NOT EXISTS (SELECT 1 FROM receipt_state WHERE id = 1 AND quiet)"
"""A trigger's condition: not while the writer notes the sessions itself (:func:`~.receipt_figures.hush`)."""

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE receipt_figures (
        session TEXT NOT NULL,
        observer TEXT NOT NULL,
        n_rows INTEGER NOT NULL DEFAULT 0,
        tombstones INTEGER NOT NULL DEFAULT 0,
        numbered INTEGER NOT NULL DEFAULT 0,
        ranges TEXT NOT NULL DEFAULT '',
        safety INTEGER NOT NULL DEFAULT 0,
        malformed INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (session, observer)
    ) WITHOUT ROWID""",
    # No index on observer: only a store with an overflow ledger row asks which sessions an observer wrote rows
    # in (a scan then); the writer would pay for one on every new session.
    """CREATE TABLE receipt_missing (
        trace_id TEXT NOT NULL,
        parent_span_id TEXT NOT NULL,
        session TEXT NOT NULL,
        observer TEXT NOT NULL,
        sequence INTEGER NOT NULL,
        start_ns INTEGER NOT NULL,
        PRIMARY KEY (trace_id, parent_span_id, session)
    ) WITHOUT ROWID""",
    "CREATE INDEX receipt_missing_session ON receipt_missing(session)",
    """CREATE TABLE receipt_sessions (
        session TEXT PRIMARY KEY,
        settled INTEGER NOT NULL,
        status TEXT,
        reasons TEXT,
        counts TEXT,
        observers TEXT,
        unjudged TEXT
    ) WITHOUT ROWID""",
    "CREATE INDEX receipt_sessions_unsettled ON receipt_sessions(session) WHERE settled = 0",
    "CREATE INDEX receipt_sessions_unjudged ON receipt_sessions(session) WHERE unjudged IS NOT NULL",
    "CREATE TABLE receipt_totals (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE receipt_touched (session TEXT PRIMARY KEY) WITHOUT ROWID",
    "CREATE TABLE receipt_stale (session TEXT PRIMARY KEY) WITHOUT ROWID",
    """CREATE TABLE receipt_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        watermark INTEGER NOT NULL DEFAULT 0,
        quiet INTEGER NOT NULL DEFAULT 0
    )""",
    # Ledger, bookkeeping and violations: written per (observer, session) or per session, never per span. The
    # writer's own ledger upserts and new ``sessions`` rows note their sessions in Python (``quiet`` = 1 meanwhile).
    f"""CREATE TRIGGER receipt_stats_insert AFTER INSERT ON session_stats {_LOUD} BEGIN
        {_touch("receipt_touched", "new.session")}
    END""",
    f"""CREATE TRIGGER receipt_stats_update AFTER UPDATE ON session_stats {_LOUD} BEGIN
        {_touch("receipt_touched", "old.session")}
        {_touch("receipt_touched", "new.session")}
    END""",
    f"""CREATE TRIGGER receipt_stats_delete AFTER DELETE ON session_stats BEGIN
        {_touch("receipt_touched", "old.session")}
    END""",
    f"""CREATE TRIGGER receipt_sessions_insert AFTER INSERT ON sessions {_LOUD} BEGIN
        {_touch("receipt_touched", "new.session")}
    END""",
    # Not the activity columns (set on every batch): written or deleted rows touch their sessions anyway.
    f"""CREATE TRIGGER receipt_sessions_update AFTER UPDATE OF session, cleared_at_ns, generation, pruned_spans,
        cleared_spans ON sessions BEGIN
        {_touch("receipt_touched", "old.session")}
        {_touch("receipt_touched", "new.session")}
    END""",
    f"""CREATE TRIGGER receipt_sessions_delete AFTER DELETE ON sessions BEGIN
        {_touch("receipt_touched", "old.session")}
    END""",
    f"""CREATE TRIGGER receipt_violations_insert AFTER INSERT ON violations BEGIN
        {_touch("receipt_touched", "new.session")}
    END""",
    f"""CREATE TRIGGER receipt_violations_delete AFTER DELETE ON violations BEGIN
        {_touch("receipt_touched", "old.session")}
    END""",
    # The writer never updates a row; anything that does makes its sessions' figures a question for the rows.
    f"""CREATE TRIGGER receipt_spans_update AFTER UPDATE ON spans BEGIN
        {_touch("receipt_stale", "coalesce(old.session, '')")}
        {_touch("receipt_stale", "coalesce(new.session, '')")}
    END""",
    "INSERT INTO receipt_state (id, watermark) VALUES (1, 0)",
)
"""Migration 10's schema statements (its backfill is :func:`~.receipt_figures.rebuild`)."""
