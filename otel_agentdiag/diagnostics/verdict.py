"""Integrity verdicts: the pure rules that judge a session (and combine sessions into a store) from its records.


A verdict compares three records the pipeline keeps independently (:mod:`otel_agentdiag.diagnostics.receipt`
reads them from the store):

- the rows (``spans``), each numbered with ``agentdiag.sequence`` per (observer, session) at span start;
- the cumulative ledger per (observer, session) (``session_stats``), in which
  ``observed == accepted + sum(rejected) + sum(dropped)`` must hold;
- the store's own bookkeeping of what it deleted on purpose (``pruned_spans`` by retention,
  ``cleared_spans`` by ``agentdiag clear``).

Status, worst first (the first rule that applies wins):

``invalid``
    Nothing to judge (no stored span), a stored span whose observer has no ledger row (``stats_missing``), a
    ledger row that does not balance or that does not account for the stored rows (``ledger_invalid``), or
    malformed rows (``counts["malformed_rows"] > 0``), or input the store refused to take
    (``ingest_violation``: a line of ``agentdiag ingest`` that was malformed or rejected, recorded durably; the
    session's receipt when the line's session is known, the store's receipt always). "No stored span" and
    "malformed rows" carry no reason code of their own: the counts say which.
``quarantined``
    The redactor failed on a span (``redactor_error``) or removed a credential-like value
    (``public_safety_violation``).
``degraded``
    Spans are missing or doubled: ``sequence_gap``, ``duplicate_sequence``, ``backpressure_drop`` (queue full,
    or still queued at shutdown), ``export_failure``, ``unfinished_span`` (started, never ended); also when spans
    *may* be missing, dropped by an observer of the session that could not file them under it (see below).
``imported``
    None of the above, but the spans were imported (``agentdiag ingest``), not observed here: their numbers
    and ledger come from a file nothing authenticates, so the copy is judged against its own numbering and
    never called ``valid``. Every receipt of an imported session carries the reason ``imported``.
``valid``
    None of the above, for spans this machine observed.

Provenance (:mod:`otel_agentdiag.storage.provenance`): imported spans are filed under ``imported:<digest>``
session keys, so the receipt of a session this machine observed reads only what it observed (its rows, its
ledger rows, its violations, and, to tell a missing parent, the observed spans of its traces): nothing an
ingest writes changes it. :attr:`Receipt.provenance` says which (``observed`` or ``imported``; a store
receipt says ``mixed`` when it holds both).

Unattributed drops: a pipeline keeps the drop counts of a bounded number of sessions while the store cannot be
written; those of further sessions go to one ledger row per observer under the reserved key
:data:`~otel_agentdiag.storage.OVERFLOW_SESSION`. The store's receipt counts them exactly (that row is judged
like a session). A session's own receipt cannot tell which of them were its spans: when an observer of the
session (one with rows or ledger rows in it; any observer, for a session the store knows nothing of) has such
a row, the receipt carries the reasons of that row's causes (``backpressure_drop`` for ``queue_full`` and
``shutdown``, ``export_failure``, ``redactor_error``) although its own drop counts may be 0, so it is never
``valid``; :attr:`Receipt.unattributed_drops` names how many spans per observer (JSON ``unattributed_drops``),
and missing numbers up to that many are not called ``sequence_gap`` or unfinished (they may be those drops).

Spans dropped because their session was cleared while they were in flight are counted
(``dropped_cleared``) but do not degrade a receipt: the user asked for them to go.

A session with nothing left to judge (every row cleared or pruned, nothing else wrong) is ``invalid`` on its
own receipt, says so (:func:`nothing_to_judge`), and is left out of the store's verdict, which says how many
it left out: ``agentdiag sessions``, ``receipt --session`` and ``receipt`` tell one story.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import reason_codes
from otel_agentdiag.storage import OVERFLOW_SESSION, SessionStats, StoredSpan
from otel_agentdiag.storage.provenance import IMPORTED as IMPORTED_PROVENANCE
from otel_agentdiag.storage.provenance import OBSERVED, is_imported

# The vocabulary lives beside the figures the writer judges with (storage/receipt_figures.py): one copy.
from otel_agentdiag.storage.receipt_rules import (
    BACKPRESSURE_DROP,
    COUNT_KEYS,
    DEGRADED,
    DUPLICATE_SEQUENCE,
    EXPORT_FAILURE,
    IMPORTED,
    INGEST_VIOLATION,
    INVALID,
    LEDGER_INVALID,
    MIXED,
    NO_OBSERVATIONS,
    PUBLIC_SAFETY_COUNTER,
    PUBLIC_SAFETY_VIOLATION,
    QUARANTINED,
    REDACTOR_ERROR,
    SEQUENCE_GAP,
    STATS_MISSING,
    UNFINISHED_SPAN,
    VALID,
    count_reasons,
    nothing_reason,
)
from otel_agentdiag.storage.receipt_rules import status_for as _status_for

STATUSES = (VALID, IMPORTED, DEGRADED, QUARANTINED, INVALID)
"""From best to worst."""
PROVENANCES = (OBSERVED, IMPORTED_PROVENANCE, MIXED)
"""Values of :attr:`Receipt.provenance` (``mixed``: a store receipt over observed and imported sessions)."""
REASONS = (
    BACKPRESSURE_DROP,
    DUPLICATE_SEQUENCE,
    EXPORT_FAILURE,
    IMPORTED,
    INGEST_VIOLATION,
    LEDGER_INVALID,
    NO_OBSERVATIONS,
    PUBLIC_SAFETY_VIOLATION,
    REDACTOR_ERROR,
    SEQUENCE_GAP,
    STATS_MISSING,
    UNFINISHED_SPAN,
)

# Drop causes and reject reasons as the pipeline and the store record them.
DROP_QUEUE_FULL = reason_codes.QUEUE_FULL
DROP_EXPORT_FAILURE = reason_codes.EXPORT_FAILURE
DROP_SHUTDOWN = reason_codes.SHUTDOWN
DROP_CLEARED = reason_codes.CLEARED
REJECT_REDACTOR_ERROR = reason_codes.REDACTOR_ERROR

NO_OBSERVER = ""
"""The ledger's observer for rows that carried none (spans not numbered by a sequencer)."""


