"""LangGraph end to end: ``langchain.agents.create_agent`` (LangGraph's Pregel loop and ToolNode) with two models,
traced by our ``LangChainInstrumentor`` through the pipeline ``configure()`` builds, to a real SQLite store and a
real OTLP/HTTP receiver (strict policy). The models: the scripted chat model of ``tests/fakes/langchain_model.py``
(LangChain's own kind of test model), and ``langchain_openai.ChatOpenAI`` (the real ``openai`` client) against the
scripted fake model server of ``agent_runs`` on 127.0.0.1, with our ``OpenAIInstrumentor`` on as well: the client
instrumentation then enriches LangChain's ``chat`` span instead of making a second one.

The agent has three tools. The model asks for ``get_weather`` twice, then for ``lookup_city`` (which raises a
handled ``ToolException``: ToolNode tells the model), then answers. Sentinels sit in the prompt, the system
prompt, the tool descriptions, arguments and results, the call ids, the thread id (the conversation), the failing
tool's message, the answer and the API key. One run goes through ``invoke``, two more through ``ainvoke`` under
``asyncio.gather``, each in its own thread. Each run must be run → one iteration per model call (LangGraph's model
step, joined by the tool step it asked for) → its ``chat`` and ``execute_tool`` spans, one LLM span per model
call, usage on the leaves only with roll-ups equal to
their sums, a valid receipt per session, and no sentinel in the store or on the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="langgraph (a dev dependency) is not installed")

from agent_runs import (
    SCRIPT,
    Run,
    ScriptedServer,
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
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import ToolException, tool
from leak_search import Surfaces

from otel_agentdiag import semconv as sc
from otel_agentdiag.instrumentation.langchain import LangChainInstrumentor
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor
from otel_agentdiag.redaction import IdHasher

HASH_KEY = b"c83e1f5a9b2d47e06a1c3f8e5d9b2a7041e6c3d8f5a2b9e7c1d4f6a8b3e5c702"
AGENT = "weather_agent"
USAGE = [(20, 7), (21, 8), (22, 9), (40, 6)]
"""The scripted chat model's usage per model call."""
SERVED_USAGE = [(u.prompt_tokens, u.completion_tokens) for u in [fake.TOOL_CALL_USAGE] * len(SCRIPT)] + [
    (fake.ANSWER_USAGE.prompt_tokens, fake.ANSWER_USAGE.completion_tokens)
]
"""The fake model server's usage per model call (ChatOpenAI)."""
FINISH_REASONS = [("tool_calls",)] * len(SCRIPT) + [("stop",)]
FAILING_TOOL_ERROR = f"lookup failed for {fake.SENTINEL_USER}"
ARGUMENTS = {"city": f"Paris {fake.SENTINEL_TOOL_ARGS} /home/alice", "unit": "celsius"}
SENTINELS = (*fake.SENTINELS, "/home/alice")
PROMPT = f"{fake.SENTINEL_PROMPT} weather in /home/alice?"
THREADS = (fake.SENTINEL_CONVERSATION, fake.SENTINEL_METADATA, fake.SENTINEL_END_USER)
"""The invoked run's thread, then the two concurrent runs'."""
TURNS = len(SCRIPT) + 1
"""Model calls per run."""


@dataclass(frozen=True)
class Model:
    """One model the agent runs with, and what its LLM spans must then say."""

    id: str
    name: str
    """The request model: the LLM span is ``chat {name}``."""
    provider: str
    response_model: str
    usage: list[tuple[int, int]]
    """Input and output tokens of each model call of a run, in order."""
    served: bool
    """True for ChatOpenAI, talking to the fake model server through the real client (instrumented too)."""

    def tree(self) -> list[list[str]]:
        """Per iteration of a run, its leaves as ``kind:name`` (sorted): a model call and the tool it asked for
        (LangGraph runs the tool in a step of its own, which joins the model step's iteration), then the answer."""
        chat = f"llm:chat {self.name}"
        return [sorted([chat, f"tool:execute_tool {name}"]) for name in SCRIPT] + [[chat]]


MODELS = (
    Model("scripted", "fake-chat-model", "scriptedchatmodel", "fake-chat-model", USAGE, served=False),
    Model("chat_openai", "gpt-4o-mini", "openai", "gpt-4o-mini" + fake.MODEL_SNAPSHOT_SUFFIX, SERVED_USAGE, True),
)


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


def _scripted(run: int) -> ScriptedChatModel:
    steps = [
        tool_calls((name, ARGUMENTS, f"{fake.SENTINEL_TOOL_CALL_ID}-{run}-{n}"), usage_metadata=usage(*USAGE[n]))
        for n, name in enumerate(SCRIPT)
    ]
    return ScriptedChatModel.from_steps(*steps, final_text(fake.ANSWER_TEXT, usage_metadata=usage(*USAGE[-1])))


