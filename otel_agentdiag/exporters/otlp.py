"""Wiring for the OTLP branch (extra ``otlp``): http/protobuf by default, gRPC on request; imported lazily.

The protocol is chosen by the ``otlp_protocol`` argument, then ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, then
``OTEL_EXPORTER_OTLP_PROTOCOL``, then ``http/protobuf`` (the OpenTelemetry specification's default). Everything
else (headers, TLS files, ``_INSECURE`` for gRPC, compression, timeout, and the endpoint when no argument
names one) is left to the SDK exporter, which reads the standard ``OTEL_EXPORTER_OTLP_*`` variables itself.

Endpoint semantics follow the specification and the SDK exporters:

- **http/protobuf**: an argument or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is a base URL and gets ``/v1/traces``
  appended; ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is the full URL, used as it is.
- **grpc**: ``http://host:port`` (plaintext), ``https://host:port`` (TLS) or ``host:port`` (TLS unless
  ``OTEL_EXPORTER_OTLP_(TRACES_)INSECURE=true``); a path is ignored. The traces variable wins over the generic
  one, and neither gets a path appended.

**One attempt per call.** The pipeline's batch processor retries a failed batch itself, with backoff, counting
every attempt, and gives it up as ``export_failure`` after its last retry or at shutdown's deadline; so the
exporter it calls must make one attempt per ``export()`` and never sleep in a backoff of its own. The SDK's OTLP
exporters (1.34 and later) bound a whole ``export()``, retries included, by their ``timeout``, and retry only when
the backoff (1 s, less up to 20 % jitter) still fits in it: built with a timeout under 0.8 s
(:func:`one_attempt_timeout_s`), they make one attempt, and log it when it fails. The trade-off: one attempt
gets at most 0.75 s (or the configured timeout, when shorter), where the SDK alone would have allowed 10 s for
all of them. With SDK 1.27 to 1.33, the timeout bounds each request only and the SDK still retries a retryable
status code in place, in a sleep nothing interrupts: that call is one attempt to the batch processor, and
shutdown still returns by its deadline (it abandons the worker and counts its batch as ``shutdown`` drops).

Nothing here logs an endpoint or a header: either may carry credentials.
"""

from __future__ import annotations

import logging
import os
import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from opentelemetry.sdk.environment_variables import OTEL_EXPORTER_OTLP_TIMEOUT, OTEL_EXPORTER_OTLP_TRACES_TIMEOUT
from opentelemetry.sdk.trace.export import SpanExporter

from otel_agentdiag import environment_variables as env
from otel_agentdiag._internal.inputs import describe_input

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter

_logger = logging.getLogger(__name__)

_TRACES_PATH = "/v1/traces"
_METRICS_PATH = "/v1/metrics"

HTTP_PROTOBUF = "http/protobuf"
GRPC = "grpc"
HTTP_JSON = "http/json"
"""A standard value the Python SDK has no exporter for: it selects http/protobuf, with a warning."""
PROTOCOLS = (HTTP_PROTOBUF, GRPC)
"""The protocols this wiring can build an exporter for."""
DEFAULT_PROTOCOL = HTTP_PROTOBUF

INSTALL_HINT = (
    "OTLP export needs the 'otlp' extra (the OpenTelemetry OTLP exporter packages cannot be imported): "
    "pip install -e '.[otlp]' in a checkout of otel-agentdiag"
)
_HTTP_SCHEMES = ("http://", "https://")
_SDK_TIMEOUT_S = 10.0
"""The SDK exporters' default export timeout."""
ONE_ATTEMPT_S = 0.75
"""The longest timeout with which an SDK OTLP exporter never retries in place: under its shortest first backoff."""
_SAFE_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")


def traces_url(endpoint: str) -> str:
    """The traces URL for a base endpoint, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` is read (``/v1/traces`` appended)."""
    base = endpoint.rstrip("/")
    return base if base.endswith(_TRACES_PATH) else base + _TRACES_PATH


def endpoint_variable() -> str | None:
    """The variable that names the OTLP endpoint (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` wins over
    ``OTEL_EXPORTER_OTLP_ENDPOINT``; an empty one counts as unset), or None when neither does."""
    for variable in (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, env.OTEL_EXPORTER_OTLP_ENDPOINT):
        if os.environ.get(variable):
            return variable
    return None


