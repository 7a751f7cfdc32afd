"""The ``smolagents`` releases this instrumentation supports."""

from __future__ import annotations

_instruments = ("smolagents >= 1.26",)
