"""Counting every span's fate: the drop causes, the per-session :class:`Ledger`, pending deltas, the stats.

The batch processor (:mod:`otel_agentdiag.pipeline.batching`) keeps one ledger under its lock; the deltas are
the drops and rejections not yet written to the store, which go with the next successful write.

Memory is bounded by configuration, not by the number of sessions: the ledger keeps per-session counts for the
1,024 sessions touched most recently, and the deltas hold at most ``max_drop_sessions`` sessions (1,024 by
default, ``AGENTDIAG_MAX_DROP_SESSIONS``) while the store cannot be written. The counts of any further session are
folded into one more entry, :data:`OVERFLOW` (stored under that ``session_stats`` key), by cause: every span stays
counted, for the observer exactly, only no longer under its own session (its receipt says so).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from otel_agentdiag._internal import reason_codes
from otel_agentdiag.storage.rows import OVERFLOW_SESSION

__all__ = [
    "CLEARED",
    "DROP_CAUSES",
    "DEFAULT_MAX_DROP_SESSIONS",
    "EXPORT_FAILURE",
    "OVERFLOW",
    "QUEUE_FULL",
    "REDACTOR_ERROR",
    "SHUTDOWN",
    "Deltas",
    "Ledger",
    "LedgerCounts",
    "PipelineStats",
    "add_delta",
    "copy_deltas",
    "subtract_deltas",
]

QUEUE_FULL = reason_codes.QUEUE_FULL
EXPORT_FAILURE = reason_codes.EXPORT_FAILURE
SHUTDOWN = reason_codes.SHUTDOWN
CLEARED = reason_codes.CLEARED
DROP_CAUSES = reason_codes.DROP_CAUSES
REDACTOR_ERROR = reason_codes.REDACTOR_ERROR

DEFAULT_MAX_LEDGER_SESSIONS = 1_024
"""Sessions whose cumulative counts :meth:`AccountingBatchSpanProcessor.stats` keeps (the store keeps them all)."""
DEFAULT_MAX_DROP_SESSIONS = 1_024
"""Sessions whose drop and rejection counts are kept apart while they wait for a write (see the module doc)."""
OVERFLOW = OVERFLOW_SESSION
"""The deltas' key for the counts of sessions beyond the bound (never a session digest)."""

Deltas = dict[str | None, dict[str, int]]
"""session -> reason or cause -> n (None: spans outside any session; :data:`OVERFLOW`: sessions beyond the bound)."""


def add_delta(deltas: Deltas, session: str | None, reason: str, n: int = 1, limit: int | None = None) -> bool:
    """Add ``n`` to ``deltas[session][reason]``. With ``limit``, a session not in ``deltas`` while it holds
    ``limit`` sessions already (the overflow entry aside) is counted under :data:`OVERFLOW` instead: then
    returns True (the count was folded)."""
    by_reason = deltas.get(session)
    if by_reason is None:
        folded = limit is not None and len(deltas) - (OVERFLOW in deltas) >= limit
        if folded:
            session = OVERFLOW
            by_reason = deltas.get(OVERFLOW)
        if by_reason is None:
            deltas[session] = {reason: n}
            return folded
    else:
        folded = False
    by_reason[reason] = by_reason.get(reason, 0) + n
    return folded


def subtract_deltas(deltas: Deltas, sent: Deltas) -> None:
    for session, by_reason in sent.items():
        mine = deltas.get(session)
        if mine is None:
            continue
        for reason, n in by_reason.items():
            left = mine.get(reason, 0) - n
            if left > 0:
                mine[reason] = left
            else:
                mine.pop(reason, None)
        if not mine:
            del deltas[session]


def copy_deltas(deltas: Deltas) -> Deltas:
    return {session: dict(by_reason) for session, by_reason in deltas.items()}


