"""Names a framework declares: only those from the user's definitions are registered, and only if they pass the
public-safety check (issue 20, class 2). Driven by the real LangChain, LangGraph and OpenAI Agents SDK packages,
with scripted models, through the strict pipeline (redaction, batching) into memory.

* LangChain / LangGraph: a graph's own name (``compile(name=...)``, ``create_agent(name=...)``) and the tools
  bound to a model call are definitions; a per-call ``run_name`` is data and leaves as ``_OTHER`` unless the same
  name is registered, however harmless it looks.
* Agents SDK: agent, tool, handoff and guardrail objects are definitions; a definition whose name is a credential
  is refused with a warning and exported as ``_OTHER``.
"""

from __future__ import annotations

import asyncio
import logging
import operator
import uuid
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph", reason="langgraph (a dev dependency) is not installed")
agents = pytest.importorskip("agents", reason="the openai-agents package (the `openai-agents` extra) is not installed")

from agents import (  # noqa: E402
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    RunConfig,
    Runner,
    function_tool,
    handoff,
    input_guardrail,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402
from agents.tracing import get_trace_provider, set_trace_processors  # noqa: E402
from fakes.langchain_model import ScriptedChatModel, final_text, tool_calls  # noqa: E402
from fakes.secret_names import RECOGNISED, WITH_SPACES, tail  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from llm_spans import attrs, named  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from pipeline.pipeline_support import pipeline  # noqa: E402

import otel_agentdiag as agentdiag  # noqa: E402
import otel_agentdiag.redaction as p  # noqa: E402
from otel_agentdiag import semconv as sc  # noqa: E402
from otel_agentdiag._internal.names import default_registry  # noqa: E402
from otel_agentdiag.instrumentation.langchain import AgentDiagCallbackHandler, LangChainInstrumentor  # noqa: E402
from otel_agentdiag.instrumentation.openai_agents import OpenAIAgentsInstrumentor  # noqa: E402

NEVER = 3600.0
NAMES_LOGGER = "otel_agentdiag._internal.names"


@pytest.fixture(autouse=True, scope="module")
def _no_sdk_export() -> Iterator[None]:
    """No run may reach the Agents SDK's default processor (it sends traces to OpenAI when a key is set)."""
    before = list(get_trace_provider()._multi_processor._processors)  # type: ignore[attr-defined]
    set_trace_processors([])
    yield
    set_trace_processors(before)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="otel_agentdiag")
    return caplog


def refused_kinds(logs: pytest.LogCaptureFixture) -> list[str]:
    """The kind each refusal warning names (``"otel-agentdiag: 1 tool name was not registered: ..."``)."""
    return sorted(r.getMessage().split()[2] for r in logs.records if r.name == NAMES_LOGGER)


def assert_nowhere(secrets: Sequence[str], spans: Sequence[ReadableSpan], logs: pytest.LogCaptureFixture) -> None:
    text = repr(
        [(s.name, dict(s.attributes or {}), [(e.name, dict(e.attributes or {})) for e in s.events]) for s in spans]
    )
    # Our own log records (a framework may log a name itself: the Agents SDK warns about tool names it rewrites).
    logged = "\n".join(r.getMessage() + repr(r.args) for r in logs.records if r.name.startswith("otel_agentdiag"))
    for secret in secrets:
        assert secret not in text
        assert secret not in logged
        for kind in ("tool", "agent", "model", "guardrail"):
            assert not default_registry.is_registered(kind, secret)


class _Strict:
    """The strict pipeline into memory, with the given instrumentor on (instrumented inside the pipeline, so it
    traces into it as under ``configure()``)."""

    def __init__(self, instrumentor: Any) -> None:
        self.instrumentor = instrumentor
        self.memory = InMemorySpanExporter()

    def __enter__(self) -> _Strict:
        self._pipeline = pipeline(self.memory, policy=p.STRICT, schedule_delay_s=NEVER)
        self.pipe = self._pipeline.__enter__()
        self.instrumentor.instrument()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.instrumentor.uninstrument()
            assert self.pipe.batcher.force_flush(30_000)
        finally:
            self._pipeline.__exit__(*exc)

    def spans(self) -> list[ReadableSpan]:
        return list(self.memory.get_finished_spans())


def runs(spans: Sequence[ReadableSpan]) -> list[str]:
    return [s.name for s in spans if attrs(s)["agentdiag.kind"] == "run"]


# -- LangChain / LangGraph ---------------------------------------------------------------------------------
@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


def weather_model() -> ScriptedChatModel:
    return ScriptedChatModel.from_steps(tool_calls(("get_weather", {"city": "Paris"})), final_text("Sunny."))


def ask(agent: Any, config: dict[str, Any] | None = None) -> str:
    return str(agent.invoke({"messages": [("user", "Weather in Paris?")]}, config)["messages"][-1].content)


