"""The Pydantic AI instrumentation, driven by the real ``pydantic-ai-slim`` package: its own test model
(``FunctionModel``, scripted per step) and its real OpenAI model class against the fake model server on 127.0.0.1.

The framework's own spans (given our provider) must nest as run → ``agent.iteration`` per model step → ``chat`` and
``execute_tool``, also for runs under ``asyncio.gather``; the iteration roll-ups equal the sums of their leaves;
``uninstrument()`` puts everything back.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim (the `pydantic-ai` extra) is not installed")

from conftest import Spans
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import RequestUsage

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import default_registry
from otel_agentdiag.instrumentation.pydantic_ai import PydanticAIInstrumentor
from otel_agentdiag.instrumentation.pydantic_ai.patch import agent_tool_names

AGENT = "weather-agent"
USAGE = [RequestUsage(input_tokens=11, output_tokens=3), RequestUsage(input_tokens=17, output_tokens=5)]


def scripted(final: str = "done") -> FunctionModel:
    """Step 1: ``get_weather`` and ``lookup`` (which asks for a retry); step 2: ``lookup`` again; step 3: text."""

    def step(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = sum(isinstance(m, ModelResponse) for m in messages)
        if n == 0:
            parts: list[Any] = [
                ToolCallPart("get_weather", {"city": fake.SENTINEL_TOOL_ARGS}, tool_call_id="c1"),
                ToolCallPart("lookup", {"city": fake.SENTINEL_TOOL_ARGS}, tool_call_id="c2"),
            ]
            return ModelResponse(parts=parts, usage=USAGE[0])
        if n == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"city": "x"}, tool_call_id="c3")], usage=USAGE[1])
        return ModelResponse(parts=[TextPart(final)], usage=RequestUsage(input_tokens=23, output_tokens=7))

    return FunctionModel(step, model_name="scripted")


def weather_agent(model: Any, *, fail_hard: bool = False) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, name=AGENT)
    attempts: dict[str, int] = {}

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return fake.SENTINEL_TOOL_RESULT

    @agent.tool_plain(sequential=True)  # never racing get_weather
    def lookup(city: str) -> str:
        if fail_hard:
            raise LookupError(f"no {fake.SENTINEL_ERROR}")
        attempts[city] = attempts.get(city, 0) + 1
        if len(attempts) == 1:
            raise ModelRetry(f"try another city than {fake.SENTINEL_ERROR}")
        return fake.SENTINEL_TOOL_RESULT

    return agent


@pytest.fixture
def instrumented(spans: Spans) -> Iterator[Spans]:
    PydanticAIInstrumentor().instrument(tracer_provider=spans.provider)
    yield spans
    PydanticAIInstrumentor().uninstrument()


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return sorted(
        (s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id),
        key=lambda s: s.start_time or 0,
    )


def _check_run(spans: list[ReadableSpan], run: ReadableSpan) -> None:
    """run → 3 iterations (0, 1, 2) → chat + tools; roll-ups equal the sums of the leaves."""
    iterations = _children(spans, run)
    assert [s.name for s in iterations] == [sc.ITERATION_SPAN_NAME] * 3
    assert [_attrs(s)[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == [0, 1, 2]
    assert {_attrs(s)[sc.AGENTDIAG_KIND] for s in iterations} == {sc.KIND_ITERATION}
    shapes = [[c.name for c in _children(spans, it)] for it in iterations]
    assert shapes[0][0] == "chat scripted"
    assert sorted(shapes[0][1:]) == ["execute_tool get_weather", "execute_tool lookup"]
    assert shapes[1:] == [["chat scripted", "execute_tool lookup"], ["chat scripted"]]
    failed = [c for c in _children(spans, iterations[0]) if c.name == "execute_tool lookup"]
    assert [c.status.status_code for c in failed] == [StatusCode.ERROR]  # ModelRetry: the tool failed, the run goes on
    for it in iterations:
        (chat,) = [c for c in _children(spans, it) if c.name.startswith("chat")]
        for key in ("input_tokens", "output_tokens"):
            assert _attrs(it)[sc.AGENTDIAG_USAGE_PREFIX + key] == _attrs(chat)[sc.GEN_AI_USAGE_PREFIX + key]
        assert it.status.status_code is StatusCode.UNSET
    run_attrs = _attrs(run)
    leaves = [c for it in iterations for c in _children(spans, it) if c.name.startswith("chat")]
    for key in ("input_tokens", "output_tokens"):
        total = sum(_attrs(c)[sc.GEN_AI_USAGE_PREFIX + key] for c in leaves)
        assert run_attrs["gen_ai.aggregated_usage." + key] == total  # the framework's roll-up, the adapter's input
        assert not any(k.startswith(sc.GEN_AI_USAGE_PREFIX) for k in run_attrs)


def test_a_run_is_run_iterations_chat_and_tools(instrumented: Spans) -> None:
    result = asyncio.run(weather_agent(scripted()).run(fake.SENTINEL_PROMPT))
    assert result.output == "done"
    spans = instrumented.finished()
    (run,) = [s for s in spans if s.parent is None]
    assert run.name == f"invoke_agent {AGENT}"
    _check_run(spans, run)


def test_runs_under_gather_keep_their_own_iterations(instrumented: Spans) -> None:
    async def both() -> list[Any]:
        return await asyncio.gather(weather_agent(scripted("one")).run("a"), weather_agent(scripted("two")).run("b"))

    assert [r.output for r in asyncio.run(both())] == ["one", "two"]
    spans = instrumented.finished()
    runs = [s for s in spans if s.parent is None]
    assert len(runs) == 2
    assert len({r.context.trace_id for r in runs if r.context}) == 2
    for run in runs:
        _check_run([s for s in spans if s.context and run.context and s.context.trace_id == run.context.trace_id], run)


def test_a_tool_that_raises_fails_the_run_and_its_iteration(instrumented: Spans) -> None:
    with pytest.raises(LookupError) as raised:  # the agent's own exception, unchanged
        asyncio.run(weather_agent(scripted(), fail_hard=True).run("x"))
    assert fake.SENTINEL_ERROR in str(raised.value)
    spans = instrumented.finished()
    (run,) = [s for s in spans if s.parent is None]
    assert run.status.status_code is StatusCode.ERROR
    (iteration,) = _children(spans, run)
    assert iteration.status.status_code is StatusCode.ERROR
    assert _attrs(iteration)[sc.ERROR_TYPE] == "LookupError"
    tools = [c for c in _children(spans, iteration) if c.name == "execute_tool lookup"]
    assert [t.status.status_code for t in tools] == [StatusCode.ERROR]


def streamed(final: str = "done") -> FunctionModel:
    """:func:`scripted`'s three steps, streamed (``run_stream()`` calls the model's stream function)."""

    async def step(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        n = sum(isinstance(m, ModelResponse) for m in messages)
        if n == 0:
            yield {0: DeltaToolCall("get_weather", json.dumps({"city": fake.SENTINEL_TOOL_ARGS}), tool_call_id="c1")}
            yield {1: DeltaToolCall("lookup", json.dumps({"city": fake.SENTINEL_TOOL_ARGS}), tool_call_id="c2")}
        elif n == 1:
            yield {0: DeltaToolCall("lookup", json.dumps({"city": "x"}), tool_call_id="c3")}
        else:
            for word in final.split():
                yield word + " "

    return FunctionModel(stream_function=step, model_name="scripted")


async def _streamed_run(final: str) -> str:
    async with weather_agent(streamed(final)).run_stream(fake.SENTINEL_PROMPT) as result:
        return (await result.get_output()).strip()


def _check_streamed_run(spans: list[ReadableSpan], run: ReadableSpan) -> None:
    """run_stream(): run → 3 iterations → chat + tools, as with run(); the streamed steps' roll-ups equal their
    leaves, except the last one's: Pydantic AI counts the final answer's usage only after the run's graph ended,
    so that iteration carries none (absent, never a made-up 0), while its ``chat`` leaf carries it."""
    iterations = _children(spans, run)
    assert [s.name for s in iterations] == [sc.ITERATION_SPAN_NAME] * 3
    assert [_attrs(s)[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == [0, 1, 2]
    shapes = [sorted(c.name for c in _children(spans, it)) for it in iterations]
    assert shapes == [
        ["chat scripted", "execute_tool get_weather", "execute_tool lookup"],
        ["chat scripted", "execute_tool lookup"],
        ["chat scripted"],
    ]
    assert not [s for s in _children(spans, run) if s.name != sc.ITERATION_SPAN_NAME]  # nothing directly under it
    for it in iterations[:2]:
        (chat,) = [c for c in _children(spans, it) if c.name.startswith("chat")]
        for key in ("input_tokens", "output_tokens"):
            assert _attrs(it)[sc.AGENTDIAG_USAGE_PREFIX + key] == _attrs(chat)[sc.GEN_AI_USAGE_PREFIX + key]
    (last_chat,) = _children(spans, iterations[2])
    assert _attrs(last_chat)[sc.GEN_AI_USAGE_PREFIX + "output_tokens"] > 0
    assert not any(k.startswith(sc.AGENTDIAG_USAGE_PREFIX) for k in _attrs(iterations[2]))


def test_a_streamed_run_has_the_same_tree(instrumented: Spans) -> None:
    assert asyncio.run(_streamed_run("all done")) == "all done"
    spans = instrumented.finished()
    (run,) = [s for s in spans if s.parent is None]
    _check_streamed_run(spans, run)


def test_streamed_runs_under_gather_keep_their_own_iterations(instrumented: Spans) -> None:
    async def both() -> list[str]:
        return list(await asyncio.gather(_streamed_run("one"), _streamed_run("two")))

    assert asyncio.run(both()) == ["one", "two"]
    spans = instrumented.finished()
    runs = [s for s in spans if s.parent is None]
    assert len(runs) == 2
    for run in runs:
        _check_streamed_run(
            [s for s in spans if s.context and run.context and s.context.trace_id == run.context.trace_id], run
        )


def test_the_declared_names_are_registered() -> None:
    agent = weather_agent(scripted())
    assert sorted(agent_tool_names(agent)) == ["get_weather", "lookup"]


def test_the_agent_names_are_registered_at_the_first_step(instrumented: Spans) -> None:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ok")])

    agent: Agent[None, str] = Agent(FunctionModel(answer), name="registered-agent-7")

    @agent.tool_plain
    def declared_tool_7(city: str) -> str:
        return "ok"

    assert not default_registry.is_agent("registered-agent-7")
    asyncio.run(agent.run("x"))
    assert default_registry.is_agent("registered-agent-7")
    assert default_registry.is_tool("declared_tool_7")


def test_the_openai_model_against_the_fake_server(instrumented: Spans, server: FakeModelServer) -> None:
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    async def go() -> str:
        client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url, max_retries=0)
        model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))
        agent: Agent[None, str] = Agent(model, name=AGENT, instructions=fake.SENTINEL_SYSTEM)

        @agent.tool_plain(name=fake.TOOL_NAME)
        def weather(city: str) -> str:
            return fake.SENTINEL_TOOL_RESULT

        try:
            return (await agent.run(fake.SENTINEL_PROMPT)).output
        finally:
            await client.close()

    assert fake.SENTINEL_OUTPUT in asyncio.run(go())
    spans = instrumented.finished()
    (run,) = [s for s in spans if s.parent is None]
    iterations = _children(spans, run)
    assert [[c.name for c in _children(spans, it)] for it in iterations] == [
        ["chat gpt-4o-mini", f"execute_tool {fake.TOOL_NAME}"],
        ["chat gpt-4o-mini"],
    ]
    chats = [c for it in iterations for c in _children(spans, it) if c.name.startswith("chat")]
    assert [_attrs(c)[sc.GEN_AI_USAGE_INPUT_TOKENS] for c in chats] == [
        fake.TOOL_CALL_USAGE.prompt_tokens,
        fake.ANSWER_USAGE.prompt_tokens,
    ]


def test_uninstrument_puts_everything_back(spans: Spans) -> None:
    before = "wrap_node_run" in vars(Instrumentation)
    Agent.instrument_all(False)
    instrumentor = PydanticAIInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    instrumentor.instrument(tracer_provider=spans.provider)  # idempotent
    assert "wrap_node_run" in vars(Instrumentation)
    instrumentor.uninstrument()
    assert ("wrap_node_run" in vars(Instrumentation)) == before
    asyncio.run(weather_agent(scripted()).run("x"))
    assert spans.finished() == []  # the framework's instrumentation is off again, and no iteration spans


def test_the_entry_point_names_the_instrumentor() -> None:
    """Zero-code: ``opentelemetry-instrument`` finds it by the entry point in pyproject.toml (the installed
    metadata may predate it, so the source of truth is read)."""
    import importlib
    import sys
    from pathlib import Path

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    value = pyproject["project"]["entry-points"]["opentelemetry_instrumentor"]["agentdiag_pydantic_ai"]
    module, _, name = value.partition(":")
    assert getattr(importlib.import_module(module), name) is PydanticAIInstrumentor
    assert "pydantic-ai" in pyproject["project"]["optional-dependencies"]


def test_no_run_state_is_left_behind(instrumented: Spans) -> None:
    """Finished and failed runs leave nothing open in the instrumentor (its state is bounded by open runs)."""
    asyncio.run(weather_agent(scripted()).run("x"))
    with pytest.raises(LookupError):
        asyncio.run(weather_agent(scripted(), fail_hard=True).run("x"))
    iterations = PydanticAIInstrumentor()._iterations
    assert iterations is not None
    assert (iterations._open, iterations._index) == ({}, {})


def test_runs_abandoned_mid_step_are_bounded(spans: Spans) -> None:
    """``agent.iter()`` loops left mid-step never end their iteration: past ``max_open`` runs the oldest is ended
    (and counted), so memory stays bounded."""
    from types import SimpleNamespace

    from pydantic_ai import ModelRequestNode
    from pydantic_ai.messages import ModelRequest

    from otel_agentdiag.instrumentation.pydantic_ai.patch import Iterations

    iterations = Iterations(spans.provider.get_tracer("t"), max_open=2)
    node = ModelRequestNode(request=ModelRequest(parts=[]))
    for n in range(3):
        iterations.enter(SimpleNamespace(run_id=f"run-{n}", usage=None, agent=None), node)
    assert iterations.evicted == 1
    assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in spans.finished()] == [0]  # run-0's, ended
    assert iterations.close() == 2
    assert len(spans.finished()) == 3


def test_a_run_driven_node_by_node_with_iter_has_the_same_tree(instrumented: Spans) -> None:
    async def drive() -> None:
        async with weather_agent(scripted()).iter("x") as agent_run:
            async for _node in agent_run:
                pass

    asyncio.run(drive())
    spans = instrumented.finished()
    (run,) = [s for s in spans if s.parent is None]
    _check_run(spans, run)