@dataclass(frozen=True)
class Receipt:
    """The integrity verdict on one session (``session`` = its digest, ``None`` = spans outside any session)
    or, from :func:`store_receipt`, on the whole store (``scope == "store"``)."""

    status: str
    reasons: list[str]
    """Reason codes, sorted."""
    counts: dict[str, int]
    """The numbers behind the verdict; keys are :data:`COUNT_KEYS`."""
    observers: list[str]
    """The pipeline instances (``agentdiag.observer.id``) that wrote to the session, sorted."""
    session: str | None
    scope: str = "session"
    """``session`` or ``store``."""
    provenance: str = OBSERVED
    """``observed`` (spans this machine recorded), ``imported`` (``agentdiag ingest``), or for the store
    ``mixed``: see :data:`PROVENANCES`."""
    not_judged: tuple[str | None, ...] = ()
    """A store receipt: the sessions left out of its verdict, having nothing to judge (see
    :func:`nothing_to_judge`), by key (None first). Not part of the JSON shape."""
    unattributed_drops: Mapping[str, int] = field(default_factory=dict)
    """A session receipt: observer -> spans it dropped or rejected that are counted under no session (its overflow
    row), some of which may be this session's (see the module doc). In the JSON only when not empty."""

    def __post_init__(self) -> None:
        # Invalid for want of anything to judge, and for no other reason: say so (``no_observations``), so that
        # ``reasons`` is never empty on an invalid receipt.
        c = self.counts
        if self.status == INVALID and not self.reasons and not c.get("spans") and not c.get("malformed_rows"):
            object.__setattr__(self, "reasons", [NO_OBSERVATIONS])

    def to_json(self) -> dict[str, Any]:
        """The documented JSON shape: ``{"session", "status", "reasons", "counts", "observers", "provenance"}``,
        plus ``"unattributed_drops"`` (observer -> n) on a session receipt whose observers have an overflow row."""
        out: dict[str, Any] = {
            "session": self.session,
            "status": self.status,
            "reasons": list(self.reasons),
            "counts": dict(self.counts),
            "observers": list(self.observers),
            "provenance": self.provenance,
        }
        if self.unattributed_drops:
            out["unattributed_drops"] = dict(sorted(self.unattributed_drops.items()))
        return out


