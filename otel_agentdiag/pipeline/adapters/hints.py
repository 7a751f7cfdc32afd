"""What the trace assembler decided a foreign span is, for the adapters that map it on each destination's worker.

:class:`~otel_agentdiag.pipeline.assembly.TraceAssembler` rebuilds a trace once, before the fan-out; the adapters
map each span per destination, later. A span the rebuild made a step (a wrapper run, a model or tool call seen
twice: :mod:`otel_agentdiag.pipeline.loop`) is noted here, with the ``agentdiag.framework.span_type`` to give it,
against the very span object the assembler hands to every destination: the note goes when that object does.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

__all__ = ["note_step", "step_hint"]

_HINTS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def note_step(span: Any, span_type: str) -> None:
    """``span`` (the object every destination receives) is a step of type ``span_type``."""
    with _lock:
        _HINTS[span] = span_type


def step_hint(span: Any) -> str | None:
    """The step type the rebuild gave this span, or None."""
    if not _HINTS:
        return None
    with _lock:
        return _HINTS.get(span)
