"""The redaction policy: a fail-closed allowlist over the whole span.

A :class:`Policy` names every attribute key that may leave the process and the :class:`Rule` its value must
satisfy. Keys it does not name are dropped; values that break their rule are dropped, never coerced;
correlation IDs are replaced by keyed digests; tool and agent names that code did not register become the
placeholder ``_OTHER``. The same rules apply to event and link attributes; span names are rebuilt from the
redacted attributes; status descriptions never leave; resource and scope attributes have rules of their own.

Every outcome other than "kept as is" has a reason code; the processor counts them on the span as
``agentdiag.redaction.<reason>`` and never records the value (nor, outside ``summary="debug"``, the key).

Two presets ship: :data:`STRICT` (the default for OTLP export and support bundles) and :data:`LOCAL` (the
default for the local SQLite store: a few more diagnostic fields, still no content, still pseudonymised).
Policies can also be written as TOML files; see :func:`load_policy` and ``docs/policy.md``.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from otel_agentdiag import semconv as sc
from otel_agentdiag.redaction import keys as _keys
from otel_agentdiag.redaction import recognizers as _recognizers
from otel_agentdiag.redaction.finish_reasons import FINISH_REASONS

# --- reason codes (the suffix of the ``agentdiag.redaction.*`` counters) ----------------------------------
UNKNOWN_KEY: Final = "unknown_key"
"""The key is not in the policy."""
INVALID_VALUE: Final = "invalid_value"
"""The key is allowed but the value breaks its rule: wrong type, out of range, not in the enum, bad shape. The
value is dropped, except under a :class:`ClosedSet` rule, where an unknown string becomes ``_OTHER``."""
TOO_LONG: Final = "too_long"
"""The value is longer (characters, or items of an array) than its rule allows."""
PUBLIC_SAFETY_VIOLATION: Final = "public_safety_violation"
"""The value looks like a credential, an e-mail address, a URL, an absolute path, or matches ``blocked_values``."""
UNREGISTERED_NAME: Final = "unregistered_name"
"""A tool/agent/model name that code did not register; replaced by ``_OTHER``."""
REDACTOR_ERROR: Final = "redactor_error"
"""A rule or callback raised: the span became a tombstone (or was dropped); the original never left."""
HASHED: Final = "hashed"
"""A correlation ID (or, with ``exception_fingerprint``, an exception message) replaced by its keyed digest."""
EVENT_DROPPED: Final = "event"
"""An event whose name the policy does not allow."""
SPAN_NAME: Final = "span_name"
"""The span name was rebuilt from the redacted attributes or replaced by ``_OTHER``."""
STATUS_DESCRIPTION: Final = "status_description"
"""A status description (free text, often the exception message) was removed."""
SCHEMA_URL: Final = "schema_url"
"""The span's resource or instrumentation scope named a schema URL other than an OpenTelemetry one
(``https://opentelemetry.io/schemas/<version>``); it was removed. Counted on every span of that resource or scope."""

REASONS: Final = (
    UNKNOWN_KEY,
    INVALID_VALUE,
    TOO_LONG,
    PUBLIC_SAFETY_VIOLATION,
    UNREGISTERED_NAME,
    REDACTOR_ERROR,
    HASHED,
    EVENT_DROPPED,
    SPAN_NAME,
    STATUS_DESCRIPTION,
    SCHEMA_URL,
)

SUMMARY_MODES: Final = ("info", "silent", "debug")
HASH_FUNCTIONS: Final = ("hmac-sha256", "sha256")
ON_ERROR_MODES: Final = ("tombstone", "drop")

# --- public-safety checks: otel_agentdiag.redaction.recognizers (re-exported here: policy.is_sensitive stays) ---
is_sensitive = _recognizers.is_sensitive


# --- rules ------------------------------------------------------------------------------------------------
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
        """The rule as a policy-file table (the inverse of :func:`rule_from_spec`)."""
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


_NAMED_SETS: Final[Mapping[frozenset[str], str]] = {FINISH_REASONS: "the documented finish reasons"}
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


# --- the policy -------------------------------------------------------------------------------------------
class PolicyError(ValueError):
    """A policy (or a policy file) that cannot be used; the message says where and why."""


MAX_PATTERN_KEY_LENGTH: Final = 128
_glob = _keys.key_pattern
"""``*`` patterns are open (see :func:`~otel_agentdiag.redaction.keys.key_pattern`)."""


def _expanded(keys: Mapping[str, Any], what: str) -> dict[str, Any]:
    """``keys`` with every ``{a,b}`` set spelled out (a later entry wins over an earlier one for the same key)."""
    out: dict[str, Any] = {}
    for key, rule in keys.items():
        if not isinstance(key, str) or not key:
            raise PolicyError(f"{what}: keys must be non-empty strings, not {key!r}")
        try:
            spelled = _keys.expand_key(key)
        except ValueError as exc:
            raise PolicyError(f"{what}: {exc}") from None
        for one in spelled:
            out[one] = rule
    return out


def _without(table: Mapping[str, Rule], key: str, what: str) -> dict[str, Rule]:
    """``table`` without what ``key`` stands for: the keys of its ``{a,b}`` sets and, for a ``*`` pattern, the
    pattern and every key it matches (``"gen_ai.usage.*" = false`` removes each enumerated usage key)."""
    out = dict(table)
    for one in _expanded({key: None}, what):
        out.pop(one, None)
        if "*" in one:
            compiled = _glob(one)
            for existing in [k for k in out if compiled.fullmatch(k)]:
                del out[existing]
    return out


def open_patterns(policy: Policy) -> tuple[str, ...]:
    """The ``*`` patterns of ``policy`` (span, resource and scope tables), sorted: each lets any key-shaped key
    under its prefix leave, data-shaped ones too. Empty for the presets."""
    tables = (policy.allowed_keys, policy.resource_keys, policy.scope_keys)
    return tuple(sorted({key for table in tables for key in table if "*" in key}))


_Table = tuple[dict[str, Rule], tuple[tuple[str, "re.Pattern[str]", Rule], ...]]
"""A key → rule table split into exact keys and ``*`` patterns."""


def _split(keys: Mapping[str, Rule], what: str) -> _Table:
    exact: dict[str, Rule] = {}
    patterns: list[tuple[str, re.Pattern[str], Rule]] = []
    for key, rule in keys.items():
        if not isinstance(key, str) or not key:
            raise PolicyError(f"{what}: keys must be non-empty strings, not {key!r}")
        if not isinstance(rule, Rule):
            raise PolicyError(f"{what}[{key!r}]: expected a Rule, not {type(rule).__name__}")
        if "*" in key:
            patterns.append((key, _glob(key), rule))
        else:
            exact[key] = rule
    # Longest pattern first: the most specific wins when several match.
    patterns.sort(key=lambda item: len(item[0]), reverse=True)
    return exact, tuple(patterns)


@dataclass(frozen=True)
class Policy:
    """A fail-closed allowlist over the whole span.

    Option names follow the OpenTelemetry Collector's ``redaction`` processor where the concept is the same
    (``allowed_keys``, ``blocked_values``, ``hash_function``, ``summary``). A key with ``{a,b}`` sets stands for
    each key it spells (``gen_ai.usage.{input,output}_tokens``) and is stored spelled out. Keys containing ``*``
    are open patterns (:func:`~otel_agentdiag.redaction.keys.key_pattern`: they let data-shaped keys out; the
    presets have none); an exact key wins over a pattern, a longer pattern over a shorter one.
    """

    name: str
    allowed_keys: Mapping[str, Rule]
    """Attribute key (``{a,b}`` set, or ``*`` pattern) → rule. Applies to span, event and link attributes."""
    allowed_span_names: frozenset[str] = frozenset()
    """Literal span names kept when a span's name cannot be rebuilt from its redacted attributes."""
    allowed_events: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Event name → the attribute keys it may keep (each still checked by ``allowed_keys``)."""
    resource_keys: Mapping[str, Rule] = field(default_factory=dict)
    """Resource attribute key (or pattern) → rule."""
    scope_keys: Mapping[str, Rule] = field(default_factory=dict)
    """Instrumentation-scope attribute key (or pattern) → rule. Scope names and versions are always checked."""
    blocked_values: tuple[str, ...] = ()
    """Extra regular expressions: a kept string value in which one is found is dropped as a public-safety
    violation (the built-in checks always apply)."""
    hash_function: str = "hmac-sha256"
    """``hmac-sha256`` (keyed; the default) or ``sha256`` (unkeyed: digests of guessable IDs can be reversed
    by trying candidates; only for data that must be joinable without sharing a key)."""
    summary: str = "info"
    """``info``: count what was removed on the span (``agentdiag.redaction.<reason>``); ``silent``: record
    nothing; ``debug``: also list the removed keys (``agentdiag.redaction.keys``) — for the local store only."""
    exception_fingerprint: bool = False
    """Keep a keyed digest of each exception message (``agentdiag.exception.fingerprint``) so identical
    failures can be grouped without exporting the message."""
    on_error: str = "tombstone"
    """When a rule or callback raises: ``tombstone`` forwards a span with only ids, timing, kind, status code
    and ``agentdiag.redaction.redactor_error``; ``drop`` forwards nothing. Either way it is counted."""

    _exact: dict[str, Rule] = field(init=False, repr=False, compare=False)
    _patterns: tuple[tuple[str, re.Pattern[str], Rule], ...] = field(init=False, repr=False, compare=False)
    _resource: _Table = field(init=False, repr=False, compare=False)
    _scope: _Table = field(init=False, repr=False, compare=False)
    _blocked: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.summary not in SUMMARY_MODES:
            raise PolicyError(f"summary must be one of {', '.join(SUMMARY_MODES)}, not {self.summary!r}")
        if self.hash_function not in HASH_FUNCTIONS:
            raise PolicyError(f"hash_function must be one of {', '.join(HASH_FUNCTIONS)}, not {self.hash_function!r}")
        if self.on_error not in ON_ERROR_MODES:
            raise PolicyError(f"on_error must be one of {', '.join(ON_ERROR_MODES)}, not {self.on_error!r}")
        allowed = _expanded(self.allowed_keys, "allowed_keys")
        if self.summary == "debug" and sc.AGENTDIAG_REDACTION_KEYS not in allowed:
            # The list of removed keys this policy writes must survive a second pass (idempotence); only
            # key-shaped names, so no other instrumentation can smuggle text through it.
            allowed[sc.AGENTDIAG_REDACTION_KEYS] = DEBUG_KEYS
        object.__setattr__(self, "allowed_keys", allowed)
        object.__setattr__(self, "resource_keys", _expanded(self.resource_keys, "resource_keys"))
        object.__setattr__(self, "scope_keys", _expanded(self.scope_keys, "scope_keys"))
        exact, patterns = _split(allowed, "allowed_keys")
        object.__setattr__(self, "_exact", exact)
        object.__setattr__(self, "_patterns", patterns)
        object.__setattr__(self, "_resource", _split(self.resource_keys, "resource_keys"))
        object.__setattr__(self, "_scope", _split(self.scope_keys, "scope_keys"))
        object.__setattr__(self, "allowed_span_names", frozenset(self.allowed_span_names))
        object.__setattr__(self, "allowed_events", {k: frozenset(v) for k, v in self.allowed_events.items()})
        blocked = tuple(self.blocked_values)
        compiled = []
        for expression in blocked:
            try:
                # Compiled one by one: each may carry its own inline flags, e.g. "(?i)secret".
                compiled.append(re.compile(expression))
            except (re.error, TypeError) as exc:
                raise PolicyError(f"blocked_values: {expression!r} is not a regular expression: {exc}") from None
        object.__setattr__(self, "blocked_values", blocked)
        object.__setattr__(self, "_blocked", tuple(compiled))

    @staticmethod
    def _lookup(table: _Table, key: str) -> Rule | None:
        exact, patterns = table
        rule = exact.get(key)
        if rule is None and patterns and len(key) <= MAX_PATTERN_KEY_LENGTH and not is_sensitive(key):
            for _, compiled, pattern_rule in patterns:
                if compiled.fullmatch(key):
                    return pattern_rule
        return rule

    def rule_for(self, key: str) -> Rule | None:
        """The rule for a span, event or link attribute ``key`` (``None``: not allowed)."""
        return self._lookup((self._exact, self._patterns), key)

    def resource_rule_for(self, key: str) -> Rule | None:
        return self._lookup(self._resource, key)

    def scope_rule_for(self, key: str) -> Rule | None:
        return self._lookup(self._scope, key)

    def is_blocked(self, value: Any) -> bool:
        """Whether a kept value (a string or a sequence of strings) matches one of ``blocked_values``."""
        blocked = self._blocked
        if not blocked:
            return False
        if isinstance(value, str):
            return any(pattern.search(value) is not None for pattern in blocked)
        if isinstance(value, (tuple, list)):
            return any(isinstance(v, str) and pattern.search(v) is not None for v in value for pattern in blocked)
        return False

    def derive(self, name: str, **changes: Any) -> Policy:
        """A copy with ``changes``; ``allowed_keys``/``resource_keys``/``scope_keys`` given here are *merged*
        into this policy's. A value of ``None`` removes what its key stands for (the keys of a ``{a,b}`` set; a
        ``*`` pattern and every key it matches); removals apply before the additions of the same call."""
        for table in ("allowed_keys", "resource_keys", "scope_keys"):
            if table in changes:
                merged: dict[str, Rule] = dict(getattr(self, table))
                for key, rule in changes[table].items():
                    if rule is None:
                        merged = _without(merged, key, table)
                for key, rule in changes[table].items():
                    if rule is not None:
                        merged[key] = rule
                changes[table] = merged
        return replace(self, name=name, **changes)


# --- building blocks of the presets -----------------------------------------------------------------------
def token(pattern: str, max_length: int) -> Token:
    return Token(re.compile(pattern), max_length)


MODEL_NAME = token(r"[A-Za-z0-9][A-Za-z0-9._:/@+\-]*", 128)
PROVIDER_NAME = token(r"[a-z0-9][a-z0-9_.\-]*", 64)
OPERATION_NAME = token(r"[a-z][a-z0-9_]*", 64)
ERROR_TYPE = token(r"[A-Za-z_<][A-Za-z0-9_.<>]*|[1-5][0-9]{2}", 256)
"""An exception class name, or an HTTP status code (the HTTP conventions' error.type for a failed response)."""
FINISH_REASON = ClosedSet(FINISH_REASONS)
"""One finish reason (OpenInference's ``llm.finish_reason``): a documented one, else ``_OTHER``."""
FINISH_REASON_ARRAY = ClosedSet(FINISH_REASONS, 16)
"""``gen_ai.response.finish_reasons``: up to 16 documented finish reasons, each unknown one ``_OTHER``."""
IDENTIFIER = token(r"[A-Za-z_][A-Za-z0-9_.\-]*", 128)
SERVICE_TIER = token(r"[a-z][a-z0-9_\-]*", 32)
SYSTEM_FINGERPRINT = token(r"fp_[0-9a-f]{1,64}", 67)
"""OpenAI's backend configuration fingerprint, in the only shape OpenAI makes it: anything else is data."""
HOST_NAME = token(r"[A-Za-z0-9][A-Za-z0-9.\-]*|\[[0-9A-Fa-f:.]+\]", 253)

_INT64 = 2**63 - 1
_TOKENS = IntRange(0, 10**12)

OPENINFERENCE_SPAN_KINDS = frozenset(
    {"LLM", "CHAIN", "TOOL", "AGENT", "RETRIEVER", "EMBEDDING", "RERANKER", "GUARDRAIL", "EVALUATOR", "PROMPT"}
    | {"UNKNOWN"}
)

# Fixed span names of the common OpenAI instrumentations (OpenInference, OpenLLMetry): code, not data.
PEER_SPAN_NAMES = frozenset(
    {
        "ChatCompletion",
        "Completion",
        "CreateEmbeddings",
        "Embedding",
        "Response",
        "openai.chat",
        "openai.completion",
        "openai.embeddings",
        "openai.response",
    }
)


def _strict() -> Policy:
    hashed = {key: HashedId(kind) for key, kind in sc.CORRELATION_ID_KINDS.items()}
    keys: dict[str, Rule] = {
        # otel-agentdiag's own keys
        sc.AGENTDIAG_KIND: Enum(frozenset(sc.KINDS)),
        sc.AGENTDIAG_ITERATION_INDEX: IntRange(0, 10**9),
        sc.AGENTDIAG_SEQUENCE: IntRange(0, _INT64),
        sc.AGENTDIAG_OBSERVER_ID: token(r"[0-9a-f]{16}", 16),
        # counts from an earlier redaction: one key per reason code, nothing else under the prefix
        **{key: IntRange(0, 10**9) for key in _keys.redaction_counter_keys(REASONS)},
        sc.AGENTDIAG_EXCEPTION_FINGERPRINT: HashedId(sc.ID_KIND_EXCEPTION_MESSAGE),
        # GenAI semantic conventions
        sc.GEN_AI_OPERATION_NAME: OPERATION_NAME,
        sc.GEN_AI_PROVIDER_NAME: PROVIDER_NAME,
        sc.GEN_AI_SYSTEM: PROVIDER_NAME,
        sc.GEN_AI_REQUEST_MODEL: MODEL_NAME,
        sc.GEN_AI_RESPONSE_MODEL: MODEL_NAME,
        sc.GEN_AI_REQUEST_MAX_TOKENS: IntRange(0, 10**9),
        sc.GEN_AI_REQUEST_TEMPERATURE: FloatRange(0.0, 10.0),
        sc.GEN_AI_REQUEST_TOP_P: FloatRange(0.0, 1.0),
        sc.GEN_AI_REQUEST_TOP_K: FloatRange(0.0, 1e6),
        sc.GEN_AI_REQUEST_SEED: IntRange(-_INT64 - 1, _INT64),
        sc.GEN_AI_REQUEST_STREAM: Boolean(),
        sc.GEN_AI_REQUEST_CHOICE_COUNT: IntRange(1, 1000),
        sc.GEN_AI_REQUEST_FREQUENCY_PENALTY: FloatRange(-10.0, 10.0),
        sc.GEN_AI_REQUEST_PRESENCE_PENALTY: FloatRange(-10.0, 10.0),
        sc.GEN_AI_OUTPUT_TYPE: OPERATION_NAME,
        sc.GEN_AI_RESPONSE_FINISH_REASONS: FINISH_REASON_ARRAY,
        sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: FloatRange(0.0, 86_400.0),
        "gen_ai.is_streaming": Boolean(),
        "gen_ai.embeddings.dimension.count": IntRange(0, 10**6),
        "openai.api.type": Enum(frozenset({"chat_completions", "responses", "embeddings", "completions"})),
        # Every key of a family is named (keys.py): what a "*" would match could be data.
        **{key: _TOKENS for key in _keys.GEN_AI_USAGE_KEYS},
        sc.GEN_AI_AGENT_NAME: RegisteredName("agent"),
        sc.GEN_AI_TOOL_NAME: RegisteredName("tool"),
        sc.GEN_AI_TOOL_TYPE: Enum(frozenset({"function", "extension", "datastore"})),
        sc.ERROR_TYPE: ERROR_TYPE,
        sc.SERVER_PORT: IntRange(0, 65535),
        sc.HTTP_RESPONSE_STATUS_CODE: IntRange(100, 599),
        sc.HTTP_REQUEST_RESEND_COUNT: IntRange(0, 1000),
        sc.AGENTDIAG_STREAM_END: Enum(frozenset(sc.STREAM_ENDS)),
        # Framework integrations: roll-ups, why a run stopped, handoffs, guardrails
        **{key: _TOKENS for key in _keys.AGENTDIAG_USAGE_KEYS},
        sc.AGENTDIAG_STOP_REASON: Enum(frozenset(sc.STOP_REASONS)),
        sc.AGENTDIAG_HANDOFF_SOURCE_AGENT: RegisteredName("agent"),
        sc.AGENTDIAG_HANDOFF_TARGET_AGENT: RegisteredName("agent"),
        sc.AGENTDIAG_GUARDRAIL_NAME: RegisteredName("guardrail"),
        sc.AGENTDIAG_GUARDRAIL_TRIGGERED: Boolean(),
        sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE: token(r"[a-z][a-z0-9_]*", 32),
        sc.EXCEPTION_TYPE: ERROR_TYPE,
        sc.EXCEPTION_ESCAPED: Boolean(),
        # OpenInference's names for the same facts
        "openinference.span.kind": Enum(OPENINFERENCE_SPAN_KINDS),
        "llm.model_name": MODEL_NAME,
        "llm.provider": PROVIDER_NAME,
        "llm.system": PROVIDER_NAME,
        **{key: _TOKENS for key in _keys.OPENINFERENCE_TOKEN_COUNT_KEYS},
        "llm.finish_reason": FINISH_REASON,
        "embedding.model_name": MODEL_NAME,
        "tool.name": RegisteredName("tool"),
        # OpenLLMetry's
        "llm.request.type": Enum(frozenset({"chat", "completion", "embedding", "rerank", "unknown"})),
        "llm.usage.total_tokens": _TOKENS,
        "llm.is_streaming": Boolean(),
        **hashed,
    }
    resource = Scalar(256)
    return Policy(
        name="strict",
        allowed_keys=keys,
        allowed_span_names=frozenset(
            {sc.ITERATION_SPAN_NAME, sc.TOMBSTONE_SPAN_NAME, sc.GUARDRAIL_SPAN_NAME, sc.FRAMEWORK_SPAN_NAME}
        )
        | PEER_SPAN_NAMES,
        # Exception events keep the exception's type only: message and stack trace are data. The fingerprint
        # is a keyed digest, present only when the policy asks for it.
        allowed_events={
            sc.EXCEPTION_EVENT_NAME: frozenset(
                {sc.EXCEPTION_TYPE, sc.EXCEPTION_ESCAPED, sc.AGENTDIAG_EXCEPTION_FINGERPRINT}
            ),
            # One per HTTP attempt of a model call (the SDKs retry inside one call).
            sc.AGENTDIAG_HTTP_ATTEMPT_EVENT: frozenset(
                {sc.HTTP_REQUEST_RESEND_COUNT, sc.HTTP_RESPONSE_STATUS_CODE, sc.ERROR_TYPE}
            ),
        },
        resource_keys={
            "service.name": resource,
            "service.namespace": resource,
            "service.version": resource,
            "service.instance.id": resource,
            **{key: resource for key in _keys.TELEMETRY_RESOURCE_KEYS},
            "deployment.environment": resource,
            "deployment.environment.name": resource,
        },
        summary="info",
    )


STRICT: Final[Policy] = _strict()
"""The strict preset: the default for OTLP export and support bundles."""


def _local() -> Policy:
    resource = Scalar(256)
    return STRICT.derive(
        "local",
        allowed_keys={
            sc.SERVER_ADDRESS: HOST_NAME,
            "gen_ai.openai.request.service_tier": SERVICE_TIER,
            "gen_ai.openai.response.service_tier": SERVICE_TIER,
            "gen_ai.openai.response.system_fingerprint": SYSTEM_FINGERPRINT,
            "openai.request.service_tier": SERVICE_TIER,
            "openai.response.service_tier": SERVICE_TIER,
            "openai.response.system_fingerprint": SYSTEM_FINGERPRINT,
            "gen_ai.request.encoding_formats": StringArray(token(r"[a-z0-9_]+", 32), 8),
            "thread.id": IntRange(0, _INT64),
            "thread.name": IDENTIFIER,
            "code.function.name": token(r"[A-Za-z_<][A-Za-z0-9_.<>]*", 256),
            "code.function": token(r"[A-Za-z_<][A-Za-z0-9_.<>]*", 256),
            "code.line.number": IntRange(0, 10**7),
            "code.lineno": IntRange(0, 10**7),
        },
        resource_keys={
            "process.pid": resource,
            "process.runtime.name": resource,
            "process.runtime.version": resource,
            "host.arch": resource,
            "os.type": resource,
        },
        exception_fingerprint=True,
    )


LOCAL: Final[Policy] = _local()
"""The local preset: the default for the SQLite store. Strict plus server address, service tiers, thread and
code-location names, process id/runtime, and a keyed fingerprint of exception messages. No content."""

PRESETS: Final[Mapping[str, Policy]] = {"strict": STRICT, "local": LOCAL}


# --- policy files -----------------------------------------------------------------------------------------
_RULE_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "enum": frozenset({"values"}),
    "closed_set": frozenset({"values", "max_items"}),
    "bool": frozenset(),
    "int": frozenset({"min", "max"}),
    "float": frozenset({"min", "max"}),
    "token": frozenset({"pattern", "max_length"}),
    "string_array": frozenset({"pattern", "max_length", "max_items"}),
    "scalar": frozenset({"max_length"}),
    "hashed_id": frozenset({"id_kind"}),
    "registered_name": frozenset({"name_kind"}),
}
_FILE_KEYS: Final = frozenset(
    {
        "name",
        "extends",
        "allowed_keys",
        "allowed_span_names",
        "allowed_events",
        "resource_keys",
        "scope_keys",
        "blocked_values",
        "hash_function",
        "summary",
        "exception_fingerprint",
        "on_error",
    }
)


