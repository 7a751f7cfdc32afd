"""Each peer instrumentation of the real ``openai`` client (OpenInference, OpenLLMetry, the official GenAI one)
against the fake model server on 127.0.0.1, through the pipeline ``configure()`` builds, to a real SQLite store
and a real OTLP/HTTP receiver (strict policy). A small agent: one run (the peer's own agent span where it has
one, else ours), two model calls, two tool calls and one failing tool, with sentinels in the prompt, the tool
arguments and results (the fake model's), the ids and the failing tool's message.

The convention adapters must make the peer's spans ours: the kinds, the names (registered names only), usage
on the LLM leaves only (also when our own OpenAI instrumentor traces the same calls: one owner per call), a
valid receipt, and no sentinel in the store or on the wire.
"""

from __future__ import annotations

import contextlib
import gc
import sqlite3
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from agent_runs import trace_summaries
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from leak_search import Surfaces
from otlp_receiver import OTLPReceiver, ReceivedSpan

import otel_agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor as OurOpenAIInstrumentor
from otel_agentdiag.storage import SpanStore, StoredSpan

HASH_KEY = b"442f18475e673d6886dacd45328a7ec155d9a207f69c7098cd618ac0ac152443"
AGENT = "peer-agent"
FAILING_TOOL_ERROR = f"lookup failed for {fake.SENTINEL_USER}"
SENTINELS = (*fake.SENTINELS, "/home/alice")
PROMPT = f"{fake.SENTINEL_PROMPT} weather in /home/alice?"
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": fake.TOOL_NAME,
            "description": fake.SENTINEL_TOOL_DESCRIPTION,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
TOKENS_IN = fake.TOOL_CALL_USAGE.prompt_tokens + fake.ANSWER_USAGE.prompt_tokens
TOKENS_OUT = fake.TOOL_CALL_USAGE.completion_tokens + fake.ANSWER_USAGE.completion_tokens


@dataclass
class Run:
    peer: str
    ours_too: bool
    store: Path
    spans: list[StoredSpan]
    received: list[ReceivedSpan]
    raw_bodies: list[bytes]
    receipt_status: str


# --- the peers: each instruments the openai client, and offers its own run and tool spans where it has them ----
Scope = Callable[..., contextlib.AbstractContextManager[Any]]


def _openinference(provider: Any) -> tuple[Any, Scope, Scope]:
    from openinference.instrumentation import OITracer, TraceConfig, using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    tracer = OITracer(provider.get_tracer("peer-app"), TraceConfig())

    @contextlib.contextmanager
    def run() -> Iterator[None]:
        with (
            using_session(fake.SENTINEL_CONVERSATION),
            tracer.start_as_current_span(
                "peer agent", openinference_span_kind="agent", attributes={"agent.name": AGENT}
            ) as span,
        ):
            span.set_input(PROMPT)
            yield

    @contextlib.contextmanager
    def tool(call_id: str, arguments: str) -> Iterator[None]:
        with tracer.start_as_current_span(
            fake.TOOL_NAME,
            openinference_span_kind="tool",
            attributes={"tool.name": fake.TOOL_NAME, "tool.id": call_id, "tool.parameters": arguments},
        ) as span:
            span.set_input(arguments)
            yield
            span.set_output(fake.SENTINEL_TOOL_RESULT)

    return instrumentor, run, tool


def _official(provider: Any) -> tuple[Any, Scope, Scope]:
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    from opentelemetry.util.genai.handler import TelemetryHandler

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    handler = TelemetryHandler(tracer_provider=provider)

    @contextlib.contextmanager
    def run() -> Iterator[None]:
        with handler.invoke_local_agent(agent_name=AGENT, conversation_id=fake.SENTINEL_CONVERSATION):
            yield

    @contextlib.contextmanager
    def tool(call_id: str, arguments: str) -> Iterator[None]:
        with handler.tool(fake.TOOL_NAME) as invocation:
            invocation.tool_call_id = call_id
            yield

    return instrumentor, run, tool


def _openllmetry(provider: Any) -> tuple[Any, Scope, Scope]:
    with warnings.catch_warnings():  # its pydantic models use the class-based config pydantic 2 deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=provider)

    def run() -> contextlib.AbstractContextManager[Any]:  # no agent span of its own without traceloop-sdk: ours
        return otel_agentdiag.agent_run(AGENT, conversation_id=fake.SENTINEL_CONVERSATION)

    def tool(call_id: str, arguments: str) -> contextlib.AbstractContextManager[Any]:
        return otel_agentdiag.tool_call(fake.TOOL_NAME, call_id=call_id)

    return instrumentor, run, tool


PEERS = {"openinference": _openinference, "official": _official, "openllmetry": _openllmetry}


