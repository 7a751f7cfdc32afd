"""The side channel that carries raw correlation ids beside spans to our redactors (``_internal/ids.py``).

Real providers and processors throughout. A *spy* is a processor of the user's: it records every attribute
it can see at start and at end, as a foreign exporter would. What it must never see is one of our raw ids;
what our destinations must export is exactly the digest the id would have had as an attribute.
"""

from __future__ import annotations

import gc
import secrets
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind
from pipeline.pipeline_support import HASH_KEY, GatedExporter, digest, pipeline

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.instrumentation._framework import SpanTree
from otel_agentdiag.pipeline import AccountingBatchSpanProcessor, SessionSequencer
from otel_agentdiag.redaction import IdHasher, RedactingSpanProcessor
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.processor import RedactionStage
from otel_agentdiag.redaction.rules import Callback
from otel_agentdiag.storage import SpanStore

_tag = uuid.uuid4().hex[:8]
CONV, USER, AGENT_ID, CALL, RESP = (f"RAW-{what}-{_tag}" for what in ("conv", "user", "agent", "call", "resp"))
RAW = (CONV, USER, AGENT_ID, CALL, RESP)


class Spy(SpanProcessor):
    """A processor of the user's: every attribute value it can read, at start and at end."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        with self._lock:
            self.seen.append(("start", span.name, dict(span.attributes or {})))

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self.seen.append(("end", span.name, dict(span.attributes or {})))

    def leaks(self, raw: tuple[str, ...] = RAW) -> list[tuple[str, str, str]]:
        found = []
        for when, name, attributes in self.seen:
            for key, value in attributes.items():
                if key in sc.CORRELATION_ID_KINDS or any(r in str(value) for r in raw):
                    found.append((when, name, key))
        return found


def agent(tracer: Any) -> None:
    """Every way our instrumentation sets an id, and a span of another library inside the run."""
    with agentdiag.agent_run("ids-agent", conversation_id=CONV, user_id=USER, agent_id=AGENT_ID):
        with agentdiag.iteration(0):
            with agentdiag.llm_call(provider="openai", model="m") as call:
                call.record_response(response_id=RESP, input_tokens=1, output_tokens=1)
            with agentdiag.tool_call("lookup", call_id=CALL):
                with tracer.start_as_current_span("their.span"):
                    pass


def by_name(spans: Any) -> dict[str, Any]:
    return {s.name: s for s in spans}


def correlation(attributes: Any) -> dict[str, Any]:
    return {k: v for k, v in dict(attributes).items() if k in sc.CORRELATION_ID_KINDS}


def expected_digests(key: bytes, foreign: str = sc.OTHER_VALUE) -> dict[str, dict[str, str]]:
    """Per exported span name, its correlation attributes; ``foreign``: the name the policy gives the other
    library's span (one it cannot vouch for becomes ``_OTHER``)."""
    h = IdHasher(key)
    conv = h.digest("conversation", CONV)
    return {
        "invoke_agent ids-agent": {
            sc.GEN_AI_CONVERSATION_ID: conv,
            sc.USER_ID: h.digest("user", USER),
            sc.GEN_AI_AGENT_ID: h.digest("agent", AGENT_ID),
        },
        "agent.iteration": {sc.GEN_AI_CONVERSATION_ID: conv},
        "chat m": {sc.GEN_AI_CONVERSATION_ID: conv, sc.GEN_AI_RESPONSE_ID: h.digest("response", RESP)},
        "execute_tool lookup": {sc.GEN_AI_CONVERSATION_ID: conv, sc.GEN_AI_TOOL_CALL_ID: h.digest("tool_call", CALL)},
        foreign: {sc.GEN_AI_CONVERSATION_ID: conv},
    }


@pytest.fixture(autouse=True)
def _names() -> None:
    agentdiag.register_names(tools=["lookup"], agents=["ids-agent"])


