"""Pydantic AI through the pipeline ``configure()`` builds, to a real SQLite store and a real OTLP/HTTP receiver
(strict policy): its own test model (``FunctionModel``) and its real OpenAI model class against the fake model
server on 127.0.0.1, instrumented by :class:`~otel_agentdiag.instrumentation.pydantic_ai.PydanticAIInstrumentor`.

A small agent: two tool calls, one failing tool (``ModelRetry``: the run recovers), sentinels in the prompt, the
instructions, the tool description, the tool arguments and results, the tool call ids, the retry message, the
conversation id and the output; and a run whose tool raises (the run fails). The store must hold run →
iterations → ``chat`` and ``execute_tool``, tokens on the leaves only (the run's roll-up their sum), valid
receipts, and no sentinel nor any of the framework's content keys in the store or on the wire.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim (the `pydantic-ai` extra) is not installed")

from agent_runs import assert_same_tree
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from leak_search import Surfaces
from otlp_receiver import OTLPReceiver, ReceivedSpan
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

import otel_agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.instrumentation.pydantic_ai import PydanticAIInstrumentor
from otel_agentdiag.storage import SpanStore, StoredSpan

HASH_KEY = b"442f18475e673d6886dacd45328a7ec155d9a207f69c7098cd618ac0ac152443"
AGENT = "pydantic-weather"
SENTINELS = (*fake.SENTINELS, "/home/alice")
CONTENT_KEYS = (
    "pydantic_ai.all_messages",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "model_request_parameters",
    "logfire.msg",
    "logfire.json_schema",
    "gen_ai.aggregated_usage.input_tokens",
    '"agent_name"',
    '"model_name"',
)
USAGE = [(11, 3), (17, 5), (23, 7)]


def scripted() -> FunctionModel:
    """Step 1: ``get_weather`` and ``lookup`` (which asks for a retry); step 2: ``lookup`` again; step 3: text."""

    def step(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = sum(isinstance(m, ModelResponse) for m in messages)
        usage = RequestUsage(input_tokens=USAGE[n][0], output_tokens=USAGE[n][1])
        args = {"city": f"{fake.SENTINEL_TOOL_ARGS} /home/alice"}
        if n == 0:
            parts: list[Any] = [
                ToolCallPart("get_weather", args, tool_call_id=f"{fake.SENTINEL_TOOL_CALL_ID}-1"),
                ToolCallPart("lookup", args, tool_call_id=f"{fake.SENTINEL_TOOL_CALL_ID}-2"),
            ]
            return ModelResponse(parts=parts, usage=usage)
        if n == 1:
            part = ToolCallPart("lookup", {"city": "Paris"}, tool_call_id=f"{fake.SENTINEL_TOOL_CALL_ID}-3")
            return ModelResponse(parts=[part], usage=usage)
        return ModelResponse(parts=[TextPart(fake.SENTINEL_OUTPUT)], usage=usage)

    return FunctionModel(step, model_name="scripted")


def weather_agent(model: Any, *, fail_hard: bool = False, only_weather: bool = False) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, name=AGENT, instructions=f"{fake.SENTINEL_SYSTEM} /home/alice")

    @agent.tool_plain(name=fake.TOOL_NAME, description=fake.SENTINEL_TOOL_DESCRIPTION)
    def get_weather(city: str, unit: str = "celsius") -> str:
        return fake.SENTINEL_TOOL_RESULT

    if not only_weather:

        @agent.tool_plain(description=fake.SENTINEL_TOOL_DESCRIPTION, sequential=True)  # never racing get_weather
        def lookup(city: str) -> str:
            if fail_hard:
                raise LookupError(f"no {fake.SENTINEL_ERROR}")
            if fake.SENTINEL_TOOL_ARGS in city:
                raise ModelRetry(f"try another city than {fake.SENTINEL_ERROR} {city}")
            return fake.SENTINEL_TOOL_RESULT

    return agent


@dataclass
class Run:
    model: str
    store: Path
    spans: list[StoredSpan]
    received: list[ReceivedSpan]
    raw_bodies: list[bytes]
    receipts: list[str]


async def _runs(model: str, server: FakeModelServer) -> None:
    if model == "openai":
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, max_retries=0)
        try:
            chat = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))
            agent = weather_agent(chat, only_weather=True)
            await asyncio.gather(
                agent.run(fake.SENTINEL_PROMPT, conversation_id=fake.SENTINEL_CONVERSATION),
                agent.run(fake.SENTINEL_PROMPT, conversation_id=fake.SENTINEL_USER),
            )
        finally:
            await client.close()
        return
    await asyncio.gather(
        weather_agent(scripted()).run(fake.SENTINEL_PROMPT, conversation_id=fake.SENTINEL_CONVERSATION),
        weather_agent(scripted()).run(fake.SENTINEL_PROMPT, conversation_id=fake.SENTINEL_USER),
    )
    with pytest.raises(LookupError):
        await weather_agent(scripted(), fail_hard=True).run(
            fake.SENTINEL_PROMPT, conversation_id=fake.SENTINEL_METADATA
        )


@pytest.fixture(scope="module", params=["function", "openai"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    model = request.param
    store = tmp_path_factory.mktemp(model) / "traces.db"
    with OTLPReceiver() as receiver, FakeModelServer() as server:
        diag = otel_agentdiag.configure(
            service_name="pydantic-test",
            store=store,
            otlp_endpoint=receiver.endpoint,
            hash_key=HASH_KEY,
            set_global=False,
        )
        PydanticAIInstrumentor().instrument()  # the provider configure() built
        try:
            asyncio.run(_runs(model, server))
        finally:
            PydanticAIInstrumentor().uninstrument()
            gc.collect()
            diag.shutdown()
        assert receiver.errors == []
        received = receiver.spans()
        raw_bodies = list(receiver.raw_bodies)
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
        sessions = {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in spans if s.kind == "run"}
        receipts = []
        for session in sorted(sessions, key=str):
            receipt = session_receipt(reader, session)
            receipts.append("valid" if receipt.status == "valid" else f"{receipt.status} {receipt.reasons}")
    yield Run(model, store, spans, received, raw_bodies, receipts)


def _by_trace(spans: list[StoredSpan]) -> list[list[StoredSpan]]:
    traces: dict[str, list[StoredSpan]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    return list(traces.values())


def _children(spans: list[StoredSpan], parent: StoredSpan) -> list[StoredSpan]:
    return sorted((s for s in spans if s.parent_span_id == parent.span_id), key=lambda s: s.start_ns)


def test_each_run_is_run_iterations_chat_and_tools(run: Run) -> None:
    traces = _by_trace(run.spans)
    assert len(traces) == (2 if run.model == "openai" else 3)
    shapes = []
    for spans in traces:
        (agent,) = [s for s in spans if s.parent_span_id is None]
        assert agent.kind == "run" and agent.name == f"invoke_agent {AGENT}"
        iterations = _children(spans, agent)
        assert {s.kind for s in iterations} == {"iteration"}
        assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == list(range(len(iterations)))
        shape = [sorted(f"{c.kind}:{c.name}" for c in _children(spans, it)) for it in iterations]
        shapes.append((agent.status, shape))
        assert len(spans) == 1 + len(iterations) + sum(len(s) for s in shape)  # nothing outside the tree
    tool, chat = (
        f"tool:execute_tool {fake.TOOL_NAME}",
        "llm:chat " + ("gpt-4o-mini" if run.model == "openai" else "scripted"),
    )
    if run.model == "openai":
        assert shapes == [("ok", [[chat, tool], [chat]])] * 2 or shapes == [("unset", [[chat, tool], [chat]])] * 2
        return
    lookup = "tool:execute_tool lookup"
    recovered = [[chat, tool, lookup], [chat, lookup], [chat]]
    assert sorted(shapes, key=str)[-2:] == [(shapes[0][0], recovered)] * 2 or [s for s in shapes if s[1] == recovered]
    assert len([s for s in shapes if s[1] == recovered]) == 2
    (failed,) = [s for s in shapes if s[1] != recovered]
    assert failed == ("error", [[chat, tool, lookup]])


def test_errors_are_marked_by_type_only(run: Run) -> None:
    tools = [s for s in run.spans if s.kind == "tool" and s.status == "error"]
    if run.model == "openai":
        assert tools == [], [(s.name, s.attributes.get(sc.ERROR_TYPE)) for s in tools]
        return
    assert len(tools) == 3, [
        (s.name, s.attributes.get(sc.ERROR_TYPE)) for s in tools
    ]  # two ModelRetry (recovered), one LookupError (the failed run)
    assert sorted(s.attributes.get(sc.ERROR_TYPE, "") for s in tools) == [
        "LookupError",
        "pydantic_ai.exceptions.ToolRetryError",
        "pydantic_ai.exceptions.ToolRetryError",
    ]
    (failed_run,) = [s for s in run.spans if s.kind == "run" and s.status == "error"]
    (iteration,) = [s for s in run.spans if s.kind == "iteration" and s.status == "error"]
    assert iteration.attributes[sc.ERROR_TYPE] == "LookupError"
    assert failed_run.attributes[sc.ERROR_TYPE] == "LookupError"


def test_tokens_on_the_llm_leaves_only_and_roll_ups_equal_their_sums(run: Run) -> None:
    for spans in _by_trace(run.spans):
        leaves = [s for s in spans if s.kind == "llm"]
        for span in spans:
            if span.kind != "llm":
                assert not [k for k in span.attributes if k.startswith("gen_ai.usage.")], span.name
        by_id = {s.span_id: s for s in spans}
        for key in ("input_tokens", "output_tokens"):
            total = sum(s.attributes[sc.GEN_AI_USAGE_PREFIX + key] for s in leaves)
            (agent,) = [s for s in spans if s.kind == "run"]
            assert agent.attributes[sc.AGENTDIAG_USAGE_PREFIX + key] == total
            for it in (s for s in spans if s.kind == "iteration"):
                under = [s for s in leaves if by_id[s.parent_span_id or ""] is it]
                assert it.attributes[sc.AGENTDIAG_USAGE_PREFIX + key] == sum(
                    s.attributes[sc.GEN_AI_USAGE_PREFIX + key] for s in under
                )
    if run.model == "openai":
        expected = 2 * (fake.TOOL_CALL_USAGE.prompt_tokens + fake.ANSWER_USAGE.prompt_tokens)
    else:
        expected = 2 * sum(i for i, _ in USAGE) + USAGE[0][0]
    assert sum(s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in run.spans if s.kind == "llm") == expected


def test_the_receipts_are_valid_and_every_span_is_in_its_runs_session(run: Run) -> None:
    assert run.receipts == ["valid"] * (2 if run.model == "openai" else 3)
    for spans in _by_trace(run.spans):
        sessions = {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in spans}
        assert len(sessions) == 1 and None not in sessions, sorted((s.kind, s.name) for s in spans)


def test_the_strict_export_carries_the_same_tree(run: Run) -> None:
    assert_same_tree(run.received, run.spans)


def test_no_sentinel_and_no_content_key_in_the_store_or_on_the_wire(run: Run) -> None:
    seen = Surfaces.of(run.store, run.raw_bodies, run.received)
    assert AGENT in seen.dump and fake.TOOL_NAME in seen.dump  # the search finds what is allowed
    assert AGENT.encode() in seen.wire
    assert not [k for k in CONTENT_KEYS if k in seen.dump or k.encode() in seen.wire]
    assert seen.leaks(SENTINELS) == []
    conversations = {
        r.attributes.get(sc.GEN_AI_CONVERSATION_ID)
        for r in run.received
        if r.attributes.get(sc.AGENTDIAG_KIND) == "run"
    }
    assert len(conversations) == len(run.receipts) and None not in conversations  # hashed, one per run
