"""How a snapshot takes a value that is not exactly a plain type: its kind (cached per type), or an opaque record.

:func:`kind_of` sorts a type once (str/int/float/bytes subclasses, header, cookie and environment containers,
exceptions, enums, pydantic and other ``model_dump`` models, dataclasses, mappings, sets, sequences, anything
else opaque); :func:`captured_object` records an opaque value as its type and scrubbed, truncated repr.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import UserString
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from otel_agentdiag.content.scrub import scrub
from otel_agentdiag.content.sensitive import ELIDED_BY_REASON
from otel_agentdiag.content.values import COOKIE, ENVIRONMENT, HEADERS, CapturedObject, Elided

__all__ = [
    "BYTES",
    "DATACLASS",
    "ENUM",
    "EXCEPTION",
    "EXCLUDED",
    "FLOAT",
    "FROZENSET",
    "INT",
    "MAPPING",
    "MAX_REPR",
    "MODEL",
    "OPAQUE",
    "PYDANTIC",
    "SEQUENCE",
    "SET",
    "STR",
    "UNREPRESENTABLE",
    "USER_STRING",
    "captured_object",
    "kind_of",
    "opaque",
    "type_name",
]

MAX_REPR = 1000
"""Characters of a :class:`CapturedObject` repr, at most (the last one ``…`` when cut)."""

UNREPRESENTABLE = "<unrepresentable>"
"""The repr recorded when a value's own ``repr()`` (or ``str()``) fails or must not be shown."""

# -- opaque values -------------------------------------------------------------------------------------------


def type_name(cls: type) -> str:
    """``module.qualname`` of ``cls`` (only the qualname for builtins); never raises."""
    try:
        module = cls.__module__
        qualname = cls.__qualname__
        if type(qualname) is not str:
            qualname = str(qualname)
        if module == "builtins" or type(module) is not str:
            return qualname
        return f"{module}.{qualname}"
    except Exception:  # noqa: BLE001 - a type with a hostile metaclass
        return "<unknown>"


def captured_object(value: Any) -> CapturedObject:
    """``value`` as a :class:`CapturedObject`: its type and scrubbed, truncated repr; never raises."""
    try:
        text = repr(value)
        if type(text) is not str:
            raise TypeError("__repr__ returned a non-string")
        text = scrub(text[: 2 * MAX_REPR])
        if len(text) > MAX_REPR:
            text = text[: MAX_REPR - 1] + "…"
    except Exception:  # noqa: BLE001 - repr() is user code
        text = UNREPRESENTABLE
    return CapturedObject(type_name(type(value)), text)


def opaque(value: Any) -> CapturedObject:
    """``value``'s type only: for a structure that failed half-way, whose repr could show withheld entries."""
    return CapturedObject(type_name(type(value)), UNREPRESENTABLE)


# -- classification of non-plain types (cached per type) ------------------------------------------------------

STR, INT, FLOAT, BYTES, EXCEPTION, ENUM, PYDANTIC, MODEL, DATACLASS = range(9)
MAPPING, SET, FROZENSET, SEQUENCE, OPAQUE, EXCLUDED, USER_STRING = range(9, 16)

_EXCLUDED_TYPES: Mapping[tuple[str, str], str] = {
    # (top-level package, qualname) of a class anywhere in the value type's MRO; nothing is imported.
    ("os", "_Environ"): ENVIRONMENT,
    ("httpx", "Headers"): HEADERS,
    ("httpx", "Cookies"): COOKIE,
    ("requests", "CaseInsensitiveDict"): HEADERS,
    ("http", "HTTPMessage"): HEADERS,
    ("email", "Message"): HEADERS,
    ("http", "BaseCookie"): COOKIE,
    ("http", "SimpleCookie"): COOKIE,
    ("http", "Morsel"): COOKIE,
    ("http", "CookieJar"): COOKIE,
    ("multidict", "CIMultiDict"): HEADERS,
    ("multidict", "CIMultiDictProxy"): HEADERS,
    ("aiohttp", "AbstractCookieJar"): COOKIE,
    ("urllib3", "HTTPHeaderDict"): HEADERS,
    ("wsgiref", "Headers"): HEADERS,
    ("starlette", "Headers"): HEADERS,
    ("werkzeug", "Headers"): HEADERS,
}
"""Header, cookie and environment containers: elided whatever they hold (with their subclasses)."""

_KINDS: dict[type, tuple[int, Any]] = {}
"""``{type: (kind, detail)}``; bounded by ``_KINDS_SIZE`` so classes made on the fly cannot grow it."""
_KINDS_SIZE = 2048


def _excluded(cls: type) -> Elided | None:
    for base in cls.__mro__:
        module = base.__module__
        if type(module) is str:
            reason = _EXCLUDED_TYPES.get((module.partition(".")[0], base.__qualname__))
            if reason is not None:
                return ELIDED_BY_REASON[reason]
    return None


def _classify(cls: type) -> tuple[int, Any]:
    """How values of a type that is not exactly a plain type are snapshotted."""
    if issubclass(cls, str):
        return STR, None
    if issubclass(cls, int):
        return INT, None
    if issubclass(cls, float):
        return FLOAT, None
    if issubclass(cls, (bytes, bytearray, memoryview)):
        return BYTES, None
    if issubclass(cls, UserString):  # a Sequence of characters: kept as the string it wraps
        return USER_STRING, None
    elided = _excluded(cls)
    if elided is not None:
        return EXCLUDED, elided
    if issubclass(cls, BaseException):
        return EXCEPTION, None
    if issubclass(cls, enum.Enum):
        return ENUM, None
    if callable(getattr(cls, "model_dump", None)):  # on the class: an instance __getattr__ (a mock) is not asked
        pydantic = any(
            base.__qualname__ == "BaseModel" and str(base.__module__).partition(".")[0] == "pydantic"
            for base in cls.__mro__
        )
        return (PYDANTIC if pydantic else MODEL), None
    if dataclasses.is_dataclass(cls):
        return DATACLASS, tuple(field.name for field in dataclasses.fields(cls))
    if issubclass(cls, range):  # a Sequence, but possibly of 10**18 items: its repr says it all
        return OPAQUE, None
    if issubclass(cls, Mapping):
        return MAPPING, None
    if issubclass(cls, frozenset):
        return FROZENSET, None
    if issubclass(cls, AbstractSet):
        return SET, None
    if issubclass(cls, Sequence):
        return SEQUENCE, None
    return OPAQUE, None  # iterators and generators included: never consumed


def kind_of(cls: type) -> tuple[int, Any]:
    found = _KINDS.get(cls)
    if found is None:
        found = _classify(cls)
        if len(_KINDS) < _KINDS_SIZE:
            _KINDS[cls] = found
    return found
