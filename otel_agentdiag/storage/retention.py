"""Retention: the limits, the per-span size limit, and pruning inside the writer's transaction.

Pruning runs on writes (and on :meth:`~otel_agentdiag.storage.SpanStore.prune`), never on a timer. The first
limit reached prunes the oldest rows (by ``start_ns``) of its scope: a session, or the whole store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from otel_agentdiag import semconv as sc

DEFAULT_MAX_SESSION_SPANS = 10_000
DEFAULT_MAX_SESSION_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_SESSION_AGE_S = 30 * 24 * 3600.0
DEFAULT_MAX_STORE_BYTES = 1024 * 1024 * 1024
DEFAULT_MAX_SPAN_BYTES = 256 * 1024

STORE_DROPPED_ATTRIBUTES = "agentdiag.store.dropped_attributes"
"""Set on a span the store shrank to ``max_span_bytes``: how many attributes it removed (whole values)."""
STORE_DROPPED_EVENTS = "agentdiag.store.dropped_events"
"""Set on a span the store shrank to ``max_span_bytes``: how many events it removed (whole events)."""

_PROTECTED_PREFIX = "agentdiag."
_PROTECTED_KEYS = frozenset({sc.GEN_AI_CONVERSATION_ID, sc.SESSION_ID})


@dataclass(frozen=True)
class RetentionLimits:
    """How much the store keeps; ``None`` switches a limit off. Defaults:

    - ``max_session_spans`` = 10 000 spans per session;
    - ``max_session_bytes`` = 64 MiB per session;
    - ``max_session_age_s`` = 30 days (a span older than this, by its start time relative to the time of the
      write, is pruned; applied to every row on each write, an indexed check);
    - ``max_store_bytes`` = 1 GiB for the whole store;
    - ``max_span_bytes`` = 256 KiB per span.

    Sizes are the UTF-8 bytes of a span's name and its JSON columns (attributes, events, links, scope) — the
    ``size`` column — not the file size (pages, indexes and the WAL add to the file). Spans outside any session
    form one bucket that the per-session limits apply to as well.

    The first limit reached prunes the oldest rows (by start time) of that scope until the scope is within its
    limits again. Pruning runs on writes, for the sessions the batch touched and for the store, and on
    ``SpanStore.prune()`` for every session; pruned counts are cumulative per session and per store.
    A span larger than ``max_span_bytes`` loses whole attribute values, largest first, then whole events,
    until it fits (never a truncated value); the span then carries ``agentdiag.store.dropped_attributes``
    (and ``agentdiag.store.dropped_events``) with the counts. ``agentdiag.*`` attributes and the session id
    are never dropped, so a span can stay above the limit when those alone exceed it.
    """

    max_session_spans: int | None = DEFAULT_MAX_SESSION_SPANS
    max_session_bytes: int | None = DEFAULT_MAX_SESSION_BYTES
    max_session_age_s: float | None = DEFAULT_MAX_SESSION_AGE_S
    max_store_bytes: int | None = DEFAULT_MAX_STORE_BYTES
    max_span_bytes: int = DEFAULT_MAX_SPAN_BYTES

    def __post_init__(self) -> None:
        for name in ("max_session_spans", "max_session_bytes", "max_session_age_s", "max_store_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not value >= 0):
                raise ValueError(f"{name} must be None or >= 0, not {value!r}")
        if isinstance(self.max_span_bytes, bool) or not self.max_span_bytes > 0:
            raise ValueError(f"max_span_bytes must be > 0, not {self.max_span_bytes!r}")


def nbytes(text: str) -> int:
    """UTF-8 length of ``text`` (``length(CAST(text AS BLOB))`` in SQLite)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _protected(key: str) -> bool:
    return key.startswith(_PROTECTED_PREFIX) or key in _PROTECTED_KEYS


@dataclass(frozen=True, slots=True)
class Fitted:
    attributes: dict[str, Any]
    events: list[dict[str, Any]]
    attributes_json: str
    events_json: str
    size: int
    dropped_attributes: int
    dropped_events: int


def fit_span(
    attributes: Mapping[str, Any],
    events: list[dict[str, Any]],
    attributes_json: str,
    events_json: str,
    size: int,
    max_bytes: int,
    encode: Callable[[Any], str],
) -> Fitted | None:
    """Shrink a span to ``max_bytes``: drop whole attributes (largest first), then whole events (largest first).

    ``size`` is the span's current size and ``encode`` the store's JSON encoder. Returns None when nothing can
    be dropped. What removing a value saves is known from its own encoding (an underestimate by at most a
    comma), so values are dropped on that estimate and the span is re-encoded only when the estimate fits:
    never more is dropped than dropping one at a time and measuring each time would.
    """
    fixed = size - nbytes(attributes_json) - nbytes(events_json)
    attrs = dict(attributes)
    removed_events: set[int] = set()
    # Removing '"k":v' from an object saves its encoding minus the braces plus one comma.
    items: list[tuple[int, bool, Any]] = sorted(
        ((nbytes(encode({key: value})) - 1, True, key) for key, value in attrs.items() if not _protected(key)),
        key=lambda item: (-item[0], item[2]),
    )
    items += sorted(
        ((nbytes(encode(event)) + 1, False, i) for i, event in enumerate(events)), key=lambda it: (-it[0], it[2])
    )
    if not items:
        return None
    dropped_a = dropped_e = 0

    def measure() -> Fitted:
        out = dict(attrs)
        if dropped_a:
            out[STORE_DROPPED_ATTRIBUTES] = dropped_a
        if dropped_e:
            out[STORE_DROPPED_EVENTS] = dropped_e
        kept = [event for i, event in enumerate(events) if i not in removed_events] if removed_events else events
        a_json, e_json = encode(out), encode(kept)
        return Fitted(out, kept, a_json, e_json, fixed + nbytes(a_json) + nbytes(e_json), dropped_a, dropped_e)

    current: Fitted | None = None
    total = estimate = size
    for cost, is_attribute, ref in items:
        if total <= max_bytes:
            break
        if is_attribute:
            del attrs[ref]
            dropped_a += 1
        else:
            removed_events.add(ref)
            dropped_e += 1
        estimate -= cost
        current = None
        if estimate <= max_bytes:
            current = measure()
            total = estimate = current.size
    return current if current is not None else measure()


