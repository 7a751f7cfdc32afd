"""SessionSequencer on a real TracerProvider: numbers per session, from the attribute or the agent run."""

from __future__ import annotations

import re
import threading

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.pipeline import SessionSequencer, session_key
from otel_agentdiag.redaction import IdHasher
from otel_agentdiag.testing import correlation_ids, span_numbers


@pytest.fixture
def traced():
    """A provider with a sequencer and an in-memory exporter; the wrappers trace into it."""
    provider = TracerProvider(shutdown_on_exit=False)
    sequencer = SessionSequencer()
    memory = InMemorySpanExporter()
    provider.add_span_processor(sequencer)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    manual.use_tracer_provider(provider)
    yield provider, sequencer, memory
    manual.use_tracer_provider(None)
    provider.shutdown()


def _numbers(memory: InMemorySpanExporter) -> dict[str, tuple[object, int]]:
    """Each span's session (its own attribute, else the run's id kept beside it) and sequence number."""
    out = {}
    for s in memory.get_finished_spans():
        attributes = {**s.attributes, **correlation_ids(s)}
        session = attributes.get(sc.GEN_AI_CONVERSATION_ID, attributes.get(sc.SESSION_ID))
        out[s.name] = (session, span_numbers(s)[sc.AGENTDIAG_SEQUENCE])
    return out


def test_spans_are_numbered_per_session_in_start_order(traced) -> None:
    provider, sequencer, memory = traced
    tracer = provider.get_tracer("t")
    with agentdiag.agent_run("a", conversation_id="c-1"):  # 0 in c-1
        with agentdiag.iteration(0):  # 1 in c-1
            with tracer.start_as_current_span("foreign"):  # 2 in c-1: from the run's context
                pass
        with tracer.start_as_current_span("explicit", attributes={sc.GEN_AI_CONVERSATION_ID: "c-2"}):
            pass  # 0 in c-2: the attribute wins over the context
        with tracer.start_as_current_span("by-session-id", attributes={sc.SESSION_ID: "c-2"}):
            pass  # 1 in c-2: session.id is the same concept
    with tracer.start_as_current_span("outside"):  # 0 outside any session
        with tracer.start_as_current_span("outside-2"):  # 1 outside any session
            pass
    assert _numbers(memory) == {
        "invoke_agent a": ("c-1", 0),
        "agent.iteration": ("c-1", 1),
        "foreign": ("c-1", 2),  # the run's id is kept beside it too, so it is stored in that session
        "explicit": ("c-2", 0),
        "by-session-id": ("c-2", 1),
        "outside": (None, 0),
        "outside-2": (None, 1),
    }
    # The run's raw id is never put on a span, ours or the foreign one: only the ids their creators set are.
    own = {s.name: s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in memory.get_finished_spans()}
    assert own == {name: ("c-2" if name == "explicit" else None) for name in own}
    observers = {span_numbers(s)[sc.AGENTDIAG_OBSERVER_ID] for s in memory.get_finished_spans()}
    assert observers == {sequencer.observer_id}
    assert re.fullmatch(r"[0-9a-f]{16}", sequencer.observer_id)


def test_a_trace_whose_run_names_its_session_files_its_other_spans_there(traced) -> None:
    """Another instrumentation names the session on its run span only (OpenInference's Agno and Haystack spans,
    a model call of our OpenAI instrumentor inside them): every span of that trace started after it is numbered
    and filed in that session, not in "(no session)". Other traces are not."""
    provider, _sequencer, memory = traced
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("peer-run", attributes={sc.SESSION_ID: "s-1"}):  # 0 in s-1
        with tracer.start_as_current_span("peer-llm"):  # 1 in s-1: the trace's session
            pass
        with agentdiag.tool_call("t"):  # 2 in s-1: ours too
            pass
    with tracer.start_as_current_span("other-trace"):  # 0 outside any session
        pass
    assert _numbers(memory) == {
        "peer-run": ("s-1", 0),
        "peer-llm": ("s-1", 1),
        "execute_tool t": ("s-1", 2),
        "other-trace": (None, 0),
    }