@contextlib.contextmanager
def _openai_restored() -> Iterator[None]:
    """Put back every attribute of the ``openai`` package's classes as it was: two wrapt instrumentors on one
    method do not both come off (whichever uninstruments second leaves its wrapper: seen with ours and
    OpenLLMetry's, in either order), and a wrapper left on would trace into the next test's pipeline."""
    import openai as _openai  # noqa: F401 - its modules are what is snapshotted

    classes = {
        value
        for name, module in list(sys.modules.items())
        if name == "openai" or name.startswith("openai.")
        for value in list(vars(module).values())
        if isinstance(value, type) and value.__module__.startswith("openai")
    }
    saved = {cls: dict(vars(cls)) for cls in classes}
    try:
        yield
    finally:
        for cls, attributes in saved.items():
            for name, value in attributes.items():
                if vars(cls).get(name) is not value:
                    setattr(cls, name, value)


def _agent(server: FakeModelServer, run: Scope, tool: Scope) -> None:
    client = openai.OpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, max_retries=0)
    messages: list[Any] = [{"role": "system", "content": fake.SENTINEL_SYSTEM}, {"role": "user", "content": PROMPT}]
    with run():
        first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        for _ in range(2):  # two tool calls that succeed
            with tool(call.id, call.function.arguments):  # type: ignore[union-attr]
                result = fake.SENTINEL_TOOL_RESULT
        with pytest.raises(LookupError), tool(call.id, call.function.arguments):  # type: ignore[union-attr]
            raise LookupError(FAILING_TOOL_ERROR)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)


@pytest.fixture(
    scope="module",
    # ours: None (the peer alone), "inner" (ours instrumented first: the peer's wrapper, and span, around ours),
    # "outer" (ours instrumented last: the peer's span inside ours)
    params=[(peer, ours) for peer in PEERS for ours in (None, "inner", "outer")],
    ids=lambda p: p[0] + (f"+ours-{p[1]}" if p[1] else ""),
)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    peer, ours_position = request.param
    ours_too = ours_position is not None
    store = tmp_path_factory.mktemp(peer) / "traces.db"
    otel_agentdiag.register_names(tools=[fake.TOOL_NAME], agents=[AGENT])
    with OTLPReceiver() as receiver, FakeModelServer() as server, _openai_restored():
        diag = otel_agentdiag.configure(
            service_name="peer-test",
            store=store,
            otlp_endpoint=receiver.endpoint,
            hash_key=HASH_KEY,
            set_global=False,
        )
        undo: list[Callable[[], Any]] = []  # wrappers come off in the reverse order they went on
        try:
            if ours_position == "inner":
                OurOpenAIInstrumentor().instrument()
                undo.append(OurOpenAIInstrumentor().uninstrument)
            instrumentor, run_scope, tool_scope = PEERS[peer](diag.tracer_provider)
            undo.append(instrumentor.uninstrument)
            if ours_position == "outer":
                OurOpenAIInstrumentor().instrument()
                undo.append(OurOpenAIInstrumentor().uninstrument)
            _agent(server, run_scope, tool_scope)
        finally:
            for step in reversed(undo):
                step()
            gc.collect()
            diag.shutdown()
        assert receiver.errors == []
        received = receiver.spans()
        raw_bodies = list(receiver.raw_bodies)
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
        sessions = {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in spans if s.kind == "run"}
        assert len(sessions) == 1
        receipt = session_receipt(reader, sessions.pop())
        status = f"{receipt.status} {receipt.reasons} {receipt.counts}" if receipt.status != "valid" else "valid"
    yield Run(peer, ours_too, store, spans, received, raw_bodies, status)


def _kinds(spans: list[StoredSpan], kind: str) -> list[StoredSpan]:
    return [s for s in spans if s.kind == kind]


def test_the_peer_spans_become_our_tree(run: Run) -> None:
    spans = run.spans
    assert len({s.trace_id for s in spans}) == 1
    (agent,) = _kinds(spans, "run")
    assert agent.name == f"invoke_agent {AGENT}"
    assert agent.attributes[sc.OPENINFERENCE_SPAN_KIND] == "AGENT"
    llm = _kinds(spans, "llm")
    assert [s.name.partition(" ")[0] for s in llm] == ["chat", "chat"]
    tools = _kinds(spans, "tool")
    assert [s.name for s in tools] == [f"execute_tool {fake.TOOL_NAME}"] * 3
    assert [s.status == "error" for s in sorted(tools, key=lambda s: s.start_ns)] == [False, False, True]
    failed = sorted(tools, key=lambda s: s.start_ns)[-1]
    assert failed.attributes[sc.ERROR_TYPE].endswith("LookupError")  # the type only: never the message
    finish = [s.attributes.get(sc.GEN_AI_RESPONSE_FINISH_REASONS) for s in sorted(llm, key=lambda s: s.start_ns)]
    assert [tuple(f or ())[:1] for f in finish] in ([("tool_calls",), ("stop",)], [("tool_call",), ("stop",)])
    by_id = {s.span_id: s for s in spans}
    for child in [*llm, *tools]:  # every leaf under the run (directly or through the peer's own steps)
        parent = by_id.get(child.parent_span_id or "")
        while parent is not None and parent.kind != "run":
            parent = by_id.get(parent.parent_span_id or "")
        assert parent is agent, child.name


