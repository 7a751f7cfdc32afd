"""Which model calls our own LLM spans already own: so a peer's span of the same call carries no second usage.

When our client instrumentation (or ``agentdiag.llm_call()``, or a framework integration of ours) and a peer's
(OpenInference, OpenLLMetry, the official GenAI one) both trace one model call, the two LLM spans nest, in
either order, depending on which wrapper went on last. Ours owns the call (its usage is the leaf usage); the
peer's is a duplicate. The sequencer records, as each LLM span of ours *starts*, its ``(trace_id, span_id)``
and its parent's; the adapters, on the batch worker, call a peer's LLM span a duplicate when it is the parent of
one of ours, or its child. Both facts are known before either span ends, so the answer does not depend on the
order the spans end or reach the worker.

Bounded (:data:`DEFAULT_MAX_CALLS` per table, the oldest forgotten first): a peer span whose partner was
forgotten before the worker reached it (more than that many model calls in between) keeps its usage (a double
count, counted in :attr:`LLMCallOwners.forgotten`).
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["DEFAULT_MAX_CALLS", "LLMCallOwners"]

DEFAULT_MAX_CALLS = 16_384

_Key = tuple[int, int]


class LLMCallOwners:
    """Two bounded sets of ``(trace_id, span_id)``: our LLM spans, and the parents of our LLM spans. Thread-safe:
    a record is two dict stores under the GIL; only eviction takes the lock."""

    def __init__(self, max_calls: int = DEFAULT_MAX_CALLS) -> None:
        if max_calls < 1:
            raise ValueError("max_calls must be at least 1")
        self.max_calls = max_calls
        self._ours: dict[_Key, None] = {}
        self._parents: dict[_Key, None] = {}
        self._lock = threading.Lock()
        self.forgotten = 0
        """Entries evicted to stay within ``max_calls``."""

    def record(self, trace_id: int, span_id: int, parent_span_id: int | None) -> None:
        """An LLM span of ours started (``parent_span_id``: its parent's id in the same trace, if any)."""
        ours = self._ours
        if len(ours) >= self.max_calls:
            self._evict(ours)
        ours[(trace_id, span_id)] = None
        if parent_span_id is not None:
            parents = self._parents
            if len(parents) >= self.max_calls:
                self._evict(parents)
            parents[(trace_id, parent_span_id)] = None

    def _evict(self, table: dict[_Key, None]) -> None:
        with self._lock:
            while len(table) >= self.max_calls:
                try:
                    oldest = next(iter(table))
                except (StopIteration, RuntimeError):  # emptied, or changed meanwhile: try again later
                    return
                if table.pop(oldest, 0) is None:
                    self.forgotten += 1

    def is_duplicate(self, span: Any) -> bool:
        """Whether ``span`` (a peer's LLM span, ended) encloses an LLM span of ours or is enclosed by one."""
        ctx = span.context
        if ctx is None:
            return False
        trace_id = ctx.trace_id
        if (trace_id, ctx.span_id) in self._parents:
            return True
        parent = span.parent
        return parent is not None and parent.trace_id == trace_id and (trace_id, parent.span_id) in self._ours

    def __len__(self) -> int:
        return len(self._ours)
