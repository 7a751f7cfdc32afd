"""Receipt figures kept current in the writer's transaction, so the whole store's receipt reads no span.

Migration 8 made these tables; this module keeps them and holds the verdict's vocabulary (statuses, reason codes,
count keys: :mod:`otel_agentdiag.diagnostics.verdict` re-exports them) and :func:`judge_figures`, the verdict
rules applied to figures instead of rows.

- ``receipt_figures``: per (session key, observer key: the row's observer or ``''``) what a receipt needs of
  the rows: rows, tombstones (rows named ``agentdiag.redaction_error``), numbered rows (an observer and a
  sequence number >= 0), the distinct numbers as merged ranges (so ``duplicate_sequences`` and gaps are exact),
  the public-safety counters summed, malformed rows.
- ``receipt_missing``: per (trace, missing parent, session) the earliest child that names a parent stored
  nowhere in its trace (observed children and parents only: an imported session is never settled), its
  observer and number: what :func:`~otel_agentdiag.diagnostics.verdict.judge` needs to tell an unfinished span.
- ``receipt_sessions``: per session key the store's receipt lists (sessions with a ``sessions`` row, a ledger
  row or a recorded violation): ``settled`` = 1 when its receipt is the one :func:`judge_figures` computed from
  the figures and ledger (stored: status, reasons, counts, observers, nothing-to-judge), 0 when only its rows can
  say (judged at read time with the row-based rules): an imported session, the overflow key, a session with a
  missing parent the numbering cannot rule out as unfinished, the no-session bucket without rows.
- ``receipt_totals``: the settled sessions' receipts summed (counts, sessions per reason among those judged,
  spans judged, sessions per observer and per provenance, sessions with nothing to judge), by delta.
- ``receipt_touched`` (sessions whose ledger, ``sessions`` row or violations changed: filled by triggers) and
  ``receipt_stale`` (sessions whose rows changed other than by the writer: an ``UPDATE`` of ``spans``, a row the
  writer cannot vouch for): :func:`settle` recomputes them before every commit of the store's own transactions.
- ``receipt_state``: the largest span rowid the figures account for. A row inserted by other means (raw SQL)
  lies above it; then, or while ``receipt_touched``/``receipt_stale``/``summary_dirty`` hold entries that no
  transaction of ours settled, the figures do not vouch for the store (:func:`figures_vouch`) and readers judge
  every session from its rows.

Cost: :func:`add_written` is one aggregation in Python and a handful of statements per batch (per touched key,
not per span), plus one key lookup per span whose parent is not in its batch. Deletes (retention, ``prune``,
``clear``) recompute the figures of the sessions that lost rows from their remaining rows (decoded: exact), and
the missing parents of the traces that lost rows.
"""

from __future__ import annotations

import bisect
import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag.storage.codec import SPAN_COLUMNS, decode_span, load_counts
from otel_agentdiag.storage.provenance import IMPORTED_PREFIX, is_imported
from otel_agentdiag.storage.rows import (
    DROP_CLEARED,
    DROP_EXPORT_FAILURE,
    DROP_QUEUE_FULL,
    DROP_SHUTDOWN,
    OVERFLOW_SESSION,
    REJECT_REDACTOR_ERROR,
    SessionStats,
    SpanRow,
    StoredSpan,
)

# -- the verdict's vocabulary (re-exported by diagnostics.verdict) ---------------------------------------------
VALID = "valid"
IMPORTED = "imported"
DEGRADED = "degraded"
QUARANTINED = "quarantined"
INVALID = "invalid"
OBSERVED = "observed"
MIXED = "mixed"

SEQUENCE_GAP = "sequence_gap"
DUPLICATE_SEQUENCE = "duplicate_sequence"
BACKPRESSURE_DROP = "backpressure_drop"
EXPORT_FAILURE = "export_failure"
REDACTOR_ERROR = "redactor_error"
PUBLIC_SAFETY_VIOLATION = "public_safety_violation"
UNFINISHED_SPAN = "unfinished_span"
STATS_MISSING = "stats_missing"
LEDGER_INVALID = "ledger_invalid"
INGEST_VIOLATION = "ingest_violation"

INVALID_REASONS = frozenset({STATS_MISSING, LEDGER_INVALID, INGEST_VIOLATION})
QUARANTINE_REASONS = frozenset({REDACTOR_ERROR, PUBLIC_SAFETY_VIOLATION})
DEGRADED_REASONS = frozenset({SEQUENCE_GAP, DUPLICATE_SEQUENCE, BACKPRESSURE_DROP, EXPORT_FAILURE, UNFINISHED_SPAN})

