"""Raw correlation ids beside spans, never on them: the side channel from instrumentation to our redactors.

A span attribute is read by every processor on the provider, the user's own and a vendor's included, and
any of them may export it. So our instrumentation never sets a correlation id (:data:`KEYS`: the keys of
``semconv.CORRELATION_ID_KINDS``: conversation, session, user, end user, agent, tool call, response) as an
attribute. It hands the raw value to :data:`TABLE` instead:

1. instrumentation starts spans through :func:`start_span` and sets attributes through :func:`set_attributes`,
   which take the correlation ids out of the attributes and :meth:`~CorrelationIds.record` them under the open
   span's ``(trace_id, span_id)`` (only while it is recording); a run's conversation id also travels in the
   context the span is started in, so ``on_start`` processors (the sequencer) see it;
2. a processor of ours that files other libraries' spans under the enclosing run's conversation (the
   sequencer, a ``RedactingSpanProcessor`` with ``propagate_conversation``) records that id here too;
3. when the span ends, the first processor of ours to see it (the sequencer, or a ``RedactingSpanProcessor``)
   moves the entry onto the ended span object that every processor receives (:meth:`~CorrelationIds.pin`);
4. each redactor of ours, when it rebuilds that ended span (on its batch worker, later), overlays
   :meth:`~CorrelationIds.ids_of` on the span's attributes and applies its own policy and key: the digests are
   exactly those the attributes would have given, per destination. Nothing else reads the table.

Release needs no count of readers. An open entry goes when it is pinned, or when its live span object is let
go without having been pinned (nothing of ours was on its provider). A pinned entry is held through a weak
reference to the ended span: it goes when every processor holding that span (each of our batch queues, any
foreign one) has let it go, a span a full queue dropped included. Both tables are bounded as well
(``max_spans`` each, for spans the application keeps open or an exporter keeps in memory): beyond it the
oldest entry is evicted and counted (that span is exported without its ids, so a receipt shows the gap).
Recording and pinning take no lock (single dict operations under the GIL); eviction, the rare path, does.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.context import CONVERSATION_ID_KEY, current_conversation_id
from otel_agentdiag._internal.fork import reinit_after_fork

KEYS: frozenset[str] = frozenset(sc.CORRELATION_ID_KINDS)
"""Attribute keys that our instrumentation never sets on a span: their raw values go to :data:`TABLE`."""

DEFAULT_MAX_SPANS = 16_384
"""Entries per table, at most: open spans with ids; ended spans with ids still held by a queue or an exporter."""

_ref = weakref.ref
_SpanKey = tuple[int, int]


def _key_of(span: Any) -> _SpanKey | None:
    ctx = getattr(span, "context", None)
    return None if ctx is None else (ctx.trace_id, ctx.span_id)


class CorrelationIds:
    """Raw correlation ids per span, for our redactors only (see the module doc). Thread-safe; never raises
    from :meth:`record`, :meth:`pin` or :meth:`ids_of` on SDK spans.

    Counters: ``evicted`` entries dropped to keep a table within ``max_spans``.
    """

    def __init__(self, max_spans: int = DEFAULT_MAX_SPANS) -> None:
        if max_spans < 1:
            raise ValueError("max_spans must be at least 1")
        self.max_spans = max_spans
        self._open: dict[_SpanKey, dict[str, Any]] = {}
        """Open spans, by ``(trace_id, span_id)``."""
        self._live: dict[_SpanKey, weakref.ref[Any]] = {}
        """The weak reference to each open span whose callback releases its entry if it is never pinned."""
        self._ended: dict[weakref.ref[Any], dict[str, Any]] = {}
        """Ended spans, by a weak reference to the span object the processors received."""
        self._lock = threading.Lock()
        self.evicted = 0
        reinit_after_fork(self._at_fork_reinit)

    def _at_fork_reinit(self) -> None:
        self._lock = threading.Lock()

    # -- the writers (instrumentation, on_start) ----------------------------------------------------------
    def _entry(self, span: Any) -> dict[str, Any]:
        ctx = span.get_span_context()
        key = (ctx.trace_id, ctx.span_id)
        entry = self._open.get(key)
        if entry is None:
            if len(self._open) >= self.max_spans:
                self._evict_open()
            # setdefault: two threads recording for one new span both land in the same entry.
            entry = self._open.setdefault(key, {})
            open_ = self._open
            live = self._live

            def released(_: Any, key: _SpanKey = key) -> None:  # the live span went without being pinned
                open_.pop(key, None)
                live.pop(key, None)

            try:
                live[key] = _ref(span, released)
            except TypeError:  # not weakly referenceable: released by pinning or eviction only
                pass
        return entry

    def record(self, span: Any, ids: Mapping[str, Any]) -> None:
        """Keep ``ids`` (attribute key -> raw value) for the open ``span``, over what it had. The caller checks
        that the span is recording."""
        self._entry(span).update(ids)

    def record_conversation(self, span: Any, conversation: str) -> None:
        """Record the enclosing run's conversation id for the open ``span`` unless it has one already."""
        self._entry(span).setdefault(sc.GEN_AI_CONVERSATION_ID, conversation)

    # -- the hand-over at end (on_end of our first processor) -------------------------------------------------
    def pin(self, span: Any) -> None:
        """Move the entry of the span that just ended onto ``span``, the ended span object every processor
        receives (idempotent: a second processor of ours finds it moved). Cheap when there is nothing."""
        if not self._open:
            return
        ctx = span.context
        if ctx is None:
            return
        key = (ctx.trace_id, ctx.span_id)
        entry = self._open.get(key)
        if entry is None:
            return
        try:
            ended = self._ended
            if len(ended) >= self.max_spans:
                self._evict_ended()
            # Into the ended table before out of the open one: a reader never finds it in neither.
            ended[_ref(span, self._forget_ended)] = entry
        except TypeError:  # an ended span without weak references: left to eviction
            return
        self._open.pop(key, None)
        self._live.pop(key, None)

    def _forget_ended(self, ref: weakref.ref[Any]) -> None:
        # Runs on whichever thread lets the ended span go (usually a batch worker after export).
        self._ended.pop(ref, None)

    # -- the readers (our redactors) ------------------------------------------------------------------------
    def ids_of(self, span: Any) -> dict[str, Any] | None:
        """The raw ids recorded for ``span`` (an ended span, or one ending now), or None. Do not change them."""
        try:
            found = self._ended.get(_ref(span)) if self._ended else None
        except TypeError:
            found = None
        if found is None and self._open:
            key = _key_of(span)
            if key is not None:
                found = self._open.get(key)
        return found

    # -- bounds ---------------------------------------------------------------------------------------------
    def _evict_open(self) -> None:
        with self._lock:
            table = self._open
            while len(table) >= self.max_spans:
                try:
                    oldest = next(iter(table))
                except (StopIteration, RuntimeError):  # emptied, or changed by a span let go meanwhile
                    return
                if table.pop(oldest, None) is not None:
                    self._live.pop(oldest, None)
                    self.evicted += 1

    def _evict_ended(self) -> None:
        with self._lock:
            table = self._ended
            while len(table) >= self.max_spans:
                try:
                    oldest = next(iter(table))
                except (StopIteration, RuntimeError):
                    return
                if table.pop(oldest, None) is not None:
                    self.evicted += 1

    def __len__(self) -> int:
        return len(self._open) + len(self._ended)

    def stats(self) -> dict[str, int]:
        """``open`` and ``ended`` entries now, ``evicted`` so far."""
        return {"open": len(self._open), "ended": len(self._ended), "evicted": self.evicted}


