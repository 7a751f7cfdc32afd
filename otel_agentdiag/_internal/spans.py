"""Fast, read-only access to span attribute mappings."""

from __future__ import annotations

from collections.abc import ItemsView, Mapping
from typing import Any

from opentelemetry.attributes import BoundedAttributes


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
