"""``SpanStore``: the one owner of the SQLite database. Exporters write through it; readers query it."""

from __future__ import annotations

import enum
import hashlib
import heapq
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otel_agentdiag import environment_variables as env
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.inputs import describe_input
from otel_agentdiag._internal.jsonsafe import finite
from otel_agentdiag._internal.spans import attribute_items
from otel_agentdiag.storage.migrations import StoreError, check_not_newer, check_ownership, is_empty, migrate
from otel_agentdiag.storage.provenance import (
    IMPORTED_PREFIX,
    displace_imported,
    imported_accounting,
    imported_rows,
    is_imported,
)
from otel_agentdiag.storage.retention import (
    Pruned,
    RetentionLimits,
    delete_rows,
    fit_span,
    nbytes,
    prune_by_age,
    prune_session,
    prune_store,
)
from otel_agentdiag.storage.scrub import ScrubIncomplete, ScrubReport
from otel_agentdiag.storage.scrub import scrub as scrub_files
from otel_agentdiag.storage.trusted import StoreFiles, open_store_files

_logger = logging.getLogger(__name__)

DEFAULT_BUSY_TIMEOUT_S = 5.0
FILE_MODE = 0o600
DIR_MODE = 0o700


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_C_MAKE_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_ENCODE_STRING = json.encoder.encode_basestring


def _encode(value: Any) -> str:
    """``_ENCODER.encode(value)`` for a dict or list, without the set-up ``encode`` repeats on every call."""
    if _C_MAKE_ENCODER is None:
        return _ENCODER.encode(value)
    # A fresh markers dict per call, as JSONEncoder.iterencode makes (circular references raise ValueError).
    encode = _C_MAKE_ENCODER({}, _ENCODER.default, _ENCODE_STRING, None, ":", ",", False, False, False)
    return "".join(encode(value, 0))


def row_json(value: Any) -> str:
    """Compact JSON for a row's columns (one shared encoder; tuples become arrays; empty lists are cheap)."""
    if not value:
        return "[]" if isinstance(value, (list, tuple)) else "{}"
    try:
        if type(value) is dict or type(value) is list:
            return _encode(value)
        return _ENCODER.encode(value)
    except ValueError:
        return canonical_json(value)


def default_store_path() -> Path:
    """``AGENTDIAG_STORE`` or ``./.agentdiag/traces.db`` (relative to the current directory)."""
    return Path(os.environ.get(env.AGENTDIAG_STORE) or env.DEFAULT_STORE)


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON; non-finite floats become strings rather than invalid JSON."""
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(finite(value), separators=(",", ":"), sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class SpanRow:
    """One span as the store keeps it (attributes, events, links and resource already plain data)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    span_kind: str
    start_ns: int
    end_ns: int | None
    status: str
    session: str | None
    attributes: dict[str, Any]
    """Values are attribute values: scalars, or tuples/lists of scalars (stored as JSON arrays)."""
    events: list[dict[str, Any]]
    links: list[dict[str, Any]]
    resource: Mapping[str, Any]
    """Resource attributes; spans sharing one mapping object share one ``resources`` row (cached by identity)."""
    scope: dict[str, Any] | None
    observer: str | None = None
    """``agentdiag.observer.id`` of the pipeline that saw the span (None: unknown)."""
    sequence: int | None = None
    """``agentdiag.sequence``: the span's number within (observer, session), from 0 (None: not numbered)."""

    @property
    def imported(self) -> bool:
        """Whether the span was imported (``agentdiag ingest``), not observed here: its session key is
        ``imported:...`` (see :mod:`otel_agentdiag.storage.provenance`)."""
        return is_imported(self.session)


