"""Redaction: nothing the policy does not know leaves; IDs become keyed digests; failures drop, never leak."""

from __future__ import annotations

import math
import re
import sqlite3

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import Link, Status, StatusCode

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher, key_id_for
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.rules import Callback, Enum, RedactionContext, Rule
from otel_agentdiag.storage import SpanStore
from otel_agentdiag.testing import TEST_HASH_KEY, capture_spans

DIGEST = re.compile(r"hmac-sha256:[0-9a-f]{8}:[0-9a-f]{64}")

SENTINELS = {
    "attribute": "S3NT1NEL-attribute-value",
    "conversation": "S3NT1NEL-conversation",
    "user": "S3NT1NEL-user@example.com",
    "call": "S3NT1NEL-call-id",
    "response": "S3NT1NEL-response-id",
    "tool": "S3NT1NEL_hallucinated_tool",
    "exception": "S3NT1NEL-exception-message",
    "status": "S3NT1NEL-status-description",
    "resource": "S3NT1NEL-resource",
    "span_name": "S3NT1NEL-span-name",
    "event": "S3NT1NEL-event",
    "link": "S3NT1NEL-link",
    "model": "sk-S3NT1NELabcdefghijklmnop",
}


def _run_leaky_agent() -> None:
    """An agent that puts every sentinel somewhere on its spans."""
    with agentdiag.agent_run("leaky_agent", conversation_id=SENTINELS["conversation"], user_id=SENTINELS["user"]):
        with agentdiag.iteration(0):
            span = trace.get_current_span()
            span.set_attribute("app.prompt", SENTINELS["attribute"])
            span.add_event("debug", {"detail": SENTINELS["event"]})
            span.update_name(SENTINELS["span_name"])
            with agentdiag.llm_call(provider="openai", model=SENTINELS["model"]) as call:
                call.record_response(response_id=SENTINELS["response"], input_tokens=5, output_tokens=7)
            try:
                with agentdiag.tool_call(SENTINELS["tool"], call_id=SENTINELS["call"]):
                    raise RuntimeError(SENTINELS["exception"])
            except RuntimeError:
                pass
            with agentdiag.tool_call("linked_tool") as linked:
                linked.span.add_link(span.get_span_context(), {"why": SENTINELS["link"]})
                linked.span.set_status(Status(StatusCode.ERROR, SENTINELS["status"]))


def _raw_bytes(db_path) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-shm"):
        path = db_path.parent / (db_path.name + suffix)
        if path.exists():
            data += path.read_bytes()
    return data


def test_sentinels_never_reach_the_sqlite_file(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"app.secret={SENTINELS['resource']},deployment.environment=ci")
    db = tmp_path / "traces.db"
    agentdiag.register_names(tools=["linked_tool"])
    with agentdiag.configure(store=db, hash_key=TEST_HASH_KEY, set_global=False):
        _run_leaky_agent()
    # Read the raw bytes of the database and its WAL, not only what SQL returns.
    raw = _raw_bytes(db)
    assert raw, "the store is empty"
    for label, sentinel in SENTINELS.items():
        assert sentinel.encode() not in raw, f"{label} sentinel reached the store"
        assert b"S3NT1NEL" not in raw

    with SpanStore(db, create=False) as store:
        (summary,) = store.list_traces()
        spans = store.get_trace(summary.trace_id)
    assert len(spans) == 5
    names = sorted(s.name for s in spans)
    assert names == [
        "agent.iteration",
        "chat",
        "execute_tool _OTHER",
        "execute_tool linked_tool",
        "invoke_agent leaky_agent",
    ]
    failed_tool = next(s for s in spans if s.name == "execute_tool _OTHER")
    assert failed_tool.attributes[sc.GEN_AI_TOOL_NAME] == "_OTHER"
    assert failed_tool.attributes[sc.ERROR_TYPE] == "RuntimeError"
    # The local policy (the store's default) keeps the type and a keyed fingerprint of the message.
    assert [e["name"] for e in failed_tool.events] == ["exception"]
    event_attributes = failed_tool.events[0]["attributes"]
    assert set(event_attributes) == {"exception.type", "agentdiag.exception.fingerprint"}
    assert event_attributes["exception.type"] == "RuntimeError"
    assert DIGEST.fullmatch(event_attributes["agentdiag.exception.fingerprint"])
    assert DIGEST.fullmatch(failed_tool.attributes[sc.GEN_AI_TOOL_CALL_ID])
    llm = next(s for s in spans if s.kind == "llm")
    assert sc.GEN_AI_REQUEST_MODEL not in llm.attributes  # credential-like model name dropped
    assert llm.attributes["agentdiag.redaction.public_safety_violation"] == 1
    assert DIGEST.fullmatch(llm.attributes[sc.GEN_AI_RESPONSE_ID])
    linked = next(s for s in spans if s.name == "execute_tool linked_tool")
    assert linked.status == "error"
    assert linked.links[0]["attributes"] == {}
    resource = spans[0].resource
    assert resource.get("deployment.environment") == "ci"
    assert "app.secret" not in resource
    # Digests of one ID are the same on every span.
    conversations = {s.attributes[sc.GEN_AI_CONVERSATION_ID] for s in spans}
    assert len(conversations) == 1 and DIGEST.fullmatch(conversations.pop())


