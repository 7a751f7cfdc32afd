"""The receipt's rules on figures: what ``judge`` gives from a session's rows, computed from figures of them.

Here: the verdict's vocabulary, the figures a receipt needs of a session's rows, and :func:`judge_figures`,
which gives the receipt :func:`~otel_agentdiag.diagnostics.verdict.judge` gives from the rows.

Pure (no SQL). :mod:`otel_agentdiag.diagnostics.verdict` re-exports the vocabulary (statuses, reason codes,
count keys): one copy, here, because the writer judges settled sessions in its transaction
(:mod:`otel_agentdiag.storage.receipt_figures`) and storage does not import diagnostics.

Distinct sequence numbers are kept as merged inclusive ranges (``"0:24,26:30"`` in the store), so duplicates and
missing numbers are exact for any order of arrival.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import reason_codes
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

SEQUENCE_GAP = reason_codes.SEQUENCE_GAP
DUPLICATE_SEQUENCE = reason_codes.DUPLICATE_SEQUENCE
BACKPRESSURE_DROP = reason_codes.BACKPRESSURE_DROP
EXPORT_FAILURE = reason_codes.EXPORT_FAILURE
REDACTOR_ERROR = reason_codes.REDACTOR_ERROR
PUBLIC_SAFETY_VIOLATION = reason_codes.PUBLIC_SAFETY_VIOLATION
UNFINISHED_SPAN = reason_codes.UNFINISHED_SPAN
STATS_MISSING = reason_codes.STATS_MISSING
LEDGER_INVALID = reason_codes.LEDGER_INVALID
INGEST_VIOLATION = reason_codes.INGEST_VIOLATION
NO_OBSERVATIONS = reason_codes.NO_OBSERVATIONS
"""Why a receipt with no stored span, no malformed row and no other reason is ``invalid``: nothing was recorded
there (an empty or just-cleared store, a session whose spans were all pruned), so there is nothing to vouch for;
nothing is wrong. Given on :class:`~otel_agentdiag.diagnostics.verdict.Receipt` only, never stored."""

INVALID_REASONS = frozenset({STATS_MISSING, LEDGER_INVALID, INGEST_VIOLATION})
QUARANTINE_REASONS = frozenset({REDACTOR_ERROR, PUBLIC_SAFETY_VIOLATION})
DEGRADED_REASONS = frozenset({SEQUENCE_GAP, DUPLICATE_SEQUENCE, BACKPRESSURE_DROP, EXPORT_FAILURE, UNFINISHED_SPAN})

PUBLIC_SAFETY_COUNTER = reason_codes.PUBLIC_SAFETY_COUNTER

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


_COUNT_REASONS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("sequence_gaps",), SEQUENCE_GAP),
    (("duplicate_sequences",), DUPLICATE_SEQUENCE),
    (("dropped_queue_full", "dropped_shutdown"), BACKPRESSURE_DROP),
    (("dropped_export_failure",), EXPORT_FAILURE),
    (("rejected_redactor_error",), REDACTOR_ERROR),
    (("public_safety_violations",), PUBLIC_SAFETY_VIOLATION),
    (("unfinished_spans",), UNFINISHED_SPAN),
    (("ingest_violations",), INGEST_VIOLATION),
)


def count_reasons(counts: Mapping[str, int]) -> set[str]:
    """The reason codes a session's counts give by themselves (a count above 0 names its reason); the rules that
    need more than counts (imported, stats missing, ledger balance) are the judges' own."""
    return {reason for keys, reason in _COUNT_REASONS if any(counts.get(key, 0) for key in keys)}


def nothing_reason(counts: Mapping[str, int], reasons: Sequence[str]) -> str | None:
    """Why a session receipt with these counts and reasons has nothing to judge (see
    :func:`~otel_agentdiag.diagnostics.verdict.nothing_to_judge`), or None."""
    if any(reason != NO_OBSERVATIONS for reason in reasons) or counts.get("spans") or counts.get("malformed_rows"):
        return None
    if counts.get("cleared_spans"):
        return "cleared"
    if counts.get("pruned_spans"):
        return "pruned"
    return "empty"


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


def dump_ranges(ranges: Sequence[Sequence[int]]) -> str:
    """``[[0, 4], [7, 7]]`` as ``"0:4,7:7"`` (numbers are >= 0)."""
    return ",".join(f"{lo}:{hi}" for lo, hi in ranges)


def load_ranges(text: Any) -> list[list[int]]:
    if not text or not isinstance(text, str):
        return []
    out: list[list[int]] = []
    for part in text.split(","):
        lo, _, hi = part.partition(":")
        out.append([int(lo), int(hi)])
    return out


@dataclass(slots=True)
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
        flagged = span.attributes.get(PUBLIC_SAFETY_COUNTER)
        if flagged is not None:
            self.safety += positive_int(flagged)
        sequence = span.sequence
        if stored_observer and isinstance(sequence, int) and not isinstance(sequence, bool) and sequence >= 0:
            self.numbered += 1
            ranges = self.ranges
            if ranges and sequence == ranges[-1][1] + 1:
                ranges[-1][1] = sequence  # the usual case: the next number
            else:
                _add_numbers(ranges, (sequence,))

    def add_plain(self, row: SpanRow, observer: str, numbers: list[int]) -> None:
        """:meth:`add_span` for a row the writer stores as handed in (``sequence`` None or an ``int``, not a
        bool; never malformed), with ``observer`` its stored observer ('' for none): the writer's per-row step.
        The row's sequence number, when it counts, is appended to ``numbers`` for :meth:`add_numbers`."""
        self.n_rows += 1
        if row.name == sc.TOMBSTONE_SPAN_NAME:
            self.tombstones += 1
        flagged = row.attributes.get(PUBLIC_SAFETY_COUNTER)
        if flagged is not None:
            self.safety += positive_int(flagged)
        sequence = row.sequence
        if observer and sequence is not None and sequence >= 0:
            numbers.append(sequence)

    def add_numbers(self, numbers: list[int]) -> None:
        """Count the sequence numbers :meth:`add_plain` collected (sorted once: spans end out of order)."""
        if numbers:
            self.numbered += len(numbers)
            _add_numbers(self.ranges, numbers)