def describe_endpoint(endpoint: str) -> str:
    """Where ``endpoint`` points, safe to print: ``[scheme://]host[:port]`` as written (a scheme only when it has
    one), never user info, path, query or fragment (any may hold a credential). ``<unparseable endpoint>`` when
    no host can be read."""
    text = endpoint.strip()
    scheme, separator, rest = text.partition("://")
    if not separator:
        scheme, rest = "", text
    try:
        parts = urlsplit("//" + rest)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "<unparseable endpoint>"
    if not host:
        return "<unparseable endpoint>"
    host = f"[{host}]" if ":" in host else host
    if not _SAFE_HOST.fullmatch(host):
        return "<unparseable endpoint>"
    where = f"{host}:{port}" if port is not None else host
    if scheme and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]{0,15}", scheme):
        return f"{scheme}://{where}"
    return where if not scheme else f"…://{where}"


def endpoint_problem(endpoint: str, protocol: str) -> str | None:
    """Why ``endpoint`` cannot be used with ``protocol``, in one line that says what to write instead; None when
    it can. http/protobuf needs an ``http://`` or ``https://`` URL (``localhost:4318`` alone would be read as a
    scheme and a path); gRPC takes ``http://``, ``https://`` or a bare ``host:port``. The line shows the
    endpoint's host and port only (:func:`describe_endpoint`)."""
    if protocol != HTTP_PROTOBUF or endpoint.strip().lower().startswith(_HTTP_SCHEMES):
        return None
    where = describe_endpoint(endpoint)
    if where.startswith("<"):
        return "the endpoint is not a URL; http/protobuf needs one like http://localhost:4318"
    bare = where.partition("://")[2] or where
    if "://" in where:
        return f"{where} is not an http:// or https:// URL; http/protobuf needs one, e.g. http://{bare}"
    return f"{where} has no scheme; http/protobuf needs http:// or https://, e.g. http://{bare}"


def exporter_importable(protocol: str) -> bool:
    """Whether the SDK exporter for ``protocol`` can be imported (the ``otlp`` extra is installed)."""
    try:
        if protocol == GRPC:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as _Grpc  # noqa: F401
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as _Http  # noqa: F401
    except ImportError:
        return False
    return True


def _normalise(value: str) -> str:
    return value.strip().lower()


def check_protocol(argument: str | None) -> str | None:
    """An ``otlp_protocol`` argument, normalised; ``None`` stays ``None``. Raises ``ValueError`` for a value
    that selects no exporter (``http/json`` included: the Python SDK has none)."""
    if argument is None:
        return None
    if not isinstance(argument, str):
        raise ValueError(f"otlp_protocol must be one of {', '.join(PROTOCOLS)}")
    protocol = _normalise(argument)
    if protocol == HTTP_JSON:
        raise ValueError(
            "otlp_protocol 'http/json' is not supported by the OpenTelemetry Python SDK; use 'http/protobuf'"
        )
    if protocol not in PROTOCOLS:
        raise ValueError(f"otlp_protocol must be one of {', '.join(PROTOCOLS)}, not {describe_input(argument)}")
    return protocol


def resolve_protocol(argument: str | None = None) -> tuple[str, str]:
    """The OTLP protocol and where it came from: argument > ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` >
    ``OTEL_EXPORTER_OTLP_PROTOCOL`` > ``http/protobuf``.

    A bad argument raises ``ValueError`` (see :func:`check_protocol`). The first variable that is set (not
    empty) decides; a value it cannot use (``http/json``, or unknown) logs a warning and selects http/protobuf.
    """
    checked = check_protocol(argument)
    if checked is not None:
        return checked, "argument"
    for variable in (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, env.OTEL_EXPORTER_OTLP_PROTOCOL):
        raw = os.environ.get(variable)
        if raw is None or not raw.strip():
            continue
        value = _normalise(raw)
        if value in PROTOCOLS:
            return value, variable
        if value == HTTP_JSON:
            _logger.warning(
                "otel-agentdiag: %s=http/json is not supported by the OpenTelemetry Python SDK; using %s",
                variable,
                DEFAULT_PROTOCOL,
            )
        else:
            _logger.warning(
                "otel-agentdiag: %s is not one of %s; using %s", variable, ", ".join(PROTOCOLS), DEFAULT_PROTOCOL
            )
        return DEFAULT_PROTOCOL, f"{variable} (unusable; {DEFAULT_PROTOCOL} used)"
    return DEFAULT_PROTOCOL, "default"


def export_timeout_s() -> float:
    """The OTLP export timeout as the SDK exporters read it: seconds, ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` over
    ``OTEL_EXPORTER_OTLP_TIMEOUT`` over 10 s (a value that is not a positive number is passed over)."""
    for variable in (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, OTEL_EXPORTER_OTLP_TIMEOUT):
        raw = os.environ.get(variable)
        if raw:
            try:
                value = float(raw)
            except ValueError:
                continue
            if value > 0:
                return value
    return _SDK_TIMEOUT_S


