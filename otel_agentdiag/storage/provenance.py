"""Provenance: what this machine observed, and what it only imported (``agentdiag ingest``).

A file someone hands us can claim anything: an ``agentdiag.observer.id`` of one of our own pipelines, the
session digest of a session we recorded (copied from a support bundle), sequence numbers that collide with
ours. Nothing in it can be verified, so the store keeps imported spans apart from observed ones by
construction, not by checking claims:

- **Sessions.** An imported span is filed under the session key ``imported:<digest>`` (``imported:`` alone
  for imported spans outside any session), never under the digest itself. A live pipeline files under
  digests, which never start with ``imported:``. Everything the store keeps per session (the rows, the
  ledger rows, retention, the clear gate, pruned and cleared counts, violations) is therefore kept per
  provenance too: an import cannot add a row, a ledger entry, a violation or a pruned span to a session this
  machine observed, and a receipt or status of an observed session reads observed records only.
- **Observers.** ``observers.imported`` (schema version 6) records which observers wrote imported spans. An
  imported write whose observer the store recorded as observed is refused (``agentdiag ingest`` re-keys
  every claimed observer id with the store's key, so this takes a 64-bit collision).
- **Span ids.** ``(trace_id, span_id)`` is the store's key. An imported span whose ids an observed span
  already holds is a duplicate (not written). An observed span whose ids an imported span already holds (a
  forged span pre-empting a span that was still open) displaces it: the imported row is deleted, counted as
  pruned in its imported session, and the observed span is written. Observed data always wins.

Rows written before schema version 6 carry no provenance and read as observed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

__all__ = [
    "IMPORTED",
    "IMPORTED_PREFIX",
    "OBSERVED",
    "displace_imported",
    "imported_accounting",
    "imported_rows",
    "imported_session",
    "is_imported",
    "observed_digest",
    "provenance_of",
]

IMPORTED_PREFIX = "imported:"
"""The session keys of imported spans start with this (``imported:`` + the session digest)."""
OBSERVED = "observed"
IMPORTED = "imported"

_OCCUPANT = "SELECT rowid, size, session FROM spans WHERE trace_id = ? AND span_id = ?"


def imported_session(session: str | None) -> str:
    """The session key an imported span of ``session`` (a digest; None: outside any session) is filed under.
    Idempotent: a key that already is an imported one is returned as it is."""
    if session is not None and session.startswith(IMPORTED_PREFIX):
        return session
    return IMPORTED_PREFIX + (session or "")


def is_imported(session: str | None) -> bool:
    """Whether ``session`` (a stored session key) names imported spans."""
    return session is not None and session.startswith(IMPORTED_PREFIX)


def provenance_of(session: str | None) -> str:
    """``imported`` or ``observed``, from a stored session key."""
    return IMPORTED if is_imported(session) else OBSERVED


def observed_digest(session: str | None) -> str | None:
    """The session digest a stored key names (``imported:<digest>`` -> ``<digest>``; None for no session)."""
    if session is None:
        return None
    digest = session[len(IMPORTED_PREFIX) :] if session.startswith(IMPORTED_PREFIX) else session
    return digest or None


def imported_rows(rows: Sequence[Any]) -> list[Any]:
    """The rows (:class:`~otel_agentdiag.storage.SpanRow`) re-filed under imported session keys."""
    return [replace(row, session=imported_session(row.session)) for row in rows]


def imported_accounting(accounting: Any) -> Any:
    """The :class:`~otel_agentdiag.storage.Accounting` with its per-session deltas re-filed under imported keys."""
    if accounting is None:
        return None
    return replace(
        accounting,
        rejected={imported_session(s): dict(counts) for s, counts in accounting.rejected.items()},
        dropped={imported_session(s): dict(counts) for s, counts in accounting.dropped.items()},
    )


def displace_imported(
    conn: sqlite3.Connection, params: Sequence[tuple[Any, ...]], flags: list[bool], insert: str, delete: Any
) -> list[bool]:
    """After an observed batch was inserted: rows refused because an *imported* span holds their ids are
    written after all, in place of that span (``delete(conn, victims)`` removes it with its bookkeeping, as
    retention does). Returns the updated per-row "new" flags. Only rows not new are looked at (rare)."""
    out = list(flags)
    for index, new in enumerate(flags):
        if new:
            continue
        row = params[index]
        occupant = conn.execute(_OCCUPANT, (row[0], row[1])).fetchone()
        if occupant is None or not is_imported(occupant[2]):
            continue  # an observed span holds the ids (or an earlier row of this batch): a real duplicate
        delete(conn, [(occupant[0], occupant[1], occupant[2])])
        before = conn.total_changes
        conn.execute(insert, row)
        out[index] = conn.total_changes > before
    return out