def test_tokens_on_the_llm_leaves_only_and_never_twice(run: Run) -> None:
    spans = run.spans
    llm = _kinds(spans, "llm")
    assert sum(s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm) == TOKENS_IN
    assert sum(s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in llm) == TOKENS_OUT
    for span in spans:
        if span.kind != "llm":
            assert not [k for k in span.attributes if k.startswith(("gen_ai.usage.", "llm.token_count."))], span.name
    duplicates = [s for s in spans if s.attributes.get(sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE) == "duplicate_llm_call"]
    assert len(duplicates) == (2 if run.ours_too else 0)
    if run.ours_too:  # ours owns the calls, whichever wrapper is outside
        assert {s.attributes.get("agentdiag.sequence") is not None for s in llm} == {True}
        assert all(s.scope is not None and s.scope["name"].startswith("otel_agentdiag") for s in llm), llm
    summary = trace_summaries(run.store)  # the roll-ups `traces` and `sessions` read
    assert summary == [("run", 2, 3, TOKENS_IN, TOKENS_OUT)]


def test_the_receipt_is_valid(run: Run) -> None:
    assert run.receipt_status == "valid"


def test_the_strict_export_carries_the_same_tree(run: Run) -> None:
    kinds = sorted(str(r.attributes.get(sc.AGENTDIAG_KIND)) for r in run.received)
    assert kinds == sorted(s.kind for s in run.spans)
    spoken = {r.attributes.get(sc.AGENTDIAG_KIND): r.attributes.get(sc.OPENINFERENCE_SPAN_KIND) for r in run.received}
    assert (spoken["run"], spoken["llm"], spoken["tool"]) == ("AGENT", "LLM", "TOOL")


def test_no_sentinel_in_the_store_or_on_the_wire(run: Run) -> None:
    seen = Surfaces.of(run.store, run.raw_bodies, run.received)
    assert AGENT in seen.dump  # the search finds what is allowed
    assert AGENT.encode() in seen.wire
    assert seen.leaks(SENTINELS) == []


@pytest.mark.parametrize("peer", list(PEERS))
def test_with_capture_on_the_peer_content_reaches_the_local_table_only(peer: str, tmp_path: Path) -> None:
    """``capture_content=True``: the content keys of the peer's spans become captured content in the store's
    content table (never span attributes), and nothing of it goes over OTLP."""
    from otel_agentdiag.content.decoder import decode

    store = tmp_path / "traces.db"
    otel_agentdiag.register_names(tools=[fake.TOOL_NAME], agents=[AGENT])
    with OTLPReceiver() as receiver, FakeModelServer() as server, _openai_restored():
        diag = otel_agentdiag.configure(
            store=store, otlp_endpoint=receiver.endpoint, hash_key=HASH_KEY, set_global=False, capture_content=True
        )
        instrumentor, run_scope, tool_scope = PEERS[peer](diag.tracer_provider)
        try:
            _agent(server, run_scope, tool_scope)
        finally:
            instrumentor.uninstrument()
            gc.collect()
            diag.shutdown()
        wire = b"\n".join(receiver.raw_bodies)
    with SpanStore(store, create=False) as reader:
        (trace,) = reader.list_traces()
        kinds = {s.span_id: s.kind for s in reader.get_trace(trace.trace_id)}
        content: dict[str, dict[str, Any]] = {}
        for item in reader.trace_content(trace.trace_id):
            content.setdefault(kinds[item.span_id], {})[item.role] = decode(item.lossless)
    captured = repr(content.get("llm"))
    if peer == "official":  # it records no content unless its own switch (an environment variable) is on
        assert "llm" not in content
    else:
        assert fake.SENTINEL_PROMPT in captured and fake.SENTINEL_TOOL_ARGS in captured
    if peer == "openinference":  # its tool spans carry the arguments and result it was given
        assert fake.SENTINEL_TOOL_RESULT in repr(content["tool"][sc.CONTENT_TOOL_RESULT])
    sentinels = [s for s in SENTINELS if s not in (fake.SENTINEL_API_KEY,)]
    assert not [s for s in sentinels if s.encode() in wire]
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        spans_text = repr(conn.execute("SELECT name, attributes, events FROM spans").fetchall())
    finally:
        conn.close()
    assert not [s for s in sentinels if s in spans_text]
