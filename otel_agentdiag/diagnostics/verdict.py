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

Unattributed drops (the overflow ledger row of an observer, see :func:`unattributed_of` and docs/cli.md): the
store's receipt counts them exactly; a session's own receipt names them and is never ``valid``.

Spans dropped because their session was cleared while they were in flight are counted
(``dropped_cleared``) but do not degrade a receipt: the user asked for them to go.

A session with nothing left to judge (every row cleared or pruned, nothing else wrong) is ``invalid`` on its
own receipt, says so (:func:`nothing_to_judge`), and is left out of the store's verdict, which says how many
it left out: ``agentdiag sessions``, ``receipt --session`` and ``receipt`` tell one story.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_agentdiag._internal import reason_codes
from otel_agentdiag.storage import OVERFLOW_SESSION, SessionStats
from otel_agentdiag.storage.provenance import IMPORTED as IMPORTED_PROVENANCE
from otel_agentdiag.storage.provenance import OBSERVED, is_imported
from otel_agentdiag.storage.receipt_reads import MissingParent, RowFigures

__all__ = ["Receipt", "ReceiptInput", "combine", "combine_judged", "judge", "nothing_to_judge", "unattributed_of"]

VALID = "valid"
IMPORTED = "imported"
DEGRADED = "degraded"
QUARANTINED = "quarantined"
INVALID = "invalid"
MIXED = "mixed"
STATUSES = (VALID, IMPORTED, DEGRADED, QUARANTINED, INVALID)
"""From best to worst."""
PROVENANCES = (OBSERVED, IMPORTED_PROVENANCE, MIXED)
"""Values of :attr:`Receipt.provenance` (``mixed``: a store receipt over observed and imported sessions)."""

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
nothing is wrong. Given on :class:`Receipt` only."""
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
_INVALID_REASONS = frozenset({STATS_MISSING, LEDGER_INVALID, INGEST_VIOLATION})
_QUARANTINE_REASONS = frozenset({REDACTOR_ERROR, PUBLIC_SAFETY_VIOLATION})
_DEGRADED_REASONS = frozenset({SEQUENCE_GAP, DUPLICATE_SEQUENCE, BACKPRESSURE_DROP, EXPORT_FAILURE, UNFINISHED_SPAN})

COUNT_KEYS = reason_codes.COUNT_KEYS

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
"""A count above 0 names its reason."""


def status_for(reasons: Iterable[str], *, spans: int, malformed: int) -> str:
    """The status the reasons give (worst first), for a receipt with ``spans`` rows, ``malformed`` of them bad."""
    found = set(reasons)
    if spans == 0 or malformed > 0 or found & _INVALID_REASONS:
        return INVALID
    if found & _QUARANTINE_REASONS:
        return QUARANTINED
    if found & _DEGRADED_REASONS:
        return DEGRADED
    if IMPORTED in found:
        return IMPORTED
    return VALID


@dataclass(frozen=True)
class Receipt:
    """The integrity verdict on one session (``session`` = its digest, ``None`` = spans outside any session)
    or, from :func:`combine`, on the whole store (``scope == "store"``)."""

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
    """What a session receipt is judged from: what the store knows about the session, read with SQL
    (:mod:`otel_agentdiag.storage.receipt_reads`)."""

    session: str | None
    figures: Mapping[str, RowFigures]
    """Observer key ('' for rows without one) -> the figures of the session's rows of that observer."""
    stats: Sequence[SessionStats]
    pruned_spans: int = 0
    cleared_spans: int | None = 0
    """Rows ``agentdiag clear`` deleted; ``None``: not known (then the rows need only not exceed the ledger)."""
    cleared: bool = False
    """Whether the session was ever cleared (its rows deleted on purpose at some point)."""
    missing: Sequence[MissingParent] = ()
    """The parents the session's rows name that are stored nowhere in their trace."""
    violations: int = 0
    """Durable records of input of this session the store refused (``agentdiag ingest``)."""
    unattributed: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Observer -> cause or reason -> spans it counted under :data:`~otel_agentdiag.storage.OVERFLOW_SESSION`
    (dropped or rejected when its table of per-session counts was full), for the observers that may have filed
    this session's spans there (``cleared`` drops left out: those were asked for)."""


