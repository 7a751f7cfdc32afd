"""The LangChain / LangGraph instrumentation, driven by real ``create_agent`` and ``create_react_agent`` agents.

The model is the scripted chat model of ``tests/fakes/langchain_model.py`` (offline, with usage, streamed word by
word when the agent is streamed); everything else is real: LangGraph's Pregel loop and ToolNode, LangChain's
callback managers, the OpenTelemetry SDK, the redacting pipeline and the SQLite store.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="langgraph (a dev dependency) is not installed")

from conftest import Spans
from content_sink import RecordingSink, content_sink  # noqa: F401
from fakes.langchain_model import ScriptedChatModel, final_text, tool_calls, usage
from langchain.agents import create_agent
from langchain_core.callbacks import UsageMetadataCallbackHandler
from langchain_core.language_models import FakeListLLM
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tools import ToolException, tool
from langchain_core.tracers import context as lc_tracer_context
from langgraph.errors import GraphRecursionError
from langgraph.prebuilt import ToolNode
from llm_spans import attrs, named, raw_ids, tree
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pipeline.pipeline_support import digest, pipeline

import otel_agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal.names import default_registry
from otel_agentdiag.content import CapturedException
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.diagnostics.status import session_status
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.instrumentation.langchain import AgentDiagCallbackHandler, LangChainInstrumentor
from otel_agentdiag.redaction import IdHasher
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.storage import SpanStore

THREAD = "thread-SENTINEL-8c1d"
SECRET = "SENTINEL-TOOLERR-41b7"
FACTORIES = ("create_agent", "create_react_agent")
MODES = ("invoke", "ainvoke", "stream", "astream", "astream_events")
STREAMED = frozenset({"stream", "astream", "astream_events"})
NEVER = 3600.0

WEATHER_TREE = [
    (0, "invoke_agent weather_agent"),
    (1, "agent.iteration"),  # one model call and the tool calls it asked for (the tools step joins it)
    (2, "chat fake-chat-model"),
    (2, "execute_tool get_weather"),
    (1, "agent.iteration"),
    (2, "chat fake-chat-model"),
]
KINDS = {
    "invoke_agent weather_agent": "run",
    "agent.iteration": "iteration",
    "chat fake-chat-model": "llm",
    "execute_tool get_weather": "tool",
}


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


@tool
def failing_weather(city: str) -> str:
    """A weather tool whose service is down."""
    raise ValueError(f"weather service down {SECRET}")


@tool
def handled_weather(city: str) -> str:
    """A weather tool that reports its failure to the model (ToolException, handled)."""
    raise ToolException(f"weather service down {SECRET}")


handled_weather.handle_tool_error = True


# -- helpers ---------------------------------------------------------------------------------------------
@pytest.fixture
def instrumented(spans: Spans) -> Iterator[LangChainInstrumentor]:
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    yield instrumentor
    instrumentor.uninstrument()


def weather_model(*extra: Any, **kwargs: Any) -> ScriptedChatModel:
    """Asks for ``get_weather`` (call ``call_1``, 20 + 7 tokens), then answers (40 + 6 tokens)."""
    steps = extra or (
        tool_calls(("get_weather", {"city": "Paris"}), usage_metadata=usage(20, 7)),
        final_text("It is sunny in Paris.", usage_metadata=usage(40, 6)),
    )
    return ScriptedChatModel.from_steps(*steps, **kwargs)


def make_agent(factory: str, model: Any, tools: Any = None, name: str = "weather_agent") -> Any:
    tools = [get_weather] if tools is None else tools
    if factory == "create_agent":
        return create_agent(model, tools=tools, system_prompt="You answer weather questions.", name=name)
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LangGraphDeprecatedSinceV10: moved to langchain.agents.create_agent
        return create_react_agent(model, tools, prompt="You answer weather questions.", name=name)


def drive(agent: Any, mode: str, config: dict[str, Any] | None = None) -> list[Any]:
    """Run ``agent`` to its end in ``mode``; returns the final state's messages."""
    inputs = {"messages": [("user", "Weather in Paris?")]}
    config = config if config is not None else {"configurable": {"thread_id": THREAD}}
    if mode == "invoke":
        return list(agent.invoke(inputs, config)["messages"])
    if mode == "stream":
        state: Any = None
        for kind, chunk in agent.stream(inputs, config, stream_mode=["messages", "values"]):
            if kind == "values":
                state = chunk
        return list(state["messages"])

    async def main() -> list[Any]:
        if mode == "ainvoke":
            return list((await agent.ainvoke(inputs, config))["messages"])
        state: Any = None
        if mode == "astream":
            async for kind, chunk in agent.astream(inputs, config, stream_mode=["messages", "values"]):
                if kind == "values":
                    state = chunk
            return list(state["messages"])
        async for event in agent.astream_events(inputs, config, version="v2"):
            if event["event"] == "on_chain_end" and event["name"] == agent.name:
                state = event["data"]["output"]
        return list(state["messages"])

    return asyncio.run(main())


def parent_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None
    (parent,) = [s for s in spans if s.context is not None and s.context.span_id == span.parent.span_id]
    return parent


def leaf_usage(spans: Sequence[ReadableSpan]) -> tuple[int, int]:
    llm = [s for s in spans if attrs(s)["agentdiag.kind"] == "llm"]
    return (
        sum(attrs(s)["gen_ai.usage.input_tokens"] for s in llm),
        sum(attrs(s)["gen_ai.usage.output_tokens"] for s in llm),
    )


