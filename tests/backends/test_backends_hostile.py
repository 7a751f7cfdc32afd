"""The second line of defence, for real: a hostile instrumentation that bypasses our processors sends to the same
Collector, and its ``redaction`` processor (generated from the strict policy) is what stands before Jaeger.

The sender is the plain OpenTelemetry SDK (its own ``TracerProvider`` and OTLP/HTTP exporter, none of our
processors) with a unique sentinel on every surface of a span: attributes under unknown and allowed keys, raw
correlation ids, credential shapes (API keys, tokens, e-mail addresses, card numbers) as strings, inside text,
in arrays and as numbers, event names and attributes, link attributes, span names, the status description, the
trace state, resource attributes, and the instrumentation scope's name, version and attributes.

What the Collector passes on is read twice: verbatim at the Tempo stand-in (an OTLP receiver behind the same
Collector) and from Jaeger's query APIs v3 and v1. Every sentinel the processor can remove must be gone from
both. Those it cannot remove are its documented limits, listed in :data:`COLLECTOR_LIMITS` with the reason and
stated in docs/backends.md: the test fails if one more leaks, and also if one of these stops leaking (then the
list and the docs must shrink).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import pytest
from backend_processes import Collector, Jaeger, poll
from otlp_grpc_sink import OTLPGrpcSink
from trace_reading import read_trace

pytestmark = pytest.mark.backends

# Each case: a surface and a kind of value. The sentinel is unique per run (random), so a hit is this run's.
COLLECTOR_LIMITS = {
    "span_name_credential": "span names are not checked (only its URL/DB sanitisers rewrite them; not configured)",
    "event_name": "event names are not checked (only event attributes are)",
    "link_attribute": "link attributes are not processed",
    "status_description": "the status message is not processed",
    "trace_state": "the W3C trace state is not processed",
    "scope_name": "the instrumentation scope's name is not processed (only its attributes are)",
    "scope_version": "the instrumentation scope's version is not processed",
    "allowed_key_plain_text": "a value under an allowed key that matches no blocked pattern passes (no type, "
    "length or registered-name checks)",
    "allowed_key_array_credential": "only string values are matched: a credential inside a string array passes",
    "allowed_key_number_card": "only string values are matched: a card number sent as an integer passes",
}
"""What the Collector's redaction processor (contrib v0.161.0, our generated config) cannot remove."""

REMOVED = (
    "unknown_span_key",
    "unknown_resource_key",
    "unknown_scope_key",
    "unknown_event_key",
    "allowed_key_api_key",
    "allowed_key_text_with_token",
    "allowed_key_email",
    "allowed_resource_key_github_token",
    "allowed_event_key_jwt",
    "raw_conversation_id",
    "raw_user_id",
)
"""What it removes: unknown keys everywhere it looks, credential shapes in strings, raw correlation ids."""


@dataclass(frozen=True)
class Planted:
    sentinels: dict[str, str]
    trace_id: str


