"""The store's typed rows: what writers hand in, what readers get back, and the ledger's reason codes."""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from otel_agentdiag._internal import reason_codes
from otel_agentdiag.storage.provenance import is_imported

__all__ = [
    "ALL_SESSIONS",
    "DROP_CAUSES",
    "DROP_CLEARED",
    "DROP_EXPORT_FAILURE",
    "DROP_QUEUE_FULL",
    "DROP_SHUTDOWN",
    "OVERFLOW_SESSION",
    "REJECT_REDACTOR_ERROR",
    "Accounting",
    "ContentRow",
    "ConversationSummary",
    "ObserverInfo",
    "PruneResult",
    "RunSummary",
    "SessionStats",
    "SessionSummary",
    "SpanRow",
    "StoreSummary",
    "StoredContent",
    "StoredSpan",
    "TraceSummary",
    "WriteResult",
]


@dataclass(slots=True)
class SpanRow:
    """One span as the store keeps it (attributes, events, links and resource already plain data).

    A value: nothing changes a row once made (copy one with ``dataclasses.replace``). Not frozen: a frozen
    dataclass's ``__init__`` sets each of its 17 fields through ``object.__setattr__``, three times the cost of
    this one, once per span on the worker."""

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


CORE_COLUMNS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "span_kind",
    "start_ns",
    "end_ns",
    "status",
    "session",
    "attributes",
    "events",
    "links",
    "resource",
    "scope",
    "observer",
    "sequence",
)
""":class:`SpanRow`'s first fields: the columns the writer encodes itself (JSON, the resource's row, defaults)."""
EXTRA_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(SpanRow))[len(CORE_COLUMNS) :]
"""Every later field of :class:`SpanRow`: a column of ``spans`` of the same name, stored as the row holds it and
read back as it is stored. Adding a column is two changes: the field (with a default) and the migration that
adds the column (``tests/storage/test_add_a_column.py`` makes one); the writer's INSERT, the readers' SELECT and
the decoder follow from this list."""
if tuple(f.name for f in fields(SpanRow))[: len(CORE_COLUMNS)] != CORE_COLUMNS:  # pragma: no cover
    raise RuntimeError("SpanRow's first fields must be CORE_COLUMNS, in order: declare new fields after them")


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


@dataclass(slots=True)
class StoredSpan(SpanRow):
    """A span read back from the store (a value, as :class:`SpanRow`)."""

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
    cost_usd: float | None = None
    """The sum of its LLM leaves' ``agentdiag.cost.usd`` (never a roll-up); None when no leaf has a cost."""
    budget_exceeded: bool = False
    """Whether a run span of it carries ``agentdiag.budget.exceeded``."""

    @property
    def duration_ns(self) -> int | None:
        return None if self.end_ns is None else self.end_ns - self.start_ns


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run (a trace whose root is an agent span) as the summaries keep it: the root's name, status, end,
    service, agent and stop reason; counts over the trace's spans; tokens summed over its LLM spans only."""

    trace_id: str
    session: str | None
    start_ns: int
    """The earliest start of a span of the trace."""
    end_ns: int | None
    """The root's end."""
    name: str
    status: str
    span_count: int
    error_count: int
    iterations: int
    llm_calls: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    service: str | None
    agent: str | None
    stop_reason: str | None
    cost_usd: float | None = None
    """The sum of its LLM leaves' ``agentdiag.cost.usd`` (never a roll-up); None when no leaf has a cost."""
    budget_exceeded: bool = False
    """Whether a run span of it carries ``agentdiag.budget.exceeded``."""

    @property
    def duration_ns(self) -> int | None:
        return None if self.end_ns is None else self.end_ns - self.start_ns

    @property
    def cursor(self) -> tuple[int, str]:
        """The keyset cursor for the page after this run (``list_runs(before=...)``)."""
        return (self.start_ns, self.trace_id)


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """One conversation (a named session with rows) with totals over its traces and runs."""

    session: str
    first_start_ns: int
    last_activity_ns: int
    span_count: int
    bytes: int
    trace_count: int
    run_count: int
    error_count: int
    """Error spans in its traces."""
    failed_runs: int
    """Runs whose root ended with an error."""
    llm_calls: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = None
    """The sum of its traces' cost; None when no LLM leaf of them has a cost."""
    budget_exceeded_runs: int = 0
    """Traces of it a run of which passed its budget."""

    @property
    def cursor(self) -> tuple[int, str]:
        """The keyset cursor for the page after this conversation (``list_conversations(before=...)``)."""
        return (self.last_activity_ns, self.session)


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


DROP_QUEUE_FULL = reason_codes.QUEUE_FULL
DROP_EXPORT_FAILURE = reason_codes.EXPORT_FAILURE
DROP_SHUTDOWN = reason_codes.SHUTDOWN
DROP_CLEARED = reason_codes.CLEARED
DROP_CAUSES = reason_codes.DROP_CAUSES
"""The causes a span can be dropped for (keys of :attr:`SessionStats.dropped`)."""

OVERFLOW_SESSION = "agentdiag:overflow"
"""The ``session_stats`` key of the drops and rejections a pipeline could not attribute to their session: its
table of per-session counts not yet written is bounded (:mod:`otel_agentdiag.pipeline.ledger`), and counts of
sessions beyond it are folded into this one row per observer, by cause, so the observer's totals stay exact.
Never a session: digests start with their algorithm (``hmac-sha256:``, ``sha256:``), imported keys with
``imported:``, and ``''`` is outside any session."""
REJECT_REDACTOR_ERROR = reason_codes.REDACTOR_ERROR
"""A span the redactor could not rebuild (keys of :attr:`SessionStats.rejected`)."""
