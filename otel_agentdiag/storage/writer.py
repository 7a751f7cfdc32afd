"""Writing batches: spans, their content and the pipeline's accounting in one transaction, with retention."""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import reason_codes
from otel_agentdiag.storage.codec import canonical_json, row_json
from otel_agentdiag.storage.connection import StoreConnection
from otel_agentdiag.storage.ledger import Tally, add_accounting, store_totals, upsert_observers, upsert_stats
from otel_agentdiag.storage.migrations import StoreError
from otel_agentdiag.storage.provenance import displace_imported, imported_accounting, imported_rows, is_imported
from otel_agentdiag.storage.retention import (
    Pruned,
    delete_rows,
    fit_span,
    nbytes,
    prune_by_age,
    prune_session,
    prune_store,
)
from otel_agentdiag.storage.rows import (
    DROP_CLEARED,
    EXTRA_COLUMNS,
    REJECT_REDACTOR_ERROR,
    Accounting,
    ContentRow,
    SpanRow,
    WriteResult,
)
from otel_agentdiag.storage.summaries import record_batch

_TOMBSTONE = sc.AGENTDIAG_REDACTION_PREFIX + REJECT_REDACTOR_ERROR
"""The attribute that marks a redaction tombstone: stored, but counted rejected."""

_COLUMNS = (
    "trace_id, span_id, parent_span_id, name, kind, span_kind, start_ns, end_ns, status, session, attributes,"
    f" events, links, resource_id, scope, observer, sequence, {''.join(f'{name}, ' for name in EXTRA_COLUMNS)}"
    "size, plain, orphan"
)
_INSERT_SPAN = (
    f"INSERT INTO spans ({_COLUMNS}) VALUES ({', '.join('?' * (20 + len(EXTRA_COLUMNS)))})"
    " ON CONFLICT (trace_id, span_id) DO NOTHING"
)
"""The row's core columns as the writer encodes them, :data:`~.rows.EXTRA_COLUMNS` as the row holds them, then
the writer's own (``size``, ``plain``, ``orphan``: last, :func:`_flag_orphans` sets it)."""
_PARENT_STORED = (
    "UPDATE spans SET orphan = 0 WHERE trace_id = ?1 AND span_id IN (SELECT value FROM json_each(?2))"
    " AND orphan IS NOT 0 AND EXISTS (SELECT 1 FROM spans p WHERE p.trace_id = ?1 AND p.span_id = spans.parent_span_id"
    " AND (?3 OR p.session IS NULL OR substr(p.session, 1, 9) <> 'imported:'))"
)
"""Rows of trace ``?1`` the batch wrote flagged (``?2``: their span ids, a JSON array; the parent was not in the
batch) are no orphans when that parent is stored already. ``?3``: the batch is imported; an observed row's parent
counts only when observed (or filed outside a session). One run per trace, a key lookup per row."""
_PARENT_ARRIVED = (
    "UPDATE spans INDEXED BY spans_orphans SET orphan = 0 WHERE orphan IS NOT 0 AND session IS ?1 AND trace_id = ?2"
    " AND parent_span_id = ?3"
)
"""Rows stored earlier, flagged, in session ``?1`` of trace ``?2``, are no orphans once their parent ``?3`` is
written (children end, and are written, before their parent): one seek of the partial index, run only for a span
this connection knows rows wait for (:attr:`StoreWriter._waiting`). Never a scan of the rows that wait: in a long
agent run every iteration waits for the run's span, and scanning them after each batch made the writer's cost
grow with the run."""


_MAX_AWAITED = 8_192
"""(trace, parent) pairs the writer remembers rows waiting for, at most, the oldest forgotten first (about 3 MiB
at most). A row whose parent was forgotten keeps its flag when the parent arrives."""

_SAFETY = reason_codes.PUBLIC_SAFETY_COUNTER
_SEQUENCES = (list, tuple)

_NOTHING = object()
"""A sentinel no row field is."""

_ROWID_OF_SPAN = "SELECT rowid FROM spans WHERE trace_id = ? AND span_id = ?"
_MAX_ROWID = (1 << 63) - 1
"""SQLite's largest rowid: once a table holds it, new rows get random unused rowids."""


def _flag_orphans(params: list[tuple[Any, ...]]) -> None:
    """Set each row's ``orphan`` flag (its last insert parameter) from the rows to insert alone."""
    ids = {(row[0], row[1]) for row in params}
    params[:] = [(*row[:-1], 0 if row[2] is None or (row[0], row[2]) in ids else 1) for row in params]