# -- pruning (inside the writer's transaction) ----------------------------------------------------------------


@dataclass
class Pruned:
    """Rows deleted in one transaction, per session key ('' = no session)."""

    spans: int = 0
    bytes: int = 0

    def add(self, other: Pruned) -> None:
        self.spans += other.spans
        self.bytes += other.bytes


def delete_rows(conn: sqlite3.Connection, victims: Iterable[tuple[int, int, str | None]]) -> dict[str, Pruned]:
    """Delete ``(rowid, size, session)`` rows; count them per session and in the running totals.

    Updates ``sessions`` (span_count, bytes, pruned_*) and ``store_stats`` (span_count, total_bytes,
    pruned_*). Returns the per-session counts.
    """
    per_session: dict[str, Pruned] = {}
    rowids = []
    for rowid, size, session in victims:
        rowids.append((rowid,))
        entry = per_session.get(session or "")
        if entry is None:
            entry = per_session[session or ""] = Pruned()
        entry.spans += 1
        entry.bytes += size
    if not rowids:
        return per_session
    conn.executemany("DELETE FROM spans WHERE rowid = ?", rowids)
    total = Pruned()
    for key, entry in per_session.items():
        conn.execute(
            "UPDATE sessions SET span_count = span_count - ?, bytes = bytes - ?,"
            " pruned_spans = pruned_spans + ?, pruned_bytes = pruned_bytes + ? WHERE session = ?",
            (entry.spans, entry.bytes, entry.spans, entry.bytes, key),
        )
        total.add(entry)
    conn.execute(
        "UPDATE store_stats SET span_count = span_count - ?, total_bytes = total_bytes - ?,"
        " pruned_spans = pruned_spans + ?, pruned_bytes = pruned_bytes + ? WHERE id = 1",
        (total.spans, total.bytes, total.spans, total.bytes),
    )
    return per_session


def prune_by_age(conn: sqlite3.Connection, limits: RetentionLimits, now_ns: int) -> dict[str, Pruned]:
    """Delete rows that started more than ``max_session_age_s`` before ``now_ns`` (an indexed check)."""
    if limits.max_session_age_s is None:
        return {}
    cutoff = now_ns - int(limits.max_session_age_s * 1_000_000_000)
    (oldest,) = conn.execute("SELECT MIN(start_ns) FROM spans").fetchone()
    if oldest is None or oldest >= cutoff:
        return {}
    victims = conn.execute("SELECT rowid, size, session FROM spans WHERE start_ns < ?", (cutoff,)).fetchall()
    return delete_rows(conn, victims)


def prune_session(
    conn: sqlite3.Connection, limits: RetentionLimits, session: str, span_count: int, size: int
) -> dict[str, Pruned]:
    """Delete the oldest rows of ``session`` ('' = no session) until it is within its span and byte limits."""
    max_spans, max_bytes = limits.max_session_spans, limits.max_session_bytes
    over_spans = max_spans is not None and span_count > max_spans
    over_bytes = max_bytes is not None and size > max_bytes
    if not (over_spans or over_bytes):
        return {}
    key = session or None
    victims: list[tuple[int, int, str | None]] = []
    count, total = span_count, size
    # Oldest first, ties by number (then row): the order of spans_session, so no sort.
    cursor = conn.execute(
        "SELECT rowid, size FROM spans WHERE session IS ? ORDER BY start_ns, observer, sequence, plain, rowid", (key,)
    )
    for rowid, row_size in cursor:
        if not ((max_spans is not None and count > max_spans) or (max_bytes is not None and total > max_bytes)):
            break
        victims.append((rowid, row_size, key))
        count -= 1
        total -= row_size
    cursor.close()
    return delete_rows(conn, victims)


def prune_store(conn: sqlite3.Connection, limits: RetentionLimits, total_bytes: int) -> dict[str, Pruned]:
    """Delete the oldest rows of the store until its bytes are within ``max_store_bytes``."""
    limit = limits.max_store_bytes
    if limit is None or total_bytes <= limit:
        return {}
    victims: list[tuple[int, int, str | None]] = []
    remaining = total_bytes
    cursor = conn.execute("SELECT rowid, size, session FROM spans ORDER BY start_ns, rowid")
    for rowid, row_size, session in cursor:
        if remaining <= limit:
            break
        victims.append((rowid, row_size, session))
        remaining -= row_size
    cursor.close()
    return delete_rows(conn, victims)
