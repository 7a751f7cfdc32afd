"""Push stored spans to an OTLP endpoint: the strict-policy projection, in batches, each span delivered once.

:func:`push_spans` reads the selected spans that are not yet marked as pushed to the endpoint, re-validates each
page under the strict policy (:func:`~otel_agentdiag.diagnostics.projection.strict_projection`, with the store's
hash key so stored digests go out unchanged), hands the surviving spans to a standard OpenTelemetry SDK OTLP
exporter (which encodes them itself), and marks a page's spans in the store only after the exporter returned
``SUCCESS`` for it. Every push re-validates every row it sends: nothing from an earlier push is trusted. One batch
is in flight while the next page is read and re-validated (the exporter runs on a sender thread, so the collector's
time overlaps ours); a batch is sent only after the one before it was delivered and marked, so order, marks and
the stop at the first failure are those of one batch at a time. The first batch the exporter does not take
stops the push: batches delivered before stay marked, nothing of the failed batch or after it is marked, so the
next push sends exactly those.

A row that fails re-validation is never sent and never marked: every push counts it again as omitted.

Marks are keyed by :func:`endpoint_key`, a SHA-256 digest of the endpoint's normalised form (protocol, scheme
for http, host, port, and path for http/protobuf). User info, query and fragment are not part of it, and the URL
itself is never stored: it may carry credentials. Headers (a tenant header, say) are not part of the key either:
two tenants behind one URL share its marks.

A gRPC endpoint chooses plaintext or TLS (:func:`grpc_plaintext`): ``http://host:port`` plaintext,
``https://host:port`` TLS, and a bare ``host:port`` plaintext when the host is a loopback address
(``localhost``, ``127.0.0.0/8``, ``::1``: a local collector is plaintext) and TLS otherwise, unless
``OTEL_EXPORTER_OTLP_(TRACES_)INSECURE`` is set, which then decides as the SDK exporter reads it.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from hashlib import sha256
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_INSECURE,
    OTEL_EXPORTER_OTLP_TIMEOUT,
    OTEL_EXPORTER_OTLP_TRACES_INSECURE,
    OTEL_EXPORTER_OTLP_TRACES_TIMEOUT,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_agentdiag._internal.inputs import describe_input
from otel_agentdiag.diagnostics.projection import Projection, names_registry, project_row, row_names
from otel_agentdiag.exporters.otlp import GRPC, HTTP_PROTOBUF, otlp_span_exporter, traces_url
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher, ephemeral_key
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.redaction.processor import SpanRedactor
from otel_agentdiag.storage import SpanStore, StoredSpan

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_TIMEOUT_S",
    "PushResult",
    "effective_timeout",
    "endpoint_key",
    "grpc_plaintext",
    "is_loopback_host",
    "push_exporter",
    "push_spans",
]

_logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 512
"""Spans per export request (the SDK's ``BatchSpanProcessor`` default ``max_export_batch_size``)."""
DEFAULT_TIMEOUT_S = 10.0
"""The SDK exporters' own default deadline per export, retries included."""
_DEFAULT_PORTS = {"http": 80, "https": 443}
_INSTALL_HINT = "push needs the OTLP exporters: pip install -e '.[otlp]' in a checkout of otel-agentdiag"


def endpoint_key(endpoint: str, protocol: str) -> str:
    """``sha256:<hex>`` of the endpoint's normalised form, the key of its push marks.

    http/protobuf: ``http/protobuf <scheme>://<host>:<port><traces path>`` (the URL the exporter posts to, with
    ``/v1/traces`` appended as for an argument, the default port made explicit). gRPC: ``grpc <host>:<port>``
    (a path is ignored by gRPC; ``http://`` and ``https://`` choose plaintext or TLS to the same receiver).
    Host names are lower-cased; user info is dropped (an http/protobuf URL may carry it: the exporter sends it as
    basic auth). Raises ``ValueError`` for an endpoint the exporter would misread: one that names no host, has
    a bad port, an http/protobuf URL with a query or fragment (``/v1/traces`` would be appended after it), a
    gRPC target with user info; and for an unknown protocol. The message never repeats the endpoint.
    """
    try:
        return _endpoint_key(endpoint, protocol)
    except _Unusable:
        raise
    except ValueError:
        # urllib's own messages can quote the URL (an IPv6 address it cannot read, say): say what, not which.
        raise _Unusable("the endpoint is not a URL the exporter can read (its host or port)") from None


class _Unusable(ValueError):
    """Why an endpoint cannot be used, in words of our own that never quote it."""


def _endpoint_key(endpoint: str, protocol: str) -> str:
    text = endpoint.strip()
    if protocol == HTTP_PROTOBUF:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            raise _Unusable("an http/protobuf endpoint must be an http:// or https:// URL")
        if parts.query or parts.fragment or text.endswith(("?", "#")):
            raise _Unusable(
                "an OTLP/HTTP base URL takes no query or fragment (send tokens as headers: "
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS)"
            )
        path = urlsplit(traces_url(text)).path
    elif protocol == GRPC:
        parts = urlsplit(text if "://" in text else "grpc://" + text)
        scheme = parts.scheme.lower()
        if scheme not in ("grpc", *_DEFAULT_PORTS):
            raise _Unusable("a gRPC endpoint must be host:port, http://host:port or https://host:port")
        if "@" in parts.netloc:
            raise _Unusable(
                "a gRPC endpoint takes no user info (send credentials as headers: OTEL_EXPORTER_OTLP_TRACES_HEADERS)"
            )
        path = ""
    else:
        raise _Unusable(f"protocol must be one of {HTTP_PROTOBUF}, {GRPC}, not {describe_input(protocol)}")
    host = parts.hostname  # lower-cased, without user info or brackets
    if not host:
        raise _Unusable("the endpoint names no host")
    try:
        port = parts.port  # raises ValueError for a port that is not a number in range (quoting it)
    except ValueError:
        raise _Unusable("the endpoint's port is not a number from 0 to 65535") from None
    if port is None:
        port = _DEFAULT_PORTS.get(scheme, 4317)
    if ":" in host:
        host = f"[{host}]"
    normalised = f"{protocol} {host}:{port}" if protocol == GRPC else f"{protocol} {scheme}://{host}:{port}{path}"
    return "sha256:" + sha256(normalised.encode()).hexdigest()


