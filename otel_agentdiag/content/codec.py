"""The two stored forms of captured content: a lossless encoding (authoritative) and a JSON projection (to read).

**Lossless** (:data:`ENCODING`, ``agentdiag-content/1``): :func:`encode` turns a value of the content domain
into ASCII JSON text (``{"v":1,"root":<node>}``, byte for byte what ``json.dumps(..., ensure_ascii=True,
allow_nan=False, separators=(",", ":"))`` writes for that tree) and :func:`decode` turns it back into an equal
value: same types, float bit patterns, dict order, and the same sharing and cycles of mutable containers.
The domain is ``None``, ``bool``, ``int``, ``float``, ``str`` (lone surrogates included), ``bytes``, ``list``,
``tuple``, ``dict``, ``set``, ``frozenset`` and the markers of :mod:`otel_agentdiag.content.values`, checked by
exact type. Nodes::

    null, true, false, "string"             themselves
    ["S", "part", "part", ...]              a str with a high surrogate code point directly followed by a low
                                            one, split between the two (JSON would read them back as one)
    123                                     an int of at most 4,096 bits; larger: ["i", "<hex(n)>"]
    1.5                                     a finite float (repr); NaN/inf: ["f", "<16 hex digits, IEEE 754>"]
    ["l", ...] ["t", ...]                   list, tuple
    ["s", ...] ["z", ...]                   set, frozenset (items in the order of their encoded text)
    ["d", k1, v1, k2, v2, ...]              dict, in insertion order; keys are nodes
    ["b", "<base64>"]                       bytes
    ["E", type, message, ["t", ...]]        CapturedException
    ["O", type, repr]                       CapturedObject
    ["X", reason, size|null, sha256|null]   Elided
    ["r", n]                                the n-th list, dict or set opened so far (shared, or a cycle)

Decoding is data only: it imports nothing and runs nothing, and any input that is not such a document raises
:class:`ContentDecodeError`, whose message never contains the input. Encoding and decoding are iterative
and refuse nesting deeper than :data:`MAX_DEPTH` containers.

**Projection** (:func:`project`, :func:`project_json`): plain JSON for people and SQL (``json_extract``). JSON
data projects to itself; everything else becomes a ``{"$...": ...}`` object (see :func:`project`). It is lossy
and never read back.
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

from otel_agentdiag.content.values import TOO_DEEP, CapturedException, CapturedObject, Elided

__all__ = [
    "ENCODING",
    "MAX_DEPTH",
    "PROJECTION_MAX_DEPTH",
    "ContentDecodeError",
    "decode",
    "encode",
    "project",
    "project_json",
]

ENCODING = "agentdiag-content/1"
"""The name of the lossless encoding, stored beside each encoded value."""

MAX_DEPTH = 1000
"""Containers nested in one another, at most, in an encoded value (a ``CapturedException`` counts as one)."""

PROJECTION_MAX_DEPTH = 100
"""Containers nested in one another that :func:`project` shows; deeper ones are ``{"$elided": {"reason":
"too_deep"}}`` (the lossless form keeps them)."""

_VERSION = 1
_MAX_INT_BITS = 4096
_MAX_DECIMAL_DIGITS = 4000
_SAFE_INT = 2**53

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


class ContentDecodeError(ValueError):
    """Stored content that is not a valid ``agentdiag-content/1`` document. The message never quotes it."""


# -- encode --------------------------------------------------------------------------------------------------

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
                return _document(text)
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
                return _document(text)
            stack[-1].parts.append(text)


def _encode_plain(value: Any, out: list[str]) -> None:
    """Append the encoding of a value :func:`_is_plain` accepted: the same text :func:`encode`'s general walk
    writes (tested), by a shorter road (no references can occur, no surrogate pair, no big int)."""
    cls = type(value)
    if cls is str:
        out.append(_escape(value))
    elif cls is dict:
        out.append('["d"')
        for key, item in value.items():
            out.append(",")
            out.append(_escape(key))
            out.append(",")
            if type(item) is str:
                out.append(_escape(item))
            else:
                _encode_plain(item, out)
        out.append("]")
    elif cls is list or cls is tuple:
        out.append('["l"' if cls is list else '["t"')
        for item in value:
            out.append(",")
            if type(item) is str:
                out.append(_escape(item))
            else:
                _encode_plain(item, out)
        out.append("]")
    elif value is None:
        out.append("null")
    elif cls is bool:
        out.append("true" if value else "false")
    elif cls is int:
        out.append(int.__repr__(value))
    else:
        out.append(float.__repr__(value))


def _plain(value: Any) -> bool:
    """:func:`_is_plain` from the top, False for a value nested deeper than the interpreter recurses (the
    iterative general paths cope with it)."""
    try:
        return _is_plain(value, set(), 0)
    except RecursionError:
        return False


def encode_with_projection(value: Any) -> tuple[bytes, str]:
    """``(encode(value), project_json(value))``, sharing the work: plain JSON data (the usual messages) is
    recognised once, then written by short roads (the C JSON encoder for the projection)."""
    if not _plain(value):
        return encode(value), _json_text(project(value))
    out: list[str] = []
    _encode_plain(value, out)
    return _document("".join(out)), _json_text(value)


def _document(root: str) -> bytes:
    return ('{"v":1,"root":' + root + "}").encode("ascii")


# -- decode --------------------------------------------------------------------------------------------------

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
        if type(version) is not int or version != _VERSION:
            raise ContentDecodeError(f"unsupported content version (this release reads version {_VERSION})")
        return _build(document["root"])
    except ContentDecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the contract: malformed input raises ContentDecodeError only
        raise ContentDecodeError(f"malformed content ({type(exc).__name__})") from None


# -- projection ----------------------------------------------------------------------------------------------

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


def _json_text(value: Any) -> str:
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
        return {"$set": sorted(results, key=_json_text)}


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


def _is_plain(value: Any, seen: set[int], depth: int) -> bool:
    """Whether ``value`` projects to itself: JSON data (str keys, no lone surrogate, ints within ±2**53, finite
    floats; tuples count as arrays) with no list or dict met twice and no deeper than the projection goes."""
    cls = type(value)
    if cls is str:
        return value.isascii() or _SURROGATE.search(value) is None
    if value is None or cls is bool:
        return True
    if cls is int:
        return bool(-_SAFE_INT <= value <= _SAFE_INT)
    if cls is float:
        return math.isfinite(value)
    if depth >= PROJECTION_MAX_DEPTH:
        return False
    if cls is dict:
        if id(value) in seen:
            return False
        seen.add(id(value))
        depth += 1
        for key, item in value.items():
            if type(key) is not str or not (key.isascii() or _SURROGATE.search(key) is None):
                return False
            if type(item) is str:
                if not (item.isascii() or _SURROGATE.search(item) is None):
                    return False
            elif not _is_plain(item, seen, depth):
                return False
        return True
    if cls is list or cls is tuple:
        if cls is list:
            if id(value) in seen:
                return False
            seen.add(id(value))
        depth += 1
        for item in value:
            if type(item) is str:
                if not (item.isascii() or _SURROGATE.search(item) is None):
                    return False
            elif not _is_plain(item, seen, depth):
                return False
        return True
    return False


def project_json(value: Any) -> str:
    """:func:`project` as compact JSON text: strict (no NaN or infinity) and always encodable as UTF-8.

    A value that projects to itself (the common case: messages as plain JSON data) goes straight to the C JSON
    encoder; the result is the same text (tested)."""
    return _json_text(value if _plain(value) else project(value))