def rollup(span: ReadableSpan) -> tuple[int, int]:
    return attrs(span)["agentdiag.usage.input_tokens"], attrs(span)["agentdiag.usage.output_tokens"]


def message_usage(messages: Sequence[Any]) -> tuple[int, int]:
    """The framework's own total: the usage of every AIMessage of the final state."""
    answers = [m for m in messages if isinstance(m, AIMessage)]
    return (
        sum(m.usage_metadata["input_tokens"] for m in answers if m.usage_metadata),
        sum(m.usage_metadata["output_tokens"] for m in answers if m.usage_metadata),
    )


def dump(spans: Sequence[ReadableSpan]) -> str:
    """Everything a span exports besides ids: names, attributes, events."""
    return repr(
        [
            (s.name, attrs(s), [(e.name, dict(e.attributes or {})) for e in s.events], s.status.description)
            for s in spans
        ]
    )


# -- the tree --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("factory", FACTORIES)
def test_a_run_is_run_iterations_llm_and_tool_spans(
    spans: Spans, instrumented: LangChainInstrumentor, factory: str, mode: str
) -> None:
    framework_usage = UsageMetadataCallbackHandler()
    model = weather_model()
    config = {"configurable": {"thread_id": THREAD}, "callbacks": [framework_usage]}
    messages = drive(make_agent(factory, model), mode, config)
    assert messages[-1].content == "It is sunny in Paris."
    assert [call["streamed"] for call in model.calls] == [mode in STREAMED] * 2

    finished = spans.finished()
    assert tree(finished) == WEATHER_TREE
    assert {attrs(s)["agentdiag.kind"] for s in finished} == {"run", "iteration", "llm", "tool"}
    assert all(attrs(s)["agentdiag.kind"] == KINDS[s.name] for s in finished)
    assert len({s.context.trace_id for s in finished if s.context is not None}) == 1
    assert all(s.status.status_code is StatusCode.UNSET for s in finished)
    # The thread id is the conversation of every span, kept beside it for the redacting processor to hash.
    assert {raw_ids(s).get("gen_ai.conversation.id") for s in finished} == {THREAD}

    (run,) = named(finished, "invoke_agent weather_agent")
    assert run.parent is None
    assert attrs(run)["agentdiag.stop_reason"] == "completed"
    assert spans.started_with(run)["gen_ai.operation.name"] == "invoke_agent"
    assert spans.started_with(run)["gen_ai.agent.name"] == "weather_agent"  # sampling-relevant: at start
    iterations = named(finished, "agent.iteration")
    assert [attrs(s)["agentdiag.iteration.index"] for s in iterations] == [0, 1]  # one per model step, from 0
    assert all(s.end_time is not None and run.end_time is not None and s.end_time <= run.end_time for s in iterations)

    first, second = named(finished, "chat fake-chat-model")
    started = spans.started_with(first)
    assert started["gen_ai.operation.name"] == "chat"
    assert started["gen_ai.provider.name"] == "scriptedchatmodel"  # the model's ls_provider
    assert started["gen_ai.request.model"] == "fake-chat-model"
    assert attrs(first)["gen_ai.response.model"] == "fake-chat-model"
    assert attrs(first)["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)
    assert (attrs(first)["gen_ai.usage.input_tokens"], attrs(first)["gen_ai.usage.output_tokens"]) == (20, 7)
    assert (attrs(second)["gen_ai.usage.input_tokens"], attrs(second)["gen_ai.usage.output_tokens"]) == (40, 6)
    streamed = {"gen_ai.response.time_to_first_chunk" in attrs(s) for s in (first, second)}
    assert streamed == {mode in STREAMED}

    (tool_span,) = named(finished, "execute_tool get_weather")
    assert spans.started_with(tool_span)["gen_ai.tool.name"] == "get_weather"
    assert "gen_ai.tool.call.id" not in spans.started_with(tool_span)  # beside the span, from its start
    assert raw_ids(tool_span)["gen_ai.tool.call.id"] == "call_1"
    assert attrs(tool_span)["gen_ai.tool.type"] == "function"

    # Roll-ups: run == sum of the leaves == the framework's own totals; each iteration carries its own call.
    total = framework_usage.usage_metadata["fake-chat-model"]
    assert rollup(run) == leaf_usage(finished) == message_usage(messages) == (60, 13)
    assert (total["input_tokens"], total["output_tokens"]) == (60, 13)
    assert [rollup(iterations[0]), rollup(iterations[1])] == [(20, 7), (40, 6)]
    assert all("gen_ai.usage.input_tokens" not in attrs(s) for s in [run, *iterations])

    assert default_registry.is_tool("get_weather")  # bound to the model: declared
    assert default_registry.is_agent("weather_agent")
    assert instrumented.handler is not None and instrumented.handler.open_spans == 0


@pytest.mark.parametrize("factory", FACTORIES)
def test_parallel_tool_calls_share_one_iteration(spans: Spans, instrumented: object, factory: str) -> None:
    model = weather_model(
        tool_calls(
            ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Rome"})
        ),
        final_text("Sunny everywhere."),
    )
    drive(make_agent(factory, model), "invoke")
    finished = spans.finished()
    assert tree(finished) == [
        (0, "invoke_agent weather_agent"),
        (1, "agent.iteration"),
        (2, "chat fake-chat-model"),
        (2, "execute_tool get_weather"),
        (2, "execute_tool get_weather"),
        (2, "execute_tool get_weather"),
        (1, "agent.iteration"),
        (2, "chat fake-chat-model"),
    ]
    tools = named(finished, "execute_tool get_weather")
    assert sorted(raw_ids(s)["gen_ai.tool.call.id"] for s in tools) == ["call_1", "call_2", "call_3"]
    iteration = parent_of(tools[0], finished)
    assert all(parent_of(s, finished) is iteration for s in tools)
    assert iteration.end_time is not None
    assert iteration.end_time >= max(s.end_time or 0 for s in tools)  # ends when its last node run ends


def test_a_handler_passed_by_hand_traces_the_same_tree(spans: Spans) -> None:
    handler = AgentDiagCallbackHandler(tracer_provider=spans.provider)
    drive(make_agent("create_agent", weather_model()), "invoke", {"callbacks": [handler]})
    assert tree(spans.finished()) == WEATHER_TREE
    assert handler.open_spans == 0


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_spans_started_inside_a_tool_are_its_children(spans: Spans, instrumented: object, mode: str) -> None:
    @tool
    def get_weather(city: str) -> str:
        """The weather in a city (asks another model)."""
        with otel_agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
            call.record_response(input_tokens=3, output_tokens=2)
        return "sunny"

    manual.use_tracer_provider(spans.provider)  # the manual wrappers trace into the test's provider
    try:
        drive(make_agent("create_agent", weather_model(), tools=[get_weather]), mode)
    finally:
        manual.use_tracer_provider(None)
    finished = spans.finished()
    (inner,) = named(finished, "chat gpt-4o-mini")
    (tool_span,) = named(finished, "execute_tool get_weather")
    assert parent_of(inner, finished) is tool_span
    assert raw_ids(inner)["gen_ai.conversation.id"] == THREAD  # inherited from the active step
    assert parent_of(parent_of(tool_span, finished), finished).name == "invoke_agent weather_agent"
    assert (attrs(inner)["gen_ai.usage.input_tokens"], attrs(inner)["gen_ai.usage.output_tokens"]) == (3, 2)
    assert [s.name for s in spans.llm()].count("chat fake-chat-model") == 2  # the agent's own calls: unchanged


def test_an_agent_called_by_a_tool_is_a_run_inside_the_tool_span(spans: Spans, instrumented: object) -> None:
    inner_agent = make_agent("create_agent", weather_model(), name="inner_agent")

    @tool
    def ask_expert(question: str) -> str:
        """Ask the weather expert agent."""
        return str(inner_agent.invoke({"messages": [("user", question)]})["messages"][-1].content)

    outer_model = weather_model(
        tool_calls(("ask_expert", {"question": "Paris?"}), usage_metadata=usage(5, 1)),
        final_text("The expert says sunny.", usage_metadata=usage(7, 2)),
    )
    drive(make_agent("create_agent", outer_model, tools=[ask_expert], name="outer_agent"), "invoke")
    finished = spans.finished()
    assert tree(finished) == [
        (0, "invoke_agent outer_agent"),
        (1, "agent.iteration"),
        (2, "chat fake-chat-model"),
        (2, "execute_tool ask_expert"),
        *[(depth + 3, name.replace("weather_agent", "inner_agent")) for depth, name in WEATHER_TREE],
        (1, "agent.iteration"),
        (2, "chat fake-chat-model"),
    ]
    (outer,) = named(finished, "invoke_agent outer_agent")
    (inner,) = named(finished, "invoke_agent inner_agent")
    assert rollup(inner) == (60, 13)
    assert rollup(outer) == leaf_usage(finished) == (72, 16)
    assert attrs(inner)["agentdiag.stop_reason"] == attrs(outer)["agentdiag.stop_reason"] == "completed"
    assert default_registry.is_agent("inner_agent") and default_registry.is_tool("ask_expert")


def test_concurrent_runs_get_separate_trees(spans: Spans, instrumented: object) -> None:
    """Two ``ainvoke`` runs interleaved by ``asyncio.gather``: each tool waits until the other one has started,
    so both runs are provably in flight at the same time."""

    async def main() -> None:
        started = {"a": asyncio.Event(), "b": asyncio.Event()}

        def make_tool(me: str, other: str) -> Any:
            @tool(f"lookup_{me}")
            async def lookup(city: str) -> str:
                """Look the city up."""
                started[me].set()
                await started[other].wait()
                return me

            return lookup

        a = make_agent(
            "create_agent",
            weather_model(tool_calls(("lookup_a", {"city": "Paris"})), final_text("a", usage_metadata=usage(1, 1))),
            tools=[make_tool("a", "b")],
            name="agent_a",
        )
        b = make_agent(
            "create_react_agent",
            weather_model(tool_calls(("lookup_b", {"city": "Oslo"})), final_text("b", usage_metadata=usage(2, 2))),
            tools=[make_tool("b", "a")],
            name="agent_b",
        )
        await asyncio.gather(
            a.ainvoke({"messages": [("user", "a")]}, {"configurable": {"thread_id": "thread-a"}}),
            b.ainvoke({"messages": [("user", "b")]}, {"configurable": {"thread_id": "thread-b"}}),
        )

    asyncio.run(main())
    finished = spans.finished()
    traces: dict[int, list[ReadableSpan]] = {}
    for span in finished:
        assert span.context is not None
        traces.setdefault(span.context.trace_id, []).append(span)
    assert len(traces) == 2
    for trace_spans in traces.values():
        (run,) = [s for s in trace_spans if s.parent is None]
        me = attrs(run)["gen_ai.agent.name"][-1]
        assert tree(trace_spans) == [
            (0, f"invoke_agent agent_{me}"),
            (1, "agent.iteration"),
            (2, "chat fake-chat-model"),
            (2, f"execute_tool lookup_{me}"),
            (1, "agent.iteration"),
            (2, "chat fake-chat-model"),
        ]
        assert {raw_ids(s)["gen_ai.conversation.id"] for s in trace_spans} == {f"thread-{me}"}
        expected = (10 + 1, 5 + 1) if me == "a" else (10 + 2, 5 + 2)
        assert rollup(run) == leaf_usage(trace_spans) == expected


# -- errors and stop reasons -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("factory", "tools", "error_type"),
    [
        ("create_agent", [handled_weather], "langchain.tool_error"),
        ("create_react_agent", [handled_weather], "langchain.tool_error"),
        ("create_react_agent", "tool_node", "ValueError"),
    ],
)
def test_a_tool_error_fed_back_to_the_model_fails_the_tool_span_only(
    spans: Spans, instrumented: object, factory: str, tools: Any, error_type: str
) -> None:
    name = "failing_weather" if tools == "tool_node" else "handled_weather"
    if tools == "tool_node":
        tools = ToolNode([failing_weather], handle_tool_errors=True)
    model = weather_model(tool_calls((name, {"city": "Paris"})), final_text("The service is down."))
    messages = drive(make_agent(factory, model, tools=tools), "invoke")
    assert messages[-1].content == "The service is down."
    finished = spans.finished()
    assert [n for _, n in tree(finished)] == [
        "invoke_agent weather_agent",
        "agent.iteration",
        "chat fake-chat-model",
        f"execute_tool {name}",
        "agent.iteration",
        "chat fake-chat-model",
    ]
    (tool_span,) = named(finished, f"execute_tool {name}")
    assert tool_span.status.status_code is StatusCode.ERROR
    assert tool_span.status.description is None
    assert attrs(tool_span)["error.type"] == error_type
    assert [dict(e.attributes or {}) for e in tool_span.events] == [{"exception.type": error_type}]
    (run,) = named(finished, "invoke_agent weather_agent")
    assert run.status.status_code is StatusCode.UNSET
    assert attrs(run)["agentdiag.stop_reason"] == "completed"
    assert [s.status.status_code for s in named(finished, "chat fake-chat-model")] == [StatusCode.UNSET] * 2
    assert [s.status.status_code for s in named(finished, "agent.iteration")] == [StatusCode.UNSET] * 2
    assert SECRET not in dump(finished)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream"])
