"""The lossless decoder: ``agentdiag-content/1`` text back to the value it encodes, data only, never trusting it.

See :mod:`otel_agentdiag.content.codec` for the format. Decoding imports nothing and runs nothing; any input that
is not such a document raises :class:`~otel_agentdiag.content.document.ContentDecodeError`, whose message never
contains the input.
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
from typing import Any

from otel_agentdiag.content.document import MAX_DEPTH, VERSION, ContentDecodeError
from otel_agentdiag.content.values import CapturedException, CapturedObject, Elided

__all__ = ["decode"]

_END = object()

_HEX_INT = re.compile(r"-?0x[0-9a-f]+")
_HEX_FLOAT = re.compile(r"[0-9a-f]{16}")
_JSON_WS = re.compile(r"[ \t\n\r]*")
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_JSON_STRING = re.compile(r'"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"')
_JSON_LITERALS = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}


def _skip(text: str, pos: int) -> int:
    """The position of the first non-whitespace character of ``text`` at or after ``pos``."""
    match = _JSON_WS.match(text, pos)
    return pos if match is None else match.end()


def _reject_constant(name: str) -> Any:
    raise ContentDecodeError("NaN and Infinity are not JSON")


def _parse_deep(text: str) -> Any:
    """JSON ``text`` parsed without recursion (for what ``json.loads`` cannot nest that deep)."""
    limit = MAX_DEPTH + 2  # the document object and a leaf node inside the innermost container
    stack: list[Any] = []  # open arrays and objects
    keys: list[str] = []  # the pending key of each open object
    size = len(text)
    pos = _skip(text, 0)

    def key_at(pos: int) -> int:
        match = _JSON_STRING.match(text, pos)
        if match is None:
            raise ContentDecodeError("malformed JSON object")
        keys.append(json.loads(match.group()))
        pos = _skip(text, match.end())
        if not text.startswith(":", pos):
            raise ContentDecodeError("malformed JSON object")
        return _skip(text, pos + 1)

    while True:
        if pos >= size:
            raise ContentDecodeError("truncated JSON")
        char = text[pos]
        value: Any
        if char == "[" or char == "{":
            if len(stack) >= limit:
                raise ContentDecodeError(f"content nested deeper than {MAX_DEPTH} containers")
            container: Any = [] if char == "[" else {}
            pos = _skip(text, pos + 1)
            if not text.startswith("]" if char == "[" else "}", pos):
                stack.append(container)
                if char == "{":
                    pos = key_at(pos)
                continue
            value, pos = container, pos + 1
        elif char == '"':
            match = _JSON_STRING.match(text, pos)
            if match is None:
                raise ContentDecodeError("malformed JSON string")
            value, pos = json.loads(match.group()), match.end()
        elif char in _JSON_LITERALS:
            word, value = _JSON_LITERALS[char]
            if not text.startswith(word, pos):
                raise ContentDecodeError("malformed JSON")
            pos += len(word)
        else:
            match = _JSON_NUMBER.match(text, pos)
            if match is None:
                raise ContentDecodeError("malformed JSON")
            number = match.group()
            value, pos = (float(number) if match.group(1) or match.group(2) else int(number)), match.end()
        # Hand the value to its container; close the containers it completes.
        while True:
            if not stack:
                if _skip(text, pos) != size:
                    raise ContentDecodeError("extra data after JSON")
                return value
            top = stack[-1]
            if type(top) is list:
                top.append(value)
            else:
                top[keys.pop()] = value
            pos = _skip(text, pos)
            char = text[pos : pos + 1]
            if char == ",":
                pos = _skip(text, pos + 1)
                if type(top) is dict:
                    pos = key_at(pos)
                break
            if char != ("]" if type(top) is list else "}"):
                raise ContentDecodeError("malformed JSON")
            value, pos = stack.pop(), pos + 1


def _load_json(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        return _parse_deep(text)
    except ValueError:
        raise ContentDecodeError("not JSON") from None


_OPENED = frozenset("ltszdE")


class _DecodeFrame:
    """A container node being decoded: the value it fills (or the items it collects) and where it is."""

    __slots__ = ("index", "key", "node", "out", "tag")

    def __init__(self, tag: str, node: list[Any], out: Any, index: int) -> None:
        self.tag = tag
        self.node = node
        self.out = out
        self.index = index
        self.key: Any = _END

    def add(self, value: Any) -> None:
        tag, out = self.tag, self.out
        if tag == "d":
            if self.key is _END:
                self.key = value
                return
            key, self.key = self.key, _END
            try:
                out[key] = value
            except TypeError:
                raise ContentDecodeError("unhashable dict key") from None
        elif tag == "s":
            try:
                out.add(value)
            except TypeError:
                raise ContentDecodeError("unhashable set item") from None
        else:
            out.append(value)

    def close(self) -> Any:
        tag, out = self.tag, self.out
        if tag == "t":
            return tuple(out)
        if tag == "z":
            try:
                return frozenset(out)
            except TypeError:
                raise ContentDecodeError("unhashable set item") from None
        if tag == "E":
            (args,) = out
            if type(args) is not tuple:
                raise ContentDecodeError("exception args must be a tuple node")
            exception_type, message = self.key
            return CapturedException(exception_type, message, args)
        return out


def _open(tag: str, node: list[Any], refs: list[Any]) -> _DecodeFrame:
    if tag == "E":
        if len(node) != 4:
            raise ContentDecodeError("malformed exception node")
        frame = _DecodeFrame(tag, node, [], 3)
        frame.key = (_text(node[1]), _text(node[2]))  # an exception node's type and message
        return frame
    if tag == "d":
        if len(node) % 2 != 1:
            raise ContentDecodeError("dict node with a key and no value")
        out: Any = {}
    elif tag == "l":
        out = []
    elif tag == "s":
        out = set()
    else:
        return _DecodeFrame(tag, node, [], 1)
    refs.append(out)
    return _DecodeFrame(tag, node, out, 1)


def _leaf(tag: str, node: list[Any], refs: list[Any]) -> Any:
    arity = len(node)
    if tag == "r":
        index = node[1] if arity == 2 else None
        if type(index) is not int or not 0 <= index < len(refs):
            raise ContentDecodeError("reference to no container opened before it")
        return refs[index]
    if tag == "i" and arity == 2 and type(node[1]) is str and _HEX_INT.fullmatch(node[1]):
        return int(node[1], 16)
    if tag == "f" and arity == 2 and type(node[1]) is str and _HEX_FLOAT.fullmatch(node[1]):
        return struct.unpack(">d", bytes.fromhex(node[1]))[0]
    if tag == "b" and arity == 2 and type(node[1]) is str:
        try:
            return base64.b64decode(node[1], validate=True)
        except ValueError:
            raise ContentDecodeError("malformed base64 in a bytes node") from None
    if tag == "S" and arity >= 2 and all(type(part) is str for part in node[1:]):
        return "".join(node[1:])
    if tag == "O" and arity == 3:
        return CapturedObject(_text(node[1]), _text(node[2]))
    if tag == "X" and arity == 4 and (node[2] is None or type(node[2]) is int):
        return Elided(_text(node[1]), node[2], None if node[3] is None else _text(node[3]))
    raise ContentDecodeError("unknown or malformed node")


def _text(node: Any) -> str:
    """The str a str node (a JSON string or an ``"S"`` node) stands for."""
    if type(node) is str:
        return node
    if type(node) is list and len(node) >= 2 and node[0] == "S" and all(type(part) is str for part in node[1:]):
        return "".join(node[1:])
    raise ContentDecodeError("a marker field is not a string")


def _build(root: Any) -> Any:
    """The value a parsed document's root node stands for (iteratively, so depth cannot exhaust the stack)."""
    refs: list[Any] = []
    stack: list[_DecodeFrame] = []
    node = root
    while True:
        cls = type(node)
        if cls is list:
            if not node or type(node[0]) is not str:
                raise ContentDecodeError("a node must start with its tag")
            tag = node[0]
            if tag in _OPENED:
                if len(stack) >= MAX_DEPTH:
                    raise ContentDecodeError(f"content nested deeper than {MAX_DEPTH} containers")
                stack.append(_open(tag, node, refs))
                value: Any = _END
            else:
                value = _leaf(tag, node, refs)
        elif cls is str or cls is int or cls is bool or node is None:
            value = node
        elif cls is float and math.isfinite(node):
            value = node
        else:
            raise ContentDecodeError("unexpected JSON value in a node")
        if value is not _END:
            if not stack:
                return value
            stack[-1].add(value)
        # The next child of the innermost open node, closing those that are complete.
        while True:
            frame = stack[-1]
            if frame.index < len(frame.node):
                node = frame.node[frame.index]
                frame.index += 1
                break
            stack.pop()
            value = frame.close()
            if not stack:
                return value
            stack[-1].add(value)


def decode(data: bytes | str) -> Any:
    """The value :func:`encode` encoded as ``data`` (bytes are UTF-8).

    :raises ContentDecodeError: for anything else (not JSON, another version, a malformed node, a dangling
        reference, an unhashable key, nesting deeper than :data:`MAX_DEPTH`...), and only that.
    """
    try:
        if isinstance(data, (bytes, bytearray, memoryview)):
            text = bytes(data).decode("utf-8")
        elif isinstance(data, str):
            text = str(data)
        else:
            raise ContentDecodeError("content must be bytes or str")
        document = _load_json(text)
        if type(document) is not dict or document.keys() != {"v", "root"}:
            raise ContentDecodeError("not an agentdiag content document")
        version = document["v"]
        if type(version) is not int or version != VERSION:
            raise ContentDecodeError(f"unsupported content version (this release reads version {VERSION})")
        return _build(document["root"])
    except ContentDecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the contract: malformed input raises ContentDecodeError only
        raise ContentDecodeError(f"malformed content ({type(exc).__name__})") from None