def effective_timeout(timeout: float | None) -> float:
    """The deadline (seconds) the SDK exporter will use: ``timeout``, else ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``,
    else ``OTEL_EXPORTER_OTLP_TIMEOUT``, else 10 (what the exporters read; for messages)."""
    if timeout is not None:
        return timeout
    for variable in (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, OTEL_EXPORTER_OTLP_TIMEOUT):
        raw = os.environ.get(variable)
        if raw:
            try:
                return float(raw)
            except ValueError:
                break
    return DEFAULT_TIMEOUT_S


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine's loopback:
    ``localhost``, an address in ``127.0.0.0/8`` or ``::1``. Any other name is not (no name is resolved)."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def grpc_plaintext(endpoint: str) -> bool:
    """Whether a push over gRPC to ``endpoint`` talks plaintext (True) or TLS (False).

    ``http://host:port`` plaintext, ``https://host:port`` TLS; a bare ``host:port`` plaintext when the host is a
    loopback address (:func:`is_loopback_host`) and TLS otherwise. When ``OTEL_EXPORTER_OTLP_TRACES_INSECURE``
    or ``OTEL_EXPORTER_OTLP_INSECURE`` is set, it decides for anything but ``https://`` (``true``: plaintext), as
    the SDK exporter reads it. Never raises: an endpoint it cannot read is TLS.
    """
    text = endpoint.strip()
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme == "https":
        return False
    for variable in (OTEL_EXPORTER_OTLP_TRACES_INSECURE, OTEL_EXPORTER_OTLP_INSECURE):
        value = os.environ.get(variable)
        if value is not None:
            return value.strip().lower() == "true"
    if scheme:
        return scheme == "http"
    try:
        host = urlsplit("grpc://" + text).hostname
    except ValueError:
        return False
    return host is not None and is_loopback_host(host)


def _bare_loopback(endpoint: str) -> bool:
    """A bare ``host:port`` that :func:`grpc_plaintext` makes plaintext where the SDK exporter would use TLS."""
    return "://" not in endpoint and grpc_plaintext(endpoint)


