"""Money in spans: which attribute values are a cost, their exact sum in nano-dollars, and one format for people.

A cost (``agentdiag.cost.usd`` on an LLM leaf) is a finite number from 0 to :data:`MAX_LEAF_USD` (not a bool);
anything else is no cost at all (unknown, never 0). Sums are kept in whole nano-dollars, saturating at
:data:`NANOS_CAP`, so that adding leaves in any order (a batch at a time, or all at once in SQL) gives the same
figure to the last bit; :data:`NANOS_PER_USD` is the scale. The SQL twin of :func:`leaf_nanos` lives in
``storage/summaries.py`` and must agree with it.
"""

from __future__ import annotations

import math

MAX_LEAF_USD = 1_000_000.0
"""The largest value read as one model call's cost; a larger one is not a price anyone pays per call."""
NANOS_PER_USD = 1e9
NANOS_CAP = 2**53
"""Sums of nano-dollars stop here (about 9 million US$): every figure below it is exact in a double too."""


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
    """A cost for people: ``$1.23`` from a dollar, ``$0.0042`` below, ``<$0.0001`` for a tiny non-zero cost,
    ``$0`` for a known zero; ``unknown`` (a dash) when there is none, never ``$0``."""
    if type(value) is not float and type(value) is not int:
        return unknown
    number = float(value)
    if not (math.isfinite(number) and number >= 0):
        return unknown
    if number == 0:
        return "$0"
    if number < 0.0001:
        return "<$0.0001"
    if number < 1:
        return f"${number:.4f}"
    return f"${number:,.2f}"
