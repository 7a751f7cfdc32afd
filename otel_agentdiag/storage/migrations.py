"""Numbered schema migrations, each applied once in its own transaction and recorded in ``schema_migrations``.

Never edit a migration that has shipped: add the next number.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone


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


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


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
)

LATEST_VERSION = MIGRATIONS[-1].version

_CREATE_MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
)"""


def applied_versions(conn: sqlite3.Connection) -> list[int]:
    return [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]


def migrate(conn: sqlite3.Connection) -> list[int]:
    """Bring the database to :data:`LATEST_VERSION`; returns the versions applied now.

    ``conn`` must be in autocommit mode (``isolation_level=None``): each migration runs in its own
    ``BEGIN IMMEDIATE`` transaction, so two processes opening a new store at once do not both apply it.
    """
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
                raise StoreError(
                    f"the store has schema version {current[-1]}, newer than this otel-agentdiag "
                    f"understands ({LATEST_VERSION}); upgrade otel-agentdiag"
                )
            if migration.version in current:
                conn.execute("COMMIT")
                continue
            for statement in migration.statements:
                conn.execute(statement)
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
