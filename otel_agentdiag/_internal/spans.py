"""Span attributes: reading them, setting our own values on an open span, and copies with other attributes.

The reads are :mod:`otel_agentdiag._internal.sdk`'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from otel_agentdiag._internal.sdk import span_fields

if TYPE_CHECKING:  # the SDK is imported by the callers that make spans, not by every reader of this module
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["set_own_attributes", "with_attributes"]


def set_own_attributes(span: Any, values: Mapping[str, Any]) -> None:
    """Set ``values`` (ours: str, bool, int, float, or tuples of one of them) on an open span, the SDK's way: its
    limits apply (a string cut, the oldest key dropped and counted when the span is full) and the span's lock
    orders it with every other writer. An ended span is left alone, silently (the SDK would log a warning). One
    value goes through ``set_attribute``, half the cost (``set_attributes`` checks its mapping against two ABCs)."""
    if span.is_recording():
        if len(values) == 1:
            ((key, value),) = values.items()
            span.set_attribute(key, value)
        else:
            span.set_attributes(values)


_READABLE: Any = None
"""The SDK's ``ReadableSpan``, once :func:`with_attributes` has imported it."""


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
    given; every other field as :func:`~otel_agentdiag._internal.sdk.span_fields` reads it."""
    global _READABLE
    if _READABLE is None:
        from opentelemetry.sdk.trace import ReadableSpan as Readable

        _READABLE = Readable
    own_name, context, own_parent, kind, start, end, own_status, resource, scope, events, links = span_fields(span)
    return _READABLE(  # type: ignore[no-any-return]
        name=own_name if name is None else name,
        context=context,
        parent=own_parent if parent is _KEEP else parent,
        resource=resource,
        attributes=attributes,
        events=events,
        links=links,
        kind=kind,
        status=own_status if status is _KEEP else status,
        start_time=start,
        end_time=end,
        instrumentation_scope=scope,
    )
