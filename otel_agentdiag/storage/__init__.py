"""The local trace store: ``SpanStore`` (the one owner of the database) and its migrations."""

from otel_agentdiag.storage.migrations import LATEST_VERSION, StoreError
from otel_agentdiag.storage.store import SpanRow, SpanStore, StoredSpan, TraceSummary

__all__ = ["LATEST_VERSION", "SpanRow", "SpanStore", "StoreError", "StoredSpan", "TraceSummary"]
