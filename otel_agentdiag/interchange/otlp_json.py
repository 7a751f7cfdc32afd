"""OTLP-JSON: the ``ExportTraceServiceRequest`` JSON encoding, one compact document per line.

This is what the OpenTelemetry Collector's ``file`` exporter writes and its ``otlpjsonfile`` receiver reads,
what Jaeger's backend accepts on ``/v1/traces`` and in the UI's "upload JSON", and what any OTLP/HTTP receiver
accepts as ``application/json``. The encoding is protobuf's JSON mapping of the OpenTelemetry proto messages
(built by the OpenTelemetry exporter's own encoder, not by hand) with the two differences the OTLP
specification makes (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding):

- ``traceId``, ``spanId`` and ``parentSpanId`` (of spans and links) are lowercase hex strings, not base64;
- enum values (``kind``, ``status.code``) are integers.

Keys are lowerCamelCase; 64-bit integers (times in nanoseconds, ``intValue``) are decimal strings.

Reading (:func:`read_otlp_json`) accepts one request per line (JSON Lines) or one document over several
lines (pretty-printed), validates every document on its own, and reports the bad ones by line number and
reason code, never by content. :func:`request_to_spans` turns a request into SDK spans (ids, parent, times,
kind, status, attributes of every ``AnyValue`` type, events, links, resource, scope) or says why it cannot.

Needs ``opentelemetry-proto`` and ``opentelemetry-exporter-otlp-proto-common`` (the ``otlp`` extra); they are
imported when a function needs them.

This module reads and writes the files; one document's mapping to a request is
:mod:`~otel_agentdiag.interchange.otlp_request`, a request's spans :mod:`~otel_agentdiag.interchange.otlp_spans`
and the reason codes :mod:`~otel_agentdiag.interchange.otlp_errors` (every name is importable from here too).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_agentdiag._internal.files import write_private_file
from otel_agentdiag.interchange.otlp_errors import (
    CONTENT_REASONS,
    INVALID_ID,
    INVALID_SPAN,
    INVALID_TIME,
    LINE_REASONS,
    LINE_TOO_LONG,
    MALFORMED_JSON,
    NOT_OTLP,
    InvalidRequest,
    MissingDependency,
)
from otel_agentdiag.interchange.otlp_json_fast import JsonEncoder, otlp_json_object
from otel_agentdiag.interchange.otlp_request import (
    parse_request,
    raw_session_ids,
    request_to_otlp_json,
    request_type,
    span_encoder,
)
from otel_agentdiag.interchange.otlp_spans import request_session_ids, request_to_spans

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = [
    "INVALID_ID",
    "INVALID_SPAN",
    "INVALID_TIME",
    "LINE_TOO_LONG",
    "LINE_REASONS",
    "MALFORMED_JSON",
    "MAX_LINE_BYTES",
    "NOT_OTLP",
    "InvalidRequest",
    "LineResult",
    "MissingDependency",
    "otlp_json_line",
    "read_otlp_json",
    "request_session_ids",
    "request_to_spans",
    "write_otlp_json",
]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line read (a Collector batch of thousands of spans fits many times over)."""
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
"""The largest file read as ONE pretty-printed document (a larger one is read line by line)."""
SPANS_PER_LINE = 512
"""At most this many spans per written request (one trace per request unless it is larger)."""


@dataclass(frozen=True)
class LineResult:
    """One document of an OTLP-JSON file: the parsed request, or why there is none.

    ``line`` is the 1-based line the document starts on; ``item`` its 1-based index when the line holds a JSON
    array of requests (None otherwise). ``reason`` (one of :data:`LINE_REASONS`) is set exactly when
    ``request`` is None. ``session_ids`` are the raw session ids the spans of a rejected request name, so that
    it can be filed under its sessions (after hashing; never stored as they are).
    """

    line: int
    request: ExportTraceServiceRequest | None
    reason: str | None = None
    item: int | None = None
    session_ids: frozenset[str | int] = frozenset()

    @property
    def is_otlp(self) -> bool:
        """Whether the document is an OTLP request at all (parsed, or rejected only for the content of a span)."""
        return self.request is not None or self.reason in CONTENT_REASONS

    @property
    def location(self) -> str:
        """``line N`` (or ``line N item K``): where the document is, never what it holds."""
        return f"line {self.line}" if self.item is None else f"line {self.line} item {self.item}"


def _chunks(spans: Sequence[Any]) -> Iterator[list[Any]]:
    """The spans grouped by trace (first seen first), at most :data:`SPANS_PER_LINE` per group."""
    by_trace: dict[int, list[Any]] = {}
    for span in spans:
        context = span.context
        by_trace.setdefault(context.trace_id if context is not None else 0, []).append(span)
    for group in by_trace.values():
        for start in range(0, len(group), SPANS_PER_LINE):
            yield group[start : start + SPANS_PER_LINE]


