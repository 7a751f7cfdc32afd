"""Spans already encoded for OTLP (protobuf bytes), which the fast encoders emit unchanged, and their OTLP-JSON.

:class:`EncodedSpan` is what a reused strict-projection verdict (:mod:`otel_agentdiag.diagnostics.verdicts`)
becomes: :mod:`~otel_agentdiag.interchange.otlp_fast` takes it in place of a ``ReadableSpan``. Its OTLP-JSON
object is read back from its bytes (:func:`span_json`), the object ``JsonEncoder.span`` makes for the span the
bytes were made from, key order included; only bytes that :class:`~otel_agentdiag.interchange.otlp_fast.
WireEncoder` wrote are read (anything else raises ``ValueError``).
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

__all__ = ["EncodedSpan", "SpanIds", "dump_json", "span_json"]


class SpanIds:
    """The ids of an :class:`EncodedSpan` where a span has its ``context`` (``trace_id``, ``span_id``)."""

    __slots__ = ("span_id", "trace_id")

    def __init__(self, trace_id: int, span_id: int) -> None:
        self.trace_id = trace_id
        self.span_id = span_id


class EncodedSpan:
    """A span already encoded: its ``Span`` message bytes (``wire``, what ``WireEncoder.span`` returned), with
    the ids, resource and scope that place it in a request. :meth:`json_text` is its OTLP-JSON object as
    compact text (:func:`dump_json` of :func:`span_json`).

    The encoders take it in place of a ``ReadableSpan`` and emit the encoding unchanged; nothing else does (it is
    not a span: never hand it to an SDK exporter or encoder). What it holds is written as given.
    """

    __slots__ = ("_json", "context", "instrumentation_scope", "resource", "wire")

    def __init__(
        self, trace_id: int, span_id: int, resource: Any, scope: Any, wire: bytes, json_text: str | None = None
    ) -> None:
        self.context = SpanIds(trace_id, span_id)
        self.resource = resource
        self.instrumentation_scope = scope
        self.wire = wire
        self._json = json_text

    def json_text(self) -> str:
        """The span's OTLP-JSON object as compact text (read from :attr:`wire` once)."""
        if self._json is None:
            self._json = dump_json(span_json(self.wire))
        return self._json


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def dump_json(value: Any) -> str:
    """Compact JSON as OTLP-JSON files are written (``json.dumps`` with ``separators=(",", ":")``,
    ``ensure_ascii=False``, ``allow_nan=False``)."""
    return _dumps(value)


# -- reading WireEncoder's bytes back ---------------------------------------------------------------------------

_FIXED64 = struct.Struct("<Q")
_DOUBLE = struct.Struct("<d")
_FIXED32 = struct.Struct("<I")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(data: bytes) -> list[tuple[int, Any]]:
    """``(field number, value)`` of a message: an int (varint, fixed64, fixed32) or bytes (length-delimited)."""
    out: list[tuple[int, Any]] = []
    at, end = 0, len(data)
    value: Any
    while at < end:
        key = data[at]
        if key < 0x80:
            at += 1
        else:
            key, at = _varint(data, at)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, at = _varint(data, at)
        elif kind == 1:
            (value,) = _FIXED64.unpack_from(data, at)
            at += 8
        elif kind == 2:
            size = data[at]
            if size < 0x80:
                at += 1
            else:
                size, at = _varint(data, at)
            value = data[at : at + size]
            if len(value) != size:
                raise ValueError("truncated field")
            at += size
        elif kind == 5:
            (value,) = _FIXED32.unpack_from(data, at)
            at += 4
        else:
            raise ValueError("unknown wire type")
        out.append((number, value))
    return out


def _any_value(data: bytes) -> dict[str, Any]:
    fields = _fields(data)
    if not fields:
        return {}
    if len(fields) != 1:
        raise ValueError("not one value")
    number, value = fields[0]
    if number == 1:
        return {"stringValue": value.decode("utf-8")}
    if number == 2:
        return {"boolValue": bool(value)}
    if number == 3:
        return {"intValue": str(value - (1 << 64) if value >= 1 << 63 else value)}
    if number == 4:
        number_value = _DOUBLE.unpack(_FIXED64.pack(value))[0]
        if number_value != number_value:
            return {"doubleValue": "NaN"}
        if number_value in (float("inf"), float("-inf")):
            return {"doubleValue": "Infinity" if number_value > 0 else "-Infinity"}
        return {"doubleValue": number_value}
    if number == 7:
        return {"bytesValue": base64.b64encode(value).decode("ascii")}
    if number == 5:
        values = [_any_value(v) for n, v in _fields(value) if n == 1]
        return {"arrayValue": {"values": values} if values else {}}
    if number == 6:
        pairs = [_key_value(v) for n, v in _fields(value) if n == 1]
        return {"kvlistValue": {"values": pairs} if pairs else {}}
    raise ValueError("unknown value field")