@dataclass(frozen=True, slots=True)
class ContentRow:
    """One captured value of a span, encoded: what ``span_content`` keeps (see ``otel_agentdiag.content``)."""

    role: str
    """Which content: a ``semconv.CONTENT_*`` name such as ``gen_ai.input.messages``."""
    encoding: str
    """The lossless form's format, e.g. ``agentdiag-content/1``."""
    lossless: bytes
    projection: str
    """A JSON projection of the value, with explicit markers for what JSON cannot hold."""

    @property
    def size(self) -> int:
        return len(self.lossless) + len(self.projection.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class StoredContent(ContentRow):
    """A captured value read back from the store."""

    span_id: str = ""
    stored_size: int = 0


@dataclass(frozen=True, slots=True)
class StoredSpan(SpanRow):
    """A span read back from the store."""

    corrupt: bool = False
    """True when a stored JSON column could not be decoded (the span is shown with what could be read)."""

    @property
    def duration_ns(self) -> int | None:
        return None if self.end_ns is None else self.end_ns - self.start_ns


@dataclass(frozen=True, slots=True)
class TraceSummary:
    trace_id: str
    name: str
    start_ns: int
    end_ns: int | None
    status: str
    span_count: int
    error_count: int
    session: str | None

    @property
    def duration_ns(self) -> int | None:
        return None if self.end_ns is None else self.end_ns - self.start_ns


@dataclass
class Accounting:
    """Counts the pipeline reports with a batch (or alone, through :meth:`SpanStore.record_accounting`).

    ``rejected`` and ``dropped`` are DELTAS since the last successful write: session digest (None = no
    session) -> reason/cause -> n (counts that are not positive integers are ignored). Each delta adds to
    ``observed`` as well as to ``rejected``/``dropped`` of the (observer, session) row. The last five fields
    are ABSOLUTE values for the observer's row of ``observers`` (replaced, not added).
    """

    observer: str
    rejected: dict[str | None, dict[str, int]] = field(default_factory=dict)
    dropped: dict[str | None, dict[str, int]] = field(default_factory=dict)
    peak_queue: int = 0
    queue_limit: int = 0
    flush_attempts: int = 0
    flush_failures: int = 0
    pid: int = field(default_factory=os.getpid)
    started_ns: int = 0


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What one :meth:`SpanStore.write_batch` did."""

    inserted: int = 0
    """Rows written."""
    duplicates: int = 0
    """Rows already stored (same trace and span id), not written again."""
    cleared: int = 0
    """Rows not written because their session was cleared after they started."""
    pruned: int = 0
    """Rows deleted by retention in this transaction."""
    oversize_attributes: int = 0
    """Attributes removed from spans larger than ``max_span_bytes``."""


@dataclass(frozen=True, slots=True)
class PruneResult:
    """Rows (and their bytes) deleted by :meth:`SpanStore.prune`."""

    spans: int = 0
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One session as the rows show it (``session=None``: spans outside any session), plus its clear/prune
    bookkeeping. ``last_activity_ns`` is the latest end (or start) of its spans; None without rows."""

    session: str | None
    span_count: int
    bytes: int
    first_start_ns: int | None
    last_activity_ns: int | None
    trace_ids: tuple[str, ...]
    cleared_at_ns: int | None
    generation: int
    pruned_spans: int
    cleared_spans: int = 0
    """Rows deleted by :meth:`SpanStore.clear_session`, cumulative."""


@dataclass(frozen=True, slots=True)
class SessionStats:
    """The cumulative ledger of one (observer, session): ``observed == accepted + sum(rejected) + sum(dropped)``.

    ``observer`` is ``''`` for rows written without an observer and without accounting; ``session`` is None
    for spans outside any session. ``stored`` counts rows written (a duplicate is accepted, not stored).
    """

    observer: str
    session: str | None
    observed: int
    accepted: int
    stored: int
    duplicates: int
    rejected: dict[str, int]
    dropped: dict[str, int]


@dataclass(frozen=True, slots=True)
class ObserverInfo:
    """One pipeline instance: the values of its last accounting (``pid`` is None if it never sent one)."""

    observer: str
    pid: int | None
    started_ns: int | None
    last_seen_ns: int | None
    peak_queue: int
    queue_limit: int
    flush_attempts: int
    flush_failures: int
    imported: bool = False
    """Whether the observer wrote imported spans (``agentdiag ingest``), not spans observed here."""


@dataclass(frozen=True, slots=True)
class StoreSummary:
    """The whole store: rows and bytes (counted from the rows), cumulative pruned counts, malformed rows and the
    number of distinct sessions with rows."""

    span_count: int
    total_bytes: int
    pruned_spans: int
    pruned_bytes: int
    malformed_rows: int
    session_count: int


class _AllSessions(enum.Enum):
    ALL = "all"


ALL_SESSIONS = _AllSessions.ALL
"""Default of :meth:`SpanStore.session_stats`: every session."""


DROP_QUEUE_FULL = "queue_full"
DROP_EXPORT_FAILURE = "export_failure"
DROP_SHUTDOWN = "shutdown"
DROP_CLEARED = "cleared"
DROP_CAUSES = (DROP_QUEUE_FULL, DROP_EXPORT_FAILURE, DROP_SHUTDOWN, DROP_CLEARED)
"""The causes a span can be dropped for (keys of :attr:`SessionStats.dropped`)."""
REJECT_REDACTOR_ERROR = "redactor_error"
"""A span the redactor could not rebuild (keys of :attr:`SessionStats.rejected`)."""

_TOMBSTONE = sc.AGENTDIAG_REDACTION_PREFIX + REJECT_REDACTOR_ERROR
"""The attribute that marks a redaction tombstone: stored, but counted rejected."""

_INSERT_SPAN = (
    "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, span_kind, start_ns, end_ns,"
    " status, session, attributes, events, links, resource_id, scope, observer, sequence, size)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (trace_id, span_id) DO NOTHING"
)

_TRACE_TOTALS = "SELECT MIN(start_ns), MAX(session), COUNT(*), SUM(status = 'error') FROM spans WHERE trace_id = ?"
"""What ``list_traces`` shows of one trace (its GROUP BY row, read through the key)."""

_NOTHING = object()
"""A sentinel no row field is."""

_ROWID_OF_SPAN = "SELECT rowid FROM spans WHERE trace_id = ? AND span_id = ?"
_MAX_ROWID = (1 << 63) - 1
"""SQLite's largest rowid: once a table holds it, new rows get random unused rowids."""

_SPAN_COLUMNS = (
    "s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, s.span_kind, s.start_ns, s.end_ns, s.status,"
    " s.session, s.attributes, s.events, s.links, r.attributes, s.scope, s.observer, s.sequence"
)


class _Tally:
    """Deltas for one (observer, session) row of ``session_stats`` within one transaction."""

    __slots__ = ("accepted", "dropped", "duplicates", "observed", "rejected", "stored")

    def __init__(self) -> None:
        self.observed = self.accepted = self.stored = self.duplicates = 0
        self.rejected: dict[str, int] = {}
        self.dropped: dict[str, int] = {}

    def add_rejected(self, reason: str, n: int) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + n

    def add_dropped(self, cause: str, n: int) -> None:
        self.dropped[cause] = self.dropped.get(cause, 0) + n


def _add_accounting(tallies: dict[tuple[str, str], _Tally], accounting: Accounting) -> None:
    """Add the accounting's rejected/dropped deltas (each also ``observed``); non-positive counts are ignored."""
    for deltas, rejected in ((accounting.rejected, True), (accounting.dropped, False)):
        for session, counts in deltas.items():
            key = (accounting.observer, session or "")
            for reason, n in counts.items():
                if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                    continue
                tally = tallies.get(key)
                if tally is None:
                    tally = tallies[key] = _Tally()
                tally.observed += n
                if rejected:
                    tally.add_rejected(str(reason), n)
                else:
                    tally.add_dropped(str(reason), n)


def _load_counts(text: Any) -> dict[str, int]:
    """A ``{reason: n}`` column; anything malformed reads as empty (never raises)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


def _merge_counts(base: dict[str, int], delta: dict[str, int]) -> dict[str, int]:
    out = dict(base)
    for key, n in delta.items():
        out[key] = out.get(key, 0) + n
    return out


def _session_summary(
    session: str, count: int, size: int, first: int | None, last: int | None, traces: str | None, known: Any
) -> SessionSummary:
    """A :class:`SessionSummary` from a session's counted rows and its ``sessions`` row (``known``, or None)."""
    cleared, generation, pruned, cleared_spans = known if known is not None else (None, 0, 0, 0)
    return SessionSummary(
        session=session or None,
        span_count=int(count),
        bytes=int(size),
        first_start_ns=first,
        last_activity_ns=last,
        trace_ids=tuple(sorted(str(traces).split(","))) if traces else (),
        cleared_at_ns=cleared,
        generation=int(generation or 0),
        pruned_spans=int(pruned or 0),
        cleared_spans=int(cleared_spans or 0),
    )


class SpanStore:
    """The SQLite trace store: WAL, busy timeout, numbered migrations, ``(trace_id, span_id)`` key.

    ``create=False`` opens an existing store only (readers): a missing file raises :class:`StoreError`.
    All methods are thread-safe. Constructing raises :class:`StoreError` for a file that is not a store.
    Opening an up-to-date store only reads, so a read-only store can be opened for reading.

    ``retention`` (None: the defaults of :class:`RetentionLimits`) applies on writes and :meth:`prune`.
    ``max_page_count`` caps the database file in pages (``PRAGMA max_page_count``, per connection; a write
    that needs more fails with ``sqlite3.OperationalError: database or disk is full``).

    Every write first checks that ``path`` still names the file that was opened: when the file (or its folder)
    was removed or replaced, writes raise :class:`StoreError` instead of going to an unlinked file.

    Trust before use (readers too: a planted store could feed forged traces): the folder, the database and any
    ``-wal``/``-shm`` must be owned by the effective user, not writable by group or others, and not symbolic
    links, checked on their opened descriptors (:mod:`otel_agentdiag.storage.trusted`); else constructing
    raises :class:`~otel_agentdiag._internal.trust.UntrustedPathError` (a ``ValueError``) and nothing is touched.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S,
        retention: RetentionLimits | None = None,
        max_page_count: int | None = None,
    ):
        self.path = Path(path)
        self.retention = RetentionLimits() if retention is None else retention
        files = open_store_files(self.path, create=create)  # ours and private, or UntrustedPathError
        try:
            self._connect(files, create=create, busy_timeout=busy_timeout, max_page_count=max_page_count)
        finally:
            files.close()

    def _connect(self, files: StoreFiles, *, create: bool, busy_timeout: float, max_page_count: int | None) -> None:
        self._lock = threading.RLock()
        self._resource_ids: dict[str, int] = {}
        self._resource_objects: dict[int, tuple[Mapping[str, Any], int]] = {}
        try:
            self._conn = sqlite3.connect(
                files.connect_path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            # Read-only checks first: a file that is not ours is left exactly as it was.
            check_ownership(self._conn)
            if not create and is_empty(self._conn):
                # An empty file (or one of a byte: SQLite reads it as an empty database) is not a store yet; a
                # reader must not turn it into one (a writer creates it with create=True).
                raise StoreError("not an otel-agentdiag store yet (the file is empty)")
            check_not_newer(self._conn)
            files.tighten_database()
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode != "wal":
                _logger.warning("otel-agentdiag: %s could not switch to WAL (journal_mode=%s)", self.path, mode)
            self._conn.execute("PRAGMA synchronous = NORMAL")
            # Whatever SQLite frees (a clear, retention's pruning) is overwritten with zeros, not left in free space.
            self._conn.execute("PRAGMA secure_delete = ON")
            migrate(self._conn)
            if max_page_count is not None:
                self._conn.execute(f"PRAGMA max_page_count = {int(max_page_count)}")
            files.verify()  # the files SQLite opened are the ones checked; its -wal/-shm ours and 0600
            st = os.stat(self.path)
            self._identity = (st.st_dev, st.st_ino)
        except OSError as exc:
            self._conn.close()
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StoreError(f"{self.path} is not a usable otel-agentdiag store: {exc}") from exc
        except UnicodeDecodeError:
            # A damaged schema: sqlite3 cannot even decode SQLite's message about it (which quotes the damage).
            self._conn.close()
            raise StoreError(f"{self.path} is not a usable otel-agentdiag store: its schema is damaged") from None
        except StoreError as exc:
            self._conn.close()
            raise StoreError(f"{self.path}: {exc}") from None
        except BaseException:
            self._conn.close()
            raise

    # -- writing --------------------------------------------------------------------------------------
    def _check_file(self) -> None:
        """Raise :class:`StoreError` unless ``path`` still names the opened database file."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise StoreError(f"the store {self.path} is gone ({exc.strerror})") from None
        if (st.st_dev, st.st_ino) != self._identity:
            raise StoreError(f"the store {self.path} was replaced by another file")

    def _resource_id(self, resource: Mapping[str, Any]) -> int:
        by_object = self._resource_objects.get(id(resource))
        if by_object is not None and by_object[0] is resource:
            return by_object[1]
        text = canonical_json({k: list(v) if isinstance(v, tuple) else v for k, v in attribute_items(resource)})
        digest = hashlib.sha256(text.encode()).hexdigest()
        rid = self._resource_ids.get(digest)
        if rid is None:
            self._conn.execute("INSERT OR IGNORE INTO resources (digest, attributes) VALUES (?, ?)", (digest, text))
            (rid,) = self._conn.execute("SELECT id FROM resources WHERE digest = ?", (digest,)).fetchone()
            self._resource_ids[digest] = rid
        if len(self._resource_objects) >= 64:
            self._resource_objects.clear()
        # Keep a reference to the mapping, so its id cannot be reused by another object while cached.
        self._resource_objects[id(resource)] = (resource, rid)
        return int(rid)

    def write_spans(self, rows: Sequence[SpanRow]) -> int:
        """Write ``rows`` in one transaction; returns how many were new (a span already stored is kept).

        A thin wrapper over :meth:`write_batch` (so stats and retention apply). Raises ``sqlite3.Error``
        (the transaction is rolled back and nothing of the batch is written).
        """
        return self.write_batch(rows).inserted

    def write_batch(
        self,
        rows: Sequence[SpanRow],
        accounting: Accounting | None = None,
        *,
        now_ns: int | None = None,
        content: Sequence[Sequence[ContentRow] | None] | None = None,
        imported: bool = False,
    ) -> WriteResult:
        """Write ``rows`` and the pipeline's ``accounting`` deltas in ONE transaction (``BEGIN IMMEDIATE``).

        In order: rows of a cleared session that started at or before the clear are not written (counted
        ``dropped["cleared"]``); a row larger than ``max_span_bytes`` is shrunk (see :class:`RetentionLimits`);
        rows are inserted, a span already stored is kept (counted as a duplicate); ``session_stats`` gets one
        upsert per (observer, session) of the batch and of the accounting, so that per row of that table
        ``observed == accepted + sum(rejected) + sum(dropped)``; the observer row is upserted; retention
        prunes the touched sessions and the store. A row's observer is ``row.observer``, else
        ``accounting.observer``, else ``''``; its session key is ``row.session`` or ``''``.

        ``content`` (from ``configure(capture_content=True)``), parallel to ``rows``: the captured content of
        each row, written only with a row that is new (a duplicate keeps what it has); its bytes count in the
        span's ``size``, so retention covers them.

        ``imported=True`` (``agentdiag ingest``): the rows and the accounting are filed under imported session
        keys (``imported:<digest>``) and their observers are recorded as imported; a batch naming an observer
        the store recorded as observed raises :class:`StoreError` with nothing written. An observed row whose
        ids an imported row holds displaces it (see :mod:`otel_agentdiag.storage.provenance`).

        Raises ``sqlite3.Error`` (or :class:`StoreError`) with the whole transaction rolled back: stats are
        then unchanged too, and the caller may retry the same batch.
        """
        if content is not None and len(content) != len(rows):
            raise ValueError("content must be parallel to rows")
        if imported:
            if content is not None:
                raise ValueError("imported spans carry no captured content")
            rows, accounting = imported_rows(rows), imported_accounting(accounting)
        now = time.time_ns() if now_ns is None else now_ns
        default_observer = accounting.observer if accounting is not None else ""
        limits = self.retention
        max_span = limits.max_span_bytes
        with self._transaction():
            tallies: dict[tuple[str, str], _Tally] = {}
            cleared_at = self._cleared_gates({row.session for row in rows}) if rows else {}
            params: list[tuple[Any, ...]] = []
            # per row to insert: (its tally, session key, size, is a tombstone)
            pending: list[tuple[_Tally, str, int, bool]] = []
            pending_content: list[tuple[str, str, Sequence[ContentRow]]] = []
            content_of: list[int] = []  # per row of `pending`: its index in pending_content, or -1
            n_cleared = oversize = 0
            last_key: tuple[str, str] | None = None
            tally = _Tally()
            resource_id = self._resource_id
            # Spans of one provider and tracer share their resource mapping and scope dict: within this batch,
            # the same object gets the same resource row and the same JSON.
            last_resource: Any = _NOTHING
            last_scope: Any = _NOTHING
            rid = 0
            s_json: str | None = None
            for index, row in enumerate(rows):
                session = row.session or ""
                observer = row.observer or default_observer
                key = (observer, session)
                if key != last_key:
                    last_key = key
                    found = tallies.get(key)
                    tally = tallies[key] = _Tally() if found is None else found
                tally.observed += 1
                if cleared_at:
                    gate = cleared_at.get(session)
                    if gate is not None and row.start_ns <= gate:
                        tally.add_dropped(DROP_CLEARED, 1)
                        n_cleared += 1
                        continue
                attributes = row.attributes
                a_json = row_json(attributes)
                events, links, scope = row.events, row.links, row.scope
                e_json = row_json(events) if events or not isinstance(events, (list, tuple)) else "[]"
                l_json = row_json(links) if links or not isinstance(links, (list, tuple)) else "[]"
                if scope is not last_scope:
                    last_scope = scope
                    s_json = None if scope is None else row_json(scope)
                resource = row.resource
                if resource is not last_resource:
                    last_resource = resource
                    rid = resource_id(resource)
                name = row.name
                # UTF-8 bytes of the name and the JSON columns (a non-text name counts as SQLite casts it).
                joined = f"{name}{a_json}{e_json}{l_json}{s_json or ''}"
                size = len(joined) if joined.isascii() else nbytes(joined)
                if size > max_span:
                    fitted = fit_span(attributes, events, a_json, e_json, size, max_span, row_json)
                    if fitted is not None:
                        a_json, e_json, size = fitted.attributes_json, fitted.events_json, fitted.size
                        oversize += fitted.dropped_attributes
                captured = content[index] if content is not None else None
                if captured:
                    content_of.append(len(pending_content))
                    pending_content.append((row.trace_id, row.span_id, captured))
                    size += sum(item.size for item in captured)
                elif content is not None:
                    content_of.append(-1)
                params.append(
                    (
                        row.trace_id,
                        row.span_id,
                        row.parent_span_id,
                        name,
                        row.kind,
                        row.span_kind,
                        row.start_ns,
                        row.end_ns,
                        row.status,
                        row.session or None,
                        a_json,
                        e_json,
                        l_json,
                        rid,
                        s_json,
                        observer or None,
                        row.sequence,
                        size,
                    )
                )
                pending.append((tally, session, size, _TOMBSTONE in attributes))
            inserted_flags = self._insert(params)
            if not imported and not all(inserted_flags):
                inserted_flags = displace_imported(self._conn, params, inserted_flags, _INSERT_SPAN, delete_rows)
            if pending_content:
                self._insert_content(
                    [pending_content[at] for at, new in zip(content_of, inserted_flags, strict=True) if new and at >= 0]
                )
            inserted = 0
            added: dict[str, list[int]] = {}  # session -> [spans, bytes] written now
            for (tally, session, size, tombstone), new in zip(pending, inserted_flags, strict=True):
                if new:
                    inserted += 1
                    tally.stored += 1
                    if tombstone:
                        tally.add_rejected(REJECT_REDACTOR_ERROR, 1)
                    else:
                        tally.accepted += 1
                    entry = added.get(session)
                    if entry is None:
                        added[session] = [1, size]
                    else:
                        entry[0] += 1
                        entry[1] += size
                else:
                    tally.accepted += 1
                    tally.duplicates += 1
            if accounting is not None:
                _add_accounting(tallies, accounting)
            self._upsert_stats(tallies)
            self._upsert_observers(accounting, {obs for obs, _session in tallies if obs}, now, imported=imported)
            pruned = self._apply_written(added, now)
        return WriteResult(
            inserted=inserted,
            duplicates=len(pending) - inserted,
            cleared=n_cleared,
            pruned=pruned.spans,
            oversize_attributes=oversize,
        )

    def _insert_content(self, spans: list[tuple[str, str, Sequence[ContentRow]]]) -> None:
        self._conn.executemany(
            "INSERT OR REPLACE INTO span_content"
            " (trace_id, span_id, role, encoding, lossless, projection, size) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (trace_id, span_id, item.role, item.encoding, item.lossless, item.projection, item.size)
                for trace_id, span_id, items in spans
                for item in items
            ],
        )

    def record_accounting(self, accounting: Accounting, *, now_ns: int | None = None) -> None:
        """Persist ``accounting`` alone (drops and rejections when no rows are written) in one transaction.

        Raises ``sqlite3.Error`` with the transaction rolled back.
        """
        now = time.time_ns() if now_ns is None else now_ns
        with self._transaction():
            tallies: dict[tuple[str, str], _Tally] = {}
            _add_accounting(tallies, accounting)
            self._upsert_stats(tallies)
            self._upsert_observers(accounting, set(), now)

    def clear_session(self, session_digest: str, *, now_ns: int | None = None, scrub: bool = True) -> int:
        """Delete the session's spans, their captured content and push marks (not its stats), advance its
        generation gate, then (``scrub``, the default) rewrite the files; returns spans deleted.

        Spans of the session that started at or before ``now_ns`` and arrive later are not written (counted
        ``dropped["cleared"]`` for their observer). The session's digest stays in the gate (``sessions``) and in
        its ledger rows (``session_stats``), so receipts still account for what was observed.

        With ``scrub`` (see :meth:`scrub`), a return means no byte of a deleted span or its content is left in
        the database, its ``-wal`` or ``-shm``. When that cannot be made to hold (another connection holds a read
        transaction open, say), :class:`~otel_agentdiag.storage.scrub.ScrubIncomplete` is raised AFTER the delete
        was committed (its ``deleted`` is the count); the same call again, once that reader is gone, finishes it.
        ``scrub=False`` only deletes (freed space is zeroed, but copies can remain until a :meth:`scrub`): for
        clearing several sessions and scrubbing once. Raises ``sqlite3.Error`` with nothing changed.
        """
        if not isinstance(session_digest, str) or not session_digest:
            raise StoreError("clear_session needs a session digest")
        now = time.time_ns() if now_ns is None else now_ns
        with self._transaction() as conn:
            count, size = conn.execute(
                "SELECT COUNT(*), coalesce(SUM(size), 0) FROM spans WHERE session = ?", (session_digest,)
            ).fetchone()
            conn.execute(
                "DELETE FROM push_marks WHERE EXISTS (SELECT 1 FROM spans s WHERE s.session = ?"
                " AND s.trace_id = push_marks.trace_id AND s.span_id = push_marks.span_id)",
                (session_digest,),
            )
            conn.execute("DELETE FROM spans WHERE session = ?", (session_digest,))
            conn.execute(
                "INSERT INTO sessions (session, cleared_at_ns, generation, cleared_spans) VALUES (?, ?, 1, ?)"
                " ON CONFLICT (session) DO UPDATE SET"
                " cleared_at_ns = max(coalesce(cleared_at_ns, excluded.cleared_at_ns), excluded.cleared_at_ns),"
                " generation = generation + 1, cleared_spans = cleared_spans + excluded.cleared_spans,"
                " span_count = 0, bytes = 0",
                (session_digest, now, count),
            )
            self._store_totals()
            conn.execute(
                "UPDATE store_stats SET span_count = span_count - ?, total_bytes = total_bytes - ? WHERE id = 1",
                (count, size),
            )
        if scrub:
            report = self.scrub()
            if not report.complete:
                raise ScrubIncomplete(report, deleted=int(count))
        return int(count)

    def scrub(self) -> ScrubReport:
        """Rewrite the file from its live rows (``VACUUM``) and reset its WAL (``wal_checkpoint(TRUNCATE)``), so
        that no byte of a row deleted before (cleared, pruned, by this or an earlier version) is left in the
        database, its ``-wal`` or ``-shm``; see :mod:`otel_agentdiag.storage.scrub` for how and its limits.

        Never raises for a busy, full or damaged store: the report's ``complete`` is False and says why (other
        connections are waited for up to the busy timeout). Raises :class:`StoreError` when the file is gone.
        """
        with self._lock:
            self._check_file()
            return scrub_files(self._conn, self.path)

    def prune(self, *, now_ns: int | None = None) -> PruneResult:
        """Apply every retention limit to every session and the store now; returns what was deleted.

        Also recomputes the running totals (rows and bytes per session and per store) from the rows, and forgets
        the push marks of spans no longer stored. What is deleted is zeroed where SQLite frees it; call
        :meth:`scrub` after it for no byte of a pruned span to be left. Raises ``sqlite3.Error`` with nothing
        changed.
        """
        now = time.time_ns() if now_ns is None else now_ns
        limits = self.retention
        with self._transaction() as conn:
            conn.execute("UPDATE sessions SET span_count = 0, bytes = 0")
            conn.execute(
                "INSERT INTO sessions (session, span_count, bytes)"
                " SELECT coalesce(session, ''), COUNT(*), SUM(size) FROM spans WHERE true"
                " GROUP BY coalesce(session, '')"
                " ON CONFLICT (session) DO UPDATE SET span_count = excluded.span_count, bytes = excluded.bytes"
            )
            conn.execute(
                "INSERT INTO store_stats (id, span_count, total_bytes)"
                " SELECT 1, COUNT(*), coalesce(SUM(size), 0) FROM spans WHERE true"
                " ON CONFLICT (id) DO UPDATE SET span_count = excluded.span_count,"
                " total_bytes = excluded.total_bytes"
            )
            total = Pruned()
            for entry in prune_by_age(conn, limits, now).values():
                total.add(entry)
            conditions, args = [], []
            if limits.max_session_spans is not None:
                conditions.append("span_count > ?")
                args.append(limits.max_session_spans)
            if limits.max_session_bytes is not None:
                conditions.append("bytes > ?")
                args.append(limits.max_session_bytes)
            if conditions:
                over = conn.execute(
                    f"SELECT session, span_count, bytes FROM sessions WHERE {' OR '.join(conditions)}", args
                ).fetchall()
                for session, count, size in over:
                    for entry in prune_session(conn, limits, session, count, size).values():
                        total.add(entry)
            for entry in prune_store(conn, limits, self._store_totals()[1]).values():
                total.add(entry)
            conn.execute(
                "DELETE FROM push_marks WHERE NOT EXISTS (SELECT 1 FROM spans s"
                " WHERE s.trace_id = push_marks.trace_id AND s.span_id = push_marks.span_id)"
            )
        return PruneResult(spans=total.spans, bytes=total.bytes)

    # -- writing: parts of one transaction ---------------------------------------------------------------
    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``) under the store's lock, on a file that is still ours:
        committed when the block ends, rolled back (with the resource caches) when it raises."""
        with self._lock:
            self._check_file()
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def _rollback(self) -> None:
        # ids inserted in the rolled-back transaction are gone
        self._resource_ids.clear()
        self._resource_objects.clear()
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def _cleared_gates(self, sessions: set[str | None]) -> dict[str, int]:
        """``cleared_at_ns`` of those of ``sessions`` that were cleared."""
        keys = [s for s in sessions if s]
        gates: dict[str, int] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for session, cleared in self._conn.execute(
                f"SELECT session, cleared_at_ns FROM sessions WHERE cleared_at_ns IS NOT NULL AND session IN ({marks})",
                chunk,
            ):
                gates[session] = cleared
        return gates

    def _insert(self, params: list[tuple[Any, ...]]) -> list[bool]:
        """Insert the rows; returns, per row, whether it was new (False: that span is already stored, or an
        earlier row of the batch has its ids).

        One ``executemany`` and no savepoint (a savepoint copies every page it dirties into a statement
        journal). When some rows were not inserted, which ones is read back: a row inserted now has a rowid
        above the table's largest before the insert (SQLite gives a new row the largest rowid + 1 while that
        is below its maximum; near the maximum the rows are checked before the insert instead).
        """
        if not params:
            return []
        conn = self._conn
        (top,) = conn.execute("SELECT max(rowid) FROM spans").fetchone()
        top = 0 if top is None else int(top)
        if top > _MAX_ROWID - len(params):
            return self._insert_checked(params)
        before = conn.total_changes
        conn.executemany(_INSERT_SPAN, params)
        added = conn.total_changes - before
        if added == len(params):
            return [True] * len(params)
        flags: list[bool] = []
        seen: set[tuple[str, str]] = set()
        for row in params:
            key = (row[0], row[1])
            if key in seen:
                flags.append(False)
                continue
            seen.add(key)
            found = conn.execute(_ROWID_OF_SPAN, key).fetchone()
            flags.append(found is not None and found[0] > top)
        if sum(flags) != added:
            raise StoreError(f"{added} of {len(params)} spans were inserted, but {sum(flags)} are new")
        return flags

    def _insert_checked(self, params: list[tuple[Any, ...]]) -> list[bool]:
        """:meth:`_insert` for a table whose rowids are near the maximum: which spans are stored is read first."""
        conn = self._conn
        flags: list[bool] = []
        seen: set[tuple[str, str]] = set()
        new: list[tuple[Any, ...]] = []
        for row in params:
            key = (row[0], row[1])
            fresh = key not in seen and conn.execute(_ROWID_OF_SPAN, key).fetchone() is None
            seen.add(key)
            flags.append(fresh)
            if fresh:
                new.append(row)
        before = conn.total_changes
        conn.executemany(_INSERT_SPAN, new)
        if conn.total_changes - before != len(new):
            raise StoreError(f"{conn.total_changes - before} of {len(new)} new spans were inserted")
        return flags

    def _upsert_stats(self, tallies: dict[tuple[str, str], _Tally]) -> None:
        conn = self._conn
        plain: list[tuple[str, str, int, int, int, int]] = []  # rows with no rejections or drops: one executemany
        for (observer, session), t in tallies.items():
            if t.rejected or t.dropped:
                found = conn.execute(
                    "SELECT rejected, dropped FROM session_stats WHERE observer = ? AND session = ?",
                    (observer, session),
                ).fetchone()
                rejected = _merge_counts(_load_counts(found[0]) if found else {}, t.rejected)
                dropped = _merge_counts(_load_counts(found[1]) if found else {}, t.dropped)
                conn.execute(
                    "INSERT INTO session_stats (observer, session, observed, accepted, stored, duplicates,"
                    " rejected, dropped) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (observer, session) DO UPDATE SET observed = observed + excluded.observed,"
                    " accepted = accepted + excluded.accepted, stored = stored + excluded.stored,"
                    " duplicates = duplicates + excluded.duplicates, rejected = excluded.rejected,"
                    " dropped = excluded.dropped",
                    (
                        observer,
                        session,
                        t.observed,
                        t.accepted,
                        t.stored,
                        t.duplicates,
                        canonical_json(rejected),
                        canonical_json(dropped),
                    ),
                )
            else:
                plain.append((observer, session, t.observed, t.accepted, t.stored, t.duplicates))
        if plain:
            conn.executemany(
                "INSERT INTO session_stats (observer, session, observed, accepted, stored, duplicates)"
                " VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (observer, session) DO UPDATE SET observed = observed + excluded.observed,"
                " accepted = accepted + excluded.accepted, stored = stored + excluded.stored,"
                " duplicates = duplicates + excluded.duplicates",
                plain,
            )

    def _upsert_observers(
        self, accounting: Accounting | None, seen: set[str], now: int, *, imported: bool = False
    ) -> None:
        conn = self._conn
        if imported:
            names = sorted(seen | ({accounting.observer} if accounting is not None and accounting.observer else set()))
            for start in range(0, len(names), 500):
                chunk = names[start : start + 500]
                if conn.execute(
                    f"SELECT 1 FROM observers WHERE imported = 0 AND observer IN ({','.join('?' * len(chunk))})"
                    " LIMIT 1",
                    chunk,
                ).fetchone():
                    raise StoreError("imported spans name an observer this store recorded as observed; none written")
        flag = 1 if imported else 0
        if accounting is not None and accounting.observer:
            conn.execute(
                "INSERT INTO observers (observer, pid, started_ns, last_seen_ns, peak_queue, queue_limit,"
                f" flush_attempts, flush_failures, imported) VALUES (?, ?, ?, ?, ?, ?, ?, ?, {flag})"
                " ON CONFLICT (observer) DO UPDATE SET pid = excluded.pid, started_ns = excluded.started_ns,"
                " last_seen_ns = excluded.last_seen_ns, peak_queue = excluded.peak_queue,"
                " queue_limit = excluded.queue_limit, flush_attempts = excluded.flush_attempts,"
                " flush_failures = excluded.flush_failures",
                (
                    accounting.observer,
                    accounting.pid,
                    accounting.started_ns,
                    now,
                    accounting.peak_queue,
                    accounting.queue_limit,
                    accounting.flush_attempts,
                    accounting.flush_failures,
                ),
            )
            seen = seen - {accounting.observer}
        for observer in seen:
            conn.execute(
                f"INSERT INTO observers (observer, last_seen_ns, imported) VALUES (?, ?, {flag})"
                " ON CONFLICT (observer) DO UPDATE SET last_seen_ns = excluded.last_seen_ns"
                # at most once a second: an unchanged row dirties no page
                " WHERE excluded.last_seen_ns >= coalesce(last_seen_ns, 0) + 1000000000",
                (observer, now),
            )

    def _store_totals(self) -> tuple[int, int]:
        """``(span_count, total_bytes)`` of the running totals (recomputed if their row is missing)."""
        found = self._conn.execute("SELECT span_count, total_bytes FROM store_stats WHERE id = 1").fetchone()
        if found is None:
            found = self._conn.execute("SELECT COUNT(*), coalesce(SUM(size), 0) FROM spans").fetchone()
            self._conn.execute(
                "INSERT INTO store_stats (id, span_count, total_bytes) VALUES (1, ?, ?)", (found[0], found[1])
            )
        return int(found[0]), int(found[1])

    def _apply_written(self, added: dict[str, list[int]], now: int) -> Pruned:
        """Add the written rows to the running totals, then apply retention; returns what was pruned."""
        conn = self._conn
        limits = self.retention
        total = Pruned()
        if not added:
            return total
        spans = sum(count for count, _bytes in added.values())
        size = sum(nbytes_ for _count, nbytes_ in added.values())
        conn.executemany(
            "INSERT INTO sessions (session, span_count, bytes) VALUES (?, ?, ?)"
            " ON CONFLICT (session) DO UPDATE SET span_count = span_count + excluded.span_count,"
            " bytes = bytes + excluded.bytes",
            [(session, count, nbytes_) for session, (count, nbytes_) in added.items()],
        )
        _spans, store_bytes = self._store_totals()
        conn.execute(
            "UPDATE store_stats SET span_count = span_count + ?, total_bytes = total_bytes + ? WHERE id = 1",
            (spans, size),
        )
        store_bytes += size
        for entry in prune_by_age(conn, limits, now).values():
            total.add(entry)
        if limits.max_session_spans is not None or limits.max_session_bytes is not None:
            # Read after pruning by age; pruning one session changes no other session's counts.
            keys = list(added)
            counts: dict[str, tuple[int, int]] = {}
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                for session, span_count, nbytes_ in conn.execute(
                    f"SELECT session, span_count, bytes FROM sessions WHERE session IN ({','.join('?' * len(chunk))})",
                    chunk,
                ):
                    counts[session] = (span_count, nbytes_)
            for session in keys:
                span_count, nbytes_ = counts[session]
                for entry in prune_session(conn, limits, session, span_count, nbytes_).values():
                    total.add(entry)
        if limits.max_store_bytes is not None and store_bytes - total.bytes > limits.max_store_bytes:
            for entry in prune_store(conn, limits, store_bytes - total.bytes).values():
                total.add(entry)
        return total

    # -- reading --------------------------------------------------------------------------------------
    def span_count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM spans").fetchone()[0])

    def list_traces(self, *, limit: int | None = None) -> list[TraceSummary]:
        """Traces, newest first (by the start of their earliest span; ties by trace id).

        With a ``limit`` the newest traces are found by walking the start index from the newest span, so the
        cost follows the spans newer than the last trace listed, not the size of the store.
        """
        with self._lock:
            if limit is None or limit < 1:
                rows = self._conn.execute(
                    "SELECT trace_id, MIN(start_ns), MAX(session), COUNT(*), SUM(status = 'error')"
                    " FROM spans GROUP BY trace_id ORDER BY MIN(start_ns) DESC, trace_id LIMIT ?",
                    (-1 if limit is None else limit,),
                ).fetchall()
            else:
                rows = [
                    (trace_id, *self._conn.execute(_TRACE_TOTALS, (trace_id,)).fetchone())
                    for trace_id in self._newest_trace_ids(limit)
                ]
            out = []
            for trace_id, start_ns, session, count, errors in rows:
                root = self._conn.execute(
                    "SELECT name, status, start_ns, end_ns FROM spans WHERE trace_id = ?"
                    " ORDER BY parent_span_id IS NOT NULL, start_ns LIMIT 1",
                    (trace_id,),
                ).fetchone()
                name, status, root_start, root_end = root
                out.append(
                    TraceSummary(
                        trace_id=trace_id,
                        name=name,
                        start_ns=min(start_ns, root_start),
                        end_ns=root_end,
                        status=status,
                        span_count=int(count),
                        error_count=int(errors or 0),
                        session=session,
                    )
                )
            return out

    def _newest_trace_ids(self, limit: int) -> list[str]:
        """The ``limit`` trace ids with the latest earliest start (ties: smallest id first), newest first.

        Spans are read newest start first; each new trace's earliest start is looked up by its key. Once
        ``limit`` traces are known, a trace not seen yet has every span at or before the current position, so
        the walk stops when the position falls below the ``limit``-th latest earliest start found. Call with
        the lock held.
        """
        conn = self._conn
        earliest: dict[str, int] = {}
        heap: list[int] = []  # the `limit` latest earliest starts found so far (smallest first)
        cursor = conn.execute("SELECT start_ns, trace_id FROM spans ORDER BY start_ns DESC")
        try:
            for start_ns, trace_id in cursor:
                if len(heap) == limit and start_ns < heap[0]:
                    break
                if trace_id in earliest:
                    continue
                (first,) = conn.execute("SELECT MIN(start_ns) FROM spans WHERE trace_id = ?", (trace_id,)).fetchone()
                earliest[trace_id] = first
                if len(heap) < limit:
                    heapq.heappush(heap, first)
                elif first > heap[0]:
                    heapq.heapreplace(heap, first)
        finally:
            cursor.close()
        ordered = sorted(earliest.items(), key=lambda item: (-item[1], item[0]))
        return [trace_id for trace_id, _first in ordered[:limit]]

    def resolve_trace_id(self, text: str) -> str:
        """The full trace id for ``text`` (a full id or a unique prefix of at least 4 hex digits). Raises
        :class:`StoreError` with a message that describes ``text`` without repeating it."""
        needle = text.strip().lower()
        if not (4 <= len(needle) <= 32) or any(c not in "0123456789abcdef" for c in needle):
            raise StoreError(f"not a trace id: {describe_input(text)}; a trace id is 4 to 32 hex digits")
        with self._lock:
            matches: list[str] = [
                row[0]
                for row in self._conn.execute(
                    "SELECT DISTINCT trace_id FROM spans WHERE trace_id >= ? AND trace_id < ? LIMIT 2",
                    (needle, needle + "g"),
                )
            ]
        if not matches:
            raise StoreError(f"no trace in {self.path} matches the given id ({describe_input(text)})")
        if len(matches) > 1:
            raise StoreError(f"the given trace id prefix ({describe_input(text)}) is ambiguous; give more digits")
        return str(matches[0])

    def get_trace(self, trace_id: str) -> list[StoredSpan]:
        """All spans of one trace, ordered by start time."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
                " WHERE s.trace_id = ? ORDER BY s.start_ns, s.span_id",
                (trace_id,),
            ).fetchall()
        return [_decode(row) for row in rows]

    def trace_content(self, trace_id: str) -> list[StoredContent]:
        """The captured content of one trace's spans (local only: ``configure(capture_content=True)``), by
        span and in role order of capture. Empty for a trace captured without content."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT span_id, role, encoding, lossless, projection, size FROM span_content"
                " WHERE trace_id = ? ORDER BY span_id, id",
                (trace_id,),
            ).fetchall()
        found: list[StoredContent] = []
        for span_id, role, encoding, lossless, projection, size in rows:
            found.append(
                StoredContent(
                    role=str(role),
                    encoding=str(encoding),
                    lossless=bytes(lossless) if isinstance(lossless, (bytes, bytearray, memoryview)) else b"",
                    projection=projection if isinstance(projection, str) else "null",
                    span_id=str(span_id),
                    stored_size=size if isinstance(size, int) else 0,
                )
            )
        return found

    def content_summary(self) -> tuple[int, int]:
        """``(values, bytes)`` of captured content in the whole store."""
        with self._lock:
            count, size = self._conn.execute("SELECT COUNT(*), coalesce(SUM(size), 0) FROM span_content").fetchone()
        return int(count), int(size)

    def session_spans(self, session: str | None) -> list[StoredSpan]:
        """All spans of one session (None: spans outside any session), ordered by start time."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
                " WHERE s.session IS ? ORDER BY s.start_ns, s.span_id",
                (session or None,),
            ).fetchall()
        return [_decode(row) for row in rows]

    def list_sessions(self) -> list[SessionSummary]:
        """Sessions with rows or a ``sessions`` row (e.g. cleared), newest activity first.

        Counted from the rows themselves. Spans outside any session appear as ``session=None``, only when
        there are some. Sessions without rows (cleared or pruned empty) come last.
        """
        with self._lock:
            counted = self._conn.execute(
                "SELECT coalesce(session, ''), COUNT(*), coalesce(SUM(size), 0), MIN(start_ns),"
                " MAX(max(coalesce(end_ns, start_ns), start_ns)), group_concat(DISTINCT trace_id)"
                " FROM spans GROUP BY coalesce(session, '')"
            ).fetchall()
            known = {
                row[0]: row[1:]
                for row in self._conn.execute(
                    "SELECT session, cleared_at_ns, generation, pruned_spans, cleared_spans FROM sessions"
                )
            }
        out: list[SessionSummary] = []
        seen: set[str] = set()
        for session, count, size, first, last, traces in counted:
            seen.add(session)
            out.append(_session_summary(session, count, size, first, last, traces, known.get(session)))
        for session, (cleared, generation, pruned, cleared_spans) in known.items():
            if session in seen or not session:
                continue
            out.append(
                SessionSummary(
                    session=session,
                    span_count=0,
                    bytes=0,
                    first_start_ns=None,
                    last_activity_ns=None,
                    trace_ids=(),
                    cleared_at_ns=cleared,
                    generation=int(generation or 0),
                    pruned_spans=int(pruned or 0),
                    cleared_spans=int(cleared_spans or 0),
                )
            )
        out.sort(key=lambda s: (s.last_activity_ns is None, -(s.last_activity_ns or 0), s.session or ""))
        return out

    def session_summary(self, session: str | None) -> SessionSummary | None:
        """The entry :meth:`list_sessions` has for ``session`` (None: spans outside any session), or None when it
        has none; read through the session index, so its cost follows the session's size, not the store's."""
        key = session or ""
        where = "session = ?" if key else "(session IS NULL OR session = ?)"
        with self._lock:
            count, size, first, last, traces = self._conn.execute(
                "SELECT COUNT(*), coalesce(SUM(size), 0), MIN(start_ns),"
                " MAX(max(coalesce(end_ns, start_ns), start_ns)), group_concat(DISTINCT trace_id)"
                f" FROM spans WHERE {where}",
                (key,),
            ).fetchone()
            known = self._conn.execute(
                "SELECT cleared_at_ns, generation, pruned_spans, cleared_spans FROM sessions WHERE session = ?", (key,)
            ).fetchone()
        if not count and (not key or known is None):
            return None
        return _session_summary(key, count, size if count else 0, first, last, traces, known)

    def latest_session(self) -> str | None:
        """The first named session :meth:`list_sessions` lists (newest activity; ties: the smallest digest),
        observed sessions first: an imported session (``imported:...``) only when no observed session has rows;
        None when it lists none. What ``agentdiag status`` shows by default.

        Read through the start and end indexes: the newest activity of any span is its end or its start, so
        it is the larger of the newest end and the newest start among spans of a named session.
        """
        observed = f"session <> '' AND substr(session, 1, {len(IMPORTED_PREFIX)}) <> '{IMPORTED_PREFIX}'"
        with self._lock:
            conn = self._conn
            for named in (observed, "session <> ''"):
                newest: int | None = None
                for column in ("end_ns", "start_ns"):
                    found = conn.execute(
                        f"SELECT {column} FROM spans WHERE {column} IS NOT NULL AND {named}"
                        f" ORDER BY {column} DESC LIMIT 1"
                    ).fetchone()
                    if found is not None and (newest is None or found[0] > newest):
                        newest = found[0]
                if newest is not None:
                    # A span that ends or starts at the newest moment has it as its activity (nothing is newer).
                    (session,) = conn.execute(
                        f"SELECT MIN(session) FROM spans WHERE {named} AND (end_ns = ? OR start_ns = ?)",
                        (newest, newest),
                    ).fetchone()
                    return str(session)
            # No named session has rows: those left are cleared or pruned empty, listed by digest.
            (session,) = conn.execute("SELECT MIN(session) FROM sessions WHERE session <> ''").fetchone()
        return None if session is None else str(session)

    def session_stats(self, session: str | _AllSessions | None = ALL_SESSIONS) -> list[SessionStats]:
        """Cumulative stats rows, of one session (None: outside any session) or of all (the default)."""
        sql = "SELECT observer, session, observed, accepted, stored, duplicates, rejected, dropped FROM session_stats"
        args: tuple[Any, ...] = ()
        if not isinstance(session, _AllSessions):
            sql += " WHERE session = ?"
            args = (session or "",)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY session, observer", args).fetchall()
        return [
            SessionStats(
                observer=observer,
                session=sess or None,
                observed=int(observed or 0),
                accepted=int(accepted or 0),
                stored=int(stored or 0),
                duplicates=int(duplicates or 0),
                rejected=_load_counts(rejected),
                dropped=_load_counts(dropped),
            )
            for observer, sess, observed, accepted, stored, duplicates, rejected, dropped in rows
        ]

    def observers(self) -> list[ObserverInfo]:
        """Every observer that wrote rows or accounting, oldest start first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT observer, pid, started_ns, last_seen_ns, peak_queue, queue_limit, flush_attempts,"
                " flush_failures, imported FROM observers ORDER BY coalesce(started_ns, 0), observer"
            ).fetchall()
        return [
            ObserverInfo(
                observer=row[0],
                pid=row[1],
                started_ns=row[2],
                last_seen_ns=row[3],
                peak_queue=int(row[4] or 0),
                queue_limit=int(row[5] or 0),
                flush_attempts=int(row[6] or 0),
                flush_failures=int(row[7] or 0),
                imported=bool(row[8]),
            )
            for row in rows
        ]

    def store_summary(self) -> StoreSummary:
        """Rows and bytes counted from the rows; cumulative pruned counts; rows with malformed JSON columns.

        ``session_count`` is the number of distinct sessions with rows (spans outside any session not counted).
        """
        with self._lock:
            count, size, sessions = self._conn.execute(
                "SELECT COUNT(*), coalesce(SUM(size), 0), COUNT(DISTINCT session) FROM spans"
            ).fetchone()
            found = self._conn.execute("SELECT pruned_spans, pruned_bytes FROM store_stats WHERE id = 1").fetchone()
            malformed = self._malformed_rows()
        pruned_spans, pruned_bytes = found if found is not None else (0, 0)
        return StoreSummary(
            span_count=int(count),
            total_bytes=int(size),
            pruned_spans=int(pruned_spans),
            pruned_bytes=int(pruned_bytes),
            malformed_rows=malformed,
            session_count=int(sessions),
        )

    def _malformed_rows(self) -> int:
        """Rows that read back ``corrupt`` (a JSON column that does not decode to its type)."""
        try:
            (n,) = self._conn.execute(
                "SELECT COUNT(*) FROM spans s LEFT JOIN resources r ON r.id = s.resource_id WHERE"
                f" {_bad_json('s.attributes', 'object')} OR {_bad_json('s.events', 'array')}"
                f" OR {_bad_json('s.links', 'array')}"
                f" OR (s.scope IS NOT NULL AND {_bad_json('s.scope', 'object')})"
                f" OR (r.attributes IS NOT NULL AND {_bad_json('r.attributes', 'object')})"
            ).fetchone()
            return int(n)
        except sqlite3.OperationalError:  # an SQLite without JSON functions: decode every row
            rows = self._conn.execute(
                f"SELECT {_SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
            )
            return sum(1 for row in rows if _decode(row).corrupt)

    def resolve_session(self, text: str) -> str:
        """The stored session digest for ``text``: the digest itself, or a unique prefix of at least 4 characters
        of the digest or of its hex part (after the last ``:``). Raises :class:`StoreError` otherwise, with a
        message that describes ``text`` without repeating it."""
        needle = text.strip() if isinstance(text, str) else ""
        if not needle:
            raise StoreError("no session given")
        with self._lock:
            known = {
                row[0]
                for row in self._conn.execute(
                    "SELECT session FROM sessions WHERE session <> ''"
                    " UNION SELECT DISTINCT session FROM spans WHERE session IS NOT NULL"
                )
            }
        if needle in known:
            return needle
        if len(needle) < 4:
            raise StoreError(
                f"the given session prefix ({describe_input(text)}) is too short; give at least 4 characters"
            )
        lowered = needle.lower()
        matches = sorted(s for s in known if s.startswith(needle) or s.rsplit(":", 1)[-1].startswith(lowered))
        if not matches:
            raise StoreError(f"no session in {self.path} matches the given value ({describe_input(text)})")
        if len(matches) > 1:
            raise StoreError(
                f"the given session prefix ({describe_input(text)}) is ambiguous ({len(matches)} sessions);"
                " give more characters"
            )
        return str(matches[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SpanStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ingest violations --
    @dataclass(frozen=True, slots=True)
    class Violation:
        """One durable record of input that was not taken (``agentdiag ingest``: a malformed or rejected line).

        It names what and where, never the content: ``reason`` is a code, ``detail`` a location such as
        ``line 12``. ``session`` is the digest of the session the input belonged to, None when not known.
        """

        id: int
        recorded_ns: int
        source: str
        session: str | None
        reason: str
        detail: str

    _VIOLATION_CODE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
    _VIOLATION_DETAIL_CHARS = _VIOLATION_CODE_CHARS | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ .:,=#-")
    _VIOLATION_SESSION_MAX = 512

    @classmethod
    def _is_violation_code(cls, text: object) -> bool:
        """``[a-z][a-z0-9_]*``, at most 64 characters."""
        return (
            isinstance(text, str)
            and 0 < len(text) <= 64
            and text[0].isalpha()
            and all(c in cls._VIOLATION_CODE_CHARS for c in text)
        )

    def record_violations(
        self, source: str, entries: Sequence[tuple[str | None, str, str]], *, now_ns: int | None = None
    ) -> int:
        """Append violations of ``source`` (e.g. ``ingest``), each ``(session digest or None, reason, detail)``,
        in one transaction; returns how many were written.

        ``source`` and ``reason`` must be codes (``[a-z][a-z0-9_]*``), ``detail`` a short location (letters,
        digits, spaces and ``_.:,=#-``, at most 120 characters): anything else raises ``ValueError`` before
        anything is written, so input text cannot be stored here by mistake. Raises ``sqlite3.Error`` (or
        :class:`StoreError`) with nothing written.
        """
        now = time.time_ns() if now_ns is None else now_ns
        if not self._is_violation_code(source):
            raise ValueError("a violation source must be a code such as 'ingest'")
        rows: list[tuple[int, str, str, str, str]] = []
        for session, reason, detail in entries:
            if session is not None and (
                not isinstance(session, str) or len(session) > self._VIOLATION_SESSION_MAX or not session.isprintable()
            ):
                raise ValueError("a violation's session must be a session digest or None")
            if not self._is_violation_code(reason):
                raise ValueError("a violation reason must be a code such as 'malformed_json'")
            if not isinstance(detail, str) or len(detail) > 120 or not set(detail) <= self._VIOLATION_DETAIL_CHARS:
                raise ValueError("a violation detail must be a short location such as 'line 12'")
            rows.append((now, source, session or "", reason, detail))
        if not rows:
            return 0
        with self._transaction() as conn:
            conn.executemany(
                "INSERT INTO violations (recorded_ns, source, session, reason, detail) VALUES (?, ?, ?, ?, ?)", rows
            )
        return len(rows)

    def violations(self, session: str | _AllSessions | None = ALL_SESSIONS) -> list[SpanStore.Violation]:
        """Recorded violations, oldest first: of one session (None: those whose session is not known), or all."""
        sql = "SELECT id, recorded_ns, source, session, reason, detail FROM violations"
        args: tuple[Any, ...] = ()
        if not isinstance(session, _AllSessions):
            sql += " WHERE session = ?"
            args = (session or "",)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY id", args).fetchall()
        return [
            SpanStore.Violation(
                id=int(row[0]),
                recorded_ns=int(row[1]),
                source=str(row[2]),
                session=str(row[3]) or None,
                reason=str(row[4]),
                detail=str(row[5]),
            )
            for row in rows
        ]

    def violation_counts(self) -> dict[str | None, int]:
        """Violations per session digest (None: session not known); sessions without any are absent."""
        with self._lock:
            rows = self._conn.execute("SELECT session, COUNT(*) FROM violations GROUP BY session").fetchall()
        return {(str(session) or None): int(n) for session, n in rows}

    # -- push marks -----------------------------------------------------------------------------------
    # Which stored spans `agentdiag push` delivered to which endpoint. ``endpoint`` is always a digest of the
    # endpoint's normalised URL (``sha256:`` and 64 hex digits, see otel_agentdiag.diagnostics.push.endpoint_key),
    # never the URL itself: a URL may carry credentials. A value of any other shape raises ``ValueError``.
    @staticmethod
    def _check_push_endpoint(endpoint: str) -> None:
        digest = endpoint[7:] if isinstance(endpoint, str) and endpoint.startswith("sha256:") else ""
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError("a push-mark endpoint must be a digest ('sha256:' and 64 hex digits), not a URL")

    @staticmethod
    def _push_filter(sessions: Sequence[str] | None, since_ns: int | None) -> tuple[list[str], list[Any]]:
        """SQL conditions and their arguments: spans of ``sessions`` (None: all) started at/after ``since_ns``."""
        clauses: list[str] = []
        args: list[Any] = []
        if sessions is not None:
            chosen = sorted(set(sessions))
            clauses.append(f"s.session IN ({','.join('?' * len(chosen))})" if chosen else "0")
            args.extend(chosen)
        if since_ns is not None:
            clauses.append("s.start_ns >= ?")
            args.append(int(since_ns))
        return clauses, args

    def pushed_span_ids(self, endpoint: str) -> set[tuple[str, str]]:
        """``(trace_id, span_id)`` of every span marked as pushed to ``endpoint``."""
        self._check_push_endpoint(endpoint)
        with self._lock:
            rows = self._conn.execute("SELECT trace_id, span_id FROM push_marks WHERE endpoint = ?", (endpoint,))
            return {(str(t), str(s)) for t, s in rows}

    def mark_pushed(self, endpoint: str, ids: Sequence[tuple[str, str]], *, now_ns: int | None = None) -> int:
        """Mark spans as pushed to ``endpoint``, in one transaction; returns how many marks are new."""
        self._check_push_endpoint(endpoint)
        now = time.time_ns() if now_ns is None else now_ns
        params = [(endpoint, str(trace_id), str(span_id), now) for trace_id, span_id in ids]
        if not params:
            return 0
        with self._transaction() as conn:
            before = conn.total_changes
            conn.executemany(
                "INSERT INTO push_marks (endpoint, trace_id, span_id, pushed_ns) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (endpoint, trace_id, span_id) DO NOTHING",
                params,
            )
            return conn.total_changes - before

    def push_backlog(
        self, endpoint: str, *, sessions: Sequence[str] | None = None, since_ns: int | None = None
    ) -> tuple[int, int]:
        """``(not yet pushed, already pushed)``: the stored spans a push to ``endpoint`` selects, split by mark.

        ``sessions`` (None: every span, those outside any session included) and ``since_ns`` (spans that
        started at or after it) select as in :meth:`unpushed_spans`.
        """
        self._check_push_endpoint(endpoint)
        clauses, args = self._push_filter(sessions, since_ns)
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        with self._lock:
            total, pushed = self._conn.execute(
                "SELECT COUNT(*), COUNT(m.span_id) FROM spans s LEFT JOIN push_marks m"
                " ON m.endpoint = ? AND m.trace_id = s.trace_id AND m.span_id = s.span_id" + where,
                (endpoint, *args),
            ).fetchone()
        return int(total) - int(pushed), int(pushed)

    def unpushed_spans(
        self,
        endpoint: str,
        *,
        sessions: Sequence[str] | None = None,
        since_ns: int | None = None,
        batch_size: int = 512,
    ) -> Iterator[list[StoredSpan]]:
        """The selected spans not marked as pushed to ``endpoint``, in pages of up to ``batch_size``, ordered by
        (start time, trace id, span id). See :meth:`push_backlog` for ``sessions`` and ``since_ns``.

        Each page is one query under the lock (keyset pagination), so writers interleave between pages; a span
        stored meanwhile behind the current position is left for the next push.
        """
        self._check_push_endpoint(endpoint)
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        clauses, args = self._push_filter(sessions, since_ns)
        clauses.append("m.span_id IS NULL")
        after: tuple[Any, ...] = ()
        while True:
            where = " AND ".join([*clauses, "(s.start_ns, s.trace_id, s.span_id) > (?, ?, ?)"] if after else clauses)
            with self._lock:
                rows = self._conn.execute(
                    f"SELECT {_SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
                    " LEFT JOIN push_marks m ON m.endpoint = ? AND m.trace_id = s.trace_id AND m.span_id = s.span_id"
                    f" WHERE {where} ORDER BY s.start_ns, s.trace_id, s.span_id LIMIT ?",
                    (endpoint, *args, *after, batch_size),
                ).fetchall()
            if rows:
                yield [_decode(row) for row in rows]
            if len(rows) < batch_size:
                return
            after = (rows[-1][6], rows[-1][0], rows[-1][1])


def _decode(row: tuple[Any, ...]) -> StoredSpan:
    corrupt = False

    def load(text: Any, default: Any) -> Any:
        nonlocal corrupt
        if text is None:
            return default
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            corrupt = True
            return default
        if type(value) is not type(default):
            corrupt = True
            return default
        return value

    attributes = load(row[10], {})
    events = load(row[11], [])
    links = load(row[12], [])
    resource = load(row[13], {})
    scope = load(row[14], {}) if row[14] is not None else None
    sequence = row[16] if isinstance(row[16], int) and not isinstance(row[16], bool) else None
    return StoredSpan(
        trace_id=row[0],
        span_id=row[1],
        parent_span_id=row[2],
        name=row[3],
        kind=row[4],
        span_kind=row[5],
        start_ns=row[6],
        end_ns=row[7],
        status=row[8],
        session=row[9],
        attributes=attributes,
        events=events,
        links=links,
        resource=resource,
        scope=scope,
        observer=row[15] or None,
        sequence=sequence,
        corrupt=corrupt,
    )


def _bad_json(column: str, json_type: str) -> str:
    """SQL: ``column`` is not valid JSON of ``json_type`` (json_type is evaluated only on valid JSON)."""
    return f"(CASE WHEN json_valid({column}) THEN json_type({column}) <> '{json_type}' ELSE 1 END)"