def otlp_json_line(spans: Sequence[ReadableSpan], encoder: JsonEncoder | None = None) -> str:
    """The compact OTLP-JSON line of ``spans`` (``json.dumps``: compact, ``ensure_ascii=False``,
    ``allow_nan=False``): the OpenTelemetry exporter's own encoder (``encode_spans``) with protobuf's JSON mapping
    and OTLP's hex ids (:func:`~otel_agentdiag.interchange.otlp_request.request_to_otlp_json`), the same object
    built directly where :mod:`~otel_agentdiag.interchange.otlp_json_fast` reproduces it exactly (``encoder``:
    one per file, it remembers repeated attributes). Raises :class:`MissingDependency` without the ``otlp``
    extra (on the reference path)."""
    try:
        document = otlp_json_object(spans, encoder)
    except Exception:  # noqa: BLE001 - Unsupported (a value it does not reproduce exactly) or a surprise
        document = request_to_otlp_json(span_encoder()(spans))
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def write_otlp_json(spans: Sequence[ReadableSpan], path: Path) -> int:
    """Write ``spans`` to ``path`` as OTLP-JSON Lines: one compact ``ExportTraceServiceRequest`` per line (per
    trace, split beyond :data:`SPANS_PER_LINE` spans; :func:`otlp_json_line`). Mode 0600, atomic. Returns the
    size of the file in bytes.

    The spans are written as given: pass the strict-policy projection, never raw spans. Raises
    :class:`MissingDependency` without the ``otlp`` extra and ``OSError`` when the file cannot be written.
    """
    span_encoder()  # the missing extra is said before anything is written
    request_type()
    encoder = JsonEncoder()
    lines = [otlp_json_line(chunk, encoder) for chunk in _chunks(spans)]

    def write(stream: IO[str]) -> None:
        for line in lines:
            stream.write(line)
            stream.write("\n")

    return write_private_file(path, write)


def _read_lines(stream: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, bytes)`` per line; ``None`` for a line longer than :data:`MAX_LINE_BYTES` (skipped
    without holding it in memory)."""
    number = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # the rest of the long line
                raw = stream.readline(1024 * 1024)
            yield number, None
            continue
        yield number, raw


def _load(raw: bytes) -> tuple[Any, str | None]:
    try:
        return json.loads(raw.decode("utf-8")), None
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, MALFORMED_JSON


def _results(value: Any, line: int) -> Iterator[LineResult]:
    if isinstance(value, list):  # an array of requests (as Jaeger UI's upload accepts)
        if not value:
            yield LineResult(line, None, NOT_OTLP)
        for index, element in enumerate(value, start=1):
            yield _result(element, line, index)
        return
    yield _result(value, line, None)


def _result(value: Any, line: int, item: int | None) -> LineResult:
    try:
        return LineResult(line, parse_request(value), None, item)
    except InvalidRequest as exc:
        return LineResult(line, None, exc.reason, item, raw_session_ids(value))


def read_otlp_json(path: Path) -> Iterator[LineResult]:
    """Every document of an OTLP-JSON file, in order: a request per line (JSON Lines, blank lines skipped), or
    one document spread over several lines (pretty-printed; its result carries the line it starts on). A line
    holding a JSON array yields one result per element.

    Raises ``OSError`` when the file cannot be opened or read and :class:`MissingDependency` without the proto
    packages; a bad document is a result with a ``reason``, never an exception.
    """
    request_type()
    with open(path, "rb") as stream:
        lines = _read_lines(stream)
        for number, raw in lines:
            if raw is None:
                yield LineResult(number, None, LINE_TOO_LONG)
                break
            if not raw.strip():
                continue
            value, error = _load(raw)
            if error is not None:
                document = _whole_document(stream)
                if document is not None:
                    yield from _results(document, number)
                    return
                yield LineResult(number, None, error)
            else:
                yield from _results(value, number)
            break
        for number, raw in lines:
            if raw is None:
                yield LineResult(number, None, LINE_TOO_LONG)
                continue
            if not raw.strip():
                continue
            value, error = _load(raw)
            if error is not None:
                yield LineResult(number, None, error)
            else:
                yield from _results(value, number)


def _whole_document(stream: IO[bytes]) -> Any | None:
    """The whole file as one JSON document when it is one (its first line alone was not), else None; leaves the
    stream where it was."""
    position = stream.tell()
    try:
        size = os.fstat(stream.fileno()).st_size
        if size > MAX_DOCUMENT_BYTES:
            return None
        stream.seek(0)
        value, error = _load(stream.read())
        return value if error is None and isinstance(value, (dict, list)) else None
    finally:
        stream.seek(position)
