"""LangGraph end to end: ``langchain.agents.create_agent`` (LangGraph's Pregel loop and ToolNode) with the scripted
chat model of ``tests/fakes/langchain_model.py`` (``langchain-openai`` is not in the dev environment), traced by our
``LangChainInstrumentor`` through the pipeline ``configure()`` builds, to a real SQLite store and a real OTLP/HTTP
receiver (strict policy).

The agent has three tools. The model asks for ``get_weather`` twice, then for ``lookup_city`` (which raises a
handled ``ToolException``: ToolNode tells the model), then answers. Sentinels sit in the prompt, the system
prompt, the tool descriptions, arguments and results, the call ids, the thread id (the conversation), the failing
tool's message and the answer. One run goes through ``invoke``, two more through ``ainvoke`` under
``asyncio.gather``, each in its own thread. Each run must be run → one iteration per LangGraph step → its
``chat`` or ``execute_tool`` span, usage on the leaves only with roll-ups equal to their sums, a valid receipt per
session, and no sentinel in the store or on the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="langgraph (a dev dependency) is not installed")

from agent_runs import (
    Run,
    assert_export_is_the_same_tree,
    assert_usage_on_leaves_and_roll_ups,
    pipeline,
    read_back,
    shape,
    show,
)
from fakes import openai_server as fake
from fakes.langchain_model import ScriptedChatModel, final_text, tool_calls, usage
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import ToolException, tool
from leak_search import Surfaces

from otel_agentdiag import semconv as sc
from otel_agentdiag.instrumentation.langchain import LangChainInstrumentor
from otel_agentdiag.redaction import IdHasher

HASH_KEY = b"c83e1f5a9b2d47e06a1c3f8e5d9b2a7041e6c3d8f5a2b9e7c1d4f6a8b3e5c702"
AGENT = "weather_agent"
SCRIPT = ("get_weather", "get_weather", "lookup_city")  # the model's tool call per step; then it answers
USAGE = [(20, 7), (21, 8), (22, 9), (40, 6)]
FAILING_TOOL_ERROR = f"lookup failed for {fake.SENTINEL_USER}"
ARGUMENTS = {"city": f"Paris {fake.SENTINEL_TOOL_ARGS} /home/alice", "unit": "celsius"}
SENTINELS = (*fake.SENTINELS, "/home/alice")
PROMPT = f"{fake.SENTINEL_PROMPT} weather in /home/alice?"
THREADS = (fake.SENTINEL_CONVERSATION, fake.SENTINEL_METADATA, fake.SENTINEL_END_USER)
"""The invoked run's thread, then the two concurrent runs'."""
CHAT = "llm:chat fake-chat-model"
TREE = [
    [CHAT],
    ["tool:execute_tool get_weather"],
    [CHAT],
    ["tool:execute_tool get_weather"],
    [CHAT],
    ["tool:execute_tool lookup_city"],
    [CHAT],
]


@tool(description=f"The weather in a city. {fake.SENTINEL_TOOL_DESCRIPTION}")
def get_weather(city: str, unit: str) -> str:
    return f"sunny {fake.SENTINEL_TOOL_RESULT}"


@tool
def get_time(city: str) -> str:
    """The local time in a city (offered, never called)."""
    return "noon"


@tool
def lookup_city(city: str, unit: str) -> str:
    """Look a city up (always fails; ToolNode tells the model)."""
    raise ToolException(FAILING_TOOL_ERROR)


lookup_city.handle_tool_error = True


def _agent(run: int) -> Any:
    steps = [
        tool_calls((name, ARGUMENTS, f"{fake.SENTINEL_TOOL_CALL_ID}-{run}-{n}"), usage_metadata=usage(*USAGE[n]))
        for n, name in enumerate(SCRIPT)
    ]
    model = ScriptedChatModel.from_steps(*steps, final_text(fake.ANSWER_TEXT, usage_metadata=usage(*USAGE[-1])))
    system = f"{fake.SENTINEL_SYSTEM} {fake.SENTINEL_INSTRUCTIONS}"
    return create_agent(model, tools=[get_weather, get_time, lookup_city], system_prompt=system, name=AGENT)


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _answer(state: dict[str, Any]) -> str:
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    return str(last.content)


async def _concurrent() -> list[str]:
    inputs = [{"messages": [("user", PROMPT)]} for _ in THREADS[1:]]
    states = await asyncio.gather(
        *(_agent(n).ainvoke(i, _config(t)) for n, (i, t) in enumerate(zip(inputs, THREADS[1:], strict=True), 1))
    )
    return [_answer(s) for s in states]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    store = tmp_path_factory.mktemp("langgraph") / "traces.db"
    with pipeline(store, HASH_KEY, "langgraph-e2e") as (_, receiver):
        LangChainInstrumentor().instrument()  # the provider configure() built
        try:
            first = _answer(_agent(0).invoke({"messages": [("user", PROMPT)]}, _config(THREADS[0])))
            answers = [first, *asyncio.run(_concurrent())]
        finally:
            LangChainInstrumentor().uninstrument()
    yield read_back(store, receiver, answers)


def test_the_agent_answers_as_without_tracing(run: Run) -> None:
    assert run.outcome == [fake.ANSWER_TEXT] * 3


def test_each_run_is_run_iterations_chat_and_tools(run: Run) -> None:
    traces = run.traces()
    assert len(traces) == 3  # the concurrent runs never share a trace
    a, b = (next(s for s in spans if s.kind == "run") for spans in traces[1:])
    assert a.end_ns is not None and b.end_ns is not None
    assert a.start_ns < b.end_ns and b.start_ns < a.end_ns  # the gathered runs did overlap
    for spans in traces:
        root, leaves = shape(spans)
        assert root.name == f"invoke_agent {AGENT}"
        assert root.attributes[sc.AGENTDIAG_STOP_REASON] == "completed"
        assert leaves == TREE
        iterations = sorted((s for s in spans if s.kind == "iteration"), key=lambda s: s.start_ns)
        assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == list(range(1, len(TREE) + 1))
        assert len({s.attributes[sc.GEN_AI_CONVERSATION_ID] for s in spans}) == 1  # every span in its session


def test_the_failing_tool_fails_its_span_only_by_type(run: Run) -> None:
    for spans in run.traces():
        failed = [(s.kind, s.name) for s in spans if s.status == "error"]
        assert failed == [("tool", "execute_tool lookup_city")]
        (tool_span,) = [s for s in spans if s.status == "error"]
        assert tool_span.attributes[sc.ERROR_TYPE] == "langchain.tool_error"  # a handled ToolException


def test_ids_are_keyed_digests(run: Run) -> None:
    hasher = IdHasher(HASH_KEY)
    digests = {hasher.digest("conversation", t) for t in THREADS}
    assert {str(s.attributes[sc.GEN_AI_CONVERSATION_ID]) for s in run.spans} == digests
    calls = [s.attributes[sc.GEN_AI_TOOL_CALL_ID] for s in run.spans if s.kind == "tool"]
    assert len(calls) == 3 * len(SCRIPT) == len(set(calls))
    assert all(str(c).startswith("hmac-sha256:") for c in calls)


def test_tokens_on_the_llm_leaves_only_and_roll_ups_equal_their_sums(run: Run) -> None:
    assert_usage_on_leaves_and_roll_ups(run)
    per_run = (sum(i for i, _ in USAGE), sum(o for _, o in USAGE))
    assert sorted((row[4], row[5]) for row in run.summaries) == [per_run] * 3  # the script's usage, counted once


def test_the_receipts_are_valid(run: Run) -> None:
    assert list(run.receipts.values()) == ["valid"] * 3


def test_the_strict_export_carries_the_same_tree(run: Run) -> None:
    assert_export_is_the_same_tree(run)


def test_no_sentinel_in_the_store_or_on_the_wire(run: Run) -> None:
    seen = Surfaces.of(run.store, run.raw_bodies, run.received)
    assert AGENT in seen.dump and "lookup_city" in seen.dump  # the search finds what is allowed
    assert AGENT.encode() in seen.wire and b"lookup_city" in seen.wire
    assert seen.leaks(SENTINELS) == []
    assert seen.leaks(["lookup failed", "Paris"]) == []


def test_agentdiag_show_prints_the_tree(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    text = show(run.store, run.traces()[0][0].trace_id)
    with capsys.disabled():
        print("\n" + text)
    assert f"invoke_agent {AGENT}" in text and "execute_tool lookup_city" in text
    assert not [s for s in SENTINELS if s in text]