TABLE = CorrelationIds()
"""The one table: instrumentation writes it, every redactor of ours reads it."""


def split(attributes: dict[str, Any]) -> dict[str, Any] | None:
    """Take the correlation ids out of ``attributes`` (in place); None when there were none."""
    if KEYS.isdisjoint(attributes):
        return None
    return {key: attributes.pop(key) for key in KEYS if key in attributes}


def start_span(
    tracer: trace.Tracer,
    name: str,
    *,
    context: otel_context.Context,
    kind: trace.SpanKind,
    attributes: dict[str, Any],
    start_time: int | None = None,
) -> trace.Span:
    """``tracer.start_span`` with the correlation ids among ``attributes`` recorded beside the span, not on it.

    The span's own conversation id, when it differs from the context's, is put into the context the span is
    started in, so the ``on_start`` processors number the span in its session. Exceptions are not recorded by
    the span itself (instrumentation records them without messages). May raise (callers contain it).
    """
    ids = split(attributes)
    if ids is not None:
        conversation = ids.get(sc.GEN_AI_CONVERSATION_ID)
        if isinstance(conversation, str) and current_conversation_id(context) != conversation:
            context = otel_context.set_value(CONVERSATION_ID_KEY, conversation, context)
    span = tracer.start_span(
        name,
        context=context,
        kind=kind,
        attributes=attributes,
        start_time=start_time,
        record_exception=False,
        set_status_on_exception=False,
    )
    if ids is not None and span.is_recording():
        TABLE.record(span, ids)
    return span


def set_attributes(span: trace.Span, attributes: Mapping[str, Any]) -> None:
    """``span.set_attributes`` with the correlation ids among ``attributes`` recorded beside the span, not on it.
    A span that is not recording (ended, or not sampled) takes nothing."""
    if not attributes or not span.is_recording():
        return
    if KEYS.isdisjoint(attributes):
        span.set_attributes(attributes)
        return
    rest = dict(attributes)
    ids = split(rest)
    if rest:
        span.set_attributes(rest)
    if ids:
        TABLE.record(span, ids)
