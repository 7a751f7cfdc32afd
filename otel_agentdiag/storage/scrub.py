"""Scrubbing: after rows are deleted, no byte of them is left in the store's files (database, ``-wal``, ``-shm``).

Deleting a row is not enough. Where SQLite leaves the bytes of a deleted row (WAL mode, as the store runs):

- **free space in pages.** A DELETE frees the row's cells and, when a page empties, the page (to the freelist);
  overflow pages of a large value are freed too. Without ``PRAGMA secure_delete`` all of them keep their bytes.
  The store sets ``secure_delete = ON`` on every connection, so what SQLite frees is overwritten with zeros,
  retention's pruning included.
- **stale copies.** When SQLite rebalances a b-tree (an insert that splits a page, a delete that merges two), it
  rebuilds pages and copies cells between siblings; the old copy of a moved cell stays in the unused gap of the
  page it left, which ``secure_delete`` does not zero. That copy belongs to a live row then, and outlives the row
  when it is deleted later. Measured on SQLite 3.40 with ``secure_delete = ON``: after 3,000 random inserts and
  deletes in an indexed table, 0 to 3 of about 2,200 deleted rows still had a copy in some page (with it OFF:
  about 460). On the store itself (issue 22, SQLite 3.40.1, ``secure_delete = ON``, every session cleared with
  ``clear_session(scrub=False)`` then ``wal_checkpoint(TRUNCATE)``, no VACUUM; 10% of the spans with a value
  spilling to overflow pages): in each of 11 trials of 60 sessions written in interleaved batches of 10 spans and
  30 of them cleared, 0 to 3 cleared sessions left bytes in the database, every copy in the unused gap of a live
  leaf page: a whole span record (ids, name, attributes, events) in ``spans``, keys in the ``spans_name`` index and
  the primary key's ``sqlite_autoindex_spans_1``, a trace's summary row in ``trace_summaries`` or a key of
  ``trace_summaries_session``; none in a freelist page (zeroed), an overflow page or the ``-wal`` (truncated).
  With the ``VACUUM`` below (5 of those trials run again), none. So ``secure_delete`` plus a checkpoint does not
  keep the promise, and the rewrite stays (SQLite offers no way to zero a page's unused gap short of rewriting
  the page: this build has no ``sqlite_dbpage``).
- **the WAL.** Every committed version of a page is a frame in ``-wal`` until the WAL is reset: the versions from
  before the delete too. A checkpoint copies frames into the database only as far as no reader still needs them
  (a connection with an open read transaction pins its snapshot), and it leaves the file as long as it was.
- **the ``-shm``** is the WAL's index: page numbers, frame numbers, salts and checksums, never page content.

So :func:`scrub` rewrites the whole file and resets the WAL:

1. ``VACUUM``: the database is rebuilt from its live rows into fresh pages (a temporary database), then written
   back over every page of the file through the WAL; nothing deleted is in any page of it. Table rowids may be
   renumbered where a table has no ``INTEGER PRIMARY KEY`` (the store keys nothing on them across transactions).
2. ``PRAGMA wal_checkpoint(TRUNCATE)``: every frame is copied into the database, the database file is cut to its
   new size and the ``-wal`` to zero bytes. It is complete only when SQLite reports ``busy == 0`` and every
   frame of the log checkpointed (``log == checkpointed``); otherwise the report says it is not.

A writer that appends later (an agent still writing other sessions) writes frames of the new file only. An idle
connection (no open read transaction) does not block the checkpoint; a reader in the middle of a read
transaction does, for as long as it stays in it (SQLite waits the connection's busy timeout first).

Limits (what no database can promise): copies made outside these three files (backups, snapshots, copies of the
file, the file system's journal, blocks the file system or an SSD's wear levelling keeps after a truncation) are
out of reach. ``VACUUM`` builds the new file in an unlinked temporary file (mode 0600, in ``SQLITE_TMPDIR``,
``TMPDIR`` or ``/var/tmp``): it holds the rows that stay, never a deleted one. A rewrite needs free disk space of
about twice the database and holds the write lock while it runs, so a writer waiting longer than its busy timeout
retries its batch (and counts it lost when its retries run out).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

_logger = logging.getLogger(__name__)

REASON_BUSY = "checkpoint_busy"
"""Another connection kept the WAL from being checkpointed and truncated (an open read transaction, or a write
that outlasted the busy timeout)."""
REASON_VACUUM_FAILED = "vacuum_failed"
"""The file could not be rewritten (``VACUUM`` failed: locked, disk full, a damaged page...)."""
REASON_CHECKPOINT_FAILED = "checkpoint_failed"
"""The checkpoint itself failed with an error (not a busy report)."""
REASONS = (REASON_BUSY, REASON_VACUUM_FAILED, REASON_CHECKPOINT_FAILED)


@dataclass(frozen=True, slots=True)
class ScrubReport:
    """What one :func:`scrub` did. ``complete``: no byte of a row deleted before it is left in the files."""

    complete: bool
    path: str
    reason: str | None = None
    """One of :data:`REASONS` when not complete."""
    detail: str = ""
    """SQLite's error message, for ``vacuum_failed`` and ``checkpoint_failed``."""
    wal_frames: int = 0
    """Frames in the WAL at the checkpoint (-1: the store is not in WAL mode)."""
    checkpointed: int = 0
    """Of those, frames copied into the database."""

    @property
    def problem(self) -> str:
        """Why the bytes may remain, as a clause ('' when complete)."""
        where = f"{self.path} and its -wal"
        if self.reason == REASON_BUSY:
            return (
                f"their bytes may remain in {where}: another connection holds a read transaction open on the store"
                f" (or kept it locked), so the WAL could not be checkpointed and truncated"
                f" ({self.checkpointed} of {self.wal_frames} frames copied)"
            )
        if self.reason == REASON_VACUUM_FAILED:
            return f"their bytes may remain in {where}: the file could not be rewritten without them ({self.detail})"
        if self.reason == REASON_CHECKPOINT_FAILED:
            return f"their bytes may remain in {where}: the WAL could not be checkpointed ({self.detail})"
        return ""

    def advice(self, again: str = "the same call") -> str:
        """What to do, ending in running ``again`` again ('' when complete)."""
        if self.complete:
            return ""
        if self.reason == REASON_VACUUM_FAILED and "full" in self.detail:
            return f"free disk space (a rewrite needs about twice the store's size), then run {again} again"
        return f"stop the other process reading the store (or wait for it to finish), then run {again} again"


