"""Receipt figures kept current in the writer's transaction, so the whole store's receipt reads no span.

Migration 10 made these tables (:mod:`otel_agentdiag.storage.receipt_schema`); this module keeps them (the rules
on figures are in :mod:`otel_agentdiag.storage.receipt_rules`, the reads in
:mod:`otel_agentdiag.storage.receipt_reads`).

- ``receipt_figures``: per (session key, observer key: the row's observer or ``''``) what a receipt needs of
  the rows: rows, tombstones (rows named ``agentdiag.redaction_error``), numbered rows (an observer and a
  sequence number >= 0), the distinct numbers as merged ranges (so ``duplicate_sequences`` and gaps are exact),
  the public-safety counters summed, malformed rows.
- ``receipt_missing``: per (trace, missing parent, session) the earliest child that names a parent stored
  nowhere in its trace (observed children and parents only: an imported session is never settled), its
  observer and number: what :func:`~otel_agentdiag.diagnostics.verdict.judge` needs to tell an unfinished span.
- ``receipt_sessions``: per session key the store's receipt lists (sessions with a ``sessions`` row, a ledger
  row or a recorded violation): ``settled`` = 1 when its receipt is the one
  :func:`~.receipt_rules.judge_figures` computed from the figures and ledger (stored: status, reasons, counts,
  observers, nothing-to-judge), 0 when only its rows can say (judged at read time with the row-based rules): an
  imported session, the overflow key, a session with a missing parent the numbering cannot rule out as
  unfinished, the no-session bucket without rows, a session with neither rows nor ledger rows.
- ``receipt_totals``: the settled sessions' receipts summed (counts, sessions per reason among those judged,
  spans judged, sessions per observer and per provenance, sessions with nothing to judge), by delta.
- ``receipt_touched`` (sessions whose ledger, ``sessions`` row or violations changed: filled by triggers, except
  for the writer's own ledger upserts and new ``sessions`` rows, noted by :func:`add_written` while
  :func:`hush` holds those triggers: ``receipt_state.quiet``) and
  ``receipt_stale`` (sessions whose rows changed other than by the writer: an ``UPDATE`` of ``spans``, a row the
  writer cannot vouch for): :func:`settle` recomputes them before every commit of the store's own transactions.
- ``receipt_state``: the largest span rowid the figures account for, checked at the start of each transaction of
  ours (:func:`begin`): a row inserted or deleted by other means (raw SQL) makes it -1 until :func:`rebuild`.
  Then, or while ``receipt_touched``/``receipt_stale``/``summary_dirty`` hold entries no transaction of ours
  settled, the figures do not vouch for the store (:func:`~.receipt_reads.figures_vouch`) and readers judge
  every session from its rows.

Duplicate (observer, sequence) rows: the sequencer never hands a number out twice, but rows from other writers
may share one; the ranges count distinct numbers, so ``duplicate_sequences`` stays exact whoever wrote them.

Cost: per batch, statements per touched key (not per span) and a key lookup per span whose parent is not in its
batch; a delete recomputes the figures of the sessions that lost rows from the rows left (decoded).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from otel_agentdiag.storage.codec import SPAN_COLUMNS, decode_span
from otel_agentdiag.storage.provenance import IMPORTED_PREFIX
from otel_agentdiag.storage.receipt_reads import chunks, load_facts
from otel_agentdiag.storage.receipt_rules import (
    CLEAN_CONTRIBUTION,
    CLEAN_COUNTS,
    COUNT_KEYS,
    VALID,
    Figure,
    SessionFacts,
    clean_count,
    contribution,
    dump_ranges,
    judge_figures,
    load_ranges,
    merge_range,
    missing_parents_rule_out,
    nothing_reason,
    stored_verdict,
)
from otel_agentdiag.storage.rows import (
    OVERFLOW_SESSION,
    SpanRow,
)


# -- the writer's part ----------------------------------------------------------------------------------------
def _plain(row: SpanRow) -> bool:
    """Whether the stored row will read back exactly as the figures count it (anything else: recompute from
    the stored row)."""
    sequence = row.sequence
    return (
        type(row.attributes) is dict
        and isinstance(row.events, (list, tuple))
        and isinstance(row.links, (list, tuple))
        and (row.scope is None or type(row.scope) is dict)
        and (type(row.resource) is dict or isinstance(row.resource, Mapping))
        and (sequence is None or type(sequence) is int)
    )


def hush(conn: sqlite3.Connection, quiet: bool) -> None:
    """Turn the triggers on the ledger's inserts and updates and on new ``sessions`` rows off (``quiet``) or on
    again, within the writer's transaction (a rollback turns them on again): while they are off, the writer
    passes the sessions it upserted to :func:`add_written` as ``ledger_sessions`` (a trigger per session cost
    more than the insert it guards)."""
    conn.execute("UPDATE receipt_state SET quiet = ? WHERE id = 1", (1 if quiet else 0,))


def add_written(
    conn: sqlite3.Connection,
    written: Sequence[SpanRow],
    observers: Sequence[str],
    stale: Iterable[str] = (),
    ledger_sessions: Iterable[str] = (),
) -> None:
    """Add the rows a batch wrote to the figures and the missing parents; ``observers``: each row's stored
    observer ('' for none), parallel to ``written``; ``stale``: session keys whose rows the writer changed on the
    way in (shrunk to fit): recomputed from the stored rows; ``ledger_sessions``: sessions whose ledger or
    ``sessions`` row the writer wrote while :func:`hush` was on (settled like the rest). Call in the writer's
    transaction, after the insert and before :func:`~otel_agentdiag.storage.summaries.record_batch` (whose
    delete handling follows)."""
    figures: dict[tuple[str, str], Figure] = {}
    redo = set(stale)
    children: dict[tuple[str, str, str], tuple[str, int, int]] = {}
    observed_ids: set[tuple[str, str]] = set()
    with_parent: list[tuple[SpanRow, str, str]] = []  # (row, session key, observer) of observed rows with a parent
    last: tuple[str, str] | None = None  # the (session key, observer) of the row before: usually the same
    figure = Figure()
    numbers: list[int] = []  # the figure's sequence numbers in this batch
    numbers_of: dict[tuple[str, str], list[int]] = {}
    imported = False
    for row, observer in zip(written, observers, strict=True):
        key = row.session or ""
        if (key, observer) != last:
            last = (key, observer)
            imported = key.startswith(IMPORTED_PREFIX)
            seen = figures.get(last)
            if seen is None:
                figure = figures[last] = Figure()
                numbers = numbers_of[last] = []
            else:
                figure, numbers = seen, numbers_of[last]
        if imported:
            if _plain(row):
                figure.add_plain(row, observer, numbers)
            else:
                redo.add(key)
            continue
        if row.parent_span_id is not None:
            with_parent.append((row, key, observer))
        if not _plain(row):
            redo.add(key)
            continue
        figure.add_plain(row, observer, numbers)
        observed_ids.add((row.trace_id, row.span_id))
    for fkey, collected in numbers_of.items():
        figures[fkey].add_numbers(collected)
    for row, key, observer in with_parent:
        parent = row.parent_span_id
        if parent is None or (row.trace_id, parent) in observed_ids:
            continue
        sequence = row.sequence if type(row.sequence) is int else -1
        child = (observer, sequence, row.start_ns)
        ckey = (row.trace_id, parent, key)
        known = children.get(ckey)
        if known is None or (child[1], child[2]) < (known[1], known[2]):
            children[ckey] = child
    figures = {fkey: counted for fkey, counted in figures.items() if counted.n_rows}  # not: only non-plain rows
    if figures:
        _merge_figures(conn, figures)
    touched: set[str] = {key for key, _observer in figures}
    touched.update(ledger_sessions)
    # Missing parents that this batch brought.
    if observed_ids and conn.execute("SELECT 1 FROM receipt_missing LIMIT 1").fetchone() is not None:
        traces = sorted({trace_id for trace_id, _span_id in observed_ids})
        found: list[tuple[str, str, str]] = []
        for chunk in chunks(traces):
            found.extend(
                conn.execute(
                    "SELECT trace_id, parent_span_id, session FROM receipt_missing"
                    f" WHERE trace_id IN ({','.join('?' * len(chunk))})",
                    list(chunk),
                )
            )
        arrived = [entry for entry in found if (entry[0], entry[1]) in observed_ids]
        if arrived:
            conn.executemany(
                "DELETE FROM receipt_missing WHERE trace_id = ? AND parent_span_id = ? AND session = ?", arrived
            )
            touched.update(session for _t, _p, session in arrived)
    # Children whose parent is in no batch so far: stored elsewhere in the trace, or missing.
    if children:
        wanted = sorted({(trace_id, parent) for trace_id, parent, _key in children})
        stored: set[tuple[str, str]] = set()
        for chunk in chunks(wanted, 300):
            values = ",".join("(?, ?)" for _ in chunk)
            args = [part for pair in chunk for part in pair]
            stored.update(
                conn.execute(
                    # A join, not a row-value IN (SQLite scans the table for that): one key lookup per pair.
                    f"SELECT s.trace_id, s.span_id FROM (VALUES {values}) AS v"
                    " JOIN spans s ON s.trace_id = v.column1 AND s.span_id = v.column2"
                    f" WHERE s.session IS NULL OR substr(s.session, 1, {len(IMPORTED_PREFIX)}) <> '{IMPORTED_PREFIX}'",
                    args,
                )
            )
        missing = [
            (trace_id, parent, key, *child)
            for (trace_id, parent, key), child in children.items()
            if (trace_id, parent) not in stored
        ]
        if missing:
            conn.executemany(
                "INSERT INTO receipt_missing (trace_id, parent_span_id, session, observer, sequence, start_ns)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (trace_id, parent_span_id, session) DO UPDATE SET"
                " observer = excluded.observer, sequence = excluded.sequence, start_ns = excluded.start_ns"
                " WHERE (excluded.sequence, excluded.start_ns) < (sequence, start_ns)",
                missing,
            )
            touched.update(key for _t, _p, key, *_rest in missing)
    if redo:
        conn.executemany("INSERT OR IGNORE INTO receipt_stale (session) VALUES (?)", [(k,) for k in sorted(redo)])
    if touched:
        conn.executemany("INSERT OR IGNORE INTO receipt_touched (session) VALUES (?)", [(k,) for k in touched])


_JUST_WRITTEN: dict[int, dict[str, dict[str, Figure]]] = {}
"""id(connection) -> session -> observer -> the figures :func:`_merge_figures` wrote in the transaction under way
(every observer of each session), so that :func:`settle` need not read them back. Dropped when a transaction
begins and for any session whose figures are recomputed."""


def _merge_figures(conn: sqlite3.Connection, figures: Mapping[tuple[str, str], Figure]) -> None:
    current: dict[str, dict[str, Figure]] = {key: {} for key, _observer in figures}
    for chunk in chunks(sorted(current)):
        for session, observer, n, tomb, numbered, ranges, safety, malformed in conn.execute(
            "SELECT session, observer, n_rows, tombstones, numbered, ranges, safety, malformed FROM receipt_figures"
            f" WHERE session IN ({','.join('?' * len(chunk))})",
            list(chunk),
        ):
            current[session][observer] = Figure(
                int(n), int(tomb), int(numbered), load_ranges(ranges), int(safety), int(malformed)
            )
    params = []
    for (session, observer), delta in figures.items():
        figure = current[session].get(observer)
        if figure is None:
            figure = current[session][observer] = delta
        else:
            figure.n_rows += delta.n_rows
            figure.tombstones += delta.tombstones
            figure.numbered += delta.numbered
            figure.safety += delta.safety
            figure.malformed += delta.malformed
            for lo, hi in delta.ranges:
                merge_range(figure.ranges, lo, hi)
        params.append(
            (
                session,
                observer,
                figure.n_rows,
                figure.tombstones,
                figure.numbered,
                dump_ranges(figure.ranges),
                figure.safety,
                figure.malformed,
            )
        )
    conn.executemany(
        "INSERT OR REPLACE INTO receipt_figures (session, observer, n_rows, tombstones, numbered, ranges, safety,"
        " malformed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        params,
    )
    _JUST_WRITTEN.setdefault(id(conn), {}).update(current)


def recompute_sessions(conn: sqlite3.Connection, keys: Iterable[str]) -> None:
    """Recompute the figures of ``keys`` from their stored rows (decoded, as a reader decodes them)."""
    written = _JUST_WRITTEN.get(id(conn), {})
    for key in sorted(set(keys)):
        written.pop(key, None)
        conn.execute("DELETE FROM receipt_figures WHERE session = ?", (key,))
        figures: dict[str, Figure] = {}
        for row in conn.execute(
            f"SELECT {SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id WHERE s.session IS ?",
            (key or None,),
        ):
            span = decode_span(row)
            observer = span.observer or ""
            figure = figures.get(observer)
            if figure is None:
                figure = figures[observer] = Figure()
            figure.add_span(span, corrupt=span.corrupt, stored_observer=span.observer)
        conn.executemany(
            "INSERT INTO receipt_figures (session, observer, n_rows, tombstones, numbered, ranges, safety, malformed)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (key, o, f.n_rows, f.tombstones, f.numbered, dump_ranges(f.ranges), f.safety, f.malformed)
                for o, f in figures.items()
            ],
        )
        conn.execute("INSERT OR IGNORE INTO receipt_touched (session) VALUES (?)", (key,))


_MISSING_IN_TRACE = f"""SELECT c.trace_id, c.parent_span_id, coalesce(c.session, ''), coalesce(c.observer, ''),
        CASE WHEN typeof(c.sequence) = 'integer' THEN c.sequence ELSE -1 END AS seq, c.start_ns
    FROM spans c WHERE {{where}} c.parent_span_id IS NOT NULL
        AND (c.session IS NULL OR substr(c.session, 1, {len(IMPORTED_PREFIX)}) <> '{IMPORTED_PREFIX}')
        AND NOT EXISTS (SELECT 1 FROM spans p WHERE p.trace_id = c.trace_id AND p.span_id = c.parent_span_id
            AND (p.session IS NULL OR substr(p.session, 1, {len(IMPORTED_PREFIX)}) <> '{IMPORTED_PREFIX}'))"""


def _insert_missing(conn: sqlite3.Connection, rows: Iterable[Sequence[Any]]) -> set[str]:
    """Keep, per (trace, parent, session), the child first by (sequence, start); returns the sessions."""
    first: dict[tuple[str, str, str], tuple[str, int, int]] = {}
    for trace_id, parent, key, observer, sequence, start in rows:
        ckey = (trace_id, parent, key)
        known = first.get(ckey)
        if known is None or (sequence, start) < (known[1], known[2]):
            first[ckey] = (observer, int(sequence), int(start))
    conn.executemany(
        "INSERT OR REPLACE INTO receipt_missing (trace_id, parent_span_id, session, observer, sequence, start_ns)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [(*ckey, *child) for ckey, child in first.items()],
    )
    return {key for _t, _p, key in first}


def flush_deleted(conn: sqlite3.Connection, dirty: Sequence[tuple[str, str]]) -> None:
    """Rows of ``dirty`` (trace, session key) pairs were deleted in this transaction: recompute those sessions'
    figures from their remaining rows and the missing parents of those traces. Called by
    :func:`~otel_agentdiag.storage.summaries.flush_deleted`."""
    if not dirty:
        return
    touched = {session for _trace_id, session in dirty}
    for trace_id in sorted({trace_id for trace_id, _session in dirty}):
        touched.update(
            r[0] for r in conn.execute("SELECT session FROM receipt_missing WHERE trace_id = ?", (trace_id,))
        )
        conn.execute("DELETE FROM receipt_missing WHERE trace_id = ?", (trace_id,))
        touched.update(
            _insert_missing(conn, conn.execute(_MISSING_IN_TRACE.format(where="c.trace_id = ? AND"), (trace_id,)))
        )
    recompute_sessions(conn, {session for _trace_id, session in dirty})
    conn.executemany("INSERT OR IGNORE INTO receipt_touched (session) VALUES (?)", [(k,) for k in sorted(touched)])


def _settled(facts: SessionFacts, listed: bool) -> bool:
    key = facts.key
    if key == OVERFLOW_SESSION or key.startswith(IMPORTED_PREFIX):
        return False
    if not key and not listed:
        return False  # the no-session bucket without rows: its pruned share is the store's (read-time rule)
    if not facts.stats and not any(f.n_rows for f in facts.figures.values()):
        return False  # no observer at all: an overflow row of any observer would concern it (read-time rule)
    return missing_parents_rule_out(facts)


def begin(conn: sqlite3.Connection) -> None:
    """At the start of a write transaction of ours: when the rows are not those the figures account for (a row
    inserted or deleted by other means since the last settle), the figures stop vouching for the store until
    :func:`rebuild` (the watermark becomes -1)."""
    _JUST_WRITTEN.pop(id(conn), None)
    found = conn.execute("SELECT watermark FROM receipt_state WHERE id = 1").fetchone()
    if found is None or int(found[0]) < 0:
        return
    (top,) = conn.execute("SELECT coalesce(max(rowid), 0) FROM spans").fetchone()
    if int(top) != int(found[0]):
        conn.execute("UPDATE receipt_state SET watermark = -1 WHERE id = 1")


def settle(conn: sqlite3.Connection) -> None:
    """Bring ``receipt_sessions`` and ``receipt_totals`` up to date for the sessions touched in this transaction
    (and recompute the figures of stale sessions); then record the rows the figures account for. Called before
    every commit of the store's own write transactions."""
    stale = [r[0] for r in conn.execute("SELECT session FROM receipt_stale")]
    if stale:
        conn.execute("DELETE FROM receipt_stale")
        recompute_sessions(conn, stale)
    keys = sorted(r[0] for r in conn.execute("SELECT session FROM receipt_touched"))
    if keys:
        conn.execute("DELETE FROM receipt_touched")
        _settle_keys(conn, keys)
    (top,) = conn.execute("SELECT coalesce(max(rowid), 0) FROM spans").fetchone()
    conn.execute(
        "UPDATE receipt_state SET watermark = ?1 WHERE id = 1 AND watermark >= 0 AND watermark <> ?1", (int(top),)
    )


