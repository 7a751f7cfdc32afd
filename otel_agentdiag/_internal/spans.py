"""Fast, read-only access to span attribute mappings, and copies of a span with other attributes."""

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


_KNOWN_MAPPINGS = frozenset({BoundedAttributes, dict})
"""Exact types taken without an ``isinstance(..., Mapping)`` check (an ABC check costs about a microsecond)."""


def span_attributes(span: Any) -> Mapping[str, Any]:
    """A span's own attribute mapping, without the ``MappingProxyType`` that ``ReadableSpan.attributes`` adds."""
    own = getattr(span, "_attributes", None)
    if own.__class__ in _KNOWN_MAPPINGS:
        return own  # type: ignore[no-any-return]
    return own if isinstance(own, Mapping) else (span.attributes or {})


def with_attributes(span: ReadableSpan, attributes: Mapping[str, Any], name: str | None = None) -> ReadableSpan:
    """A copy of ``span`` (through its public properties) with ``attributes``, and ``name`` when given."""
    from opentelemetry.sdk.trace import ReadableSpan

    return ReadableSpan(
        name=span.name if name is None else name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
