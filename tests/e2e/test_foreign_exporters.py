"""End to end: processors the user already has on their provider never see our raw correlation ids.

One real SDK provider carries, besides ``configure()``'s pipeline (SQLite store + OTLP branch, each with its own
key), the user's own processors: an in-memory exporter added *before* ``configure()``, one added *after*, a
``BatchSpanProcessor(OTLPSpanExporter)`` to a loopback receiver, and ``redacting_processor()`` around another
``OTLPSpanExporter``. The agent runs the manual wrappers with sentinel ids, the real OpenAI SDK (our
instrumentor) against the fake model server (response ids carry a sentinel), and a span of another library
inside the run. No sentinel reaches any foreign exporter; each of our destinations, and the wrapped exporter,
carries exactly the keyed digest of each id with its own key; the session's receipt is ``valid``.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext
from otlp_receiver import OTLPReceiver

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor
from otel_agentdiag.redaction import IdHasher
from otel_agentdiag.storage import SpanStore

LOCAL_KEY = bytes.fromhex("010472ceeaef1b077d70391bb49b089cdcbb4232781feafd9bf839b244cab43b")
OTLP_KEY = bytes.fromhex("826289f8a5b901031a0aacc46dd9b10c65762a22dcf84cf4bf8952f480691ad5")
WRAP_KEY = bytes.fromhex("a4afb020bc81f367b8deaff04beb03a8dbab9db2f4e31ed0521ee6b8fd43c963")
WAIT_S = 15.0
AGENT = "foreign-agent"
TOOL = "get_weather"

_tag = uuid.uuid4().hex[:10]
S_CONV = f"SENTINEL_CONV_{_tag}"
S_USER = f"SENTINEL_USER_{_tag}"
S_AGENT = f"SENTINEL_AGENTID_{_tag}"
S_CALL = f"SENTINEL_CALL_{_tag}"
S_RESP = f"SENTINEL_RESP_{_tag}"
SENTINELS = (S_CONV, S_USER, S_AGENT, S_CALL, S_RESP, fake.SENTINEL_RESPONSE_ID)

RUN = f"invoke_agent {AGENT}"
CHAT = "chat gpt-4o-mini"
WRAPPED_LLM = "chat manual-model"
TOOL_SPAN = f"execute_tool {TOOL}"
FOREIGN = "foreign.lookup"
"""A span another library (a plain tracer of its own scope) starts inside the tool."""


@dataclass
class Outcome:
    store: Path
    response_id: str
    diag: agentdiag.AgentDiag
    before: InMemorySpanExporter
    after: InMemorySpanExporter
    users: OTLPReceiver
    ours: OTLPReceiver
    wrapped: OTLPReceiver
    foreign_found: list[str]
    warnings: list[str]
    keys: set[tuple[int, int]]
    """(trace_id, span_id) of every span the run made."""


def _digests(key: bytes, response_id: str) -> dict[str, dict[str, str]]:
    """Per span name, the correlation attributes our destinations must carry: the documented HMAC construction."""
    h = IdHasher(key)
    conv = h.digest(sc.ID_KIND_CONVERSATION, S_CONV)
    return {
        RUN: {
            sc.GEN_AI_CONVERSATION_ID: conv,
            sc.USER_ID: h.digest(sc.ID_KIND_USER, S_USER),
            sc.GEN_AI_AGENT_ID: h.digest(sc.ID_KIND_AGENT, S_AGENT),
        },
        "agent.iteration": {sc.GEN_AI_CONVERSATION_ID: conv},
        CHAT: {sc.GEN_AI_CONVERSATION_ID: conv, sc.GEN_AI_RESPONSE_ID: h.digest(sc.ID_KIND_RESPONSE, response_id)},
        WRAPPED_LLM: {sc.GEN_AI_CONVERSATION_ID: conv, sc.GEN_AI_RESPONSE_ID: h.digest(sc.ID_KIND_RESPONSE, S_RESP)},
        TOOL_SPAN: {sc.GEN_AI_CONVERSATION_ID: conv, sc.GEN_AI_TOOL_CALL_ID: h.digest(sc.ID_KIND_TOOL_CALL, S_CALL)},
        FOREIGN: {sc.GEN_AI_CONVERSATION_ID: conv},
    }


def _names(outcome: Outcome) -> dict[str, str]:
    """Span id (hex) -> the name the instrumentation gave the span (policies may rename what they export)."""
    return {format(s.context.span_id, "016x"): s.name for s in outcome.after.get_finished_spans() if s.context}


def _correlation(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if k in sc.CORRELATION_ID_KINDS}


def _agent(server: FakeModelServer, provider: TracerProvider) -> str:
    client = openai.OpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, max_retries=0)
    library = provider.get_tracer("some.other.library", "1.0")
    with agentdiag.agent_run(AGENT, conversation_id=S_CONV, user_id=S_USER, agent_id=S_AGENT):
        with agentdiag.iteration(0):
            response = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
            with agentdiag.llm_call(provider="openai", model="manual-model") as call:
                call.record_response(response_id=S_RESP, input_tokens=3, output_tokens=1)
            with agentdiag.tool_call(TOOL, call_id=S_CALL):
                with library.start_as_current_span(FOREIGN):
                    pass
    return response.id


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    saved = {name: os.environ.pop(name) for name in list(os.environ) if name.startswith(("OTEL_", "AGENTDIAG_"))}
    store = tmp_path_factory.mktemp("foreign") / "traces.db"
    agentdiag.register_names(tools=[TOOL])
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("otel_agentdiag").addHandler(handler)
    with OTLPReceiver() as users, OTLPReceiver() as ours, OTLPReceiver() as wrapped, FakeModelServer() as server:
        provider = TracerProvider(shutdown_on_exit=False)
        before, after = InMemorySpanExporter(), InMemorySpanExporter()
        provider.add_span_processor(BatchSpanProcessor(before))  # the user's, before configure()
        diag = agentdiag.configure(
            store=store,
            otlp_endpoint=ours.endpoint,
            hash_key=LOCAL_KEY,
            otlp_hash_key=OTLP_KEY,
            tracer_provider=provider,
            set_global=False,
        )
        logging.getLogger("otel_agentdiag").removeHandler(handler)
        provider.add_span_processor(SimpleSpanProcessor(after))  # the user's, after configure()
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{users.endpoint}/v1/traces")))
        provider.add_span_processor(
            agentdiag.redacting_processor(OTLPSpanExporter(endpoint=f"{wrapped.endpoint}/v1/traces"), hash_key=WRAP_KEY)
        )
        found = [str(f) for f in diag.foreign_processors()]
        OpenAIInstrumentor().instrument(tracer_provider=provider)
        try:
            response_id = _agent(server, provider)
        finally:
            OpenAIInstrumentor().uninstrument()
            diag.shutdown()
            provider.shutdown()  # flushes the user's processors and the wrapped exporter
        keys = {s.context[:2] for s in after.get_finished_spans() if s.context is not None}
        assert users.wait_for_spans(len(keys), WAIT_S) and wrapped.wait_for_spans(len(keys), WAIT_S)
        assert ours.wait_for_spans(len(keys), WAIT_S)
        yield Outcome(
            store,
            response_id,
            diag,
            before,
            after,
            users,
            ours,
            wrapped,
            found,
            [r.getMessage() for r in records if r.levelno == logging.WARNING],
            keys,
        )
    os.environ.update(saved)


def test_the_run_made_every_span(outcome: Outcome) -> None:
    names = sorted(s.name for s in outcome.after.get_finished_spans())
    assert names == sorted([RUN, "agent.iteration", CHAT, WRAPPED_LLM, TOOL_SPAN, FOREIGN])
    assert fake.SENTINEL_RESPONSE_ID in outcome.response_id  # the fake server's id carries the sentinel
    assert len(outcome.keys) == 6


@pytest.mark.parametrize("which", ["before", "after"])
def test_no_sentinel_reaches_a_users_in_memory_exporter(outcome: Outcome, which: str) -> None:
    exporter: InMemorySpanExporter = getattr(outcome, which)
    spans = exporter.get_finished_spans()
    assert len(spans) == 6
    dump = "\n".join(span.to_json() for span in spans)
    assert "invoke_agent" in dump  # the search is meaningful: the spans are there, with their names
    assert [s for s in SENTINELS if s in dump] == []
    # Not even a correlation id key: the ids travel beside the spans, to our redactors only.
    assert all(_correlation(dict(s.attributes or {})) == {} for s in spans)


def test_no_sentinel_reaches_a_users_otlp_exporter(outcome: Outcome) -> None:
    blob = b"".join(outcome.users.decoded_bodies)
    assert b"invoke_agent" in blob
    assert [s for s in SENTINELS if s.encode() in blob] == []
    assert all(_correlation(s.attributes) == {} for s in outcome.users.spans())


def test_the_store_carries_exactly_the_digests_of_the_local_key(outcome: Outcome) -> None:
    for suffix in ("", "-wal"):
        path = outcome.store.with_name(outcome.store.name + suffix)
        if path.exists():
            blob = path.read_bytes()
            assert [s for s in SENTINELS if s.encode() in blob] == [], path.name
    names = _names(outcome)
    with SpanStore(outcome.store, create=False) as store:
        spans = [span for t in store.list_traces() for span in store.get_trace(t.trace_id)]
        expected = _digests(LOCAL_KEY, outcome.response_id)
        assert {names[s.span_id]: _correlation(s.attributes) for s in spans} == expected
        # Filed under the session's digest, the foreign span too.
        assert {s.session for s in spans} == {expected[RUN][sc.GEN_AI_CONVERSATION_ID]}
        run = next(s for s in spans if names[s.span_id] == RUN)
        assert run.attributes[sc.AGENTDIAG_REDACTION_PREFIX + "hashed"] == 3  # conversation, user, agent: as ever
        receipt = session_receipt(store, expected[RUN][sc.GEN_AI_CONVERSATION_ID])
    assert receipt.status == "valid", receipt


def test_our_otlp_branch_carries_exactly_the_digests_of_its_own_key(outcome: Outcome) -> None:
    blob = b"".join(outcome.ours.decoded_bodies)
    assert [s for s in SENTINELS if s.encode() in blob] == []
    # The strict policy renames a span it cannot vouch for: spans are matched by id.
    names = _names(outcome)
    expected = _digests(OTLP_KEY, outcome.response_id)
    assert {names[s.span_id]: _correlation(s.attributes) for s in outcome.ours.spans()} == expected
    assert expected[RUN][sc.USER_ID] != _digests(LOCAL_KEY, outcome.response_id)[RUN][sc.USER_ID]


def test_the_wrapped_users_exporter_gets_only_redacted_spans(outcome: Outcome) -> None:
    blob = b"".join(outcome.wrapped.decoded_bodies)
    assert [s for s in SENTINELS if s.encode() in blob] == []
    spans = outcome.wrapped.spans()
    names = _names(outcome)
    assert {names[s.span_id]: _correlation(s.attributes) for s in spans} == _digests(WRAP_KEY, outcome.response_id)
    # Strict policy: only allowlisted keys, a span it cannot name is renamed; every span carries its kind or
    # a redaction count, never an attribute the other library made up.
    foreign = next(s for s in spans if names[s.span_id] == FOREIGN)
    assert foreign.name == sc.OTHER_VALUE
    assert all(key in sc.CORRELATION_ID_KINDS or key.startswith("agentdiag.") for key in foreign.attributes)


def test_the_foreign_processors_are_named_and_configure_warned(outcome: Outcome) -> None:
    assert outcome.foreign_found == [
        "BatchSpanProcessor(InMemorySpanExporter)",
        "SimpleSpanProcessor(InMemorySpanExporter)",
        "BatchSpanProcessor(OTLPSpanExporter)",
    ]  # the one of redacting_processor() is ours: not listed
    (warning,) = [w for w in outcome.warnings if "sees every span before redaction" in w]
    assert "BatchSpanProcessor(InMemorySpanExporter)" in warning  # present when configure() ran
    assert "redacting_processor" in warning


def test_every_side_channel_entry_is_released_with_its_span(outcome: Outcome) -> None:
    outcome.before.clear()
    outcome.after.clear()
    gc.collect()
    still = [key for key in outcome.keys if _ids.TABLE.ids_of(ReadableSpan("probe", SpanContext(*key, False)))]
    assert still == []


def test_the_report_is_json_ready_and_value_free(outcome: Outcome) -> None:
    report = json.dumps([f.as_dict() for f in agentdiag.foreign_processors(outcome.diag.tracer_provider)])
    assert "127.0.0.1" not in report and "OTLPSpanExporter" in report
