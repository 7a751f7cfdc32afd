"""Weak hash keys are refused: a key must be 32 random bytes or more, in a form a generator writes.

Every digest and the key id are public functions of the key, so whoever holds a bundle or an export can test
guesses of the key offline (a human-chosen key falls in a few hundred guesses, and then every id is reversed).
So a key is accepted only when it both has an accepted *form* and looks *random* in it.

**Accepted forms.**

- Text (an argument ``str``, ``AGENTDIAG_HASH_KEY``, ``AGENTDIAG_OTLP_HASH_KEY``): 64 or more hex digits, or
  base64 / base64url (padding optional) of 32 or more bytes, e.g. ``secrets.token_hex(32)``,
  ``secrets.token_urlsafe(32)``, ``openssl rand -hex 32``, ``openssl rand -base64 32``. Anything else (a
  word, a sentence, a name with dashes too short to be base64 of 32 bytes) is refused. The text's UTF-8 bytes
  stay the HMAC key, as before: accepting a key never changes its key id.
- Bytes (an argument ``bytes``, ``IdHasher(key)``, the ``hash.key`` file): 32 bytes or more. Bytes that are all
  printable ASCII without spaces, apart from one final line break, are text typed as bytes and judged as text
  (``openssl rand -hex 32 > hash.key`` works); the line break stays part of the key.

**Looks random.** A key is refused when a fixed pattern coder describes it in at least ``MARGIN_BITS`` (40)
bits fewer than a random key of its length and form needs (``8 * bytes`` bits; hex counts 4 bits a digit,
base64 6 a character). The coder is a prefix code: three literal models (a general one; a "human text" one with
English letter and bigram frequencies and letter-case habits; a "pattern" one for repeats, runs such as
``abcd``/``4321``, keyboard walks such as ``qwerty``/``1qaz``, and interleaved counters), each inside an LZ77
parse that can copy any earlier part (``password123password123``) or name a word from a short list of common
passwords and words (``password``, ``secret``, ``admin``, ...). Hex and base64 keys are also judged as the bytes
they decode to. The first ``WINDOW`` symbols (128; 64 bytes) of a longer key are judged.

Why 40 bits is sound: for any prefix code, the chance that a uniformly random string is described ``m`` bits
shorter than its length is at most ``2**-m`` (Kraft's inequality with Markov's), so a key from a real
generator is refused with probability below ``2**-40`` (the choice among the six models costs ``log2(6)`` bits,
which keeps the union within that bound). A key this coder shortens by 40 bits is one an attacker's guesser
reaches about ``2**40`` times sooner than a random key, at best.

This cannot prove a key random (no test can), only refuse what visibly is not: generate keys, never choose them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
import string
import threading
from collections.abc import Sequence

MIN_KEY_BYTES = 32
"""The shortest key accepted (bytes, after decoding hex or base64)."""
MARGIN_BITS = 40.0
WINDOW = 128
"""Symbols of a text key that are judged (hex: 64 bytes; base64: 96 bytes); a byte key: ``WINDOW // 2`` bytes."""
KEY_HELP = 'make one with: python -c "import secrets; print(secrets.token_hex(32))" (or: openssl rand -hex 32)'
"""How to generate a key: every refusal says it."""


class WeakKeyError(ValueError):
    """A hash key that is too short, not in an accepted form, or visibly not random: it is not used.

    ``str()`` is one line naming where the key came from (never the key), why, and how to make a good one.
    """

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"refusing the hash key from {source}: {reason}; {KEY_HELP}")


# -- the forms ------------------------------------------------------------------------------------------------
_HEX = re.compile(r"[0-9a-fA-F]+")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")
_PRINTABLE = frozenset(range(0x21, 0x7F))


def check_text_key(text: str, source: str) -> bytes:
    """The key ``text`` stands for (its UTF-8 bytes) when it is strong; else :class:`WeakKeyError`."""
    if not text:
        raise WeakKeyError(source, "it is empty")
    views = _text_views(text, source)
    _judge(views, source)
    return text.encode("utf-8")