@dataclass(frozen=True)
class ReceiptInput:
    """What a session receipt is computed from: everything the store knows about the session."""

    session: str | None
    spans: Sequence[StoredSpan]
    stats: Sequence[SessionStats]
    pruned_spans: int = 0
    cleared_spans: int | None = 0
    """Rows ``agentdiag clear`` deleted; ``None``: not known (then the rows need only not exceed the ledger)."""
    cleared: bool = False
    """Whether the session was ever cleared (its rows deleted on purpose at some point)."""
    outside_span_ids: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """trace id -> span ids stored in that trace outside the session (a parent there is not missing)."""
    violations: int = 0
    """Durable records of input of this session the store refused (``agentdiag ingest``)."""
    unattributed: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Observer -> cause or reason -> spans it counted under :data:`~otel_agentdiag.storage.OVERFLOW_SESSION`
    (dropped or rejected when its table of per-session counts was full), for the observers that may have filed
    this session's spans there (``cleared`` drops left out: those were asked for)."""


_UNATTRIBUTED_REASONS = {
    DROP_QUEUE_FULL: BACKPRESSURE_DROP,
    DROP_SHUTDOWN: BACKPRESSURE_DROP,
    DROP_EXPORT_FAILURE: EXPORT_FAILURE,
    REJECT_REDACTOR_ERROR: REDACTOR_ERROR,
}
"""The reason a session's receipt gives for drops of its observer that may be its own, by cause."""


def unattributed_of(overflow: Iterable[SessionStats], observers: Iterable[str] | None) -> dict[str, dict[str, int]]:
    """Observer -> cause -> spans in its overflow row (``overflow``: the rows of that key; ``cleared`` left out),
    for ``observers`` (None: all)."""
    wanted = None if observers is None else set(observers)
    found: dict[str, dict[str, int]] = {}
    for row in overflow:
        if wanted is not None and row.observer not in wanted:
            continue
        for cause, n in [*row.dropped.items(), *row.rejected.items()]:
            if _int(n) and cause != DROP_CLEARED:
                by_cause = found.setdefault(row.observer, {})
                by_cause[cause] = by_cause.get(cause, 0) + _int(n)
    return found


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _missing_below(present: Sequence[int], low: int, limit: int) -> int:
    """How many integers in ``[low, limit)`` are not in the sorted, distinct ``present``."""
    if limit <= low:
        return 0
    inside = sum(1 for s in present if low <= s < limit)
    return (limit - low) - inside