def test_digest_is_stable_and_depends_on_the_key():
    def conversation_digests(key: bytes) -> set[str]:
        with capture_spans(redact=True, hash_key=key) as captured:
            with agentdiag.agent_run("a", conversation_id="conv-42"):
                with agentdiag.iteration(0):
                    pass
            with agentdiag.agent_run("a", conversation_id="conv-42"):
                pass
        return {s.attributes[sc.GEN_AI_CONVERSATION_ID] for s in captured.spans()}

    first = conversation_digests(TEST_HASH_KEY)
    again = conversation_digests(TEST_HASH_KEY)
    other = conversation_digests(b"d73d9a1d61bf6bc455f1c7b96f606edcbc6b9d75ea1f96f067b66e644cee020f")
    assert len(first) == 1 and first == again
    assert first.isdisjoint(other)
    (digest,) = first
    assert digest.startswith(f"hmac-sha256:{key_id_for(TEST_HASH_KEY)}:")
    assert (other.pop()).startswith(
        f"hmac-sha256:{key_id_for(b'd73d9a1d61bf6bc455f1c7b96f606edcbc6b9d75ea1f96f067b66e644cee020f')}:"
    )


def test_hashing_contract_and_domain_separation():
    import hashlib
    import hmac
    import unicodedata

    hasher = IdHasher(TEST_HASH_KEY)
    raw = "Cafe\u0301-42"  # not NFC: the contract normalises first
    # The documented contract, recomputed from scratch: a derived key per ID kind, then HMAC over NFC(value).
    kind_key = hmac.new(TEST_HASH_KEY, b"agentdiag/v1/id-kind\x00user", hashlib.sha256).digest()
    expected = hmac.new(kind_key, unicodedata.normalize("NFC", raw).encode(), hashlib.sha256).hexdigest()
    assert hasher.digest("user", raw) == f"hmac-sha256:{hasher.key_id}:{expected}"
    assert hasher.key_id == hashlib.sha256(b"agentdiag-key-id\x00" + TEST_HASH_KEY).hexdigest()[:8]
    # IDs are case-sensitive and not trimmed.
    assert len({hasher.digest("user", v) for v in ("Alice", "alice", "alice ")}) == 3
    assert hasher.digest("user", "x") != hasher.digest("conversation", "x")
    assert hasher.digest("user", 7) == hasher.digest("user", "7")

    with capture_spans(redact=True) as captured:
        tracer = captured.tracer_provider.get_tracer("t")
        with tracer.start_as_current_span(
            "s", attributes={"session.id": "same", "gen_ai.conversation.id": "same", "user.id": "same"}
        ):
            pass
    (span,) = captured.spans()
    assert span.attributes["session.id"] == span.attributes["gen_ai.conversation.id"]
    assert span.attributes["user.id"] != span.attributes["session.id"]
    assert span.attributes["agentdiag.redaction.hashed"] == 3


def test_foreign_spans_get_the_policy_and_the_run_conversation():
    with capture_spans(redact=True) as captured:
        tracer = captured.tracer_provider.get_tracer("third.party")
        with agentdiag.agent_run("host_agent", conversation_id="conv-foreign"):
            with tracer.start_as_current_span(
                "GET /users/alice@example.com?token=abc",
                attributes={"http.url": "https://x.test/?token=abc", "gen_ai.usage.input_tokens": 3},
            ):
                pass
    foreign = next(s for s in captured.spans() if s.instrumentation_scope.name == "third.party")
    assert foreign.name == "_OTHER"
    assert "http.url" not in foreign.attributes
    assert foreign.attributes["gen_ai.usage.input_tokens"] == 3
    assert DIGEST.fullmatch(foreign.attributes[sc.GEN_AI_CONVERSATION_ID])
    assert foreign.attributes["agentdiag.redaction.unknown_key"] == 1
    assert foreign.attributes["agentdiag.redaction.span_name"] == 1


