"""The JSON projection of captured content: plain JSON for people and SQL (``json_extract``), lossy, never read back.

JSON data projects to itself; everything else becomes a ``{"$...": ...}`` object (see :func:`project`).
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterator
from itertools import chain
from typing import Any

from otel_agentdiag.content.values import TOO_DEEP, CapturedException, CapturedObject, Elided

__all__ = ["PROJECTION_MAX_DEPTH", "json_text", "project", "project_json"]

PROJECTION_MAX_DEPTH = 100
"""Containers nested in one another that :func:`project` shows; deeper ones are ``{"$elided": {"reason":
"too_deep"}}`` (the lossless form keeps them)."""

_MAX_DECIMAL_DIGITS = 4000
_SAFE_INT = 2**53
_END = object()

_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    """``text`` with surrogate code points (invalid in UTF-8) replaced: a high-low pair by the character it
    encodes, any other by U+FFFD."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _project_int(value: int) -> Any:
    if -_SAFE_INT <= value <= _SAFE_INT:
        return value
    if int(value.bit_length() * 0.30103) + 1 <= _MAX_DECIMAL_DIGITS:
        try:
            return {"$int": int.__repr__(value)}
        except ValueError:  # sys.set_int_max_str_digits() set below the default
            pass
    return {"$int": f"{value:#x}"}


def _project_leaf(value: Any, cls: type) -> Any:
    """The projection of a value without children; ``_END`` for a container."""
    if cls is str:
        return _clean(value)
    if value is None or cls is bool:
        return value
    if cls is int:
        return _project_int(value)
    if cls is float:
        if math.isfinite(value):
            return value
        return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if cls is bytes:
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if cls is CapturedException:
        return {"$exception": {"type": _clean(str(value.type)), "message": _clean(str(value.message))}}
    if cls is CapturedObject:
        return {"$object": {"type": _clean(str(value.type)), "repr": _clean(str(value.repr))}}
    if cls is Elided:
        elided: dict[str, Any] = {"reason": _clean(str(value.reason))}
        if value.size is not None:
            elided["size"] = value.size
        if value.sha256 is not None:
            elided["sha256"] = _clean(str(value.sha256))
        return {"$elided": elided}
    if cls is list or cls is tuple or cls is dict or cls is set or cls is frozenset:
        return _END
    raise TypeError(f"cannot project a value of type {cls.__qualname__}: not in the content domain")


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class _ProjectFrame:
    """A container being projected: its children, their projections so far, and how to assemble them."""

    __slots__ = ("children", "finish", "keys", "mutable", "results")

    def __init__(self, children: Iterator[Any], finish: str, mutable: int | None, keys: list[str] | None) -> None:
        self.children = children
        self.finish = finish
        self.mutable = mutable
        self.keys = keys
        self.results: list[Any] = []

    def close(self) -> Any:
        results = self.results
        if self.finish == "array":
            return results
        if self.finish == "object":
            return dict(zip(self.keys or (), results, strict=True))
        if self.finish == "map":
            return {"$map": [[results[i], results[i + 1]] for i in range(0, len(results), 2)]}
        return {"$set": sorted(results, key=json_text)}


def _project_open(value: Any, cls: type, mutable: int | None) -> _ProjectFrame:
    if cls is dict:
        keys = list(value)
        if all(type(key) is str for key in keys):
            clean = [_clean(key) for key in keys]
            if clean == keys or len(set(clean)) == len(clean):  # no two keys the same once cleaned
                return _ProjectFrame(iter(value.values()), "object", mutable, clean)
        return _ProjectFrame(chain.from_iterable(value.items()), "map", mutable, None)
    if cls is list or cls is tuple:
        return _ProjectFrame(iter(value), "array", mutable, None)
    return _ProjectFrame(iter(value), "set", mutable, None)


def project(value: Any) -> Any:
    """``value`` as plain JSON data (str keys; no NaN, infinity or lone surrogate; ints within ±2**53).

    JSON data projects to itself. Otherwise: lone surrogates become U+FFFD; ``{"$int": "<decimal>"}`` (hex
    ``"0x..."`` past 4,000 digits); ``{"$float": "nan" | "inf" | "-inf"}``; ``{"$bytes": "<base64>"}``;
    tuples are arrays; ``{"$set": [...]}`` with items in the order of their JSON text; a dict with a non-str
    key is ``{"$map": [[key, value], ...]}``; ``{"$exception": {"type", "message"}}``,
    ``{"$object": {"type", "repr"}}``, ``{"$elided": {"reason", "size"?, "sha256"?}}``. A list, dict or set
    met again inside itself is ``{"$cycle": true}``, met again elsewhere ``{"$shared": true}``; containers
    deeper than :data:`PROJECTION_MAX_DEPTH` are ``{"$elided": {"reason": "too_deep"}}``.

    :raises TypeError: a value is not of an exact content-domain type.
    """
    active: set[int] = set()  # ids of the mutable containers being projected (the current path)
    seen: set[int] = set()  # ids of every mutable container projected
    stack: list[_ProjectFrame] = []
    node = value
    while True:
        cls = type(node)
        result = _project_leaf(node, cls)
        if result is _END:
            mutable = id(node) if cls is list or cls is dict or cls is set else None
            if mutable in active:
                result = {"$cycle": True}
            elif mutable in seen:
                result = {"$shared": True}
            elif len(stack) >= PROJECTION_MAX_DEPTH:
                result = {"$elided": {"reason": TOO_DEEP}}
            else:
                if mutable is not None:
                    active.add(mutable)
                    seen.add(mutable)
                stack.append(_project_open(node, cls, mutable))
        if result is not _END:
            if not stack:
                return result
            stack[-1].results.append(result)
        # The next child of the innermost open container, closing those that are complete.
        while True:
            frame = stack[-1]
            node = next(frame.children, _END)
            if node is not _END:
                break
            stack.pop()
            if frame.mutable is not None:
                active.discard(frame.mutable)
            result = frame.close()
            if not stack:
                return result
            stack[-1].results.append(result)


def project_json(value: Any) -> str:
    """:func:`project` as compact JSON text: strict (no NaN or infinity) and always encodable as UTF-8."""
    return json_text(project(value))
