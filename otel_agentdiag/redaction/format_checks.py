"""The checks that confirm or excuse a candidate a format's expression found, for what an expression cannot say.

Each takes the ``body`` of a match (see :class:`~otel_agentdiag.redaction.formats.Format`): ``check`` functions
confirm a candidate (a Luhn digit, a phone number's digit count, an address that names someone); ``prose``
functions say a match in captured content is ordinary prose and stays. The Collector runs the expressions alone,
so it masks every candidate: a superset.
"""

from __future__ import annotations

from otel_agentdiag.redaction.entropy import HEX_MIN_ENTROPY, entropy


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


def random_hex(body: str) -> bool:
    """A hex key, not a number or a pattern: not all decimal digits, and as varied as the random-token check asks
    of hex (:data:`~otel_agentdiag.redaction.entropy.HEX_MIN_ENTROPY` bits a character)."""
    return not body.isdigit() and entropy(body.lower()) >= HEX_MIN_ENTROPY


def iban(body: str) -> bool:
    """An IBAN: 15-34 characters without the spaces, whose mod-97 check (ISO 7064: the first four characters
    moved to the end, letters as 10-35) leaves 1."""
    compact = body.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    digits = "".join(str(int(char, 36)) for char in compact[4:] + compact[:4])
    return int(digits) % 97 == 1


def email_tld(body: str) -> bool:
    """A munged e-mail address ends in a top-level domain: two or more letters after the last dot (written
    ``.``, ``(dot)``, ``[dot]`` or `` dot ``)."""
    last = body.rstrip()
    for dot in (".", ")", "]", "}", ">", " "):
        last = last.rpartition(dot)[2]
    return len(last) >= 2 and last.isascii() and last.isalpha()