_PAIRS: dict[bytes, dict[str, Any]] = {}
_PAIRS_LIMIT = 65_536


def _key_value(data: bytes) -> dict[str, Any]:
    """A ``KeyValue`` (remembered by its bytes: attributes repeat from span to span; the objects are shared, as
    the JSON encoder's are, and never changed)."""
    found = _PAIRS.get(data)
    if found is None:
        found = _read_key_value(data)
        if len(_PAIRS) >= _PAIRS_LIMIT:
            _PAIRS.clear()
        _PAIRS[data] = found
    return found


def _read_key_value(data: bytes) -> dict[str, Any]:
    key = ""
    value: dict[str, Any] = {}
    for number, field in _fields(data):
        if number == 1:
            key = field.decode("utf-8")
        elif number == 2:
            value = _any_value(field)
    return {"key": key, "value": value} if key else {"value": value}


def _hex(value: bytes, size: int) -> str:
    if len(value) != size:
        raise ValueError("not an id")
    return value.hex()


def _event(data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    attributes = []
    for number, value in _fields(data):
        if number == 1:
            out["timeUnixNano"] = str(value)
        elif number == 2:
            out["name"] = value.decode("utf-8")
        elif number == 3:
            attributes.append(_key_value(value))
        elif number == 4:
            out["droppedAttributesCount"] = value
    if attributes:
        out["attributes"] = attributes
    return _ordered(out, ("timeUnixNano", "name", "attributes", "droppedAttributesCount"))


def _link(data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    attributes = []
    for number, value in _fields(data):
        if number == 1:
            out["traceId"] = _hex(value, 16)
        elif number == 2:
            out["spanId"] = _hex(value, 8)
        elif number == 4:
            attributes.append(_key_value(value))
        elif number == 5:
            out["droppedAttributesCount"] = value
        elif number == 6:
            out["flags"] = value
    if attributes:
        out["attributes"] = attributes
    return _ordered(out, ("traceId", "spanId", "attributes", "droppedAttributesCount", "flags"))


def _ordered(out: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: out[key] for key in keys if key in out}


_SPAN_KEYS = (
    "traceId",
    "spanId",
    "traceState",
    "parentSpanId",
    "name",
    "kind",
    "startTimeUnixNano",
    "endTimeUnixNano",
    "attributes",
    "droppedAttributesCount",
    "events",
    "droppedEventsCount",
    "links",
    "droppedLinksCount",
    "status",
    "flags",
)


def span_json(wire: bytes) -> dict[str, Any]:
    """The OTLP-JSON object of a ``Span`` message ``WireEncoder.span`` wrote: what ``JsonEncoder.span`` returns
    for the same span (hex ids, integer enums, 64-bit integers as strings, the same key order). Raises
    ``ValueError`` for bytes it did not write (a field it never writes, a truncated one)."""
    out: dict[str, Any] = {}
    attributes: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    try:
        for number, value in _fields(wire):
            if number == 9:
                attributes.append(_key_value(value))
            elif number == 11:
                events.append(_event(value))
            elif number == 13:
                links.append(_link(value))
            elif number == 1:
                out["traceId"] = _hex(value, 16)
            elif number == 2:
                out["spanId"] = _hex(value, 8)
            elif number == 3:
                out["traceState"] = value.decode("utf-8")
            elif number == 4:
                out["parentSpanId"] = _hex(value, 8)
            elif number == 5:
                out["name"] = value.decode("utf-8")
            elif number == 6:
                out["kind"] = value
            elif number == 7:
                out["startTimeUnixNano"] = str(value)
            elif number == 8:
                out["endTimeUnixNano"] = str(value)
            elif number == 10:
                out["droppedAttributesCount"] = value
            elif number == 12:
                out["droppedEventsCount"] = value
            elif number == 14:
                out["droppedLinksCount"] = value
            elif number == 15:
                status: dict[str, Any] = {}
                for part, field in _fields(value):
                    if part == 2:
                        status["message"] = field.decode("utf-8")
                    elif part == 3:
                        status["code"] = field
                out["status"] = _ordered(status, ("message", "code"))
            elif number == 16:
                out["flags"] = value
            else:
                raise ValueError("a field the encoder does not write")
    except (IndexError, struct.error, UnicodeDecodeError, AttributeError) as exc:
        raise ValueError("not a span the encoder wrote") from exc
    if attributes:
        out["attributes"] = attributes
    if events:
        out["events"] = events
    if links:
        out["links"] = links
    return _ordered(out, _SPAN_KEYS)