def plant(endpoint: str) -> Planted:
    """One hostile trace of two spans (a parent and a child that links to it), sent once over OTLP/HTTP."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import (
        Link,
        NonRecordingSpan,
        SpanContext,
        Status,
        StatusCode,
        TraceFlags,
        set_span_in_context,
    )
    from opentelemetry.trace.span import TraceState

    tag = secrets.token_hex(6)
    word = f"hostile{tag}"  # no credential shape: only an allowlist can stop it
    sentinels = {
        "span_name_credential": f"sk-proj-{tag}Q7Wm2Lx9Vb4Nc8Zr",
        "event_name": f"event{word}",
        "link_attribute": f"link{word}",
        "status_description": f"status{word}",
        "trace_state": f"ts{tag}",
        "scope_name": f"scope{word}",
        "scope_version": f"v{tag}",
        "allowed_key_plain_text": f"agent{word}",
        "allowed_key_array_credential": f"ghp_{tag}Abcdefghijklmnop1234",
        "allowed_key_number_card": str(4111111111111111),  # a test card number, planted as an int
        "unknown_span_key": f"span{word}",
        "unknown_resource_key": f"resource{word}",
        "unknown_scope_key": f"scopeattr{word}",
        "unknown_event_key": f"eventattr{word}",
        "allowed_key_api_key": f"sk-proj-{tag}Ab3De5Gh7Jk9Mn2Pq",
        "allowed_key_text_with_token": f"xoxb-{tag}-123456789012-abcdefABCDEF",
        "allowed_key_email": f"mail.{tag}@example.org",
        "allowed_resource_key_github_token": f"ghp_{tag}Zyxwvutsrqponmlk9876",
        "allowed_event_key_jwt": f"eyJhbGciOiJIUzI1NiJ9.eyJ{tag}In0.c2lnbmF0dXJl",
        "raw_conversation_id": f"conv-{tag}-raw",
        "raw_user_id": f"user-{tag}-raw",
    }
    s = sentinels
    resource = Resource.create(
        {
            "service.name": "hostile-instrumentation",
            "process.command_line": s["unknown_resource_key"],
            "service.instance.id": s["allowed_resource_key_github_token"],
        }
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
    tracer = provider.get_tracer(s["scope_name"], s["scope_version"], attributes={"scope.note": s["unknown_scope_key"]})
    upstream = SpanContext(
        trace_id=secrets.randbits(127) + 1,
        span_id=secrets.randbits(63) + 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", s["trace_state"])]),
    )
    try:
        with tracer.start_as_current_span(
            f"GET /v1/models {s['span_name_credential']}", context=set_span_in_context(NonRecordingSpan(upstream))
        ) as parent:
            parent.set_attributes(
                {
                    "gen_ai.agent.name": s["allowed_key_plain_text"],
                    "gen_ai.response.finish_reasons": ["stop", s["allowed_key_array_credential"]],
                    "gen_ai.usage.input_tokens": int(s["allowed_key_number_card"]),
                    "llm.note": s["unknown_span_key"],
                    "gen_ai.request.model": s["allowed_key_api_key"],
                    "gen_ai.system": f"call with {s['allowed_key_text_with_token']} now",
                    "gen_ai.provider.name": s["allowed_key_email"],
                    "gen_ai.conversation.id": s["raw_conversation_id"],
                    "user.id": s["raw_user_id"],
                }
            )
            parent.add_event(
                s["event_name"],
                {"exception.type": s["allowed_event_key_jwt"], "exception.message": s["unknown_event_key"]},
            )
            parent.set_status(Status(StatusCode.ERROR, s["status_description"]))
            with tracer.start_as_current_span(
                "child", links=[Link(parent.get_span_context(), {"link.note": s["link_attribute"]})]
            ):
                pass
        trace_id = format(upstream.trace_id, "032x")
    finally:
        provider.shutdown()
    return Planted(sentinels=sentinels, trace_id=trace_id)


def leaked(sentinels: dict[str, str], text: str) -> set[str]:
    return {case for case, sentinel in sentinels.items() if sentinel in text}


@pytest.fixture(scope="module")
def planted(collector: Collector) -> Planted:
    return plant(collector.otlp_http)


def test_the_cases_cover_every_surface() -> None:
    assert set(COLLECTOR_LIMITS).isdisjoint(REMOVED)
    assert len(set(COLLECTOR_LIMITS) | set(REMOVED)) == 21


def test_the_collector_removes_all_but_its_documented_limits(planted: Planted, tempo_sink: OTLPGrpcSink) -> None:
    """Verbatim what the Collector exported (the Tempo stand-in): exactly the documented limits leak."""
    poll(
        "both hostile spans at the Tempo stand-in",
        lambda: len(tempo_sink.wait_for_trace(planted.trace_id, 2, 1.0)) >= 2,
        60,
    )
    text = tempo_sink.dump()
    assert leaked(planted.sentinels, text) == set(COLLECTOR_LIMITS)
    # The processor did work on this trace, and said so (summary: info).
    parent = next(span for span in tempo_sink.spans() if span.trace_id == planted.trace_id and span.name != "child")
    assert parent.attributes["redaction.redacted.count"] >= 1
    assert parent.attributes["redaction.masked.count"] >= 1
    assert parent.attributes["gen_ai.conversation.id"] != planted.sentinels["raw_conversation_id"]


# Jaeger's v1 JSON has no place for a link's attributes (its references carry ids only): that one is not shown.
SHOWN_BY_JAEGER = {"v3": set(COLLECTOR_LIMITS), "v1": set(COLLECTOR_LIMITS) - {"link_attribute"}}


@pytest.mark.parametrize("api", ["v3", "v1"])
def test_jaeger_has_nothing_the_collector_can_remove(planted: Planted, jaeger: Jaeger, api: str) -> None:
    """Nothing removable reaches Jaeger; what does is exactly the Collector's limits that the API can show."""
    body, spans = read_trace(jaeger, planted.trace_id, 2, api)
    assert {span.name for span in spans} >= {"child"}
    found = leaked(planted.sentinels, body)
    assert not found & set(REMOVED), f"removable sentinels reached Jaeger: {sorted(found & set(REMOVED))}"
    assert found == SHOWN_BY_JAEGER[api]