@pytest.fixture
def configured(tmp_path: Path) -> Iterator[tuple[agentdiag.AgentDiag, Spy, InMemorySpanExporter]]:
    """configure() on a provider that already has the user's spy and in-memory exporter."""
    provider = TracerProvider(shutdown_on_exit=False)
    spy, theirs = Spy(), InMemorySpanExporter()
    provider.add_span_processor(spy)
    provider.add_span_processor(SimpleSpanProcessor(theirs))
    diag = agentdiag.configure(store=tmp_path / "t.db", hash_key=HASH_KEY, tracer_provider=provider, set_global=False)
    yield diag, spy, theirs
    diag.shutdown()
    provider.shutdown()


# -- nothing raw where a foreign processor reads ------------------------------------------------------------
def test_a_users_processor_never_sees_a_raw_id_and_the_store_gets_the_digests(configured: Any, tmp_path: Path) -> None:
    diag, spy, theirs = configured
    agent(diag.tracer_provider.get_tracer("their.library"))
    diag.shutdown()
    assert diag.stats()["correlation_ids"]["evicted"] == 0  # the side channel is in the books, value-free
    assert spy.leaks() == []
    assert len(spy.seen) == 10  # five spans, seen at start and at end
    assert all(correlation(s.attributes) == {} for s in theirs.get_finished_spans())
    with SpanStore(tmp_path / "t.db", create=False) as store:
        stored = by_name(s for t in store.list_traces() for s in store.get_trace(t.trace_id))
        assert {name: correlation(s.attributes) for name, s in stored.items()} == expected_digests(HASH_KEY)
        assert session_receipt(store, digest(CONV)).status == "valid"


def test_an_id_beside_the_span_redacts_exactly_as_the_same_id_on_it(tmp_path: Path) -> None:
    """The old contract's output, byte for byte: attributes, counters, span name."""
    exporter = InMemorySpanExporter()
    with pipeline(exporter, policy=LOCAL) as built:
        tracer = built.tracer()
        with agentdiag.tool_call("lookup", call_id=CALL):
            pass
        with tracer.start_as_current_span(
            "execute_tool lookup",
            kind=SpanKind.INTERNAL,
            attributes={
                sc.AGENTDIAG_KIND: sc.KIND_TOOL,
                sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                sc.GEN_AI_TOOL_NAME: "lookup",
                sc.GEN_AI_TOOL_TYPE: "function",
                sc.GEN_AI_TOOL_CALL_ID: CALL,  # as our wrapper set it before: an attribute
            },
        ):
            pass
        built.batcher.force_flush()
    beside, on = exporter.get_finished_spans()

    def shape(span: ReadableSpan) -> dict[str, Any]:
        attributes = dict(span.attributes or {})
        attributes.pop(sc.AGENTDIAG_SEQUENCE)
        return attributes

    assert shape(beside) == shape(on)
    assert beside.name == on.name
    assert beside.attributes[sc.GEN_AI_TOOL_CALL_ID] == IdHasher(HASH_KEY).digest("tool_call", CALL)
    assert beside.attributes[sc.AGENTDIAG_REDACTION_PREFIX + "hashed"] == 1


def test_each_destination_hashes_with_its_own_key(tmp_path: Path) -> None:
    """Two redacting branches on one provider (as local and OTLP with different keys): one raw id, two digests."""
    provider = TracerProvider(shutdown_on_exit=False)
    sequencer = SessionSequencer()
    provider.add_span_processor(sequencer)
    outs = []
    for key, policy in ((secrets.token_bytes(32), LOCAL), (secrets.token_bytes(32), STRICT)):
        exporter = InMemorySpanExporter()
        redaction = RedactionStage(policy, hasher=IdHasher(key))
        batching = AccountingBatchSpanProcessor(
            exporter, stages=[redaction], session_of=redaction.session_of, observer=sequencer
        )
        provider.add_span_processor(batching)  # as configure() does: the provider feeds the batcher directly
        outs.append((key, exporter, batching))
    manual.use_tracer_provider(provider)
    try:
        agent(provider.get_tracer("their.library"))
    finally:
        manual.use_tracer_provider(None)
    for key, exporter, batching in outs:
        batching.force_flush()
        spans = exporter.get_finished_spans()
        names = {format(s.context.span_id, "016x"): s for s in spans}
        assert len(names) == 5
        got = sorted(correlation(s.attributes)[sc.GEN_AI_CONVERSATION_ID] for s in spans)
        assert got == [IdHasher(key).digest("conversation", CONV)] * 5
        batching.shutdown()
    provider.shutdown()


