"""The SDK's OTLP span exporters, able to send a batch already encoded to protobuf instead of encoding it again.

``agentdiag push`` encodes each batch with :func:`otel_agentdiag.interchange.otlp_fast.request_bytes` (the same
bytes as the SDK's ``encode_spans``, several times faster) and hands them to :meth:`export_encoded` of these
subclasses: the SDK exporter's own transport does the rest (headers, TLS, compression, retries, timeout, its
log lines and metrics), exactly as in :meth:`export`. Where an SDK version does not have the internals this
relies on, :meth:`export_encoded` is plain :meth:`export` of the spans (the SDK encodes them itself).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as _GrpcExporter
from opentelemetry.exporter.otlp.proto.http import trace_exporter as _http_module
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as _HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

__all__ = ["EncodedGrpcSpanExporter", "EncodedHttpSpanExporter"]

_http_logger = logging.getLogger(_http_module.__name__)
_STATUS_CODE_KEY = getattr(_http_module, "HTTP_RESPONSE_STATUS_CODE", "http.response.status_code")


class _Encoded(list[ReadableSpan]):
    """A batch of spans with its request already encoded (what the gRPC exporter's ``_translate_data`` sends)."""

    def __init__(self, spans: Sequence[ReadableSpan], payload: bytes) -> None:
        super().__init__(spans)
        self.payload = payload


class EncodedHttpSpanExporter(_HttpExporter):  # type: ignore[misc]
    """The SDK's OTLP/HTTP span exporter; :meth:`export_encoded` posts given bytes as :meth:`export` posts its own."""

    @property
    def takes_encoded(self) -> bool:
        """Whether :meth:`export_encoded` sends the bytes itself (this SDK version has what it relies on), so
        that the batch may hold spans only the bytes carry (``otlp_fast.EncodedSpan``)."""
        return (
            getattr(self, "_client", None) is not None
            and getattr(self, "_metrics", None) is not None
            and getattr(_http_module, "_is_request_too_large", None) is not None
            and hasattr(self, "_max_request_size")
        )

    def export_encoded(self, spans: Sequence[ReadableSpan], payload: bytes) -> SpanExportResult:
        client = getattr(self, "_client", None)
        metrics = getattr(self, "_metrics", None)
        too_large = getattr(_http_module, "_is_request_too_large", None)
        if client is None or metrics is None or too_large is None or not hasattr(self, "_max_request_size"):
            result: SpanExportResult = self.export(spans)
            return result
        if getattr(self, "_shutdown", False):
            _http_logger.warning("Exporter already shutdown, ignoring batch")
            return SpanExportResult.FAILURE
        with metrics.export_operation(len(spans)) as outcome:
            if too_large(payload, self._max_request_size):
                _http_logger.warning(
                    "Dropping span batch: serialized size %d bytes exceeds max_request_size %d bytes.",
                    len(payload),
                    self._max_request_size,
                )
                too_large_error = getattr(_http_module, "RequestPayloadTooLargeError", None)
                if too_large_error is not None:
                    outcome.error = too_large_error(
                        f"Serialized span request size {len(payload)} bytes exceeds max_request_size "
                        f"{self._max_request_size} bytes."
                    )
                return SpanExportResult.FAILURE
            sent: Any = client.export(payload)
            if not sent.success:
                outcome.error = sent.error
                outcome.error_attrs = (
                    {_STATUS_CODE_KEY: sent.status_code} if getattr(sent, "status_code", None) is not None else None
                )
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS


class EncodedGrpcSpanExporter(_GrpcExporter):  # type: ignore[misc]
    """The SDK's OTLP/gRPC span exporter; :meth:`export_encoded` sends given bytes (parsed once, in C)."""

    def _translate_data(self, data: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
        if isinstance(data, _Encoded):
            parsed: ExportTraceServiceRequest = ExportTraceServiceRequest.FromString(data.payload)
            return parsed
        request: ExportTraceServiceRequest = super()._translate_data(data)
        return request

    @property
    def takes_encoded(self) -> bool:
        """Whether :meth:`export_encoded` sends the bytes itself (see :class:`EncodedHttpSpanExporter`)."""
        return callable(getattr(self, "_export", None))

    def export_encoded(self, spans: Sequence[ReadableSpan], payload: bytes) -> SpanExportResult:
        if not callable(getattr(self, "_export", None)):
            result: SpanExportResult = self.export(spans)
            return result
        sent: SpanExportResult = self._export(_Encoded(spans, payload))
        return sent
