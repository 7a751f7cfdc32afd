"""The local trace store: ``SpanStore`` (the one owner of the database), its migrations and retention."""

from otel_agentdiag.storage.migrations import LATEST_VERSION, StoreError
from otel_agentdiag.storage.retention import (
    STORE_DROPPED_ATTRIBUTES,
    STORE_DROPPED_EVENTS,
    RetentionLimits,
)
from otel_agentdiag.storage.store import (
    ALL_SESSIONS,
    DROP_CAUSES,
    DROP_CLEARED,
    DROP_EXPORT_FAILURE,
    DROP_QUEUE_FULL,
    DROP_SHUTDOWN,
    REJECT_REDACTOR_ERROR,
    Accounting,
    ObserverInfo,
    PruneResult,
    SessionStats,
    SessionSummary,
    SpanRow,
    SpanStore,
    StoredSpan,
    StoreSummary,
    TraceSummary,
    WriteResult,
)

__all__ = [
    "ALL_SESSIONS",
    "DROP_CAUSES",
    "DROP_CLEARED",
    "DROP_EXPORT_FAILURE",
    "DROP_QUEUE_FULL",
    "DROP_SHUTDOWN",
    "LATEST_VERSION",
    "REJECT_REDACTOR_ERROR",
    "STORE_DROPPED_ATTRIBUTES",
    "STORE_DROPPED_EVENTS",
    "Accounting",
    "ObserverInfo",
    "PruneResult",
    "RetentionLimits",
    "SessionStats",
    "SessionSummary",
    "SpanRow",
    "SpanStore",
    "StoreError",
    "StoreSummary",
    "StoredSpan",
    "TraceSummary",
    "WriteResult",
]
