"""smolagents, traced by ``openinference-instrumentation-smolagents`` and mapped by our OpenInference adapter: a
real ``ToolCallingAgent`` with a real ``OpenAIServerModel`` (the real ``openai`` client) against a scripted fake
model server on 127.0.0.1, through the pipeline ``configure()`` builds, to a real SQLite store and a real
OTLP/HTTP receiver (strict policy).

The model asks for ``get_weather`` twice, then for ``lookup_city`` (which raises), then for smolagents'
``final_answer``: four loop steps, one model call and one tool call each. Sentinels sit in the task (prompt),
the system prompt, the tool descriptions, arguments, results and call ids, the conversation id and the failing
tool's message. The tree must be ours: run → four iterations (smolagents' ``Step n``) → one LLM and one tool span
each, usage on the LLM leaves only, a valid receipt, no sentinel in the store or on the wire.
"""

from __future__ import annotations

import gc
import itertools
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agent_runs import assert_same_tree, trace_summaries
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from leak_search import Surfaces
from otlp_receiver import OTLPReceiver, ReceivedSpan

import otel_agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.storage import SpanStore, StoredSpan

smolagents = pytest.importorskip("smolagents")
pytest.importorskip("openinference.instrumentation.smolagents")

HASH_KEY = b"5b2e0c6f1d8a4b7e9c3f2a1d0e6b8c4f7a9d2e1c3b5f8a0d6e4c2b9f1a7d3e5c"
AGENT = "weather_agent"
TOOLS = ("get_weather", "lookup_city", "final_answer")
FAILING_TOOL_ERROR = f"lookup failed for {fake.SENTINEL_USER}"
SENTINELS = (*fake.SENTINELS, "/home/alice")
TASK = f"{fake.SENTINEL_PROMPT} weather in /home/alice?"
FINAL_ARGUMENTS = json.dumps({"answer": f"sunny {fake.SENTINEL_OUTPUT}"})
SCRIPT = (  # the model's tool call at each step
    ("get_weather", fake.TOOL_ARGUMENTS),
    ("get_weather", fake.TOOL_ARGUMENTS),
    ("lookup_city", fake.TOOL_ARGUMENTS),
    ("final_answer", FINAL_ARGUMENTS),
)
CALLS = len(SCRIPT)


class ScriptedServer(FakeModelServer):
    """The fake server, answering smolagents' loop: its n-th chat completion asks for ``SCRIPT[n]`` (one agent
    per server; smolagents sends tool results and tool errors back as user messages, so the request alone does
    not tell the step)."""

    def __init__(self) -> None:
        super().__init__()
        self._turns = itertools.count()

    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        out = super().chat_completion(body)  # a tool call of the fake's tool, with its usage
        name, arguments = SCRIPT[min(next(self._turns), CALLS - 1)]
        (call,) = out["choices"][0]["message"]["tool_calls"]
        call["function"] = {"name": name, "arguments": arguments}
        return out


@dataclass
class Run:
    store: Path
    spans: list[StoredSpan]
    received: list[ReceivedSpan]
    raw_bodies: list[bytes]
    receipt_status: str
    answer: Any


