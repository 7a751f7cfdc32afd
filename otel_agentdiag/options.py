"""Resolve what ``configure()`` was asked for: argument > ``AGENTDIAG_*``/``OTEL_*`` variable > default.

The result is plain data (frozen, keyword-only dataclasses and a typed dict) that the pipeline builder
(:mod:`otel_agentdiag.pipeline.build`) and ``agentdiag doctor`` both read. Nothing here starts a thread, opens
the store or builds an exporter. A bad argument raises ``ValueError``; a bad variable logs and falls back
(for privacy settings, to the most private choice).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

from otel_agentdiag import environment_variables as env
from otel_agentdiag.exporters import otlp
from otel_agentdiag.pipeline.batching import DEFAULT_MAX_EXPORT_BATCH, DEFAULT_MAX_QUEUE_SPANS, DEFAULT_SCHEDULE_DELAY_S
from otel_agentdiag.storage.connection import default_store_path

if TYPE_CHECKING:
    from otel_agentdiag.cost import Budget, PriceTable

_logger = logging.getLogger(__name__)

__all__ = [
    "AgentDiagOptions",
    "BatchSettings",
    "batch_settings_from_env",
    "is_enabled",
    "resolve_budget",
    "resolve_prices",
    "resolve_options",
]


def is_enabled() -> bool:
    """False when ``AGENTDIAG_ENABLED`` switches otel-agentdiag off; a value that is neither true nor false leaves
    it on, with a warning naming the variable."""
    value = os.environ.get(env.AGENTDIAG_ENABLED)
    if env.is_malformed_switch(value):
        import logging

        logging.getLogger("otel_agentdiag").warning(
            "otel-agentdiag: %s is not true or false (true/1/yes/on, false/0/no/off); otel-agentdiag stays on",
            env.AGENTDIAG_ENABLED,
        )
    return not env.is_disabled(value)


@dataclass(frozen=True, kw_only=True)
class AgentDiagOptions:
    """What ``configure()`` resolved from its arguments and the environment."""

    enabled: bool
    service_name: str | None
    store_path: Path | None
    otlp_endpoint: str | None
    """``None`` with ``otlp_from_env`` true: the OTLP exporter reads ``OTEL_EXPORTER_OTLP_*`` itself."""
    otlp_from_env: bool
    otlp_protocol: str | None = None
    """``http/protobuf`` or ``grpc`` when there is an OTLP branch (``None`` when there is none)."""
    otlp_protocol_source: str | None = None
    """Where the protocol came from: ``argument``, ``default``, or the environment variable that named it."""
    capture_content: bool = False
    """Whether content (prompts, outputs, tool arguments and results) is captured into the local store."""
    metrics: bool = False
    """Whether the GenAI metrics are recorded from the spans (``configure(metrics=...)``, ``AGENTDIAG_METRICS``)."""
    otlp_refused: str | None = None
    """Why the OTLP endpoint from the environment was refused (the OTLP branch is then off, the local store is
    not), in one line that names the variable and shows the endpoint's host and port only; ``None`` if it was
    not."""


def resolve_options(
    service_name: str | None,
    store: str | os.PathLike[str] | Literal[False] | None,
    otlp_endpoint: str | None,
    otlp_protocol: str | None = None,
    capture_content: bool | None = None,
    metrics: bool | None = None,
) -> AgentDiagOptions:
    """The options for ``configure()``'s arguments: a bad argument raises ``ValueError``, a bad variable logs."""
    if capture_content is not None and not isinstance(capture_content, bool):
        raise ValueError("capture_content must be True or False")
    if metrics is not None and not isinstance(metrics, bool):
        raise ValueError("metrics must be True or False")
    enabled = is_enabled()
    store_path = _store_path(store)
    # An argument is checked even when there is no OTLP branch: it is a programming error either way.
    otlp.check_protocol(otlp_protocol)
    endpoint_variable = otlp.endpoint_variable()
    otlp_from_env = otlp_endpoint is None and endpoint_variable is not None
    protocol: str | None = None
    protocol_source: str | None = None
    refused: str | None = None
    if otlp_endpoint is not None or otlp_from_env:
        # Only an OTLP branch reads the protocol variables (and warns about an unusable one).
        protocol, protocol_source = otlp.resolve_protocol(otlp_protocol)
        if otlp_endpoint is not None:
            problem = otlp.endpoint_problem(otlp_endpoint, protocol)
            if problem is not None:
                raise ValueError(f"otlp_endpoint: {problem}")
        else:
            assert endpoint_variable is not None
            refused = _refused_variable(endpoint_variable, protocol)
            if refused is not None:  # fail closed: the OTLP branch is off, the local store is not
                otlp_from_env, protocol, protocol_source = False, None, None
    return AgentDiagOptions(
        enabled=enabled,
        service_name=service_name,
        store_path=store_path,
        otlp_endpoint=otlp_endpoint,
        otlp_from_env=otlp_from_env,
        otlp_protocol=protocol,
        otlp_protocol_source=protocol_source,
        capture_content=_capture_content(capture_content, store_path, enabled),
        metrics=enabled and _metrics(metrics),
        otlp_refused=refused,
    )


