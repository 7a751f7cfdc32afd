"""The marker values of captured content: what stands in for a value that is not plain data.

A snapshot (:func:`otel_agentdiag.content.snapshot`) holds plain data (``None``, ``bool``, ``int``, ``float``,
``str``, ``bytes``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``) and these three markers, nothing
else. They are immutable values: frozen, compared and hashed by their fields (a :class:`CapturedException`
is hashable when its ``args`` are).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CREDENTIAL = "credential"
"""A secret: an ``api_key``, ``password``, ``authorization``... entry of a mapping."""
HEADERS = "headers"
"""HTTP headers: a headers object (``httpx.Headers``, ``http.client.HTTPMessage``...) or a ``headers`` entry."""
COOKIE = "cookie"
"""Cookies: a cookie jar or cookie object, or a ``cookie``/``set_cookie`` entry."""
ENVIRONMENT = "environment"
"""The process environment: ``os.environ`` or an ``env``/``environ`` entry."""
MEDIA = "media"
"""Binary or base64 media (images, audio, files) over the snapshot's size limit; ``size`` and ``sha256`` set."""
TOO_DEEP = "too_deep"
"""A container nested deeper than the snapshot's depth limit."""
TOO_LARGE = "too_large"
"""A whole captured value whose lossless encoding is over the store's payload limit; ``size`` and ``sha256``
(of the encoding) set."""
UNENCODABLE = "unencodable"
"""A whole captured value the lossless encoding refused (never produced by a snapshot)."""


@dataclass(frozen=True, slots=True)
class CapturedException:
    """An exception, as data: never the exception object itself (no traceback, frames or chained causes).

    ``type`` is ``module.qualname`` (only the qualname for builtins, e.g. ``ValueError``); ``message`` is
    ``str(exc)`` taken at capture time and scrubbed like any captured string; ``args`` is the snapshot of
    ``exc.args``, always a tuple.
    """

    type: str
    message: str
    args: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class CapturedObject:
    """A value with no data form: its type (``module.qualname``, builtins bare) and its ``repr()``.

    The repr is scrubbed like any captured string and cut to 1,000 characters (ending in ``…`` when cut);
    ``"<unrepresentable>"`` when it could not be taken, or when the value is a structure whose repr could
    show entries the snapshot would have withheld.
    """

    type: str
    repr: str


@dataclass(frozen=True, slots=True)
class Elided:
    """Something deliberately not kept, and why (one of this module's reason constants).

    ``size`` (bytes) and ``sha256`` (hex digest) describe what was dropped when that is safe to keep: for
    media, so the same image can be recognised across captures; never for credentials.
    """

    reason: str
    size: int | None = None
    sha256: str | None = None