def _agent(server: FakeModelServer) -> Any:
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    @tool
    def get_weather(city: str, unit: str) -> str:
        """Weather of a city. SENTINEL-TOOLDESC-52ae

        Args:
            city: the city
            unit: celsius or fahrenheit
        """
        return fake.SENTINEL_TOOL_RESULT

    @tool
    def lookup_city(city: str, unit: str) -> str:
        """Look a city up.

        Args:
            city: the city
            unit: celsius or fahrenheit
        """
        raise LookupError(FAILING_TOOL_ERROR)

    model = OpenAIServerModel(
        model_id="gpt-4o-mini",
        api_base=server.base_url,
        api_key=fake.SENTINEL_API_KEY,
        client_kwargs={"max_retries": 0},
    )
    return ToolCallingAgent(
        tools=[get_weather, lookup_city],
        model=model,
        name=AGENT,
        max_steps=6,
        verbosity_level=-1,
        instructions=fake.SENTINEL_SYSTEM,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    from openinference.instrumentation import using_session
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    store = tmp_path_factory.mktemp("smolagents") / "traces.db"
    with OTLPReceiver() as receiver, ScriptedServer() as server:
        diag = otel_agentdiag.configure(
            service_name="smolagents-test",
            store=store,
            otlp_endpoint=receiver.endpoint,
            hash_key=HASH_KEY,
            set_global=False,
        )
        instrumentor = SmolagentsInstrumentor()
        instrumentor.instrument(tracer_provider=diag.tracer_provider)
        try:
            agent = _agent(server)
            # names are code: the agent's and its tools' (smolagents' own final_answer among them)
            otel_agentdiag.register_names(tools=list(agent.tools), agents=[agent.name])
            with using_session(fake.SENTINEL_CONVERSATION):
                answer = agent.run(TASK)
        finally:
            instrumentor.uninstrument()
            gc.collect()
            diag.shutdown()
        assert receiver.errors == []
        assert len(server.requests_to("/v1/chat/completions")) == CALLS
        received = receiver.spans()
        raw_bodies = list(receiver.raw_bodies)
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
        sessions = {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in spans if s.kind == "run"}
        assert len(sessions) == 1
        receipt = session_receipt(reader, sessions.pop())
        status = f"{receipt.status} {receipt.reasons} {receipt.counts}" if receipt.status != "valid" else "valid"
    yield Run(store, spans, received, raw_bodies, status, answer)


def _kinds(spans: list[StoredSpan], kind: str) -> list[StoredSpan]:
    return sorted((s for s in spans if s.kind == kind), key=lambda s: s.start_ns)


def test_the_agent_answers_as_without_tracing(run: Run) -> None:
    assert run.answer == f"sunny {fake.SENTINEL_OUTPUT}"


def test_run_iterations_llm_and_tool_spans(run: Run) -> None:
    spans = run.spans
    assert len({s.trace_id for s in spans}) == 1
    (agent,) = _kinds(spans, "run")
    assert agent.name == f"invoke_agent {AGENT}"
    iterations = _kinds(spans, "iteration")
    assert [s.name for s in iterations] == [sc.ITERATION_SPAN_NAME] * CALLS
    assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == list(range(CALLS))
    assert {s.parent_span_id for s in iterations} == {agent.span_id}
    llm = _kinds(spans, "llm")
    tools = _kinds(spans, "tool")
    (answer,) = _kinds(spans, "other")  # smolagents' final_answer tool: the run's answer, a step, not a tool call
    assert answer.name == sc.FRAMEWORK_SPAN_NAME
    assert answer.attributes[sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE] == "final_answer"
    assert [s.name for s in llm] == ["chat gpt-4o-mini"] * CALLS
    assert [s.name for s in tools] == [f"execute_tool {name}" for name, _ in SCRIPT[:-1]]
    for step, (call, used) in enumerate(zip(llm, [*tools, answer], strict=True)):  # a model call and its tool
        assert call.parent_span_id == used.parent_span_id == iterations[step].span_id, step
    assert [s.status == "error" for s in tools] == [False, False, True]
    assert tools[2].attributes[sc.ERROR_TYPE] == "LookupError"  # the type only: never the message
    assert [s.status == "error" for s in iterations] == [False, False, True, False]
    assert {s.kind for s in spans} == {"run", "iteration", "llm", "tool", "other"}


def test_tokens_on_the_llm_leaves_only(run: Run) -> None:
    llm = _kinds(run.spans, "llm")
    assert [s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm] == [fake.TOOL_CALL_USAGE.prompt_tokens] * CALLS
    assert [s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in llm] == [
        fake.TOOL_CALL_USAGE.completion_tokens
    ] * CALLS
    for span in run.spans:
        if span.kind != "llm":
            assert not [k for k in span.attributes if k.startswith(("gen_ai.usage.", "llm.token_count."))], span.name
    summary = trace_summaries(run.store)  # the roll-ups `traces` and `sessions` read
    tokens_in = CALLS * fake.TOOL_CALL_USAGE.prompt_tokens
    tokens_out = CALLS * fake.TOOL_CALL_USAGE.completion_tokens
    assert summary == [("run", CALLS, CALLS - 1, tokens_in, tokens_out)]  # final_answer is no tool call


def test_the_receipt_is_valid(run: Run) -> None:
    assert run.receipt_status == "valid"


def test_the_strict_export_carries_the_same_tree(run: Run) -> None:
    assert_same_tree(run.received, run.spans)


def test_no_sentinel_in_the_store_or_on_the_wire(run: Run) -> None:
    seen = Surfaces.of(run.store, run.raw_bodies, run.received)
    assert AGENT in seen.dump and "lookup_city" in seen.dump  # the search finds what is allowed
    assert AGENT.encode() in seen.wire
    assert seen.leaks(SENTINELS) == []


def test_with_capture_on_the_content_reaches_the_local_table_only(tmp_path: Path) -> None:
    """``capture_content=True``: the content keys of smolagents' LLM and tool spans become captured content in
    the store's content table (never span attributes), and nothing of it goes over OTLP."""
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    from otel_agentdiag.content.decoder import decode

    store = tmp_path / "traces.db"
    with OTLPReceiver() as receiver, ScriptedServer() as server:
        diag = otel_agentdiag.configure(
            store=store, otlp_endpoint=receiver.endpoint, hash_key=HASH_KEY, set_global=False, capture_content=True
        )
        instrumentor = SmolagentsInstrumentor()
        instrumentor.instrument(tracer_provider=diag.tracer_provider)
        try:
            agent = _agent(server)
            otel_agentdiag.register_names(tools=list(agent.tools), agents=[agent.name])
            agent.run(TASK)
        finally:
            instrumentor.uninstrument()
            gc.collect()
            diag.shutdown()
        assert receiver.errors == []
        wire = b"\n".join(receiver.raw_bodies)
    with SpanStore(store, create=False) as reader:
        (trace,) = reader.list_traces()
        kinds = {s.span_id: s.kind for s in reader.get_trace(trace.trace_id)}
        content: dict[str, list[Any]] = {}
        for item in reader.trace_content(trace.trace_id):
            content.setdefault(kinds[item.span_id], []).append((item.role, decode(item.lossless)))
    assert fake.SENTINEL_PROMPT in repr(content["llm"])
    assert fake.SENTINEL_TOOL_ARGS in repr(content["tool"]) and fake.SENTINEL_TOOL_RESULT in repr(content["tool"])
    assert not [s for s in SENTINELS if s.encode() in wire]
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        spans_text = repr(conn.execute("SELECT name, attributes, events FROM spans").fetchall())
    finally:
        conn.close()
    assert not [s for s in SENTINELS if s in spans_text]
