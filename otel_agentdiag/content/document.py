"""The ``agentdiag-content/1`` document: its name, version, nesting limit, error type and envelope.

The node format itself is described in :mod:`otel_agentdiag.content.codec`; :mod:`~otel_agentdiag.content.encoder`
writes it and :mod:`~otel_agentdiag.content.decoder` reads it.
"""

from __future__ import annotations

__all__ = ["ENCODING", "MAX_DEPTH", "VERSION", "ContentDecodeError", "document"]

ENCODING = "agentdiag-content/1"
"""The name of the lossless encoding, stored beside each encoded value."""

MAX_DEPTH = 1000
"""Containers nested in one another, at most, in an encoded value (a ``CapturedException`` counts as one)."""

VERSION = 1
"""The version number a document carries (``{"v": 1, "root": ...}``); the only one this release reads."""


class ContentDecodeError(ValueError):
    """Stored content that is not a valid ``agentdiag-content/1`` document. The message never quotes it."""


def document(root: str) -> bytes:
    """The document around the encoded root node ``root`` (ASCII)."""
    return ('{"v":1,"root":' + root + "}").encode("ascii")
