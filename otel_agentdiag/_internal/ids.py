"""Raw correlation ids beside spans, never on them: the side channel from instrumentation to our redactors.

A span attribute is read by every processor on the provider, the user's own and a vendor's included, and
any of them may export it. So our instrumentation never sets a correlation id (:data:`KEYS`: the keys of
``semconv.CORRELATION_ID_KINDS``: conversation, session, user, end user, agent, tool call, response) as an
attribute. It hands the raw value to :data:`TABLE` instead, under the span's ``(trace_id, span_id)``:

1. instrumentation starts spans through :func:`start_span` and sets attributes through :func:`set_attributes`,
   which take the correlation ids out of the attributes and :meth:`~CorrelationIds.record` them (only while
   the span is recording); a span's own conversation id also travels in the context it is started in;
2. the ``on_start`` processor of ours that files every span started inside an agent run under the run's
   conversation (the sequencer, a ``RedactingSpanProcessor`` with ``propagate_conversation``) records that id
   (:meth:`~CorrelationIds.record_conversation`), for our spans and other libraries' alike;
3. when the span ends, the first processor of ours to see it (the sequencer, or a ``RedactingSpanProcessor``)
   ties the entry to the ended span object that every processor receives (:meth:`~CorrelationIds.pin`);
4. each redactor of ours, when it rebuilds that ended span (on its batch worker, later), lays what the table
   holds over the span's attributes (:meth:`~CorrelationIds.laid_over`) and applies its own policy and key: the
   digests are exactly those the attributes would have given, per destination.

The sequencer keeps each span's numbers (``agentdiag.observer.id``, ``agentdiag.sequence``) in the same entry (ours
alone read them; two ``set_attribute`` calls cost the agent's thread more), and the SQLite exporter reads them for a
branch without a redactor. Nothing else reads the table.

Release needs no count of readers: an entry is held by one weak reference, whose callback removes it. Once
pinned, it refers to the ended span object, so the entry goes when every processor holding that span (each
of our batch queues, any foreign one) has let it go, a span a full queue dropped included. Before that, an
entry instrumentation made refers to the live span (if that is let go without ever being pinned, nothing of
ours was on its provider to read the ids); one that only an ``on_start`` processor made (the run's
conversation: the hot path) is held by nothing, since that processor pins it at end. The table is bounded as
well (``max_spans``, for spans the application keeps open or an exporter keeps in memory, plus what our open
batch queues :meth:`~CorrelationIds.reserve`): beyond it the oldest entry is evicted and counted (that span is
exported without its ids and numbers, so a receipt shows the gap).
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
from otel_agentdiag._internal.context import CONVERSATION_ID_KEY, current_conversation_id, enclosing_agent
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.fork import reinit_after_fork

KEYS: frozenset[str] = frozenset(sc.CORRELATION_ID_KINDS)
"""Attribute keys that our instrumentation never sets on a span: their raw values go to :data:`TABLE`."""

DEFAULT_MAX_SPANS = 16_384
"""Entries at most: spans with ids that are open, or ended and still held by a queue or an exporter."""

_SpanKey = tuple[int, int]


_Slot = list[Any]
"""One span's entry, ``[ids, ref, numbers]`` (a list: no constructor call per span): its ids (a dict, attribute key
-> raw value; the enclosing run's conversation id alone, a str; or None), the weak reference that holds it, and
its numbers (``{"agentdiag.observer.id": ..., "agentdiag.sequence": ...}``) or None."""
_IDS, _REF, _NUMBERS = 0, 1, 2


class _Ref(weakref.ref):  # type: ignore[type-arg]
    """A weak reference that knows the table key it releases (created at C speed: no ``__init__`` of its own)."""

    __slots__ = ("key",)
    key: _SpanKey


def _key(span: Any) -> _SpanKey:
    """``(trace_id, span_id)``: a SpanContext is a tuple ``(trace_id, span_id, ...)``, so a slice reads both
    without property calls."""
    return span.get_span_context()[:2]  # type: ignore[no-any-return]


class CorrelationIds:
    """Raw correlation ids per span, for our redactors only (see the module doc). Thread-safe.

    Counters: ``evicted`` entries dropped to keep the table within ``max_spans``.
    """

    def __init__(self, max_spans: int = DEFAULT_MAX_SPANS) -> None:
        if max_spans < 1:
            raise ValueError("max_spans must be at least 1")
        self.max_spans = max_spans
        self._base = max_spans
        self._reserved = 0
        table: dict[_SpanKey, _Slot] = {}
        self._table = table

        def released(ref: _Ref) -> None:
            # The span the entry is held by was let go (on whichever thread let it go): nobody reads it now. Only
            # the current reference of a slot can fire: a replaced one is garbage, and garbage never calls back.
            table.pop(ref.key, None)

        self._released = released
        self._lock = threading.Lock()
        self.evicted = 0
        reinit_after_fork(self._at_fork_reinit)

    def _at_fork_reinit(self) -> None:
        self._lock = threading.Lock()

    def _hold(self, slot: _Slot, key: _SpanKey, span: Any) -> None:
        """Make ``span`` the object whose end of life releases ``slot`` (replacing the reference it had)."""
        try:
            ref = _Ref(span, self._released)
        except TypeError:  # not weakly referenceable: released by another reference, or by eviction
            return
        ref.key = key
        slot[_REF] = ref

    # -- the writers (instrumentation, on_start) ----------------------------------------------------------
    def _new_slot(self, key: _SpanKey) -> _Slot:
        table = self._table
        if len(table) >= self.max_spans:
            self._evict()
        # setdefault: two threads recording for one new span both land in the same slot.
        return table.setdefault(key, [{}, None, None])

    def record(self, span: Any, ids: Mapping[str, Any]) -> None:
        """Keep ``ids`` (attribute key -> raw value) for the open ``span``, over what it had. The caller checks
        that the span is recording. Held by the live span until pinned."""
        key = _key(span)
        slot = self._table.get(key)
        if slot is None:
            slot = self._new_slot(key)
        if slot[_REF] is None:
            self._hold(slot, key, span)
        found = slot[_IDS]
        if type(found) is str:  # the run's conversation alone, from on_start: the span's own ids go over it
            slot[_IDS] = {sc.GEN_AI_CONVERSATION_ID: found, **ids}
        elif found is None:  # numbered at start, no id yet
            slot[_IDS] = dict(ids)
        else:
            found.update(ids)

    def record_conversation(self, span: Any, conversation: str | None, numbers: dict[str, Any] | None = None) -> None:
        """Record the enclosing run's conversation id for the open ``span`` unless it has one already, and the
        sequencer's ``numbers``. On the hot path of every span, so nothing holds the entry yet: the caller must
        :meth:`pin` every span it records for when it ends (the sequencer and our redacting processor do)."""
        key = span.get_span_context()[:2]
        table = self._table
        slot = table.get(key)
        if slot is None:
            if len(table) >= self.max_spans:
                self._evict()
            new = [conversation, None, numbers]
            slot = table.setdefault(key, new)
            if slot is new:
                return
        if numbers is not None:
            slot[_NUMBERS] = numbers
        found = slot[_IDS]
        if found is None:
            slot[_IDS] = conversation
        elif conversation is not None and type(found) is dict:
            found.setdefault(sc.GEN_AI_CONVERSATION_ID, conversation)
        # a str is a conversation id already, kept

    # -- the hand-over at end (on_end of our first processor) -------------------------------------------------
    def pin(self, span: Any) -> None:
        """Tie the entry of the span that just ended to ``span``, the ended span object every processor receives:
        it is released once that object is. Idempotent; cheap when the span has no entry."""
        table = self._table
        if not table:
            return
        ctx = span.context
        if ctx is None:
            return
        key = ctx[:2]
        slot = table.get(key)
        if slot is None:
            return
        current = slot[_REF]
        if current is not None and current() is span:
            return  # pinned already (by a second processor of ours)
        try:  # as _hold(), inline: this runs for every span that ends inside an agent run
            ref = _Ref(span, self._released)
        except TypeError:  # an ended span without weak references: left to eviction
            return
        ref.key = key
        slot[_REF] = ref  # the live span's reference, if any, is replaced and so never fires

    # -- the readers (our redactors) ------------------------------------------------------------------------
    def _slot_of(self, span: Any) -> _Slot | None:
        if not self._table:
            return None
        ctx = getattr(span, "context", None)
        return None if ctx is None else self._table.get(ctx[:2])

    def ids_of(self, span: Any) -> dict[str, Any] | None:
        """The raw ids recorded for ``span`` (an ended span, or one ending now), or None. Do not change them."""
        slot = self._slot_of(span)
        found = None if slot is None else slot[_IDS]
        return {sc.GEN_AI_CONVERSATION_ID: found} if type(found) is str else found  # type: ignore[no-any-return]

    def numbers_of(self, span: Any) -> dict[str, Any] | None:
        """The numbers the sequencer recorded for ``span`` (open or ended) as attributes, or None. Do not change
        them."""
        slot = self._slot_of(span)
        return None if slot is None else slot[_NUMBERS]  # type: ignore[no-any-return]

    def laid_over(self, span: Any, attributes: Mapping[str, Any]) -> Mapping[str, Any]:
        """``attributes`` (the span's own, a dict or a mapping) with what is recorded beside ``span`` laid over
        them: its raw ids and its numbers. ``attributes`` itself when nothing is recorded; else a new dict."""
        slot = self._slot_of(span)
        if slot is None:
            return attributes
        merged = dict(attributes)  # a dict's copy, not one built from its items: 5 times faster
        found = slot[_IDS]
        if type(found) is str:
            merged[sc.GEN_AI_CONVERSATION_ID] = found
        elif found:
            merged.update(found)
        numbers = slot[_NUMBERS]
        if numbers is not None:
            merged.update(numbers)
        return merged

    def reserve(self, spans: int) -> None:
        """Room for ``spans`` more entries (fewer, when negative): what a batch queue of ours may hold."""
        with self._lock:
            self._reserved = max(self._reserved + spans, 0)
            self.max_spans = self._base + self._reserved

    # -- bounds ---------------------------------------------------------------------------------------------
    def _evict(self) -> None:
        with self._lock:
            table = self._table
            while len(table) >= self.max_spans:
                try:
                    oldest = next(iter(table))
                except (StopIteration, RuntimeError):  # emptied, or changed by a span let go meanwhile
                    return
                if table.pop(oldest, None) is not None:
                    self.evicted += 1

    def __len__(self) -> int:
        return len(self._table)

    def stats(self) -> dict[str, int]:
        """``spans`` with an entry now, ``evicted`` so far."""
        return {"spans": len(self._table), "evicted": self.evicted}


TABLE = CorrelationIds()
"""The one table: instrumentation writes it, every redactor of ours reads it."""


def split(attributes: dict[str, Any]) -> dict[str, Any]:
    """Take the correlation ids out of ``attributes`` (in place). Call it only when ``KEYS`` meets them."""
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

    A span's own conversation id (one given to it, not merely the enclosing run's) is also put into the context
    the span is started in, so the ``on_start`` processors number it in its session and record it for the spans
    started inside it. The enclosing run's conversation id needs no passing: the ``on_start`` processors of
    ours (the sequencer, a propagating ``RedactingSpanProcessor``) record it for every span started in its
    context, ours and other libraries' alike. Exceptions are not recorded by the span itself (instrumentation
    records them without messages). May raise (callers contain it).
    """
    agent = enclosing_agent(attributes, context)  # here, not by the sequencer's set_attribute at on_start
    if agent is not None:
        attributes[sc.GEN_AI_AGENT_NAME] = agent
    ids = None if KEYS.isdisjoint(attributes) else split(attributes)
    if ids is not None:
        conversation = ids.get(sc.GEN_AI_CONVERSATION_ID)
        if isinstance(conversation, str):
            if current_conversation_id(context) == conversation:
                del ids[sc.GEN_AI_CONVERSATION_ID]  # the enclosing run's: recorded at on_start (see above)
            else:
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
    if ids and span.is_recording():
        try:
            TABLE.record(span, ids)
        except Exception as exc:  # noqa: BLE001 - the span is started: it must reach the caller, to be ended
            log_internal_error("keeping a span's correlation ids", exc)
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
        try:
            TABLE.record(span, ids)
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("keeping a span's correlation ids", exc)
