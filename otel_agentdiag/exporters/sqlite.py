"""``SQLiteSpanExporter``: one transaction per batch into a :class:`~otel_agentdiag.storage.SpanStore`."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.spans import attribute_items, span_attributes
from otel_agentdiag.storage import SpanRow, SpanStore, StoreError
from otel_agentdiag.storage.store import default_store_path

_logger = logging.getLogger(__name__)

_STATUS = {StatusCode.UNSET: "unset", StatusCode.OK: "ok", StatusCode.ERROR: "error"}
_KINDS = frozenset(sc.KINDS)


def _plain(attributes: Any) -> dict[str, Any]:
    """A plain dict of the attributes (the JSON encoder writes tuples as arrays, so values are kept as they are)."""
    if not attributes:
        return {}
    if type(attributes) is dict:
        return attributes  # a redacted span's own dict: read-only here
    return dict(attribute_items(attributes))


def span_to_row(span: ReadableSpan) -> SpanRow:
    """Convert an ended span to the store's row."""
    ctx = span.context
    if ctx is None:
        raise ValueError("span without a context")
    attributes = _plain(span_attributes(span))
    kind = attributes.get(sc.AGENTDIAG_KIND)
    session = attributes.get(sc.GEN_AI_CONVERSATION_ID, attributes.get(sc.SESSION_ID))
    scope = span.instrumentation_scope
    events, links = span.events, span.links
    return SpanRow(
        trace_id=f"{ctx.trace_id:032x}",
        span_id=f"{ctx.span_id:016x}",
        parent_span_id=None if span.parent is None else f"{span.parent.span_id:016x}",
        name=span.name,
        kind=kind if isinstance(kind, str) and kind in _KINDS else sc.KIND_OTHER,
        span_kind=span.kind.name.lower(),
        start_ns=span.start_time or 0,
        end_ns=span.end_time,
        status=_STATUS.get(span.status.status_code, "unset"),
        session=session if isinstance(session, str) else None,
        attributes=attributes,
        events=[{"name": e.name, "time_ns": e.timestamp, "attributes": _plain(e.attributes)} for e in events]
        if events
        else [],
        links=[
            {
                "trace_id": f"{link.context.trace_id:032x}",
                "span_id": f"{link.context.span_id:016x}",
                "attributes": _plain(link.attributes),
            }
            for link in links
        ]
        if links
        else [],
        # The resource mapping itself: spans of one provider share it, and the store caches by identity.
        resource=span.resource.attributes,
        scope=None if scope is None else {"name": scope.name, "version": scope.version},
    )


class SQLiteSpanExporter(SpanExporter):
    """Write each batch in one SQLite transaction. Never raises: a failed batch returns ``FAILURE``.

    Give it a :class:`SpanStore` or a path (then the store is opened lazily on the first export, so an
    exporter built from an entry point creates no file until spans arrive). The exporter does not redact:
    put it behind a :class:`~otel_agentdiag.redaction.RedactingSpanProcessor`, as ``configure()`` does.
    """

    def __init__(
        self, store: SpanStore | str | os.PathLike[str] | None = None, *, owns_store: bool | None = None
    ) -> None:
        if store is None:
            store = default_store_path()
        self._store: SpanStore | None = store if isinstance(store, SpanStore) else None
        self._path = store.path if isinstance(store, SpanStore) else store
        self._owns_store = not isinstance(store, SpanStore) if owns_store is None else owns_store
        """Whether ``shutdown()`` closes the store (default: only a store the exporter opened itself)."""
        self._lock = threading.Lock()
        self._shutdown = False
        self.exported = 0
        """Spans written (or already present)."""
        self.failed = 0
        """Spans in batches that could not be written."""

    def _get_store(self) -> SpanStore:
        if self._store is None:
            self._store = SpanStore(self._path)
        return self._store

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            self.failed += len(spans)
            _logger.warning("otel-agentdiag: export called after shutdown; %d spans not written", len(spans))
            return SpanExportResult.FAILURE
        with self._lock:
            try:
                rows = [span_to_row(span) for span in spans]
                self._get_store().write_spans(rows)
            except (sqlite3.Error, StoreError, OSError) as exc:
                # These messages describe the database ("attempt to write a readonly database"), not spans.
                self.failed += len(spans)
                _logger.warning("otel-agentdiag: could not write %d spans to %s: %s", len(spans), self._path, exc)
                return SpanExportResult.FAILURE
            except Exception as exc:  # noqa: BLE001 - an exporter must never raise into the pipeline
                self.failed += len(spans)
                _logger.warning("otel-agentdiag: SQLite export failed unexpectedly (%s)", type(exc).__name__)
                return SpanExportResult.FAILURE
            self.exported += len(spans)
            return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def shutdown(self) -> None:
        with self._lock:
            self._shutdown = True
            if self._owns_store and self._store is not None:
                self._store.close()
                self._store = None
