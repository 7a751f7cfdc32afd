"""The local trace store: ``SpanStore`` (the one owner of the database), its migrations, retention and scrubbing.

Every public name is imported on first use (PEP 562), from the module that defines it: a reader (``agentdiag
show``) that needs the rows and the read part does not load the writer, maintenance, retention or scrubbing.
``from otel_agentdiag.storage import X`` works as always.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_agentdiag._internal.lazy import lazy_attributes

if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, imported eagerly
    from otel_agentdiag.storage.migrations import LATEST_VERSION, StoreError
    from otel_agentdiag.storage.retention import (
        STORE_DROPPED_ATTRIBUTES,
        STORE_DROPPED_EVENTS,
        RetentionLimits,
    )
    from otel_agentdiag.storage.rows import (
        ALL_SESSIONS,
        DROP_CAUSES,
        DROP_CLEARED,
        DROP_EXPORT_FAILURE,
        DROP_QUEUE_FULL,
        DROP_SHUTDOWN,
        OVERFLOW_SESSION,
        REJECT_REDACTOR_ERROR,
        Accounting,
        ContentRow,
        ConversationSummary,
        ObserverInfo,
        PruneResult,
        RunSummary,
        SessionStats,
        SessionSummary,
        SpanRow,
        StoredContent,
        StoredSpan,
        StoreSummary,
        TraceSummary,
        WriteResult,
    )
    from otel_agentdiag.storage.scrub import ScrubIncomplete, ScrubReport
    from otel_agentdiag.storage.store import SpanStore

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
    "ConversationSummary",
    "ObserverInfo",
    "PruneResult",
    "RunSummary",
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

_ELSEWHERE = {
    "LATEST_VERSION": "otel_agentdiag.storage.migrations",
    "StoreError": "otel_agentdiag.storage.migrations",
    "STORE_DROPPED_ATTRIBUTES": "otel_agentdiag.storage.retention",
    "STORE_DROPPED_EVENTS": "otel_agentdiag.storage.retention",
    "RetentionLimits": "otel_agentdiag.storage.retention",
    "ScrubIncomplete": "otel_agentdiag.storage.scrub",
    "ScrubReport": "otel_agentdiag.storage.scrub",
    "SpanStore": "otel_agentdiag.storage.store",
}
_LAZY: dict[str, str] = {name: _ELSEWHERE.get(name, "otel_agentdiag.storage.rows") for name in __all__}
"""Each public name and the module that defines it: the rows module unless named in ``_ELSEWHERE``."""


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals(), __all__)
