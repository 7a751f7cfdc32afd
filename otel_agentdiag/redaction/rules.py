"""The value rules: each checks one attribute value and returns what may leave and the reason for any change.

A :class:`Rule` turns a value into a verdict ``(value, reason)``: the value to export (``None``: drop it) and
``None`` when it passes unchanged, else the reason code (:mod:`~otel_agentdiag.redaction.reasons`) to count.
Values that break their rule are dropped, never coerced; correlation IDs are replaced by keyed digests; tool and
agent names that code did not register, and strings outside a closed vocabulary, become the placeholder
``_OTHER``. Every kept string also passes the public-safety check
(:func:`~otel_agentdiag.redaction.recognizers.is_sensitive`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from otel_agentdiag import semconv as sc
from otel_agentdiag.redaction.finish_reasons import FINISH_REASONS
from otel_agentdiag.redaction.reasons import (
    HASHED,
    INVALID_VALUE,
    PUBLIC_SAFETY_VIOLATION,
    TOO_LONG,
    UNREGISTERED_NAME,
)
from otel_agentdiag.redaction.recognizers import is_sensitive


class PolicyError(ValueError):
    """A policy (or a policy file) that cannot be used; the message says where and why."""


class RedactionContext:
    """What rules may consult besides the value: the key hasher and the name registry."""

    __slots__ = ("hasher", "names")

    def __init__(self, hasher: Any, names: Any) -> None:
        self.hasher = hasher
        self.names = names


Verdict = tuple[Any, "str | None"]
"""``(value, reason)``: ``value`` is what is exported (``None``: drop it); ``reason`` is ``None`` when the value
passes unchanged, else the reason code to count."""


class Rule:
    """A check for one attribute value.

    A rule whose verdict depends only on the value is ``cacheable``: the processor remembers recent verdicts
    per (key, value). A rule must not raise for any attribute value OpenTelemetry accepts; if it does, the
    processor treats the span as unredactable (fail closed).
    """

    __slots__ = ()

    cacheable: bool = True

    def apply(self, value: Any, ctx: RedactionContext) -> Verdict:
        raise NotImplementedError

    def describe(self) -> str:
        """A one-line, human description (for ``agentdiag doctor`` and the README)."""
        raise NotImplementedError

    def to_spec(self) -> dict[str, Any]:
        """The rule as a policy-file table (the inverse of
        :func:`~otel_agentdiag.redaction.policy_file.rule_from_spec`)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Enum(Rule):
    """The value is one of ``values`` (strings or booleans)."""

    values: frozenset[Any]

    def apply(self, value: Any, ctx: RedactionContext) -> Verdict:
        if isinstance(value, (str, bool)) and value in self.values:
            return value, None
        return None, INVALID_VALUE

    def describe(self) -> str:
        return "one of " + ", ".join(f"`{v}`" for v in sorted(self.values, key=str))

    def to_spec(self) -> dict[str, Any]:
        return {"type": "enum", "values": sorted(self.values, key=str)}


@dataclass(frozen=True, slots=True)
class Boolean(Rule):
    def apply(self, value: Any, ctx: RedactionContext) -> Verdict:
        return (value, None) if isinstance(value, bool) else (None, INVALID_VALUE)

    def describe(self) -> str:
        return "boolean"

    def to_spec(self) -> dict[str, Any]:
        return {"type": "bool"}


@dataclass(frozen=True, slots=True)
class IntRange(Rule):
    """An integer (not a bool) in ``[minimum, maximum]``."""

    minimum: int
    maximum: int

    def apply(self, value: Any, ctx: RedactionContext) -> Verdict:
        if type(value) is int and self.minimum <= value <= self.maximum:
            return value, None
        return None, INVALID_VALUE

    def describe(self) -> str:
        return f"integer {self.minimum}..{self.maximum}"

    def to_spec(self) -> dict[str, Any]:
        return {"type": "int", "min": self.minimum, "max": self.maximum}