class ScrubIncomplete(Exception):
    """Rows were deleted (``deleted`` of them, committed), but their bytes may still be in the store's files.

    Raised by :meth:`SpanStore.clear_session <otel_agentdiag.storage.SpanStore.clear_session>` after the delete;
    ``report`` says why and what to do. Running the same clear again once the other reader is gone finishes it.
    """

    def __init__(self, report: ScrubReport, *, deleted: int) -> None:
        self.report = report
        self.deleted = deleted
        super().__init__(f"{deleted} span(s) deleted, but {report.problem}; {report.advice()}")


def scrub(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> ScrubReport:
    """Rewrite the database from its live rows and reset its WAL (see the module docstring); never raises for a
    busy, full or damaged store: the report says what was not done.

    ``conn`` must be in autocommit mode (``isolation_level=None``), outside a transaction, with no statement in
    progress; its busy timeout is how long SQLite waits for other connections. Raises ``ValueError`` when
    ``conn`` is inside a transaction.
    """
    if conn.in_transaction:
        raise ValueError("scrub needs a connection outside a transaction")
    where = os.fspath(Path(path))
    try:
        conn.execute("VACUUM")
    except sqlite3.Error as exc:
        _logger.warning("otel-agentdiag: could not rewrite %s: %s", where, exc)
        return ScrubReport(False, where, REASON_VACUUM_FAILED, detail=str(exc))
    try:
        busy, log, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error as exc:
        _logger.warning("otel-agentdiag: could not checkpoint %s: %s", where, exc)
        return ScrubReport(False, where, REASON_CHECKPOINT_FAILED, detail=str(exc))
    if log == -1 and done == -1 and not busy:
        # Not in WAL mode (a file system without shared memory): no -wal; VACUUM wrote the file itself.
        return ScrubReport(True, where, wal_frames=-1, checkpointed=-1)
    if busy or log != done:
        return ScrubReport(False, where, REASON_BUSY, wal_frames=int(log), checkpointed=int(done))
    return ScrubReport(True, where, wal_frames=int(log), checkpointed=int(done))