def test_without_our_pipeline_the_ids_are_not_recorded_anywhere() -> None:
    """A provider with only the user's processors: nobody of ours would hash, so nothing carries the ids."""
    provider = TracerProvider(shutdown_on_exit=False)
    spy, theirs = Spy(), InMemorySpanExporter()
    provider.add_span_processor(spy)
    provider.add_span_processor(SimpleSpanProcessor(theirs))
    manual.use_tracer_provider(provider)
    try:
        agent(provider.get_tracer("their.library"))
    finally:
        manual.use_tracer_provider(None)
    assert spy.leaks() == []
    spans = theirs.get_finished_spans()
    assert len(spans) == 5
    gc.collect()
    # The live spans are gone: what the wrappers recorded went with them, though the exporter keeps the spans.
    assert [s.name for s in spans if _ids.TABLE.ids_of(s) is not None] == []
    provider.shutdown()


def test_a_redacting_processor_by_hand_propagates_pins_and_hashes() -> None:
    """Without configure(): the user's RedactingSpanProcessor on their provider does it all."""
    provider = TracerProvider(shutdown_on_exit=False)
    spy, exporter = Spy(), InMemorySpanExporter()
    provider.add_span_processor(spy)
    batching = AccountingBatchSpanProcessor(exporter)
    provider.add_span_processor(RedactingSpanProcessor(batching, policy=LOCAL, hasher=IdHasher(HASH_KEY)))
    manual.use_tracer_provider(provider)
    try:
        agent(provider.get_tracer("their.library"))
    finally:
        manual.use_tracer_provider(None)
    batching.force_flush()
    assert spy.leaks() == []
    assert {s.name: correlation(s.attributes) for s in exporter.get_finished_spans()} == expected_digests(HASH_KEY)
    provider.shutdown()


def test_a_framework_tree_keeps_its_own_conversation_beside_its_spans(configured: Any, tmp_path: Path) -> None:
    """A framework's own thread id (LangChain's, the Agents SDK's group id) is filed, numbered and hashed."""
    diag, spy, _ = configured
    tree = SpanTree(diag.tracer_provider.get_tracer("t"))
    run = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "ids-agent"}
    tool = {sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "lookup", sc.GEN_AI_TOOL_CALL_ID: CALL}
    tree.start("run", None, kind=sc.KIND_RUN, name="invoke_agent ids-agent", attributes=run, conversation_id=CONV)
    tree.start("tool", "run", kind=sc.KIND_TOOL, name="execute_tool lookup", attributes=tool)
    tree.end("tool", attributes={sc.GEN_AI_RESPONSE_ID: RESP})
    tree.end("run")
    diag.shutdown()
    assert spy.leaks() == []
    with SpanStore(tmp_path / "t.db", create=False) as store:
        stored = by_name(s for t in store.list_traces() for s in store.get_trace(t.trace_id))
        h = IdHasher(HASH_KEY)
        assert correlation(stored["execute_tool lookup"].attributes) == {
            sc.GEN_AI_CONVERSATION_ID: h.digest("conversation", CONV),
            sc.GEN_AI_TOOL_CALL_ID: h.digest("tool_call", CALL),
            sc.GEN_AI_RESPONSE_ID: h.digest("response", RESP),
        }
        assert {s.attributes[sc.AGENTDIAG_SEQUENCE] for s in stored.values()} == {0, 1}
        assert session_receipt(store, digest(CONV)).status == "valid"


