"""Roll-ups: a leaf's usage and cost summed on its runs and iterations, under keys no backend adds to the leaves'."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag.cost.budget import check_budget
from otel_agentdiag.cost.pricing import readable_attributes, valid_cost

__all__ = ["ROLLUP_KEYS", "USAGE_KEYS", "Rollup", "leaf_cost_of", "rollup_attributes", "usage_of"]

USAGE_KEYS: tuple[str, ...] = (
    sc.GEN_AI_USAGE_INPUT_TOKENS,
    sc.GEN_AI_USAGE_OUTPUT_TOKENS,
    sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
)
"""The leaf usage attributes that roll up: ``gen_ai.usage.X`` becomes ``agentdiag.usage.X`` on ancestors."""

ROLLUP_KEYS: dict[str, str] = {
    key: sc.AGENTDIAG_USAGE_PREFIX + key[len(sc.GEN_AI_USAGE_PREFIX) :] for key in USAGE_KEYS
}


def usage_of(attributes: Mapping[str, Any] | None) -> dict[str, int]:
    """The roll-up relevant usage among span attributes."""
    if not attributes:
        return {}
    out = {}
    for key in USAGE_KEYS:
        value = attributes.get(key)
        if type(value) is int and value >= 0:
            out[key] = value
    return out


def leaf_cost_of(attributes: Mapping[str, Any] | None) -> float | None:
    """A leaf's ``agentdiag.cost.usd`` when it carries a valid one."""
    return None if not attributes else valid_cost(attributes.get(sc.AGENTDIAG_COST_USD))


def rollup_attributes(usage: Mapping[str, int], cost: float | None) -> dict[str, Any]:
    """The roll-up attributes of a run or iteration from its sums (cost absent when no leaf had one)."""
    out: dict[str, Any] = {ROLLUP_KEYS[key]: value for key, value in usage.items()}
    if cost is not None:
        out[sc.AGENTDIAG_USAGE_COST_USD] = cost
    return out


_lock = threading.Lock()


class Rollup:
    """The sums of a run, an iteration or a framework step: each LLM leaf that ends inside it adds its usage and
    cost here and to every enclosing one; a run checks the budget as it grows. One per manual ``agent_run`` or
    ``iteration``, and one per framework node (``instrumentation._framework.Node.sums``, whose parent is the
    parent node's, or for a root the manual run or iteration it was opened in)."""

    __slots__ = ("cost", "is_run", "parent", "passed", "span", "usage")

    def __init__(self, span: Any, parent: Rollup | None, *, is_run: bool) -> None:
        self.span = span
        """The run or iteration's span (None until a framework node's span has started): a run's budget marks go
        there."""
        self.parent = parent
        self.is_run = is_run
        self.usage: dict[str, int] = {}
        self.cost: float | None = None
        self.passed: list[str] = []

    def add(self, usage: Mapping[str, int], cost: float | None) -> None:
        """Count a leaf's usage and cost here and in every enclosing roll-up."""
        if not usage and cost is None:
            return
        with _lock:
            node: Rollup | None = self
            while node is not None:
                for key, value in usage.items():
                    node.usage[key] = node.usage.get(key, 0) + value
                if cost is not None:
                    node.cost = cost if node.cost is None else node.cost + cost
                if node.is_run and node.span is not None:
                    check_budget(node.span, node.passed, node.usage, node.cost)
                node = node.parent

    def add_span_usage(self, span: Any) -> None:
        """An LLM leaf is ending inside this run or iteration (its cost already set): count it."""
        attributes = readable_attributes(span)
        self.add(usage_of(attributes), leaf_cost_of(attributes))

    def attributes(self) -> dict[str, Any]:
        """The roll-up attributes to set on the span as it ends (none when no leaf reported anything)."""
        with _lock:
            return rollup_attributes(self.usage, self.cost)