@dataclass(frozen=True, slots=True)
class FloatRange(Rule):
    """A finite number (int or float, not bool) in ``[minimum, maximum]``."""

    minimum: float
    maximum: float

    def apply(self, value: Any, ctx: RedactionContext) -> Verdict:
        kind = type(value)
        # ints are compared as they are: math.isfinite() would overflow on a huge one
        if (kind is int or (kind is float and math.isfinite(value))) and self.minimum <= value <= self.maximum:
            return value, None
        return None, INVALID_VALUE

    def describe(self) -> str:
        return f"finite number {self.minimum:g}..{self.maximum:g}"

    def to_spec(self) -> dict[str, Any]:
        return {"type": "float", "min": self.minimum, "max": self.maximum}


_MEMO_LIMIT: Final = 4096


@dataclass(frozen=True, slots=True)
class Token(Rule):
    """A bounded string: at most ``max_length`` characters, matching ``pattern`` in full, and passing the
    public-safety check (no credential, e-mail address, URL or absolute path)."""

    pattern: re.Pattern[str]
    max_length: int
    _memo: dict[str, Verdict] = field(default_factory=dict, compare=False, hash=False, repr=False)
    """Verdicts for recently seen values: model, provider and error names repeat on almost every span."""

    def apply(self, value: Any, ctx: RedactionContext) -> Verdict:
        if not isinstance(value, str):
            return None, INVALID_VALUE
        if len(value) > self.max_length:
            return None, TOO_LONG  # length first: never scan an unbounded string
        memo = self._memo
        verdict = memo.get(value)
        if verdict is None:
            if is_sensitive(value):
                verdict = (None, PUBLIC_SAFETY_VIOLATION)
            elif self.pattern.fullmatch(value) is None:
                verdict = (None, INVALID_VALUE)
            else:
                verdict = (value, None)
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            memo[value] = verdict
        return verdict

    def describe(self) -> str:
        return f"string ≤ {self.max_length} chars matching `{self.pattern.pattern}`"

    def to_spec(self) -> dict[str, Any]:
        return {"type": "token", "pattern": self.pattern.pattern, "max_length": self.max_length}


@dataclass(frozen=True, slots=True)
class StringArray(Rule):
    """A sequence of at most ``max_items`` strings, each passing ``item``; one bad item drops the whole value."""

    item: Token
    max_items: int

    def apply(self, value: Any, ctx: RedactionContext) -> Verdict:
        if not isinstance(value, (tuple, list)):
            return None, INVALID_VALUE
        if len(value) > self.max_items:
            return None, TOO_LONG
        item = self.item
        for element in value:
            _, reason = item.apply(element, ctx)
            if reason is not None:
                return None, reason
        return value, None

    def describe(self) -> str:
        return f"≤ {self.max_items} strings, each ≤ {self.item.max_length} chars matching `{self.item.pattern.pattern}`"

    def to_spec(self) -> dict[str, Any]:
        return {
            "type": "string_array",
            "pattern": self.item.pattern.pattern,
            "max_length": self.item.max_length,
            "max_items": self.max_items,
        }


_NAMED_SETS: Final[Mapping[frozenset[str], str]] = {
    FINISH_REASONS: "the documented finish reasons",
    sc.MCP_METHODS: "the MCP methods (`semconv.MCP_METHODS`)",
}
"""Closed sets that ``describe()`` names instead of listing (the README lists them once)."""


_OTHER: Final = sc.OTHER_VALUE


