"""``agentdiag push``: send stored spans to an OTLP endpoint (a team's Collector), each span once.

What leaves is the strict-policy projection (:mod:`otel_agentdiag.diagnostics.projection`), through the standard
OpenTelemetry SDK exporter; see :mod:`otel_agentdiag.diagnostics.push` for batching and push marks.

Exit codes: 0 every selected span was pushed (or there was nothing new), 1 the endpoint did not take a batch
(batches before it stay marked, nothing of it or after it is), 2 a usage error (bad option, no store).
The endpoint is shown without user info, query or fragment; the SDK exporter's own log lines (which can name
the URL) are held back and only a status code or gRPC status name from them is shown, or that the TLS handshake
failed, with the plaintext ``http://host:port`` to write instead.
"""

from __future__ import annotations

import json
import logging
import math
import re
import ssl
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from otel_agentdiag.cli._common import (
    CliError,
    describe_input,
    format_option,
    open_store,
    resolve_store_path,
    safe_url,
    store_option,
)
from otel_agentdiag.cli._duration import Duration, format_duration
from otel_agentdiag.cli._sessions import resolve_session
from otel_agentdiag.cli.health import parse_as_of
from otel_agentdiag.diagnostics.projection import load_store_hasher
from otel_agentdiag.diagnostics.push import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_TIMEOUT_S,
    PushResult,
    effective_timeout,
    endpoint_key,
    push_exporter,
    push_spans,
)
from otel_agentdiag.exporters.otlp import GRPC, resolve_protocol, traces_url
from otel_agentdiag.storage import SpanStore

EXIT_PUSH_FAILED = 1
_UNIX_SECONDS = re.compile(r"[0-9]+(\.[0-9]+)?")
_EXPORTER_LOGGERS = ("opentelemetry.exporter", "urllib3", "requests", "grpc")
_TLS_FAILURE = re.compile(r"(?i)(?:tls|ssl) handshake failed|SSL_ERROR_|WRONG_VERSION_NUMBER|TSI_PROTOCOL_FAILURE")
"""What gRPC's error details say when a TLS handshake failed (matched, never shown: they name the endpoint)."""


def parse_since(text: str) -> int:
    """``--since``: an ISO-8601 time with a timezone, or a number of seconds since the Unix epoch; nanoseconds."""
    raw = text.strip()
    if _UNIX_SECONDS.fullmatch(raw):
        seconds = float(raw)
        if not math.isfinite(seconds):
            raise ValueError(f"{describe_input(text)} is not a time")
        whole, _, fraction = raw.partition(".")
        return int(whole) * 1_000_000_000 + int((fraction + "000000000")[:9])
    try:
        return parse_as_of(raw)
    except ValueError as exc:
        raise ValueError(f"{exc}; or give seconds since the Unix epoch, e.g. 1738324800") from None


def display_endpoint(endpoint: str, protocol: str) -> str:
    """Where the spans go, as the exporter will address it: :func:`~otel_agentdiag.cli._common.safe_url`
    (no user info, query, fragment, or path segment that is not a short word)."""
    text = endpoint.strip()
    bare = protocol == GRPC and "://" not in text
    url = ("grpc://" + text) if bare else text if protocol == GRPC else traces_url(text)
    shown = safe_url(url)
    if protocol == GRPC:  # the exporter uses host and port only
        scheme, rest = shown.split("://", 1)
        shown = rest.split("/", 1)[0] if bare else f"{scheme}://{rest.split('/', 1)[0]}"
    return shown


