"""The lossless encoder: a value of the content domain to ``agentdiag-content/1`` ASCII JSON text.

See :mod:`otel_agentdiag.content.codec` for the format; :mod:`~otel_agentdiag.content.decoder` reads it back.
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
from collections.abc import Callable, Iterator
from itertools import chain
from typing import Any

from otel_agentdiag.content.document import MAX_DEPTH, document
from otel_agentdiag.content.values import CapturedException, CapturedObject, Elided

__all__ = ["encode"]

_MAX_INT_BITS = 4096

_escape: Callable[[str], str] = json.encoder.encode_basestring_ascii  # the C escaper json.dumps uses
_SURROGATE_PAIR = re.compile("[\ud800-\udbff](?=[\udc00-\udfff])")
"""A high surrogate code point followed by a low one: escaped, JSON would read the two back as one character."""


def _encode_str(value: str) -> str:
    """A str node: a JSON string, or ``["S", part, ...]`` split inside each high-low surrogate pair, so that
    the two code points come back as two (a JSON reader joins ``"\\ud800\\udc00"`` into U+10000)."""
    if value.isascii() or _SURROGATE_PAIR.search(value) is None:
        return _escape(value)
    parts = []
    start = 0
    for match in _SURROGATE_PAIR.finditer(value):
        parts.append(_escape(value[start : match.end()]))
        start = match.end()
    parts.append(_escape(value[start:]))
    return '["S",' + ",".join(parts) + "]"


_END = object()


class _EncodeFrame:
    """A container being encoded: its text so far (the tag first) and its remaining children."""

    __slots__ = ("canonical", "children", "parts")

    def __init__(self, head: str, children: Iterator[Any], canonical: bool = False) -> None:
        self.parts = [head]
        self.children = children
        self.canonical = canonical

    def close(self) -> str:
        parts = self.parts
        if self.canonical and len(parts) > 2:
            parts[1:] = sorted(parts[1:])
        return ",".join(parts) + "]"


def _encode_int(value: int) -> str:
    if value.bit_length() <= _MAX_INT_BITS:
        try:
            return int.__repr__(value)
        except ValueError:  # sys.set_int_max_str_digits() set below the default
            pass
    return f'["i","{value:#x}"]'


def _encode_leaf(value: Any, cls: type) -> str | None:
    """The text of a value without children, or None for a container."""
    if cls is str:
        return _encode_str(value)
    if value is None:
        return "null"
    if cls is bool:
        return "true" if value else "false"
    if cls is int:
        return _encode_int(value)
    if cls is float:
        if math.isfinite(value):
            return float.__repr__(value)
        return f'["f","{struct.pack(">d", value).hex()}"]'
    if cls is bytes:
        return f'["b","{base64.b64encode(value).decode("ascii")}"]'
    if cls is CapturedObject:
        if type(value.type) is not str or type(value.repr) is not str:
            raise TypeError("CapturedObject fields must be str")
        return f'["O",{_encode_str(value.type)},{_encode_str(value.repr)}]'
    if cls is Elided:
        reason, size, digest = value.reason, value.size, value.sha256
        if (
            type(reason) is not str
            or not (size is None or type(size) is int)
            or not (digest is None or type(digest) is str)
        ):
            raise TypeError("Elided fields must be str, int or None, str or None")
        size_text = "null" if size is None else int.__repr__(size)
        return f'["X",{_encode_str(reason)},{size_text},{"null" if digest is None else _encode_str(digest)}]'
    if cls is list or cls is tuple or cls is dict or cls is set or cls is frozenset or cls is CapturedException:
        return None
    raise TypeError(f"cannot encode a value of type {cls.__qualname__}: not in the content domain")


def _encode_open(value: Any, cls: type) -> _EncodeFrame:
    if cls is list:
        return _EncodeFrame('["l"', iter(value))
    if cls is dict:
        return _EncodeFrame('["d"', chain.from_iterable(value.items()))
    if cls is tuple:
        return _EncodeFrame('["t"', iter(value))
    if cls is set:
        return _EncodeFrame('["s"', iter(value), canonical=True)
    if cls is frozenset:
        return _EncodeFrame('["z"', iter(value), canonical=True)
    if type(value.type) is not str or type(value.message) is not str or type(value.args) is not tuple:
        raise TypeError("CapturedException fields must be str, str and tuple")
    return _EncodeFrame(f'["E",{_encode_str(value.type)},{_encode_str(value.message)}', iter((value.args,)))


def encode(value: Any) -> bytes:
    """The lossless encoding of ``value`` (ASCII JSON). The same value always encodes to the same bytes.

    :raises TypeError: a value (at any depth) is not of an exact content-domain type.
    :raises ValueError: containers are nested deeper than :data:`MAX_DEPTH`.
    """
    refs: dict[int, int] = {}  # id of each list, dict and set opened -> its reference number
    stack: list[_EncodeFrame] = []
    node = value
    while True:
        cls = type(node)
        text = _encode_leaf(node, cls)
        if text is None:
            if cls is list or cls is dict or cls is set:
                index = refs.get(id(node))
                if index is not None:
                    text = f'["r",{index}]'
                else:
                    refs[id(node)] = len(refs)
            if text is None:
                if len(stack) >= MAX_DEPTH:
                    raise ValueError(f"content nested deeper than {MAX_DEPTH} containers")
                stack.append(_encode_open(node, cls))
        if text is not None:
            if not stack:
                return document(text)
            stack[-1].parts.append(text)
        # The next child of the innermost open container, closing those that are complete.
        while True:
            frame = stack[-1]
            node = next(frame.children, _END)
            if node is not _END:
                break
            stack.pop()
            text = frame.close()
            if not stack:
                return document(text)
            stack[-1].parts.append(text)