PUBLIC_SAFETY_COUNTER = sc.AGENTDIAG_REDACTION_PREFIX + "public_safety_violation"

COUNT_KEYS = (
    "spans",
    "sequence_gaps",
    "duplicate_sequences",
    "unfinished_spans",
    "dropped_queue_full",
    "dropped_export_failure",
    "dropped_shutdown",
    "dropped_cleared",
    "rejected_redactor_error",
    "public_safety_violations",
    "observed",
    "accepted",
    "rejected",
    "dropped",
    "stored",
    "malformed_rows",
    "pruned_spans",
    "cleared_spans",
    "ingest_violations",
)
"""The keys of a receipt's counts, in output order."""

NO_OBSERVER = ""

UNATTRIBUTED_REASONS = {
    DROP_QUEUE_FULL: BACKPRESSURE_DROP,
    DROP_SHUTDOWN: BACKPRESSURE_DROP,
    DROP_EXPORT_FAILURE: EXPORT_FAILURE,
    REJECT_REDACTOR_ERROR: REDACTOR_ERROR,
}
"""The reason a session's receipt gives for drops of its observer that may be its own, by cause."""


def positive_int(value: object) -> int:
    """``value`` when it is a positive int (not a bool), else 0: how counters and ledger counts are read."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def status_for(reasons: Iterable[str], *, spans: int, malformed: int) -> str:
    """The status the reasons give (worst first), for a receipt with ``spans`` rows, ``malformed`` of them bad."""
    found = set(reasons)
    if spans == 0 or malformed > 0 or found & INVALID_REASONS:
        return INVALID
    if found & QUARANTINE_REASONS:
        return QUARANTINED
    if found & DEGRADED_REASONS:
        return DEGRADED
    if IMPORTED in found:
        return IMPORTED
    return VALID


def nothing_reason(counts: Mapping[str, int], reasons: Sequence[str]) -> str | None:
    """Why a session receipt with these counts and reasons has nothing to judge (see
    :func:`~otel_agentdiag.diagnostics.verdict.nothing_to_judge`), or None."""
    if reasons or counts.get("spans") or counts.get("malformed_rows"):
        return None
    if counts.get("cleared_spans"):
        return "cleared"
    if counts.get("pruned_spans"):
        return "pruned"
    return "empty"


def _touch(table: str, expr: str) -> str:
    """SQL (in a trigger): note the session ``expr`` in ``table`` unless noted. A guarded INSERT, not INSERT OR
    IGNORE: an outer upsert's conflict handling would override the IGNORE."""
    guard = f"NOT EXISTS (SELECT 1 FROM {table} WHERE session = {expr})"
    return f"INSERT INTO {table} (session) SELECT {expr} WHERE {guard};"


