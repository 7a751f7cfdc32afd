"""Resource and scope schema URLs: only OpenTelemetry's leave; anything else is removed and counted.

OTLP exports ``ResourceSpans.schema_url`` and ``ScopeSpans.schema_url`` as they are, and any library can put a
host or a path there. The redactor keeps exactly ``https://opentelemetry.io/schemas/<major>.<minor>.<patch>``
and counts each other one as ``agentdiag.redaction.schema_url`` on every span of that resource or scope.
"""

from __future__ import annotations

from typing import Any

import pytest
from hostile_vocabulary import HOSTILE_SCHEMA_URLS, OTEL_SCHEMA_URLS
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.processor import SpanRedactor
from otel_agentdiag.redaction.reasons import REASONS, SCHEMA_URL
from otel_agentdiag.redaction.rules import IntRange
from otel_agentdiag.redaction.schema_url import allowed_schema_url

HASHER = IdHasher(bytes.fromhex("88400d79180a2f07406a57ea9bc89d17b23111a11282fed684216795363a8219"))
COUNTER = sc.AGENTDIAG_REDACTION_PREFIX + SCHEMA_URL


def _span(resource: Resource, scope: InstrumentationScope | None, span_id: int = 0xDEF) -> ReadableSpan:
    return ReadableSpan(
        name="agent.iteration",
        context=SpanContext(0xABC, span_id, False, TraceFlags(TraceFlags.SAMPLED)),
        resource=resource,
        attributes={sc.AGENTDIAG_KIND: sc.KIND_ITERATION},
        status=Status(StatusCode.UNSET),
        start_time=1,
        end_time=2,
        instrumentation_scope=scope,
    )


def _redactor(policy: Policy = STRICT) -> SpanRedactor:
    return SpanRedactor(policy, HASHER, NameRegistry())


def _counters(span: ReadableSpan) -> dict[str, Any]:
    prefix = sc.AGENTDIAG_REDACTION_PREFIX
    return {k[len(prefix) :]: v for k, v in (span.attributes or {}).items() if k.startswith(prefix)}


def test_schema_url_is_a_reason_code() -> None:
    assert SCHEMA_URL in REASONS
    assert STRICT.rule_for(COUNTER) == IntRange(0, 10**9)


@pytest.mark.parametrize("url", OTEL_SCHEMA_URLS)
def test_an_opentelemetry_schema_url_is_kept_on_resource_and_scope(url: str) -> None:
    assert allowed_schema_url(url)
    out = _redactor().redact(_span(Resource({"service.name": "svc"}, url), InstrumentationScope("lib", "1", url)))
    assert out.resource.schema_url == url
    assert out.instrumentation_scope.schema_url == url
    assert COUNTER not in out.attributes


@pytest.mark.parametrize("policy", [STRICT, LOCAL], ids=["strict", "local"])
@pytest.mark.parametrize("url", HOSTILE_SCHEMA_URLS)
def test_any_other_schema_url_is_removed_and_counted(policy: Policy, url: str) -> None:
    assert not allowed_schema_url(url)
    out = _redactor(policy).redact(_span(Resource({"service.name": "svc"}, url), InstrumentationScope("lib", "1", url)))
    assert not out.resource.schema_url
    assert not out.instrumentation_scope.schema_url
    assert _counters(out) == {SCHEMA_URL: 2}
    assert url not in out.to_json()
    # The rest of the resource and scope is unaffected.
    assert dict(out.resource.attributes) == {"service.name": "svc"}
    assert (out.instrumentation_scope.name, out.instrumentation_scope.version) == ("lib", "1")


def test_one_hostile_schema_url_counts_once_and_the_other_is_kept() -> None:
    good, bad = OTEL_SCHEMA_URLS[0], HOSTILE_SCHEMA_URLS[0]
    redactor = _redactor()
    out = redactor.redact(_span(Resource({}, bad), InstrumentationScope("lib", "1", good)))
    assert (out.resource.schema_url, out.instrumentation_scope.schema_url) == ("", good)  # Resource: "" for none
    assert _counters(out) == {SCHEMA_URL: 1}
    out = redactor.redact(_span(Resource({}, good), InstrumentationScope("lib", "1", bad)))
    assert (out.resource.schema_url, out.instrumentation_scope.schema_url) == (good, "")
    assert _counters(out) == {SCHEMA_URL: 1}


def test_every_span_of_a_shared_resource_and_scope_is_counted() -> None:
    """Resource and scope are rebuilt once per object and shared; the count is on each span, not only the first."""
    resource = Resource({"service.name": "svc"}, HOSTILE_SCHEMA_URLS[1])
    scope = InstrumentationScope("lib", "1", HOSTILE_SCHEMA_URLS[2])
    redactor = _redactor()
    outs = [redactor.redact(_span(resource, scope, span_id)) for span_id in range(1, 6)]
    assert [_counters(out) for out in outs] == [{SCHEMA_URL: 2}] * 5
    assert len({id(out.resource) for out in outs}) == 1  # still built once


def test_no_schema_url_is_not_counted() -> None:
    out = _redactor().redact(_span(Resource({}), InstrumentationScope("lib", "1")))
    assert _counters(out) == {}
    out = _redactor().redact(_span(Resource({}, ""), None))
    assert _counters(out) == {}


def test_silent_summary_removes_without_counting() -> None:
    silent = STRICT.derive("silent", summary="silent")
    out = _redactor(silent).redact(_span(Resource({}, HOSTILE_SCHEMA_URLS[0]), None))
    assert not out.resource.schema_url
    assert COUNTER not in out.attributes


def test_a_tombstone_carries_no_foreign_schema_url() -> None:
    tombstone = _redactor().tombstone(_span(Resource({}, HOSTILE_SCHEMA_URLS[0]), None))
    assert not tombstone.resource.schema_url


@pytest.mark.parametrize("value", [None, 37, b"https://opentelemetry.io/schemas/1.37.0", "x" * 100])
def test_allowed_schema_url_refuses_what_is_not_a_short_string(value: object) -> None:
    assert not allowed_schema_url(value)


@pytest.mark.parametrize("url", [None, OTEL_SCHEMA_URLS[0]])
def test_the_clean_resource_hashes_and_compares_as_the_sdks_own(url: str | None) -> None:
    # The clean resource keeps its hash (the SDK's OTLP encoder hashes it per span to group a batch): the same
    # value as a plain ``Resource`` of the same attributes and schema URL, equal to it, and one group with it.
    attributes = {"service.name": "svc", "service.version": "1.0.0"}
    clean = _redactor().redact(_span(Resource(attributes, url), None)).resource
    plain = Resource(attributes, url)
    assert dict(clean.attributes) == attributes and clean.schema_url == (url or "")
    assert hash(clean) == hash(plain) and clean == plain and plain == clean
    assert {clean: 1, plain: 2} == {plain: 2}
