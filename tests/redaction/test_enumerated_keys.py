"""No key pattern may carry data: the presets name every key of a family, and a key outside them is unknown.

A ``*`` in an allowed key used to accept any key-shaped segment, so ``gen_ai.usage.customer_<card number>``
left with its value. These tests write data into keys under every family the presets used to cover with a
pattern (span, event, link and resource attributes, both presets) and check that each is dropped and counted
as ``unknown_key``, while every enumerated key, and every key our own instrumentation writes, still passes.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hostile_vocabulary import (
    DATA_SEGMENTS,
    RESOURCE_FAMILIES,
    SPAN_FAMILIES,
    data_keys,
    spelling_keys,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.instrumentation import _framework
from otel_agentdiag.redaction import collector
from otel_agentdiag.redaction import keys as enumerated
from otel_agentdiag.redaction.allowlist import Policy, open_patterns
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.processor import SpanRedactor
from otel_agentdiag.redaction.reasons import REASONS

HASHER = IdHasher(bytes.fromhex("c7a6e2eaefcf28d75bde3ccca5ae12fb82c38f78ebf73c15b6397bde3c7308c7"))
PREFIX = sc.AGENTDIAG_REDACTION_PREFIX
PRESETS = pytest.mark.parametrize("policy", [STRICT, LOCAL], ids=["strict", "local"])

HOSTILE_SPAN_KEYS = data_keys(SPAN_FAMILIES) + spelling_keys(SPAN_FAMILIES)
HOSTILE_RESOURCE_KEYS = data_keys(RESOURCE_FAMILIES) + spelling_keys(RESOURCE_FAMILIES)
ENUMERATED_SPAN_KEYS = (
    enumerated.GEN_AI_USAGE_KEYS
    + enumerated.AGENTDIAG_USAGE_KEYS
    + enumerated.OPENINFERENCE_TOKEN_COUNT_KEYS
    + ("llm.usage.total_tokens",)
)


def _span(
    attributes: dict[str, Any] | None = None,
    *,
    events: tuple[Event, ...] = (),
    links: tuple[Link, ...] = (),
    resource: Resource | None = None,
) -> ReadableSpan:
    return ReadableSpan(
        name="agent.iteration",
        context=SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED)),
        resource=resource if resource is not None else Resource({}),
        attributes=attributes or {},
        events=events,
        links=links,
        status=Status(StatusCode.UNSET),
        start_time=1,
        end_time=2,
    )


def _redact(policy: Policy, span: ReadableSpan) -> ReadableSpan:
    return SpanRedactor(policy, HASHER, NameRegistry()).redact(span)


def _counters(span: ReadableSpan) -> dict[str, Any]:
    return {k[len(PREFIX) :]: v for k, v in (span.attributes or {}).items() if k.startswith(PREFIX)}


def test_the_attack_keys_are_distinct_and_none_is_an_enumerated_key() -> None:
    assert len(set(HOSTILE_SPAN_KEYS)) == len(HOSTILE_SPAN_KEYS) > 300
    assert not set(HOSTILE_SPAN_KEYS) & set(ENUMERATED_SPAN_KEYS)
    assert not set(HOSTILE_RESOURCE_KEYS) & set(enumerated.TELEMETRY_RESOURCE_KEYS)


@PRESETS
def test_the_presets_have_no_key_pattern(policy: Policy) -> None:
    assert open_patterns(policy) == ()
    for table in (policy.allowed_keys, policy.resource_keys, policy.scope_keys):
        assert not [key for key in table if re.search(r"[*{}]", key)]


@PRESETS
@pytest.mark.parametrize("key", HOSTILE_SPAN_KEYS)
def test_a_data_carrying_key_under_a_former_pattern_has_no_rule(policy: Policy, key: str) -> None:
    assert policy.rule_for(key) is None


@PRESETS
def test_data_carrying_keys_are_dropped_and_counted_on_span_event_and_link(policy: Policy) -> None:
    hostile = {key: 4111 for key in HOSTILE_SPAN_KEYS}
    kept = {sc.GEN_AI_USAGE_INPUT_TOKENS: 12, "llm.token_count.total": 30}
    exception = Event("exception", {**hostile, sc.EXCEPTION_TYPE: "ValueError"}, 5)
    link = Link(SpanContext(0x1, 0x2, True, TraceFlags(TraceFlags.SAMPLED)), hostile)
    out = _redact(policy, _span({**hostile, **kept}, events=(exception,), links=(link,)))
    counters = _counters(out)
    attributes = {k: v for k, v in out.attributes.items() if not k.startswith(PREFIX)}
    assert attributes == kept
    assert dict(out.events[0].attributes) == {sc.EXCEPTION_TYPE: "ValueError"}
    assert dict(out.links[0].attributes) == {}
    assert counters == {"unknown_key": 3 * len(hostile)}
    # The segments are nowhere in what is exported, whatever their case.
    exported = out.to_json().lower()
    for segment in DATA_SEGMENTS:
        assert segment.lower() not in exported, segment


@PRESETS
def test_data_carrying_resource_keys_under_telemetry_are_dropped(policy: Policy) -> None:
    resource = Resource({**{key: "1.0" for key in HOSTILE_RESOURCE_KEYS}, "telemetry.sdk.language": "python"})
    out = _redact(policy, _span(resource=resource))
    assert dict(out.resource.attributes) == {"telemetry.sdk.language": "python"}


@PRESETS
def test_every_enumerated_key_passes_with_its_value(policy: Policy) -> None:
    values = {key: index + 1 for index, key in enumerate(ENUMERATED_SPAN_KEYS)}
    out = _redact(policy, _span(values))
    assert dict(out.attributes) == values  # nothing removed, so no counter either
    resource = Resource({key: f"v{index}" for index, key in enumerate(enumerated.TELEMETRY_RESOURCE_KEYS)})
    assert dict(_redact(policy, _span(resource=resource)).resource.attributes) == dict(resource.attributes)


@PRESETS
def test_the_counter_keys_are_exactly_the_reason_codes(policy: Policy) -> None:
    counters = {key for key in policy.allowed_keys if key.startswith(PREFIX)}
    assert counters == {PREFIX + reason for reason in REASONS}
    debug = policy.derive("debug", summary="debug")
    assert {key for key in debug.allowed_keys if key.startswith(PREFIX)} == counters | {sc.AGENTDIAG_REDACTION_KEYS}


@PRESETS
def test_counters_survive_a_second_redaction(policy: Policy) -> None:
    """Idempotence: the counters the first pass writes are all among the enumerated keys."""
    first = _redact(policy, _span({"app.prompt": "x", "gen_ai.usage.customer_4111111111111111": 1}))
    assert _counters(first) == {"unknown_key": 2}
    again = _redact(policy, first)
    assert dict(again.attributes) == dict(first.attributes)


def test_what_our_instrumentation_writes_is_enumerated() -> None:
    """The framework integrations roll leaf usage up into agentdiag.usage.*: every key they write is named."""
    assert set(_framework.USAGE_KEYS) <= set(enumerated.GEN_AI_USAGE_KEYS)
    assert set(_framework.ROLLUP_KEYS.values()) == set(enumerated.AGENTDIAG_USAGE_KEYS)
    semconv_usage = {value for name, value in vars(sc).items() if name.startswith("GEN_AI_USAGE_") and "." in value}
    assert semconv_usage - {sc.GEN_AI_USAGE_PREFIX} <= set(enumerated.GEN_AI_USAGE_KEYS)


def test_the_conventions_token_count_keys_are_enumerated() -> None:
    """Every token-count key the installed convention packages define is named (so none is dropped as
    unknown), checked against the packages themselves rather than a copy."""
    from openinference.semconv.trace import SpanAttributes as OpenInference

    openinference = {
        value
        for name, value in vars(OpenInference).items()
        if name.startswith("LLM_TOKEN_COUNT_") and isinstance(value, str) and not name.endswith("_DETAILS")
    }
    assert openinference and openinference <= set(enumerated.OPENINFERENCE_TOKEN_COUNT_KEYS)
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes

    semconv = {
        value
        for name, value in vars(gen_ai_attributes).items()
        if name.startswith("GEN_AI_USAGE_") and isinstance(value, str)
    }
    assert semconv and semconv <= set(enumerated.GEN_AI_USAGE_KEYS)


def test_the_collector_keeps_the_enumerated_keys_and_nothing_pattern_shaped() -> None:
    config = collector.collector_redaction_config(STRICT)
    allowed = set(config["allowed_keys"])
    assert set(ENUMERATED_SPAN_KEYS) - {"llm.usage.total_tokens"} <= allowed
    assert set(enumerated.TELEMETRY_RESOURCE_KEYS) <= allowed
    assert {PREFIX + reason for reason in REASONS} <= allowed
    assert not [key for key in allowed if re.search(r"[*{}]", key)]
    assert not set(HOSTILE_SPAN_KEYS) & allowed
