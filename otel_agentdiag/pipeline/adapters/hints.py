"""What the trace assembler decided a foreign span is, for the adapters that map it on each destination's worker.

:class:`~otel_agentdiag.pipeline.assembly.TraceAssembler` rebuilds a trace once, before the fan-out; the adapters
map each span per destination, later. A span the rebuild made a step (a wrapper run, a model or tool call seen
twice: :mod:`otel_agentdiag.pipeline.loop`) is noted here under its ``(trace id, span id)``, with the
``agentdiag.framework.span_type`` to give it. Bounded: a full table starts afresh (a span whose note was lost is
mapped as its convention says).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_HINTS", "note_step", "step_hint"]

MAX_HINTS = 65_536

_HINTS: dict[tuple[int, int], str] = {}


def note_step(trace_id: int, span_id: int, span_type: str) -> None:
    if len(_HINTS) >= MAX_HINTS:
        _HINTS.clear()
    _HINTS[(trace_id, span_id)] = span_type


def step_hint(span: Any) -> str | None:
    """The step type the rebuild gave this span, or None."""
    if not _HINTS:
        return None
    ctx = span.context
    return None if ctx is None else _HINTS.get((ctx.trace_id, ctx.span_id))
