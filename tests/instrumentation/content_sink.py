"""A content sink for instrumentation tests: what each instrumentation *captures*, by span and role.

It sits at the instrumentation's one seam, ``otel_agentdiag._internal.content.capture``; the path from there
to the store (snapshot, carriage beside the span, the ``span_content`` table) is tested in tests/content.
Values are snapshotted as the real recorder does, so a test sees the content as it was when captured.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from otel_agentdiag._internal import content


class RecordingSink:
    def __init__(self) -> None:
        self.records: list[tuple[int, str, str, Any]] = []  # (span id, span name, role, value)
        self._lock = threading.Lock()

    def record(self, span: Any, role: str, value: Any) -> None:
        from otel_agentdiag.content import snapshot

        if not span.is_recording():
            return
        ctx = span.get_span_context()
        with self._lock:
            self.records.append((ctx.span_id, span.name, role, snapshot(value)))

    def for_span(self, span: Any) -> dict[str, Any]:
        """``{role: value}`` captured for a finished span (the last capture of a role wins, as in the store)."""
        span_id = span.context.span_id
        return {role: value for sid, _name, role, value in self.records if sid == span_id}

    def roles(self) -> list[tuple[str, str]]:
        """``(span name, role)`` of every capture, in order."""
        return [(name, role) for _sid, name, role, _value in self.records]


@pytest.fixture
def content_sink() -> Iterator[RecordingSink]:
    """Content capture on, into a :class:`RecordingSink`; off again afterwards."""
    sink = RecordingSink()
    content.install(sink)
    try:
        yield sink
    finally:
        content.uninstall(sink)
