"""The random-token check: does a kept string hold a high-entropy token, a secret whose shape no format documents?

Secret scanners find such tokens by their Shannon entropy, with a threshold per alphabet: Yelp's detect-secrets
flags quoted hex strings at 3.0 bits a character and base64 ones at 4.5; gitleaks' generic rules ask 3.5 of a
value assigned to a secret's name, after a minimum length in the rule's expression. The same idea here, in our own
terms, for strings that are meant to be names (a model, a version, a namespace): no context is needed, so each
alphabet has a minimum length below which nothing is judged, and a second measure besides entropy that tells
names from noise.

A string is cut into *runs* of base64 and base64url characters (``A-Z a-z 0-9 + / _ -``, ``=`` padding dropped);
a run holds *pieces* (letters and digits between two of ``+ / _ -``), and a word of eight or more letters of one
case splits a piece too (``cnrytool7d008f2fa48b`` is a name and 12 random characters). A run is a random token
when one of these holds:

- **hex**: a piece of 20 or more hex digits, not all decimal, with entropy of at least 3.0 bits (detect-secrets'
  hex limit). A random 20-digit hex string passes that nineteen times in twenty, a 32-digit one (an Azure OpenAI
  key, an MD5-shaped key) every time in our tests. Our own 16-digit observer ids, git's abbreviated commit ids (7
  to 12 digits), UUIDs (pieces of 8, 4 and 12) and dates stay names; a full 40-digit commit id does not.
- **alphanumeric**: a piece of 20 or more letters and digits with entropy of at least 3.5 bits (gitleaks'
  generic limit) made of *short words*: read as camel case (a capital and lower-case letters, a run of capitals,
  a run of digits are one word each), its words are 3 characters long or less on average. Names rarely have a
  piece that long, and when they have it is made of words (``ContextWindowExceededError``: 6.5 on average,
  ``Qwen25Coder32BInstruct``: 3.7); random letters and digits average under 2.
- **base64**: a run of 32 or more characters with entropy of at least 4.2 bits, made of short words, and with a
  separator at most every tenth character. Model ids are long runs too
  (``sentence-transformers/paraphrase-multilingual-mpnet-base-v2``), but of words joined by separators: more
  separators, longer words, lower entropy.

The thresholds were chosen on ``tests/redaction/data/free_text_corpus.txt`` (real model ids: the bundled price
table's, Hugging Face, Bedrock, Vertex AI, Ollama and Azure deployment names; versions; resource values), on
which the check flags nothing, and on seeded random tokens of each alphabet, which it flags from the lengths above
(``tests/redaction/test_random_tokens.py`` holds both). Whatever the alphabet, a piece or run that counts up or
down at more than 40% of its steps (``abc0123456789``) is a sequence, not random: entropy alone would
take it for one. What it cannot see: a short secret (under 20 characters), a secret made of words (a
passphrase), a low-entropy secret (``aaaa...``), and a third or so of the random tokens of one letter case and
digits (``x7k2...``: their letter runs are as long as a name's words). The Collector's mirror of the
public-safety check cannot count (RE2 has no entropy); it does not run this check.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Final

__all__ = ["RANDOM_TOKEN", "entropy", "random_token"]

RANDOM_TOKEN: Final = "random_token"
"""What :func:`~otel_agentdiag.redaction.recognizers.recognise` answers for a string this check flags."""

HEX_MIN_LENGTH: Final = 20
HEX_MIN_ENTROPY: Final = 3.0
ALNUM_MIN_LENGTH: Final = 20
ALNUM_MIN_ENTROPY: Final = 3.5
BASE64_MIN_LENGTH: Final = 32
BASE64_MIN_ENTROPY: Final = 4.2
BASE64_MAX_SEPARATORS: Final = 0.1
MAX_WORD_LENGTH: Final = 3.0
MAX_SEQUENCE: Final = 0.4
"""The thresholds (see the module docstring): minimum lengths in characters, entropies in bits a character,
separators as a share of the run's characters, the longest average word a random piece or run has, the largest
share of steps to a neighbouring character (``ab``, ``98``) it has."""

_RUN: Final = re.compile(rf"[A-Za-z0-9+/_-]{{{min(HEX_MIN_LENGTH, ALNUM_MIN_LENGTH, BASE64_MIN_LENGTH)},}}")
_PIECE: Final = re.compile(rf"[A-Za-z0-9]{{{min(HEX_MIN_LENGTH, ALNUM_MIN_LENGTH)},}}")
_HEX: Final = re.compile(r"[0-9A-Fa-f]+")
_SEPARATORS: Final = frozenset("+/_-")
_LONG_WORD: Final = re.compile(r"(?=[a-z]*[g-z])[a-z]{8,}|(?=[A-Z]*[G-Z])[A-Z]{8,}")
"""Eight or more letters of one case, one of them not a hex digit: a word, never part of a random piece (a name
with a random suffix, ``cnrytool7d008f2fa48b``, is judged by its suffix alone)."""
_WORD: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
"""A camel-case word: a run of capitals not followed by a lower-case letter, a capital and lower-case letters, or
a run of digits."""


def entropy(text: str) -> float:
    """Shannon entropy of ``text``'s characters, in bits a character."""
    length = len(text)
    total = 0.0
    for char in set(text):
        share = text.count(char) / length
        total -= share * math.log2(share)
    return total


def _short_words(text: str) -> bool:
    """Whether ``text``'s camel-case words (separators left out) are :data:`MAX_WORD_LENGTH` characters long or
    less on average."""
    words = _WORD.findall(text)
    return bool(words) and sum(map(len, words)) <= MAX_WORD_LENGTH * len(words)


def _sequence(text: str) -> bool:
    """Whether ``text`` counts up or down (``abcdef``, ``0123456789``, ``zyx``) at more than
    :data:`MAX_SEQUENCE` of its steps: entropy counts characters, not their order, and takes such a run for a
    random one. Random text steps to a neighbour at about 2 steps in the alphabet's size (hex: 1 in 8)."""
    steps = sum(abs(ord(b) - ord(a)) == 1 for a, b in itertools.pairwise(text))
    return steps > MAX_SEQUENCE * (len(text) - 1)


def _random_piece(piece: str) -> bool:
    if len(piece) < min(HEX_MIN_LENGTH, ALNUM_MIN_LENGTH) or _sequence(piece):
        return False
    if len(piece) >= HEX_MIN_LENGTH and _HEX.fullmatch(piece) is not None:
        return not piece.isdigit() and entropy(piece.lower()) >= HEX_MIN_ENTROPY
    return len(piece) >= ALNUM_MIN_LENGTH and entropy(piece) >= ALNUM_MIN_ENTROPY and _short_words(piece)


def _random_run(run: str) -> bool:
    for piece in _PIECE.findall(run):
        if any(_random_piece(part) for part in _LONG_WORD.split(piece)):
            return True
    length = len(run)
    return (
        length >= BASE64_MIN_LENGTH
        and not _sequence(run)
        and sum(char in _SEPARATORS for char in run) <= BASE64_MAX_SEPARATORS * length
        and entropy(run) >= BASE64_MIN_ENTROPY
        and _short_words(run)
    )


def random_token(text: str) -> bool:
    """Whether ``text`` holds a random-looking token (see the module docstring). Cheap for the common case: a
    string without a run of 20 base64 characters is decided by one expression search."""
    return any(_random_run(run) for run in _RUN.findall(text))