def _chat_openai(server: ScriptedServer) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="gpt-4o-mini", api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, max_retries=0)


def _agent(model: BaseChatModel) -> Any:
    system = f"{fake.SENTINEL_SYSTEM} {fake.SENTINEL_INSTRUCTIONS}"
    return create_agent(model, tools=[get_weather, get_time, lookup_city], system_prompt=system, name=AGENT)


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _answer(state: dict[str, Any]) -> str:
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    return str(last.content)


async def _concurrent(models: list[BaseChatModel]) -> list[str]:
    inputs = [{"messages": [("user", PROMPT)]} for _ in THREADS[1:]]
    runs = zip(models, inputs, THREADS[1:], strict=True)
    states = await asyncio.gather(*(_agent(m).ainvoke(i, _config(t)) for m, i, t in runs))
    return [_answer(s) for s in states]


@pytest.fixture(scope="module", params=MODELS, ids=[m.id for m in MODELS])
def model(request: pytest.FixtureRequest) -> Model:
    assert isinstance(request.param, Model)
    if request.param.served:
        pytest.importorskip("langchain_openai", reason="langchain-openai (a dev dependency) is not installed")
    return request.param


@pytest.fixture(scope="module")
def run(model: Model, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    store = tmp_path_factory.mktemp(f"langgraph-{model.id}") / "traces.db"
    with ExitStack() as stack:
        server = stack.enter_context(ScriptedServer()) if model.served else None
        with pipeline(store, HASH_KEY, "langgraph-e2e") as (_, receiver):
            instrumentors: list[Any] = [LangChainInstrumentor()]  # the provider configure() built
            if server is not None:
                instrumentors.append(OpenAIInstrumentor())  # enriches LangChain's chat span
            for instrumentor in instrumentors:
                instrumentor.instrument()
            try:
                models = [_scripted(n) if server is None else _chat_openai(server) for n in range(len(THREADS))]
                first = _answer(_agent(models[0]).invoke({"messages": [("user", PROMPT)]}, _config(THREADS[0])))
                answers = [first, *asyncio.run(_concurrent(models[1:]))]
            finally:
                for instrumentor in instrumentors:
                    instrumentor.uninstrument()
        if server is not None:
            assert len(server.requests_to("/v1/chat/completions")) == len(THREADS) * TURNS
            assert server.errors == []
    yield read_back(store, receiver, answers)


def test_the_agent_answers_as_without_tracing(run: Run) -> None:
    assert run.outcome == [fake.ANSWER_TEXT] * 3


def test_each_run_is_run_iterations_chat_and_tools(run: Run, model: Model) -> None:
    traces = run.traces()
    assert len(traces) == 3  # the concurrent runs never share a trace
    a, b = (next(s for s in spans if s.kind == "run") for spans in traces[1:])
    assert a.end_ns is not None and b.end_ns is not None
    assert a.start_ns < b.end_ns and b.start_ns < a.end_ns  # the gathered runs did overlap
    for spans in traces:
        root, leaves = shape(spans)
        assert root.name == f"invoke_agent {AGENT}"
        assert root.attributes[sc.AGENTDIAG_STOP_REASON] == "completed"
        assert leaves == model.tree()
        iterations = sorted((s for s in spans if s.kind == "iteration"), key=lambda s: s.start_ns)
        # The index is LangGraph's step of the model call that opened the iteration.
        assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == list(range(TURNS))
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


def test_one_llm_span_per_model_call_with_its_usage_and_finish_reason(run: Run, model: Model) -> None:
    for spans in run.traces():
        llm = sorted((s for s in spans if s.kind == "llm"), key=lambda s: s.start_ns)
        assert len(llm) == TURNS  # with the client instrumentation on too: no second span per call
        got = [(s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS], s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) for s in llm]
        assert got == model.usage
        assert [tuple(s.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS]) for s in llm] == FINISH_REASONS
        assert {s.attributes[sc.GEN_AI_PROVIDER_NAME] for s in llm} == {model.provider}
        assert {s.attributes[sc.GEN_AI_RESPONSE_MODEL] for s in llm} == {model.response_model}
        attempts = [[e for e in s.events if e["name"] == sc.AGENTDIAG_HTTP_ATTEMPT_EVENT] for s in llm]
        assert [len(a) for a in attempts] == [1 if model.served else 0] * TURNS  # the client's one HTTP attempt


def test_tokens_on_the_llm_leaves_only_and_roll_ups_equal_their_sums(run: Run, model: Model) -> None:
    assert_usage_on_leaves_and_roll_ups(run)
    per_run = (sum(i for i, _ in model.usage), sum(o for _, o in model.usage))
    assert sorted((row[4], row[5]) for row in run.summaries) == [per_run] * 3  # each call's usage, counted once


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
