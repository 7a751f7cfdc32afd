"""``SpanStore``: the one owner of the SQLite database. Exporters write through it; readers query it."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sqlite3
import stat
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otel_agentdiag import environment_variables as env
from otel_agentdiag._internal.spans import attribute_items
from otel_agentdiag.storage.migrations import StoreError, check_ownership, migrate

_logger = logging.getLogger(__name__)

DEFAULT_BUSY_TIMEOUT_S = 5.0
FILE_MODE = 0o600
DIR_MODE = 0o700


_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def row_json(value: Any) -> str:
    """Compact JSON for a row's columns (one shared encoder; tuples become arrays; empty lists are cheap)."""
    if not value:
        return "[]" if isinstance(value, (list, tuple)) else "{}"
    try:
        return _ENCODE(value)
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
        return json.dumps(_finite(value), separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


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


def _create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 (its folder 0700) unless it exists; tighten a loose mode."""
    parent = path.parent
    if not parent.exists():
        parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def _tighten(path: Path) -> None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077 and st.st_uid == os.getuid():
        _logger.warning("otel-agentdiag: %s was readable by others; setting mode 0600", path)
        os.chmod(path, FILE_MODE)


class SpanStore:
    """The SQLite trace store: WAL, busy timeout, numbered migrations, ``(trace_id, span_id)`` key.

    ``create=False`` opens an existing store only (readers): a missing file raises :class:`StoreError`.
    All methods are thread-safe. Constructing raises :class:`StoreError` for a file that is not a store.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, create: bool = True, busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S
    ):
        self.path = Path(path)
        if create:
            _create_private_file(self.path)
        elif not self.path.is_file():
            raise StoreError(f"no trace store at {self.path}")
        self._lock = threading.RLock()
        self._resource_ids: dict[str, int] = {}
        self._resource_objects: dict[int, tuple[Mapping[str, Any], int]] = {}
        try:
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            # Read-only checks first: a file that is not ours is left exactly as it was.
            check_ownership(self._conn)
            _tighten(self.path)
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode != "wal":
                _logger.warning("otel-agentdiag: %s could not switch to WAL (journal_mode=%s)", self.path, mode)
            self._conn.execute("PRAGMA synchronous = NORMAL")
            migrate(self._conn)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StoreError(f"{self.path} is not a usable otel-agentdiag store: {exc}") from exc
        except StoreError as exc:
            self._conn.close()
            raise StoreError(f"{self.path}: {exc}") from None
        for suffix in ("-wal", "-shm"):
            _tighten(Path(f"{self.path}{suffix}"))

    # -- writing --------------------------------------------------------------------------------------
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

        Raises ``sqlite3.Error`` (the transaction is rolled back and nothing of the batch is written).
        """
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                params = []
                for row in rows:
                    rid = self._resource_id(row.resource)
                    params.append(
                        (
                            row.trace_id,
                            row.span_id,
                            row.parent_span_id,
                            row.name,
                            row.kind,
                            row.span_kind,
                            row.start_ns,
                            row.end_ns,
                            row.status,
                            row.session,
                            row_json(row.attributes),
                            row_json(row.events),
                            row_json(row.links),
                            rid,
                            None if row.scope is None else row_json(row.scope),
                        )
                    )
                before = conn.total_changes
                conn.executemany(
                    "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, span_kind, start_ns, end_ns,"
                    " status, session, attributes, events, links, resource_id, scope)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (trace_id, span_id) DO NOTHING",
                    params,
                )
                written = conn.total_changes - before
                conn.execute("COMMIT")
            except BaseException:
                # ids inserted in the rolled-back transaction are gone
                self._resource_ids.clear()
                self._resource_objects.clear()
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return written

    # -- reading --------------------------------------------------------------------------------------
    def span_count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM spans").fetchone()[0])

    def list_traces(self, *, limit: int | None = None) -> list[TraceSummary]:
        """Traces, newest first (by the start of their earliest span)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT trace_id, MIN(start_ns), MAX(session), COUNT(*), SUM(status = 'error')"
                " FROM spans GROUP BY trace_id ORDER BY MIN(start_ns) DESC, trace_id LIMIT ?",
                (-1 if limit is None else limit,),
            ).fetchall()
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

    def resolve_trace_id(self, text: str) -> str:
        """The full trace id for ``text`` (a full id or a unique prefix of at least 4 hex digits)."""
        needle = text.strip().lower()
        if not (4 <= len(needle) <= 32) or any(c not in "0123456789abcdef" for c in needle):
            raise StoreError(f"not a trace id: {text!r} (expected 4 to 32 hex digits)")
        with self._lock:
            matches: list[str] = [
                row[0]
                for row in self._conn.execute(
                    "SELECT DISTINCT trace_id FROM spans WHERE trace_id >= ? AND trace_id < ? LIMIT 2",
                    (needle, needle + "g"),
                )
            ]
        if not matches:
            raise StoreError(f"no trace {text} in {self.path}")
        if len(matches) > 1:
            raise StoreError(f"trace id prefix {text} is ambiguous; give more digits")
        return matches[0]

    def get_trace(self, trace_id: str) -> list[StoredSpan]:
        """All spans of one trace, ordered by start time."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, s.span_kind, s.start_ns,"
                " s.end_ns, s.status, s.session, s.attributes, s.events, s.links, r.attributes, s.scope"
                " FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
                " WHERE s.trace_id = ? ORDER BY s.start_ns, s.span_id",
                (trace_id,),
            ).fetchall()
        return [_decode(row) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SpanStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
        corrupt=corrupt,
    )