def one_attempt_timeout_s() -> float:
    """The timeout the OTLP branch builds its exporter with: one attempt per call (see the module doc), within the
    configured timeout."""
    return min(export_timeout_s(), ONE_ATTEMPT_S)


def otlp_span_exporter(
    endpoint: str | None, protocol: str = DEFAULT_PROTOCOL, *, timeout: float | None = None
) -> SpanExporter:
    """An OTLP span exporter for ``protocol`` (``http/protobuf`` or ``grpc``).

    ``endpoint=None`` leaves every setting, the endpoint included, to the ``OTEL_EXPORTER_OTLP_*`` environment
    variables as the SDK exporter reads them. A given ``endpoint`` is a base URL for http/protobuf
    (``/v1/traces`` appended unless present) and a ``[http[s]://]host:port`` target for gRPC; headers, TLS,
    compression and (unless ``timeout`` gives one, in seconds) the timeout still come from the environment.
    Raises ``ValueError`` for an unknown protocol and ``ImportError`` with an install hint when the extra is
    missing.
    """
    if protocol == GRPC:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
        except ImportError as exc:
            raise ImportError(INSTALL_HINT) from exc
        _logger.debug("otel-agentdiag: OTLP branch exports over gRPC")
        return GrpcSpanExporter(endpoint=endpoint, timeout=timeout)
    if protocol != HTTP_PROTOBUF:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {describe_input(protocol)}")
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    _logger.debug("otel-agentdiag: OTLP branch exports over http/protobuf")
    return OTLPSpanExporter(endpoint=None if endpoint is None else traces_url(endpoint), timeout=timeout)


WORKER_THREAD = "AgentDiagBatchSpanProcessor"
"""The name of the batch processors' worker thread (:mod:`otel_agentdiag.pipeline.worker`): the one that exports."""
_SDK_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
)
"""Where the SDK's OTLP span exporters (1.27 to 1.45) log a failed or retried export."""


class _CountedByTheWorker(logging.Filter):
    """Drops what the SDK exporter logs about an export our worker made: the worker counts every failed attempt,
    retries it itself and says what was lost in one summary line (``export_failure``), so the SDK's line per
    attempt is noise (and may quote a collector's reply). Keyed on the thread, never on the SDK's wording; the
    SDK's control flow is untouched. With ``AGENTDIAG_DEBUG=1`` the lines pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != WORKER_THREAD or env.parse_bool(
            env.AGENTDIAG_DEBUG, os.environ.get(env.AGENTDIAG_DEBUG), default=False
        )


_COUNTED = _CountedByTheWorker()


def quiet_worker_attempts() -> None:
    """Install :class:`_CountedByTheWorker` on the SDK exporters' loggers (once; other threads' lines pass)."""
    for name in _SDK_EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        if _COUNTED not in logger.filters:
            logger.addFilter(_COUNTED)


def metrics_url(endpoint: str) -> str:
    """The metrics URL beside a traces endpoint (http/protobuf): a base URL, or a ``/v1/traces`` URL, gets
    ``/v1/metrics`` in place of its traces path."""
    base = endpoint.rstrip("/")
    if base.endswith(_TRACES_PATH):
        base = base[: -len(_TRACES_PATH)]
    return base if base.endswith(_METRICS_PATH) else base + _METRICS_PATH


def _metrics_endpoint(endpoint: str | None, protocol: str) -> str | None:
    """Where metrics go beside the trace branch: the trace branch's endpoint argument; else the SDK's own variables
    (``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``, ``OTEL_EXPORTER_OTLP_ENDPOINT``: None, the exporter reads them); else
    the one ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` names, which the metric exporter would not read."""
    if endpoint is None:
        if os.environ.get(env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT) or os.environ.get(env.OTEL_EXPORTER_OTLP_ENDPOINT):
            return None
        endpoint = os.environ.get(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or None
        if endpoint is None:
            return None
    return endpoint if protocol == GRPC else metrics_url(endpoint)


def otlp_metric_exporter(endpoint: str | None, protocol: str = DEFAULT_PROTOCOL) -> MetricExporter:
    """An OTLP metric exporter beside the trace branch: the same protocol, and the same collector (see
    :func:`_metrics_endpoint`); headers, TLS, compression and timeout from the ``OTEL_EXPORTER_OTLP_*``
    variables, as for traces. Raises ``ImportError`` with an install hint when the extra is missing."""
    target = _metrics_endpoint(endpoint, protocol)
    if protocol == GRPC:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as Grpc
        except ImportError as exc:
            raise ImportError(INSTALL_HINT) from exc
        return Grpc() if target is None else Grpc(endpoint=target)
    if protocol != HTTP_PROTOBUF:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {describe_input(protocol)}")
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as Http
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return Http() if target is None else Http(endpoint=target)