@pytest.mark.parametrize("factory", FACTORIES)
def test_a_fatal_tool_error_fails_the_run(spans: Spans, instrumented: object, factory: str, mode: str) -> None:
    model = weather_model(tool_calls(("failing_weather", {"city": "Paris"})), final_text("never"))
    with pytest.raises(ValueError, match=SECRET):  # the user's exception, unchanged
        drive(make_agent(factory, model, tools=[failing_weather]), mode)
    finished = spans.finished()
    assert tree(finished) == [
        (0, "invoke_agent weather_agent"),
        (1, "agent.iteration"),
        (2, "chat fake-chat-model"),
        (2, "execute_tool failing_weather"),
    ]
    (run,) = named(finished, "invoke_agent weather_agent")
    (tool_span,) = named(finished, "execute_tool failing_weather")
    failed_iteration = parent_of(tool_span, finished)
    for span in (run, tool_span, failed_iteration):
        assert span.status.status_code is StatusCode.ERROR
        assert attrs(span)["error.type"] == "ValueError"
    assert attrs(run)["agentdiag.stop_reason"] == "error"
    assert rollup(run) == (10, 5)  # the one model call that answered
    assert SECRET not in dump(finished)
    assert instrumented.handler.open_spans == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("factory", FACTORIES)
def test_a_model_error_fails_the_llm_span_and_the_run(spans: Spans, instrumented: object, factory: str) -> None:
    model = weather_model(ConnectionError(f"upstream 503 {SECRET}"))
    with pytest.raises(ConnectionError):
        drive(make_agent(factory, model), "ainvoke")
    finished = spans.finished()
    assert tree(finished) == [(0, "invoke_agent weather_agent"), (1, "agent.iteration"), (2, "chat fake-chat-model")]
    assert all(s.status.status_code is StatusCode.ERROR for s in finished)
    assert {attrs(s)["error.type"] for s in finished} == {"ConnectionError"}
    (llm,) = named(finished, "chat fake-chat-model")
    assert "gen_ai.usage.input_tokens" not in attrs(llm)
    (run,) = named(finished, "invoke_agent weather_agent")
    assert attrs(run)["agentdiag.stop_reason"] == "error"
    assert "agentdiag.usage.input_tokens" not in attrs(run)  # nothing reported: no roll-up
    assert SECRET not in dump(finished)