# -- schema ---------------------------------------------------------------------------------------------------
SCHEMA: tuple[str, ...] = (
    """CREATE TABLE receipt_figures (
        session TEXT NOT NULL,
        observer TEXT NOT NULL,
        n_rows INTEGER NOT NULL DEFAULT 0,
        tombstones INTEGER NOT NULL DEFAULT 0,
        numbered INTEGER NOT NULL DEFAULT 0,
        ranges TEXT NOT NULL DEFAULT '',
        safety INTEGER NOT NULL DEFAULT 0,
        malformed INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (session, observer)
    ) WITHOUT ROWID""",
    # The sessions an observer wrote rows in: the receipts an overflow row of that observer affects.
    "CREATE INDEX receipt_figures_observer ON receipt_figures(observer)",
    """CREATE TABLE receipt_missing (
        trace_id TEXT NOT NULL,
        parent_span_id TEXT NOT NULL,
        session TEXT NOT NULL,
        observer TEXT NOT NULL,
        sequence INTEGER NOT NULL,
        start_ns INTEGER NOT NULL,
        PRIMARY KEY (trace_id, parent_span_id, session)
    ) WITHOUT ROWID""",
    "CREATE INDEX receipt_missing_session ON receipt_missing(session)",
    """CREATE TABLE receipt_sessions (
        session TEXT PRIMARY KEY,
        settled INTEGER NOT NULL,
        status TEXT,
        reasons TEXT,
        counts TEXT,
        observers TEXT,
        unjudged TEXT
    ) WITHOUT ROWID""",
    "CREATE INDEX receipt_sessions_unsettled ON receipt_sessions(session) WHERE settled = 0",
    "CREATE INDEX receipt_sessions_unjudged ON receipt_sessions(session) WHERE unjudged IS NOT NULL",
    "CREATE TABLE receipt_totals (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE receipt_touched (session TEXT PRIMARY KEY) WITHOUT ROWID",
    "CREATE TABLE receipt_stale (session TEXT PRIMARY KEY) WITHOUT ROWID",
    """CREATE TABLE receipt_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        watermark INTEGER NOT NULL DEFAULT 0
    )""",
    # Ledger, bookkeeping and violations: written per (observer, session) or per session, never per span.
    f"""CREATE TRIGGER receipt_stats_insert AFTER INSERT ON session_stats BEGIN
        {_touch("receipt_touched", "new.session")}
    END""",
    f"""CREATE TRIGGER receipt_stats_update AFTER UPDATE ON session_stats BEGIN
        {_touch("receipt_touched", "old.session")}
        {_touch("receipt_touched", "new.session")}
    END""",
    f"""CREATE TRIGGER receipt_stats_delete AFTER DELETE ON session_stats BEGIN
        {_touch("receipt_touched", "old.session")}
    END""",
    f"""CREATE TRIGGER receipt_sessions_insert AFTER INSERT ON sessions BEGIN
        {_touch("receipt_touched", "new.session")}
    END""",
    f"""CREATE TRIGGER receipt_sessions_update AFTER UPDATE OF session, cleared_at_ns, generation, pruned_spans,
        cleared_spans, first_start_ns ON sessions BEGIN
        {_touch("receipt_touched", "old.session")}
        {_touch("receipt_touched", "new.session")}
    END""",
    f"""CREATE TRIGGER receipt_sessions_delete AFTER DELETE ON sessions BEGIN
        {_touch("receipt_touched", "old.session")}
    END""",
    f"""CREATE TRIGGER receipt_violations_insert AFTER INSERT ON violations BEGIN
        {_touch("receipt_touched", "new.session")}
    END""",
    f"""CREATE TRIGGER receipt_violations_delete AFTER DELETE ON violations BEGIN
        {_touch("receipt_touched", "old.session")}
    END""",
    # The writer never updates a row; anything that does makes its sessions' figures a question for the rows.
    f"""CREATE TRIGGER receipt_spans_update AFTER UPDATE ON spans BEGIN
        {_touch("receipt_stale", "coalesce(old.session, '')")}
        {_touch("receipt_stale", "coalesce(new.session, '')")}
    END""",
    "INSERT INTO receipt_state (id, watermark) VALUES (1, 0)",
)
"""Migration 8's schema statements (its backfill is :func:`rebuild`)."""


# -- ranges of distinct numbers -------------------------------------------------------------------------------
def _add_numbers(ranges: list[list[int]], numbers: Iterable[int]) -> int:
    """Add ``numbers`` to the sorted, disjoint, non-adjacent inclusive ``ranges`` (in place); returns how many
    were new."""
    new = 0
    for n in sorted(numbers):
        if not ranges or n > ranges[-1][1] + 1:
            ranges.append([n, n])  # the usual case: a number above every other
            new += 1
            continue
        if n == ranges[-1][1] + 1:
            ranges[-1][1] = n
            new += 1
            continue
        starts = [r[0] for r in ranges]
        at = bisect.bisect_right(starts, n) - 1
        if at >= 0 and ranges[at][0] <= n <= ranges[at][1]:
            continue
        new += 1
        joins_left = at >= 0 and ranges[at][1] == n - 1
        joins_right = at + 1 < len(ranges) and ranges[at + 1][0] == n + 1
        if joins_left and joins_right:
            ranges[at][1] = ranges[at + 1][1]
            del ranges[at + 1]
        elif joins_left:
            ranges[at][1] = n
        elif joins_right:
            ranges[at + 1][0] = n
        else:
            ranges.insert(at + 1, [n, n])
    return new


def _distinct(ranges: Sequence[Sequence[int]]) -> int:
    return sum(hi - lo + 1 for lo, hi in ranges)


def _missing_below(ranges: Sequence[Sequence[int]], low: int, limit: int) -> int:
    """How many integers in ``[low, limit)`` no range holds."""
    if limit <= low:
        return 0
    inside = sum(max(min(hi + 1, limit) - max(lo, low), 0) for lo, hi in ranges)
    return (limit - low) - inside


def _dump_ranges(ranges: Sequence[Sequence[int]]) -> str:
    """``[[0, 4], [7, 7]]`` as ``"0:4,7:7"`` (numbers are >= 0)."""
    return ",".join(f"{lo}:{hi}" for lo, hi in ranges)