def check_key_bytes(key: bytes, source: str) -> bytes:
    """``key`` when it is strong; else :class:`WeakKeyError`. Printable ASCII (with at most one final line
    break, as a key file written by hand has) is judged as text; the line break stays part of the key."""
    judged = key
    for ending in (b"\r\n", b"\n"):
        if key.endswith(ending) and all(b in _PRINTABLE for b in key[: -len(ending)]):
            judged = key[: -len(ending)]
            break
    if len(judged) < MIN_KEY_BYTES:
        raise WeakKeyError(source, f"it holds {len(judged)} bytes; at least {MIN_KEY_BYTES} random bytes are needed")
    if all(b in _PRINTABLE for b in judged):
        try:
            check_text_key(judged.decode("ascii"), source)
        except WeakKeyError as exc:
            raise WeakKeyError(source, f"its bytes are printable text, so it is read as text: {exc.reason}") from None
        return key
    _judge([_byte_view(key)], source)
    return key


def check_key_file_bytes(data: bytes, source: str) -> bytes:
    """A key file's contents when they are a strong key (as :func:`check_key_bytes`)."""
    return check_key_bytes(data, source)


def _text_views(text: str, source: str) -> list[tuple[Sequence[str], _Alphabet, float]]:
    """The symbol strings a text key is judged as, each with its alphabet and nominal bits."""
    if _HEX.fullmatch(text) and len(text) % 2 == 0:
        n_bytes = len(text) // 2
        if n_bytes < MIN_KEY_BYTES:
            raise WeakKeyError(source, f"its {len(text)} hex digits are {n_bytes} bytes; at least 64 digits are needed")
        symbols = text.lower()[:WINDOW]
        return [(symbols, _alphabet("hex"), 4.0 * len(symbols)), _byte_view(bytes.fromhex(text))]
    url = _BASE64URL.fullmatch(text) is not None
    if not url and _BASE64.fullmatch(text) is None:
        raise WeakKeyError(
            source, "a key given as text must be 64+ hex digits or the base64 of 32+ random bytes, without spaces"
        )
    stripped = text.rstrip("=")
    if len(stripped) * 6 // 8 < MIN_KEY_BYTES:
        raise WeakKeyError(
            source, f"it is {len(stripped) * 6 // 8} bytes as base64; at least {MIN_KEY_BYTES} random bytes are needed"
        )
    try:
        raw = base64.b64decode(stripped + "=" * (-len(stripped) % 4), altchars=b"-_" if url else None, validate=True)
    except (binascii.Error, ValueError):
        raise WeakKeyError(source, "it is not the base64 of whole bytes (its length is wrong)") from None
    if len(raw) < MIN_KEY_BYTES:
        raise WeakKeyError(source, f"it is {len(raw)} bytes as base64; at least {MIN_KEY_BYTES} are needed")
    symbols = stripped[:WINDOW]
    nominal = 8.0 * len(raw) if len(symbols) == len(stripped) else 6.0 * len(symbols)
    return [(symbols, _alphabet("base64url" if url else "base64"), nominal), _byte_view(raw)]