@pytest.mark.parametrize("mode", ["invoke", "astream"])
@pytest.mark.parametrize("factory", FACTORIES)
def test_the_recursion_limit_is_the_runs_stop_reason(
    spans: Spans, instrumented: object, factory: str, mode: str
) -> None:
    model = weather_model(tool_calls(("get_weather", {"city": "Paris"})), repeat_last=True)
    with pytest.raises(GraphRecursionError):
        drive(make_agent(factory, model), mode, {"recursion_limit": 3})
    finished = spans.finished()
    assert tree(finished) == [
        (0, "invoke_agent weather_agent"),
        (1, "agent.iteration"),
        (2, "chat fake-chat-model"),
        (2, "execute_tool get_weather"),
        (1, "agent.iteration"),
        (2, "chat fake-chat-model"),
    ]
    (run,) = named(finished, "invoke_agent weather_agent")
    assert run.status.status_code is StatusCode.ERROR
    assert attrs(run)["error.type"] == "langgraph.errors.GraphRecursionError"
    assert attrs(run)["agentdiag.stop_reason"] == "recursion_limit"
    assert all(s.status.status_code is StatusCode.UNSET for s in finished if s is not run)  # every step completed
    assert rollup(run) == (20, 10)


def test_a_cancelled_run_stops_cancelled(spans: Spans, instrumented: object) -> None:
    async def main() -> None:
        entered = asyncio.Event()

        @tool
        async def get_weather(city: str) -> str:
            """The weather (never answers)."""
            entered.set()
            await asyncio.Event().wait()
            return "never"

        agent = make_agent("create_agent", weather_model(), tools=[get_weather])
        task = asyncio.ensure_future(drive_async(agent))
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def drive_async(agent: Any) -> Any:
        return await agent.ainvoke({"messages": [("user", "Weather?")]}, {"configurable": {"thread_id": THREAD}})

    asyncio.run(main())
    finished = spans.finished()
    assert [n for _, n in tree(finished)] == [n for _, n in WEATHER_TREE[:4]]
    (run,) = named(finished, "invoke_agent weather_agent")
    assert attrs(run)["agentdiag.stop_reason"] == "cancelled"
    assert attrs(run)["error.type"] == "asyncio.CancelledError"
    (tool_span,) = named(finished, "execute_tool get_weather")
    assert attrs(tool_span)["error.type"] == "asyncio.CancelledError"


