"""Fast, read-only access to span attribute mappings."""

from __future__ import annotations

from collections.abc import ItemsView, Mapping
from typing import Any


def attribute_items(attributes: Mapping[str, Any]) -> ItemsView[str, Any]:
    """Items of an attribute mapping.

    ``BoundedAttributes`` iterates through the ``Mapping`` ABC (a lock and a lookup per key); its backing
    dict iterates directly. Read-only: nothing here ever writes to a span.
    """
    backing = getattr(attributes, "_dict", None)
    return backing.items() if isinstance(backing, dict) else attributes.items()


def span_attributes(span: Any) -> Mapping[str, Any]:
    """A span's own attribute mapping, without the ``MappingProxyType`` that ``ReadableSpan.attributes`` adds."""
    own = getattr(span, "_attributes", None)
    return own if isinstance(own, Mapping) else (span.attributes or {})