_UNATTRIBUTED_REASONS = {
    reason_codes.QUEUE_FULL: BACKPRESSURE_DROP,
    reason_codes.SHUTDOWN: BACKPRESSURE_DROP,
    reason_codes.EXPORT_FAILURE: EXPORT_FAILURE,
    reason_codes.REDACTOR_ERROR: REDACTOR_ERROR,
}
"""The reason a session's receipt gives for drops of its observer that may be its own, by cause."""


def unattributed_of(overflow: Iterable[SessionStats], observers: Iterable[str] | None) -> dict[str, dict[str, int]]:
    """Observer -> cause -> spans in its overflow row (``overflow``: the rows of that key; ``cleared`` left out),
    for ``observers`` (None: all). A pipeline keeps the drop counts of a bounded number of sessions while the store
    cannot be written; those of further sessions go to one ledger row per observer under
    :data:`~otel_agentdiag.storage.OVERFLOW_SESSION`, judged like a session on the store's receipt. A session's own
    receipt cannot tell which were its spans: when an observer of the session (any, for a session the store knows
    nothing of) has such a row, it carries that row's causes' reasons (so it is never ``valid``), names the spans
    per observer (JSON ``unattributed_drops``), and missing numbers up to that many are not called gaps or
    unfinished."""
    wanted = None if observers is None else set(observers)
    found: dict[str, dict[str, int]] = {}
    for row in overflow:
        if wanted is not None and row.observer not in wanted:
            continue
        for cause, n in [*row.dropped.items(), *row.rejected.items()]:
            if _int(n) and cause != reason_codes.CLEARED:
                by_cause = found.setdefault(row.observer, {})
                by_cause[cause] = by_cause.get(cause, 0) + _int(n)
    return found


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def judge(data: ReceiptInput) -> Receipt:
    """The receipt of one session from the figures of its rows, its ledger rows and the store's deletion counts.
    Pure.

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
    by_observer: dict[str, SessionStats] = {}
    reasons: set[str] = set()
    counts = dict.fromkeys(COUNT_KEYS, 0)
    ledger_ok = True
    explained: dict[str, int] = {}
    """Per observer: spans the ledger says never reached the store (counted drops and rejections). Each
    accounts for one missing sequence number; only the rest are gaps."""
    for row in data.stats:
        by_observer[row.observer] = row
        counts["observed"] += row.observed
        counts["accepted"] += row.accepted
        counts["stored"] += row.stored
        counts["duplicate_sequences"] += max(row.duplicates, 0)
        if not row.rejected and not row.dropped:  # the usual row: nothing lost
            if row.observed != row.accepted:
                ledger_ok = False
            continue
        rejected = {k: _int(v) for k, v in row.rejected.items()}
        dropped = {k: _int(v) for k, v in row.dropped.items()}
        lost = sum(dropped.values()) + sum(rejected.values())
        explained[row.observer] = explained.get(row.observer, 0) + lost
        counts["rejected"] += sum(rejected.values())
        counts["dropped"] += sum(dropped.values())
        counts["dropped_queue_full"] += dropped.get(reason_codes.QUEUE_FULL, 0)
        counts["dropped_export_failure"] += dropped.get(reason_codes.EXPORT_FAILURE, 0)
        counts["dropped_shutdown"] += dropped.get(reason_codes.SHUTDOWN, 0)
        counts["dropped_cleared"] += dropped.get(reason_codes.CLEARED, 0)
        counts["rejected_redactor_error"] += rejected.get(reason_codes.REDACTOR_ERROR, 0)
        if row.observed != row.accepted + lost:
            ledger_ok = False

    figures = data.figures
    for observer, f in figures.items():
        counts["spans"] += f.rows
        counts["malformed_rows"] += f.malformed
        counts["public_safety_violations"] += f.safety
        if f.tombstones:
            explained[observer] = explained.get(observer, 0) - f.tombstones  # a tombstone keeps its number
    counts["pruned_spans"] = max(data.pruned_spans, 0)
    counts["cleared_spans"] = max(data.cleared_spans or 0, 0)
    counts["ingest_violations"] = _int(data.violations)

    unattributed: dict[str, int] = {}
    if data.unattributed and data.session != OVERFLOW_SESSION:
        for observer, by_cause in data.unattributed.items():
            n = sum(_int(v) for v in by_cause.values())
            if n:
                unattributed[observer] = n
                explained[observer] = explained.get(observer, 0) + n  # maybe this session's: not a gap, not vouched
                reasons.update(_UNATTRIBUTED_REASONS[c] for c in by_cause if c in _UNATTRIBUTED_REASONS)
    lost_on_purpose = data.pruned_spans > 0 or bool(data.cleared_spans) or data.cleared
    # Numbers below the lowest are judged (from 0) unless rows were deleted on purpose.
    numbered = {o: f for o, f in figures.items() if o and f.numbered and f.high is not None}
    low_of = {o: (f.low or 0) if lost_on_purpose else 0 for o, f in numbered.items()}
    for f in numbered.values():
        counts["duplicate_sequences"] += f.numbered - f.distinct

    # -- unfinished spans: parents that started and never arrived; their numbers are not gaps ----------
    open_spans, unnumbered = _unfinished(data, numbered, low_of, by_observer) if data.missing else ({}, 0)
    counts["unfinished_spans"] = unnumbered + sum(open_spans.values())
    # Rows deleted on purpose, when the store knows how many: retention deletes the oldest by *start time*, and
    # numbers are handed out just after the start time is taken, so under concurrency a deleted span may hold a
    # number above the oldest survivor's. Then every number from 0 is judged and the deleted rows are subtracted.
    exact = lost_on_purpose and not (data.cleared and data.cleared_spans is None)
    unexplained = 0
    for observer, f in numbered.items():
        low = 0 if exact else low_of[observer]
        missing = (f.high + 1 - low) - f.distinct  # type: ignore[operator]  # numbered: high is set
        # Numbers held by open spans are not lost; numbers of spans the ledger counted as dropped or rejected
        # are lost *and explained* (their own reason says so). A gap is a loss nothing accounts for.
        if missing > 0:
            unexplained += max(missing - open_spans.get(observer, 0) - max(explained.get(observer, 0), 0), 0)
    deleted = max(data.pruned_spans, 0) + max(data.cleared_spans or 0, 0) if exact else 0
    counts["sequence_gaps"] += max(unexplained - deleted, 0)

    # -- reasons ------------------------------------------------------------------------------------
    for keys, reason in _COUNT_REASONS:
        if any(counts[key] for key in keys):
            reasons.add(reason)
    imported = is_imported(data.session)
    if imported:
        reasons.add(IMPORTED)
    if any(observer not in by_observer for observer in figures):
        reasons.add(STATS_MISSING)
    elif data.cleared_spans is None:
        # Rows deleted by a clear are not known: what the ledger stored must at least cover the rows.
        rest = counts["stored"] - counts["pruned_spans"] - counts["spans"]
        if rest < 0 or (rest > 0 and not data.cleared):
            ledger_ok = False
        counts["cleared_spans"] = max(rest, 0)
    elif counts["stored"] - counts["pruned_spans"] - counts["cleared_spans"] != counts["spans"]:
        ledger_ok = False
    if not ledger_ok:
        reasons.add(LEDGER_INVALID)

    observers = sorted({*by_observer, *figures} - {""})  # "": the observer of rows that carried none
    status = status_for(reasons, spans=counts["spans"], malformed=counts["malformed_rows"])
    provenance = IMPORTED_PROVENANCE if imported else OBSERVED
    return Receipt(
        status, sorted(reasons), counts, observers, data.session, provenance=provenance, unattributed_drops=unattributed
    )


def _unfinished(
    data: ReceiptInput,
    numbered: Mapping[str, RowFigures],
    low_of: Mapping[str, int],
    by_observer: Mapping[str, SessionStats],
) -> tuple[dict[str, int], int]:
    """Distinct missing parents that the numbering and the ledger say started in this session and never ended:
    per observer, and the number named by spans without numbers (nothing says otherwise for those)."""
    candidates: dict[str, int] = {}
    unnumbered = 0
    for parent in data.missing:
        observer, sequence = parent.observer, parent.sequence
        if not observer or sequence is None or observer not in numbered:
            unnumbered += 1  # nothing says otherwise: a parent that never arrived
            continue
        # The parent started before the child, so it holds a number below the child's; if every number
        # below is stored (or explained by pruning or clearing), the parent is not a span of this session here.
        low = low_of[observer]
        if sequence > low and (sequence - low) - parent.numbers_below > 0:
            candidates[observer] = candidates.get(observer, 0) + 1
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
        started = numbered[observer].high + 1  # type: ignore[operator]  # numbered: high is set
        ended = row.observed - max(row.duplicates, 0) + maybe_ended
        open_spans[observer] = min(n, max(started - ended, 0))
    return open_spans, unnumbered


def nothing_reason(counts: Mapping[str, int], reasons: Sequence[str]) -> str | None:
    """Why a session receipt with these counts and reasons has nothing to judge (see :func:`nothing_to_judge`)."""
    if any(reason != NO_OBSERVATIONS for reason in reasons) or counts.get("spans") or counts.get("malformed_rows"):
        return None
    if counts.get("cleared_spans"):
        return "cleared"
    if counts.get("pruned_spans"):
        return "pruned"
    return "empty"


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


def combine(receipts: Iterable[Receipt], *, malformed_rows: int = 0, violations: int = 0) -> Receipt:
    """One store-wide receipt from per-session receipts (``malformed_rows`` and ``violations``: the store's own
    counts, which may include rows and records no session claims).

    Counts are summed over every session; the verdict is judged from the sessions that have something to judge
    (:func:`nothing_to_judge`), and :attr:`Receipt.not_judged` names the others."""
    return combine_judged(((r.session, r, "") for r in receipts), malformed_rows=malformed_rows, violations=violations)


def combine_judged(
    judged: Iterable[tuple[str | None, Receipt, str]], *, malformed_rows: int = 0, violations: int = 0
) -> Receipt:
    """:func:`combine` of (session, receipt, observer) triples: ``observer`` empty, or the session's one observer
    when ``receipt`` is another session's that is the same but for its session and observer (see
    ``diagnostics.receipt``): a store of many alike sessions is combined without a receipt for each."""
    seen: dict[int, list[Any]] = {}  # id(receipt) -> [receipt, sessions with it, judged?]
    observers: set[str] = set()
    not_judged: list[str | None] = []
    for session, receipt, observer in judged:
        entry = seen.get(id(receipt))
        if entry is None:
            entry = seen[id(receipt)] = [receipt, 0, nothing_to_judge(receipt) is None]
        entry[1] += 1
        if observer:
            observers.add(observer)
        else:
            observers.update(receipt.observers)
        if not entry[2]:
            not_judged.append(session)
    counts = dict.fromkeys(COUNT_KEYS, 0)
    found: set[str] = set()
    kinds: set[str] = set()
    spans = 0
    for receipt, n, judged_ in seen.values():
        for key, value in receipt.counts.items():
            if value:
                counts[key] += value * n
        kinds.add(receipt.provenance)
        if judged_:
            found.update(receipt.reasons)
            spans += receipt.counts.get("spans", 0) * n
    counts["malformed_rows"] = max(counts["malformed_rows"], malformed_rows)
    counts["ingest_violations"] = max(counts["ingest_violations"], violations)
    if counts["ingest_violations"]:
        found.add(INGEST_VIOLATION)
    reasons = sorted(found)
    status = status_for(reasons, spans=spans, malformed=counts["malformed_rows"])
    provenance = MIXED if len(kinds) > 1 or MIXED in kinds else (kinds.pop() if kinds else OBSERVED)
    return Receipt(
        status,
        reasons,
        counts,
        sorted(observers),
        None,
        scope="store",
        provenance=provenance,
        not_judged=tuple(sorted(not_judged, key=_key)),
    )