def test_a_broken_hook_call_never_reaches_langchain(spans: Spans, caplog: pytest.LogCaptureFixture) -> None:
    handler = AgentDiagCallbackHandler(tracer_provider=spans.provider)
    run_id, child = uuid.uuid4(), uuid.uuid4()
    handler.on_chain_start(None, {}, run_id=run_id, metadata={"langgraph_step": "x"}, name=5)  # type: ignore[arg-type]
    handler.on_chat_model_start({}, [], run_id=child, parent_run_id=run_id, invocation_params="x")
    handler.on_llm_new_token("", run_id=uuid.uuid4())
    handler.on_llm_end(_Hostile(), run_id=child)  # type: ignore[arg-type]
    handler.on_tool_end(None, run_id=uuid.uuid4())
    handler.on_chain_end(None, run_id=uuid.uuid4())  # type: ignore[arg-type]
    handler.on_chain_error(RuntimeError(SECRET), run_id=run_id)
    finished = spans.finished()
    assert [s.name for s in finished] == ["chat", "invoke_agent"]  # no model name, no agent name: still spans
    assert attrs(finished[1])["agentdiag.stop_reason"] == "error"
    assert "RuntimeError" in caplog.text  # logged by type
    assert SECRET not in caplog.text and SECRET not in dump(finished)
    assert handler.open_spans == 0


class _Hostile:
    """An LLM result whose every read fails."""

    @property
    def generations(self) -> Any:
        raise RuntimeError(SECRET)


# -- instrumentor lifecycle ------------------------------------------------------------------------------
def _our_hooks() -> list[Any]:
    return [hook for hook in lc_tracer_context._configure_hooks if hook[0].name == "otel_agentdiag_langchain_handler"]


def test_instrument_twice_and_passing_the_handler_too_trace_each_step_once(spans: Spans) -> None:
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    instrumentor.instrument(tracer_provider=spans.provider)
    try:
        assert len(_our_hooks()) == 1
        drive(make_agent("create_react_agent", weather_model()), "invoke", {"callbacks": [instrumentor.handler]})
    finally:
        instrumentor.uninstrument()
    assert tree(spans.finished()) == WEATHER_TREE


def test_uninstrument_removes_the_handler(spans: Spans) -> None:
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    drive(make_agent("create_agent", weather_model()), "invoke")
    assert len(spans.finished()) == len(WEATHER_TREE)
    instrumentor.uninstrument()
    assert _our_hooks() == [] and instrumentor.handler is None
    drive(make_agent("create_agent", weather_model()), "ainvoke")
    assert len(spans.finished()) == len(WEATHER_TREE)  # no new span


def test_uninstrument_mid_run_ends_the_open_spans(spans: Spans) -> None:
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)

    @tool
    def get_weather(city: str) -> str:
        """The weather (removes the instrumentation while it runs)."""
        instrumentor.uninstrument()
        return "sunny"

    messages = drive(make_agent("create_agent", weather_model(), tools=[get_weather]), "invoke")
    assert messages[-1].content == "It is sunny in Paris."  # the run is unaffected
    finished = spans.finished()
    assert tree(finished) == WEATHER_TREE[:4]
    by_name = {s.name: s for s in finished}
    assert attrs(by_name["chat fake-chat-model"]).get("error.type") is None  # ended before: normally
    # The tool ran in the model call's iteration, still open when the instrumentation went away.
    for name in ("invoke_agent weather_agent", "execute_tool get_weather", "agent.iteration"):
        assert attrs(by_name[name])["error.type"] == "agentdiag.uninstrumented"