def judge(data: ReceiptInput) -> Receipt:
    """The receipt of one session from its rows, its ledger rows and the store's deletion counts. Pure.

    - ``sequence_gaps``: per (observer, session), sequence numbers missing between the lowest judged number
      and the highest stored one, less those held by unfinished spans (still open, not lost) and less the
      spans the ledger counted as dropped or rejected (lost, but explained by their own reason): a gap is a
      loss nothing accounts for. Once the session lost rows on purpose (retention pruned it or it was
      cleared), the rows deleted are subtracted too (from the numbers missing from 0; when a clear's count is
      unknown, numbers below the oldest survivor are explained instead): retention deletes by start time, and
      concurrent spans of a session take their numbers in a slightly different order.
    - ``duplicate_sequences``: spans the store received twice (ledger ``duplicates``) plus stored rows that
      share one (observer, sequence).
    - ``unfinished_spans``: distinct parents that stored spans of the session name but that are stored nowhere
      in their trace, counted only where the numbering shows a span of this session on the child's observer
      that started before the child and was never accounted for (so a remote parent, a parent outside the
      session or a parent lost to a counted drop is not "unfinished").
    - ``stats_missing``: a stored span whose observer has no ledger row for the session.
    - ``ledger_invalid``: a ledger row with ``observed != accepted + sum(rejected) + sum(dropped)``, or
      ``sum(stored) - pruned_spans - cleared_spans`` different from the number of stored rows.
    - ``ingest_violation``: ``data.violations > 0`` (counted as ``ingest_violations``).
    - ``imported``: the session key is an imported one (``imported:...``): the best verdict is ``imported``.
    """
    spans = data.spans
    stats = data.stats
    by_observer: dict[str, SessionStats] = {}
    reasons: set[str] = set()
    counts: Counter[str] = Counter()
    ledger_ok = True
    explained: Counter[str] = Counter()
    """Per observer: spans the ledger says never reached the store (counted drops and rejections). Each
    accounts for one missing sequence number; only the rest are gaps."""
    for row in stats:
        by_observer[row.observer] = row
        rejected = {k: _int(v) for k, v in row.rejected.items()}
        dropped = {k: _int(v) for k, v in row.dropped.items()}
        explained[row.observer] += sum(dropped.values()) + sum(rejected.values())
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

    counts["spans"] = len(spans)
    counts["pruned_spans"] = max(data.pruned_spans, 0)
    counts["cleared_spans"] = max(data.cleared_spans or 0, 0)
    counts["malformed_rows"] = sum(1 for s in spans if s.corrupt)
    counts["public_safety_violations"] = sum(_int(s.attributes.get(PUBLIC_SAFETY_COUNTER)) for s in spans)
    counts["ingest_violations"] = _int(data.violations)

    # -- sequence numbers, per observer --------------------------------------------------------------
    numbers: dict[str, Counter[int]] = defaultdict(Counter)
    row_observers: set[str] = set()
    for span in spans:
        observer = span.observer or NO_OBSERVER
        row_observers.add(observer)
        if span.name == sc.TOMBSTONE_SPAN_NAME:
            explained[observer] -= 1  # a rejected span stored as a tombstone keeps its number
        if span.observer and isinstance(span.sequence, int) and span.sequence >= 0:
            numbers[span.observer][span.sequence] += 1
    unattributed: dict[str, int] = {}
    if data.session != OVERFLOW_SESSION:
        for observer, by_cause in data.unattributed.items():
            n = sum(_int(v) for v in by_cause.values())
            if n:
                unattributed[observer] = n
                explained[observer] += n  # maybe this session's drops: not a gap, but not vouched for either
                reasons.update(_UNATTRIBUTED_REASONS[c] for c in by_cause if c in _UNATTRIBUTED_REASONS)
    lost_on_purpose = data.pruned_spans > 0 or bool(data.cleared_spans) or data.cleared
    present: dict[str, list[int]] = {}
    low_of: dict[str, int] = {}
    for observer, seen in numbers.items():
        counts["duplicate_sequences"] += sum(n - 1 for n in seen.values() if n > 1)
        distinct = sorted(seen)
        present[observer] = distinct
        low_of[observer] = distinct[0] if lost_on_purpose else 0

    # -- unfinished spans: parents that started and never arrived; their numbers are not gaps ----------
    open_spans, unnumbered = _unfinished(data, present, low_of, by_observer)
    counts["unfinished_spans"] = unnumbered + sum(open_spans.values())
    # Rows deleted on purpose, when the store knows how many: retention deletes the oldest by *start time*, and
    # numbers are handed out just after the start time is taken, so under concurrency a deleted span may hold a
    # number above the oldest survivor's. Then every number from 0 is judged and the deleted rows are subtracted.
    exact = lost_on_purpose and not (data.cleared and data.cleared_spans is None)
    unexplained = 0
    for observer, distinct in present.items():
        missing = _missing_below(distinct, 0 if exact else low_of[observer], distinct[-1] + 1)
        # Numbers held by open spans are not lost; numbers of spans the ledger counted as dropped or rejected
        # are lost *and explained* (their own reason says so). A gap is a loss nothing accounts for.
        unexplained += max(missing - open_spans.get(observer, 0) - max(explained[observer], 0), 0)
    deleted = max(data.pruned_spans, 0) + max(data.cleared_spans or 0, 0) if exact else 0
    counts["sequence_gaps"] += max(unexplained - deleted, 0)

    # -- reasons ------------------------------------------------------------------------------------
    reasons |= count_reasons(counts)
    imported = is_imported(data.session)
    if imported:
        reasons.add(IMPORTED)
    if row_observers - set(by_observer):
        reasons.add(STATS_MISSING)
    elif data.cleared_spans is None:
        # Rows deleted by a clear are not known: what the ledger stored must at least cover the rows.
        unexplained = counts["stored"] - counts["pruned_spans"] - counts["spans"]
        if unexplained < 0 or (unexplained > 0 and not data.cleared):
            ledger_ok = False
        counts["cleared_spans"] = max(unexplained, 0)
    elif counts["stored"] - counts["pruned_spans"] - counts["cleared_spans"] != counts["spans"]:
        ledger_ok = False
    if not ledger_ok:
        reasons.add(LEDGER_INVALID)

    observers = sorted((set(by_observer) | row_observers) - {NO_OBSERVER})
    ordered = {key: int(counts[key]) for key in COUNT_KEYS}
    status = _status_for(reasons, spans=ordered["spans"], malformed=ordered["malformed_rows"])
    provenance = IMPORTED_PROVENANCE if imported else OBSERVED
    found = sorted(reasons)
    return Receipt(
        status, found, ordered, observers, data.session, provenance=provenance, unattributed_drops=unattributed
    )


