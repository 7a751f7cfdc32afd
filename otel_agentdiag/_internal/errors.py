"""Contain otel-agentdiag's own failures so they never reach the agent."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context as otel_context

_logger = logging.getLogger("otel_agentdiag")


@contextmanager
def handle_internal_errors(what: str) -> Iterator[None]:
    """Log and swallow an exception raised by otel-agentdiag itself.

    Only for telemetry code: never wrap the user's own code in this. The log record names the failing step
    and the exception type, never the message (which may carry the data we are protecting).
    """
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
        log_internal_error(what, exc)


def log_internal_error(what: str, exc: BaseException) -> None:
    """Log an internal failure by step and exception type (never its message), instrumentation suppressed."""
    token = otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        _logger.warning("otel-agentdiag: %s failed (%s); the agent is unaffected", what, type(exc).__name__)
    finally:
        otel_context.detach(token)