def _settle_keys(conn: sqlite3.Connection, keys: Sequence[str]) -> None:
    facts = load_facts(conn, keys, _JUST_WRITTEN.pop(id(conn), None))
    old: dict[str, tuple[Any, ...]] = {}
    for chunk in chunks(keys):
        for row in conn.execute(
            "SELECT session, settled, status, reasons, counts, observers FROM receipt_sessions"
            f" WHERE session IN ({','.join('?' * len(chunk))})",
            list(chunk),
        ):
            old[row[0]] = row
    delta: dict[str, int] = {}
    upserts: list[tuple[Any, ...]] = []
    removed: list[tuple[str]] = []
    observers_json: dict[str, str] = {}
    for key in keys:
        found = old.get(key)
        if found is not None and found[1]:
            for name, value in contribution(stored_verdict(found[2:])).items():
                delta[name] = delta.get(name, 0) - value
        session_facts, listed, known = facts[key]
        if not known:
            if found is not None:
                removed.append((key,))
            continue
        if not _settled(session_facts, listed):
            upserts.append((key, 0, None, None, None, None, None))
            continue
        n = clean_count(session_facts)
        if n is not None:  # the usual session: its verdict's stored form and totals without building them
            observer = session_facts.stats[0].observer
            for name in CLEAN_CONTRIBUTION:
                delta[name] = delta.get(name, 0) + n
            for name in ("sessions", "provenance:observed", "observer:" + observer):
                delta[name] = delta.get(name, 0) + 1
            listing = observers_json.get(observer)
            if listing is None:
                listing = observers_json[observer] = json.dumps([observer])
            upserts.append((key, 1, VALID, "", CLEAN_COUNTS.format(n), listing, None))
            continue
        verdict = judge_figures(session_facts)
        for name, value in contribution(verdict).items():
            delta[name] = delta.get(name, 0) + value
        upserts.append(
            (
                key,
                1,
                verdict.status,
                ",".join(verdict.reasons),
                ",".join(map(str, [verdict.counts[k] for k in COUNT_KEYS])),
                json.dumps(verdict.observers),
                nothing_reason(verdict.counts, verdict.reasons),
            )
        )
    if removed:
        conn.executemany("DELETE FROM receipt_sessions WHERE session = ?", removed)
    if upserts:
        conn.executemany(
            "INSERT OR REPLACE INTO receipt_sessions (session, settled, status, reasons, counts, observers, unjudged)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            upserts,
        )
    changes = [(name, value) for name, value in delta.items() if value]
    if changes:
        conn.executemany(
            "INSERT INTO receipt_totals (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = value + excluded.value",
            changes,
        )
        if any(value < 0 for _name, value in changes):
            conn.execute("DELETE FROM receipt_totals WHERE value = 0")