def _unfinished(
    data: ReceiptInput,
    present: Mapping[str, list[int]],
    low_of: Mapping[str, int],
    by_observer: Mapping[str, SessionStats],
) -> tuple[dict[str, int], int]:
    """Distinct missing parents that the numbering and the ledger say started in this session and never ended:
    per observer, and the number named by spans without numbers (nothing says otherwise for those)."""
    ids_by_trace: dict[str, set[str]] = defaultdict(set)
    for span in data.spans:
        ids_by_trace[span.trace_id].add(span.span_id)
    # missing parent -> the earliest-numbered child that names it
    first_child: dict[tuple[str, str], StoredSpan] = {}
    for span in data.spans:
        parent = span.parent_span_id
        if parent is None or parent in ids_by_trace[span.trace_id]:
            continue
        if parent in data.outside_span_ids.get(span.trace_id, frozenset()):
            continue
        key = (span.trace_id, parent)
        known = first_child.get(key)
        if known is None or _order(span) < _order(known):
            first_child[key] = span
    candidates: Counter[str] = Counter()
    unnumbered = 0
    for child in first_child.values():
        observer, sequence = child.observer, child.sequence
        if not observer or not isinstance(sequence, int) or observer not in present:
            unnumbered += 1  # nothing says otherwise: a parent that never arrived
            continue
        # The parent started before the child, so it holds a number below the child's; if every number
        # below is stored (or explained by pruning or clearing), the parent is not a span of this session here.
        if _missing_below(present[observer], low_of[observer], sequence) > 0:
            candidates[observer] += 1
    open_spans: dict[str, int] = {}
    for observer, n in candidates.items():
        row = by_observer.get(observer)
        # Spans the observer counted under no session (its overflow row) may be this session's: they ended.
        maybe_ended = 0
        if data.session != OVERFLOW_SESSION:
            maybe_ended = sum(_int(v) for v in data.unattributed.get(observer, {}).values())
        if row is None:
            open_spans[observer] = max(n - maybe_ended, 0)
            continue
        # Numbers 0..max were handed out at span start; the ledger counts spans that ended (stored,
        # rejected or dropped). Numbers never accounted for belong to spans still open (or lost silently).
        started = present[observer][-1] + 1
        ended = row.observed - max(row.duplicates, 0) + maybe_ended
        open_spans[observer] = min(n, max(started - ended, 0))
    return open_spans, unnumbered


def _order(span: StoredSpan) -> tuple[int, int]:
    return (span.sequence if isinstance(span.sequence, int) else -1, span.start_ns)


def nothing_to_judge(receipt: Receipt) -> str | None:
    """Why a session's receipt has nothing to judge, or None when it has something. Nothing: no stored span, no
    malformed row, no reason code; then every row was ``cleared`` on request, or ``pruned`` by retention, or
    none was ever stored (``empty``). Such a session is ``invalid`` on its own receipt (there is nothing to
    vouch for), while its ledger may balance to the last span; the store's verdict leaves it out
    (:func:`combine`). The one rule both use, so ``agentdiag sessions`` and ``agentdiag receipt`` agree."""
    if receipt.scope != "session":
        return None
    return nothing_reason(receipt.counts, receipt.reasons)


def _key(session: str | None) -> str:
    return session or ""


def combine(receipts: Sequence[Receipt], *, malformed_rows: int = 0, violations: int = 0) -> Receipt:
    """One store-wide receipt from per-session receipts (``malformed_rows`` and ``violations``: the store's own
    counts, which may include rows and records no session claims).

    Counts are summed over every session; the verdict is judged from the sessions that have something to judge
    (:func:`nothing_to_judge`), and :attr:`Receipt.not_judged` names the others."""
    counts = {key: sum(r.counts.get(key, 0) for r in receipts) for key in COUNT_KEYS}
    counts["malformed_rows"] = max(counts["malformed_rows"], malformed_rows)
    counts["ingest_violations"] = max(counts["ingest_violations"], violations)
    judged = [r for r in receipts if nothing_to_judge(r) is None]
    found = {reason for r in judged for reason in r.reasons}
    if counts["ingest_violations"]:
        found.add(INGEST_VIOLATION)
    reasons = sorted(found)
    observers = sorted({o for r in receipts for o in r.observers})
    spans = sum(r.counts.get("spans", 0) for r in judged)
    status = _status_for(reasons, spans=spans, malformed=counts["malformed_rows"])
    kinds = {r.provenance for r in receipts}
    provenance = MIXED if len(kinds) > 1 or MIXED in kinds else (kinds.pop() if kinds else OBSERVED)
    not_judged = tuple(sorted((r.session for r in receipts if nothing_to_judge(r) is not None), key=_key))
    return Receipt(
        status, reasons, counts, observers, None, scope="store", provenance=provenance, not_judged=not_judged
    )
