"""``SpanStore``, the one owner of the SQLite database: a facade composed of the store's parts, one per module.

The writer, maintenance, reader, violation log and push marks each live in their own module; the names of the
store's rows and results are in :mod:`otel_agentdiag.storage.rows` (``from otel_agentdiag.storage import X``).
"""

from __future__ import annotations

from otel_agentdiag.storage.maintenance import StoreMaintenance
from otel_agentdiag.storage.push_marks import PushMarks
from otel_agentdiag.storage.queries import StoreReader
from otel_agentdiag.storage.violations import ViolationLog
from otel_agentdiag.storage.writer import StoreWriter

__all__ = ["SpanStore"]


class SpanStore(StoreWriter, StoreMaintenance, StoreReader, ViolationLog, PushMarks):
    """The SQLite trace store: WAL, busy timeout, numbered migrations, ``(trace_id, span_id)`` key.

    ``create=False`` opens an existing store only (readers): a missing file raises :class:`StoreError`.
    All methods are thread-safe. Constructing raises :class:`StoreError` for a file that is not a store.
    Opening an up-to-date store only reads, so a read-only store can be opened for reading.
    ``read_only=True`` (readers: the CLI's ``traces``, ``show``, ``sessions``, ``status``, ``receipt``, ``export``)
    never writes (``PRAGMA query_only``; SQLite's ``mode=ro`` where the folder cannot be written): no journal
    mode, no migration (a store of an older schema raises
    :class:`~otel_agentdiag.storage.connection.StoreNeedsUpgrade`), every write method raises; a store in a
    folder the user cannot write, or on read-only media, is read as it is (see
    :func:`~otel_agentdiag.storage.connection.read_only_uri`). The trust checks are the same.

    ``retention`` (None: the defaults of :class:`RetentionLimits`) applies on writes and :meth:`prune`.
    ``max_page_count`` caps the database file in pages (``PRAGMA max_page_count``, per connection; a write
    that needs more fails with ``sqlite3.OperationalError: database or disk is full``).

    Every write first checks that ``path`` still names the file that was opened: when the file (or its folder)
    was removed or replaced, writes raise :class:`StoreError` instead of going to an unlinked file.

    Trust before use (readers too: a planted store could feed forged traces): the folder, the database and any
    ``-wal``/``-shm`` must be owned by the effective user, not writable by group or others, and not symbolic
    links, checked on their opened descriptors (:mod:`otel_agentdiag.storage.trusted`); else constructing
    raises :class:`~otel_agentdiag._internal.trust.UntrustedPathError` (a ``ValueError``) and nothing is touched.

    Its parts: :class:`~otel_agentdiag.storage.connection.StoreConnection` (opening, transactions),
    :class:`~otel_agentdiag.storage.writer.StoreWriter` (writes), :class:`~otel_agentdiag.storage.maintenance.
    StoreMaintenance` (clear, prune, scrub), :class:`~otel_agentdiag.storage.queries.StoreReader` (reads),
    :class:`~otel_agentdiag.storage.violations.ViolationLog` and :class:`~otel_agentdiag.storage.push_marks.PushMarks`.
    """

    def __enter__(self) -> SpanStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
