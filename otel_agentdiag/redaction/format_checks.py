"""The checks that confirm or excuse a candidate a format's expression found, for what an expression cannot say.

Each takes the ``body`` of a match (see :class:`~otel_agentdiag.redaction.formats.Format`): ``check`` functions
confirm a candidate (a Luhn digit, a phone number's digit count, an address that names someone); ``prose``
functions say a match in captured content is ordinary prose and stays. The Collector runs the expressions alone,
so it masks every candidate: a superset.
"""

from __future__ import annotations


def luhn(body: str) -> bool:
    """A card number: 13-19 digits whose Luhn check digit is right (ISO/IEC 7812-1)."""
    digits = [ord(c) - 48 for c in body if "0" <= c <= "9"]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def national_phone(body: str) -> bool:
    """A national number with a trunk prefix has 9-12 digits (a date such as 01-02-2024 has 8)."""
    return 9 <= sum(c.isdigit() for c in body) <= 12


def public_ipv4(body: str) -> bool:
    """Loopback (127.0.0.0/8) and the unspecified address 0.0.0.0 name no one and no network."""
    return not body.startswith("127.") and body != "0.0.0.0"


def ipv6(body: str) -> bool:
    """A real IPv6 address other than loopback and unspecified, with a digit: ``bad::cafe`` parses, but two hex
    words with ``::`` between are more likely a name than an address."""
    import ipaddress

    try:
        address = ipaddress.IPv6Address(body)
    except ValueError:
        return False
    return not (address.is_loopback or address.is_unspecified) and any(c.isdigit() for c in body)


_PLAIN_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz")
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~+/=-")


def prose_after_scheme(body: str) -> bool:
    """In prose, "Basic understanding", "token limit" or "Bearer bonds." are words, not credentials: what follows
    the scheme is kept when it is shorter than 8 characters, holds a character no token has, or is an ordinary
    word (a capital, then lower-case letters, then perhaps ``.``, ``-`` or ``~``)."""
    word = body.split()[-1]
    if len(word) < 8 or not set(word) <= _TOKEN_CHARS:
        return True
    word = word.rstrip(".-~")
    return word[:1].isalpha() and set(word[1:]) <= _PLAIN_WORD_CHARS
