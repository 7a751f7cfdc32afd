"""Redaction: the policy (``policy``), keyed ID hashing (``hashing``) and the processor (``processor``).

The policy is built of value rules (``rules``), the ``Policy`` allowlist (``allowlist``), the shipped presets
(``presets``) and policy files (``policy_file``); ``redactor`` is the per-span transform the processor applies.
"""

from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.policy_file import load_policy, resolve_policy
from otel_agentdiag.redaction.presets import LOCAL, PRESETS, STRICT
from otel_agentdiag.redaction.processor import RedactingSpanProcessor, SpanRedactor
from otel_agentdiag.redaction.rules import (
    Boolean,
    Callback,
    ClosedSet,
    Enum,
    FloatRange,
    HashedId,
    IntRange,
    PolicyError,
    RegisteredName,
    Rule,
    Scalar,
    StringArray,
    Token,
    token,
)

__all__ = [
    "LOCAL",
    "PRESETS",
    "STRICT",
    "Boolean",
    "Callback",
    "ClosedSet",
    "Enum",
    "FloatRange",
    "HashedId",
    "IdHasher",
    "IntRange",
    "Policy",
    "PolicyError",
    "RedactingSpanProcessor",
    "RegisteredName",
    "Rule",
    "Scalar",
    "SpanRedactor",
    "StringArray",
    "Token",
    "load_policy",
    "resolve_policy",
    "token",
]
