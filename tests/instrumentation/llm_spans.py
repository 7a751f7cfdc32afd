"""Readers of finished spans shared by the instrumentation tests: LLM span details, and trees of framework runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_agentdiag import semconv as sc
from otel_agentdiag.testing import correlation_ids


def attempts(span: ReadableSpan) -> list[dict[str, Any]]:
    """The ``agentdiag.http.attempt`` events of a span, as attribute dicts."""
    return [dict(e.attributes or {}) for e in span.events if e.name == "agentdiag.http.attempt"]


def usage_keys(span: ReadableSpan) -> set[str]:
    return {k for k in (span.attributes or {}) if k.startswith("gen_ai.usage.")}


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def raw_ids(span: ReadableSpan) -> dict[str, Any]:
    """The raw correlation ids our instrumentation kept beside ``span`` for the redactors; checks that none of
    them (nor any other correlation id) is among its attributes, where a foreign processor would read it."""
    leaked = set(sc.CORRELATION_ID_KINDS) & set(span.attributes or {})
    assert not leaked, f"{span.name} carries {sorted(leaked)} as attributes"
    return correlation_ids(span)


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    """The spans called ``name``, by start time."""
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def tree(spans: Sequence[ReadableSpan]) -> list[tuple[int, str]]:
    """``(depth, name)`` of every span, depth-first, siblings by start time (then name)."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context is not None}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(span)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(by_parent.get(parent, []), key=lambda s: (s.start_time or 0, s.name)):
            out.append((depth, span.name))
            assert span.context is not None
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return out
