"""Talking about what a user typed without repeating it.

An id, a session name, a time or a URL given on the command line can hold a credential or personal data (a
raw conversation id, a token pasted into an endpoint's path). Error lines end up in terminals, CI logs and
issue reports, so they describe such input by its shape instead of echoing it: :func:`describe_input` says
how long it is and what kind of characters it holds; :func:`safe_url` shows where an endpoint points (scheme,
host, port and the path segments that are plain words) and never its user info, query, fragment or a path
segment that could be a token; :func:`scrub` takes the values a user gave out of a message someone else
(click) wrote.

Paths of files given on the command line are not covered: naming the file is what makes an error about it
useful, and it is the user's own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["describe_input", "safe_url", "scrub"]

_HEX = frozenset("0123456789abcdefABCDEF")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9._\-]{0,15}")
"""A path segment shown as it is: a short word (``v1``, ``traces``, ``otlp``, ``tenant-a``), no longer than 16."""
_MIN_SCRUBBED = 4


def describe_input(value: object) -> str:
    """``value`` by its shape, never its text: ``"an empty value"`` or ``"a value of 40 characters (hex
    digits only)"``; the kinds are ``hex digits only``, ``letters and digits``, ``printable characters`` and
    ``non-printable characters too``."""
    text = value if isinstance(value, str) else str(value)
    stripped = text.strip()
    if not stripped:
        return "an empty value"
    n = len(text)
    if set(stripped) <= _HEX:
        kind = "hex digits only"
    elif stripped.isascii() and stripped.isalnum():
        kind = "letters and digits"
    elif text.isprintable():
        kind = "printable characters"
    else:
        kind = "non-printable characters too"
    return f"a value of {n} character{'' if n == 1 else 's'} ({kind})"


def _segment(segment: str) -> str:
    if not segment or _WORD.fullmatch(segment):
        # A word can still be a credential (a short password used as a path): the recogniser decides.
        from otel_agentdiag.redaction.policy import is_sensitive

        return "…" if segment and is_sensitive(segment) else segment
    return "…"


def safe_url(url: str) -> str:
    """Where ``url`` points, safe to print: ``scheme://host:port/path``, where only path segments that are
    short words stay (any other segment, a token say, shows as ``…``); never user info, query or fragment.
    ``<unparseable endpoint>`` when it is not a URL."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unparseable endpoint>"
    if ":" in host:
        host = f"[{host}]"
    scheme = parts.scheme if _WORD.fullmatch(parts.scheme or "") else "…"
    path = "/".join(_segment(s) for s in parts.path.split("/"))
    return f"{scheme}://{host}{port}{path}"


def scrub(message: str, given: Iterable[str], keep: Iterable[str] = ()) -> str:
    """``message`` with every value of ``given`` (command-line words) of at least 4 characters replaced by
    ``<`` its :func:`describe_input` ``>``, in one pass (longest first); words in ``keep`` (option and command
    names) stay. Shorter words are left: they cannot hold a secret, and replacing them would mangle the text."""
    kept = set(keep)
    words = sorted({w for w in given if len(w.strip()) >= _MIN_SCRUBBED and w not in kept}, key=len, reverse=True)
    if not words:
        return message
    pattern = re.compile("|".join(re.escape(w) for w in words))
    return pattern.sub(lambda m: f"<{describe_input(m.group(0))}>", message)