class _ExporterLog(logging.Handler):
    """Holds the SDK exporter's log records back (they can name the endpoint URL, query and all); keeps only what
    is safe to show: an HTTP status code, a gRPC status name, the class name of a transport error."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.status: str | None = None
        self.error: str | None = None
        self.tls_failed = False

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        for arg in args:
            if _is_tls_failure(arg):
                self.tls_failed = True
            if isinstance(arg, int) and not isinstance(arg, bool) and 100 <= arg <= 599:
                self.status = f"HTTP {arg}"
            elif type(arg).__name__ == "StatusCode" and isinstance(name := getattr(arg, "name", None), str):
                self.status = f"gRPC {name}"
            elif isinstance(arg, BaseException):
                self.error = type(arg).__name__

    @property
    def hint(self) -> str | None:
        return self.status or self.error


def _is_tls_failure(arg: object) -> bool:
    """Whether a log argument of the SDK exporter says a TLS handshake failed: gRPC's error details, or an
    ``SSLError`` (the ssl module's, or a transport's of that name) as the error or anywhere in its causes."""
    if isinstance(arg, str):
        return _TLS_FAILURE.search(arg) is not None
    seen = 0
    error = arg if isinstance(arg, BaseException) else None
    while error is not None and seen < 8:
        if isinstance(error, ssl.SSLError) or any(cls.__name__ == "SSLError" for cls in type(error).__mro__):
            return True
        reason = getattr(error, "reason", None)  # urllib3's MaxRetryError carries the SSLError as its reason
        error = reason if isinstance(reason, BaseException) else (error.__cause__ or error.__context__)
        seen += 1
    return False


def plaintext_endpoint(where: str) -> str:
    """``http://host:port`` for a displayed endpoint (``host:port`` or ``scheme://host:port/...``, already
    without user info, query or fragment): what to write for a plaintext collector at the same address."""
    rest = where.split("://", 1)[1] if "://" in where else where
    return "http://" + rest.split("/", 1)[0]


@contextmanager
def _held_exporter_log() -> Iterator[_ExporterLog]:
    handler = _ExporterLog()
    saved = []
    for name in _EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.propagate))
        logger.addHandler(handler)
        logger.propagate = False
    try:
        yield handler
    finally:
        for logger, propagate in saved:
            logger.removeHandler(handler)
            logger.propagate = propagate


def _summary(result: PushResult, where: str, protocol: str) -> str:
    omitted = f"{result.omitted} omitted by re-validation"
    if result.omitted_reasons:
        omitted += " (" + ", ".join(f"{k} {v}" for k, v in sorted(result.omitted_reasons.items())) + ")"
    return (
        f"pushed {result.pushed} new span{'' if result.pushed == 1 else 's'} to {where} ({protocol}) in "
        f"{result.seconds:.2f} s ({result.spans_per_second:.0f} spans/s); {result.already_pushed} already pushed "
        f"(skipped); {omitted}"
    )


def _failure(
    result: PushResult, where: str, protocol: str, hint: str | None, timeout: float, tls_failed: bool = False
) -> str:
    if tls_failed:
        cause = f"the TLS handshake failed; for a plaintext collector write --endpoint {plaintext_endpoint(where)}"
    else:
        cause = hint or "no connection or no answer"
        if hint is None or not hint.startswith("HTTP 4"):
            cause += f"; the exporter gave up within its {timeout:g} s timeout, retries included"
    kept = (
        f"{result.pushed} span{'' if result.pushed == 1 else 's'} of earlier batches were pushed and stay marked"
        if result.pushed
        else "nothing was pushed"
    )
    return (
        f"push to {where} ({protocol}) failed at batch {result.failed_batch}: the endpoint did not take it "
        f"({cause}); {kept}; "
        f"{result.not_pushed} span{'' if result.not_pushed == 1 else 's'} not marked (the next push sends them)"
    )


@click.command()
@click.option(
    "--endpoint",
    required=True,
    metavar="URL",
    help="OTLP endpoint. http/protobuf: a base URL (/v1/traces is appended). gRPC: http://host:port is plaintext, "
    "https://host:port is TLS, a bare host:port is plaintext when the host is loopback (localhost, 127.0.0.0/8, "
    "::1) and TLS otherwise.",
)
@click.option(
    "--protocol",
    "protocol_text",
    default=None,
    metavar="http/protobuf|grpc",
    help="OTLP protocol [default: $OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, $OTEL_EXPORTER_OTLP_PROTOCOL, http/protobuf].",
)
@click.option(
    "--session",
    "session_texts",
    multiple=True,
    metavar="S",
    help="Only this session (a digest, unique prefix, or raw id); repeat for more [default: every span].",
)
@click.option(
    "--since",
    "since_text",
    default=None,
    metavar="TIME",
    help="Only spans that started at or after TIME: ISO-8601 with a timezone, or Unix seconds.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, 100_000),
    default=DEFAULT_BATCH_SIZE,
    show_default=True,
    help="Spans per export request.",
)
@click.option(
    "--timeout",
    type=Duration(example="30s"),
    default=None,
    help="Deadline per export (45s, 500ms, 2m, or seconds), the exporter's retries included [default: "
    f"$OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, $OTEL_EXPORTER_OTLP_TIMEOUT, {format_duration(DEFAULT_TIMEOUT_S)}].",
)
@store_option
@format_option
def push(
    endpoint: str,
    protocol_text: str | None,
    session_texts: tuple[str, ...],
    since_text: str | None,
    batch_size: int,
    timeout: float | None,
    store_path: Path | None,
    output_format: str,
) -> int:
    """Push stored spans to an OTLP endpoint (a Collector), strict policy, each span once per endpoint.

    Headers, TLS and compression come from the usual OTEL_EXPORTER_OTLP_* variables. A second push to the same
    endpoint sends only spans stored since. Exit 1 when the endpoint does not take a batch.
    """
    # Arguments first, so a bad one is reported the same way whether or not the store exists.
    try:
        protocol, _ = resolve_protocol(protocol_text)
    except ValueError as exc:
        raise CliError(str(exc).replace("otlp_protocol", "--protocol")) from None
    try:
        key = endpoint_key(endpoint, protocol)
    except ValueError as exc:
        raise CliError(f"--endpoint is not usable: {exc}") from None
    since_ns = None
    if since_text is not None:
        try:
            since_ns = parse_since(since_text)
        except ValueError as exc:
            raise CliError(f"--since: {exc}") from None
    where = display_endpoint(endpoint, protocol)
    path = resolve_store_path(store_path)
    with open_store(store_path, write=True) as store:  # it records push marks
        sessions = [resolve_session(store, text, path) for text in session_texts] or None
        hasher = load_store_hasher(path)
        if hasher is None:
            click.echo(
                "agentdiag: warning: no hash key for this store (AGENTDIAG_HASH_KEY, or hash.key beside it): "
                "stored digests are hashed again with a one-off key and will not match the store's",
                err=True,
            )
        try:
            exporter = push_exporter(endpoint, protocol, timeout=timeout)
        except (ImportError, ValueError) as exc:
            raise CliError(str(exc)) from None
        try:
            with _held_exporter_log() as log, _progress(store, key, sessions, since_ns, output_format) as advance:
                result = push_spans(
                    store,
                    exporter,
                    endpoint=key,
                    hasher=hasher,
                    sessions=sessions,
                    since_ns=since_ns,
                    batch_size=batch_size,
                    on_batch=advance,
                )
        finally:
            with _held_exporter_log():
                exporter.shutdown()
    if output_format == "json":
        report: dict[str, Any] = {"endpoint": where, "protocol": protocol, **result.as_dict()}
        click.echo(json.dumps(report, indent=2))
    if not result.ok:
        click.echo(
            "agentdiag: error: "
            + _failure(result, where, protocol, log.hint, effective_timeout(timeout), log.tls_failed),
            err=True,
        )
        return EXIT_PUSH_FAILED
    if output_format == "text":
        click.echo(_summary(result, where, protocol))
    return 0


@contextmanager
def _progress(
    store: SpanStore, key: str, sessions: list[str] | None, since_ns: int | None, output_format: str
) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on a terminal (text output, stdout a TTY, something to push); otherwise nothing."""
    backlog = 0
    if output_format == "text" and sys.stdout.isatty():
        backlog, _ = store.push_backlog(key, sessions=sessions, since_ns=since_ns)
    if not backlog:
        yield None
        return
    with click.progressbar(length=backlog, label="pushing", file=sys.stdout, show_pos=True) as bar:
        yield bar.update