def _require(spec: Mapping[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in spec:
        raise PolicyError(f"{where}: missing {name!r}")
    value = spec[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise PolicyError(f"{where}: {name!r} has the wrong type ({type(value).__name__})")
    return value


def rule_from_spec(spec: Mapping[str, Any], where: str = "rule") -> Rule:
    """Build a rule from its policy-file table, e.g. ``{type = "int", min = 0, max = 100}``."""
    if not isinstance(spec, Mapping):
        raise PolicyError(f'{where}: a rule is a table such as {{ type = "int", min = 0, max = 10 }}')
    kind = spec.get("type")
    if not isinstance(kind, str) or kind not in _RULE_FIELDS:
        raise PolicyError(f"{where}: 'type' must be one of {', '.join(_RULE_FIELDS)}, not {kind!r}")
    extra = set(spec) - _RULE_FIELDS[kind] - {"type"}
    if extra:
        raise PolicyError(f"{where}: unknown field(s) for a {kind} rule: {', '.join(sorted(extra))}")
    where = f"{where} ({kind})"
    if kind == "enum":
        values = _require(spec, "values", list, where)
        if not values or not all(isinstance(v, (str, bool)) for v in values):
            raise PolicyError(f"{where}: 'values' must be a non-empty list of strings or booleans")
        return Enum(frozenset(values))
    if kind == "closed_set":
        values = _require(spec, "values", list, where)
        if not values or not all(isinstance(v, str) and v for v in values):
            raise PolicyError(f"{where}: 'values' must be a non-empty list of non-empty strings")
        max_items = spec.get("max_items")
        if max_items is not None and (type(max_items) is not int or max_items < 1):
            raise PolicyError(f"{where}: 'max_items' must be a positive integer (omit it for a single string)")
        return ClosedSet(frozenset(values), max_items)
    if kind == "bool":
        return Boolean()
    if kind in ("int", "float"):
        number: type | tuple[type, ...] = int if kind == "int" else (int, float)
        low, high = _require(spec, "min", number, where), _require(spec, "max", number, where)
        if low > high or (kind == "float" and not (math.isfinite(low) and math.isfinite(high))):
            raise PolicyError(f"{where}: need finite min <= max")
        return IntRange(low, high) if kind == "int" else FloatRange(float(low), float(high))
    if kind in ("token", "string_array"):
        pattern = _require(spec, "pattern", str, where)
        max_length = _require(spec, "max_length", int, where)
        if max_length < 1:
            raise PolicyError(f"{where}: 'max_length' must be positive")
        try:
            item = Token(re.compile(pattern), max_length)
        except re.error as exc:
            raise PolicyError(f"{where}: 'pattern' is not a regular expression: {exc}") from None
        if kind == "token":
            return item
        max_items = _require(spec, "max_items", int, where)
        if max_items < 1:
            raise PolicyError(f"{where}: 'max_items' must be positive")
        return StringArray(item, max_items)
    if kind == "scalar":
        max_length = spec.get("max_length", 256)
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
            raise PolicyError(f"{where}: 'max_length' must be a positive integer")
        return Scalar(max_length)
    if kind == "hashed_id":
        id_kind = _require(spec, "id_kind", str, where)
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", id_kind):
            raise PolicyError(f"{where}: 'id_kind' must be a short lower-case identifier")
        return HashedId(id_kind)
    name_kind = _require(spec, "name_kind", str, where)
    try:
        return RegisteredName(name_kind)
    except ValueError as exc:
        raise PolicyError(f"{where}: {exc}") from None


def _rules(table: Any, where: str) -> dict[str, Rule | None]:
    if not isinstance(table, Mapping):
        raise PolicyError(f"{where} must be a table of key = rule")
    out: dict[str, Rule | None] = {}
    for key, spec in table.items():
        if spec is False:
            out[key] = None  # remove a key the base policy allows
        else:
            out[key] = rule_from_spec(spec, f"{where}.{key!r}")
    return out


def policy_from_dict(data: Mapping[str, Any], *, source: str = "policy") -> Policy:
    """Build a policy from the parsed contents of a policy file (see :func:`load_policy`)."""
    unknown = set(data) - _FILE_KEYS
    if unknown:
        raise PolicyError(f"{source}: unknown setting(s): {', '.join(sorted(unknown))}")
    base_name = data.get("extends", "strict")
    if base_name == "none":
        base = Policy(name="none", allowed_keys={}, on_error="tombstone")
    elif isinstance(base_name, str) and base_name in PRESETS:
        base = PRESETS[base_name]
    else:
        raise PolicyError(f"{source}: 'extends' must be one of strict, local, none, not {base_name!r}")
    changes: dict[str, Any] = {}
    for table in ("allowed_keys", "resource_keys", "scope_keys"):
        if table in data:
            changes[table] = _rules(data[table], f"{source}: {table}")
    if "allowed_span_names" in data:
        names = data["allowed_span_names"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise PolicyError(f"{source}: allowed_span_names must be a list of strings")
        changes["allowed_span_names"] = base.allowed_span_names | frozenset(names)
    if "allowed_events" in data:
        events = data["allowed_events"]
        if not isinstance(events, Mapping) or not all(
            isinstance(v, list) and all(isinstance(k, str) for k in v) for v in events.values()
        ):
            raise PolicyError(f"{source}: allowed_events must be a table of event name = [attribute keys]")
        changes["allowed_events"] = {**base.allowed_events, **{k: frozenset(v) for k, v in events.items()}}
    if "blocked_values" in data:
        blocked = data["blocked_values"]
        if not isinstance(blocked, list) or not all(isinstance(b, str) for b in blocked):
            raise PolicyError(f"{source}: blocked_values must be a list of regular expressions")
        changes["blocked_values"] = base.blocked_values + tuple(blocked)
    for setting, kind in (("hash_function", str), ("summary", str), ("on_error", str), ("exception_fingerprint", bool)):
        if setting in data:
            if not isinstance(data[setting], kind):
                raise PolicyError(f"{source}: {setting} must be a {kind.__name__}")
            changes[setting] = data[setting]
    name = data.get("name", f"{base.name}+{Path(source).stem}" if source != "policy" else f"{base.name}+custom")
    if not isinstance(name, str) or not name:
        raise PolicyError(f"{source}: name must be a non-empty string")
    try:
        return base.derive(name, **changes)
    except PolicyError as exc:
        raise PolicyError(f"{source}: {exc}") from None


def load_policy(path: str | os.PathLike[str]) -> Policy:
    """Read a TOML policy file. Raises :class:`PolicyError` (with the file and the setting) on any problem."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
    source = str(path)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {source}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"policy file {source} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:  # tomllib decodes the bytes itself and lets this through
        raise PolicyError(f"policy file {source} is not UTF-8 text (byte {exc.start})") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise PolicyError(f"policy file {source} nests arrays or tables too deeply") from None
    return policy_from_dict(data, source=source)


def resolve_policy(spec: Policy | str | os.PathLike[str]) -> Policy:
    """A policy from a :class:`Policy`, a preset name (``strict``, ``local``) or the path of a TOML file."""
    if isinstance(spec, Policy):
        return spec
    if isinstance(spec, str) and spec in PRESETS:
        return PRESETS[spec]
    if isinstance(spec, (str, os.PathLike)):
        return load_policy(spec)
    raise PolicyError(f"a policy is a Policy, 'strict', 'local' or a file path, not {type(spec).__name__}")


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    """The policy as a policy-file table with ``extends = "none"`` (round-trips through :func:`policy_from_dict`)."""

    def rules(table: Mapping[str, Rule]) -> dict[str, Any]:
        return {key: table[key].to_spec() for key in sorted(table)}

    return {
        "name": policy.name,
        "extends": "none",
        "allowed_keys": rules(policy.allowed_keys),
        "allowed_span_names": sorted(policy.allowed_span_names),
        "allowed_events": {k: sorted(v) for k, v in sorted(policy.allowed_events.items())},
        "resource_keys": rules(policy.resource_keys),
        "scope_keys": rules(policy.scope_keys),
        "blocked_values": list(policy.blocked_values),
        "hash_function": policy.hash_function,
        "summary": policy.summary,
        "exception_fingerprint": policy.exception_fingerprint,
        "on_error": policy.on_error,
    }


def describe_keys(policy: Policy) -> Iterable[tuple[str, str]]:
    """``(key, what may appear)`` for every span/event/link attribute key the policy allows, sorted."""
    for key in sorted(policy.allowed_keys):
        yield key, policy.allowed_keys[key].describe()
