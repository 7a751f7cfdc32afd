"""The redaction policy: a fail-closed allowlist over the whole span.

A :class:`Policy` names every attribute key that may leave the process and the :class:`Rule` its value must
satisfy. Keys it does not name are dropped; values that break their rule are dropped; correlation IDs are
replaced by keyed digests; tool and agent names not registered as code become the placeholder ``_OTHER``.
The same rules apply to event and link attributes; span names are rebuilt from the redacted attributes;
status descriptions never leave; the resource keeps only allowed prefixes.

Each outcome other than "kept as is" has a reason code; the processor counts them on the span as
``agentdiag.redaction.<reason>`` and never records the value or the key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from otel_agentdiag import semconv as sc

# Reason codes (the suffix of the ``agentdiag.redaction.*`` counters).
UNKNOWN_KEY: Final = "unknown_key"
INVALID_VALUE: Final = "invalid_value"
SENSITIVE_VALUE: Final = "sensitive_value"
UNREGISTERED_NAME: Final = "unregistered_name"
HASHED: Final = "hashed"
EVENT_DROPPED: Final = "event"
SPAN_NAME: Final = "span_name"
STATUS_DESCRIPTION: Final = "status_description"
REASONS: Final = (
    UNKNOWN_KEY,
    INVALID_VALUE,
    SENSITIVE_VALUE,
    UNREGISTERED_NAME,
    HASHED,
    EVENT_DROPPED,
    SPAN_NAME,
    STATUS_DESCRIPTION,
)

_SENSITIVE = re.compile(
    r"""(?ix)
      \b(?:sk|pk|rk)-[a-z0-9_\-]{12,}        # API keys (OpenAI, Stripe, ...)
    | \bAKIA[0-9A-Z]{16}\b                    # AWS access key id
    | \bgh[pousr]_[A-Za-z0-9]{20,}            # GitHub tokens
    | \bxox[abprs]-                           # Slack tokens
    | \bAIza[0-9A-Za-z_\-]{30,}               # Google API keys
    | \beyJ[A-Za-z0-9_\-]{8,}\.               # JWTs
    | \bbearer\s | \bbasic\s                  # authorization header values
    | -----BEGIN                              # PEM blocks
    | [^@\s/]+@[^@\s/]+\.[a-z]{2,}            # e-mail addresses
    | [a-z][a-z0-9+.\-]*://                   # URLs (may carry hosts, user-info, queries)
    | (?:^|[\s=:])(?:/|~/|[a-z]:\\)           # absolute paths
    | /(?:home|users|root|private|var|tmp)/   # paths that name a user or a host's layout
    """
)


def is_sensitive(text: str) -> bool:
    """The public-safety check applied to every string a bounded-token rule accepts."""
    return _SENSITIVE.search(text) is not None


class Rule:
    """A check for one attribute value. ``apply`` returns ``(value, reason)``.

    ``value`` is what is exported (``None``: drop it); ``reason`` is ``None`` when the value passes unchanged,
    else the reason code to count. A rule whose verdict depends only on the value is ``cacheable``: the
    processor remembers recent verdicts per (key, value).
    """

    __slots__ = ()

    cacheable: bool = True

    def apply(self, value: Any, ctx: RedactionContext) -> tuple[Any, str | None]:
        raise NotImplementedError


class RedactionContext:
    """What rules may consult besides the value: the key hasher and the name registry."""

    __slots__ = ("hasher", "names")

    def __init__(self, hasher: Any, names: Any) -> None:
        self.hasher = hasher
        self.names = names


@dataclass(frozen=True, slots=True)
class Enum(Rule):
    """The value is one of ``values`` (strings or booleans)."""

    values: frozenset[Any]

    def apply(self, value: Any, ctx: RedactionContext) -> tuple[Any, str | None]:
        if isinstance(value, (str, bool)) and value in self.values:
            return value, None
        return None, INVALID_VALUE


@dataclass(frozen=True, slots=True)
class Boolean(Rule):
    def apply(self, value: Any, ctx: RedactionContext) -> tuple[Any, str | None]:
        return (value, None) if isinstance(value, bool) else (None, INVALID_VALUE)


@dataclass(frozen=True, slots=True)
class IntRange(Rule):
    """An integer (not a bool) in ``[minimum, maximum]``."""

    minimum: int
    maximum: int

    def apply(self, value: Any, ctx: RedactionContext) -> tuple[Any, str | None]:
        if type(value) is int and self.minimum <= value <= self.maximum:
            return value, None
        return None, INVALID_VALUE


@dataclass(frozen=True, slots=True)
class FloatRange(Rule):
    """A finite number (int or float, not bool) in ``[minimum, maximum]``."""

    minimum: float
    maximum: float

    def apply(self, value: Any, ctx: RedactionContext) -> tuple[Any, str | None]:
        if type(value) in (int, float) and math.isfinite(value) and self.minimum <= value <= self.maximum:
            return value, None
        return None, INVALID_VALUE


_MEMO_LIMIT: Final = 4096


@dataclass(frozen=True, slots=True)
class Token(Rule):
    """A bounded string token: at most ``max_length`` characters, matching ``pattern`` in full, and passing
    the public-safety check (no credential, e-mail address, URL or absolute path)."""

    pattern: re.Pattern[str]
    max_length: int
    _memo: dict[str, tuple[Any, str | None]] = field(default_factory=dict, compare=False, hash=False, repr=False)
    """Verdicts for recently seen values: model, provider and error names repeat on almost every span."""

    def apply(self, value: Any, ctx: RedactionContext) -> tuple[Any, str | None]:
        if not isinstance(value, str) or len(value) > self.max_length:
            return None, INVALID_VALUE  # length first: never scan an unbounded string
        memo = self._memo
        verdict = memo.get(value)
        if verdict is None:
            if is_sensitive(value):
                verdict = (None, SENSITIVE_VALUE)
            elif self.pattern.fullmatch(value) is None:
                verdict = (None, INVALID_VALUE)
            else:
                verdict = (value, None)
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            memo[value] = verdict
        return verdict


@dataclass(frozen=True, slots=True)
class StringArray(Rule):
    """A sequence of at most ``max_items`` strings, each passing ``item``; one bad item drops the whole value."""

    item: Token
    max_items: int

    def apply(self, value: Any, ctx: RedactionContext) -> tuple[Any, str | None]:
        if not isinstance(value, (tuple, list)) or len(value) > self.max_items:
            return None, INVALID_VALUE
        for element in value:
            _, reason = self.item.apply(element, ctx)
            if reason is not None:
                return None, reason
        return value, None


MAX_ID_LENGTH: Final = 4096


@dataclass(frozen=True, slots=True)
class HashedId(Rule):
    """A correlation ID of kind ``id_kind``: exported only as its keyed digest."""

    id_kind: str

    def apply(self, value: Any, ctx: RedactionContext) -> tuple[Any, str | None]:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return None, INVALID_VALUE
        if isinstance(value, str):
            if not value or len(value) > MAX_ID_LENGTH:
                return None, INVALID_VALUE
            if ctx.hasher.is_digest(value):
                return value, None
        return ctx.hasher.digest(self.id_kind, value), HASHED


@dataclass(frozen=True, slots=True)
class RegisteredName(Rule):
    """A tool or agent name (``name_kind`` ``"tool"``/``"agent"``) that code declared; anything else becomes
    the placeholder ``_OTHER``."""

    name_kind: str

    cacheable = False  # names may be registered at any time

    def apply(self, value: Any, ctx: RedactionContext) -> tuple[Any, str | None]:
        names = ctx.names
        known = names.is_tool(value) if self.name_kind == "tool" else names.is_agent(value)
        if known:
            return value, None
        return sc.OTHER_VALUE, UNREGISTERED_NAME


def token(pattern: str, max_length: int) -> Token:
    return Token(re.compile(pattern), max_length)


MODEL_NAME = token(r"[A-Za-z0-9][A-Za-z0-9._:/@+\-]*", 128)
PROVIDER_NAME = token(r"[a-z0-9][a-z0-9_.\-]*", 64)
OPERATION_NAME = token(r"[a-z][a-z0-9_]*", 64)
ERROR_TYPE = token(r"[A-Za-z_<][A-Za-z0-9_.<>]*", 256)
FINISH_REASON = token(r"[a-z][a-z0-9_]*", 32)
RESOURCE_STRING = token(r"[^\x00-\x1f\x7f]*", 256)

_INT64 = 2**63 - 1


@dataclass(frozen=True)
class Policy:
    """A fail-closed allowlist over the whole span.

    Option names follow the OpenTelemetry Collector's ``redaction`` processor where the concept is the same
    (``allowed_keys``, ``summary``).
    """

    name: str
    allowed_keys: Mapping[str, Rule]
    """Attribute key → rule. Applies to span, event and link attributes."""
    allowed_key_prefixes: tuple[tuple[str, Rule], ...] = ()
    """``(prefix, rule)``: any key starting with ``prefix`` (e.g. ``gen_ai.usage.``) is checked by ``rule``."""
    allowed_span_names: frozenset[str] = frozenset()
    """Literal span names kept when a span's name cannot be rebuilt from its redacted attributes."""
    allowed_events: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Event name → the attribute keys it may keep (each still checked by ``allowed_keys``)."""
    allowed_resource_prefixes: tuple[str, ...] = ()
    """Resource attribute keys kept (values must be bounded, non-sensitive scalars)."""
    summary: str = "info"
    """``info``: count what was removed on the span (``agentdiag.redaction.*``); ``silent``: record nothing.
    There is no ``debug``: listing removed keys would itself leak."""

    def __post_init__(self) -> None:
        if self.summary not in ("info", "silent"):
            raise ValueError(f"summary must be 'info' or 'silent', not {self.summary!r}")

    def rule_for(self, key: str) -> Rule | None:
        rule = self.allowed_keys.get(key)
        if rule is None:
            for prefix, prefix_rule in self.allowed_key_prefixes:
                if key.startswith(prefix):
                    return prefix_rule
        return rule


def _strict() -> Policy:
    hashed = {key: HashedId(kind) for key, kind in sc.CORRELATION_ID_KINDS.items()}
    keys: dict[str, Rule] = {
        sc.AGENTDIAG_KIND: Enum(frozenset(sc.KINDS)),
        sc.AGENTDIAG_ITERATION_INDEX: IntRange(0, 10**9),
        sc.AGENTDIAG_SEQUENCE: IntRange(0, _INT64),
        sc.GEN_AI_OPERATION_NAME: OPERATION_NAME,
        sc.GEN_AI_PROVIDER_NAME: PROVIDER_NAME,
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
        sc.GEN_AI_RESPONSE_FINISH_REASONS: StringArray(FINISH_REASON, 16),
        sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: FloatRange(0.0, 86_400.0),
        sc.GEN_AI_AGENT_NAME: RegisteredName("agent"),
        sc.GEN_AI_TOOL_NAME: RegisteredName("tool"),
        sc.GEN_AI_TOOL_TYPE: Enum(frozenset({"function", "extension", "datastore"})),
        sc.ERROR_TYPE: ERROR_TYPE,
        sc.SERVER_PORT: IntRange(0, 65535),
        sc.EXCEPTION_TYPE: ERROR_TYPE,
        **hashed,
    }
    return Policy(
        name="strict",
        allowed_keys=keys,
        allowed_key_prefixes=((sc.GEN_AI_USAGE_PREFIX, IntRange(0, 10**12)),),
        allowed_span_names=frozenset({sc.ITERATION_SPAN_NAME}),
        # Exception events keep the exception's type only: message and stack trace are data.
        allowed_events={sc.EXCEPTION_EVENT_NAME: frozenset({sc.EXCEPTION_TYPE})},
        allowed_resource_prefixes=("service.", "telemetry.sdk.", "deployment.environment"),
    )


STRICT: Final[Policy] = _strict()
"""The strict preset: the default for every destination until per-destination presets land."""
