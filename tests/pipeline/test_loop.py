"""The loop rebuild (``pipeline/loop.py``) on the trace shapes the real peers emit.

Each shape below is one agent run (two model calls, two tool calls of which one fails, as in
``tests/fakes``' scripted answer) as the named instrumentation reported it when it was run against the real package
(kinds, names, scopes and nesting as captured; content keys left out). ``plan_trace`` must make of each one run,
one iteration per model call and the tool calls it asked for, and one span per call.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from otel_agentdiag import semconv as sc
from otel_agentdiag.pipeline.adapters import map_span
from otel_agentdiag.pipeline.loop import plan_trace

TRACE = 0xABC


@dataclass
class S:
    """A span of a shape: name, scope, attributes, children; ``error`` marks a failed call."""

    name: str
    attributes: dict[str, Any]
    children: list[S] = field(default_factory=list)
    scope: str = "peer"
    error: bool = False


def OI(kind: str, name: str, *children: S, scope: str = "openinference.instrumentation.x", **attrs: Any) -> S:
    return S(name, {"openinference.span.kind": kind, **attrs}, list(children), scope)


def GENAI(operation: str, name: str, *children: S, **attrs: Any) -> S:
    return S(name, {"gen_ai.operation.name": operation, **attrs}, list(children))


def TL(kind: str, name: str, *children: S, **attrs: Any) -> S:
    return S(name, {"traceloop.span.kind": kind, **attrs}, list(children))


LLM = {"llm.token_count.prompt": 31, "llm.token_count.completion": 12}


def failing(span: S) -> S:
    span.error = True
    return span


def build(root: S) -> list[ReadableSpan]:
    """Ended spans, each child starting after its previous sibling ended (times from a counter)."""
    ids = itertools.count(1)
    clock = itertools.count(1_000)
    out: list[ReadableSpan] = []

    def visit(node: S, parent: SpanContext | None) -> None:
        ctx = SpanContext(TRACE, next(ids), False, TraceFlags(1))
        start = next(clock)
        for child in node.children:
            visit(child, ctx)
        out.append(
            ReadableSpan(
                name=node.name,
                context=ctx,
                parent=parent,
                attributes=node.attributes,
                start_time=start,
                end_time=next(clock),
                status=Status(StatusCode.ERROR if node.error else StatusCode.UNSET),
                instrumentation_scope=InstrumentationScope(node.scope),
            )
        )

    visit(root, None)
    return out


def kind_of(span: ReadableSpan, demoted: dict[int, str]) -> str:
    if span.context.span_id in demoted:
        return "step"
    own = (span.attributes or {}).get(sc.AGENTDIAG_KIND)
    if own is not None:
        return str(own)
    scope = span.instrumentation_scope
    mapped = map_span(span.attributes or {}, span.name, scope.name if scope else None)
    return "other" if mapped is None else mapped.kind


def summary(spans: list[ReadableSpan]) -> tuple[int, list[list[str]]]:
    """(runs, per iteration in order: its calls as `kind:name`), after the plan."""
    plan = plan_trace(spans)
    everything = [*spans, *plan.iterations]
    parents = {s.context.span_id: (plan.parents.get(s.context.span_id) or s.parent) for s in everything}
    by_id = {s.context.span_id: s for s in everything}
    kinds = {s.context.span_id: kind_of(s, plan.demoted) for s in everything}
    runs = sum(1 for k in kinds.values() if k == "run")

    def iteration_of(span: ReadableSpan) -> ReadableSpan | None:
        parent = parents[span.context.span_id]
        while parent is not None:
            node = by_id[parent.span_id]
            if kinds[node.context.span_id] == "iteration":
                return node
            if kinds[node.context.span_id] == "run":
                return None
            parent = parents[node.context.span_id]
        return None

    iterations = sorted((s for s in everything if kinds[s.context.span_id] == "iteration"), key=lambda s: s.start_time)
    turns: list[list[str]] = []
    for it in iterations:
        calls = [
            f"{kinds[s.context.span_id]}:{s.name}"
            for s in spans
            if kinds[s.context.span_id] in ("llm", "tool") and iteration_of(s) is it
        ]
        turns.append(sorted(calls))
    return runs, turns


AG2 = "opentelemetry.instrumentation.ag2"
SHAPES: dict[str, S] = {
    "agno (OpenInference)": OI(
        "AGENT",
        "weather_agent.run",
        OI("LLM", "OpenAIChat.invoke", **LLM),
        OI("TOOL", "get_weather", **{"tool.name": "get_weather"}),
        failing(OI("TOOL", "lookup_city", **{"tool.name": "lookup_city"})),
        OI("LLM", "OpenAIChat.invoke", **LLM),
    ),
    "agno + OpenInference's OpenAI": OI(
        "AGENT",
        "weather_agent.run",
        OI("LLM", "OpenAIChat.invoke", OI("LLM", "ChatCompletion", **LLM), **LLM),
        OI("TOOL", "get_weather"),
        failing(OI("TOOL", "lookup_city")),
        OI("LLM", "OpenAIChat.invoke", OI("LLM", "ChatCompletion", **LLM), **LLM),
    ),
    "crewai (OpenInference)": OI(
        "CHAIN",
        "Crew_1.kickoff",
        OI(
            "AGENT",
            "weather_agent._execute_core",
            OI("LLM", "ChatCompletion", **LLM),
            OI("TOOL", "get_weather.run"),
            failing(OI("TOOL", "lookup_city.run")),
            OI("LLM", "ChatCompletion", **LLM),
        ),
    ),
    "autogen (autogen-core + OpenInference)": GENAI(
        "invoke_agent",
        "invoke_agent weather_agent",
        OI(
            "AGENT",
            "weather_agent.on_messages_stream",
            OI("LLM", "OpenAIChatCompletionClient.create", **LLM),
            OI("TOOL", "weather_agent.get_weather", GENAI("execute_tool", "execute_tool get_weather")),
            OI(
                "TOOL",
                "weather_agent.lookup_city",
                failing(GENAI("execute_tool", "execute_tool lookup_city", **{"error.type": "ValueError"})),
            ),
            OI("LLM", "OpenAIChatCompletionClient.create", **LLM),
        ),
        **{"gen_ai.agent.name": "weather_agent"},
    ),
    "langchain (OpenLLMetry)": GENAI(
        "invoke_agent",
        "invoke_agent weather_agent",
        TL(
            "workflow",
            "weather_agent.workflow",
            TL("task", "execute_task before_model"),
            TL("task", "execute_task model", GENAI("chat", "ChatOpenAI.chat", **{"gen_ai.usage.input_tokens": 31})),
            TL("task", "execute_task tools", GENAI("execute_tool", "execute_tool get_weather")),
            TL("task", "execute_task tools", failing(GENAI("execute_tool", "execute_tool lookup_city"))),
            TL("task", "execute_task model", GENAI("chat", "ChatOpenAI.chat", **{"gen_ai.usage.input_tokens": 57})),
            **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather_agent"},
        ),
        **{"gen_ai.agent.name": "weather_agent"},
    ),
    "openai agents sdk (OpenInference)": OI(
        "AGENT",
        "Agent workflow",
        OI(
            "CHAIN",
            "Agent workflow",
            OI(
                "AGENT",
                "weather_agent",
                OI(
                    "CHAIN",
                    "turn",
                    OI("LLM", "generation", scope="openinference.instrumentation.openai_agents", **LLM),
                    OI("TOOL", "get_weather", scope="openinference.instrumentation.openai_agents"),
                    failing(OI("TOOL", "lookup_city", scope="openinference.instrumentation.openai_agents")),
                    scope="openinference.instrumentation.openai_agents",
                ),
                OI(
                    "CHAIN",
                    "turn",
                    OI("LLM", "generation", scope="openinference.instrumentation.openai_agents", **LLM),
                    scope="openinference.instrumentation.openai_agents",
                ),
                scope="openinference.instrumentation.openai_agents",
                **{"agent.name": "weather_agent"},
            ),
            scope="openinference.instrumentation.openai_agents",
        ),
        scope="openinference.instrumentation.openai_agents",
    ),
    "semantic kernel (its own output)": GENAI(
        "invoke_agent",
        "invoke_agent weather_agent",
        S(
            "AutoFunctionInvocationLoop",
            {},
            [
                GENAI("chat", "chat gpt-4o-mini", **{"gen_ai.usage.input_tokens": 31}),
                GENAI("execute_tool", "execute_tool WeatherPlugin-get_weather"),
                failing(GENAI("execute_tool", "execute_tool WeatherPlugin-lookup_city")),
                GENAI("chat", "chat gpt-4o-mini", **{"gen_ai.usage.input_tokens": 57}),
            ],
        ),
        **{"gen_ai.agent.name": "weather_agent"},
    ),
    "ag2 (its own output)": S(
        "conversation user_proxy",
        {"gen_ai.operation.name": "conversation", "gen_ai.agent.name": "user_proxy"},
        [
            S(
                "invoke_agent weather_agent",
                {"gen_ai.operation.name": "invoke_agent"},
                [S("chat gpt-4o-mini", {"gen_ai.operation.name": "chat"}, scope=AG2)],
                scope=AG2,
            ),
            S(
                "invoke_agent user_proxy",
                {"gen_ai.operation.name": "invoke_agent"},
                [
                    S("execute_tool get_weather", {"gen_ai.operation.name": "execute_tool"}, scope=AG2),
                    S("execute_tool lookup_city", {"gen_ai.operation.name": "execute_tool"}, scope=AG2),
                ],
                scope=AG2,
            ),
            S(
                "invoke_agent weather_agent",
                {"gen_ai.operation.name": "invoke_agent"},
                [S("chat gpt-4o-mini", {"gen_ai.operation.name": "chat"}, scope=AG2)],
                scope=AG2,
            ),
        ],
        scope=AG2,
    ),
    "beeai (OpenInference)": OI(
        "AGENT",
        "weather_agent",
        OI("LLM", "OpenAIChatModel", **LLM),
        OI("TOOL", "get_weather"),
        failing(OI("TOOL", "lookup_city", failing(OI("TOOL", "error")))),
        OI("LLM", "OpenAIChatModel", **LLM),
        OI("AGENT", "final_answer"),
    ),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_shape_is_one_run_an_iteration_per_model_call_and_one_span_per_call(shape: str) -> None:
    runs, turns = summary(build(SHAPES[shape]))
    assert runs == 1
    assert len(turns) == 2
    first, second = turns
    assert [c.split(":")[0] for c in first] == ["llm", "tool", "tool"], first
    assert [c.split(":")[0] for c in second] == ["llm"], second


def test_a_sub_agent_that_is_called_stays_a_run_and_gets_its_own_loop() -> None:
    root = OI(
        "AGENT",
        "triage.run",
        OI("LLM", "c1", **LLM),
        OI("TOOL", "ask_expert", OI("AGENT", "expert.run", OI("LLM", "c2", **LLM))),
        OI("LLM", "c3", **LLM),
    )
    runs, turns = summary(build(root))
    assert runs == 2
    assert sorted(len(t) for t in turns) == [1, 1, 2]  # triage: (c1, ask_expert), (c3); expert: (c2)


def test_a_trace_of_ours_needs_no_change_and_a_trace_without_model_calls_gets_no_iterations() -> None:
    ours = S(
        "invoke_agent a",
        {sc.AGENTDIAG_KIND: "run"},
        [
            S(
                "agent.iteration",
                {sc.AGENTDIAG_KIND: "iteration", sc.AGENTDIAG_ITERATION_INDEX: 0},
                [S("chat", {sc.AGENTDIAG_KIND: "llm"})],
            )
        ],
    )
    assert not plan_trace(build(ours))
    tools_only = OI("AGENT", "a.run", OI("TOOL", "t"), OI("TOOL", "u"))
    assert not plan_trace(build(tools_only)).iterations