def test_a_per_call_run_name_is_data_however_harmless(logs: pytest.LogCaptureFixture) -> None:
    tag = uuid.uuid4().hex[:8]
    agent_name, batch, registered = f"weather_{tag}", f"nightly_batch_{tag}", f"registered_run_{tag}"
    secret = RECOGNISED["openai_project_key"]()
    agentdiag.register_names(agents=[registered])
    with _Strict(LangChainInstrumentor()) as strict:
        agent = create_agent(weather_model(), tools=[get_weather], name=agent_name)
        assert ask(agent) == "Sunny."
        for run_name in (batch, secret, registered):
            agent = create_agent(weather_model(), tools=[get_weather], name=agent_name)
            assert ask(agent, {"run_name": run_name, "tags": ["t"]}) == "Sunny."
    spans = strict.spans()
    # The graph's own name is code (kept); a per-call run_name is data, unless the same name was registered.
    assert runs(spans) == [
        f"invoke_agent {agent_name}",
        "invoke_agent _OTHER",
        "invoke_agent _OTHER",
        f"invoke_agent {registered}",
    ]
    assert {attrs(s)[sc.GEN_AI_AGENT_NAME] for s in named(spans, "invoke_agent _OTHER")} == {sc.OTHER_VALUE}
    assert not default_registry.is_agent(batch)
    assert batch not in repr([(s.name, dict(s.attributes or {})) for s in spans])
    assert refused_kinds(logs) == []  # data is not refused (nothing declared it): it is simply not registered
    assert_nowhere([secret], spans, logs)


def test_a_tool_definition_named_with_a_credential_is_refused(logs: pytest.LogCaptureFixture) -> None:
    secret = RECOGNISED["github_fine_grained_token"]()
    calls: list[str] = []

    @tool(secret)
    def lookup(city: str) -> str:
        """Looks a city up."""
        calls.append(city)
        return "found"

    model = ScriptedChatModel.from_steps(tool_calls((secret, {"city": "Oslo"})), final_text("Found it."))
    with _Strict(LangChainInstrumentor()) as strict:
        assert ask(create_agent(model, tools=[lookup], name=f"lookup_{tail(6)}")) == "Found it."
    assert calls == ["Oslo"]  # the agent ran as it would without telemetry
    spans = strict.spans()
    (tool_span,) = [s for s in spans if attrs(s)["agentdiag.kind"] == "tool"]
    assert tool_span.name == "execute_tool _OTHER"
    assert attrs(tool_span)[sc.GEN_AI_TOOL_NAME] == sc.OTHER_VALUE
    assert refused_kinds(logs) == ["tool"]
    assert_nowhere([secret], spans, logs)


def test_a_per_call_tool_run_name_never_names_the_tool_span(logs: pytest.LogCaptureFixture) -> None:
    """``tool.invoke(..., config={"run_name": ...})``: the span is named by the tool's definition."""
    secret = RECOGNISED["slack_bot_token"]()
    agentdiag.register_names(tools=["get_weather"])
    with _Strict(LangChainInstrumentor()) as strict:
        assert get_weather.invoke({"city": "Rome"}, config={"run_name": secret}) == "Sunny in Rome"
    (span,) = strict.spans()
    assert span.name == "execute_tool get_weather"
    assert_nowhere([secret], [span], logs)


class _Count(TypedDict):
    steps: Annotated[list[str], operator.add]


def _graph(name: str, node: str) -> Any:
    graph = StateGraph(_Count)
    graph.add_node(node, lambda state: {"steps": ["done"]})
    graph.add_edge(START, node)
    graph.add_edge(node, END)
    return graph.compile(name=name)


def test_a_graph_is_named_by_its_definition_and_a_credential_is_refused(logs: pytest.LogCaptureFixture) -> None:
    """The graph's name is read from the graph object when it runs, so a graph compiled before ``instrument()``
    keeps its name too; a credential as a graph or node name never leaves."""
    graph_secret, node_secret, agent_secret = (
        RECOGNISED["jwt"](),
        RECOGNISED["aws_access_key_id"](),
        RECOGNISED["anthropic_key"](),
    )
    safe = f"planner_{tail(6)}"
    compiled_early = _graph(safe, "plan")
    with _Strict(LangChainInstrumentor()) as strict:
        assert compiled_early.invoke({"steps": []}) == {"steps": ["done"]}
        assert _graph(graph_secret, node_secret).invoke({"steps": []}) == {"steps": ["done"]}
        assert ask(create_agent(weather_model(), tools=[get_weather], name=agent_secret)) == "Sunny."
        assert asyncio.run(_graph(graph_secret, "x").ainvoke({"steps": []})) == {"steps": ["done"]}
    spans = strict.spans()
    assert runs(spans) == [f"invoke_agent {safe}", "invoke_agent _OTHER", "invoke_agent _OTHER", "invoke_agent _OTHER"]
    assert refused_kinds(logs) == ["agent", "agent"]  # the graph and the agent, once each
    assert_nowhere([graph_secret, node_secret, agent_secret], spans, logs)


def test_uninstrument_stops_registering_graph_names() -> None:
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument()
    instrumentor.uninstrument()
    name = f"after_uninstrument_{tail(6)}"
    assert _graph(name, "n").invoke({"steps": []}) == {"steps": ["done"]}
    assert not default_registry.is_agent(name)


