"""The OpenTelemetry SDK's private fields that otel-agentdiag reads: here, and nowhere else; never written.

Each is read for a measured cost (``benchmarks/sdk_private.py``: the public form in the same run) or because the
public API does not say it (which processors a provider has). The project allows ``opentelemetry-sdk>=1.27,<2``,
whose internals change within that range: every reader falls back to the public API (or to "not known") when a
field is absent or of another type, and ``tests/test_sdk_private.py`` checks, on the SDK installed, that
each field is still there and reads as the public API does.
"""

from __future__ import annotations

from collections.abc import ItemsView, Mapping
from typing import Any

_KNOWN_MAPPINGS: frozenset[type] = frozenset()
"""Exact types taken without an ``isinstance(..., Mapping)`` check (an ABC check costs about a microsecond): the
SDK's ``BoundedAttributes`` and ``dict``, once :func:`span_attributes` has run (a reader of the store that never
sees a span does not import the API's attributes module)."""


def span_attributes(span: Any) -> Mapping[str, Any]:
    """A span's own attribute mapping: ``span.attributes`` without the ``MappingProxyType`` it wraps around it
    (the mapping then reads through :func:`attribute_dict`). Read only."""
    global _KNOWN_MAPPINGS
    if not _KNOWN_MAPPINGS:
        from opentelemetry.attributes import BoundedAttributes

        _KNOWN_MAPPINGS = frozenset({BoundedAttributes, dict})
    own: Any = getattr(span, "_attributes", None)
    if own.__class__ in _KNOWN_MAPPINGS:
        return own  # type: ignore[return-value]
    if isinstance(own, Mapping):
        return own
    return getattr(span, "attributes", None) or {}  # a NonRecordingSpan has none


def attribute_dict(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    """The dict behind the SDK's ``BoundedAttributes``, else ``attributes`` itself: lookups and passes on it skip
    the ``Mapping`` ABC's Python calls, 3 to 7 times their cost, several times per span on the worker (5-10% of
    the pipeline's CPU per span). Read only: the SDK owns it."""
    backing = getattr(attributes, "_dict", None)
    return backing if type(backing) is dict else attributes


def attribute_items(attributes: Mapping[str, Any]) -> ItemsView[str, Any]:
    """Items of an attribute mapping, read as :func:`attribute_dict` reads it."""
    return attribute_dict(attributes).items()


_SDK_SPANS: tuple[type, ...] = ()
"""The SDK's span classes (``ReadableSpan``, ``Span``), once :func:`span_fields` has imported them."""


def span_fields(span: Any) -> tuple[Any, ...]:
    """``(name, context, parent, kind, start_time, end_time, status, resource, instrumentation_scope, events,
    links)`` as the span's properties give them, except that ``events`` and ``links`` may be the SDK's own
    sequences (iterate them, never change them). An SDK span's fields are read directly: eleven property calls
    and the two tuples its ``events``/``links`` copy into cost ten times more, on every span the worker copies,
    redacts and stores (6-10% of the pipeline's CPU per span). Any other class (a subclass may override a
    property) is read through its properties."""
    global _SDK_SPANS
    if not _SDK_SPANS:
        from opentelemetry.sdk.trace import ReadableSpan, Span

        _SDK_SPANS = (ReadableSpan, Span)
    cls: type = span.__class__
    if cls in _SDK_SPANS:
        try:
            return (
                span._name,
                span._context,
                span._parent,
                span._kind,
                span._start_time,
                span._end_time,
                span._status,
                span._resource,
                span._instrumentation_scope,
                span._events,
                span._links,
            )
        except AttributeError:  # a release that renamed one: the properties below
            pass
    return (
        span.name,
        span.context,
        span.parent,
        span.kind,
        span.start_time,
        span.end_time,
        span.status,
        span.resource,
        span.instrumentation_scope,
        span.events,
        span.links,
    )


_EVENT_SPANS: tuple[type, ...] = ()
"""The SDK's span classes whose ``events`` property is a copy of ``_events`` (``_Span`` included: what ``on_end``
gets), once :func:`span_events` has imported them."""


def span_events(span: Any) -> Any:
    """A span's events, as its ``events`` property gives them, but an SDK span's own sequence (iterate it, never
    change it): the property copies it into a tuple (about 0.4 µs), on every span the agent's thread ends."""
    global _EVENT_SPANS
    if not _EVENT_SPANS:
        from opentelemetry.sdk import trace as sdk_trace

        _EVENT_SPANS = tuple(
            c for c in (sdk_trace.ReadableSpan, sdk_trace.Span, getattr(sdk_trace, "_Span", None)) if c
        )
    if span.__class__ in _EVENT_SPANS:
        own = getattr(span, "_events", None)
        if own is not None:
            return own
    return span.events


# -- a provider's processors: the public API has no way to list them ------------------------------------------
def active_span_processor(tracer_provider: Any) -> Any:
    """The processor an SDK ``TracerProvider`` hands every span to, or None (a provider that is not the SDK's)."""
    return getattr(tracer_provider, "_active_span_processor", None)


def child_processors(processor: Any) -> tuple[Any, ...] | None:
    """The processors an SDK multi-processor fans out to, in order, or None for any other processor."""
    found = getattr(processor, "_span_processors", None)
    return tuple(found) if isinstance(found, (tuple, list)) else None


def span_exporter_of(processor: Any) -> Any:
    """The exporter a processor feeds, when it says: ``span_exporter`` (public on ``SimpleSpanProcessor``, and on
    ``BatchSpanProcessor`` before the SDK moved its worker into ``_batch_processor``), the batch worker's
    ``_exporter``, or an ``exporter`` attribute; None otherwise. Only an object with an ``export`` method counts."""
    for owner in (processor, getattr(processor, "_batch_processor", None)):
        if owner is None:
            continue
        for name in ("span_exporter", "_exporter", "exporter"):
            found = getattr(owner, name, None)
            if found is not None and callable(getattr(found, "export", None)):
                return found
    return None
