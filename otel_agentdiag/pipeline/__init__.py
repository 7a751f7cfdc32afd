"""The accounting pipeline between the tracer provider and the exporters (design.md §2, §4).

- :class:`SessionSequencer` numbers every span of a session at start (``agentdiag.sequence``, per
  ``agentdiag.observer.id``), so a span lost anywhere later leaves a visible gap.
- :class:`AccountingBatchSpanProcessor` batches spans to an exporter with bounded memory, runs each batch through
  its ordered stages on its worker (convention adapters, the redaction, the metrics), and counts the fate of
  every span (accepted, rejected, dropped by cause) in a :class:`Ledger` and, with the SQLite exporter, in the
  store itself.
- :func:`foreign_processors` names the processors on a provider that are not otel-agentdiag's and so see
  (and may export) spans before redaction.

``build`` puts these together into the pipeline ``configure()`` installs and ``handle`` is the
:class:`~otel_agentdiag.config.AgentDiag` it returns (imported from there, not here: they need the rest).
"""

from otel_agentdiag.pipeline.audit import ForeignProcessor, foreign_processors
from otel_agentdiag.pipeline.batching import (
    CLEARED,
    DROP_CAUSES,
    EXPORT_FAILURE,
    QUEUE_FULL,
    SHUTDOWN,
    AccountingBatchSpanProcessor,
    Ledger,
    LedgerCounts,
    PipelineStats,
    estimate_size,
)
from otel_agentdiag.pipeline.sequence import SessionSequencer, session_key

__all__ = [
    "CLEARED",
    "DROP_CAUSES",
    "EXPORT_FAILURE",
    "ForeignProcessor",
    "QUEUE_FULL",
    "SHUTDOWN",
    "AccountingBatchSpanProcessor",
    "Ledger",
    "LedgerCounts",
    "PipelineStats",
    "SessionSequencer",
    "estimate_size",
    "foreign_processors",
    "session_key",
]