class StoreWriter(StoreConnection):
    """The write side of ``SpanStore``: :meth:`write_batch` and its parts, and :meth:`record_accounting`."""

    def _resource_id(self, resource: Mapping[str, Any]) -> int:
        by_object = self._resource_objects.get(id(resource))
        if by_object is not None and by_object[0] is resource:
            return by_object[1]
        import hashlib  # here, once per new resource: readers (`agentdiag show`) do not load it

        from otel_agentdiag._internal.sdk import attribute_items

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
            tallies: dict[tuple[str, str], Tally] = {}
            cleared_at = self._cleared_gates({row.session for row in rows}) if rows else {}
            params: list[tuple[Any, ...]] = []
            # per row to insert: (its tally, session key, size, is a tombstone, the row)
            pending: list[tuple[Tally, str, int, bool, SpanRow]] = []
            pending_content: list[tuple[str, str, Sequence[ContentRow]]] = []
            content_of: list[int] = []  # per row of `pending`: its index in pending_content, or -1
            n_cleared = oversize = 0
            last_key: tuple[str, str] | None = None
            tally = Tally()
            resource_id = self._resource_id
            # A row is an orphan (1) when it names a parent not in the batch (usually written later: a parent
            # ends after its children). One provenance per batch, so a parent in the batch always counts.
            ids = {(row.trace_id, row.span_id) for row in rows}
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
                    tally = tallies[key] = Tally() if found is None else found
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
                # Whether the row counts plainly in a receipt (None: a reader looks at the stored row itself).
                sequence = row.sequence
                safety = attributes.get(_SAFETY, 0) if type(attributes) is dict else 1  # 1: not plain
                plain = (
                    1
                    if type(sequence) is int
                    and sequence >= 0
                    and observer
                    and (type(safety) is not int or safety <= 0)
                    and name != sc.TOMBSTONE_SPAN_NAME
                    and type(events) in _SEQUENCES
                    and type(links) in _SEQUENCES
                    and (scope is None or type(scope) is dict)
                    else None
                )
                if size > max_span:
                    fitted = fit_span(attributes, events, a_json, e_json, size, max_span, row_json)
                    if fitted is not None:
                        a_json, e_json, size = fitted.attributes_json, fitted.events_json, fitted.size
                        oversize += fitted.dropped_attributes
                        plain = None  # stored otherwise than handed in
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
                        sequence,
                        *([getattr(row, name) for name in EXTRA_COLUMNS] if EXTRA_COLUMNS else ()),
                        size,
                        plain,
                        0 if row.parent_span_id is None or (row.trace_id, row.parent_span_id) in ids else 1,
                    )
                )
                pending.append((tally, session, size, _TOMBSTONE in attributes, row))
            if n_cleared:
                _flag_orphans(params)  # a parent the gate refused is not in the batch after all
            inserted_flags = self._insert(params)
            if not imported and not all(inserted_flags):
                inserted_flags = displace_imported(self._conn, params, inserted_flags, _INSERT_SPAN, delete_rows)
            if pending_content:
                self._insert_content(
                    [pending_content[at] for at, new in zip(content_of, inserted_flags, strict=True) if new and at >= 0]
                )
            inserted = 0
            added: dict[str, list[int]] = {}  # session -> [spans, bytes] written now
            written: list[SpanRow] = []
            for (tally, session, size, tombstone, stored), new in zip(pending, inserted_flags, strict=True):
                if new:
                    written.append(stored)
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
                add_accounting(tallies, accounting)
            if written:
                self._parents_arrived(params, inserted_flags, imported)
            upsert_stats(self._conn, tallies)
            upsert_observers(self._conn, accounting, {obs for obs, _session in tallies if obs}, now, imported=imported)
            pruned = self._apply_written(added, now)
            record_batch(self._conn, written)
        return WriteResult(
            inserted=inserted,
            duplicates=len(pending) - inserted,
            cleared=n_cleared,
            pruned=pruned.spans,
            oversize_attributes=oversize,
        )

    def _parents_arrived(self, params: list[tuple[Any, ...]], inserted: Sequence[bool], imported: bool) -> None:
        """Clear the ``orphan`` flag of rows whose parent is stored now: the rows this batch wrote flagged whose
        parent was stored before (:data:`_PARENT_STORED`), and the flagged rows stored earlier whose parent this
        batch wrote (:data:`_PARENT_ARRIVED`), looked for only where this connection wrote a row flagged waiting
        for that span (:attr:`_waiting`, bounded). A row another connection flagged keeps its flag when this
        one writes its parent; a flag may only err on the side of "maybe missing" (a reader checks flagged
        rows against the key), so that costs a receipt a lookup, never a wrong answer."""
        waiting = self._waiting
        flagged: dict[str, list[tuple[Any, ...]]] = {}
        awaited: list[tuple[Any, ...]] = []
        arrived: list[tuple[str | None, str, str]] = []
        for row, written in zip(params, inserted, strict=True):
            if not written:
                continue
            trace = row[0]
            if row[-1]:
                known = waiting.get((trace, row[2])) if waiting else None
                if known is not None and row[9] in known:
                    # Not stored when an earlier batch waited for it, nor written here since: no lookup (a long run's
                    # iterations). Written by another connection meanwhile, it leaves the flag, as above.
                    awaited.append(row)
                else:
                    flagged.setdefault(trace, []).append(row)
            if waiting:
                sessions = waiting.pop((trace, row[1]), None)
                if sessions:
                    arrived.extend(
                        (session, trace, row[1])
                        for session in sessions
                        # an imported parent is no observed row's parent
                        if not imported or is_imported(session)
                    )
        conn = self._conn
        if flagged:
            conn.executemany(
                _PARENT_STORED, [(trace, row_json([r[1] for r in rows]), imported) for trace, rows in flagged.items()]
            )
        if arrived:
            conn.executemany(_PARENT_ARRIVED, arrived)
        for row in itertools.chain(awaited, *flagged.values()):
            key = (row[0], row[2])
            sessions = waiting.pop(key, ())  # re-inserted: the most recent last, the oldest forgotten first
            waiting[key] = sessions if row[9] in sessions else (*sessions, row[9])
        while len(waiting) > _MAX_AWAITED:
            del waiting[next(iter(waiting))]

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
            tallies: dict[tuple[str, str], Tally] = {}
            add_accounting(tallies, accounting)
            upsert_stats(self._conn, tallies)
            upsert_observers(self._conn, accounting, set(), now)

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
        _spans, store_bytes = store_totals(self._conn)
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
