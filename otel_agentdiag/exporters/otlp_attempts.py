"""One SDK attempt per call: the OTLP exporter's retries become the batch processor's, counted and quiet.

The SDK's OTLP span exporters (http/protobuf and gRPC, 1.27 and later) retry a transient failure in place: they
log ``Transient error ... retrying in N s`` on their module's logger, sleep, and try again, for up to their export
timeout (10 s by default). Our batch processor then saw one failed call, however many attempts it hid, and a dead
collector filled stderr with one line per retry and held up shutdown for the whole backoff.

:class:`OneAttempt` turns that around. While the batch processor's worker is inside ``call``, a logging filter on
the SDK exporters' loggers (active on that thread only: anyone else's exporter is untouched) takes the retry
announcement, keeps the delay it names, keeps the line off the log, and stops the SDK before it sleeps, by
raising through it. The batch processor then waits that delay itself, in a wait a shutdown deadline cuts short,
retries while the SDK's own export timeout allows, counts every attempt, and logs one summary line if the batch
is lost.

This relies only on what every SDK version since 1.27 does: announce a retry on a ``WARNING`` record whose message
starts with ``Transient error``, with the delay as its last numeric argument, before it sleeps. If a version
words it differently, or the exporter's logger is set above ``WARNING``, the SDK retries in place as it always
did and the call counts as one attempt. (In 1.45 the http transport reconnects once at once after a refused
connection, inside one attempt; it is not announced and not counted separately.)
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from opentelemetry.sdk.environment_variables import OTEL_EXPORTER_OTLP_TIMEOUT, OTEL_EXPORTER_OTLP_TRACES_TIMEOUT
from opentelemetry.sdk.trace.export import SpanExportResult

_logger = logging.getLogger(__name__)

__all__ = ["SDK_EXPORTER_LOGGERS", "OneAttempt"]

SDK_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
)
"""The loggers the SDK's OTLP span exporters announce their retries on, across versions."""

_ANNOUNCEMENT = "Transient error"
_DEFAULT_TIMEOUT_S = 10.0
_MAX_ATTEMPTS = 6
"""As the SDK's own loop (``_MAX_RETRYS``/``_MAX_RETRIES``)."""


class _RetryAnnounced(Exception):
    """Raised through the SDK exporter by the filter: it asked to retry after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        super().__init__(delay)
        self.delay = delay


_active = threading.local()
"""``_active.on``: whether this thread is inside :meth:`OneAttempt.call`."""


class _StopAtRetry(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(_active, "on", False):
            return True
        if not (isinstance(record.msg, str) and record.msg.startswith(_ANNOUNCEMENT)):
            return True
        _active.on = False  # once per call, whatever happens next
        raise _RetryAnnounced(_delay(record.args))


def _delay(args: object) -> float:
    """The delay a retry announcement names: its last numeric argument (1 s if it has none)."""
    values = args if isinstance(args, tuple) else ()
    for value in reversed(values):
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value)
    return 1.0


_filter = _StopAtRetry()
_installed = False
_install_lock = threading.Lock()


def _install_filter() -> None:
    global _installed
    with _install_lock:
        if not _installed:
            for name in SDK_EXPORTER_LOGGERS:
                logging.getLogger(name).addFilter(_filter)
            _installed = True


def _export_timeout_s() -> float:
    """The SDK exporter's own export timeout, read as it reads it: seconds, the traces variable first."""
    for variable in (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, OTEL_EXPORTER_OTLP_TIMEOUT):
        raw = os.environ.get(variable)
        if raw:
            try:
                value = float(raw)
            except ValueError:
                continue
            if value > 0:
                return value
    return _DEFAULT_TIMEOUT_S


class OneAttempt:
    """Call an SDK OTLP exporter for one attempt at a time (see the module doc); the batch processor retries.

    ``budget_s``: how long a batch may keep being retried from its first attempt (default: the SDK exporter's own
    timeout, ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``/``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s). ``max_attempts``: as the
    SDK's own loop.
    """

    def __init__(self, budget_s: float | None = None, max_attempts: int = _MAX_ATTEMPTS) -> None:
        self.budget_s = _export_timeout_s() if budget_s is None else budget_s
        self.max_attempts = max_attempts
        _install_filter()

    def call(self, export: Callable[[], SpanExportResult]) -> tuple[bool, float | None]:
        """Call ``export`` once: whether it succeeded, and the delay the exporter asked for before a retry (None:
        it would not retry). Raises what ``export`` raises, but never the retry signal."""
        _active.on = True
        try:
            return export() is SpanExportResult.SUCCESS, None
        except _RetryAnnounced as announced:
            return False, announced.delay
        finally:
            _active.on = False
