"""The presets keep the cost and budget attributes, and drop a hostile value in their place."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.processor import SpanRedactor

HASHER = IdHasher(bytes.fromhex("c7a6e2eaefcf28d75bde3ccca5ae12fb82c38f78ebf73c15b6397bde3c7308c7"))
PRESETS = pytest.mark.parametrize("policy", [STRICT, LOCAL], ids=["strict", "local"])


def _redact(policy: Policy, attributes: dict[str, Any], events: tuple[Event, ...] = ()) -> ReadableSpan:
    span = ReadableSpan(
        name="invoke_agent",
        context=SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED)),
        resource=Resource({}),
        attributes={sc.AGENTDIAG_KIND: sc.KIND_RUN, **attributes},
        events=events,
        status=Status(StatusCode.UNSET),
        start_time=1,
        end_time=2,
    )
    return SpanRedactor(policy, HASHER, NameRegistry()).redact(span)


@PRESETS
def test_the_presets_keep_cost_and_budget_attributes(policy: Policy) -> None:
    kept = {
        sc.AGENTDIAG_COST_USD: 0.0125,
        sc.AGENTDIAG_USAGE_COST_USD: 1.5,
        sc.AGENTDIAG_BUDGET_EXCEEDED: True,
        sc.AGENTDIAG_BUDGET_LIMITS: ("cost_usd", "total_tokens"),
    }
    event = Event(
        sc.AGENTDIAG_BUDGET_EXCEEDED,
        {sc.AGENTDIAG_BUDGET_LIMIT: "cost_usd", sc.AGENTDIAG_BUDGET_THRESHOLD: 0.5},
        timestamp=1,
    )
    out = _redact(policy, kept, (event,))
    attributes = dict(out.attributes or {})
    for key, value in kept.items():
        assert attributes[key] == value
    (budget_event,) = [e for e in out.events if e.name == sc.AGENTDIAG_BUDGET_EXCEEDED]
    assert dict(budget_event.attributes or {}) == {
        sc.AGENTDIAG_BUDGET_LIMIT: "cost_usd",
        sc.AGENTDIAG_BUDGET_THRESHOLD: 0.5,
    }


@PRESETS
@pytest.mark.parametrize("hostile", [-0.5, float("nan"), float("inf"), "0.5", "sk-proj-abcdefghijklmnop", 1e12])
def test_a_hostile_cost_is_dropped(policy: Policy, hostile: Any) -> None:
    out = dict(_redact(policy, {sc.AGENTDIAG_COST_USD: hostile, sc.AGENTDIAG_USAGE_COST_USD: hostile}).attributes or {})
    assert sc.AGENTDIAG_COST_USD not in out and sc.AGENTDIAG_USAGE_COST_USD not in out


@PRESETS
def test_a_limit_name_outside_the_closed_set_never_leaves(policy: Policy) -> None:
    out = dict(_redact(policy, {sc.AGENTDIAG_BUDGET_LIMITS: ("cost_usd", "user@example.com")}).attributes or {})
    assert "user@example.com" not in repr(out)
    assert out.get(sc.AGENTDIAG_BUDGET_LIMITS) in (None, ("cost_usd",), ("cost_usd", "_OTHER"))