def _load_ranges(text: Any) -> list[list[int]]:
    if not text or not isinstance(text, str):
        return []
    out: list[list[int]] = []
    for part in text.split(","):
        lo, _, hi = part.partition(":")
        out.append([int(lo), int(hi)])
    return out


@dataclass
class Figure:
    """What a receipt needs of the rows of one (session, observer)."""

    n_rows: int = 0
    tombstones: int = 0
    numbered: int = 0
    ranges: list[list[int]] = field(default_factory=list)
    safety: int = 0
    malformed: int = 0

    def add_span(self, span: StoredSpan | SpanRow, *, corrupt: bool, stored_observer: str | None) -> None:
        self.n_rows += 1
        if span.name == sc.TOMBSTONE_SPAN_NAME:
            self.tombstones += 1
        if corrupt:
            self.malformed += 1
        self.safety += positive_int(span.attributes.get(PUBLIC_SAFETY_COUNTER))
        sequence = span.sequence
        if stored_observer and isinstance(sequence, int) and not isinstance(sequence, bool) and sequence >= 0:
            self.numbered += 1
            _add_numbers(self.ranges, (sequence,))


# -- the rules, on figures ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FigureVerdict:
    """A session receipt's fields as :func:`judge_figures` computes them."""

    status: str
    reasons: list[str]
    counts: dict[str, int]
    observers: list[str]
    provenance: str
    unattributed_drops: dict[str, int]


@dataclass(frozen=True)
class SessionFacts:
    """Everything a settled session's receipt is computed from, without its rows."""

    key: str
    figures: Mapping[str, Figure]
    stats: Sequence[SessionStats]
    pruned_spans: int = 0
    cleared_spans: int = 0
    cleared: bool = False
    violations: int = 0
    missing: Sequence[tuple[str, int]] = ()
    """(observer, sequence) of the first child of each missing parent (sequence -1: not numbered)."""


def missing_parents_rule_out(facts: SessionFacts) -> bool:
    """Whether every missing parent of the session is ruled out as an unfinished span of it by the numbering
    (what :func:`~otel_agentdiag.diagnostics.verdict.judge` checks: its first child is numbered and every number
    below it is stored, or explained by pruning or clearing): then its receipt counts no unfinished span."""
    if not facts.missing:
        return True
    lost = facts.pruned_spans > 0 or bool(facts.cleared_spans) or facts.cleared
    for observer, sequence in facts.missing:
        figure = facts.figures.get(observer)
        if not observer or sequence < 0 or figure is None or not figure.ranges:
            return False
        low = figure.ranges[0][0] if lost else 0
        if _missing_below(figure.ranges, low, sequence) > 0:
            return False
    return True


