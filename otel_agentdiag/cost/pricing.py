"""What a model call cost: the active price table, ``cost_usd`` over a span's attributes, and the leaf helper."""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Mapping
from importlib import resources
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.money import amount
from otel_agentdiag._internal.sdk import attribute_dict, span_attributes
from otel_agentdiag._internal.spans import set_own_attributes
from otel_agentdiag.cost.loader import PriceTableError, load_price_table, parse_price_table
from otel_agentdiag.cost.table import PriceTable

__all__ = [
    "active_table",
    "bundled_table",
    "cost_usd",
    "install_table",
    "leaf_cost",
    "readable_attributes",
    "resolve_table",
    "valid_cost",
]

_logger = logging.getLogger(__name__)

BUNDLED = "prices.toml"
"""The bundled table, package data of :mod:`otel_agentdiag.cost`."""

OFF_VALUES = frozenset({"off", "false", "0", "no", "none"})
"""``AGENTDIAG_PRICES`` values that turn cost off."""

_INPUT = sc.GEN_AI_USAGE_INPUT_TOKENS
_OUTPUT = sc.GEN_AI_USAGE_OUTPUT_TOKENS
_CACHE_READ = sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
_CACHE_WRITE = sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
_PROVIDER = sc.GEN_AI_PROVIDER_NAME
_RESPONSE_MODEL = sc.GEN_AI_RESPONSE_MODEL
_REQUEST_MODEL = sc.GEN_AI_REQUEST_MODEL
_COST = sc.AGENTDIAG_COST_USD

_UNSET: Any = object()
_active: PriceTable | None = _UNSET
_bundled: PriceTable | None = None
_lock = threading.Lock()


def bundled_table() -> PriceTable:
    """The table shipped with otel-agentdiag (read once)."""
    global _bundled
    table = _bundled
    if table is None:
        text = resources.files("otel_agentdiag.cost").joinpath(BUNDLED).read_text(encoding="utf-8")
        table = _bundled = parse_price_table(text, f"otel_agentdiag/cost/{BUNDLED}")
    return table


def install_table(table: PriceTable | None) -> None:
    """Price calls with ``table`` from now on (``None``: cost off). ``configure()`` calls it; the last one wins."""
    global _active
    _active = table


def active_table() -> PriceTable | None:
    """The table calls are priced with: the one installed, else the bundled one (read on first use)."""
    table = _active
    if table is _UNSET:
        with _lock:
            if _active is _UNSET:
                try:
                    install_table(bundled_table())
                except Exception as exc:  # noqa: BLE001 - a broken install: no cost, never a failed agent
                    _logger.error("otel-agentdiag: the bundled price table cannot be read (%s)", type(exc).__name__)
                    install_table(None)
            table = _active
    return table  # type: ignore[no-any-return]


def resolve_table(prices: str | os.PathLike[str] | bool | None, variable: str | None) -> PriceTable | None:
    """The table ``configure(prices=...)`` asks for, or the variable's (``AGENTDIAG_PRICES``) when the argument is
    None. ``False`` or ``off``: None (cost off); ``True``/None/unset: the bundled table; a path: the bundled table
    overridden by that file. A bad argument raises ``ValueError`` (a :class:`PriceTableError` for a bad file); a
    bad file named by the variable logs one error line and the bundled table is used."""
    if prices is not None:
        if prices is False:
            return None
        if prices is True:
            return bundled_table()
        if not isinstance(prices, (str, os.PathLike)):
            raise ValueError(f"prices must be a path, True or False, not {type(prices).__name__}")
        return bundled_table().overridden_by(load_price_table(prices))
    if variable is None or not variable.strip():
        return bundled_table()
    if variable.strip().lower() in OFF_VALUES:
        return None
    try:
        return bundled_table().overridden_by(load_price_table(variable))
    except PriceTableError as exc:
        _logger.error("otel-agentdiag: AGENTDIAG_PRICES: %s; using the bundled price table", exc)
        return bundled_table()


def _count(attributes: Mapping[str, Any], key: str) -> int | None:
    value = attributes.get(key)
    return value if type(value) is int and value >= 0 else None


def cost_usd(
    attributes: Mapping[str, Any], start_time_ns: int | None, table: PriceTable | None = _UNSET
) -> float | None:
    """What the call these attributes describe cost, in US dollars; None when it cannot be known.

    None when cost is off, the call reported no input or output token count, or no entry of the table prices its
    model (``gen_ai.response.model`` first, then ``gen_ai.request.model``) for its provider on its start date.
    ``gen_ai.usage.input_tokens`` counts the cache reads and writes (the GenAI conventions; our OpenAI and
    Anthropic instrumentations record it so): the uncached part is input - cache_read - cache_creation (never
    below 0), each part at its own price; reasoning tokens are part of the output tokens already.
    """
    if table is _UNSET:
        table = active_table()
    if table is None:
        return None
    input_tokens = _count(attributes, _INPUT)
    output_tokens = _count(attributes, _OUTPUT)
    if input_tokens is None and output_tokens is None:
        return None
    provider = attributes.get(_PROVIDER)
    if type(provider) is not str:
        provider = None
    start = start_time_ns if type(start_time_ns) is int else 0
    price = None
    for key in (_RESPONSE_MODEL, _REQUEST_MODEL):
        model = attributes.get(key)
        if type(model) is str and model:
            price = table.price(provider, model, start)
            if price is not None:
                break
    if price is None:
        return None
    cache_read = _count(attributes, _CACHE_READ) or 0
    cache_write = _count(attributes, _CACHE_WRITE) or 0
    uncached = max((input_tokens or 0) - cache_read - cache_write, 0)
    cost = price.cost(uncached, output_tokens or 0, cache_read, cache_write)
    return cost if math.isfinite(cost) else None


valid_cost = amount
"""``value`` as a cost: a finite float or int (not a bool), zero or more; else None (``_internal.money.amount``)."""


def readable_attributes(span: Any) -> Mapping[str, Any]:
    """A span's attributes for reading, without the SDK mapping's lock per lookup (its backing dict)."""
    return attribute_dict(span_attributes(span))


def leaf_cost(span: Any) -> float | None:
    """Give an LLM leaf span (still open) its ``agentdiag.cost.usd`` when priced, and return the leaf's cost: the
    one it already carries (set by the user: kept), else the one computed now, else None. Never raises."""
    try:
        attributes = readable_attributes(span)
        if not attributes:
            return None
        existing = attributes.get(_COST)
        if existing is not None:
            return valid_cost(existing)
        cost = cost_usd(attributes, getattr(span, "start_time", None))
        if cost is not None:
            set_own_attributes(span, {_COST: cost})
        return cost
    except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
        log_internal_error("pricing a model call", exc)
        return None