@dataclass(slots=True)
class LedgerCounts:
    """Cumulative counts of one session (or of all of them)."""

    observed: int = 0
    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def pending(self) -> int:
        """Spans observed whose fate is not known yet (queued or being exported)."""
        return self.observed - self.accepted - sum(self.rejected.values()) - sum(self.dropped.values())

    def copy(self) -> LedgerCounts:
        return LedgerCounts(self.observed, self.accepted, dict(self.rejected), dict(self.dropped))

    def as_dict(self) -> dict[str, Any]:
        return {
            "observed": self.observed,
            "accepted": self.accepted,
            "rejected": dict(sorted(self.rejected.items())),
            "dropped": dict(sorted(self.dropped.items())),
            "pending": self.pending,
        }


class Ledger:
    """Cumulative in-memory counts per session and in total; not thread-safe (the processor's lock guards it).

    ``totals`` are exact for the life of the processor. Per-session counts are kept for the
    ``max_sessions`` sessions touched most recently; older ones are folded away (``evicted_sessions``).
    """

    def __init__(self, max_sessions: int = DEFAULT_MAX_LEDGER_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self.totals = LedgerCounts()
        self.sessions: OrderedDict[str | None, LedgerCounts] = OrderedDict()
        self.evicted_sessions = 0

    def _session(self, session: str | None) -> LedgerCounts:
        sessions = self.sessions
        counts = sessions.get(session)
        if counts is None:
            if len(sessions) >= self.max_sessions:
                sessions.popitem(last=False)
                self.evicted_sessions += 1
            counts = sessions[session] = LedgerCounts()
        else:
            sessions.move_to_end(session)
        return counts

    def observe(self, session: str | None, n: int = 1) -> None:
        self._session(session).observed += n
        self.totals.observed += n

    def accept(self, session: str | None, n: int = 1) -> None:
        self._session(session).accepted += n
        self.totals.accepted += n

    def reject(self, session: str | None, reason: str, n: int = 1) -> None:
        counts = self._session(session)
        counts.rejected[reason] = counts.rejected.get(reason, 0) + n
        self.totals.rejected[reason] = self.totals.rejected.get(reason, 0) + n

    def drop(self, session: str | None, cause: str, n: int = 1) -> None:
        counts = self._session(session)
        counts.dropped[cause] = counts.dropped.get(cause, 0) + n
        self.totals.dropped[cause] = self.totals.dropped.get(cause, 0) + n


@dataclass(frozen=True)
class PipelineStats:
    """A snapshot of :meth:`AccountingBatchSpanProcessor.stats`."""

    observer: str
    queue_depth: int
    queue_bytes: int
    peak_queue: int
    max_queue_spans: int
    max_queue_bytes: int
    in_flight: int
    flush_attempts: int
    flush_failures: int
    totals: LedgerCounts
    sessions: dict[str | None, LedgerCounts]
    evicted_sessions: int
    unpersisted_rejected: Deltas
    """Rejections not yet written to the store (they go with the next successful write)."""
    unpersisted_dropped: Deltas
    """Drops not yet written to the store."""
    max_drop_sessions: int = DEFAULT_MAX_DROP_SESSIONS
    """The bound on the sessions of the unwritten deltas (beyond it, counts go under :data:`OVERFLOW`)."""
    folded_spans: int = 0
    """Drops and rejections counted under :data:`OVERFLOW` instead of their session, since the start."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the no-session bucket is keyed ``""``)."""
        return {
            "observer": self.observer,
            "queue": {
                "depth": self.queue_depth,
                "bytes": self.queue_bytes,
                "peak": self.peak_queue,
                "max_spans": self.max_queue_spans,
                "max_bytes": self.max_queue_bytes,
                "in_flight": self.in_flight,
            },
            "flush_attempts": self.flush_attempts,
            "flush_failures": self.flush_failures,
            "totals": self.totals.as_dict(),
            "sessions": {session or "": counts.as_dict() for session, counts in self.sessions.items()},
            "evicted_sessions": self.evicted_sessions,
            "max_drop_sessions": self.max_drop_sessions,
            "folded_spans": self.folded_spans,
            "unpersisted": {
                "rejected": {s or "": dict(r) for s, r in self.unpersisted_rejected.items()},
                "dropped": {s or "": dict(d) for s, d in self.unpersisted_dropped.items()},
            },
        }
