"""Numbered schema migrations, each applied once in its own transaction and recorded in ``schema_migrations``.

Never edit a migration that has shipped: add the next number.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from otel_agentdiag.storage import migration_sql


class StoreError(Exception):
    """The store cannot be used: missing, foreign, corrupt, or written by a newer version."""


APPLICATION_ID = 0x41474447
"""``PRAGMA application_id`` of an otel-agentdiag store ("AGDG"): how a store is told from other SQLite files."""


def check_ownership(conn: sqlite3.Connection) -> None:
    """Raise :class:`StoreError` unless the database is an otel-agentdiag store or empty. Reads only."""
    (app_id,) = conn.execute("PRAGMA application_id").fetchone()
    if app_id == APPLICATION_ID:
        return
    if app_id != 0:
        raise StoreError(f"not an otel-agentdiag store (application_id {app_id:#x})")
    if conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None:
        raise StoreError("not an otel-agentdiag store (it holds other tables)")


def is_empty(conn: sqlite3.Connection) -> bool:
    """Whether the database holds nothing at all (no table, no application id): a file not yet made a store."""
    (app_id,) = conn.execute("PRAGMA application_id").fetchone()
    return app_id == 0 and conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is None


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]
    backfill: Callable[[sqlite3.Connection], None] | None = None
    """Run after the statements, in the migration's transaction (work SQL alone cannot do)."""


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "spans and resources",
        (
            """CREATE TABLE resources (
                id INTEGER PRIMARY KEY,
                digest TEXT NOT NULL UNIQUE,
                attributes TEXT NOT NULL
            )""",
            """CREATE TABLE spans (
                trace_id TEXT NOT NULL,
                span_id TEXT NOT NULL,
                parent_span_id TEXT,
                name TEXT NOT NULL,
                kind TEXT NOT NULL,
                span_kind TEXT NOT NULL,
                start_ns INTEGER NOT NULL,
                end_ns INTEGER,
                status TEXT NOT NULL,
                session TEXT,
                attributes TEXT NOT NULL,
                events TEXT NOT NULL,
                links TEXT NOT NULL,
                resource_id INTEGER REFERENCES resources(id),
                scope TEXT,
                PRIMARY KEY (trace_id, span_id)
            )""",
            "CREATE INDEX spans_session ON spans(session, start_ns)",
            "CREATE INDEX spans_start ON spans(start_ns)",
            "CREATE INDEX spans_kind ON spans(kind)",
            "CREATE INDEX spans_name ON spans(name)",
            "CREATE INDEX spans_status ON spans(status)",
        ),
    ),
    Migration(
        2,
        "sequence, accounting and retention",
        (
            "ALTER TABLE spans ADD COLUMN observer TEXT",
            "ALTER TABLE spans ADD COLUMN sequence INTEGER",
            # UTF-8 bytes of the name and the JSON columns (what retention limits count).
            "ALTER TABLE spans ADD COLUMN size INTEGER NOT NULL DEFAULT 0",
            """UPDATE spans SET size = length(CAST(name AS BLOB)) + length(CAST(attributes AS BLOB))
                + length(CAST(events AS BLOB)) + length(CAST(links AS BLOB))
                + coalesce(length(CAST(scope AS BLOB)), 0)""",
            # No index on (session, observer, sequence): receipts read a session's rows through spans_session,
            # and the extra index cost about 6 µs per inserted span.
            # Cumulative per (observer, session): observed = accepted + sum(rejected) + sum(dropped).
            """CREATE TABLE session_stats (
                observer TEXT NOT NULL,
                session TEXT NOT NULL DEFAULT '',
                observed INTEGER NOT NULL DEFAULT 0,
                accepted INTEGER NOT NULL DEFAULT 0,
                stored INTEGER NOT NULL DEFAULT 0,
                duplicates INTEGER NOT NULL DEFAULT 0,
                rejected TEXT NOT NULL DEFAULT '{}',
                dropped TEXT NOT NULL DEFAULT '{}',
                PRIMARY KEY (observer, session)
            )""",
            "CREATE INDEX session_stats_session ON session_stats(session)",
            """CREATE TABLE observers (
                observer TEXT PRIMARY KEY,
                pid INTEGER,
                started_ns INTEGER,
                last_seen_ns INTEGER,
                peak_queue INTEGER NOT NULL DEFAULT 0,
                queue_limit INTEGER NOT NULL DEFAULT 0,
                flush_attempts INTEGER NOT NULL DEFAULT 0,
                flush_failures INTEGER NOT NULL DEFAULT 0
            )""",
            # One row per session that has rows ('' = spans outside any session) or was cleared.
            # span_count and bytes are running totals kept by the writer (retention reads them).
            """CREATE TABLE sessions (
                session TEXT PRIMARY KEY,
                cleared_at_ns INTEGER,
                generation INTEGER NOT NULL DEFAULT 0,
                pruned_spans INTEGER NOT NULL DEFAULT 0,
                pruned_bytes INTEGER NOT NULL DEFAULT 0,
                cleared_spans INTEGER NOT NULL DEFAULT 0,
                span_count INTEGER NOT NULL DEFAULT 0,
                bytes INTEGER NOT NULL DEFAULT 0
            )""",
            """INSERT INTO sessions (session, span_count, bytes)
                SELECT coalesce(session, ''), COUNT(*), SUM(size) FROM spans GROUP BY coalesce(session, '')""",
            # span_count and total_bytes: running totals of the whole store, kept by the writer.
            """CREATE TABLE store_stats (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                pruned_spans INTEGER NOT NULL DEFAULT 0,
                pruned_bytes INTEGER NOT NULL DEFAULT 0,
                span_count INTEGER NOT NULL DEFAULT 0,
                total_bytes INTEGER NOT NULL DEFAULT 0
            )""",
            """INSERT INTO store_stats (id, span_count, total_bytes)
                SELECT 1, COUNT(*), coalesce(SUM(size), 0) FROM spans""",
        ),
    ),
    Migration(
        3,
        "ingest violations and push marks",
        (
            # A line `agentdiag ingest` could not take (malformed, rejected by the policy): durable, so every later
            # receipt of the store says so. `detail` is a reason code and a line number, never the line itself.
            """CREATE TABLE violations (
                id INTEGER PRIMARY KEY,
                recorded_ns INTEGER NOT NULL,
                source TEXT NOT NULL,
                session TEXT NOT NULL DEFAULT '',
                reason TEXT NOT NULL,
                detail TEXT NOT NULL DEFAULT ''
            )""",
            "CREATE INDEX violations_session ON violations(session)",
            # Which stored spans `agentdiag push` delivered to which endpoint (a digest of its normalised URL:
            # an endpoint may carry credentials), so a second push sends only new spans.
            """CREATE TABLE push_marks (
                endpoint TEXT NOT NULL,
                trace_id TEXT NOT NULL,
                span_id TEXT NOT NULL,
                pushed_ns INTEGER NOT NULL,
                PRIMARY KEY (endpoint, trace_id, span_id)
            ) WITHOUT ROWID""",
        ),
    ),
    Migration(
        4,
        "end time index",
        (
            # `agentdiag status` finds the session with the newest activity (the latest end or start of a span)
            # through this index and spans_start, instead of grouping every row by session. Ends arrive in
            # about time order, so new entries go to the right edge of the index, as they do in spans_start.
            "CREATE INDEX spans_end ON spans(end_ns)",
        ),
    ),
    Migration(
        5,
        "captured content",
        (
            # Content captured with configure(capture_content=True): local only, never read by push, export or
            # support bundles. One row per (span, role): the authoritative lossless encoding (`encoding` names
            # its format) and a JSON projection for people and json_extract(). `size` is counted in the span's
            # own `size`, so retention limits cover content too.
            """CREATE TABLE span_content (
                id INTEGER PRIMARY KEY,
                trace_id TEXT NOT NULL,
                span_id TEXT NOT NULL,
                role TEXT NOT NULL,
                encoding TEXT NOT NULL,
                lossless BLOB NOT NULL,
                projection TEXT NOT NULL,
                size INTEGER NOT NULL,
                UNIQUE (trace_id, span_id, role)
            )""",
            # Whatever deletes a span (retention, clear, a future command) deletes its content with it.
            """CREATE TRIGGER span_content_follows_span AFTER DELETE ON spans BEGIN
                DELETE FROM span_content WHERE trace_id = old.trace_id AND span_id = old.span_id;
            END""",
        ),
    ),
    Migration(
        6,
        "provenance",
        (
            # Which observers wrote spans `agentdiag ingest` imported (1) rather than spans a live pipeline observed
            # here (0). Imported spans are filed under `imported:<digest>` session keys (see storage/provenance.py),
            # so rows, ledger rows, retention and violations are kept apart per provenance; observers are kept
            # apart by this column: an imported write naming an observer recorded as observed is refused. Rows
            # written before this version carry no provenance and read as observed.
            "ALTER TABLE observers ADD COLUMN imported INTEGER NOT NULL DEFAULT 0",
        ),
    ),
    Migration(
        7,
        "summaries",
        # Per trace (run), per session and per store figures the writer keeps current in its transaction, so
        # whole-store reads follow their page, not the store (see storage/summaries.py); backfilled from the rows.
        migration_sql.MIGRATION_7,
    ),
    Migration(
        8,
        "unused span indexes",
        # No reader filters or orders spans by kind, name, status or end time any more (the summaries of
        # migration 7 answer those questions), and each index cost the writer about 1 µs per span: the four
        # together were about a fifth of write_batch's CPU (issue 22, measured on 10,000 spans in batches of 512).
        # What remains: the key (trace_id, span_id), spans_session (a session's rows, retention per session) and
        # spans_start (retention's oldest rows).
        (
            "DROP INDEX IF EXISTS spans_kind",
            "DROP INDEX IF EXISTS spans_name",
            "DROP INDEX IF EXISTS spans_status",
            "DROP INDEX IF EXISTS spans_end",
        ),
    ),
    # Migrations 9 (stored strict-projection verdicts) and 10 (receipt figures kept by the writer) made tables
    # and triggers that migration 13 drops: a store older than 9 no longer makes them first. Their numbers stay.
    Migration(9, "strict-projection verdicts (dropped by 13)", ()),
    Migration(10, "receipt figures (dropped by 13)", ()),
    Migration(
        11,
        "operations",
        # Each (service, span name, span kind) the store holds, kept at write time (storage/operations.py), so the
        # Jaeger APIs' service and operation lists read a small table instead of the spans; filled from the rows.
        migration_sql.MIGRATION_11,
    ),
    Migration(
        12,
        "cost and budgets",
        # Per trace: the sum of its LLM leaves' cost (agentdiag.cost.usd) and whether a run of it passed a budget
        # (agentdiag.budget.exceeded), kept by the writer like the tokens (see storage/summaries.py); filled from
        # each trace's own rows.
        migration_sql.MIGRATION_12,
    ),
    Migration(
        13,
        "receipts from the rows",
        # A receipt is one GROUP BY over a covering index of spans (per session: rows, observers, numbers, rows
        # that do not count plainly) and an anti-join for missing parents, judged by one judge
        # (diagnostics/verdict.py): migration 10's figures, kept by the writer and triggers, go, and so do
        # migration 9's stored verdicts (push and export validate each row).
        (
            "DROP TRIGGER IF EXISTS receipt_stats_insert",
            "DROP TRIGGER IF EXISTS receipt_stats_update",
            "DROP TRIGGER IF EXISTS receipt_stats_delete",
            "DROP TRIGGER IF EXISTS receipt_sessions_insert",
            "DROP TRIGGER IF EXISTS receipt_sessions_update",
            "DROP TRIGGER IF EXISTS receipt_sessions_delete",
            "DROP TRIGGER IF EXISTS receipt_violations_insert",
            "DROP TRIGGER IF EXISTS receipt_violations_delete",
            "DROP TRIGGER IF EXISTS receipt_spans_update",
            "DROP TABLE IF EXISTS receipt_figures",
            "DROP TABLE IF EXISTS receipt_missing",
            "DROP TABLE IF EXISTS receipt_sessions",
            "DROP TABLE IF EXISTS receipt_totals",
            "DROP TABLE IF EXISTS receipt_touched",
            "DROP TABLE IF EXISTS receipt_stale",
            "DROP TABLE IF EXISTS receipt_state",
            "DROP TRIGGER IF EXISTS span_verdicts_follow_delete",
            "DROP TRIGGER IF EXISTS span_verdicts_follow_update",
            "DROP TABLE IF EXISTS span_verdicts",
            # ``plain``: 1 when the writer vouches that the row counts plainly in a receipt: numbered (an observer
            # and an integer sequence number >= 0), not a redaction tombstone, no public-safety hit, each JSON
            # column of its type; NULL otherwise, and for a row written or changed by another program: a reader
            # then looks at the row itself (a few rows, usually none).
            # ``orphan``: 0 when the row's parent is known to be stored (or it has none), 1 or NULL when it may
            # be missing; the writer clears it when the parent arrives, readers check flagged rows against the
            # key (an anti-join over few rows), so a flag need only never miss a missing parent.
            "ALTER TABLE spans ADD COLUMN plain INTEGER",
            "ALTER TABLE spans ADD COLUMN orphan INTEGER",
            # Nested CASEs: only CASE fixes the order of evaluation (json_type of malformed JSON raises).
            """UPDATE spans SET plain = (CASE WHEN typeof(sequence) = 'integer' AND sequence >= 0 AND observer <> ''
                AND name <> 'agentdiag.redaction_error' AND json_valid(attributes) AND json_valid(events)
                AND json_valid(links) AND (scope IS NULL OR json_valid(scope))
                THEN (CASE WHEN json_type(attributes) = 'object' AND json_type(events) = 'array'
                    AND json_type(links) = 'array' AND (scope IS NULL OR json_type(scope) = 'object')
                    AND coalesce(json_type(attributes, '$."agentdiag.redaction.public_safety_violation"') <> 'integer'
                        OR json_extract(attributes, '$."agentdiag.redaction.public_safety_violation"') <= 0, 1)
                    THEN 1 END) END),
                orphan = (parent_span_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM spans p
                    WHERE p.trace_id = spans.trace_id AND p.span_id = spans.parent_span_id
                    AND (substr(coalesce(spans.session, ''), 1, 9) = 'imported:' OR p.session IS NULL
                        OR substr(p.session, 1, 9) <> 'imported:')))""",
            # What the receipt's GROUP BY reads, from this index alone.
            "CREATE INDEX spans_receipt ON spans(session, observer, sequence, plain)",
            "CREATE INDEX spans_orphans ON spans(session, trace_id, parent_span_id) WHERE orphan IS NOT 0",
            # A row changed by another program (the writer never updates a row): not plain until read again.
            """CREATE TRIGGER spans_updated_receipt AFTER UPDATE OF name, attributes, events, links, scope, observer,
                sequence ON spans BEGIN
                UPDATE spans SET plain = NULL WHERE rowid = new.rowid;
            END""",
            # A row whose ids or session change under another program: its trace is looked at again, as after
            # a delete (the writer never updates these columns).
            """CREATE TRIGGER spans_updated_summaries AFTER UPDATE OF trace_id, span_id, parent_span_id, session
                ON spans BEGIN
                INSERT OR IGNORE INTO summary_dirty (trace_id, session)
                    VALUES (old.trace_id, coalesce(old.session, ''));
                INSERT OR IGNORE INTO summary_dirty (trace_id, session)
                    VALUES (new.trace_id, coalesce(new.session, ''));
            END""",
        ),
    ),
    Migration(
        14,
        "one index for a session's rows and its receipt",
        # spans_session, widened, serves what spans_receipt did: a session's rows by time (listing, retention)
        # and, covering, the receipt's figures (per session; a session of several observers is read again per
        # observer). One B-tree fewer to write per span: about 10k instructions of the worker's per span.
        (
            "DROP INDEX IF EXISTS spans_receipt",
            "DROP INDEX IF EXISTS spans_session",
            "CREATE INDEX spans_session ON spans(session, start_ns, observer, sequence, plain)",
        ),
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version

_CREATE_MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
)"""


def applied_versions(conn: sqlite3.Connection) -> list[int]:
    return [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]


def _newer_error(version: int) -> StoreError:
    return StoreError(
        f"the store has schema version {version}, newer than this otel-agentdiag "
        f"understands ({LATEST_VERSION}); upgrade otel-agentdiag"
    )


def _up_to_date(conn: sqlite3.Connection) -> bool:
    """Whether every migration is applied, found by reading only (so a read-only store can be opened).

    Raises :class:`StoreError` for a store written by a newer version.
    """
    (app_id,) = conn.execute("PRAGMA application_id").fetchone()
    if app_id != APPLICATION_ID:
        return False
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if has_table is None:
        return False
    current = applied_versions(conn)
    if current and current[-1] > LATEST_VERSION:
        raise _newer_error(current[-1])
    return {m.version for m in MIGRATIONS} <= set(current)


def is_up_to_date(conn: sqlite3.Connection) -> bool:
    """Whether every migration is applied (reads only). Raises :class:`StoreError` for a store written by a newer
    version."""
    return _up_to_date(conn)


def check_not_newer(conn: sqlite3.Connection) -> None:
    """Raise :class:`StoreError` for a store written by a newer version. Reads only, so a refused store is left
    exactly as it was (checked before anything, even the journal mode, is changed)."""
    _up_to_date(conn)


def migrate(conn: sqlite3.Connection) -> list[int]:
    """Bring the database to :data:`LATEST_VERSION`; returns the versions applied now.

    ``conn`` must be in autocommit mode (``isolation_level=None``): each migration runs in its own
    ``BEGIN IMMEDIATE`` transaction, so two processes opening a new store at once do not both apply it.
    """
    if _up_to_date(conn):
        return []
    done: list[int] = []
    for migration in MIGRATIONS:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Checked inside the write transaction: another process may have initialised the file meanwhile.
            check_ownership(conn)
            conn.execute(_CREATE_MIGRATIONS_TABLE)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            current = applied_versions(conn)
            if current and current[-1] > LATEST_VERSION:
                raise _newer_error(current[-1])
            if migration.version in current:
                conn.execute("COMMIT")
                continue
            for statement in migration.statements:
                conn.execute(statement)
            if migration.backfill is not None:
                migration.backfill(conn)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, datetime.now(timezone.utc).isoformat()),
            )
            conn.execute("COMMIT")
            done.append(migration.version)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return done