def judge_figures(facts: SessionFacts, unattributed: Mapping[str, Mapping[str, int]] | None = None) -> FigureVerdict:
    """The receipt :func:`~otel_agentdiag.diagnostics.verdict.judge` gives a session from its rows, computed from
    its figures, ledger rows and bookkeeping. Exact when :func:`missing_parents_rule_out` holds (no unfinished
    span) and the session's ``sessions`` row (pruned/cleared counts) is the one the reader's summary shows.
    ``unattributed``: observer -> cause -> its overflow drops, for this session's observers. Pure."""
    by_observer: dict[str, SessionStats] = {}
    reasons: set[str] = set()
    counts: dict[str, int] = dict.fromkeys(COUNT_KEYS, 0)
    ledger_ok = True
    explained: dict[str, int] = {}
    for row in facts.stats:
        by_observer[row.observer] = row
        rejected = {k: positive_int(v) for k, v in row.rejected.items()}
        dropped = {k: positive_int(v) for k, v in row.dropped.items()}
        explained[row.observer] = explained.get(row.observer, 0) + sum(dropped.values()) + sum(rejected.values())
        counts["observed"] += row.observed
        counts["accepted"] += row.accepted
        counts["stored"] += row.stored
        counts["rejected"] += sum(rejected.values())
        counts["dropped"] += sum(dropped.values())
        counts["duplicate_sequences"] += max(row.duplicates, 0)
        counts["dropped_queue_full"] += dropped.get(DROP_QUEUE_FULL, 0)
        counts["dropped_export_failure"] += dropped.get(DROP_EXPORT_FAILURE, 0)
        counts["dropped_shutdown"] += dropped.get(DROP_SHUTDOWN, 0)
        counts["dropped_cleared"] += dropped.get(DROP_CLEARED, 0)
        counts["rejected_redactor_error"] += rejected.get(REJECT_REDACTOR_ERROR, 0)
        if row.observed != row.accepted + sum(rejected.values()) + sum(dropped.values()):
            ledger_ok = False
    figures = {o: f for o, f in facts.figures.items() if f.n_rows > 0}
    pruned = facts.pruned_spans
    cleared_spans = facts.cleared_spans
    counts["spans"] = sum(f.n_rows for f in figures.values())
    counts["pruned_spans"] = max(pruned, 0)
    counts["cleared_spans"] = max(cleared_spans, 0)
    counts["malformed_rows"] = sum(f.malformed for f in figures.values())
    counts["public_safety_violations"] = sum(f.safety for f in figures.values())
    counts["ingest_violations"] = positive_int(facts.violations)
    for observer, figure in figures.items():
        explained[observer] = explained.get(observer, 0) - figure.tombstones
    drops: dict[str, int] = {}
    if facts.key != OVERFLOW_SESSION:
        for observer, by_cause in (unattributed or {}).items():
            n = sum(positive_int(v) for v in by_cause.values())
            if n:
                drops[observer] = n
                explained[observer] = explained.get(observer, 0) + n
                reasons.update(UNATTRIBUTED_REASONS[c] for c in by_cause if c in UNATTRIBUTED_REASONS)
    lost_on_purpose = pruned > 0 or bool(cleared_spans) or facts.cleared
    unexplained = 0
    for observer, figure in figures.items():
        if not observer or not figure.ranges:
            continue
        distinct = _distinct(figure.ranges)
        counts["duplicate_sequences"] += figure.numbered - distinct
        top = figure.ranges[-1][1]
        # judge(): from 0 when the deletions are known exactly (always so here), else from the lowest number.
        missing = _missing_below(figure.ranges, 0, top + 1)
        unexplained += max(missing - max(explained.get(observer, 0), 0), 0)
    deleted = max(pruned, 0) + max(cleared_spans, 0) if lost_on_purpose else 0
    counts["sequence_gaps"] += max(unexplained - deleted, 0)
    if counts["sequence_gaps"]:
        reasons.add(SEQUENCE_GAP)
    if counts["duplicate_sequences"]:
        reasons.add(DUPLICATE_SEQUENCE)
    if counts["dropped_queue_full"] or counts["dropped_shutdown"]:
        reasons.add(BACKPRESSURE_DROP)
    if counts["dropped_export_failure"]:
        reasons.add(EXPORT_FAILURE)
    if counts["rejected_redactor_error"]:
        reasons.add(REDACTOR_ERROR)
    if counts["public_safety_violations"]:
        reasons.add(PUBLIC_SAFETY_VIOLATION)
    if counts["ingest_violations"]:
        reasons.add(INGEST_VIOLATION)
    imported = is_imported(facts.key)
    if imported:
        reasons.add(IMPORTED)
    if set(figures) - set(by_observer):
        reasons.add(STATS_MISSING)
    elif counts["stored"] - counts["pruned_spans"] - counts["cleared_spans"] != counts["spans"]:
        ledger_ok = False
    if not ledger_ok:
        reasons.add(LEDGER_INVALID)
    observers = sorted((set(by_observer) | set(figures)) - {NO_OBSERVER})
    status = status_for(reasons, spans=counts["spans"], malformed=counts["malformed_rows"])
    return FigureVerdict(
        status, sorted(reasons), counts, observers, "imported" if imported else OBSERVED, dict(sorted(drops.items()))
    )


# -- contributions to the store's totals ----------------------------------------------------------------------
def contribution(verdict: FigureVerdict) -> dict[str, int]:
    """What one session's receipt adds to ``receipt_totals`` (the terms of
    :func:`~otel_agentdiag.diagnostics.verdict.combine`)."""
    out: dict[str, int] = {f"count:{k}": v for k, v in verdict.counts.items() if v}
    if nothing_reason(verdict.counts, verdict.reasons) is None:
        for reason in verdict.reasons:
            out[f"reason:{reason}"] = 1
        if verdict.counts.get("spans"):
            out["judged_spans"] = verdict.counts["spans"]
    else:
        out["not_judged"] = 1
    for observer in verdict.observers:
        out[f"observer:{observer}"] = 1
    out[f"provenance:{verdict.provenance}"] = 1
    out["sessions"] = 1
    return out