def test_a_span_of_a_runs_trace_started_from_the_trace_context_alone_is_filed_in_the_runs_session(traced) -> None:
    """An MCP server in the same process starts its span of a ``tools/call`` from the ``traceparent`` the client
    sent (a context without the run's conversation): it is part of the run's trace, so of the run's session, not
    of "(no session)". A span parented the same way on a trace no run of ours started is not."""
    from opentelemetry import propagate
    from opentelemetry.context import Context

    provider, _sequencer, memory = traced
    tracer = provider.get_tracer("t")
    served = {sc.AGENTDIAG_KIND: sc.KIND_OTHER}
    with agentdiag.agent_run("a", conversation_id="c-1"):  # 0 in c-1
        with agentdiag.tool_call("t"):  # 1 in c-1
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            with tracer.start_as_current_span("served", propagate.extract(carrier, Context()), attributes=served):
                pass  # 2 in c-1: the run's trace
    with tracer.start_as_current_span("other-root"):  # 0 outside any session
        other: dict[str, str] = {}
        propagate.inject(other)
    with tracer.start_as_current_span("served-other", propagate.extract(other, Context()), attributes=served):
        pass  # 1 outside any session
    assert _numbers(memory) == {
        "invoke_agent a": ("c-1", 0),
        "execute_tool t": ("c-1", 1),
        "served": ("c-1", 2),
        "other-root": (None, 0),
        "served-other": (None, 1),
    }


def test_openinference_using_session_files_our_spans_in_its_session(traced) -> None:
    """OpenInference carries its session in the context (``using_session``) and sets it on its own spans only: a
    model or tool call of ours inside is part of the same session."""
    from openinference.instrumentation import using_session

    _provider, _sequencer, memory = traced
    with using_session("s-oi"):
        with agentdiag.tool_call("t"):
            pass
    assert _numbers(memory) == {"execute_tool t": ("s-oi", 0)}


def test_ids_with_one_digest_share_one_numbering() -> None:
    hasher = IdHasher(b"53ebc79aad7b9afad620a8e3cd9fadb5dbbb7504ec0b749d11d20cafc9014885")
    same = [("42", 42), ("é", "e\u0301")]  # decimal text of an int; NFC and NFD spellings
    for a, b in same:
        assert hasher.digest("conversation", a) == hasher.digest("conversation", b)
        assert session_key(a) == session_key(b) is not None
    # Values the redactor drops leave the span without a session: numbered with the no-session spans.
    for dropped in ("", "x" * 5000, True, 2**70, 1.5, ("a",)):
        assert session_key(dropped) is None


def test_a_span_numbered_by_another_sequencer_keeps_its_number() -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    first, second = SessionSequencer(), SessionSequencer()
    memory = InMemorySpanExporter()
    for processor in (first, second, SimpleSpanProcessor(memory)):
        provider.add_span_processor(processor)
    with provider.get_tracer("t").start_as_current_span("s"):
        pass
    (span,) = memory.get_finished_spans()
    assert span_numbers(span)[sc.AGENTDIAG_OBSERVER_ID] == first.observer_id
    assert second.next_sequence(None) == 0  # the second one never counted it
    provider.shutdown()


def test_memory_is_bounded_and_a_forgotten_session_restarts_at_zero() -> None:
    sequencer = SessionSequencer(max_sessions=2)
    assert [sequencer.next_sequence("a") for _ in range(3)] == [0, 1, 2]
    assert sequencer.next_sequence("b") == 0
    assert sequencer.next_sequence("a") == 3  # "a" is now the most recent, "b" the idlest
    assert sequencer.next_sequence("c") == 0  # forgets "b"
    assert sequencer.forgotten == 1
    assert sequencer.next_sequence("a") == 4
    assert sequencer.next_sequence("b") == 0  # restarts: a receipt shows it as duplicate numbers
    with pytest.raises(ValueError):
        SessionSequencer(max_sessions=0)


