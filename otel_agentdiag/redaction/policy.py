"""The redaction policy in one import: value rules, the Policy type, the presets and policy files, re-exported.

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

Where each part lives:

- :mod:`~otel_agentdiag.redaction.reasons`: the reason codes;
- :mod:`~otel_agentdiag.redaction.rules`: the value rules (:class:`Rule` and its kinds) and :class:`PolicyError`;
- :mod:`~otel_agentdiag.redaction.allowlist`: the :class:`Policy` type and its key tables;
- :mod:`~otel_agentdiag.redaction.presets`: :data:`STRICT`, :data:`LOCAL` and their building blocks;
- :mod:`~otel_agentdiag.redaction.policy_file`: TOML policy files (:func:`load_policy`, :func:`resolve_policy`);
- :mod:`~otel_agentdiag.redaction.recognizers`: the public-safety check :func:`is_sensitive`.
"""

from __future__ import annotations

from otel_agentdiag.redaction.allowlist import (
    Policy,
    describe_keys,
    open_patterns,
)
from otel_agentdiag.redaction.policy_file import (
    load_policy,
    policy_from_dict,
    policy_to_dict,
    resolve_policy,
    rule_from_spec,
)
from otel_agentdiag.redaction.presets import (
    FINISH_REASON,
    FINISH_REASON_ARRAY,
    LOCAL,
    PRESETS,
    STRICT,
)
from otel_agentdiag.redaction.reasons import (
    EVENT_DROPPED,
    HASHED,
    INVALID_VALUE,
    PUBLIC_SAFETY_VIOLATION,
    REASONS,
    SCHEMA_URL,
    SPAN_NAME,
    STATUS_DESCRIPTION,
    TOO_LONG,
    UNKNOWN_KEY,
)
from otel_agentdiag.redaction.recognizers import is_sensitive
from otel_agentdiag.redaction.rules import (
    MAX_ID_LENGTH,
    Boolean,
    Callback,
    ClosedSet,
    Enum,
    FloatRange,
    HashedId,
    IntRange,
    PolicyError,
    RedactionContext,
    RegisteredName,
    Rule,
    Scalar,
    StringArray,
    Token,
    token,
)

__all__ = [
    "EVENT_DROPPED",
    "FINISH_REASON",
    "FINISH_REASON_ARRAY",
    "HASHED",
    "INVALID_VALUE",
    "LOCAL",
    "MAX_ID_LENGTH",
    "PRESETS",
    "PUBLIC_SAFETY_VIOLATION",
    "REASONS",
    "SCHEMA_URL",
    "SPAN_NAME",
    "STATUS_DESCRIPTION",
    "STRICT",
    "TOO_LONG",
    "UNKNOWN_KEY",
    "Boolean",
    "Callback",
    "ClosedSet",
    "Enum",
    "FloatRange",
    "HashedId",
    "IntRange",
    "Policy",
    "PolicyError",
    "RedactionContext",
    "RegisteredName",
    "Rule",
    "Scalar",
    "StringArray",
    "Token",
    "describe_keys",
    "is_sensitive",
    "load_policy",
    "open_patterns",
    "policy_from_dict",
    "policy_to_dict",
    "resolve_policy",
    "rule_from_spec",
    "token",
]
