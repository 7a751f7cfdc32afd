"""Fast access to span attribute mappings: reading them, setting our own values on an open span, and copies."""

from __future__ import annotations

from collections.abc import ItemsView, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.attributes import BoundedAttributes

if TYPE_CHECKING:  # the SDK is imported by the callers that make spans, not by every reader of this module
    from opentelemetry.sdk.trace import ReadableSpan


def attribute_items(attributes: Mapping[str, Any]) -> ItemsView[str, Any]:
    """Items of an attribute mapping.

    ``BoundedAttributes`` iterates through the ``Mapping`` ABC (a lock and a lookup per key); its backing
    dict iterates directly. Read-only: nothing here ever writes to a span.
    """
    backing = getattr(attributes, "_dict", None)
    return backing.items() if isinstance(backing, dict) else attributes.items()


def set_own_attributes(span: Any, values: Mapping[str, Any]) -> None:
    """Set ``values`` on an open span: values we made (str, bool, int, float, or tuples of one of them), never
    the caller's data.

    On an open SDK span, under the span's lock and then the mapping's (the order ``Span.set_attributes`` takes
    them), they go into the mapping's dict directly when the mapping's limits (the attribute count, a string's
    length) would keep them whole anyway: ``set_attributes`` re-validates each value, a cost the agent's thread
    need not pay for our own values (``benchmarks/pipeline.py``, caller thread). Otherwise (a limit would cut or
    drop, an ended span, any other span), the SDK's way, which applies its limits, counts what it drops, and
    ignores an ended span. The private fields read here are pinned by ``tests/test_span_attributes.py`` for the
    SDK versions the project allows."""
    attributes = getattr(span, "_attributes", None)
    if type(attributes) is BoundedAttributes:
        try:
            lock = span._lock
        except AttributeError:  # not the SDK's span, though it holds the SDK's mapping: the span's own way
            lock = None
        if lock is not None:
            own = attributes._lock
            # acquire/release, not ``with``: a fraction of its cost on the agent's thread (CPython 3.11).
            lock.acquire()
            try:
                own.acquire()
                try:
                    # ``_end_time``, not the mapping's ``_immutable``: SDK 1.27 leaves the mapping mutable at end().
                    if span._end_time is None:
                        maxlen = attributes.maxlen
                        if (maxlen is None or len(attributes._dict) + len(values) <= maxlen) and (
                            attributes.max_value_len is None or _short(values, attributes.max_value_len)
                        ):
                            attributes._dict.update(values)
                            return
                finally:
                    own.release()
            finally:
                lock.release()
    span.set_attributes(values)


def _short(values: Mapping[str, Any], longest: int) -> bool:
    """Whether no string in ``values`` (alone or in a tuple) is longer than ``longest``: none would be cut."""
    for value in values.values():
        if type(value) is str:
            if len(value) > longest:
                return False
        elif type(value) is tuple and any(type(item) is str and len(item) > longest for item in value):
            return False
    return True


_KNOWN_MAPPINGS = frozenset({BoundedAttributes, dict})
"""Exact types taken without an ``isinstance(..., Mapping)`` check (an ABC check costs about a microsecond)."""


def span_attributes(span: Any) -> Mapping[str, Any]:
    """A span's own attribute mapping, without the ``MappingProxyType`` that ``ReadableSpan.attributes`` adds."""
    own = getattr(span, "_attributes", None)
    if own.__class__ in _KNOWN_MAPPINGS:
        return own  # type: ignore[no-any-return]
    if isinstance(own, Mapping):
        return own
    return getattr(span, "attributes", None) or {}  # a NonRecordingSpan has none


_SDK: tuple[type, ...] = ()
"""The SDK's span classes (``ReadableSpan``, ``Span``), once :func:`with_attributes` has imported them."""


_KEEP: Any = object()
"""``parent`` of :func:`with_attributes` left as the span's own."""


def with_attributes(
    span: ReadableSpan,
    attributes: Mapping[str, Any],
    name: str | None = None,
    parent: Any = _KEEP,
    status: Any = _KEEP,
) -> ReadableSpan:
    """A copy of ``span`` with ``attributes``, and ``name``, ``parent`` (a ``SpanContext``) and ``status`` when
    given. An SDK span's own fields are read (never written): its public properties copy events and links into
    new tuples, which a copy per span need not pay. Any other span is read through its public properties."""
    global _SDK
    if not _SDK:
        from opentelemetry.sdk.trace import ReadableSpan as Readable
        from opentelemetry.sdk.trace import Span

        _SDK = (Readable, Span)
    readable = _SDK[0]
    if span.__class__ in _SDK:
        return readable(  # type: ignore[no-any-return]
            name=span._name if name is None else name,
            context=span._context,
            parent=span._parent if parent is _KEEP else parent,
            resource=span._resource,
            attributes=attributes,
            events=span._events,
            links=span._links,
            kind=span._kind,
            status=span._status if status is _KEEP else status,
            start_time=span._start_time,
            end_time=span._end_time,
            instrumentation_scope=span._instrumentation_scope,
        )
    return readable(  # type: ignore[no-any-return]
        name=span.name if name is None else name,
        context=span.context,
        parent=span.parent if parent is _KEEP else parent,
        resource=span.resource,
        attributes=attributes,
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status if status is _KEEP else status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