def _store_path(store: str | os.PathLike[str] | Literal[False] | None) -> Path | None:
    if store is False:
        return None
    if store is None:
        return default_store_path().absolute()
    return Path(store).absolute()


def _refused_variable(variable: str, protocol: str) -> str | None:
    """Why the endpoint in ``variable`` cannot be used with ``protocol`` (``configure()`` logs it), or None."""
    problem = otlp.endpoint_problem(os.environ[variable], protocol)
    return None if problem is None else f"{variable}: {problem}"


def _capture_content(argument: bool | None, store_path: Path | None, enabled: bool) -> bool:
    """Argument > ``AGENTDIAG_CAPTURE_CONTENT`` (only ``true`` is on) > off. Content needs the local store."""
    wanted = env.parse_capture_content(os.environ.get(env.AGENTDIAG_CAPTURE_CONTENT)) if argument is None else argument
    if wanted and enabled and store_path is None:
        _logger.warning("otel-agentdiag: content capture needs the local store (store=False); it stays off")
        return False
    return wanted and enabled


def _metrics(argument: bool | None) -> bool:
    """Argument > ``AGENTDIAG_METRICS`` > off (a malformed value is off, with a warning)."""
    if argument is not None:
        return argument
    return env.parse_bool(env.AGENTDIAG_METRICS, os.environ.get(env.AGENTDIAG_METRICS), default=False)


class BatchSettings(TypedDict):
    max_queue_spans: int
    max_export_batch: int
    schedule_delay_s: float


def batch_settings_from_env() -> BatchSettings:
    """The batch settings ``configure()`` gives each destination, from the SDK's standard variables
    (``OTEL_BSP_MAX_QUEUE_SIZE``, ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``, ``OTEL_BSP_SCHEDULE_DELAY`` in ms) over
    otel-agentdiag's defaults. A malformed value is ignored with a warning; a batch larger than the queue is
    lowered to the queue's size (the SDK raises there; a setting from the environment must not stop the agent).
    ``OTEL_BSP_EXPORT_TIMEOUT`` is not used: each exporter bounds its own export (the OTLP exporter's
    ``OTEL_EXPORTER_OTLP_TIMEOUT``, the store's busy timeout) and ``shutdown()`` has its own deadline."""

    def positive_int(variable: str, default: int) -> int:
        return env.parse_positive_int(variable, os.environ.get(variable), default=default)

    queue = positive_int(env.OTEL_BSP_MAX_QUEUE_SIZE, DEFAULT_MAX_QUEUE_SPANS)
    batch = positive_int(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, min(DEFAULT_MAX_EXPORT_BATCH, queue))
    if batch > queue:  # only a value the user set can be
        _logger.warning(
            "otel-agentdiag: %s is larger than the queue (%d spans); using %d",
            env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
            queue,
            queue,
        )
        batch = queue
    delay_ms = positive_int(env.OTEL_BSP_SCHEDULE_DELAY, round(DEFAULT_SCHEDULE_DELAY_S * 1000))
    return BatchSettings(max_queue_spans=queue, max_export_batch=batch, schedule_delay_s=delay_ms / 1000)


def resolve_prices(prices: str | os.PathLike[str] | bool | None) -> PriceTable | None:
    """The price table for ``configure(prices=...)``: argument > ``AGENTDIAG_PRICES`` > the bundled table; None
    when cost is off. A bad argument (a file that cannot be used) raises ``ValueError``; a bad variable logs one
    error line and the bundled table is used (:func:`otel_agentdiag.cost.resolve_table`)."""
    from otel_agentdiag.cost import resolve_table

    return resolve_table(prices, os.environ.get(env.AGENTDIAG_PRICES))


def resolve_budget(budget: Budget | None) -> Budget | None:
    """The budget for ``configure(budget=...)``: argument > ``AGENTDIAG_BUDGET_USD``/``AGENTDIAG_BUDGET_TOKENS`` >
    none. Not a :class:`~otel_agentdiag.cost.Budget`: ``ValueError``. A malformed variable is ignored, with a
    warning that names it."""
    from otel_agentdiag.cost import Budget

    if budget is not None:
        if not isinstance(budget, Budget):
            raise ValueError(f"budget must be an otel_agentdiag.Budget, not {type(budget).__name__}")
        return budget
    cost = _positive_number(env.AGENTDIAG_BUDGET_USD, integer=False)
    tokens = _positive_number(env.AGENTDIAG_BUDGET_TOKENS, integer=True)
    if cost is None and tokens is None:
        return None
    return Budget(max_cost_usd=cost, max_total_tokens=None if tokens is None else int(tokens))


def _positive_number(variable: str, *, integer: bool) -> float | None:
    value = os.environ.get(variable)
    if value is None or not value.strip():
        return None
    try:
        number = int(value.strip()) if integer else float(value.strip())
    except ValueError:
        number = 0
    if number > 0 and number != float("inf"):
        return number
    kind = "a positive integer" if integer else "a positive number"
    _logger.warning("otel-agentdiag: %s is not %s; no budget from it", variable, kind)
    return None