def rebuild(conn: sqlite3.Connection) -> None:
    """Recompute every receipt figure from the rows (decoded) and the ledger: migration 10's backfill, benchmark
    stores made with SQL, a check in the tests. Runs in the caller's transaction when one is open."""
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN IMMEDIATE")
    _JUST_WRITTEN.pop(id(conn), None)
    try:
        for table in ("receipt_figures", "receipt_missing", "receipt_sessions", "receipt_totals", "receipt_stale"):
            conn.execute(f"DELETE FROM {table}")
        figures: dict[tuple[str, str], Figure] = {}
        for row in conn.execute(f"SELECT {SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"):
            span = decode_span(row)
            fkey = (span.session or "", span.observer or "")
            figure = figures.get(fkey)
            if figure is None:
                figure = figures[fkey] = Figure()
            figure.add_span(span, corrupt=span.corrupt, stored_observer=span.observer)
        conn.executemany(
            "INSERT INTO receipt_figures (session, observer, n_rows, tombstones, numbered, ranges, safety, malformed)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (*fkey, f.n_rows, f.tombstones, f.numbered, dump_ranges(f.ranges), f.safety, f.malformed)
                for fkey, f in figures.items()
            ],
        )
        _insert_missing(conn, conn.execute(_MISSING_IN_TRACE.format(where="")))
        conn.execute("DELETE FROM receipt_touched")
        conn.execute("INSERT OR REPLACE INTO receipt_state (id, watermark) VALUES (1, 0)")
        conn.execute(
            "INSERT OR IGNORE INTO receipt_touched (session) SELECT session FROM sessions"
            " UNION SELECT session FROM session_stats UNION SELECT session FROM violations"
            " UNION SELECT session FROM receipt_figures"
        )
        settle(conn)
    except BaseException:
        if own:
            conn.execute("ROLLBACK")
        raise
    if own:
        conn.execute("COMMIT")