def push_exporter(endpoint: str, protocol: str, *, timeout: float | None = None) -> SpanExporter:
    """The standard SDK OTLP span exporter for ``endpoint`` over ``protocol``.

    ``timeout=None`` is :func:`~otel_agentdiag.exporters.otlp.otlp_span_exporter` with the SDK's own deadline
    (``OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT``, else 10 s). A ``timeout`` (seconds, > 0) is
    passed to the exporter's constructor, with the same endpoint semantics: it bounds one export, the SDK's
    retries with backoff included, so a collector that is down fails the push within about that long.
    Headers, TLS and compression come from the ``OTEL_EXPORTER_OTLP_*`` variables either way, except that a bare
    gRPC ``host:port`` on a loopback host is plaintext (:func:`grpc_plaintext`). Raises ``ValueError`` for a bad
    protocol or timeout and ``ImportError`` (with an install hint) without the extra.
    """
    plaintext = protocol == GRPC and _bare_loopback(endpoint)
    if timeout is None and not plaintext:
        return otlp_span_exporter(endpoint, protocol)  # raises ValueError, ImportError
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise ValueError("timeout must be a positive number of seconds")
    try:
        if protocol == GRPC:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter

            return GrpcSpanExporter(endpoint=endpoint, timeout=timeout, insecure=True if plaintext else None)
        if protocol == HTTP_PROTOBUF:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            return OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=timeout)
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    raise ValueError(f"protocol must be one of {HTTP_PROTOBUF}, {GRPC}, not {describe_input(protocol)}")


@dataclass
class PushResult:
    """What one push did. ``pushed + omitted + not_pushed == selected`` unless spans were stored meanwhile."""

    selected: int = 0
    """Spans the selection held that were not marked as pushed to the endpoint when the push started."""
    already_pushed: int = 0
    """Spans the selection held that an earlier push delivered (skipped)."""
    pushed: int = 0
    """Spans delivered now (the exporter returned SUCCESS for their batch) and marked."""
    omitted: int = 0
    """Rows that failed re-validation under the strict policy: never sent, never marked."""
    omitted_reasons: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    """Export requests the endpoint accepted."""
    failed_batch: int | None = None
    """The 1-based number of the batch that failed (None: no failure)."""
    not_pushed: int = 0
    """Spans left unmarked by a failure: the failed batch and everything after it."""
    error: str | None = None
    """Why the push stopped (no endpoint or credentials in it), or None."""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def spans_per_second(self) -> float:
        return self.pushed / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "pushed": self.pushed,
            "already_pushed": self.already_pushed,
            "omitted": self.omitted,
            "omitted_reasons": dict(sorted(self.omitted_reasons.items())),
            "selected": self.selected,
            "batches": self.batches,
            "failed_batch": self.failed_batch,
            "not_pushed": self.not_pushed,
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "spans_per_second": round(self.spans_per_second, 1),
        }


@dataclass
class _Batch:
    """One page made ready to send: its rows, the spans that go out with the stored ids of their rows (the marks
    written once the batch is delivered), and what re-validation left out."""

    rows: list[StoredSpan]
    spans: list[ReadableSpan]
    marks: list[tuple[str, str]]
    omitted: int
    reasons: dict[str, int]
    number: int = 0
    sent: Future[str | None] | None = None


class _Rebuild:
    """One page through the reference path: the strict projection of its rows, then ``policy`` when it is not
    the strict preset (it can only remove more)."""

    def __init__(self, hasher: IdHasher | None, policy: Policy) -> None:
        self.hasher = hasher or IdHasher(ephemeral_key(), algorithm=STRICT.hash_function)
        self.second_hasher = hasher or IdHasher(ephemeral_key(), algorithm=policy.hash_function)
        self.policy = policy
        self._names: frozenset[tuple[str, str]] | None = None
        self._redactors: tuple[SpanRedactor, SpanRedactor | None] | None = None

    def _redactors_for(self, rows: list[StoredSpan]) -> tuple[SpanRedactor, SpanRedactor | None]:
        """The redactors of a page: new ones when its names differ from the page before (a redactor depends only
        on its policy, key and name registry, and pages of one agent's runs carry the same names, so its
        remembered verdicts carry over)."""
        names = frozenset().union(*map(row_names, rows))
        if self._redactors is None or names != self._names:
            registry = names_registry(names)
            second = None if self.policy is STRICT else SpanRedactor(self.policy, self.second_hasher, registry)
            self._names, self._redactors = names, (SpanRedactor(STRICT, self.hasher, registry), second)
        return self._redactors

    def __call__(self, rows: list[StoredSpan]) -> _Batch:
        # Always the strict preset, whatever policy wrote the rows or the agent's OTLP branch uses: what is stored
        # is re-validated, not trusted (a row may have been written by a looser policy, an import, or by hand).
        # Row by row as strict_projection does, keeping which row each span came from (its mark).
        redactor, second = self._redactors_for(rows)
        projection = Projection(spans=[])
        shared: dict[Any, Any] = {}
        marks = []
        for row in rows:
            clean = project_row(row, redactor, shared, projection)
            if clean is not None:
                projection.spans.append(clean)
                marks.append((row.trace_id, row.span_id))
        spans = projection.spans
        if second is not None:
            spans = [second.redact(span) for span in spans]
        return _Batch(rows, spans, marks, projection.omitted, projection.omitted_reasons)


