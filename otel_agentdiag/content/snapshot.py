"""``snapshot()``: a deep copy of captured content into plain data, taken on the agent's thread.

The snapshot is what gets stored: it does not change when the agent mutates its messages afterwards, holds no
reference to the agent's objects, and contains only the value domain of :mod:`otel_agentdiag.content.codec`
(plain data and the markers of :mod:`otel_agentdiag.content.values`). Taking it runs no user code beyond
reading the value (iteration, ``items()``, attribute reads, ``model_dump()``, ``repr()`` of opaque objects) and
never raises.

Excluded even when content is captured, each replaced by an :class:`~otel_agentdiag.content.values.Elided`
marker (the key of a mapping entry stays): ``os.environ``; header and cookie objects; mapping entries whose key
names a credential, headers, cookies or the environment (:data:`SENSITIVE_KEYS`,
:data:`SENSITIVE_KEY_SUFFIXES`, compared after :func:`normal_key`); bytes and base64 strings over the media limit.
Inside every string, URL user-info, query and fragment, and every credential and card number the public-safety
recogniser knows (:func:`otel_agentdiag.redaction.recognizers.credential_spans`: the same table of formats the
redaction policy applies to kept strings, so ``glpat-...``, ``sk-ant-...``, ``password=...`` or
``user:pass@host:5432``, also when split by zero-width or written in full-width characters) become ``[redacted]``.

This module walks the value; the parts it applies live beside it: :mod:`~otel_agentdiag.content.sensitive` (which
keys name a secret), :mod:`~otel_agentdiag.content.scrub` (strings and media) and
:mod:`~otel_agentdiag.content.kinds` (how any other type is taken).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from otel_agentdiag.content.kinds import (
    BYTES,
    DATACLASS,
    ENUM,
    EXCEPTION,
    EXCLUDED,
    FLOAT,
    INT,
    MAPPING,
    MODEL,
    OPAQUE,
    PYDANTIC,
    SEQUENCE,
    SET,
    STR,
    UNREPRESENTABLE,
    USER_STRING,
    captured_object,
    kind_of,
    opaque,
    type_name,
)
from otel_agentdiag.content.scrub import _CLEAN as _CLEAN  # the tests look at the memory here
from otel_agentdiag.content.scrub import _CLEAN_SIZE as _CLEAN_SIZE
from otel_agentdiag.content.scrub import REDACTED, is_media, media, scrub
from otel_agentdiag.content.sensitive import SENSITIVE_KEY_SUFFIXES, SENSITIVE_KEYS, key_elision, normal_key
from otel_agentdiag.content.values import TOO_DEEP, CapturedException, CapturedObject, Elided

__all__ = ["REDACTED", "SENSITIVE_KEYS", "SENSITIVE_KEY_SUFFIXES", "ContentLimits", "normal_key", "snapshot"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ContentLimits:
    """Limits of a snapshot.

    :param max_depth: container levels kept; a container nested deeper becomes ``Elided("too_deep")``.
    :param media_bytes: bytes, and base64 or ``data:...;base64,`` strings, longer than this (bytes, or
        characters) become ``Elided("media", size, sha256)``.
    """

    max_depth: int = 64
    media_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        for name in ("max_depth", "media_bytes"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"ContentLimits.{name} must be a positive int, not {value!r}")


_DEFAULT_LIMITS = ContentLimits()

_ELIDED_TOO_DEEP = Elided(TOO_DEEP)

_KEY_CACHE: dict[str, tuple[str, Elided | None]] = {}
"""``{key: (scrubbed key, Elided or None)}`` for short exact-``str`` keys: most mappings repeat a few keys
(``role``, ``content``), so each is classified and scrubbed once per process. Only keys within the media limit
are looked up here (a longer one may be media). Bounded by ``_KEY_CACHE_SIZE``."""
_KEY_CACHE_SIZE = 4096
_KEY_CACHE_MAX_LEN = 128


# -- the walk ------------------------------------------------------------------------------------------------


class _Snapshot:
    """One snapshot: the limits and the memo of mutable containers already copied."""

    __slots__ = ("max_depth", "media_bytes", "memo")

    def __init__(self, limits: ContentLimits) -> None:
        self.max_depth = limits.max_depth
        self.media_bytes = limits.media_bytes
        # id(original) -> (copy, original): the original is kept so its id cannot be reused during the walk.
        self.memo: dict[int, tuple[Any, Any]] = {}

    def text(self, value: str) -> Any:
        if len(value) > self.media_bytes and is_media(value):
            return media(value.encode("utf-8", "surrogatepass"))
        return scrub(value)

    def walk(self, value: Any, depth: int) -> Any:
        """The snapshot of ``value`` found ``depth`` containers deep. Never raises."""
        try:
            cls = type(value)
            if cls is str:
                return scrub(value) if len(value) <= self.media_bytes else self.text(value)
            if cls is dict:
                return self.walk_mapping(value, value.items(), depth)
            if cls is list:
                return self.walk_sequence(value, depth)
            if cls is int or cls is float or cls is bool or value is None:
                return value
            if cls is tuple:
                if depth >= self.max_depth:
                    return _ELIDED_TOO_DEEP
                depth += 1
                return tuple([self.walk(item, depth) for item in value])
            if cls is bytes:
                return media(value) if len(value) > self.media_bytes else value
            if cls is set:
                return self.walk_set(value, depth)
            if cls is frozenset:
                return self.walk_frozenset(value, depth)
            if cls is Elided or cls is CapturedObject:
                return value
            if cls is CapturedException:
                if depth >= self.max_depth:
                    return _ELIDED_TOO_DEEP
                return CapturedException(value.type, value.message, self.args(value.args, depth + 1))
            return self.other(value, cls, depth)
        except Exception:  # noqa: BLE001 - RecursionError, a raising property, a lying __len__...
            return opaque(value)

    def other(self, value: Any, cls: type, depth: int) -> Any:
        kind, detail = kind_of(cls)
        if kind == STR:
            return self.text(str.__str__(value))
        if kind == USER_STRING:
            return self.text(str.__str__(value.data))
        if kind == INT:
            return int.__int__(value)
        if kind == FLOAT:
            return float.__float__(value)
        if kind == BYTES:
            data = bytes(memoryview(value))
            return media(data) if len(data) > self.media_bytes else data
        if kind == EXCLUDED:
            return detail
        if kind == OPAQUE:
            return captured_object(value)
        if kind == ENUM:
            return self.walk(value.value, depth)
        if kind == EXCEPTION:
            if depth >= self.max_depth:
                return _ELIDED_TOO_DEEP
            try:
                message = str(value)
                message = scrub(str.__str__(message))
            except Exception:  # noqa: BLE001 - __str__ is user code
                message = UNREPRESENTABLE
            return CapturedException(type_name(cls), message, self.args(value.args, depth + 1))
        if kind == PYDANTIC:
            return self.walk(value.model_dump(mode="python", warnings=False), depth)
        if kind == MODEL:
            return self.walk(value.model_dump(mode="python"), depth)
        if kind == DATACLASS:
            return self.walk_fields(value, detail, depth)
        if kind == MAPPING:
            return self.walk_mapping(value, value.items(), depth)
        if kind == SEQUENCE:
            return self.walk_sequence(value, depth)
        if kind == SET:
            return self.walk_set(value, depth)
        return self.walk_frozenset(value, depth)

    def args(self, args: Any, depth: int) -> tuple[Any, ...]:
        if type(args) is not tuple:
            args = tuple(args)
        return tuple([self.walk(item, depth) for item in args])

    def enter(self, value: Any, depth: int, out: Any) -> Any:
        """Before copying mutable container ``value`` into the empty ``out``: the copy already made of it (a
        cycle or a shared container), the too-deep marker, or None after registering ``out`` as its copy."""
        seen = self.memo.get(id(value))
        if seen is not None:
            return seen[0]
        if depth >= self.max_depth:
            return _ELIDED_TOO_DEEP
        self.memo[id(value)] = (out, value)
        return None

    def walk_mapping(self, value: Any, items: Iterable[tuple[Any, Any]], depth: int) -> Any:
        out: dict[Any, Any] = {}
        found = self.enter(value, depth, out)
        if found is not None:
            return found
        depth += 1
        walk = self.walk
        media = self.media_bytes
        for key, item in items:
            if type(key) is str:
                if len(key) <= media:  # then its snapshot does not depend on the limits: cacheable
                    cached = _KEY_CACHE.get(key)
                    if cached is None:
                        cached = (scrub(key), key_elision(key))
                        if len(key) <= _KEY_CACHE_MAX_LEN and len(_KEY_CACHE) < _KEY_CACHE_SIZE:
                            _KEY_CACHE[key] = cached
                else:
                    cached = (self.text(key), key_elision(key))
                new_key, elided = cached
                if elided is not None:
                    out[new_key] = elided
                elif type(item) is str and len(item) <= media:  # the common case, without a call to walk
                    out[new_key] = scrub(item)
                else:
                    out[new_key] = walk(item, depth)
            else:
                new_key, elided = self.key(key, depth)
                self.put(out, key, new_key, walk(item, depth) if elided is None else elided)
        return out

    def walk_fields(self, value: Any, names: tuple[str, ...], depth: int) -> Any:
        out: dict[Any, Any] = {}
        found = self.enter(value, depth, out)
        if found is not None:
            return found
        depth += 1
        for name in names:
            new_key, elided = self.key(name, depth)
            # A credential field is never read: it may be a property that computes the secret.
            self.put(out, name, new_key, self.walk(getattr(value, name), depth) if elided is None else elided)
        return out

    def key(self, key: Any, depth: int) -> tuple[Any, Elided | None]:
        """The snapshot of mapping key ``key``, and the marker replacing its value when it names a secret."""
        elided = key_elision(str.__str__(key)) if isinstance(key, str) else None
        return self.walk(key, depth), elided

    @staticmethod
    def put(out: dict[Any, Any], key: Any, new_key: Any, new_value: Any) -> None:
        try:
            out[new_key] = new_value
        except TypeError:  # the snapshot of a hashable key is not hashable (a frozen dataclass became a dict)
            out[captured_object(key)] = new_value

    def walk_sequence(self, value: Any, depth: int) -> Any:
        out: list[Any] = []
        found = self.enter(value, depth, out)
        if found is not None:
            return found
        depth += 1
        walk = self.walk
        media = self.media_bytes
        append = out.append
        for item in value:
            if type(item) is str and len(item) <= media:
                append(scrub(item))
            else:
                append(walk(item, depth))
        return out

    def walk_set(self, value: Any, depth: int) -> Any:
        out: set[Any] = set()
        found = self.enter(value, depth, out)
        if found is not None:
            return found
        for item in value:
            out.add(self.hashable(item, depth + 1))
        return out

    def walk_frozenset(self, value: Any, depth: int) -> Any:
        if depth >= self.max_depth:
            return _ELIDED_TOO_DEEP
        return frozenset([self.hashable(item, depth + 1) for item in value])

    def hashable(self, value: Any, depth: int) -> Any:
        """The snapshot of a set item: when it is not hashable, the item's :class:`CapturedObject` instead."""
        new = self.walk(value, depth)
        try:
            hash(new)
        except TypeError:
            return captured_object(value)
        return new


def snapshot(value: Any, limits: ContentLimits | None = None) -> Any:
    """A deep copy of ``value`` as plain data and markers, with the exclusions of this module applied.

    The result shares nothing mutable with ``value``; containers that ``value`` shares or that contain
    themselves are shared, or contain themselves, in the result too. Never raises: a part that cannot be
    taken becomes a :class:`CapturedObject` (and the whole value one, should the walk itself fail).
    """
    try:
        return _Snapshot(limits or _DEFAULT_LIMITS).walk(value, 0)
    except Exception:  # noqa: BLE001 - e.g. RecursionError raised while recovering from one
        try:
            return opaque(value)
        except Exception:  # noqa: BLE001
            return CapturedObject("<unknown>", UNREPRESENTABLE)