def test_a_handler_passed_by_hand_registers_no_run_name() -> None:
    """Without the instrumentor nothing reads the graph object: its name leaves as ``_OTHER`` unless declared."""
    declared, undeclared = f"declared_{tail(6)}", f"undeclared_{tail(6)}"
    agentdiag.register_names(agents=[declared])
    memory = InMemorySpanExporter()
    with pipeline(memory, policy=p.STRICT, schedule_delay_s=NEVER) as pipe:
        handler = AgentDiagCallbackHandler()
        for name in (declared, undeclared):
            assert _graph(name, "n").invoke({"steps": []}, config={"callbacks": [handler]}) == {"steps": ["done"]}
        assert pipe.batcher.force_flush(30_000)
    assert runs(list(memory.get_finished_spans())) == [f"invoke_agent {declared}", "invoke_agent _OTHER"]
    assert not default_registry.is_agent(undeclared)


# -- OpenAI Agents SDK -------------------------------------------------------------------------------------
def run_agent(agent: Agent[Any]) -> Any:
    async def main() -> Any:
        return await Runner.run(agent, "Hello", run_config=RunConfig(group_id="names-conversation"))

    return asyncio.run(main())


def test_agents_sdk_definitions_named_with_credentials_are_refused(logs: pytest.LogCaptureFixture) -> None:
    agent_secret = RECOGNISED["google_api_key"]()
    tool_secret = RECOGNISED["github_classic_token"]()
    target_secret = WITH_SPACES["bearer_header"]()
    triage = f"triage_{tail(6)}"

    @function_tool(name_override=tool_secret)
    def lookup(city: str) -> str:
        """Looks a city up."""
        return "found"

    target = Agent(name=target_secret, instructions="Answer.", model=ScriptedModel([ModelStep(output=[])]))
    target.model = ScriptedModel([ModelStep(output=[assistant_message("Done.")])], emit_traces=True)
    transfer = handoff(target)
    agent = Agent(
        name=triage,
        instructions="Route.",
        tools=[lookup],
        handoffs=[transfer],
        model=ScriptedModel(
            [
                ModelStep(output=[function_call(tool_secret, {"city": "Oslo"}, call_id="c1")]),
                ModelStep(output=[function_call(transfer.tool_name, {}, call_id="h1")]),
            ],
            emit_traces=True,
        ),
    )
    lone = Agent(
        name=agent_secret,
        instructions="Answer.",
        model=ScriptedModel([ModelStep(output=[assistant_message("Hi.")])], emit_traces=True),
    )
    with _Strict(OpenAIAgentsInstrumentor()) as strict:
        assert run_agent(agent).final_output == "Done."
        assert run_agent(lone).final_output == "Hi."
    spans = strict.spans()
    assert runs(spans) == ["invoke_agent _OTHER", f"invoke_agent {triage}", "invoke_agent _OTHER"]
    tools = sorted(s.name for s in spans if attrs(s)["agentdiag.kind"] == "tool")
    assert tools == ["execute_tool _OTHER", "execute_tool _OTHER"]  # the function tool and the handoff
    (handoff_span,) = [s for s in spans if sc.AGENTDIAG_HANDOFF_SOURCE_AGENT in attrs(s)]
    assert attrs(handoff_span)[sc.AGENTDIAG_HANDOFF_SOURCE_AGENT] == triage
    assert attrs(handoff_span)[sc.AGENTDIAG_HANDOFF_TARGET_AGENT] == sc.OTHER_VALUE
    # The target agent (once, as a handoff and as the agent that runs), the lone agent, the function tool. The
    # transfer tool is not declared for a refused target: its name holds the target's ("transfer_to_Bearer ...").
    assert refused_kinds(logs) == ["agent", "agent", "tool"]
    assert not default_registry.is_tool(f"transfer_to_{target_secret}")
    assert_nowhere([agent_secret, tool_secret, target_secret], spans, logs)


def test_an_agents_sdk_guardrail_named_with_a_credential_is_refused(logs: pytest.LogCaptureFixture) -> None:
    secret = RECOGNISED["openai_legacy_key"]()

    @input_guardrail(name=secret)
    async def stop_everything(ctx: Any, agent: Any, text: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    agent = Agent(
        name=f"guarded_{tail(6)}",
        instructions="Answer.",
        input_guardrails=[stop_everything],
        model=ScriptedModel([ModelStep(output=[assistant_message("Hi.")])], emit_traces=True),
    )
    with _Strict(OpenAIAgentsInstrumentor()) as strict, pytest.raises(InputGuardrailTripwireTriggered):
        run_agent(agent)
    spans = strict.spans()
    (guardrail,) = named(spans, "agentdiag.guardrail")
    assert attrs(guardrail)[sc.AGENTDIAG_GUARDRAIL_NAME] == sc.OTHER_VALUE
    assert refused_kinds(logs) == ["guardrail"]
    assert_nowhere([secret], spans, logs)