def test_concurrent_spans_get_distinct_contiguous_numbers(traced) -> None:
    provider, _, memory = traced
    tracer = provider.get_tracer("t")

    def work() -> None:
        for _ in range(200):
            with tracer.start_as_current_span("s", attributes={sc.SESSION_ID: "shared"}):
                pass

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    numbers = sorted(span_numbers(s)[sc.AGENTDIAG_SEQUENCE] for s in memory.get_finished_spans())
    assert numbers == list(range(1600))


def test_numbering_never_raises_into_the_agent(traced, caplog: pytest.LogCaptureFixture) -> None:
    provider, sequencer, _ = traced
    sequencer.on_start(object())  # type: ignore[arg-type] - not a span: logged, not raised
    assert any("numbering a span failed" in r.getMessage() for r in caplog.records)
    with provider.get_tracer("t").start_as_current_span("still works") as span:
        pass
    assert span_numbers(span)[sc.AGENTDIAG_SEQUENCE] == 0


def test_numbers_travel_beside_the_span_and_our_redactor_lays_them_over() -> None:
    """The agent's thread pays no ``set_attribute`` for the numbers: a processor of the user's sees none on the
    span, while our redactor (here the synchronous wrapper for the user's own exporter) exports them."""
    from otel_agentdiag.redaction import RedactingSpanProcessor
    from otel_agentdiag.testing import TEST_HASH_KEY

    provider = TracerProvider(shutdown_on_exit=False)
    sequencer = SessionSequencer()
    raw, redacted = InMemorySpanExporter(), InMemorySpanExporter()
    provider.add_span_processor(sequencer)
    provider.add_span_processor(SimpleSpanProcessor(raw))
    provider.add_span_processor(RedactingSpanProcessor(SimpleSpanProcessor(redacted), hasher=IdHasher(TEST_HASH_KEY)))
    tracer = provider.get_tracer("t")
    for _ in range(3):
        with tracer.start_as_current_span("s", attributes={sc.GEN_AI_CONVERSATION_ID: "c-1"}):
            pass
    for span in raw.get_finished_spans():
        assert sc.AGENTDIAG_SEQUENCE not in span.attributes and sc.AGENTDIAG_OBSERVER_ID not in span.attributes
    assert [span_numbers(s)[sc.AGENTDIAG_SEQUENCE] for s in raw.get_finished_spans()] == [0, 1, 2]
    exported = redacted.get_finished_spans()
    assert [s.attributes[sc.AGENTDIAG_SEQUENCE] for s in exported] == [0, 1, 2]
    assert {s.attributes[sc.AGENTDIAG_OBSERVER_ID] for s in exported} == {sequencer.observer_id}
    provider.shutdown()


def test_a_span_carrying_numbers_as_attributes_is_not_numbered_again(traced) -> None:
    """Numbers set on the span by another numbering (an older sequencer, a bridge) are kept; nothing is recorded
    beside the span and the session's count does not move."""
    provider, sequencer, memory = traced
    numbered = {sc.AGENTDIAG_OBSERVER_ID: "0123456789abcdef", sc.AGENTDIAG_SEQUENCE: 7}
    with provider.get_tracer("t").start_as_current_span("s", attributes=numbered):
        pass
    (span,) = memory.get_finished_spans()
    assert span_numbers(span) == {}
    assert span.attributes[sc.AGENTDIAG_SEQUENCE] == 7
    assert sequencer.next_sequence(None) == 0


def test_batch_queues_make_room_beside_the_spans_for_their_numbers() -> None:
    """Every queued span keeps its numbers beside it until exported: the side table grows with the queues that
    are open (so a large queue never evicts numbers and leaves false gaps) and shrinks when they shut down."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    from otel_agentdiag._internal import ids as _ids
    from otel_agentdiag.pipeline.batching import AccountingBatchSpanProcessor

    class Sink:
        def export(self, spans):
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            pass

    before = _ids.TABLE.max_spans
    processor = AccountingBatchSpanProcessor(Sink(), max_queue_spans=100_000)  # type: ignore[arg-type]
    assert _ids.TABLE.max_spans == before + 100_000
    processor.shutdown()
    assert _ids.TABLE.max_spans == before
    processor.shutdown()  # idempotent: released once
    assert _ids.TABLE.max_spans == before