@dataclass(frozen=True, slots=True)
class ClosedSet(Rule):
    """A value from a closed vocabulary (finish reasons): a string in ``values`` or, with ``max_items``, a
    sequence of at most that many strings. A string outside ``values`` becomes ``_OTHER`` in its place and is
    counted as ``invalid_value``, so an array keeps its length and its order (``_OTHER`` itself passes, so a
    second redaction changes nothing); another type, or an array longer than ``max_items``, is dropped."""

    values: frozenset[str]
    max_items: int | None = None
    """``None``: one string; else an array of at most this many."""

    def __post_init__(self) -> None:
        if not self.values or not all(isinstance(v, str) and v for v in self.values):
            raise ValueError("a closed set needs non-empty string values")
        if self.max_items is not None and (type(self.max_items) is not int or self.max_items < 1):
            raise ValueError("max_items must be a positive integer or None")

    def apply(self, value: Any, ctx: RedactionContext) -> Verdict:
        values = self.values
        if self.max_items is None:
            if type(value) is not str:
                return None, INVALID_VALUE
            # The placeholder itself passes: redacting a redacted span changes nothing (idempotence).
            return (value, None) if value in values or value == _OTHER else (_OTHER, INVALID_VALUE)
        if not isinstance(value, (tuple, list)):
            return None, INVALID_VALUE
        if len(value) > self.max_items:
            return None, TOO_LONG
        known = True
        for item in value:  # one plain loop: this runs on every LLM span
            if type(item) is not str:
                return None, INVALID_VALUE
            if item not in values and item != _OTHER:
                known = False
        if known:
            return value, None
        return tuple(item if item in values or item == _OTHER else _OTHER for item in value), INVALID_VALUE

    def describe(self) -> str:
        listed = _NAMED_SETS.get(self.values) or ", ".join(f"`{v}`" for v in sorted(self.values))
        if self.max_items is None:
            return f"one of {listed}; any other string becomes `_OTHER`"
        return f"≤ {self.max_items} strings, each one of {listed}; any other item becomes `_OTHER`"

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": "closed_set", "values": sorted(self.values)}
        if self.max_items is not None:
            spec["max_items"] = self.max_items
        return spec


