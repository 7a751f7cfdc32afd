"""Talking about what a user typed without repeating it.

An id, a session name, a time or a URL given on the command line can hold a credential or personal data (a
raw conversation id, a token pasted into an endpoint's path). Error lines end up in terminals, CI logs and
issue reports, so they describe such input by its shape instead of echoing it: :func:`describe_input` says
how long it is and what kind of characters it holds; :func:`scrub` takes the values a user gave out of a
message someone else (click) wrote. (Where an endpoint points is shown by ``cli._common.safe_url``.)

Paths of files given on the command line are not covered: naming the file is what makes an error about it
useful, and it is the user's own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["describe_input", "scrub"]

_HEX = frozenset("0123456789abcdefABCDEF")
_MIN_SCRUBBED = 4


def describe_input(value: object) -> str:
    """``value`` by its shape, never its text: ``"an empty value"`` or ``"a value of 40 characters (hex
    digits only)"``; the kinds are ``hex digits only`` (with a digit, or 8 characters or more: ``abc`` is letters),
    ``letters only``, ``letters and digits``, ``printable characters`` and ``non-printable characters too``."""
    text = value if isinstance(value, str) else str(value)
    stripped = text.strip()
    if not stripped:
        return "an empty value"
    n = len(text)
    if set(stripped) <= _HEX and (len(stripped) >= 8 or any(c.isdigit() for c in stripped)):
        kind = "hex digits only"
    elif stripped.isascii() and stripped.isalpha():
        kind = "letters only"
    elif stripped.isascii() and stripped.isalnum():
        kind = "letters and digits"
    elif text.isprintable():
        kind = "printable characters"
    else:
        kind = "non-printable characters too"
    return f"a value of {n} character{'' if n == 1 else 's'} ({kind})"


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
