"""Readers of finished LLM spans shared by the instrumentation tests."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan


def attempts(span: ReadableSpan) -> list[dict[str, Any]]:
    """The ``agentdiag.http.attempt`` events of a span, as attribute dicts."""
    return [dict(e.attributes or {}) for e in span.events if e.name == "agentdiag.http.attempt"]


def usage_keys(span: ReadableSpan) -> set[str]:
    return {k for k in (span.attributes or {}) if k.startswith("gen_ai.usage.")}
