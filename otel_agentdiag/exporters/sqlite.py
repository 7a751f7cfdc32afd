"""``SQLiteSpanExporter``: one transaction per batch into a :class:`~otel_agentdiag.storage.SpanStore`.

With :class:`~otel_agentdiag.pipeline.AccountingBatchSpanProcessor` in front (as ``configure()`` builds it),
each batch goes through :meth:`SQLiteSpanExporter.export_with_accounting`: the pipeline's drop and rejection
counts since the last successful write travel in the same transaction as the spans, so the store's
``observed = accepted + rejected + dropped`` always holds.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.fork import around_fork, reinit_after_fork
from otel_agentdiag._internal.sdk import attribute_items, span_attributes, span_fields
from otel_agentdiag._internal.trust import UntrustedPathError
from otel_agentdiag.storage import (
    Accounting,
    ContentRow,
    RetentionLimits,
    SpanRow,
    SpanStore,
    StoreError,
    WriteResult,
)
from otel_agentdiag.storage.connection import default_store_path

if TYPE_CHECKING:
    from otel_agentdiag.content.recorder import Captured, ContentRecorder

_logger = logging.getLogger(__name__)

_STATUS = {StatusCode.UNSET: "unset", StatusCode.OK: "ok", StatusCode.ERROR: "error"}
_KINDS = frozenset(sc.KINDS)
_OBSERVER_ID = re.compile(r"[0-9a-f]{16}")
_STORE_ERRORS = (sqlite3.Error, StoreError, OSError, UntrustedPathError, UnicodeDecodeError)
# UnicodeDecodeError: the sqlite3 module's, for an error message that is not UTF-8 (a damaged schema).
"""Failures whose message describes the store (a path, a reason), never a span: safe to log."""
_INHERITED: list[SpanStore] = []
"""Stores a forked child inherited from its parent: left alone (closing them could disturb the parent's)."""
_SQLITE_READONLY = 8
_FORK_WAIT_S = 10.0
"""How long ``os.fork()`` waits for a write in progress (longer than the store's busy timeout) before it goes on."""


def row_session(attributes: Mapping[str, Any]) -> str | None:
    """The session a span is stored under: its ``gen_ai.conversation.id``, else ``session.id``, if a string.

    On a redacted span that is the keyed digest. The pipeline uses the same function to file drops.
    """
    session = attributes.get(sc.GEN_AI_CONVERSATION_ID, attributes.get(sc.SESSION_ID))
    return session if isinstance(session, str) else None


_OBSERVERS_SEEN: set[str] = set()
"""Observer ids already checked (a process sees a handful); bounded, cleared when full."""


def _observer(value: Any) -> str | None:
    if type(value) is str:
        if value in _OBSERVERS_SEEN:
            return value
        if _OBSERVER_ID.fullmatch(value):
            if len(_OBSERVERS_SEEN) >= 64:
                _OBSERVERS_SEEN.clear()
            _OBSERVERS_SEEN.add(value)
            return value
        return None
    return value if isinstance(value, str) and _OBSERVER_ID.fullmatch(value) else None


def _sequence(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _plain(attributes: Any) -> dict[str, Any]:
    """A plain dict of the attributes (the JSON encoder writes tuples as arrays, so values are kept as they are)."""
    if not attributes:
        return {}
    if type(attributes) is dict:
        return attributes  # a redacted span's own dict: read-only here
    return dict(attribute_items(attributes))


_SPAN_KINDS = {kind: kind.name.lower() for kind in SpanKind}
_SCOPE_ROWS: dict[int, tuple[Any, dict[str, Any]]] = {}
"""Per instrumentation scope object (kept referenced, so its id is not reused): its row dict, shared by the rows
of its spans (read-only, like the attributes), so the store encodes it once per batch. Bounded."""


def _scope_row(scope: Any) -> dict[str, Any] | None:
    if scope is None:
        return None
    found = _SCOPE_ROWS.get(id(scope))
    if found is not None and found[0] is scope:
        return found[1]
    row = {"name": scope.name, "version": scope.version}
    if len(_SCOPE_ROWS) >= 64:
        _SCOPE_ROWS.clear()
    _SCOPE_ROWS[id(scope)] = (scope, row)
    return row


def _status(code: StatusCode) -> str:
    # Identity tests: an enum member's hash is computed in Python.
    if code is StatusCode.UNSET:
        return "unset"
    if code is StatusCode.OK:
        return "ok"
    if code is StatusCode.ERROR:
        return "error"
    return _STATUS.get(code, "unset")


def _span_kind(kind: SpanKind) -> str:
    # Identity tests first, as in _status: an enum member's hash is computed in Python.
    if kind is SpanKind.INTERNAL:
        return "internal"
    if kind is SpanKind.CLIENT:
        return "client"
    return _SPAN_KINDS.get(kind) or kind.name.lower()


def span_to_row(span: ReadableSpan) -> SpanRow:
    """Convert an ended span to the store's row."""
    name, ctx, parent, span_kind, start, end, status, resource, scope, events, links = span_fields(span)
    if ctx is None:
        raise ValueError("span without a context")
    attributes = _plain(span_attributes(span))
    if sc.AGENTDIAG_SEQUENCE not in attributes:
        # Not through one of our redactors (which lay them over): the numbers the sequencer kept beside the span.
        numbers = _ids.TABLE.numbers_of(span)
        if numbers is not None:
            attributes = {**attributes, **numbers}
    get = attributes.get
    kind = get(sc.AGENTDIAG_KIND)
    session = get(sc.GEN_AI_CONVERSATION_ID, get(sc.SESSION_ID))  # as row_session()
    return SpanRow(
        trace_id=f"{ctx.trace_id:032x}",
        span_id=f"{ctx.span_id:016x}",
        parent_span_id=None if parent is None else f"{parent.span_id:016x}",
        name=name,
        kind=kind if isinstance(kind, str) and kind in _KINDS else sc.KIND_OTHER,
        span_kind=_span_kind(span_kind),
        start_ns=start or 0,
        end_ns=end,
        status=_status(status.status_code),
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
        resource=resource.attributes,
        scope=_scope_row(scope),
        observer=_observer(get(sc.AGENTDIAG_OBSERVER_ID)),
        sequence=_sequence(get(sc.AGENTDIAG_SEQUENCE)),
    )


def _encoded(recorder: ContentRecorder, role: str, value: Any) -> ContentRow:
    from otel_agentdiag.content import codec, values

    try:
        data, projection = codec.encode_with_projection(value)
        if len(data) <= recorder.max_payload_bytes:
            return ContentRow(role, codec.ENCODING, data, projection)
        marker = values.Elided(values.TOO_LARGE, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    except Exception as exc:  # noqa: BLE001 - a value we cannot encode is marked, never written half
        _logger.warning("otel-agentdiag: captured content could not be encoded (%s)", type(exc).__name__)
        marker = values.Elided(values.UNENCODABLE)
    return ContentRow(role, codec.ENCODING, codec.encode(marker), codec.project_json(marker))


def _content_rows(recorder: ContentRecorder, span: ReadableSpan) -> list[ContentRow] | None:
    found: Captured | None = recorder.content_of(span)
    if not found:
        return None
    return [_encoded(recorder, role, value) for role, value in found]


def _file_identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of ``path``, or None when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _is_readonly(exc: BaseException) -> bool:
    """``SQLITE_READONLY`` (or one of its extended codes): read-only file, folder or database."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11
    if isinstance(code, int):
        return code & 0xFF == _SQLITE_READONLY
    return isinstance(exc, sqlite3.OperationalError) and "readonly" in str(exc)


class SQLiteSpanExporter(SpanExporter):
    """Write each batch in one SQLite transaction. Never raises: a failed batch returns ``FAILURE``.

    Give it a :class:`SpanStore` or a path (then the store is opened lazily on the first export, so an
    exporter built from an entry point creates no file until spans arrive; ``retention`` applies to a store
    it opens, by default the given store's). The exporter does not redact: put it behind a
    :class:`~otel_agentdiag.redaction.RedactingSpanProcessor`, as ``configure()`` does.

    Before each write it checks that the store file is still the one it opened: a store it owns that was
    deleted or replaced (its folder removed mid-run, say) is opened afresh at the same path rather than
    written into a file nobody can read again; for a store it was given, the write fails instead.

    ``content`` (set by ``configure(capture_content=True)``): the recorder whose captured content is written
    with each span, in the same transaction (lossless encoding and JSON projection, ``span_content`` table).
    """

    def __init__(
        self,
        store: SpanStore | str | os.PathLike[str] | None = None,
        *,
        owns_store: bool | None = None,
        retention: RetentionLimits | None = None,
        content: ContentRecorder | None = None,
    ) -> None:
        self.content = content
        if store is None:
            store = default_store_path()
        self._store: SpanStore | None = store if isinstance(store, SpanStore) else None
        self._path = (store.path if isinstance(store, SpanStore) else Path(store)).absolute()
        self._owns_store = not isinstance(store, SpanStore) if owns_store is None else owns_store
        """Whether ``shutdown()`` closes the store (default: only a store the exporter opened itself)."""
        if retention is None and isinstance(store, SpanStore):
            retention = store.retention  # kept for a store opened afresh (after a fork, or if the file went)
        self._retention = retention
        self._identity = _file_identity(self._path) if self._store is not None else None
        self._lock = threading.Lock()
        self._shutdown = False
        self.exported = 0
        """Spans written (or already present)."""
        self.failed = 0
        """Spans in batches that could not be written."""
        self.last_result: WriteResult | None = None
        """What the last successful write did (duplicates, cleared, pruned, oversize attributes)."""
        self._held_for_fork = False
        around_fork(self._before_fork, self._after_fork_in_parent)
        reinit_after_fork(self._at_fork_reinit)

    def _before_fork(self) -> None:
        """Let a write in progress finish before the process forks (bounded by ``_FORK_WAIT_S``).

        SQLite keeps per-process lock state shared by every connection to a file; a child forked while the
        parent's connection is inside a write transaction inherits that state without the lock itself, and
        its own new connection then finds the database "locked" for good: every span of the child would be lost.
        """
        self._held_for_fork = self._lock.acquire(timeout=_FORK_WAIT_S)

    def _after_fork_in_parent(self) -> None:
        if self._held_for_fork:
            self._held_for_fork = False
            self._lock.release()

    def _at_fork_reinit(self) -> None:
        """In a forked child: never touch the parent's connection (SQLite forbids it); open a new one lazily."""
        self._held_for_fork = False
        self._lock = threading.Lock()  # may have been held by the parent's export thread
        if self._store is not None:
            _INHERITED.append(self._store)  # kept, so that it is not even closed here
            self._store = None
            self._owns_store = True
        self._identity = None

    @property
    def path(self) -> Path:
        """The store's file."""
        return self._path

    def _get_store(self) -> SpanStore:
        store = self._store
        if store is not None and _file_identity(self._path) != self._identity:
            if not self._owns_store:
                raise StoreError(f"the trace store {self._path} was removed or replaced")
            _logger.warning("otel-agentdiag: the trace store %s was removed or replaced; opening a new one", self._path)
            self._store = None
            try:
                store.close()
            except sqlite3.Error as exc:  # the old file is gone: nothing of ours is lost by not closing it cleanly
                _logger.debug("otel-agentdiag: closing the replaced store failed: %s", exc)
        if self._store is None:
            self._store = SpanStore(self._path, retention=self._retention)
            self._identity = _file_identity(self._path)
        return self._store

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS if self._write(spans, None) else SpanExportResult.FAILURE

    def export_with_accounting(self, spans: Sequence[ReadableSpan], accounting: Accounting | None) -> bool:
        """Write ``spans`` and the pipeline's ``accounting`` deltas in one transaction; True when committed.

        On False nothing of either was written (the caller keeps the deltas and retries or counts the spans).
        """
        return self._write(spans, accounting)

    def record_accounting(self, accounting: Accounting) -> bool:
        """Persist ``accounting`` alone (drops and rejections when there are no spans to write)."""
        if self._shutdown:
            return False
        with self._lock:
            try:
                self._get_store().record_accounting(accounting)
            except Exception as exc:  # noqa: BLE001 - an exporter must never raise into the pipeline
                _logger.warning(
                    "otel-agentdiag: could not record pipeline counts in %s: %s",
                    self._path,
                    exc if isinstance(exc, _STORE_ERRORS) else type(exc).__name__,
                )
                self._after_failure(exc)
                return False
            return True

    def _write(self, spans: Sequence[ReadableSpan], accounting: Accounting | None) -> bool:
        if self._shutdown:
            self.failed += len(spans)
            _logger.warning("otel-agentdiag: export called after shutdown; %d spans not written", len(spans))
            return False
        with self._lock:
            try:
                rows = [span_to_row(span) for span in spans]
                recorder = self.content
                captured = None if recorder is None else [_content_rows(recorder, span) for span in spans]
                result = self._get_store().write_batch(rows, accounting, content=captured)
            except _STORE_ERRORS as exc:
                # These messages describe the database ("attempt to write a readonly database"), not spans.
                self.failed += len(spans)
                _logger.warning("otel-agentdiag: could not write %d spans to %s: %s", len(spans), self._path, exc)
                self._after_failure(exc)
                return False
            except Exception as exc:  # noqa: BLE001 - an exporter must never raise into the pipeline
                self.failed += len(spans)
                _logger.warning("otel-agentdiag: SQLite export failed unexpectedly (%s)", type(exc).__name__)
                return False
            finally:
                if self._shutdown:
                    self._close()  # shut down while this write ran
            self.exported += len(spans)
            self.last_result = result
            return True

    def _after_failure(self, exc: BaseException) -> None:
        """A connection that found its database read-only stays so: reopen an owned store on the next write."""
        if self._owns_store and self._store is not None and _is_readonly(exc):
            self._close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def _close(self) -> None:
        if self._owns_store and self._store is not None:
            store, self._store = self._store, None
            try:
                store.close()
            except sqlite3.Error as exc:  # every batch was committed or counted before this
                _logger.warning("otel-agentdiag: closing the trace store failed: %s", exc)

    def shutdown(self, timeout_millis: float = 5000) -> None:
        """Stop exporting; close the store if the exporter owns it.

        Waits at most ``timeout_millis`` for a write in progress (a database locked for longer, say); that
        write then closes the store when it returns.
        """
        self._shutdown = True
        if not self._lock.acquire(timeout=max(timeout_millis, 0) / 1000):
            return
        try:
            self._close()
        finally:
            self._lock.release()