@dataclass(frozen=True, slots=True)
class Scalar(Rule):
    """Any bounded scalar: a bool, an integer, a finite float, or a string of at most ``max_length`` printable
    characters that is not JSON text and passes the public-safety check. Meant for resource attributes such as
    ``service.*``."""

    max_length: int = 256

    def apply(self, value: Any, ctx: RedactionContext) -> Verdict:
        kind = type(value)
        if kind is bool:
            return value, None
        if kind is int:
            return (value, None) if _INT64_MIN <= value <= _INT64_MAX else (None, INVALID_VALUE)
        if kind is float:
            return (value, None) if math.isfinite(value) else (None, INVALID_VALUE)
        if kind is not str:
            return None, INVALID_VALUE
        if len(value) > self.max_length:
            return None, TOO_LONG
        if _CONTROL.search(value) is not None or value[:1] in ("{", "["):
            return None, INVALID_VALUE  # control characters, or structured (JSON) text: not a scalar
        if is_sensitive(value):
            return None, PUBLIC_SAFETY_VIOLATION
        return value, None

    def describe(self) -> str:
        return f"bool, integer, finite number, or printable string ≤ {self.max_length} chars"

    def to_spec(self) -> dict[str, Any]:
        return {"type": "scalar", "max_length": self.max_length}


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""C0 and C1 control characters and the Unicode line/paragraph separators: not printable text."""
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
INT64_RANGE: Final = (_INT64_MIN, _INT64_MAX)
"""The integers OTLP carries (what :class:`Scalar` and :class:`HashedId` accept)."""

MAX_ID_LENGTH: Final = 4096


@dataclass(frozen=True, slots=True)
class HashedId(Rule):
    """A correlation ID of kind ``id_kind``: exported only as its keyed digest."""

    id_kind: str

    def apply(self, value: Any, ctx: RedactionContext) -> Verdict:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return None, INVALID_VALUE
        if isinstance(value, int) and not _INT64_MIN <= value <= _INT64_MAX:
            return None, INVALID_VALUE  # not an OTLP integer; str() of a huge int may even raise
        if isinstance(value, str):
            if not value:
                return None, INVALID_VALUE
            if len(value) > MAX_ID_LENGTH:
                return None, TOO_LONG
            if ctx.hasher.is_digest(value):
                return value, None  # already a digest made with this key: redaction is idempotent
        return ctx.hasher.digest(self.id_kind, value), HASHED

    def describe(self) -> str:
        return f"keyed digest of a `{self.id_kind}` id"

    def to_spec(self) -> dict[str, Any]:
        return {"type": "hashed_id", "id_kind": self.id_kind}


NAME_KINDS: Final = ("tool", "agent", "model", "guardrail")


@dataclass(frozen=True, slots=True)
class RegisteredName(Rule):
    """A tool, agent or model name (``name_kind``) that code declared and that passes the public-safety check;
    anything else becomes ``_OTHER``.

    The registry refuses a name that fails the check, and this rule checks a registered name again (defence in
    depth: a registry filled by another path, or a name registered before the check knew its format). The
    verdict is remembered per name: registered names are few and repeat on every span."""

    name_kind: str
    _sensitive: dict[str, bool] = field(default_factory=dict, compare=False, hash=False, repr=False)
    """``is_sensitive`` per registered name seen (bounded like :class:`Token`'s memo)."""

    cacheable = False  # names may be registered at any time

    def __post_init__(self) -> None:
        if self.name_kind not in NAME_KINDS:
            raise ValueError(f"name_kind must be one of {', '.join(NAME_KINDS)}, not {self.name_kind!r}")

    def apply(self, value: Any, ctx: RedactionContext) -> Verdict:
        if not isinstance(value, str):
            return None, INVALID_VALUE
        if ctx.names.is_registered(self.name_kind, value):
            memo = self._sensitive
            sensitive = memo.get(value)
            if sensitive is None:
                sensitive = is_sensitive(value)
                if len(memo) >= _MEMO_LIMIT:
                    memo.clear()
                memo[value] = sensitive
            return (sc.OTHER_VALUE, PUBLIC_SAFETY_VIOLATION) if sensitive else (value, None)
        return sc.OTHER_VALUE, UNREGISTERED_NAME

    def describe(self) -> str:
        return f"registered {self.name_kind} name, else `_OTHER`"

    def to_spec(self) -> dict[str, Any]:
        return {"type": "registered_name", "name_kind": self.name_kind}


@dataclass(frozen=True, slots=True)
class Callback(Rule):
    """A user function deciding one value: it returns the value to export (possibly changed) or ``None`` to
    drop it. If it raises, the span is not exported as it was (see ``Policy.on_error``). Python-only: policy
    files cannot name code."""

    function: Callable[[Any], Any]
    label: str = "callback"

    cacheable = False

    def apply(self, value: Any, ctx: RedactionContext) -> Verdict:
        result = self.function(value)
        if result is None or not _is_attribute_value(result):
            return None, INVALID_VALUE
        # What a callback returns still meets the public-safety check, like every kept string.
        texts = (result,) if isinstance(result, str) else result if isinstance(result, (tuple, list)) else ()
        if any(isinstance(text, str) and is_sensitive(text) for text in texts):
            return None, PUBLIC_SAFETY_VIOLATION
        return result, (None if result is value or result == value else INVALID_VALUE)

    def describe(self) -> str:
        return f"user callback `{self.label}`"

    def to_spec(self) -> dict[str, Any]:
        raise PolicyError(f"a callback rule ({self.label}) cannot be written to a policy file")


def _is_attribute_value(value: Any) -> bool:
    """A value OpenTelemetry exports: a scalar or a homogeneous sequence of scalars."""
    if isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, (tuple, list)):
        kinds = {type(v) for v in value}
        return len(kinds) <= 1 and kinds <= {str, bool, int, float}
    return False


DEBUG_KEYS = StringArray(Token(re.compile(r"[A-Za-z0-9_.@:/\-]+"), 256), 64)
"""The rule for ``agentdiag.redaction.keys`` (``summary="debug"`` only): attribute-key-shaped names."""


def token(pattern: str, max_length: int) -> Token:
    return Token(re.compile(pattern), max_length)
