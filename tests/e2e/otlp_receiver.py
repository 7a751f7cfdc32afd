"""A real OTLP/HTTP (protobuf) trace receiver for end-to-end tests: stdlib HTTP server on 127.0.0.1.

Usage::

    with OTLPReceiver() as receiver:
        configure(otlp_endpoint=receiver.endpoint, ...)
        ...
        assert receiver.wait_for_spans(4, timeout=10)
        names = [s.name for s in receiver.spans()]

It keeps every request body exactly as it came off the socket (``raw_bodies``), the body after
``Content-Encoding`` was undone (``decoded_bodies``), the request headers, and the parsed
``ExportTraceServiceRequest`` messages. Anything it cannot accept (wrong path, method, encoding or a body that
is not a trace request) is answered with an error status and recorded in ``errors``.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as plain Python (arrays as tuples, kvlists as dicts)."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return tuple(any_value(v) for v in value.array_value.values)
    if which == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, which)


def attributes(key_values: Iterable[KeyValue]) -> dict[str, Any]:
    """OTLP ``KeyValue`` list as a dict."""
    return {kv.key: any_value(kv.value) for kv in key_values}


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as it arrived, with the resource and scope it was sent under."""

    span: Span
    resource: dict[str, Any]
    scope_name: str
    scope_version: str

    @property
    def name(self) -> str:
        return self.span.name

    @property
    def attributes(self) -> dict[str, Any]:
        return attributes(self.span.attributes)

    @property
    def trace_id(self) -> str:
        return self.span.trace_id.hex()

    @property
    def span_id(self) -> str:
        return self.span.span_id.hex()

    @property
    def parent_span_id(self) -> str | None:
        return self.span.parent_span_id.hex() or None

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        return [(event.name, attributes(event.attributes)) for event in self.span.events]


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, so no handler thread outlives its request waiting on a kept-alive
    # socket, and stop() can join every handler thread.
    protocol_version = "HTTP/1.0"
    timeout = 10  # seconds: bounds a read from a client that stalls
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # silence per-request logging to stderr
        pass

    def _reply(self, status: int, body: bytes = b"", content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.receiver._error(f"GET {self.path}")
        self._reply(405)

    def do_POST(self) -> None:
        receiver = self.server.receiver
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path != TRACES_PATH:
            receiver._error(f"POST to {self.path}")
            self._reply(404)
            return
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        try:
            if encoding == "gzip":
                body = gzip.decompress(raw)
            elif encoding == "deflate":
                body = zlib.decompress(raw)
            elif encoding == "identity":
                body = raw
            else:
                raise ValueError(f"unsupported Content-Encoding {encoding!r}")
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
        except (OSError, EOFError, zlib.error, ValueError, DecodeError) as exc:
            receiver._error(f"bad request body ({type(exc).__name__}: {exc})")
            self._reply(400)
            return
        receiver._record(raw, body, {k.lower(): v for k, v in self.headers.items()}, request)
        self._reply(200, ExportTraceServiceResponse().SerializeToString(), PROTOBUF)


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # so server_close() joins the handler threads
    block_on_close = True

    def __init__(self, receiver: OTLPReceiver) -> None:
        self.receiver = receiver
        super().__init__(("127.0.0.1", 0), _Handler)


class OTLPReceiver:
    """An OTLP/HTTP trace receiver on ``127.0.0.1`` (a free port), serving from a background thread.

    Start and stop it with ``with`` (or :meth:`start`/:meth:`stop`). All lists are appended to under a lock;
    read them once the spans you wait for have arrived.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.requests: list[ExportTraceServiceRequest] = []
        """Parsed trace export requests, in arrival order."""
        self.raw_bodies: list[bytes] = []
        """Request bodies exactly as received (still compressed when the client compressed them)."""
        self.decoded_bodies: list[bytes] = []
        """Request bodies after undoing ``Content-Encoding``: the serialized protobuf."""
        self.headers: list[dict[str, str]] = []
        """Request headers of each accepted request (names lower-cased)."""
        self.errors: list[str] = []
        """Requests that were refused, and why."""
        self._span_count = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> OTLPReceiver:
        if self._server is not None:
            raise RuntimeError("receiver already started")
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="otlp-receiver", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._server = self._thread = None
        try:
            server.shutdown()  # stops serve_forever and waits for it
            if thread is not None:
                thread.join()
        finally:
            server.server_close()  # closes the listening socket, joins handler threads

    def __enter__(self) -> OTLPReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("receiver not started")
        return int(self._server.server_address[1])

    @property
    def endpoint(self) -> str:
        """Base URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes it (``/v1/traces`` not included)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def traces_url(self) -> str:
        """Full traces URL, as ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` takes it."""
        return self.endpoint + TRACES_PATH

    # -- recording (handler threads) ------------------------------------------------------------------
    def _record(self, raw: bytes, body: bytes, headers: dict[str, str], request: ExportTraceServiceRequest) -> None:
        count = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        with self._cond:
            self.raw_bodies.append(raw)
            self.decoded_bodies.append(body)
            self.headers.append(headers)
            self.requests.append(request)
            self._span_count += count
            self._cond.notify_all()

    def _error(self, what: str) -> None:
        with self._cond:
            self.errors.append(what)
            self._cond.notify_all()

    # -- reading --------------------------------------------------------------------------------------
    @property
    def span_count(self) -> int:
        with self._cond:
            return self._span_count

    def wait_for_spans(self, n: int, timeout: float) -> bool:
        """Block until at least ``n`` spans have arrived (True) or ``timeout`` seconds passed (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._span_count >= n, timeout)

    def spans(self) -> list[ReceivedSpan]:
        """Every span received, flattened out of resource_spans/scope_spans, with its resource attributes."""
        with self._cond:
            requests = list(self.requests)
        out = []
        for request in requests:
            for resource_spans in request.resource_spans:
                resource = attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        out.append(ReceivedSpan(span, resource, scope_spans.scope.name, scope_spans.scope.version))
        return out
