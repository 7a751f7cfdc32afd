"""Contain otel-agentdiag's own failures so they never reach the agent."""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context as otel_context

from otel_agentdiag import environment_variables as env

_logger = logging.getLogger("otel_agentdiag")

_MAX_EXCEPTIONS = 4
"""Exceptions of a chain (``raise ... from``, or raised while handling another) whose frames are logged."""
_MAX_FRAMES = 40
"""Frames logged per exception: the innermost ones, where it was raised."""


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
    """Log an internal failure by step and exception type (never its message), instrumentation suppressed.

    With ``AGENTDIAG_DEBUG`` on, a second record at ``DEBUG`` gives where it was raised: the traceback's frames as
    file, line and function names, for the exception and the ones it was chained to (their types too). Never a
    message, a source line or a local variable: those may hold the data we protect."""
    token = otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        _logger.warning("otel-agentdiag: %s failed (%s); the agent is unaffected", what, type(exc).__name__)
        if _logger.isEnabledFor(logging.DEBUG) and env.parse_bool(
            env.AGENTDIAG_DEBUG, os.environ.get(env.AGENTDIAG_DEBUG), default=False
        ):
            _logger.debug("otel-agentdiag: %s failed (%s), raised at:\n%s", what, type(exc).__name__, _where(exc))
    finally:
        otel_context.detach(token)


def _where(exc: BaseException) -> str:
    """Where ``exc`` was raised, innermost frame last, then the exceptions it was chained to: file, line and
    function names and the types of the exceptions, nothing else (no message, no source text, no locals)."""
    lines: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _MAX_EXCEPTIONS:
        seen.add(id(current))
        walked = [(frame.f_code, line) for frame, line in traceback.walk_tb(current.__traceback__)]
        if len(walked) > _MAX_FRAMES:
            lines.append(f"  ... {len(walked) - _MAX_FRAMES} outer frames left out")
        lines += [
            f'  File "{code.co_filename}", line {line}, in {code.co_name}' for code, line in walked[-_MAX_FRAMES:]
        ]
        if current.__cause__ is not None:
            current = current.__cause__
            lines.append(f"caused by {type(current).__name__}:")
        elif current.__context__ is not None and not current.__suppress_context__:
            current = current.__context__
            lines.append(f"raised while handling {type(current).__name__}:")
        else:
            current = None
    return "\n".join(lines)
