"""``ContentRecorder``: carries captured content beside its span to the local store, and nowhere else.

Content is never set on a span: every processor on the provider (the user's own too) would see it there, and
an exporter could send it. Instead:

1. instrumentation calls ``_internal.content.capture(span, role, value)``; the recorder copies ``value`` at once
   (plain data at C speed, to be snapshotted on the export thread; anything else through
   :func:`~otel_agentdiag.content.snapshot`: plain data, credentials and media cut) and keeps it under the open
   span's ids;
2. when the span ends, the recorder (a span processor on the provider) moves it onto the ended span object
   every processor receives, in a weak map: if that span is dropped anywhere, its content goes with it;
3. the local branch's redacting processor moves it onto the redacted copy it builds (:meth:`transfer`); no
   other branch does;
4. the SQLite exporter reads it from that copy (:meth:`content_of`) and writes it in the same transaction as
   the span row.

Captures for spans that never end are bounded (``max_open_spans``): the oldest is evicted and counted.
"""

from __future__ import annotations

import marshal
import threading
import weakref
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.fork import reinit_after_fork
from otel_agentdiag.content.snapshot import ContentLimits, snapshot

DEFAULT_MAX_OPEN_SPANS = 4096
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
FAST_COPY_BYTES = 64 * 1024
"""Plain data (dicts, lists, tuples of builtins) whose ``marshal`` form is at most this size is copied at C speed
on the agent's thread and snapshotted (scrubbed) on the export thread; anything else, or larger (media is cut
by the snapshot, so a big image is not kept in memory while it waits), is snapshotted on the agent's thread."""


class _Copied:
    """A value copied when captured (the agent can no longer change it) but not yet snapshotted."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


Captured = tuple[tuple[str, Any], ...]
"""``((role, snapshot), ...)`` in the order the roles were first captured."""


class ContentRecorder(SpanProcessor):
    """Snapshot captured content and hand it to the local store's branch only. Thread-safe; never raises.

    :param limits: depth and media limits of the snapshot.
    :param max_payload_bytes: a captured value whose lossless encoding is larger is stored as an
        ``Elided("too_large")`` marker with its size and digest (applied by the SQLite exporter).
    :param max_open_spans: spans with captured content that have not ended yet, at most.

    Counters: ``captured`` values snapshotted; ``evicted`` spans whose content was dropped because too many
    spans with content were open at once; ``not_recording`` captures for spans that were not recording (not
    sampled, or already ended).
    """

    exports_only_redacted = True
    """It exports nothing: content goes to the local store's redacting branch only."""

    def __init__(
        self,
        *,
        limits: ContentLimits | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_open_spans: int = DEFAULT_MAX_OPEN_SPANS,
    ) -> None:
        if max_payload_bytes < 1 or max_open_spans < 1:
            raise ValueError("max_payload_bytes and max_open_spans must be positive")
        self.limits = limits or ContentLimits()
        self.max_payload_bytes = max_payload_bytes
        self.max_open_spans = max_open_spans
        self._open: dict[tuple[int, int], dict[str, Any]] = {}
        self._ended: weakref.WeakKeyDictionary[ReadableSpan, Captured] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.captured = 0
        self.evicted = 0
        self.not_recording = 0
        reinit_after_fork(self._at_fork_reinit)

    def _at_fork_reinit(self) -> None:
        """In a forked child: a new lock (the parent's may have been held); the parent's open spans are not the
        child's to end, so their content is dropped."""
        self._lock = threading.Lock()
        self._open = {}

    # -- the seam (``_internal.content.capture``) --------------------------------------------------------
    def record(self, span: Any, role: str, value: Any) -> None:
        if not span.is_recording():
            with self._lock:
                self.not_recording += 1
            return
        ctx = span.get_span_context()
        key = (ctx.trace_id, ctx.span_id)
        taken = self._take(value)
        with self._lock:
            entry = self._open.get(key)
            if entry is None:
                if len(self._open) >= self.max_open_spans:
                    del self._open[next(iter(self._open))]
                    self.evicted += 1
                entry = self._open[key] = {}
            entry[role] = taken
            self.captured += 1

    def _take(self, value: Any) -> Any:
        """What is kept of ``value`` now: a private copy, snapshotted now or (plain data) on the export thread.

        ``marshal`` copies exactly the builtin types (big ints, NaN payloads, lone surrogates, shared and
        cyclic containers included) and refuses anything else, subclasses too: those go through
        :func:`snapshot` here. It only copies in memory; nothing is ever loaded from elsewhere.
        """
        cls = type(value)
        if cls is str:
            if len(value) <= self.limits.media_bytes:
                return _Copied(value)  # immutable
        elif cls is dict or cls is list or cls is tuple:
            try:
                data = marshal.dumps(value)
            except (ValueError, TypeError):  # an object marshal does not know, or nested too deep
                return snapshot(value, self.limits)
            if len(data) <= FAST_COPY_BYTES:
                return _Copied(marshal.loads(data))
        return snapshot(value, self.limits)

    def _finish(self, value: Any) -> Any:
        return snapshot(value.value, self.limits) if type(value) is _Copied else value

    def install(self) -> None:
        """Make this the recorder every instrumentation captures into."""
        _content.install(self)

    def uninstall(self) -> None:
        _content.uninstall(self)

    # -- span processor: the hand-over at end --------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if not self._open:  # nothing captured for any open span: one read per span
            return
        ctx = span.context
        if ctx is None:
            return
        with self._lock:
            entry = self._open.pop((ctx.trace_id, ctx.span_id), None)
            if entry:
                self._ended[span] = tuple(entry.items())

    def shutdown(self) -> None:
        self.uninstall()
        with self._lock:
            self._open.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def attach(self, ended: ReadableSpan, items: tuple[tuple[str, Any], ...]) -> None:
        """Content that arrived *on* an ended span, as another instrumentation's attributes (the convention
        adapters of the local branch read them, on its worker): ``(role, value)`` pairs, kept for ``ended`` as
        if captured through the seam. Never raises."""
        if not items:
            return
        try:
            taken = tuple((role, self._take(value)) for role, value in items)
            with self._lock:
                self._ended[ended] = taken
                self.captured += len(taken)
        except Exception as exc:  # noqa: BLE001 - content is never worth an exception
            log_internal_error("capturing another instrumentation's content", exc)

    # -- the local branch --------------------------------------------------------------------------------
    def transfer(self, ended: ReadableSpan, redacted: ReadableSpan) -> None:
        """Move ``ended``'s content onto the redacted copy the local branch exports (the original keeps none)."""
        with self._lock:
            found = self._ended.pop(ended, None)
            if found:
                self._ended[redacted] = found

    def discard(self, ended: ReadableSpan) -> None:
        """Forget ``ended``'s content (its span was not exported as itself: a tombstone or a drop)."""
        with self._lock:
            self._ended.pop(ended, None)

    def content_of(self, span: ReadableSpan) -> Captured | None:
        """The content to write with ``span``, snapshotted (call it on the export thread). Kept until the span
        itself is released, so a retried batch writes it again."""
        if not self._ended:
            return None
        with self._lock:
            found = self._ended.get(span)
        if not found:
            return None
        return tuple((role, self._finish(value)) for role, value in found)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "captured": self.captured,
                "evicted": self.evicted,
                "not_recording": self.not_recording,
                "open_spans": len(self._open),
            }