# -- redaction: the strict policy, as exported ----------------------------------------------------------
@pytest.mark.parametrize(("factory", "mode"), [("create_agent", "invoke"), ("create_react_agent", "astream")])
def test_the_strict_policy_hashes_the_thread_id_and_the_call_ids(factory: str, mode: str) -> None:
    memory = InMemorySpanExporter()
    with pipeline(memory, policy=STRICT, schedule_delay_s=NEVER) as pipe:
        instrumentor = LangChainInstrumentor()
        instrumentor.instrument()  # no provider: the pipeline's (as configure() would install it)
        try:
            drive(make_agent(factory, weather_model()), mode)
        finally:
            instrumentor.uninstrument()
        assert pipe.batcher.force_flush(30_000)
    exported = list(memory.get_finished_spans())
    assert tree(exported) == WEATHER_TREE  # declared names survive
    assert THREAD not in dump(exported)
    assert {attrs(s)["gen_ai.conversation.id"] for s in exported} == {digest(THREAD)}
    (tool_span,) = named(exported, "execute_tool get_weather")
    call_id = attrs(tool_span)["gen_ai.tool.call.id"]
    assert call_id.startswith("hmac-sha256:") and "call_1" not in call_id
    (run,) = named(exported, "invoke_agent weather_agent")
    assert rollup(run) == leaf_usage(exported) == (60, 13)


@pytest.mark.parametrize("factory", FACTORIES)
def test_an_invented_tool_name_is_exported_as_the_placeholder(factory: str) -> None:
    """A tool the agent does not have runs no tool (LangGraph's ToolNode answers with an error ToolMessage and
    fires no tool hooks): the call still gets a failed tool span, and its made-up name never leaves."""
    invented = f"summon_dragon_{factory}"
    memory = InMemorySpanExporter()
    with pipeline(memory, policy=STRICT, schedule_delay_s=NEVER) as pipe:
        instrumentor = LangChainInstrumentor()
        instrumentor.instrument()
        try:
            model = weather_model(tool_calls((invented, {"size": "large"})), final_text("No dragon."))
            messages = drive(make_agent(factory, model), "invoke")
        finally:
            instrumentor.uninstrument()
        assert pipe.batcher.force_flush(30_000)
    assert messages[-2].status == "error"  # what the model was told
    exported = list(memory.get_finished_spans())
    assert tree(exported) == [
        (0, "invoke_agent weather_agent"),
        (1, "agent.iteration"),
        (2, "chat fake-chat-model"),
        (2, "execute_tool _OTHER"),
        (1, "agent.iteration"),
        (2, "chat fake-chat-model"),
    ]
    (tool_span,) = named(exported, "execute_tool _OTHER")
    assert attrs(tool_span)["gen_ai.tool.name"] == "_OTHER"
    assert attrs(tool_span)["error.type"] == "langchain.tool_not_found"
    assert attrs(tool_span)["gen_ai.tool.call.id"].startswith("hmac-sha256:")
    assert tool_span.status.status_code is StatusCode.ERROR
    (run,) = named(exported, "invoke_agent weather_agent")
    assert attrs(run)["agentdiag.stop_reason"] == "completed"
    assert not default_registry.is_tool(invented)
    assert invented not in dump(exported)


# -- through configure() into the store -----------------------------------------------------------------
def test_the_store_holds_a_recovered_tool_error_with_hashed_ids(tmp_path: Path) -> None:
    store, key = tmp_path / "traces.db", b"0ac8bea8f297c1a71fad03bac4fd1ad8bd7df555ff953b826f96b366e0930a6b"
    diag = otel_agentdiag.configure(
        service_name="langchain-test", store=store, hash_key=key, set_global=False, local_policy="strict"
    )
    LangChainInstrumentor().instrument()
    try:
        model = weather_model(
            tool_calls(("handled_weather", {"city": SECRET}, "call_1")),
            tool_calls(("get_weather", {"city": "Paris"}, "call_2")),
            final_text(f"Sunny {SECRET}"),
        )
        drive(make_agent("create_agent", model, tools=[handled_weather, get_weather]), "astream")
    finally:
        LangChainInstrumentor().uninstrument()
        diag.shutdown()
    session = IdHasher(key).digest("conversation", THREAD)
    with SpanStore(store, create=False) as reader:
        assert session_receipt(reader, session).status == "valid"
        status = session_status(reader, session, as_of_ns=None)
        stored = reader.session_spans(session)
    assert status.counts["runs"] == 1
    assert status.counts["tool_calls"] == 2
    assert (status.errors, status.recovered) == (1, 1)
    tools = sorted(s.name for s in stored if s.kind == "tool")
    assert tools == ["execute_tool get_weather", "execute_tool handled_weather"]
    assert [s.attributes["agentdiag.stop_reason"] for s in stored if s.kind == "run"] == ["completed"]
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        content = "\n".join(conn.iterdump())
    finally:
        conn.close()
    assert "invoke_agent weather_agent" in content  # the search can find what is allowed
    assert THREAD not in content and SECRET not in content and "call_1" not in content


# -- content capture (configure(capture_content=True)) -----------------------------------------------------
INPUT, OUTPUT, TOOLS = sc.CONTENT_INPUT_MESSAGES, sc.CONTENT_OUTPUT_MESSAGES, sc.CONTENT_TOOL_DEFINITIONS
ARGUMENTS, RESULT = sc.CONTENT_TOOL_ARGUMENTS, sc.CONTENT_TOOL_RESULT
SYSTEM_PROMPT = "You answer weather questions."


@pytest.fixture
def sink(content_sink: RecordingSink) -> RecordingSink:  # noqa: F811 - the fixture imported above
    """Content capture on, into a :class:`RecordingSink`."""
    return content_sink