def _stored_verdict(row: Sequence[Any]) -> FigureVerdict:
    """A ``receipt_sessions`` row (status, reasons, counts, observers) as a verdict."""
    status, reasons, counts, observers = row
    return FigureVerdict(
        str(status),
        str(reasons).split(",") if reasons else [],
        dict(zip(COUNT_KEYS, (int(v) for v in str(counts).split(",")), strict=True)),
        list(json.loads(observers)),
        OBSERVED,
        {},
    )


# -- the writer's part ----------------------------------------------------------------------------------------
def _chunks(items: Sequence[Any], size: int = 400) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _plain(row: SpanRow) -> bool:
    """Whether the stored row will read back exactly as the figures count it (anything else: recompute from
    the stored row)."""
    sequence = row.sequence
    return (
        type(row.attributes) is dict
        and isinstance(row.events, (list, tuple))
        and isinstance(row.links, (list, tuple))
        and (row.scope is None or type(row.scope) is dict)
        and isinstance(row.resource, Mapping)
        and (sequence is None or type(sequence) is int)
    )


def add_written(
    conn: sqlite3.Connection, written: Sequence[SpanRow], observers: Sequence[str], stale: Iterable[str] = ()
) -> None:
    """Add the rows a batch wrote to the figures and the missing parents; ``observers``: each row's stored
    observer ('' for none), parallel to ``written``; ``stale``: session keys whose rows the writer changed on the
    way in (shrunk to fit): recomputed from the stored rows. Call in the writer's transaction, after the insert
    and before :func:`~otel_agentdiag.storage.summaries.record_batch` (whose delete handling follows)."""
    figures: dict[tuple[str, str], Figure] = {}
    redo = set(stale)
    children: dict[tuple[str, str, str], tuple[str, int, int]] = {}
    observed_ids: set[tuple[str, str]] = set()
    for row, observer in zip(written, observers, strict=True):
        key = row.session or ""
        if not _plain(row):
            redo.add(key)
            continue
        fkey = (key, observer)
        figure = figures.get(fkey)
        if figure is None:
            figure = figures[fkey] = Figure()
        figure.add_span(row, corrupt=False, stored_observer=observer)
        if key.startswith(IMPORTED_PREFIX):
            continue
        observed_ids.add((row.trace_id, row.span_id))
    for row, observer in zip(written, observers, strict=True):
        key = row.session or ""
        parent = row.parent_span_id
        if parent is None or key.startswith(IMPORTED_PREFIX) or (row.trace_id, parent) in observed_ids:
            continue
        sequence = row.sequence if type(row.sequence) is int else -1
        child = (observer, sequence, row.start_ns)
        ckey = (row.trace_id, parent, key)
        known = children.get(ckey)
        if known is None or (child[1], child[2]) < (known[1], known[2]):
            children[ckey] = child
    if figures:
        _merge_figures(conn, figures)
    touched: set[str] = {key for key, _observer in figures}
    # Missing parents that this batch brought.
    if observed_ids and conn.execute("SELECT 1 FROM receipt_missing LIMIT 1").fetchone() is not None:
        traces = sorted({trace_id for trace_id, _span_id in observed_ids})
        found: list[tuple[str, str, str]] = []
        for chunk in _chunks(traces):
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
        for chunk in _chunks(wanted, 300):
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


def _merge_figures(conn: sqlite3.Connection, figures: Mapping[tuple[str, str], Figure]) -> None:
    keys = list(figures)
    old: dict[tuple[str, str], tuple[int, str]] = {}
    sessions = sorted({key for key, _observer in keys})
    for chunk in _chunks(sessions):
        for session, observer, numbered, ranges in conn.execute(
            "SELECT session, observer, numbered, ranges FROM receipt_figures"
            f" WHERE session IN ({','.join('?' * len(chunk))})",
            list(chunk),
        ):
            if (session, observer) in figures:
                old[(session, observer)] = (int(numbered), str(ranges))
    params = []
    for fkey, figure in figures.items():
        ranges = figure.ranges
        if fkey in old:
            merged = _load_ranges(old[fkey][1])
            for lo, hi in ranges:
                _merge_range(merged, lo, hi)
            ranges = merged
        params.append((*fkey, figure.n_rows, figure.tombstones, figure.numbered, _dump_ranges(ranges), figure.safety))
    conn.executemany(
        "INSERT INTO receipt_figures (session, observer, n_rows, tombstones, numbered, ranges, safety)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session, observer) DO UPDATE SET n_rows = n_rows + excluded.n_rows,"
        " tombstones = tombstones + excluded.tombstones, numbered = numbered + excluded.numbered,"
        " ranges = excluded.ranges, safety = safety + excluded.safety",
        params,
    )


