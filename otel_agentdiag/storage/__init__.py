"""The local trace store: ``SpanStore`` (the one owner of the database), its migrations, retention and scrubbing."""

from otel_agentdiag.storage.migrations import LATEST_VERSION, StoreError
from otel_agentdiag.storage.retention import (
    STORE_DROPPED_ATTRIBUTES,
    STORE_DROPPED_EVENTS,
    RetentionLimits,
)
from otel_agentdiag.storage.rows import OVERFLOW_SESSION
from otel_agentdiag.storage.scrub import ScrubIncomplete, ScrubReport
from otel_agentdiag.storage.store import (
    ALL_SESSIONS,
    DROP_CAUSES,
    DROP_CLEARED,
    DROP_EXPORT_FAILURE,
    DROP_QUEUE_FULL,
    DROP_SHUTDOWN,
    REJECT_REDACTOR_ERROR,
    Accounting,
    ContentRow,
    ObserverInfo,
    PruneResult,
    SessionStats,
    SessionSummary,
    SpanRow,
    SpanStore,
    StoredContent,
    StoredSpan,
    StoreSummary,
    TraceSummary,
    WriteResult,
)

__all__ = [
    "ALL_SESSIONS",
    "DROP_CAUSES",
    "OVERFLOW_SESSION",
    "DROP_CLEARED",
    "DROP_EXPORT_FAILURE",
    "DROP_QUEUE_FULL",
    "DROP_SHUTDOWN",
    "LATEST_VERSION",
    "REJECT_REDACTOR_ERROR",
    "STORE_DROPPED_ATTRIBUTES",
    "STORE_DROPPED_EVENTS",
    "Accounting",
    "ContentRow",
    "ObserverInfo",
    "PruneResult",
    "RetentionLimits",
    "ScrubIncomplete",
    "ScrubReport",
    "SessionStats",
    "SessionSummary",
    "SpanRow",
    "SpanStore",
    "StoreError",
    "StoreSummary",
    "StoredContent",
    "StoredSpan",
    "TraceSummary",
    "WriteResult",
]