# -- the rules, on figures ------------------------------------------------------------------------------------
@dataclass(slots=True)
class FigureVerdict:
    """A session receipt's fields as :func:`judge_figures` computes them (not frozen: made per session by the
    writer, where a frozen dataclass's construction shows; never changed once made)."""

    status: str
    reasons: list[str]
    counts: dict[str, int]
    observers: list[str]
    provenance: str
    unattributed_drops: dict[str, int]


@dataclass(slots=True)
class SessionFacts:
    """Everything a settled session's receipt is computed from, without its rows (never changed once made)."""

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


def clean_count(facts: SessionFacts) -> int | None:
    """The number of rows of the usual session, decided without the general rules (the writer judges one per
    touched session): one observer, its ledger row with nothing lost, every number from 0 stored once, nothing
    deleted, refused or flagged. None for any other session. Its verdict is :func:`clean_verdict` (the one
    :func:`judge_figures`'s rules give it)."""
    if len(facts.stats) != 1 or facts.pruned_spans or facts.cleared_spans or facts.cleared or facts.violations:
        return None
    row = facts.stats[0]
    n = row.stored
    observer = row.observer
    if row.rejected or row.dropped or row.duplicates or row.observed != n or row.accepted != n or not observer:
        return None
    figure = None
    for key, found in facts.figures.items():
        if found.n_rows:
            if figure is not None or key != observer:
                return None
            figure = found
    if figure is None or figure.n_rows != n or figure.numbered != n or figure.ranges != [[0, n - 1]]:
        return None
    if figure.tombstones or figure.malformed or figure.safety or facts.key.startswith(IMPORTED_PREFIX):
        return None
    return n


def clean_verdict(n: int, observer: str) -> FigureVerdict:
    """The verdict of a session :func:`clean_count` found usual (``n`` rows of ``observer``)."""
    counts = dict.fromkeys(COUNT_KEYS, 0)
    counts["spans"] = counts["observed"] = counts["accepted"] = counts["stored"] = n
    return FigureVerdict(VALID, [], counts, [observer], OBSERVED, {})


_CLEAN_COUNTED = ("spans", "observed", "accepted", "stored")
CLEAN_COUNTS = ",".join("{0}" if key in _CLEAN_COUNTED else "0" for key in COUNT_KEYS)
"""``CLEAN_COUNTS.format(n)``: the stored counts of :func:`clean_verdict` (``receipt_sessions.counts``)."""
CLEAN_CONTRIBUTION = (*(f"count:{key}" for key in _CLEAN_COUNTED), "judged_spans")
"""The totals :func:`contribution` adds ``n`` to for :func:`clean_verdict`; it adds 1 to ``sessions``,
``provenance:observed`` and ``observer:<its observer>``."""


def judge_figures(facts: SessionFacts, unattributed: Mapping[str, Mapping[str, int]] | None = None) -> FigureVerdict:
    """The receipt :func:`~otel_agentdiag.diagnostics.verdict.judge` gives a session from its rows, computed from
    its figures, ledger rows and bookkeeping. Exact when :func:`missing_parents_rule_out` holds (no unfinished
    span) and the session's ``sessions`` row (pruned/cleared counts) is the one the reader's summary shows.
    ``unattributed``: observer -> cause -> its overflow drops, for this session's observers. Pure."""
    n = clean_count(facts) if not unattributed else None
    if n is not None:
        return clean_verdict(n, facts.stats[0].observer)
    by_observer: dict[str, SessionStats] = {}
    reasons: set[str] = set()
    counts: dict[str, int] = dict.fromkeys(COUNT_KEYS, 0)
    ledger_ok = True
    explained: dict[str, int] = {}
    for row in facts.stats:
        by_observer[row.observer] = row
        counts["observed"] += row.observed
        counts["accepted"] += row.accepted
        counts["stored"] += row.stored
        counts["duplicate_sequences"] += max(row.duplicates, 0)
        if not row.rejected and not row.dropped:  # the usual row: nothing lost
            if row.observed != row.accepted:
                ledger_ok = False
            continue
        rejected = {k: positive_int(v) for k, v in row.rejected.items()}
        dropped = {k: positive_int(v) for k, v in row.dropped.items()}
        lost = sum(dropped.values()) + sum(rejected.values())
        explained[row.observer] = explained.get(row.observer, 0) + lost
        counts["rejected"] += sum(rejected.values())
        counts["dropped"] += sum(dropped.values())
        counts["dropped_queue_full"] += dropped.get(DROP_QUEUE_FULL, 0)
        counts["dropped_export_failure"] += dropped.get(DROP_EXPORT_FAILURE, 0)
        counts["dropped_shutdown"] += dropped.get(DROP_SHUTDOWN, 0)
        counts["dropped_cleared"] += dropped.get(DROP_CLEARED, 0)
        counts["rejected_redactor_error"] += rejected.get(REJECT_REDACTOR_ERROR, 0)
        if row.observed != row.accepted + lost:
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
    reasons |= count_reasons(counts)
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


def stored_verdict(row: Sequence[Any]) -> FigureVerdict:
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


def merge_range(ranges: list[list[int]], lo: int, hi: int) -> None:
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
