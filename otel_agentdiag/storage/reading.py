"""``ReadOnlyStore``: a store opened for reading only, made of the connection and the read part alone.

``SpanStore(path, read_only=True)`` reads the same, but its class also holds the writer, maintenance (with
retention and scrubbing), the violation log and the push marks, and importing it imports all of them. A command
that only reads (``agentdiag show``, ``traces``) opens this class instead and loads none of those modules. Opening
it is opening ``SpanStore(path, read_only=True)``: the same trust checks, the same errors
(:class:`~otel_agentdiag.storage.migrations.StoreError`, :class:`~otel_agentdiag.storage.connection.StoreNeedsUpgrade`
for a store of an older schema, :class:`~otel_agentdiag._internal.trust.UntrustedPathError`), nothing written.
"""

from __future__ import annotations

import os

from otel_agentdiag.storage.connection import DEFAULT_BUSY_TIMEOUT_S
from otel_agentdiag.storage.queries import StoreReader
from otel_agentdiag.storage.violation_reads import ViolationReads

__all__ = ["ReadOnlyStore"]


class ReadOnlyStore(StoreReader, ViolationReads):
    """An existing store, opened read-only (see :class:`~otel_agentdiag.storage.store.SpanStore` with
    ``read_only=True``): every read method of :class:`~otel_agentdiag.storage.queries.StoreReader` and of the
    violation log (:class:`~otel_agentdiag.storage.violation_reads.ViolationReads`), so a session's receipt can be
    judged from it; no writes."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        super().__init__(path, create=False, busy_timeout=busy_timeout, read_only=True)

    def __enter__(self) -> ReadOnlyStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