def _byte_view(key: bytes) -> tuple[Sequence[str], _Alphabet, float]:
    window = key[: WINDOW // 2]
    return ("".join(map(chr, window)), _alphabet("bytes"), 8.0 * len(window))


# -- judging --------------------------------------------------------------------------------------------------
_VERDICTS: dict[bytes, str | None] = {}
_VERDICTS_LOCK = threading.Lock()
_MODELS_PER_VIEW = 4


def _judge(views: list[tuple[Sequence[str], _Alphabet, float]], source: str) -> None:
    # Memoised by a digest of the views (never the key itself): the same key is judged once per process.
    memo = hashlib.sha256(repr([(v[0], v[1].name) for v in views]).encode("utf-8", "surrogatepass")).digest()
    with _VERDICTS_LOCK:
        known = memo in _VERDICTS
        reason = _VERDICTS.get(memo)
    if not known:
        penalty = math.log2(_MODELS_PER_VIEW * len(views))
        saved = max(nominal - _cost(symbols, alphabet) - penalty for symbols, alphabet, nominal in views)
        reason = None
        if saved >= MARGIN_BITS:
            reason = (
                f"it is not random (repeats, runs, keyboard walks, words or a small set of symbols describe it in "
                f"{saved:.0f} bits fewer than a random key of its length)"
            )
        with _VERDICTS_LOCK:
            if len(_VERDICTS) >= 256:
                _VERDICTS.clear()
            _VERDICTS[memo] = reason
    if reason is not None:
        raise WeakKeyError(source, reason)


# English letter frequencies (per cent) and the most frequent letter pairs: common published figures.
_ENGLISH = {
    letter: float(share)
    for letter, share in zip(
        "etaoinshrdlcumwfgypbvkjxqz",
        "12.7 9.1 8.2 7.5 7 6.7 6.3 6.1 6 4.3 4 2.8 2.8 2.4 2.4 2.2 2 2 1.9 1.5 1 .8 .15 .15 .1 .07".split(),
        strict=True,
    )
}
_BIGRAMS = (
    "th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as ou io le ve co me de hi ri ro "
    "ic ne ea ra ce li ch ll be ma si om ur ca el ta la ns di fo ho pe ec pr no ct us ac ot il tr ly nc et ut ss so "
    "rs un lo wa ge ie wh ee wi em ad ol rt po we na ul ni ts mo ow pa im mi ai sh ir su id os iv ia am fi ci vi pl "
    "ig tu ev ld ry mp fe bl ab gh ty op wo sa ay ex ke fr oo av ag if ap gr od bo sp rd do uc bu ei ov by rm ep tt "
    "oc fa ef cu rn sc gi da yo cr cl du ga qu ue ff ba ey ls va um pp ua up lu go ht ru ug ds lt pi rc rr eg au ck "
    "ew mu br bi pt ak pu ui rg ib tl ny ki rk ys ob mm fu ph og ms ye ud mb ip ub oi rl gu dr hr cc tw ft wn nu af"
).split()
_ROWS = ("1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm")
_WORDS = tuple(
    sorted(
        set(
            """password passwd passw0rd secret secrets letmein welcome qwerty qwertz azerty admin root toor login
            master dragon monkey shadow sunshine princess football baseball iloveyou trustno1 superman batman hello
            hunter charlie freedom whatever starwars computer internet default changeme changeit example sample
            test testing tests demo token apikey hash key keys agent agentdiag otel opentelemetry diag trace tracing
            local prod production staging develop development company secure security private public summer winter
            spring autumn monday friday january love god money""".split()
        )
    )
)
_CLASS_NEXT = {
    "": {"l": 0.5, "u": 0.4, "d": 0.08, "o": 0.02},
    "l": {"l": 0.76, "u": 0.16, "d": 0.04, "o": 0.04},
    "u": {"l": 0.80, "u": 0.12, "d": 0.04, "o": 0.04},
    "d": {"l": 0.15, "u": 0.10, "d": 0.70, "o": 0.05},
    "o": {"l": 0.50, "u": 0.30, "d": 0.15, "o": 0.05},
}
"""The "human text" model's chance of a letter case (or digit, or other) given the previous one's."""
# Literal models, as weights of: uniform, adaptive (symbols seen so far), repeat, next (+1), previous (-1),
# keyboard neighbour, human text, repeat of two back, next of two back. Each row sums to 1.
_MODELS = (
    (0.35, 0.45, 0.05, 0.03, 0.01, 0.01, 0.10, 0.0, 0.0),
    (0.08, 0.00, 0.02, 0.03, 0.01, 0.01, 0.85, 0.0, 0.0),
    (0.10, 0.05, 0.20, 0.20, 0.05, 0.10, 0.00, 0.15, 0.15),
    (0.20, 0.10, 0.05, 0.03, 0.02, 0.60, 0.00, 0.0, 0.0),
)
_P_COPY = 1 / 16
_P_WORD = 1 / 32
_P_LITERAL = 1 - _P_COPY - _P_WORD


def _class(c: str) -> str:
    if "a" <= c <= "z":
        return "l"
    if "A" <= c <= "Z":
        return "u"
    if "0" <= c <= "9":
        return "d"
    return "o"


class _Alphabet:
    """A key form's symbols and the per-symbol tables the literal models use."""

    def __init__(self, name: str, symbols: str) -> None:
        self.name = name
        self.size = len(symbols)
        present = set(symbols)
        members: dict[str, list[str]] = {}
        for c in symbols:
            members.setdefault(_class(c), []).append(c)
        unigram: dict[str, float] = {}
        for klass, chars in members.items():
            if klass in "lu":
                total = sum(_ENGLISH[c.lower()] for c in chars)
                unigram.update({c: _ENGLISH[c.lower()] / total for c in chars})
            else:
                weights = {c: (40.0 if c == " " else 2.0 if c in string.punctuation else 1.0) for c in chars}
                total = sum(weights.values())
                unigram.update({c: w / total for c, w in weights.items()})
        successors: dict[str, dict[str, float]] = {}
        for rank, pair in enumerate(_BIGRAMS):
            successors.setdefault(pair[0], {})[pair[1]] = 1.0 / (rank + 10)
        self._unigram = unigram
        self._successors: dict[str, dict[str, float]] = {}
        """Per letter, the chance of each lower-case letter after it (the frequent pairs this alphabet can spell)."""
        for first, pairs in successors.items():
            kept = {b: w for b, w in pairs.items() if b in present}
            if kept:
                total = sum(kept.values())
                self._successors[first] = {b: w / total for b, w in kept.items()}
        self._class_next = {
            prev: {k: p / sum(q for kk, q in row.items() if kk in members) for k, p in row.items() if k in members}
            for prev, row in _CLASS_NEXT.items()
        }
        self.up = {c: self._step(c, 1, present) for c in symbols}
        self.down = {c: self._step(c, -1, present) for c in symbols}
        self.keys = {c: tuple(sorted(k for k in _keyboard(c) if k in present)) for c in symbols}

    @staticmethod
    def _step(c: str, delta: int, present: set[str]) -> str | None:
        if "0" <= c <= "9":
            n = str((int(c) + delta) % 10)
        else:
            code = ord(c) + delta
            n = chr(code) if 0 <= code < 0x110000 else ""
        return n if n in present and _class(n) == _class(c) else None

    def human_p(self, prev: str | None, c: str) -> float:
        """The "human text" model: P(c | the previous symbol's class, and the previous letter within a word)."""
        klass = _class(c)
        row = self._class_next["" if prev is None else _class(prev)]
        p_class = row.get(klass, 0.0)
        within = self._unigram[c]
        if prev is not None and klass == "l" and _class(prev) in "lu":
            pairs = self._successors.get(prev.lower())
            if pairs:
                within = 0.35 * within + 0.65 * pairs.get(c, 0.0)
        return p_class * within


def _keyboard(c: str) -> set[str]:
    low = c.lower()
    found: set[str] = set()
    for r, row in enumerate(_ROWS):
        k = row.find(low)
        if k < 0:
            continue
        found.update(row[kk] for kk in (k - 1, k + 1) if 0 <= kk < len(row))
        for other in (_ROWS[r - 1] if r > 0 else "", _ROWS[r + 1] if r + 1 < len(_ROWS) else ""):
            found.update(other[kk] for kk in (k - 1, k, k + 1) if 0 <= kk < len(other))
    if c.isupper():
        found = {k.upper() for k in found}
    found.discard(c)
    return found


_ALPHABETS: dict[str, _Alphabet] = {}
_ALPHABET_SYMBOLS = {
    "hex": "0123456789abcdef",
    "base64": string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/",
    "base64url": string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_",
    "bytes": "".join(map(chr, range(256))),
}


def _alphabet(name: str) -> _Alphabet:
    found = _ALPHABETS.get(name)
    if found is None:
        found = _ALPHABETS[name] = _Alphabet(name, _ALPHABET_SYMBOLS[name])
    return found


def _literal_costs(symbols: Sequence[str], alphabet: _Alphabet, weights: tuple[float, ...]) -> list[float]:
    """Bits of each symbol as a literal under one model (a distribution over the alphabet given what precedes)."""
    uniform, adaptive, repeat, up, down, keyboard, human, repeat2, up2 = weights
    size = alphabet.size
    counts: dict[str, int] = {}
    costs = []
    for i, c in enumerate(symbols):
        prev = symbols[i - 1] if i else None
        p = uniform / size + adaptive * (counts.get(c, 0) + 0.5) / (i + size / 2)
        if human:
            p += human * alphabet.human_p(prev, c)
        if prev is None:
            p += (repeat + up + down + keyboard) / size
        else:
            p += repeat * (c == prev)
            p += _hit(up, alphabet.up[prev], c, size)
            p += _hit(down, alphabet.down[prev], c, size)
            near = alphabet.keys[prev]
            p += keyboard / len(near) * (c in near) if near else keyboard / size
        if repeat2 or up2:
            back = symbols[i - 2] if i >= 2 else None
            p += repeat2 * (c == back) if back is not None else repeat2 / size
            p += _hit(up2, alphabet.up[back], c, size) if back is not None else up2 / size
        costs.append(-math.log2(_P_LITERAL * p))
        counts[c] = counts.get(c, 0) + 1
    return costs


def _hit(weight: float, expected: str | None, c: str, size: int) -> float:
    if expected is None:
        return weight / size
    return weight if c == expected else 0.0


def _cost(symbols: Sequence[str], alphabet: _Alphabet) -> float:
    """Bits the cheapest of the three coders needs for ``symbols`` (literals, copies of earlier text, words)."""
    n = len(symbols)
    # longest[i]: the longest match of symbols[i:] with a copy starting earlier (overlapping copies allowed).
    longest = [0] * n
    following = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        current = [0] * (n + 1)
        si = symbols[i]
        for j in range(n - 1, i, -1):
            if symbols[j] == si:
                current[j] = following[j + 1] + 1
        following = current
        for j in range(i + 1, n):
            if current[j] > longest[j]:
                longest[j] = current[j]
    words: list[list[int]] = [[] for _ in range(n)]
    text = "".join(symbols)
    lowered = text.lower()
    for word in _WORDS:
        start = lowered.find(word)
        while start >= 0:
            if text[start : start + len(word)] in (word, word.capitalize(), word.upper()):
                words[start].append(len(word))
            start = lowered.find(word, start + 1)
    word_bits = -math.log2(_P_WORD / len(_WORDS) / 3)
    copy_bits = -math.log2(_P_COPY)
    best_total = math.inf
    for weights in _MODELS:
        literal = _literal_costs(symbols, alphabet, weights)
        best = [math.inf] * (n + 1)
        best[0] = 0.0
        for i in range(n):
            here = best[i]
            if here + literal[i] < best[i + 1]:
                best[i + 1] = here + literal[i]
            if i and longest[i] >= 2:
                offset = here + copy_bits + math.log2(i)
                for length in range(2, longest[i] + 1):
                    bits = offset + 2 * math.floor(math.log2(length - 1)) + 1  # Elias gamma of length - 1
                    if bits < best[i + length]:
                        best[i + length] = bits
            for length in words[i]:
                if here + word_bits < best[i + length]:
                    best[i + length] = here + word_bits
        best_total = min(best_total, best[n])
    return best_total
