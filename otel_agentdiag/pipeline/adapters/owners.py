"""Which model calls our own LLM spans already own: so a peer's span of the same call carries no second usage.

When our client instrumentation (or ``agentdiag.llm_call()``) and a peer's (OpenInference, OpenLLMetry, the
official GenAI one) both trace one model call, the two LLM spans nest, in either order, depending on which
wrapper went on last. Ours owns the call (its usage is the leaf usage); the peer's is a duplicate:

- **the peer's span inside ours**: it starts while our call is in progress (our ``LLMCallState`` is in the
  context it starts in). The sequencer, which sees every span start, marks such a *foreign* span here
  (:meth:`LLMCallOwners.mark_inside`): our spans pay one key lookup, and only foreign spans a context lookup.
- **the peer's span around ours**: ours ends first, so each destination's adapter, on its worker, sees ours
  before the peer's and remembers its parent (:class:`Enclosing`); the peer's span is then found there.

Both records are bounded (:data:`DEFAULT_MAX_CALLS`, the oldest forgotten first): a peer span whose record was
forgotten before the worker reached it (that many model calls in between) keeps its usage, and the eviction is
counted (``forgotten``).
"""

from __future__ import annotations

import threading
from typing import Any

from otel_agentdiag._internal.fork import reinit_after_fork

__all__ = ["DEFAULT_MAX_CALLS", "Enclosing", "LLMCallOwners"]

DEFAULT_MAX_CALLS = 16_384

_Key = tuple[int, int]
"""``(trace_id, span_id)``."""


class _BoundedKeys:
    """A bounded insertion-ordered set of span keys. Adding and testing are single dict operations under the GIL;
    only eviction takes the lock."""

    def __init__(self, max_keys: int) -> None:
        if max_keys < 1:
            raise ValueError("max_calls must be at least 1")
        self.max_keys = max_keys
        self._keys: dict[_Key, None] = {}
        self._lock = threading.Lock()
        self.forgotten = 0
        """Keys evicted to stay within the bound."""
        reinit_after_fork(self._at_fork_reinit)

    def _at_fork_reinit(self) -> None:
        """A lock held by another thread at the fork is replaced in the child."""
        self._lock = threading.Lock()

    def add(self, key: _Key) -> None:
        keys = self._keys
        if len(keys) >= self.max_keys:
            self._evict()
        keys[key] = None

    def _evict(self) -> None:
        with self._lock:
            keys = self._keys
            while len(keys) >= self.max_keys:
                try:
                    oldest = next(iter(keys))
                except (StopIteration, RuntimeError):  # emptied, or changed meanwhile: try again later
                    return
                if keys.pop(oldest, 0) is None:
                    self.forgotten += 1

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)


def _key_of(span: Any) -> _Key | None:
    """``(trace_id, span_id)`` of a span (SDK or readable), or None."""
    ctx = span.context
    return None if ctx is None else (ctx.trace_id, ctx.span_id)


class LLMCallOwners(_BoundedKeys):
    """The foreign spans that started inside a model call of ours (filled by the sequencer). Thread-safe."""

    def __init__(self, max_calls: int = DEFAULT_MAX_CALLS) -> None:
        super().__init__(max_calls)

    def mark_inside(self, span: Any) -> None:
        """``span`` (a foreign span, starting) started while one of our model calls was in progress."""
        key = _key_of(span)
        if key is not None:
            self.add(key)

    def is_inside(self, span: Any) -> bool:
        key = _key_of(span)
        return key is not None and key in self


class Enclosing(_BoundedKeys):
    """The parents of our LLM spans one adapter has seen end (one per destination's worker)."""

    def __init__(self, max_calls: int = DEFAULT_MAX_CALLS) -> None:
        super().__init__(max_calls)

    def saw_ours(self, span: Any) -> None:
        """One of our LLM spans ended: its parent, if any, may be a peer's span of the same call."""
        parent = span.parent
        if parent is not None:
            self.add((parent.trace_id, parent.span_id))

    def encloses_ours(self, span: Any) -> bool:
        key = _key_of(span)
        return key is not None and key in self
