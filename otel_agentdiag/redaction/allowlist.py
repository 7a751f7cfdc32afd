"""The Policy type: a fail-closed allowlist naming each attribute key that may leave and the rule for its value.

Keys the policy does not name are dropped. A key may be written with closed ``{a,b}`` sets, stored spelled out,
or as an open ``*`` pattern (for policy files that need one; the presets have none). The same key → rule
tables serve span, event and link attributes; resource and scope attributes have tables of their own. Span
names, events and status descriptions are decided by the processor from the policy's other settings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from otel_agentdiag import semconv as sc
from otel_agentdiag.redaction import keys as _keys
from otel_agentdiag.redaction.recognizers import is_sensitive
from otel_agentdiag.redaction.rules import DEBUG_KEYS, PolicyError, Rule

SUMMARY_MODES: Final = ("info", "silent", "debug")
HASH_FUNCTIONS: Final = ("hmac-sha256", "sha256")
ON_ERROR_MODES: Final = ("tombstone", "drop")

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


def describe_keys(policy: Policy) -> Iterable[tuple[str, str]]:
    """``(key, what may appear)`` for every span/event/link attribute key the policy allows, sorted."""
    for key in sorted(policy.allowed_keys):
        yield key, policy.allowed_keys[key].describe()