def _send(exporter: SpanExporter, spans: Sequence[ReadableSpan]) -> str | None:
    """Export one batch (on the sender thread); why it failed, or None."""
    try:
        outcome = exporter.export(spans)
        return None if outcome is SpanExportResult.SUCCESS else "the exporter reported a failure"
    except Exception as exc:  # noqa: BLE001 - an exporter that raises is a failed batch, not a crash
        return f"the exporter raised {type(exc).__name__}"


def _finish(
    batch: _Batch, store: SpanStore, endpoint: str, result: PushResult, on_batch: Callable[[int], None] | None
) -> bool:
    """Wait for the batch in flight; mark it when it was delivered (True), or record the failure (False)."""
    assert batch.sent is not None
    problem = batch.sent.result()
    if problem is not None:
        result.failed_batch = batch.number
        result.error = problem
        result.not_pushed = max(result.selected - result.pushed - result.omitted, 0)
        return False
    store.mark_pushed(endpoint, batch.marks)
    result.pushed += len(batch.spans)
    result.batches += 1
    if on_batch is not None:
        on_batch(len(batch.rows))
    return True


def push_spans(
    store: SpanStore,
    exporter: SpanExporter,
    *,
    endpoint: str,
    hasher: IdHasher | None,
    sessions: Sequence[str] | None = None,
    since_ns: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_batch: Callable[[int], None] | None = None,
    policy: Policy = STRICT,
) -> PushResult:
    """Push the selected, not yet pushed spans of ``store`` through ``exporter``; see the module docstring.

    ``endpoint`` is the mark key (:func:`endpoint_key`). ``sessions`` (stored session digests; None: every span,
    those outside any session included) and ``since_ns`` (spans that started at or after it) select.
    ``on_batch(rows)`` is called after each page with the number of rows it held. Every row is re-validated
    under the strict preset whatever wrote it; a ``policy`` other than the strict preset is applied after it and
    can only remove more (it cannot let out what the strict preset drops). The exporter is not shut
    down here. An export that fails (or raises) stops the push and is reported in the result, never raised. A
    store error while reading or marking propagates (``sqlite3.Error`` or ``StoreError``); marks written
    before it stay.
    """
    started = time.perf_counter()
    result = PushResult()
    result.selected, result.already_pushed = store.push_backlog(endpoint, sessions=sessions, since_ns=since_ns)
    number = 0
    rebuild = _Rebuild(hasher, policy)
    pending: _Batch | None = None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentdiag-push") as sender:
        for rows in store.unpushed_spans(endpoint, sessions=sessions, since_ns=since_ns, batch_size=batch_size):
            try:
                batch = rebuild(rows)
            except BaseException:
                if pending is not None:  # what is in flight is still delivered and marked before the error
                    _finish(pending, store, endpoint, result, on_batch)
                raise
            if pending is not None and not _finish(pending, store, endpoint, result, on_batch):
                break
            pending = None
            number += 1
            result.omitted += batch.omitted
            for reason, n in batch.reasons.items():
                result.omitted_reasons[reason] = result.omitted_reasons.get(reason, 0) + n
            if batch.spans:
                batch.number = number
                batch.sent = sender.submit(_send, exporter, batch.spans)
                pending = batch
            elif on_batch is not None:
                on_batch(len(batch.rows))
        if pending is not None:
            _finish(pending, store, endpoint, result, on_batch)
    result.seconds = time.perf_counter() - started
    _logger.debug("otel-agentdiag: push %s", result.as_dict())
    return result