def test_registered_names_pass_unregistered_become_placeholder():
    names = NameRegistry()
    names.register(tools=["known_tool"], agents=["known_agent"])
    with capture_spans(redact=True, names=names) as captured:
        with agentdiag.tool_call("known_tool"):
            pass
        with agentdiag.tool_call("model_made_this_up"):
            pass
    known, unknown = captured.spans()
    assert known.name == "execute_tool known_tool"
    assert known.attributes[sc.GEN_AI_TOOL_NAME] == "known_tool"
    assert "agentdiag.redaction.unregistered_name" not in known.attributes
    assert unknown.name == "execute_tool _OTHER"
    assert unknown.attributes[sc.GEN_AI_TOOL_NAME] == "_OTHER"
    assert unknown.attributes["agentdiag.redaction.unregistered_name"] == 1


@pytest.mark.parametrize(
    ("key", "value", "kept", "reason"),
    [
        ("gen_ai.request.model", "gpt-4o-mini", True, None),
        ("gen_ai.request.model", "/home/alice/models/llama.gguf", False, "public_safety_violation"),
        ("gen_ai.request.model", "https://host/model?key=1", False, "public_safety_violation"),
        ("gen_ai.request.model", "x" * 129, False, "too_long"),
        ("gen_ai.request.model", 5, False, "invalid_value"),
        ("gen_ai.request.temperature", 0.7, True, None),
        ("gen_ai.request.temperature", math.nan, False, "invalid_value"),
        ("gen_ai.request.temperature", math.inf, False, "invalid_value"),
        ("gen_ai.usage.output_tokens", True, False, "invalid_value"),
        ("gen_ai.usage.output_tokens", -1, False, "invalid_value"),
        ("gen_ai.usage.cache_read.input_tokens", 4, True, None),
        ("gen_ai.response.finish_reasons", ("stop", "length"), True, None),
        # A closed set: an unknown item becomes `_OTHER` in place (tests/redaction/test_finish_reasons.py);
        # what is not an array of strings is dropped.
        ("gen_ai.response.finish_reasons", "stop", False, "invalid_value"),
        ("gen_ai.response.finish_reasons", (1, 2), False, "invalid_value"),
        ("gen_ai.tool.type", "function", True, None),
        ("gen_ai.tool.type", "anything", False, "invalid_value"),
        ("error.type", "ValueError", True, None),
        ("error.type", "ValueError: secret", False, "invalid_value"),
        ("gen_ai.provider.name", "openai", True, None),
        ("gen_ai.provider.name", "ghp_abcdefghijklmnopqrstuvwxyz", False, "public_safety_violation"),
        ("gen_ai.provider.name", "alice@example.com", False, "public_safety_violation"),
        ("gen_ai.request.model", "AKIAABCDEFGHIJKLMNOP", False, "public_safety_violation"),
        ("gen_ai.request.model", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", False, "public_safety_violation"),
        ("gen_ai.request.model", r"C:\Users\alice\model.bin", False, "public_safety_violation"),
        ("gen_ai.response.finish_reasons", tuple("abcdefghijklmnopq"), False, "too_long"),
        ("gen_ai.conversation.id", "x" * 5000, False, "too_long"),
        ("gen_ai.conversation.id", ["a", "b"], False, "invalid_value"),
        ("exception.escaped", "yes", False, "invalid_value"),
        ("app.anything", "x", False, "unknown_key"),
    ],
)
def test_value_rules(key, value, kept, reason):
    with capture_spans(redact=True) as captured:
        tracer = captured.tracer_provider.get_tracer("t")
        with tracer.start_as_current_span("agent.iteration", attributes={key: value}):
            pass
    (span,) = captured.spans()
    assert (key in span.attributes) is kept
    if kept:
        assert span.attributes[key] == value
    counters = {k: v for k, v in span.attributes.items() if k.startswith("agentdiag.redaction.")}
    if reason is None:
        assert counters == {}
    else:
        assert counters == {f"agentdiag.redaction.{reason}": 1}
    # Counters are counts, never values.
    assert all(type(v) is int for v in counters.values())


def test_resource_is_filtered():
    resource = Resource.create(
        {
            "service.name": "svc",
            "host.name": "alice-laptop",
            "process.command_line": "python app.py --api-key=sk-abc",
            "deployment.environment.name": "prod",
            "service.version": "/home/alice/checkout",
        }
    )
    with capture_spans(redact=True, resource=resource) as captured:
        with agentdiag.tool_call("t"):
            pass
    (span,) = captured.spans()
    attrs = dict(span.resource.attributes)
    assert attrs["service.name"] == "svc"
    assert attrs["deployment.environment.name"] == "prod"
    assert "host.name" not in attrs
    assert "process.command_line" not in attrs
    assert "service.version" not in attrs  # an absolute path is not kept even under an allowed prefix
    assert attrs["telemetry.sdk.language"] == "python"


def test_status_description_and_non_exception_events_are_dropped():
    with capture_spans(redact=True) as captured:
        tracer = captured.tracer_provider.get_tracer("t")
        with tracer.start_as_current_span("agent.iteration", attributes={sc.AGENTDIAG_KIND: "iteration"}) as span:
            span.add_event("user said", {"text": "hello"})
            span.set_status(Status(StatusCode.ERROR, "ValueError: token=abc"))
    (span,) = captured.spans()
    assert span.name == "agent.iteration"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description is None
    assert list(span.events) == []
    assert span.attributes["agentdiag.redaction.status_description"] == 1
    assert span.attributes["agentdiag.redaction.event"] == 1


class _ExplodingRule(Rule):
    __slots__ = ()

    def apply(self, value, ctx):
        raise RuntimeError("rule bug")


def _broken_policy(on_error: str) -> Policy:
    return Policy(
        name="broken",
        allowed_keys={"explode": _ExplodingRule(), sc.AGENTDIAG_KIND: Enum(frozenset(sc.KINDS))},
        on_error=on_error,
    )


def test_a_failing_rule_yields_a_tombstone_never_the_original(caplog):
    with capture_spans(redact=True, policy=_broken_policy("tombstone")) as captured:
        tracer = captured.tracer_provider.get_tracer("t")
        with tracer.start_as_current_span("S3NT1NEL-name", attributes={"explode": "S3NT1NEL", "k": "S3NT1NEL"}) as s1:
            s1.add_event("S3NT1NEL-event", {"x": "S3NT1NEL"})
            s1.set_status(Status(StatusCode.ERROR, "S3NT1NEL"))
        with tracer.start_as_current_span("s2"):
            pass
    tombstone, other = captured.spans()
    assert other.name == "_OTHER"  # s2 went through the policy as usual
    assert tombstone.name == sc.TOMBSTONE_SPAN_NAME
    assert tombstone.context.span_id == s1.get_span_context().span_id
    assert (tombstone.start_time, tombstone.end_time) == (s1.start_time, s1.end_time)
    assert dict(tombstone.attributes) == {"agentdiag.redaction.redactor_error": 1}
    assert tombstone.events == () and tombstone.links == ()
    assert tombstone.status.status_code is StatusCode.ERROR and tombstone.status.description is None
    assert "S3NT1NEL" not in tombstone.to_json()
    assert (captured.processor.failed, captured.processor.tombstoned) == (1, 1)
    assert (captured.processor.redacted, captured.processor.dropped) == (1, 0)
    assert "S3NT1NEL" not in caplog.text


def test_a_failing_rule_with_on_error_drop_forwards_nothing(caplog):
    with capture_spans(redact=True, policy=_broken_policy("drop")) as captured:
        tracer = captured.tracer_provider.get_tracer("t")
        with tracer.start_as_current_span("s1", attributes={"explode": "S3NT1NEL"}):
            pass
        with tracer.start_as_current_span("s2"):
            pass
    assert [s.name for s in captured.spans()] == ["_OTHER"]  # s2 went through; s1 was dropped, never exported raw
    assert (captured.processor.failed, captured.processor.dropped, captured.processor.tombstoned) == (1, 1, 0)
    assert captured.processor.redacted == 1
    assert "S3NT1NEL" not in caplog.text


def test_a_raising_user_callback_fails_closed():
    def callback(value):
        raise ValueError(f"cannot handle {value}")  # the message even carries the value

    policy = STRICT.derive("with-callback", allowed_keys={"app.tier": Callback(callback, "tier")})
    with capture_spans(redact=True, policy=policy) as captured:
        tracer = captured.tracer_provider.get_tracer("t")
        with tracer.start_as_current_span("agent.iteration", attributes={"app.tier": "S3NT1NEL"}):
            pass
    (span,) = captured.spans()
    assert span.name == sc.TOMBSTONE_SPAN_NAME
    assert "S3NT1NEL" not in span.to_json()


def test_a_user_callback_can_keep_change_or_drop_values():
    policy = STRICT.derive(
        "with-callback",
        allowed_keys={"app.tier": Callback(lambda v: v if v in ("free", "pro") else None, "tier")},
    )
    with capture_spans(redact=True, policy=policy) as captured:
        tracer = captured.tracer_provider.get_tracer("t")
        for tier in ("pro", "S3NT1NEL", {"a": 1}.keys()):
            with tracer.start_as_current_span("agent.iteration", attributes={"app.tier": str(tier)}):
                pass
    kept, dropped, other = captured.spans()
    assert kept.attributes["app.tier"] == "pro"
    assert "app.tier" not in dropped.attributes and dropped.attributes["agentdiag.redaction.invalid_value"] == 1
    assert "app.tier" not in other.attributes


def test_summary_silent_records_no_counters():
    policy = Policy(name="quiet", allowed_keys=dict(STRICT.allowed_keys), summary="silent")
    with capture_spans(redact=True, policy=policy) as captured:
        with agentdiag.tool_call("not_registered_anywhere", call_id="c"):
            pass
    (span,) = captured.spans()
    assert not any(k.startswith("agentdiag.redaction.") for k in span.attributes)
    with pytest.raises(ValueError, match="summary"):
        Policy(name="x", allowed_keys={}, summary="verbose")


def test_sqlite_store_holds_no_raw_id_even_in_freed_pages(tmp_path):
    db = tmp_path / "t.db"
    with agentdiag.configure(store=db, hash_key=TEST_HASH_KEY, set_global=False):
        for i in range(20):
            with agentdiag.agent_run("a", conversation_id=f"S3NT1NEL-conv-{i}", user_id=f"S3NT1NEL-user-{i}"):
                pass
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    assert b"S3NT1NEL" not in _raw_bytes(db)


def test_tracestate_and_scope_do_not_carry_data():
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState, set_span_in_context

    upstream = SpanContext(
        trace_id=0x1234,
        span_id=0x5678,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", "S3NT1NEL-tracestate")]),
    )
    with capture_spans(redact=True) as captured:
        tracer = captured.tracer_provider.get_tracer("scope with spaces", "/home/alice/v1")
        ctx = set_span_in_context(NonRecordingSpan(upstream))
        with tracer.start_as_current_span("agent.iteration", context=ctx, links=[Link(upstream, {"k": "v"})]):
            pass
    (span,) = captured.spans()
    assert span.parent.span_id == 0x5678 and span.context.trace_id == 0x1234
    assert not span.context.trace_state and not span.parent.trace_state
    assert not span.links[0].context.trace_state
    assert span.links[0].context.span_id == 0x5678
    assert span.instrumentation_scope.name == "scope with spaces"
    assert span.instrumentation_scope.version is None  # an absolute path is not a version


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("checkout-agent", True),
        (3, True),
        (2.5, True),
        (math.nan, False),
        ('{"user": "S3NT1NEL"}', False),
        ('["S3NT1NEL"]', False),
        ("line\nbreak", False),
        ("x" * 257, False),
        ("ops@example.com", False),
        (("a", "b"), False),
    ],
)
def test_resource_values_must_be_bounded_scalars(value, kept):
    rule = STRICT.resource_rule_for("service.name")
    assert rule is not None
    new_value, reason = rule.apply(value, RedactionContext(IdHasher(TEST_HASH_KEY), NameRegistry()))
    assert (new_value is not None) is kept
    assert (reason is None) is kept


def test_openai_system_fingerprint_is_kept_locally_only_in_its_real_shape():
    ctx = RedactionContext(IdHasher(TEST_HASH_KEY), NameRegistry())
    rule = LOCAL.rule_for("openai.response.system_fingerprint")
    assert rule is not None and STRICT.rule_for("openai.response.system_fingerprint") is None
    assert rule.apply("fp_44709d6fcb", ctx) == ("fp_44709d6fcb", None)
    assert rule.apply("fp_S3NT1NEL", ctx)[0] is None
