"""Cost and budgets read from spans: which values are a cost, exact sums, budgets passed, one format for people.

A cost (``agentdiag.cost.usd`` on an LLM leaf) is a finite number from 0 to :data:`MAX_LEAF_USD` (not a bool);
anything else is no cost at all (unknown, never 0). Sums are kept in whole nano-dollars, saturating at
:data:`NANOS_CAP`, so that adding leaves in any order (a batch at a time, or all at once in SQL) gives the same
figure to the last bit; :data:`NANOS_PER_USD` is the scale. The SQL twin of :func:`leaf_nanos` lives in
``storage/summaries.py`` and must agree with it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from otel_agentdiag import semconv as sc

MAX_LEAF_USD = 1_000_000.0
"""The largest value read as one model call's cost; a larger one is not a price anyone pays per call."""
NANOS_PER_USD = 1e9
NANOS_CAP = 2**53
"""Sums of nano-dollars stop here (about 9 million US$): every figure below it is exact in a double too."""


def amount(value: object) -> float | None:
    """``value`` as an amount of US$ (a roll-up, a sum): a finite number from 0 (not a bool), else None."""
    if type(value) is not float and type(value) is not int:
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def cost_value(value: object) -> float | None:
    """``value`` as a cost in US$, or None when it is not one (absent, a bool, text, negative, non-finite,
    above :data:`MAX_LEAF_USD`)."""
    if type(value) is not float and type(value) is not int:
        return None
    number = float(value)
    if not (math.isfinite(number) and 0.0 <= number <= MAX_LEAF_USD):
        return None
    return number


def leaf_nanos(value: object) -> int | None:
    """A cost as whole nano-dollars (rounded half up), or None when ``value`` is not a cost. Exactly what the
    SQL ``CAST(v * 1e9 + 0.5 AS INTEGER)`` gives for the same double."""
    number = cost_value(value)
    return None if number is None else int(number * NANOS_PER_USD + 0.5)


def add_nanos(total: int | None, more: int | None) -> int | None:
    """Two sums of nano-dollars added, saturating at :data:`NANOS_CAP`; None (no cost) only when both are."""
    if more is None:
        return total
    if total is None:
        return min(more, NANOS_CAP)
    return min(total + more, NANOS_CAP)


def usd(nanos: int | None) -> float | None:
    """Nano-dollars as US$ (the same division SQL's ``nanos / 1e9`` makes)."""
    return None if nanos is None else nanos / NANOS_PER_USD


def format_usd(value: object, *, unknown: str = "-") -> str:
    """A cost for people: ``$1.23`` from a dollar, ``$0.0042`` or ``$0.25`` below (four decimals at most, two at
    least), ``<$0.0001`` for a tiny non-zero cost,
    ``$0`` for a known zero; ``unknown`` (a dash) when there is none, never ``$0``."""
    number = amount(value)
    if number is None:
        return unknown
    if number == 0:
        return "$0"
    if number < 0.0001:
        return "<$0.0001"
    if number < 1:
        text = f"{number:.4f}"
        return "$" + (text[:-2] + text[-2:].rstrip("0") if text.endswith("0") else text)
    return f"${number:,.2f}"


def leaves_cost(spans: Iterable[Any]) -> float | None:
    """The sum of the LLM leaves' ``agentdiag.cost.usd`` among ``spans`` (anything with ``kind`` and
    ``attributes`` as stored), never a roll-up, exact as the store's summaries keep it; None when no leaf has
    one."""
    nanos: int | None = None
    for span in spans:
        if span.kind == sc.KIND_LLM and sc.AGENTDIAG_COST_USD in span.attributes:
            nanos = add_nanos(nanos, leaf_nanos(span.attributes[sc.AGENTDIAG_COST_USD]))
    return usd(nanos)


def budget_of(runs: Iterable[Any]) -> tuple[bool, tuple[str, ...], dict[str, float]]:
    """Of run spans (anything with ``attributes`` and ``events`` as stored): whether one passed its budget, the
    limits passed (known names only, first passed first), and their values from the ``agentdiag.budget.exceeded``
    events."""
    exceeded = False
    limits: dict[str, None] = {}
    thresholds: dict[str, float] = {}
    for run in runs:
        if run.attributes.get(sc.AGENTDIAG_BUDGET_EXCEEDED) is not True:
            continue
        exceeded = True
        named = run.attributes.get(sc.AGENTDIAG_BUDGET_LIMITS)
        for limit in named if isinstance(named, (list, tuple)) else ():
            if limit in sc.BUDGET_LIMITS:
                limits.setdefault(limit)
        for event in run.events:
            if event.get("name") != sc.AGENTDIAG_BUDGET_EXCEEDED:
                continue
            attributes = event.get("attributes") or {}
            limit, value = attributes.get(sc.AGENTDIAG_BUDGET_LIMIT), attributes.get(sc.AGENTDIAG_BUDGET_THRESHOLD)
            number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
            if limit in sc.BUDGET_LIMITS and math.isfinite(number):
                limits.setdefault(limit)
                thresholds.setdefault(limit, float(number))
    return exceeded, tuple(limits), thresholds


def describe_limit(limit: str, thresholds: Mapping[str, float]) -> str:
    """``cost_usd over $0.50``, ``total_tokens over 10000``, or the limit alone when its value is not known."""
    if limit not in thresholds:
        return limit
    value = thresholds[limit]
    if limit == sc.BUDGET_LIMIT_COST:
        shown = format_usd(value)
    else:
        shown = str(int(value)) if value.is_integer() else f"{value:g}"
    return f"{limit} over {shown}"
