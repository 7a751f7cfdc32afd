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
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import re
from collections import UserString
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from otel_agentdiag.content.values import (
    COOKIE,
    CREDENTIAL,
    ENVIRONMENT,
    HEADERS,
    MEDIA,
    TOO_DEEP,
    CapturedException,
    CapturedObject,
    Elided,
)
from otel_agentdiag.redaction.recognizers import credential_spans

__all__ = ["REDACTED", "SENSITIVE_KEYS", "SENSITIVE_KEY_SUFFIXES", "ContentLimits", "normal_key", "snapshot"]

REDACTED = "[redacted]"
"""What replaces URL user-info, query and fragment, and each credential found in a string."""

MAX_REPR = 1000
"""Characters of a :class:`CapturedObject` repr, at most (the last one ``…`` when cut)."""


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

# -- mapping keys --------------------------------------------------------------------------------------------

SENSITIVE_KEYS: Mapping[str, str] = {
    **dict.fromkeys(("headers", "http_headers", "request_headers", "response_headers"), HEADERS),
    **dict.fromkeys(("cookie", "cookies", "set_cookie", "cookie_jar"), COOKIE),
    **dict.fromkeys(("env", "environ", "environment_variables", "env_vars"), ENVIRONMENT),
    **dict.fromkeys(
        (
            "authorization",
            "proxy_authorization",
            "auth",
            "api_key",
            "apikey",
            "x_api_key",
            "api_token",
            "access_token",
            "access_key",
            "refresh_token",
            "id_token",
            "auth_token",
            "session_token",
            "csrf_token",
            "csrftoken",
            "xsrf_token",
            "token",
            "bearer",
            "secret",
            "client_secret",
            "secret_key",
            "secret_access_key",
            "password",
            "passwd",
            "pwd",
            "passphrase",
            "pin",
            "private_key",
            "signing_key",
            "encryption_key",
            "credentials",
            "credential",
            "connection_string",
            "conn_str",
            "dsn",
        ),
        CREDENTIAL,
    ),
}
"""Normalised mapping keys (see :func:`normal_key`) whose value is never kept, and the reason recorded instead."""

SENSITIVE_KEY_SUFFIXES = (
    "_api_key",
    "_apikey",
    "_access_key",
    "_auth",
    "_secret",
    "_secret_key",
    "_secret_access_key",
    "_private_key",
    "_password",
    "_passwd",
    "_pwd",
    "_pass",
    "_passphrase",
    "_token",
    "_credentials",
    "_credential",
    "_connection_string",
    "_conn_str",
    "_dsn",
    "_cookie",
)
"""Normalised key endings that also name a credential (``openai_api_key``, ``x_auth_token``, ``db_password``,
``db_pass``, ``sentry_dsn``). ``max_tokens`` and ``input_tokens`` do not match: ``_tokens`` is not ``_token``.
(``pass`` and ``session_id`` alone are not credentials: a test result, a conversation id.)"""

_SQUASHED_KEYS = frozenset(key.replace("_", "") for key, reason in SENSITIVE_KEYS.items() if reason == CREDENTIAL)
"""The credential names without separators (``APIKEY``, ``accesstoken``, ``x-apikey``): also credential keys."""

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")


def normal_key(key: str) -> str:
    """A mapping key as it is compared: camelCase split (``accessToken`` → ``access_token``, ``XApiKey`` →
    ``x_api_key``), lower-cased, every run of other characters (``-``, ``.``, spaces) one ``_``, no ``_`` at
    either end (``__Password__`` → ``password``)."""
    return _SEPARATORS.sub("_", _CAMEL_BOUNDARY.sub("_", key).lower()).strip("_")


_ELIDED_BY_REASON = {reason: Elided(reason) for reason in (CREDENTIAL, HEADERS, COOKIE, ENVIRONMENT)}
_ELIDED_TOO_DEEP = Elided(TOO_DEEP)
_UNREPRESENTABLE = "<unrepresentable>"

_KEY_CACHE: dict[str, tuple[str, Elided | None]] = {}
"""``{key: (scrubbed key, Elided or None)}`` for short exact-``str`` keys: most mappings repeat a few keys
(``role``, ``content``), so each is classified and scrubbed once per process. Only keys within the media limit
are looked up here (a longer one may be media). Bounded by ``_KEY_CACHE_SIZE``."""
_KEY_CACHE_SIZE = 4096
_KEY_CACHE_MAX_LEN = 128


def _key_elision(key: str) -> Elided | None:
    """The marker replacing the value of entry ``key``, or None when the key names nothing sensitive."""
    normal = normal_key(key)
    reason = SENSITIVE_KEYS.get(normal)
    if reason is None and (normal.endswith(SENSITIVE_KEY_SUFFIXES) or normal.replace("_", "") in _SQUASHED_KEYS):
        reason = CREDENTIAL
    return None if reason is None else _ELIDED_BY_REASON[reason]


# -- strings -------------------------------------------------------------------------------------------------

_URL_REST = re.compile(r"://[^\s\"'`<>]+")
_SCHEME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")
_SCHEME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/=_\-\s]*")