def _merge_range(ranges: list[list[int]], lo: int, hi: int) -> None:
    """Add the inclusive range ``[lo, hi]`` to ``ranges`` (in place)."""
    merged: list[list[int]] = []
    placed = False
    for r in ranges:
        if r[1] < lo - 1:
            merged.append(r)
        elif r[0] > hi + 1:
            if not placed:
                merged.append([lo, hi])
                placed = True
            merged.append(r)
        else:
            lo, hi = min(lo, r[0]), max(hi, r[1])
    if not placed:
        merged.append([lo, hi])
    merged.sort()
    ranges[:] = merged


def recompute_sessions(conn: sqlite3.Connection, keys: Iterable[str]) -> None:
    """Recompute the figures of ``keys`` from their stored rows (decoded, as a reader decodes them)."""
    for key in sorted(set(keys)):
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
                (key, o, f.n_rows, f.tombstones, f.numbered, _dump_ranges(f.ranges), f.safety, f.malformed)
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


def _load_facts(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, tuple[SessionFacts, bool, bool]]:
    """key -> (facts, listed: has a ``sessions`` row the reader lists, known: the receipt lists the session)."""
    figures: dict[str, dict[str, Figure]] = {k: {} for k in keys}
    stats: dict[str, list[SessionStats]] = {k: [] for k in keys}
    rows: dict[str, tuple[Any, ...]] = {}
    violations: dict[str, int] = {}
    missing: dict[str, list[tuple[str, int]]] = {k: [] for k in keys}
    for chunk in _chunks(keys):
        marks = ",".join("?" * len(chunk))
        args = list(chunk)
        for session, observer, n, tomb, numbered, ranges, safety, malformed in conn.execute(
            "SELECT session, observer, n_rows, tombstones, numbered, ranges, safety, malformed FROM receipt_figures"
            f" WHERE session IN ({marks})",
            args,
        ):
            figures[session][observer] = Figure(
                int(n), int(tomb), int(numbered), _load_ranges(ranges), int(safety), int(malformed)
            )
        for observer, session, observed, accepted, stored, duplicates, rejected, dropped in conn.execute(
            "SELECT observer, session, observed, accepted, stored, duplicates, rejected, dropped FROM session_stats"
            f" WHERE session IN ({marks}) ORDER BY session, observer",
            args,
        ):
            stats[session].append(
                SessionStats(
                    observer=observer,
                    session=session or None,
                    observed=int(observed or 0),
                    accepted=int(accepted or 0),
                    stored=int(stored or 0),
                    duplicates=int(duplicates or 0),
                    rejected={} if rejected == "{}" else load_counts(rejected),
                    dropped={} if dropped == "{}" else load_counts(dropped),
                )
            )
        for row in conn.execute(
            "SELECT session, first_start_ns, cleared_at_ns, generation, pruned_spans, cleared_spans FROM sessions"
            f" WHERE session IN ({marks})",
            args,
        ):
            rows[row[0]] = row
        for session, n in conn.execute(
            f"SELECT session, COUNT(*) FROM violations WHERE session IN ({marks}) GROUP BY session", args
        ):
            violations[session] = int(n)
        for session, observer, sequence in conn.execute(
            f"SELECT session, observer, sequence FROM receipt_missing WHERE session IN ({marks})", args
        ):
            missing[session].append((observer, int(sequence)))
    out: dict[str, tuple[SessionFacts, bool, bool]] = {}
    for key in keys:
        row = rows.get(key)
        listed = row is not None and (bool(key) or row[1] is not None)
        known = listed or bool(stats[key]) or (bool(key) and key in violations)
        facts = SessionFacts(
            key=key,
            figures=figures[key],
            stats=stats[key],
            pruned_spans=int(row[4] or 0) if listed and row is not None else 0,
            cleared_spans=int(row[5] or 0) if listed and row is not None else 0,
            cleared=listed and row is not None and (row[2] is not None or int(row[3] or 0) > 0),
            violations=violations.get(key, 0) if key else 0,
            missing=missing[key],
        )
        out[key] = (facts, listed, known)
    return out


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
    facts = _load_facts(conn, keys)
    old: dict[str, tuple[Any, ...]] = {}
    for chunk in _chunks(keys):
        for row in conn.execute(
            "SELECT session, settled, status, reasons, counts, observers FROM receipt_sessions"
            f" WHERE session IN ({','.join('?' * len(chunk))})",
            list(chunk),
        ):
            old[row[0]] = row
    delta: dict[str, int] = {}
    upserts: list[tuple[Any, ...]] = []
    removed: list[tuple[str]] = []
    for key in keys:
        found = old.get(key)
        if found is not None and found[1]:
            for name, value in contribution(_stored_verdict(found[2:])).items():
                delta[name] = delta.get(name, 0) - value
        session_facts, listed, known = facts[key]
        if not known:
            if found is not None:
                removed.append((key,))
            continue
        if not _settled(session_facts, listed):
            upserts.append((key, 0, None, None, None, None, None))
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
                ",".join([str(verdict.counts[k]) for k in COUNT_KEYS]),
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
    """Recompute every receipt figure from the rows (decoded) and the ledger: migration 8's backfill, benchmark
    stores made with SQL, a check in the tests. Runs in the caller's transaction when one is open."""
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN IMMEDIATE")
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
                (*fkey, f.n_rows, f.tombstones, f.numbered, _dump_ranges(f.ranges), f.safety, f.malformed)
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