def test_an_id_another_library_sets_is_theirs(configured: Any, tmp_path: Path) -> None:
    """OpenInference's ``session.id`` (via using_session) stays what it is; the run's id is not laid over it."""
    diag, _, theirs = configured
    tracer = diag.tracer_provider.get_tracer("openinference.like")
    with agentdiag.agent_run("ids-agent", conversation_id=CONV):
        with tracer.start_as_current_span("theirs", attributes={sc.SESSION_ID: "their-session"}):
            pass
    diag.shutdown()
    (their_span,) = [s for s in theirs.get_finished_spans() if s.name == "theirs"]
    assert their_span.attributes[sc.SESSION_ID] == "their-session"  # set by them, for their own exporters
    assert sc.GEN_AI_CONVERSATION_ID not in their_span.attributes
    with SpanStore(tmp_path / "t.db", create=False) as store:
        (stored,) = [
            s for t in store.list_traces() for s in store.get_trace(t.trace_id) if s.name != "invoke_agent ids-agent"
        ]
        assert correlation(stored.attributes) == {sc.SESSION_ID: digest("their-session")}
        assert stored.session == digest("their-session")
        assert stored.attributes[sc.AGENTDIAG_SEQUENCE] == 0  # numbered in their session, where it is filed


def test_a_tombstone_keeps_its_place_in_the_session(tmp_path: Path) -> None:
    broken = LOCAL.derive("broken", allowed_keys={"app.explode": Callback(lambda value: 1 / 0, "explode")})
    store_path = tmp_path / "t.db"
    diag = agentdiag.configure(store=store_path, hash_key=HASH_KEY, local_policy=broken, set_global=False)
    try:
        with agentdiag.agent_run("ids-agent", conversation_id=CONV):
            with agentdiag.tool_call("lookup", call_id=CALL) as tool:
                tool.span.set_attribute("app.explode", 1)
    finally:
        diag.shutdown()
    with SpanStore(store_path, create=False) as store:
        spans = [s for t in store.list_traces() for s in store.get_trace(t.trace_id)]
        tombstone = next(s for s in spans if s.name == sc.TOMBSTONE_SPAN_NAME)
        assert tombstone.session == digest(CONV)  # the raw id beside the span reached the tombstone's books
        assert CALL not in str(tombstone.attributes)
        assert session_receipt(store, digest(CONV)).status != "valid"  # a redactor error is not hidden


# -- release and bounds -------------------------------------------------------------------------------------
def _probe(key: tuple[int, int]) -> ReadableSpan:
    return ReadableSpan("probe", SpanContext(key[0], key[1], False))


def test_entries_go_with_their_spans_once_every_processor_let_them_go(configured: Any) -> None:
    diag, _, theirs = configured
    agent(diag.tracer_provider.get_tracer("their.library"))
    diag.force_flush()
    keys = [s.context[:2] for s in theirs.get_finished_spans()]
    assert len(keys) == 5
    assert all(_ids.TABLE.ids_of(_probe(k)) for k in keys)  # the user's exporter still holds the spans
    theirs.clear()
    gc.collect()
    assert [k for k in keys if _ids.TABLE.ids_of(_probe(k))] == []


class Keys(SpanProcessor):
    """Remembers the (trace_id, span_id) of every span that ends, never the span itself."""

    def __init__(self) -> None:
        self.ended: dict[str, tuple[int, int]] = {}

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.ended[span.name + "/" + str(len(self.ended))] = span.context[:2]


