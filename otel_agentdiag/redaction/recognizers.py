"""The public-safety check: does a string look like a credential, personal data, a URL or an absolute path?

One job: decide, for a string a rule would otherwise keep, whether it must not leave the process.
:func:`is_sensitive` answers yes or no; :func:`recognise` says which format of
:data:`~otel_agentdiag.redaction.formats.FORMATS` matched (an id such as ``"gitlab_token"``, never the value), for
diagnostics and tests. :func:`credential_spans` finds the credentials and card numbers inside captured content.

How a string is examined:

1. **Hidden characters are a violation outright** (:data:`HIDDEN_CHARACTER`): C0 and C1 controls and DEL, every
   format character (Unicode category Cf: zero-width space/joiners, soft hyphen, BOM, the bidi embeddings,
   overrides, isolates and marks U+202A-U+202E, U+2066-U+2069, U+200E/U+200F, U+061C), the tag block
   U+E0000-U+E007F, the line and paragraph separators, variation selectors (they can carry bytes behind an
   emoji), Hangul fillers, and lone surrogates. No name, model or service string needs them; they hide text
   from a reader and split a token so a pattern misses it.
2. **Non-ASCII text is folded before matching**: compatibility decomposition (NFKD, which folds everything NFKC
   folds: the full-width U+FF53 U+FF4B U+FF0D are ``sk-``), combining marks removed (an ``s`` with an acute
   accent is an ``s``), the common Cyrillic and Greek look-alikes of Latin letters and the dash, slash and colon
   look-alikes mapped to ASCII. The folded form is only matched, never exported. ASCII text (almost every kept
   string) skips this.
3. **The table is matched**, formats in table order (credentials first). For speed, one expression first finds
   which anchor literals the lower-cased text holds (``sk-``, ``glpat-``, ``@``, ``://``, ...): only the formats
   of those anchors, and the three without one (card and phone numbers), are tried, each behind a cheap
   necessary test (digits for the numbers, an ``=`` or ``:`` for assignments). Formats with a confirming check
   (Luhn for card numbers, a digit count for national phone numbers, parsing for IPv6, loopback for IP
   addresses) go on searching past a candidate the check refuses, so a failed one never hides another.

4. **Random tokens**: a string no format matched is checked for a high-entropy token
   (:func:`~otel_agentdiag.redaction.entropy.random_token`, answered as :data:`RANDOM_TOKEN`): a key of a shape
   no format documents, in a value meant to be a name. Not in captured content (prose, ids and digests are
   ordinary content there) and not in the Collector's mirror (RE2 cannot count).

Not recognised, by design: secrets without a documented shape that are short (under 20 characters) or made of
words (a random password, a passphrase), confusables beyond the common Cyrillic and Greek letters, numbers
spelled out in words.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from otel_agentdiag.redaction.entropy import RANDOM_TOKEN, random_token
from otel_agentdiag.redaction.formats import FORMATS, Format

__all__ = [
    "HIDDEN_CHARACTER",
    "HIDDEN_CHARACTERS",
    "RANDOM_TOKEN",
    "credential_spans",
    "fold",
    "is_sensitive",
    "recognise",
]

HIDDEN_CHARACTER: Final = "hidden_character"
"""What :func:`recognise` returns for a string holding a control, format, bidi, tag or other hidden character."""

_RANGES: Final = (
    (0x00, 0x1F), (0x7F, 0x9F),  # C0, DEL, C1
    (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891),
    (0x8E2, 0x8E2), (0x115F, 0x1160), (0x180B, 0x180F), (0x200B, 0x200F), (0x2028, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0),
    (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE007F), (0xE0100, 0xE01EF),
)  # fmt: skip
"""Code point ranges of hidden characters (every Cc and Cf of Unicode 15, plus the invisible extras named above;
a test checks the Cc/Cf part against ``unicodedata``). Lone surrogates are matched separately."""


def _class(ranges: tuple[tuple[int, int], ...]) -> str:
    """A character class of ``ranges``: escapes below U+00A0 (both engines read ``\\xHH`` as a code point), the
    characters themselves above (RE2 has no ``\\uHHHH``; Python's ``re`` and YAML carry them as they are)."""

    def char(code: int) -> str:
        return f"\\x{code:02x}" if code < 0xA0 else chr(code)

    return "[" + "".join(char(a) if a == b else f"{char(a)}-{char(b)}" for a, b in ranges) + "]"


HIDDEN_CHARACTERS: Final = _class(_RANGES)
"""The hidden characters as one character class (the Collector's mirror uses it too)."""
_HIDDEN: Final = re.compile(HIDDEN_CHARACTERS[:-1] + "\ud800-\udfff]")
_ASCII_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_ASCII_STRIP: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""The ASCII controls folding removes (not tab, line feed and carriage return)."""

# --- folding ------------------------------------------------------------------------------------------------
_MARKS = re.compile(r"[\u0300-\u036f\u0483-\u0489\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_STRIP: Final = re.compile(
    _MARKS.pattern[:-1] + _class(((0x00, 0x08), (0x0B, 0x0C), (0x0E, 0x1F), *_RANGES[1:]))[1:-1] + "\ud800-\udfff]"
)
"""Removed before matching: combining marks and hidden characters but tab, line feed and carriage return (they
separate the words of captured content)."""
_LOOKALIKES: Final[dict[int, int]] = str.maketrans(
    (
        "\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0423\u0405\u0406\u0408\u0430"
        "\u0435\u043e\u0440\u0441\u0445\u0443\u0455\u0456\u0458\u04bb\u0501\u051b\u051d\u04cf\u0391\u0392"
        "\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7\u03bf\u03b1\u03b9\u03bd"
        "\u03c1\u03c5\u03ba\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2044\u2215\u2236\ua789\u043a\u050d"
        "\u0261"
    ),
    "ABEKMHOPCTXYSIJaeopcxysijhdqwlABEZHIKMNOPTYXoaivpuk-------//::kGg",
)
"""Cyrillic and Greek letters that look like Latin ones, and dash, slash and colon look-alikes (NFKD keeps them)."""


def fold(text: str) -> str:
    """``text`` as it is matched: NFKD, combining marks and hidden characters removed, look-alikes mapped to
    ASCII. ASCII text is returned as it is."""
    return text if text.isascii() else _fold_char(text)


def _fold_char(text: str) -> str:
    """:func:`fold` without its ASCII shortcut (captured content folds ASCII controls away too)."""
    return _STRIP.sub("", unicodedata.normalize("NFKD", text)).translate(_LOOKALIKES)


# --- guards: cheap necessary conditions, so most expressions never run --------------------------------------
_DIGIT_SHAPE = re.compile(r"[0-9](?:[0-9]{3}|[ -][0-9])")
"""Four digits in a row, or two digits with a space or dash between: card and phone numbers all have one."""
_DISCORD_MIDDLE = re.compile(r"\.[A-Za-z0-9_-]{6}\.")
"""The middle part of a Discord bot token: six token characters between two dots."""
_DIGIT_DOT = re.compile(r"[0-9]\.[0-9]")
_HEX32 = re.compile(r"[0-9a-f]{32}")
"""32 hex digits in a row (in the lower-cased text): what an Azure key is."""
_AT_WORD = re.compile(r"[ (\[{<]at[ )\]}>]|@")
"""An ``at`` written to stand for ``@`` (in the lower-cased text), or an ``@``."""

_GUARDS: Final[Mapping[str, Callable[[str], bool]]] = {
    "always": lambda text: True,
    "assign": lambda text: "=" in text or ":" in text,
    "space": lambda text: " " in text,
    "colon": lambda text: "::" in text or text.count(":") >= 7,
    "discord": lambda text: _DISCORD_MIDDLE.search(text) is not None,
    "dotted_digits": lambda text: text.count(".") >= 3 and _DIGIT_DOT.search(text) is not None,
    "digits": lambda text: _DIGIT_SHAPE.search(text) is not None,
    "SK": lambda text: "SK" in text,
    "hex32": lambda text: _HEX32.search(text.lower()) is not None,
    "at_word": lambda text: _AT_WORD.search(text.lower()) is not None,
}
"""``Format.needs`` → a test that every text the format matches (and its check confirms) passes."""
_PREFILTERS: Final[Mapping[str, str]] = {"digits": _DIGIT_SHAPE.pattern, "hex32": _HEX32.pattern}
"""The guards a format without an anchor may need, as expressions over the lower-cased text (the prefilter)."""


def _trie(words: list[str]) -> str:
    """An expression matching any of ``words``, factored by first character so the regex engine tests each
    position against a handful of branches, not all of them (Python's ``re`` does not do this itself)."""
    if words == [""]:
        return ""
    heads: dict[str, list[str]] = {}
    for word in sorted(set(words)):
        heads.setdefault(word[:1], []).append(word[1:])
    branches = []
    for head, tails in heads.items():
        if head == "":
            continue
        rest = _trie(tails)
        optional = "" in tails and len(tails) > 1
        branches.append(re.escape(head) + (f"(?:{rest})?" if optional else rest if len(tails) == 1 else f"(?:{rest})"))
    return "|".join(branches)


class _Entry:
    """A format, its compiled expression and its guard."""

    __slots__ = ("check", "compiled", "id", "index", "needs", "prose")

    def __init__(self, fmt: Format, index: int) -> None:
        self.id = fmt.id
        self.index = index
        self.compiled = re.compile(f"{fmt.lead}(?P<{fmt.id}>{fmt.body}){fmt.trail}")
        self.needs = fmt.needs
        self.check = fmt.check
        self.prose = fmt.prose

    def first(self, text: str, confirm: bool = True) -> tuple[int, int] | None:
        """The body span of the first match that the check confirms (a failed candidate does not hide one that
        starts after it), or ``None``."""
        search, check, name = self.compiled.search, self.check, self.id
        position = 0
        while (match := search(text, position)) is not None:
            start, end = match.span(name)
            if not confirm or check is None or check(text[start:end]):
                return start, end
            position = match.start() + 1
        return None

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Every confirmed body span that is not prose, left to right, not overlapping (captured content)."""
        out: list[tuple[int, int]] = []
        search, check, prose, name = self.compiled.search, self.check, self.prose, self.id
        position = 0
        while (match := search(text, position)) is not None:
            start, end = match.span(name)
            body = text[start:end]
            if (check is None or check(body)) and (prose is None or not prose(body)):
                out.append((start, end))
                position = max(end, match.start() + 1)
            else:
                position = match.start() + 1
        return out


class _Table:
    """The formats indexed for speed: one expression finds which anchor literals the lower-cased text holds;
    only the formats of those anchors, and the few formats without one, are tried, each behind its guard."""

    __slots__ = ("anchored", "anchors", "entries", "free", "prefilter")

    def __init__(self, formats: tuple[Format, ...]) -> None:
        self.entries = tuple(_Entry(fmt, index) for index, fmt in enumerate(formats))
        own: dict[str, set[int]] = {}
        for fmt in formats:
            for anchor in fmt.anchors.split():
                own.setdefault(anchor, set()).add(formats.index(fmt))
        # The trie reports the longest anchor at a position: one found stands for its prefixes too.
        self.anchored: dict[str, tuple[_Entry, ...]] = {}
        for anchor in own:
            indexes = set().union(*(own.get(anchor[:end], set()) for end in range(1, len(anchor) + 1)))
            self.anchored[anchor] = tuple(self.entries[index] for index in sorted(indexes))
        self.anchors = re.compile(_trie(list(own)))
        self.free = tuple(entry for fmt, entry in zip(formats, self.entries, strict=True) if not fmt.anchors)
        # One expression for the common case, a text with nothing to try: the anchors, or (when every format
        # without an anchor needs a guard with an expression: digits, 32 hex digits) the shapes those need.
        prefilter = self.anchors.pattern
        if self.free:
            if any(entry.needs not in _PREFILTERS for entry in self.free):
                prefilter = ""  # no shortcut: a free format could match anything
            else:
                prefilter += "".join("|" + _PREFILTERS[needs] for needs in sorted({e.needs for e in self.free}))
        self.prefilter = re.compile(prefilter) if prefilter else None

    def candidates(self, text: str) -> list[_Entry]:
        """The entries worth trying on ``text``, in table order: those with an anchor the lower-cased text holds
        and those without anchors; of these, those whose guard passes."""
        lowered = text.lower()
        if self.prefilter is not None and self.prefilter.search(lowered) is None:
            return []
        search = self.anchors.search
        match = search(lowered)
        if match is None:
            pool: Iterable[_Entry] = self.free
        else:
            anchored = self.anchored
            chosen = {entry.index: entry for entry in self.free}
            while match is not None:  # from every position: anchors may overlap
                chosen.update((entry.index, entry) for entry in anchored[match.group()])
                match = search(lowered, match.start() + 1)
            pool = [chosen[index] for index in sorted(chosen)]
        verdicts: dict[str, bool] = {}
        out = []
        for entry in pool:
            passed = verdicts.get(entry.needs)
            if passed is None:
                passed = verdicts[entry.needs] = _GUARDS[entry.needs](text)
            if passed:
                out.append(entry)
        return out


_ALL: Final = _Table(FORMATS)
_CONTENT: Final = _Table(tuple(f for f in FORMATS if f.content))
assert _ALL.prefilter is not None and _CONTENT.prefilter is not None, "a format without an anchor needs a prefilter"
_CONTENT_QUICK: Final = re.compile(_CONTENT.prefilter.pattern + "|" + _ASCII_STRIP.pattern)


def recognise(text: str, *, confirm: bool = True) -> str | None:
    """The id of a format ``text`` matches (:data:`HIDDEN_CHARACTER` for a hidden character), or ``None``.
    Formats are tried in table order (credentials first); the id is the first that matches.

    ``confirm=False`` tries every expression as it is, without anchors, guards or confirming checks (Luhn,
    digit counts, address parsing): it answers what the expressions alone flag, which is what the Collector's
    mirror of this check masks (a superset of what ``recognise`` flags).
    """
    if text.isascii():
        if _ASCII_CONTROL.search(text) is not None:
            return HIDDEN_CHARACTER
    elif _HIDDEN.search(text) is not None:
        return HIDDEN_CHARACTER
    else:
        text = fold(text)
    if not confirm:
        return next((entry.id for entry in _ALL.entries if entry.first(text, confirm=False)), None)
    for entry in _ALL.candidates(text):
        if entry.first(text) is not None:
            return entry.id
    return RANDOM_TOKEN if random_token(text) else None


def is_sensitive(text: str) -> bool:
    """The public-safety check: does ``text`` look like a credential, personal data (an e-mail address, a card
    number, an IBAN, a phone number, an IP address), a URL or an absolute path, or hold a hidden character or a
    random-looking token?

    Applied to every string a token, array or scalar rule would otherwise keep, and to every registered name, so an
    allowed key cannot carry a secret. It is deliberately broader than necessary (any URL, not only those with user
    info or a query). See the module docstring for the order of the steps and what is out of reach.
    """
    return recognise(text) is not None


# --- captured content ---------------------------------------------------------------------------------------
def _content_spans(text: str) -> list[tuple[int, int]]:
    """Every credential/card span of (folded) ``text``, sorted and merged."""
    candidates = _CONTENT.candidates(text)
    if not candidates:
        return []
    spans = sorted(span for entry in candidates for span in entry.spans(text))
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        elif end > start:
            merged.append((start, end))
    return merged


def credential_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every credential and card number in ``text`` (positions in ``text`` itself), sorted,
    not overlapping. What counts is the formats marked ``content`` in the table (not e-mail addresses, phone
    numbers, IP addresses, URLs or paths: those are ordinary content). A credential split or disguised with
    hidden or full-width characters is found too, and its span covers the characters that disguised it."""
    if text.isascii():
        if _CONTENT_QUICK.search(text.lower()) is None:
            return []  # the common case: no anchor, no digits, no control character that could split one
        if _ASCII_STRIP.search(text) is None:
            return _content_spans(text)
    folded = _fold_char(text)
    if folded == text:
        return _content_spans(text)
    if not _content_spans(folded):
        return []
    # Something is there: fold again character by character, so each folded position maps back to the original.
    pieces = [_fold_char(char) for char in text]
    origin = [index for index, piece in enumerate(pieces) for _ in piece]
    spans = _content_spans("".join(pieces))
    if not spans:
        return [(0, len(text))]  # the per-character fold differs from the whole-string one: fail closed
    out: list[tuple[int, int]] = []
    for start, end in spans:
        begin, finish = origin[start], origin[end - 1] + 1
        if out and begin <= out[-1][1]:
            out[-1] = (out[-1][0], max(finish, out[-1][1]))
        else:
            out.append((begin, finish))
    return out
