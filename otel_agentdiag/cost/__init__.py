"""Cost: price tables (TOML, a bundled one), what each model call cost, roll-ups, and budgets (docs/cost.md)."""

from __future__ import annotations

from otel_agentdiag.cost.budget import Budget, active_budget, check_budget, install_budget
from otel_agentdiag.cost.loader import PriceTableError, load_price_table, parse_price_table
from otel_agentdiag.cost.pricing import (
    active_table,
    bundled_table,
    cost_usd,
    install_table,
    leaf_cost,
    resolve_table,
)
from otel_agentdiag.cost.rollup import Rollup, rollup_attributes, usage_of
from otel_agentdiag.cost.table import Price, PriceEntry, PriceTable

__all__ = [
    "Budget",
    "Price",
    "PriceEntry",
    "PriceTable",
    "PriceTableError",
    "Rollup",
    "active_budget",
    "active_table",
    "bundled_table",
    "check_budget",
    "cost_usd",
    "install_budget",
    "install_table",
    "leaf_cost",
    "load_price_table",
    "parse_price_table",
    "resolve_table",
    "rollup_attributes",
    "usage_of",
]
