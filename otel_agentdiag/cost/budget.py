"""Budgets: limits on a run's cost and tokens, and marking a run span the first time it passes one."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from otel_agentdiag import semconv as sc

__all__ = ["Budget", "active_budget", "check_budget", "install_budget"]


@dataclass(frozen=True, kw_only=True)
class Budget:
    """Limits for each agent run, checked against the run's own roll-ups as its LLM calls end.

    A run that passes a limit (its total goes *over* it) is marked: an ``agentdiag.budget.exceeded`` event the
    first time (``agentdiag.budget.limit``, ``agentdiag.budget.threshold``), and the attributes
    ``agentdiag.budget.exceeded=True`` and ``agentdiag.budget.limits`` (the limits passed, in order). What the
    agent does is never changed. ``max_total_tokens`` counts input plus output tokens (input includes cached).
    Each limit is a positive finite number; at least one must be set. Raises ``ValueError`` otherwise.
    """

    max_cost_usd: float | None = None
    max_total_tokens: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None

    def __post_init__(self) -> None:
        given = 0
        for name in ("max_cost_usd", "max_total_tokens", "max_input_tokens", "max_output_tokens"):
            value = getattr(self, name)
            if value is None:
                continue
            given += 1
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"Budget.{name} must be a number, not {type(value).__name__}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"Budget.{name} must be a positive finite number")
        if not given:
            raise ValueError("a Budget needs at least one limit (max_cost_usd, max_total_tokens, ...)")

    def limits(self) -> tuple[tuple[str, float], ...]:
        """``(limit name, value)`` of each limit set, in :data:`~otel_agentdiag.semconv.BUDGET_LIMITS` order."""
        values = (self.max_cost_usd, self.max_total_tokens, self.max_input_tokens, self.max_output_tokens)
        return tuple((name, float(v)) for name, v in zip(sc.BUDGET_LIMITS, values, strict=True) if v is not None)


_active: tuple[tuple[str, float], ...] = ()


def install_budget(budget: Budget | None) -> None:
    """Check runs against ``budget`` from now on (``None``: no budget). ``configure()`` calls it."""
    global _active
    _active = () if budget is None else budget.limits()


def active_budget() -> tuple[tuple[str, float], ...]:
    """The limits in force, ``(name, value)`` in order; empty when there is no budget."""
    return _active


_INPUT = sc.GEN_AI_USAGE_INPUT_TOKENS
_OUTPUT = sc.GEN_AI_USAGE_OUTPUT_TOKENS


def check_budget(span: Any, passed: list[str], usage: Mapping[str, int], cost: float | None) -> None:
    """Compare a run's totals (``usage`` keyed by ``gen_ai.usage.*``, ``cost`` in US dollars or None) with the
    budget; for each limit passed for the first time, append it to ``passed`` and mark ``span``. Cheap when there
    is no budget. Callers hold the lock of the totals and contain errors."""
    limits = _active
    if not limits:
        return
    new = False
    for name, threshold in limits:
        if name in passed:
            continue
        if name == sc.BUDGET_LIMIT_COST:
            value: float | None = cost
        elif name == sc.BUDGET_LIMIT_TOKENS:
            value = usage.get(_INPUT, 0) + usage.get(_OUTPUT, 0) if (_INPUT in usage or _OUTPUT in usage) else None
        elif name == sc.BUDGET_LIMIT_INPUT_TOKENS:
            value = usage.get(_INPUT)
        else:
            value = usage.get(_OUTPUT)
        if value is not None and value > threshold:
            passed.append(name)
            new = True
            if span.is_recording():
                span.add_event(
                    sc.AGENTDIAG_BUDGET_EXCEEDED,
                    {sc.AGENTDIAG_BUDGET_LIMIT: name, sc.AGENTDIAG_BUDGET_THRESHOLD: threshold},
                )
    if new and span.is_recording():
        span.set_attributes({sc.AGENTDIAG_BUDGET_EXCEEDED: True, sc.AGENTDIAG_BUDGET_LIMITS: tuple(passed)})