def has_tables(conn: sqlite3.Connection) -> bool:
    """Whether the store has migration 8's tables."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'receipt_state'").fetchone()
    return found is not None


# -- readers --------------------------------------------------------------------------------------------------
def figures_vouch(conn: sqlite3.Connection) -> bool:
    """Whether the figures account for every row and every ledger, bookkeeping and violation change (nothing
    written by other means since the last settle). O(1)."""
    try:
        found = conn.execute("SELECT watermark FROM receipt_state WHERE id = 1").fetchone()
    except sqlite3.OperationalError:
        return False
    if found is None:
        return False
    (top,) = conn.execute("SELECT coalesce(max(rowid), 0) FROM spans").fetchone()
    if int(top) != int(found[0]):
        return False
    for table in ("receipt_touched", "receipt_stale", "summary_dirty"):
        if conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None:
            return False
    return True


@dataclass(frozen=True)
class StoreFigures:
    """The settled sessions' receipts summed, and the sessions only their rows can judge."""

    totals: dict[str, int]
    unsettled: list[str]
    """Session keys ('' = no session)."""
    not_judged: list[str]
    """Settled sessions with nothing to judge."""


def read_store_figures(conn: sqlite3.Connection) -> StoreFigures:
    totals = {str(k): int(v) for k, v in conn.execute("SELECT key, value FROM receipt_totals")}
    unsettled = [
        str(r[0])
        for r in conn.execute(
            "SELECT session FROM receipt_sessions INDEXED BY receipt_sessions_unsettled WHERE settled = 0"
        )
    ]
    not_judged = [
        str(r[0])
        for r in conn.execute(
            "SELECT session FROM receipt_sessions INDEXED BY receipt_sessions_unjudged"
            " WHERE unjudged IS NOT NULL AND settled = 1"
        )
    ]
    return StoreFigures(totals, unsettled, not_judged)


def read_session_verdicts(conn: sqlite3.Connection, keys: Sequence[str] | None) -> dict[str, FigureVerdict | None]:
    """key -> the stored verdict of a settled session, None for an unsettled one (absent: not a session the
    receipt lists). ``keys`` None: every session."""
    out: dict[str, FigureVerdict | None] = {}
    sql = "SELECT session, settled, status, reasons, counts, observers FROM receipt_sessions"
    batches: Iterable[Sequence[str] | None] = [None] if keys is None else _chunks(list(keys))
    for chunk in batches:
        if chunk is None:
            cursor = conn.execute(sql)
        else:
            cursor = conn.execute(sql + f" WHERE session IN ({','.join('?' * len(chunk))})", list(chunk))
        for row in cursor:
            out[str(row[0])] = _stored_verdict(row[2:]) if row[1] else None
    return out


def read_facts(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, SessionFacts]:
    """The facts :func:`judge_figures` needs for settled sessions ``keys`` (to judge them with an overflow row)."""
    return {key: facts for key, (facts, _listed, _known) in _load_facts(conn, list(keys)).items()}


def sessions_of_observers(conn: sqlite3.Connection, observers: Sequence[str]) -> set[str]:
    """Session keys in which any of ``observers`` has rows or ledger rows."""
    found: set[str] = set()
    for chunk in _chunks(list(observers)):
        marks = ",".join("?" * len(chunk))
        found.update(
            r[0] for r in conn.execute(f"SELECT session FROM session_stats WHERE observer IN ({marks})", list(chunk))
        )
        found.update(
            r[0] for r in conn.execute(f"SELECT session FROM receipt_figures WHERE observer IN ({marks})", list(chunk))
        )
    return found