def captured_once(sink: RecordingSink) -> bool:
    """Every (span, role) was captured once (the last capture wins in the store, but there is no second)."""
    keys = [(span_id, role) for span_id, _, role, _ in sink.records]
    return len(keys) == len(set(keys))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("factory", FACTORIES)
def test_content_of_a_run_per_span(
    spans: Spans, instrumented: object, sink: RecordingSink, factory: str, mode: str
) -> None:
    model = weather_model()
    messages = drive(make_agent(factory, model), mode)
    finished = spans.finished()
    (run,) = named(finished, "invoke_agent weather_agent")
    first, second = named(finished, "chat fake-chat-model")
    (tool_span,) = named(finished, "execute_tool get_weather")
    # The run: the graph's inputs and outputs, as LangChain passed them.
    assert sink.for_span(run)[INPUT] == {"messages": [("user", "Weather in Paris?")]}
    assert set(sink.for_span(run)) == {INPUT, OUTPUT}
    final_state = sink.for_span(run)[OUTPUT]["messages"]
    assert [m["content"] for m in final_state] == [m.content for m in messages]
    assert all(sink.for_span(s) == {} for s in named(finished, "agent.iteration"))
    # The model calls: the messages sent (the system prompt among them), the bound tools, the answer.
    one, two = sink.for_span(first), sink.for_span(second)
    assert set(one) == set(two) == {INPUT, OUTPUT, TOOLS}
    assert [(m["type"], m["content"]) for m in one[INPUT]] == [
        ("system", SYSTEM_PROMPT),
        ("human", "Weather in Paris?"),
    ]
    assert one[TOOLS] == two[TOOLS] == model.bound_tools
    (answer,) = one[OUTPUT]
    assert [(c["name"], c["args"], c["id"]) for c in answer["tool_calls"]] == [
        ("get_weather", {"city": "Paris"}, "call_1")
    ]
    assert [m["type"] for m in two[INPUT]] == ["system", "human", "ai", "tool"]
    assert [m["content"] for m in two[OUTPUT]] == ["It is sunny in Paris."]
    # The tool: the arguments it was called with, and what it returned (the ToolMessage LangChain made of it).
    tool_content = sink.for_span(tool_span)
    assert set(tool_content) == {ARGUMENTS, RESULT}
    assert tool_content[ARGUMENTS] == {"city": "Paris"}
    result = tool_content[RESULT]
    assert (result["type"], result["content"], result["tool_call_id"]) == ("tool", "Sunny in Paris", "call_1")
    assert captured_once(sink)  # one answer per model call, also when streamed


def test_content_of_an_agent_called_by_a_tool_is_on_its_own_run(
    spans: Spans, instrumented: object, sink: RecordingSink
) -> None:
    inner_agent = make_agent("create_agent", weather_model(), name="inner_agent")

    @tool
    def ask_expert(question: str) -> str:
        """Ask the weather expert agent."""
        return str(inner_agent.invoke({"messages": [("user", question)]})["messages"][-1].content)

    outer_model = weather_model(tool_calls(("ask_expert", {"question": "Paris?"})), final_text("Sunny, says he."))
    drive(make_agent("create_agent", outer_model, tools=[ask_expert], name="outer_agent"), "invoke")
    finished = spans.finished()
    (inner,) = named(finished, "invoke_agent inner_agent")
    (ask,) = named(finished, "execute_tool ask_expert")
    assert sink.for_span(inner)[INPUT] == {"messages": [("user", "Paris?")]}
    assert sink.for_span(ask)[ARGUMENTS] == {"question": "Paris?"}
    assert sink.for_span(ask)[RESULT]["content"] == "It is sunny in Paris."


def test_concurrent_runs_capture_onto_their_own_spans(spans: Spans, instrumented: object, sink: RecordingSink) -> None:
    async def one(city: str) -> Any:
        model = weather_model(tool_calls(("get_weather", {"city": city})), final_text(city))
        return await make_agent("create_agent", model).ainvoke({"messages": [("user", city)]})

    async def main() -> None:
        await asyncio.gather(one("Paris"), one("Oslo"), one("Lima"))

    asyncio.run(main())
    tools = named(spans.finished(), "execute_tool get_weather")
    assert len(tools) == 3
    for span in tools:
        content = sink.for_span(span)
        assert content[RESULT]["content"] == f"Sunny in {content[ARGUMENTS]['city']}"


@pytest.mark.parametrize("factory", FACTORIES)
def test_a_tool_that_raises_has_the_exception_as_its_result(
    spans: Spans, instrumented: object, sink: RecordingSink, factory: str
) -> None:
    model = weather_model(tool_calls(("failing_weather", {"city": "Paris"})), final_text("never"))
    with pytest.raises(ValueError, match=SECRET):
        drive(make_agent(factory, model, tools=[failing_weather]), "invoke")
    finished = spans.finished()
    (tool_span,) = named(finished, "execute_tool failing_weather")
    result = sink.for_span(tool_span)[RESULT]
    assert isinstance(result, CapturedException)
    assert (result.type, result.message) == ("ValueError", f"weather service down {SECRET}")
    assert SECRET not in dump(finished)


