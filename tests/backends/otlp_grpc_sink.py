"""A real OTLP/gRPC trace receiver on 127.0.0.1: the stand-in for Grafana Tempo behind the Collector.

The Collector's ``otlp_grpc/tempo`` exporter sends here exactly what it would send Tempo (Tempo itself is AGPL
and is not built or run by this project). grpcio's server with OpenTelemetry's generated ``TraceService``
servicer; every ``ExportTraceServiceRequest`` is kept as it arrived.

Usage::

    with OTLPGrpcSink() as sink:
        ...  # point an exporter at sink.endpoint ("127.0.0.1:<port>")
        spans = sink.wait_for_trace(trace_id, count=12, timeout=30)
"""

from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as plain Python (arrays as tuples, kvlists as dicts)."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return tuple(any_value(item) for item in value.array_value.values)
    if which == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, which)


def attributes(key_values: Any) -> dict[str, Any]:
    """OTLP ``KeyValue`` list as a dict."""
    pairs: list[KeyValue] = list(key_values)
    return {kv.key: any_value(kv.value) for kv in pairs}


@dataclass(frozen=True)
class SinkSpan:
    """One span as the sink received it, with its resource and scope."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str
    events: tuple[tuple[str, dict[str, Any]], ...]


class _Servicer(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, sink: OTLPGrpcSink) -> None:
        self._sink = sink

    def Export(self, request: Any, context: Any) -> Any:  # the generated servicer names it so
        self._sink._record(request)
        return trace_service_pb2.ExportTraceServiceResponse()


class OTLPGrpcSink:
    """OTLP/gRPC trace receiver on a free loopback port; ``endpoint`` is ``127.0.0.1:<port>``."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._requests: list[Any] = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Servicer(self), self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> OTLPGrpcSink:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None).wait(10)

    def _record(self, request: Any) -> None:
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()

    def dump(self) -> str:
        """Every request received, in protobuf text format: all of it (links, status, trace state, scope)."""
        with self._lock:
            requests = list(self._requests)
        return "\n".join(str(request) for request in requests)

    def spans(self) -> list[SinkSpan]:
        with self._lock:
            requests = list(self._requests)
        found: list[SinkSpan] = []
        for request in requests:
            for resource_spans in request.resource_spans:
                resource = attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append(
                            SinkSpan(
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex() or None,
                                name=span.name,
                                attributes=attributes(span.attributes),
                                resource=resource,
                                scope=scope_spans.scope.name,
                                events=tuple((e.name, attributes(e.attributes)) for e in span.events),
                            )
                        )
        return found

    def wait_for_trace(self, trace_id: str, count: int, timeout: float) -> list[SinkSpan]:
        """The trace's spans once ``count`` have arrived (or what arrived by ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                seen = len(self._requests)
            spans = [span for span in self.spans() if span.trace_id == trace_id]
            left = deadline - time.monotonic()
            if len(spans) >= count or left <= 0:
                return spans
            with self._lock:  # woken by the next request (or the deadline)
                self._lock.wait_for(lambda before=seen: len(self._requests) > before, timeout=left)
