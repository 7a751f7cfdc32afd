"""The redactor decides an ``int`` under a range rule without calling the rule: the same verdict, always.

``SpanRedactor`` works out once per key whether the key's rule decides an ``int`` by a range test (exact
``IntRange``, ``FloatRange`` and ``Scalar``), and then tests the range inline. These tests hold it to the rule's
own ``apply`` for every kind of value at and around the bounds, per key, per policy, with ``blocked_values``
(where the shortcut is off), and from several threads at once.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from otel_agentdiag import semconv as sc
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.redaction.processor import SpanRedactor
from otel_agentdiag.redaction.rules import FloatRange, IntRange, RedactionContext, Rule, Scalar
from otel_agentdiag.testing import TEST_HASH_KEY

HASHER = IdHasher(TEST_HASH_KEY)
KEY = "app.count"
INVALID = sc.AGENTDIAG_REDACTION_PREFIX + "invalid_value"

RULES: list[Rule] = [
    IntRange(0, 9),
    IntRange(-5, 5),
    FloatRange(0.0, 1.5),
    FloatRange(-1e300, 1e300),
    Scalar(),
    Scalar(8),
]
VALUES: list[Any] = [
    0,
    1,
    -1,
    5,
    -5,
    6,
    -6,
    9,
    10,
    True,
    False,
    1.0,
    0.5,
    1.5,
    float("nan"),
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    10**400,
    -(10**400),
    "1",
    (1, 2),
]


def _span(value: Any, key: str = KEY) -> ReadableSpan:
    return ReadableSpan(
        name=sc.OTHER_VALUE,  # what the policy names it: no span_name count
        context=SpanContext(1, 2, False, TraceFlags(1)),
        resource=Resource.get_empty(),
        attributes={key: value},
    )


def _expected(rule: Rule, value: Any) -> tuple[bool, Any, str | None]:
    """What the rule itself says: kept?, the kept value, the reason counted."""
    kept, reason = rule.apply(value, RedactionContext(HASHER, None))
    return kept is not None, kept, reason


def _check(redactor: SpanRedactor, rule: Rule, value: Any) -> None:
    attributes = dict(redactor.redact(_span(value)).attributes or {})
    is_kept, kept, reason = _expected(rule, value)
    assert (KEY in attributes) is is_kept, (rule, value, attributes)
    if is_kept:
        assert attributes[KEY] is kept or attributes[KEY] == kept
        assert type(attributes[KEY]) is type(value), (rule, value)
    counted = {k: v for k, v in attributes.items() if k.startswith(sc.AGENTDIAG_REDACTION_PREFIX)}
    assert counted == ({} if reason is None else {sc.AGENTDIAG_REDACTION_PREFIX + reason: 1}), (rule, value)


@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_every_value_gets_the_rules_own_verdict(rule: Rule) -> None:
    policy = STRICT.derive("ints", allowed_keys={KEY: rule})
    shared = SpanRedactor(policy, HASHER)  # one redactor for all values: its per-key decision is reused
    for value in VALUES + list(reversed(VALUES)):
        _check(shared, rule, value)
        _check(SpanRedactor(policy, HASHER), rule, value)  # a fresh one: the first decision for the key


@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_with_blocked_values_the_verdicts_are_the_same(rule: Rule) -> None:
    """``blocked_values`` turns the shortcut off (every kept value meets the patterns): nothing changes."""
    policy = STRICT.derive("ints+blocked", allowed_keys={KEY: rule}, blocked_values=("^1$", "5"))
    redactor = SpanRedactor(policy, HASHER)
    for value in VALUES:
        if isinstance(value, str):
            continue  # a string "1" is blocked, as it should be; not what this test is about
        _check(redactor, rule, value)


def test_the_range_is_the_keys_own() -> None:
    """Two keys, two ranges, one value: each key keeps or drops it by its own rule."""
    policy = STRICT.derive("two", allowed_keys={"app.small": IntRange(0, 5), "app.large": IntRange(0, 9)})
    redactor = SpanRedactor(policy, HASHER)
    for _ in range(3):
        span = ReadableSpan(
            name=sc.OTHER_VALUE,  # what the policy names it: no span_name count
            context=SpanContext(1, 2, False, TraceFlags(1)),
            resource=Resource.get_empty(),
            attributes={"app.small": 7, "app.large": 7},
        )
        attributes = dict(redactor.redact(span).attributes or {})
        assert "app.small" not in attributes
        assert attributes["app.large"] == 7
        assert attributes[INVALID] == 1


def test_another_policy_does_not_reuse_a_decision() -> None:
    wide = SpanRedactor(STRICT.derive("wide", allowed_keys={KEY: IntRange(0, 100)}), HASHER)
    narrow = SpanRedactor(STRICT.derive("narrow", allowed_keys={KEY: IntRange(0, 10)}), HASHER)
    for _ in range(3):
        assert dict(wide.redact(_span(50)).attributes or {})[KEY] == 50
        assert KEY not in dict(narrow.redact(_span(50)).attributes or {})


def test_a_rule_subclass_is_asked_every_time() -> None:
    """Only the exact rule types are decided inline: a subclass may decide differently."""

    class EvenOnly(IntRange):  # type: ignore[misc]
        def apply(self, value: Any, ctx: RedactionContext) -> tuple[Any, str | None]:
            if type(value) is int and value % 2:
                return None, "invalid_value"
            return IntRange.apply(self, value, ctx)

    redactor = SpanRedactor(STRICT.derive("even", allowed_keys={KEY: EvenOnly(0, 9)}), HASHER)
    assert dict(redactor.redact(_span(4)).attributes or {})[KEY] == 4
    assert KEY not in dict(redactor.redact(_span(3)).attributes or {})


def test_threads_sharing_a_redactor_get_the_rules_verdicts() -> None:
    rule = IntRange(0, 9)
    redactor = SpanRedactor(STRICT.derive("threads", allowed_keys={KEY: rule}), HASHER)
    failures: list[str] = []
    start = threading.Barrier(4)

    def work(offset: int) -> None:
        start.wait()
        for i in range(400):
            value = (i + offset) % 14 - 2  # -2..11: in and out of the range
            attributes = dict(redactor.redact(_span(value)).attributes or {})
            if (KEY in attributes) != (0 <= value <= 9):
                failures.append(f"{value}: {attributes}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