@pytest.mark.parametrize("tools", ["tool_node", "handled"])
def test_a_tool_error_fed_back_to_the_model_is_its_result(
    spans: Spans, instrumented: object, sink: RecordingSink, tools: str
) -> None:
    name = "failing_weather" if tools == "tool_node" else "handled_weather"
    agent_tools: Any = (
        ToolNode([failing_weather], handle_tool_errors=True) if tools == "tool_node" else [handled_weather]
    )
    model = weather_model(tool_calls((name, {"city": "Paris"})), final_text("The service is down."))
    drive(make_agent("create_react_agent", model, tools=agent_tools), "invoke")
    finished = spans.finished()
    (tool_span,) = named(finished, f"execute_tool {name}")
    result = sink.for_span(tool_span)[RESULT]
    if tools == "tool_node":  # LangChain reports the exception; ToolNode then answers the model itself
        assert isinstance(result, CapturedException) and result.type == "ValueError"
    else:  # the tool answered with its error: a ToolMessage with status "error"
        assert (result["status"], result["content"]) == ("error", f"weather service down {SECRET}")
    assert sink.for_span(tool_span)[ARGUMENTS] == {"city": "Paris"}
    assert SECRET not in dump(finished)


def test_a_tool_call_answered_without_a_tool_run_has_the_error_message_as_its_result(
    spans: Spans, instrumented: object, sink: RecordingSink
) -> None:
    model = weather_model(tool_calls(("summon_dragon", {"size": "large"})), final_text("No dragon."))
    messages = drive(make_agent("create_agent", model), "invoke")
    (tool_span,) = named(spans.finished(), "execute_tool summon_dragon")
    result = sink.for_span(tool_span)[RESULT]
    assert (result["status"], result["content"]) == ("error", messages[-2].content)


def test_content_of_a_completion_model_is_its_prompts_and_texts(spans: Spans, sink: RecordingSink) -> None:
    handler = AgentDiagCallbackHandler(tracer_provider=spans.provider)
    llm = FakeListLLM(responses=["Sunny."])
    assert llm.invoke("Weather in Paris?", config={"callbacks": [handler]}) == "Sunny."
    (span,) = spans.finished()
    assert span.name.startswith("text_completion")
    assert sink.for_span(span) == {INPUT: ["Weather in Paris?"], OUTPUT: ["Sunny."]}


def test_content_of_a_call_with_several_prompts_keeps_them_apart(spans: Spans, sink: RecordingSink) -> None:
    handler = AgentDiagCallbackHandler(tracer_provider=spans.provider)
    run_id = uuid.uuid4()
    prompts = [[HumanMessage("Paris?")], [HumanMessage("Oslo?")]]
    handler.on_chat_model_start({}, prompts, run_id=run_id, invocation_params={"model": "m"})
    prompts[0].append(HumanMessage("changed afterwards"))  # the capture is a snapshot
    answers: list[list[Any]] = [
        [ChatGeneration(message=AIMessage("Sunny."))],
        [ChatGeneration(message=AIMessage("Snowy."))],
    ]
    handler.on_llm_end(LLMResult(generations=answers), run_id=run_id)
    (span,) = spans.finished()
    content = sink.for_span(span)
    assert [[m["content"] for m in prompt] for prompt in content[INPUT]] == [["Paris?"], ["Oslo?"]]
    assert [[m["content"] for m in answer] for answer in content[OUTPUT]] == [["Sunny."], ["Snowy."]]
    assert TOOLS not in content  # no tools were bound


def test_content_never_reaches_a_span(spans: Spans, instrumented: object, sink: RecordingSink) -> None:
    prompt, system, argument, result = (
        "SENTINEL-LC-PROMPT-51c2",
        "SENTINEL-LC-SYSTEM-0be4",
        "SENTINEL-LC-ARG-9d17",
        "SENTINEL-LC-RESULT-63fa",
    )

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny {result}"

    model = weather_model(tool_calls(("get_weather", {"city": argument})), final_text("Sunny."))
    agent = create_agent(model, tools=[get_weather], system_prompt=system, name="weather_agent")
    agent.invoke({"messages": [("user", prompt)]}, {"configurable": {"thread_id": THREAD}})
    captured, exported = repr(sink.records), dump(spans.finished())
    for sentinel in (prompt, system, argument, result):
        assert sentinel in captured, sentinel
        assert sentinel not in exported, sentinel


def _shape(spans: Spans) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Every finished span's name and attributes (but the time to the first chunk), in start order."""
    timing = "gen_ai.response.time_to_first_chunk"
    return [
        (s.name, sorted((k, v) for k, v in attrs(s).items() if k != timing))
        for s in sorted(spans.finished(), key=lambda s: s.start_time or 0)
    ]


@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_capture_off_captures_nothing_and_capture_on_changes_no_span(
    spans: Spans, instrumented: object, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(_content, "capture", lambda *args: calls.append(args))
    drive(make_agent("create_agent", weather_model()), mode)
    assert calls == []  # off: not even a call into the seam
    off = _shape(spans)
    spans.exporter.clear()
    monkeypatch.undo()
    recording = RecordingSink()
    _content.install(recording)
    try:
        drive(make_agent("create_agent", weather_model()), mode)
    finally:
        _content.uninstall(recording)
    assert recording.records
    assert _shape(spans) == off


class _BrokenSink:
    def record(self, span: Any, role: str, value: Any) -> None:
        raise RuntimeError(f"sink failure {SECRET}")


@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_a_failing_sink_never_reaches_the_agent(
    spans: Spans, instrumented: object, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    broken = _BrokenSink()
    _content.install(broken)
    try:
        messages = drive(make_agent("create_agent", weather_model()), mode)
    finally:
        _content.uninstall(broken)
    assert messages[-1].content == "It is sunny in Paris."
    assert tree(spans.finished()) == WEATHER_TREE
    assert "RuntimeError" in caplog.text
    assert SECRET not in caplog.text