def test_a_span_the_full_queue_drops_is_counted_in_its_session_and_its_entry_goes(tmp_path: Path) -> None:
    exporter = GatedExporter(tmp_path / "t.db")
    with pipeline(exporter, max_queue_spans=1, max_export_batch=1) as built:
        keys = Keys()
        built.provider.add_span_processor(keys)
        with agentdiag.tool_call("lookup", call_id="first"):
            pass
        assert exporter.waiting.wait(10)  # the first span is in flight, held by the gate
        with agentdiag.agent_run("ids-agent", conversation_id=CONV):
            for i in range(3):  # the first of these fits the queue; the next two and the run span do not
                with agentdiag.tool_call("lookup", call_id=f"{CALL}-{i}"):
                    pass
        stats = built.batcher.stats()
        assert stats.sessions[digest(CONV)].dropped == {"queue_full": 3}  # filed by the id beside each span
        gc.collect()
        held = {name: bool(_ids.TABLE.ids_of(_probe(key))) for name, key in keys.ended.items()}
        assert held == {
            "execute_tool lookup/0": True,  # in flight
            "execute_tool lookup/1": True,  # queued
            "execute_tool lookup/2": False,  # dropped: released with the span
            "execute_tool lookup/3": False,
            "invoke_agent ids-agent/4": False,
        }
        exporter.gate.set()
        assert built.batcher.force_flush(10_000)
    gc.collect()
    assert [name for name, key in keys.ended.items() if _ids.TABLE.ids_of(_probe(key))] == []


def test_entries_of_spans_never_ended_are_bounded_and_counted() -> None:
    table = _ids.CorrelationIds(max_spans=3)
    provider = TracerProvider(shutdown_on_exit=False)
    tracer = provider.get_tracer("t")
    spans = [tracer.start_span(f"open-{i}") for i in range(5)]  # held open by the application
    for span in spans:
        table.record_conversation(span, CONV)
    assert table.stats() == {"spans": 3, "evicted": 2}
    assert table.ids_of(spans[0]) is None and table.ids_of(spans[4]) == {sc.GEN_AI_CONVERSATION_ID: CONV}
    provider.shutdown()


def test_an_abandoned_open_span_takes_its_entry_along() -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    tracer = provider.get_tracer("t")
    span = _ids.start_span(
        tracer,
        "execute_tool lookup",
        context=Context(),
        kind=SpanKind.INTERNAL,
        attributes={sc.GEN_AI_TOOL_CALL_ID: CALL},
    )
    key = span.get_span_context()[:2]
    assert _ids.TABLE.ids_of(_probe(key)) == {sc.GEN_AI_TOOL_CALL_ID: CALL}
    assert sc.GEN_AI_TOOL_CALL_ID not in span.attributes
    del span
    gc.collect()
    assert _ids.TABLE.ids_of(_probe(key)) is None
    provider.shutdown()


def test_ids_given_after_the_end_are_ignored() -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    span = provider.get_tracer("t").start_span("s")
    span.end()
    _ids.set_attributes(span, {sc.GEN_AI_RESPONSE_ID: RESP, "other": 1})
    assert _ids.TABLE.ids_of(span) is None
    assert "other" not in (span.attributes or {})  # as the SDK ignores attributes on an ended span
    provider.shutdown()


def test_concurrent_runs_keep_their_own_ids(configured: Any, tmp_path: Path) -> None:
    diag, spy, _ = configured
    tracer = diag.tracer_provider.get_tracer("their.library")
    errors: list[BaseException] = []

    def one(n: int) -> None:
        try:
            for i in range(20):
                with agentdiag.agent_run("ids-agent", conversation_id=f"c-{n}", user_id=f"u-{n}"):
                    with agentdiag.tool_call("lookup", call_id=f"call-{n}-{i}"):
                        with tracer.start_as_current_span("their.span"):
                            pass
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    diag.shutdown()
    assert errors == []
    assert spy.leaks(tuple(f"c-{n}" for n in range(4)) + tuple(f"u-{n}" for n in range(4))) == []
    h = IdHasher(HASH_KEY)
    with SpanStore(tmp_path / "t.db", create=False) as store:
        for n in range(4):
            receipt = session_receipt(store, digest(f"c-{n}"))
            assert receipt.status == "valid", receipt
            assert receipt.counts["spans"] == 20 * 3, receipt.counts
        calls = {
            s.attributes[sc.GEN_AI_TOOL_CALL_ID]: s.session
            for t in store.list_traces()
            for s in store.get_trace(t.trace_id)
            if sc.GEN_AI_TOOL_CALL_ID in s.attributes
        }
    assert calls == {h.digest("tool_call", f"call-{n}-{i}"): digest(f"c-{n}") for n in range(4) for i in range(20)}