def _redact_url(url: str) -> str:
    """``url`` with its user-info, query and fragment replaced by ``[redacted]`` (all of it when malformed)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. a malformed IPv6 host
        return REDACTED
    netloc = parts.netloc
    userinfo = "@" in netloc
    if not (userinfo or parts.query or parts.fragment):
        return url
    scheme_end = url.index("://") + 3  # kept as written (urlsplit lowercases it)
    host = REDACTED + "@" + netloc.rpartition("@")[2] if userinfo else netloc
    query = "?" + REDACTED if parts.query else ""
    fragment = "#" + REDACTED if parts.fragment else ""
    return url[:scheme_end] + host + parts.path + query + fragment


def _redact_urls(text: str) -> str:
    r"""Every ``scheme://...`` URL in ``text`` through :func:`_redact_url`.

    The same matches as ``[A-Za-z][A-Za-z0-9+.-]*://[^\s"'`<>]+``, found from the literal ``://`` outwards:
    many times faster than that regex, which tries every position of the text, and linear.
    """
    pieces: list[str] = []
    done = pos = 0
    while (match := _URL_REST.search(text, pos)) is not None:
        colon = match.start()
        start = colon
        while start > 0 and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        while start < colon and text[start] not in _SCHEME_START:  # a scheme starts with a letter
            start += 1
        if start == colon:
            pos = colon + 1
            continue
        pieces.append(text[done:start])
        pieces.append(_redact_url(text[start : match.end()]))
        done = pos = match.end()
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


_SHORTEST = 5
"""The shortest text that can hold a URL (``a://b``) or a credential (``pwd=x``, ``xoxb-``)."""


_CLEAN: set[str] = set()
"""Strings already found to hold nothing to cut (only those: never one that held a credential). An agent sends
the same system prompt, tool definitions and earlier messages on every model call, so most captured strings
were seen before. Bounded: at most ``_CLEAN_SIZE`` strings of at most ``_CLEAN_MAX_LEN`` characters."""
_CLEAN_SIZE = 4096
_CLEAN_MAX_LEN = 1024


def _scrub(text: str) -> str:
    """``text`` with URL user-info, query and fragment, and credentials and card numbers, replaced by
    ``[redacted]``. Text without any of them is returned as it is (the same object)."""
    if len(text) < _SHORTEST or text in _CLEAN:
        return text
    original = text
    if "://" in text:
        text = _redact_urls(text)
    spans = credential_spans(text)
    if not spans:
        if text is original and len(text) <= _CLEAN_MAX_LEN:
            if len(_CLEAN) >= _CLEAN_SIZE:
                _CLEAN.clear()
            _CLEAN.add(text)
        return text
    pieces = []
    done = 0
    for start, end in spans:
        pieces.append(text[done:start])
        pieces.append(REDACTED)
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _is_media(text: str) -> bool:
    """Whether ``text`` (already known to be over the media limit) is a base64 ``data:`` URL or base64."""
    if text[:5].lower() == "data:":
        comma = text.find(",", 5, 256)
        if comma > 0 and text[:comma].lower().endswith(";base64"):
            return True
    if _BASE64_TEXT.fullmatch(text) is None:
        return False
    # Base64 has no whitespace or a line break every 64-76 characters; text of words or numbers has far more.
    spaces = text.count(" ") + text.count("\n") + text.count("\r") + text.count("\t")
    return spaces * 16 <= len(text)


def _media(data: bytes) -> Elided:
    return Elided(MEDIA, size=len(data), sha256=hashlib.sha256(data).hexdigest())


# -- opaque values -------------------------------------------------------------------------------------------


def _type_name(cls: type) -> str:
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


def _captured_object(value: Any) -> CapturedObject:
    """``value`` as a :class:`CapturedObject`: its type and scrubbed, truncated repr; never raises."""
    try:
        text = repr(value)
        if type(text) is not str:
            raise TypeError("__repr__ returned a non-string")
        text = _scrub(text[: 2 * MAX_REPR])
        if len(text) > MAX_REPR:
            text = text[: MAX_REPR - 1] + "…"
    except Exception:  # noqa: BLE001 - repr() is user code
        text = _UNREPRESENTABLE
    return CapturedObject(_type_name(type(value)), text)


def _opaque(value: Any) -> CapturedObject:
    """``value``'s type only: for a structure that failed half-way, whose repr could show withheld entries."""
    return CapturedObject(_type_name(type(value)), _UNREPRESENTABLE)


# -- classification of non-plain types (cached per type) ------------------------------------------------------

_STR, _INT, _FLOAT, _BYTES, _EXCEPTION, _ENUM, _PYDANTIC, _MODEL, _DATACLASS = range(9)
_MAPPING, _SET, _FROZENSET, _SEQUENCE, _OPAQUE, _EXCLUDED, _USER_STRING = range(9, 16)

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
                return _ELIDED_BY_REASON[reason]
    return None


def _classify(cls: type) -> tuple[int, Any]:
    """How values of a type that is not exactly a plain type are snapshotted."""
    if issubclass(cls, str):
        return _STR, None
    if issubclass(cls, int):
        return _INT, None
    if issubclass(cls, float):
        return _FLOAT, None
    if issubclass(cls, (bytes, bytearray, memoryview)):
        return _BYTES, None
    if issubclass(cls, UserString):  # a Sequence of characters: kept as the string it wraps
        return _USER_STRING, None
    elided = _excluded(cls)
    if elided is not None:
        return _EXCLUDED, elided
    if issubclass(cls, BaseException):
        return _EXCEPTION, None
    if issubclass(cls, enum.Enum):
        return _ENUM, None
    if callable(getattr(cls, "model_dump", None)):  # on the class: an instance __getattr__ (a mock) is not asked
        pydantic = any(
            base.__qualname__ == "BaseModel" and str(base.__module__).partition(".")[0] == "pydantic"
            for base in cls.__mro__
        )
        return (_PYDANTIC if pydantic else _MODEL), None
    if dataclasses.is_dataclass(cls):
        return _DATACLASS, tuple(field.name for field in dataclasses.fields(cls))
    if issubclass(cls, range):  # a Sequence, but possibly of 10**18 items: its repr says it all
        return _OPAQUE, None
    if issubclass(cls, Mapping):
        return _MAPPING, None
    if issubclass(cls, frozenset):
        return _FROZENSET, None
    if issubclass(cls, AbstractSet):
        return _SET, None
    if issubclass(cls, Sequence):
        return _SEQUENCE, None
    return _OPAQUE, None  # iterators and generators included: never consumed


def _kind(cls: type) -> tuple[int, Any]:
    found = _KINDS.get(cls)
    if found is None:
        found = _classify(cls)
        if len(_KINDS) < _KINDS_SIZE:
            _KINDS[cls] = found
    return found


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
        if len(value) > self.media_bytes and _is_media(value):
            return _media(value.encode("utf-8", "surrogatepass"))
        return _scrub(value)

    def walk(self, value: Any, depth: int) -> Any:
        """The snapshot of ``value`` found ``depth`` containers deep. Never raises."""
        try:
            cls = type(value)
            if cls is str:
                return _scrub(value) if len(value) <= self.media_bytes else self.text(value)
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
                return _media(value) if len(value) > self.media_bytes else value
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
            return _opaque(value)

    def other(self, value: Any, cls: type, depth: int) -> Any:
        kind, detail = _kind(cls)
        if kind == _STR:
            return self.text(str.__str__(value))
        if kind == _USER_STRING:
            return self.text(str.__str__(value.data))
        if kind == _INT:
            return int.__int__(value)
        if kind == _FLOAT:
            return float.__float__(value)
        if kind == _BYTES:
            data = bytes(memoryview(value))
            return _media(data) if len(data) > self.media_bytes else data
        if kind == _EXCLUDED:
            return detail
        if kind == _OPAQUE:
            return _captured_object(value)
        if kind == _ENUM:
            return self.walk(value.value, depth)
        if kind == _EXCEPTION:
            if depth >= self.max_depth:
                return _ELIDED_TOO_DEEP
            try:
                message = str(value)
                message = _scrub(str.__str__(message))
            except Exception:  # noqa: BLE001 - __str__ is user code
                message = _UNREPRESENTABLE
            return CapturedException(_type_name(cls), message, self.args(value.args, depth + 1))
        if kind == _PYDANTIC:
            return self.walk(value.model_dump(mode="python", warnings=False), depth)
        if kind == _MODEL:
            return self.walk(value.model_dump(mode="python"), depth)
        if kind == _DATACLASS:
            return self.walk_fields(value, detail, depth)
        if kind == _MAPPING:
            return self.walk_mapping(value, value.items(), depth)
        if kind == _SEQUENCE:
            return self.walk_sequence(value, depth)
        if kind == _SET:
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
                        cached = (_scrub(key), _key_elision(key))
                        if len(key) <= _KEY_CACHE_MAX_LEN and len(_KEY_CACHE) < _KEY_CACHE_SIZE:
                            _KEY_CACHE[key] = cached
                else:
                    cached = (self.text(key), _key_elision(key))
                new_key, elided = cached
                if elided is not None:
                    out[new_key] = elided
                elif type(item) is str and len(item) <= media:  # the common case, without a call to walk
                    out[new_key] = _scrub(item)
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
        elided = _key_elision(str.__str__(key)) if isinstance(key, str) else None
        return self.walk(key, depth), elided

    @staticmethod
    def put(out: dict[Any, Any], key: Any, new_key: Any, new_value: Any) -> None:
        try:
            out[new_key] = new_value
        except TypeError:  # the snapshot of a hashable key is not hashable (a frozen dataclass became a dict)
            out[_captured_object(key)] = new_value

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
                append(_scrub(item))
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
            return _captured_object(value)
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
            return _opaque(value)
        except Exception:  # noqa: BLE001
            return CapturedObject("<unknown>", _UNREPRESENTABLE)
