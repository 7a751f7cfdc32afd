"""Scrubbing of captured strings: URL user-info, query and fragment, credentials and card numbers cut; media found.

Every string a snapshot keeps goes through :func:`scrub`; the credential formats are those of
:func:`otel_agentdiag.redaction.recognizers.credential_spans`, the table the redaction policy applies to kept
strings. Bytes, and base64 or ``data:`` strings, over the media limit become an
:class:`~otel_agentdiag.content.values.Elided` ``media`` marker (:func:`is_media`, :func:`media`).
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urlsplit

from otel_agentdiag.content.values import MEDIA, Elided
from otel_agentdiag.redaction.recognizers import credential_spans

__all__ = ["REDACTED", "is_media", "media", "scrub"]

REDACTED = "[redacted]"
"""What replaces URL user-info, query and fragment, and each credential found in a string."""

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


def scrub(text: str) -> str:
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


def is_media(text: str) -> bool:
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


def media(data: bytes) -> Elided:
    return Elided(MEDIA, size=len(data), sha256=hashlib.sha256(data).hexdigest())
