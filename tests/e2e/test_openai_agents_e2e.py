"""The OpenAI Agents SDK end to end: a real ``Agent`` with the real ``OpenAIChatCompletionsModel`` and the real
``AsyncOpenAI`` client against a scripted fake model server on 127.0.0.1, traced by our
``OpenAIAgentsInstrumentor`` and ``OpenAIInstrumentor`` through the pipeline ``configure()`` builds, to a real
SQLite store and a real OTLP/HTTP receiver (strict policy).

The agent has three tools. The model asks for ``get_weather`` twice, then for ``lookup_city`` (which raises: the
SDK feeds its message back to the model), then answers: four turns. Sentinels sit in the prompt, the
instructions, the tool descriptions, arguments and results, the call ids the server makes up, the group id (the
conversation) and the failing tool's message. Two more runs go under ``asyncio.gather``, each in its own
conversation. Each run must be run → four iterations → one ``chat`` and at most one ``execute_tool`` each, usage
on the leaves only with roll-ups equal to their sums, a valid receipt per session, and no sentinel in the store
or on the wire.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents package (the `openai-agents` extra) is not installed")

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
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from agents.tracing import get_trace_provider, set_trace_processors
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from leak_search import Surfaces
from openai import AsyncOpenAI

from otel_agentdiag import semconv as sc
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor
from otel_agentdiag.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from otel_agentdiag.redaction import IdHasher

HASH_KEY = b"9d41c7a2e05b8f3361a4d2c9e7b05f18c3a6e9d2b7f41c08e5a3d6b9c2f7e014"
AGENT = "weather_agent"
MODEL = "gpt-4o-mini"
TURNS = len(SCRIPT) + 1
FAILING_TOOL_ERROR = f"lookup failed for {fake.SENTINEL_USER}"
SENTINELS = (*fake.SENTINELS, "/home/alice")
PROMPT = f"{fake.SENTINEL_PROMPT} weather in /home/alice?"
CONVERSATIONS = (fake.SENTINEL_CONVERSATION, fake.SENTINEL_METADATA, fake.SENTINEL_END_USER)
"""The single run's conversation, then the two concurrent runs'."""
TREE = [
    ["llm:chat gpt-4o-mini", "tool:execute_tool get_weather"],
    ["llm:chat gpt-4o-mini", "tool:execute_tool get_weather"],
    ["llm:chat gpt-4o-mini", "tool:execute_tool lookup_city"],
    ["llm:chat gpt-4o-mini"],
]


@function_tool(description_override=f"The weather in a city. {fake.SENTINEL_TOOL_DESCRIPTION}")
def get_weather(city: str, unit: str) -> str:
    return f"sunny {fake.SENTINEL_TOOL_RESULT}"


@function_tool
def get_time(city: str) -> str:
    """The local time in a city (offered, never called)."""
    return "noon"


@function_tool
def lookup_city(city: str, unit: str) -> str:
    """Look a city up (always fails; the SDK tells the model)."""
    raise LookupError(FAILING_TOOL_ERROR)


def _agent(client: AsyncOpenAI) -> Agent[Any]:
    return Agent(
        name=AGENT,
        instructions=f"{fake.SENTINEL_INSTRUCTIONS} {fake.SENTINEL_SYSTEM}",
        model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        model_settings=ModelSettings(include_usage=True),
        tools=[get_weather, get_time, lookup_city],
    )


async def _runs(server: FakeModelServer) -> list[str]:
    client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, max_retries=0)
    try:
        agent = _agent(client)

        async def one(conversation: str) -> str:
            config = RunConfig(group_id=conversation, trace_include_sensitive_data=True)
            result = await Runner.run(agent, PROMPT, run_config=config)
            return str(result.final_output)

        first = await one(CONVERSATIONS[0])
        return [first, *await asyncio.gather(one(CONVERSATIONS[1]), one(CONVERSATIONS[2]))]
    finally:
        await client.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    before = list(get_trace_provider()._multi_processor._processors)  # type: ignore[attr-defined]
    set_trace_processors([])  # never the SDK's default exporter (it would send traces to OpenAI)
    store = tmp_path_factory.mktemp("openai-agents") / "traces.db"
    try:
        with ScriptedServer() as server, pipeline(store, HASH_KEY, "agents-e2e") as (_, receiver):
            OpenAIAgentsInstrumentor().instrument()  # the provider configure() built
            OpenAIInstrumentor().instrument()
            try:
                answers = asyncio.run(_runs(server))
            finally:
                OpenAIAgentsInstrumentor().uninstrument()
                OpenAIInstrumentor().uninstrument()
                gc.collect()
            assert len(server.requests_to("/v1/chat/completions")) == 3 * TURNS
            assert server.errors == []
    finally:
        set_trace_processors(before)
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
        assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == list(range(TURNS))
        assert len({s.attributes[sc.GEN_AI_CONVERSATION_ID] for s in spans}) == 1  # every span in its session


def test_the_failing_tool_fails_its_span_only_by_type(run: Run) -> None:
    for spans in run.traces():
        failed = [(s.kind, s.name) for s in spans if s.status == "error"]
        assert failed == [("tool", "execute_tool lookup_city")]
        (tool,) = [s for s in spans if s.status == "error"]
        # The SDK's error record names no exception type (a message and the error's text): ours is its code.
        assert tool.attributes[sc.ERROR_TYPE] == "agents.tool_error"


def test_ids_are_keyed_digests(run: Run) -> None:
    hasher = IdHasher(HASH_KEY)
    digests = {hasher.digest("conversation", c) for c in CONVERSATIONS}
    assert {str(s.attributes[sc.GEN_AI_CONVERSATION_ID]) for s in run.spans} == digests
    calls = [s.attributes[sc.GEN_AI_TOOL_CALL_ID] for s in run.spans if s.kind == "tool"]
    assert len(calls) == 3 * len(SCRIPT) == len(set(calls))
    assert all(str(c).startswith("hmac-sha256:") for c in calls)


def test_tokens_on_the_llm_leaves_only_and_roll_ups_equal_their_sums(run: Run) -> None:
    assert_usage_on_leaves_and_roll_ups(run)
    per_run = len(SCRIPT) * fake.TOOL_CALL_USAGE.prompt_tokens + fake.ANSWER_USAGE.prompt_tokens
    assert sorted(row[4] for row in run.summaries) == [per_run] * 3  # the server's usage, counted once


def test_the_receipts_are_valid(run: Run) -> None:
    assert list(run.receipts.values()) == ["valid"] * 3


def test_the_strict_export_carries_the_same_tree(run: Run) -> None:
    assert_export_is_the_same_tree(run)


def test_no_sentinel_in_the_store_or_on_the_wire(run: Run) -> None:
    seen = Surfaces.of(run.store, run.raw_bodies, run.received)
    assert AGENT in seen.dump and "lookup_city" in seen.dump  # the search finds what is allowed
    assert AGENT.encode() in seen.wire and b"lookup_city" in seen.wire
    assert seen.leaks(SENTINELS) == []
    assert seen.leaks(["lookup failed", json.loads(fake.TOOL_ARGUMENTS)["city"]]) == []


def test_agentdiag_show_prints_the_tree(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    text = show(run.store, run.traces()[0][0].trace_id)
    with capsys.disabled():
        print("\n" + text)
    assert f"invoke_agent {AGENT}" in text and "execute_tool lookup_city" in text
    assert not [s for s in SENTINELS if s in text]
