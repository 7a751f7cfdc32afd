"""The OpenAI Agents SDK instrumentation, driven by the real ``openai-agents`` package.

Two kinds of model: the SDK's own scripted test model (``agents.testing.ScriptedModel``), and the real
``AsyncOpenAI`` client talking to the fake model server on 127.0.0.1 through the SDK's chat-completions and
Responses models, with our OpenAI client instrumentation on too (one span per model call, enriched).
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents", reason="the openai-agents package (the `openai-agents` extra) is not installed")

from agents import (  # noqa: E402
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    ModelBehaviorError,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
    input_guardrail,
)
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402
from agents.tool import default_tool_error_function  # noqa: E402
from agents.tracing import function_span, generation_span, get_trace_provider, response_span  # noqa: E402
from agents.tracing import trace as agents_trace  # noqa: E402
from agents.usage import Usage  # noqa: E402
from conftest import Spans  # noqa: E402
from content_sink import RecordingSink, content_sink  # noqa: E402, F401
from fakes import openai_server as fake  # noqa: E402
from fakes.openai_server import FakeModelServer  # noqa: E402
from llm_spans import attrs, named, raw_ids, tree  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from openai.types.responses import Response, ResponseFunctionToolCall  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

import otel_agentdiag  # noqa: E402
from otel_agentdiag import semconv as sc  # noqa: E402
from otel_agentdiag._internal import content as _content  # noqa: E402
from otel_agentdiag._internal.names import default_registry  # noqa: E402
from otel_agentdiag.diagnostics.receipt import session_receipt  # noqa: E402
from otel_agentdiag.diagnostics.status import session_status  # noqa: E402
from otel_agentdiag.instrumentation import manual  # noqa: E402
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor  # noqa: E402
from otel_agentdiag.instrumentation.openai_agents import AgentDiagTracingProcessor, OpenAIAgentsInstrumentor  # noqa: E402
from otel_agentdiag.redaction import IdHasher  # noqa: E402
from otel_agentdiag.storage import SpanStore, StoredSpan  # noqa: E402

CONVERSATION = "thread-7f3a"
MODEL = "gpt-4o-mini"
TOOL_USAGE = Usage(requests=1, input_tokens=31, output_tokens=12, total_tokens=43)
ANSWER_USAGE = Usage(requests=1, input_tokens=57, output_tokens=9, total_tokens=66)


@function_tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@function_tool
def get_time(city: str) -> str:
    """The local time in a city."""
    return "noon"


@function_tool
def broken_tool(city: str) -> str:
    """A tool that fails (the SDK feeds the failure back to the model)."""
    raise ValueError(f"cannot reach the weather service {fake.SENTINEL_ERROR}")


@pytest.fixture(autouse=True, scope="module")
def _no_sdk_export() -> Iterator[None]:
    """No test run may reach the SDK's default processor, which sends traces to OpenAI when a key is set."""
    from agents.tracing import set_trace_processors

    before = list(get_trace_provider()._multi_processor._processors)  # type: ignore[attr-defined]
    set_trace_processors([])
    yield
    set_trace_processors(before)


@pytest.fixture
def instrumented(spans: Spans) -> Iterator[OpenAIAgentsInstrumentor]:
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    yield instrumentor
    instrumentor.uninstrument()


def scripted(*steps: ModelStep) -> ScriptedModel:
    """The SDK's scripted test model. Its generation spans name no model and record no answer or usage."""
    return ScriptedModel(list(steps), emit_traces=True)


class RecordingModel(Model):
    """A scripted custom model that records on its generation span what the SDK's chat-completions model
    records: the model name, the usage, and (when the run traces sensitive data) the answer's tool calls."""

    def __init__(self, *steps: tuple[list[Any], Usage], model: str = "gpt-test") -> None:
        self.steps = list(steps)
        self.model = model

    async def get_response(self, *args: Any, tracing: Any, **kwargs: Any) -> ModelResponse:
        output, usage = self.steps.pop(0)
        with generation_span(model=self.model, disabled=tracing.is_disabled()) as span:
            span.span_data.usage = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
            if tracing.include_data():
                calls = [
                    {"id": i.call_id, "type": "function", "function": {"name": i.name, "arguments": i.arguments}}
                    for i in output
                    if i.type == "function_call"
                ]
                span.span_data.output = [{"role": "assistant", "content": None, "tool_calls": calls}]
        return ModelResponse(output=output, usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def weather_steps() -> list[ModelStep]:
    return [
        ModelStep(output=[function_call("get_weather", {"city": "Paris"}, call_id="call_1")], usage=TOOL_USAGE),
        ModelStep(output=[assistant_message("It is sunny.")], usage=ANSWER_USAGE),
    ]


def weather_agent(model: Any, **kwargs: Any) -> Agent[Any]:
    return Agent(name="weather_agent", instructions="Answer about the weather.", model=model, **kwargs)


def run(agent: Agent[Any], mode: str, run_config: RunConfig | None = None, **kwargs: Any) -> Any:
    """Run ``agent`` to its end with ``Runner.run``, ``run_sync`` or ``run_streamed``."""
    config = run_config or RunConfig(group_id=CONVERSATION)
    if mode == "sync":
        try:
            return Runner.run_sync(agent, "What is the weather in Paris?", run_config=config, **kwargs)
        finally:
            # run_sync leaves the thread's default event loop open for reuse, by design; a test closes it.
            policy = asyncio.get_event_loop_policy()
            policy.get_event_loop().close()
            policy.set_event_loop(None)

    async def main() -> Any:
        if mode == "streamed":
            result = Runner.run_streamed(agent, "What is the weather in Paris?", run_config=config, **kwargs)
            async for _ in result.stream_events():
                pass
            return result
        return await Runner.run(agent, "What is the weather in Paris?", run_config=config, **kwargs)

    return asyncio.run(main())


# -- the tree --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["async", "sync", "streamed"])
def test_a_run_is_run_iterations_llm_and_tool_spans(spans: Spans, instrumented: object, mode: str) -> None:
    result = run(weather_agent(scripted(*weather_steps()), tools=[get_weather]), mode)
    assert result.final_output == "It is sunny."
    finished = spans.finished()
    assert tree(finished) == [
        (0, "invoke_agent weather_agent"),
        (1, "agent.iteration"),
        (2, "chat"),  # the scripted model names no model
        (2, "execute_tool get_weather"),
        (1, "agent.iteration"),
        (2, "chat"),
    ]
    assert len({s.context.trace_id for s in finished if s.context is not None}) == 1
    (root,) = named(finished, "invoke_agent weather_agent")
    assert attrs(root)["agentdiag.kind"] == "run"
    assert attrs(root)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(root)["agentdiag.stop_reason"] == "completed"
    assert spans.started_with(root)["gen_ai.agent.name"] == "weather_agent"  # sampling-relevant: at start
    assert [attrs(s)["agentdiag.iteration.index"] for s in named(finished, "agent.iteration")] == [0, 1]
    (tool,) = named(finished, "execute_tool get_weather")
    assert "gen_ai.tool.call.id" not in raw_ids(tool)  # the scripted model does not record its answer
    assert attrs(tool)["gen_ai.tool.type"] == "function"
    assert spans.started_with(tool)["gen_ai.tool.name"] == "get_weather"
    # group_id is the conversation of every span, kept beside it (the processor hashes it later).
    assert {raw_ids(s).get("gen_ai.conversation.id") for s in finished} == {CONVERSATION}
    assert {attrs(s)["agentdiag.kind"] for s in finished} == {"run", "iteration", "llm", "tool"}
    assert all(s.status.status_code is not StatusCode.ERROR for s in finished)
    # Declared names are code: registered for the redaction policy.
    assert default_registry.is_tool("get_weather")
    assert default_registry.is_agent("weather_agent")


def test_without_task_and_turn_spans_the_agent_span_is_the_run(spans: Spans, instrumented: object) -> None:
    config = RunConfig(group_id=CONVERSATION, tracing={"include_task_and_turn_spans": False})
    run(weather_agent(scripted(*weather_steps()), tools=[get_weather]), "async", config)
    assert tree(spans.finished()) == [
        (0, "invoke_agent weather_agent"),
        (1, "chat"),
        (1, "execute_tool get_weather"),
        (1, "chat"),
    ]
    (root,) = named(spans.finished(), "invoke_agent weather_agent")
    assert attrs(root)["agentdiag.stop_reason"] == "completed"


def test_tracing_disabled_in_the_run_config_makes_no_spans(spans: Spans, instrumented: object) -> None:
    result = run(
        weather_agent(scripted(*weather_steps()), tools=[get_weather]),
        "async",
        RunConfig(group_id=CONVERSATION, tracing_disabled=True),
    )
    assert result.final_output == "It is sunny."
    assert spans.finished() == []


def test_parallel_tool_calls_get_their_own_call_ids(spans: Spans, instrumented: object) -> None:
    model = RecordingModel(
        (
            [
                function_call("get_time", {"city": "Paris"}, call_id="call_t"),
                function_call("get_weather", {"city": "Paris"}, call_id="call_w"),
            ],
            TOOL_USAGE,
        ),
        ([assistant_message("Sunny at noon.")], ANSWER_USAGE),
    )
    result = run(weather_agent(model, tools=[get_weather, get_time]), "async")
    assert result.final_output == "Sunny at noon."
    finished = spans.finished()
    first_iteration = min(named(finished, "agent.iteration"), key=lambda s: s.start_time or 0)
    tools = [s for s in finished if attrs(s)["agentdiag.kind"] == "tool"]
    assert {(s.name, raw_ids(s)["gen_ai.tool.call.id"]) for s in tools} == {
        ("execute_tool get_weather", "call_w"),
        ("execute_tool get_time", "call_t"),
    }
    assert first_iteration.context is not None
    assert all(s.parent is not None and s.parent.span_id == first_iteration.context.span_id for s in tools)


def test_concurrent_runs_never_share_spans(spans: Spans, instrumented: object) -> None:
    async def one(conversation: str, city: str) -> Any:
        model = RecordingModel(
            ([function_call("get_weather", {"city": city}, call_id=f"call_{city}")], TOOL_USAGE),
            ([assistant_message(f"Sunny in {city}.")], ANSWER_USAGE),
        )
        agent = weather_agent(model, tools=[get_weather])
        return await Runner.run(agent, city, run_config=RunConfig(group_id=conversation))

    async def both() -> list[Any]:
        return list(await asyncio.gather(one("conv-a", "Paris"), one("conv-b", "Rome")))

    results = asyncio.run(both())
    assert [r.final_output for r in results] == ["Sunny in Paris.", "Sunny in Rome."]
    finished = spans.finished()
    traces: dict[int, list[ReadableSpan]] = {}
    for span in finished:
        assert span.context is not None
        traces.setdefault(span.context.trace_id, []).append(span)
    assert len(traces) == 2
    for members in traces.values():
        assert [name for _, name in tree(members)] == [
            "invoke_agent weather_agent",
            "agent.iteration",
            "chat gpt-test",
            "execute_tool get_weather",
            "agent.iteration",
            "chat gpt-test",
        ]
        (conversation,) = {raw_ids(s)["gen_ai.conversation.id"] for s in members}
        (tool,) = [s for s in members if attrs(s)["agentdiag.kind"] == "tool"]
        city = "Paris" if conversation == "conv-a" else "Rome"
        assert raw_ids(tool)["gen_ai.tool.call.id"] == f"call_{city}"
        # Every parent link stays inside the run's own trace.
        ids = {s.context.span_id for s in members if s.context is not None}
        assert all(s.parent is None or s.parent.span_id in ids for s in members)


def test_a_handoff_is_a_transfer_tool_and_the_target_agent_runs_inside_the_run(
    spans: Spans, instrumented: object
) -> None:
    answer = scripted(ModelStep(output=[assistant_message("Hola")]))
    spanish = Agent(name="Spanish agent", instructions="Habla.", model=answer)
    triage = Agent(
        name="triage",
        instructions="Route.",
        handoffs=[spanish],
        model=scripted(ModelStep(output=[function_call("transfer_to_spanish_agent", {}, call_id="h1")])),
    )
    assert run(triage, "async").final_output == "Hola"
    finished = spans.finished()
    assert tree(finished) == [
        (0, "invoke_agent triage"),
        (1, "agent.iteration"),
        (2, "chat"),
        (2, "execute_tool transfer_to_Spanish agent"),
        (1, "invoke_agent Spanish agent"),
        (2, "agent.iteration"),
        (3, "chat"),
    ]
    (handoff,) = named(finished, "execute_tool transfer_to_Spanish agent")
    assert attrs(handoff)["agentdiag.handoff.source_agent"] == "triage"
    assert attrs(handoff)["agentdiag.handoff.target_agent"] == "Spanish agent"
    assert attrs(handoff)["gen_ai.tool.name"] == "transfer_to_Spanish agent"
    (target,) = named(finished, "invoke_agent Spanish agent")
    assert attrs(target)["agentdiag.kind"] == "run"
    assert default_registry.is_agent("Spanish agent")
    assert default_registry.is_tool("transfer_to_Spanish agent")


# -- errors and stop reasons ----------------------------------------------------------------------------
def test_a_tool_error_fed_back_to_the_model_fails_the_tool_span_only(spans: Spans, instrumented: object) -> None:
    model = scripted(
        ModelStep(output=[function_call("broken_tool", {"city": "Paris"}, call_id="call_b")]),
        ModelStep(output=[assistant_message("The service is down.")]),
    )
    assert run(weather_agent(model, tools=[broken_tool]), "async").final_output == "The service is down."
    finished = spans.finished()
    (tool,) = named(finished, "execute_tool broken_tool")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.status.description is None
    assert attrs(tool)["error.type"] == "agents.tool_error"
    assert [dict(e.attributes or {}) for e in tool.events] == [{"exception.type": "agents.tool_error"}]
    (root,) = named(finished, "invoke_agent weather_agent")
    assert root.status.status_code is not StatusCode.ERROR
    assert attrs(root)["agentdiag.stop_reason"] == "completed"


def test_max_turns_is_the_runs_stop_reason(spans: Spans, instrumented: object) -> None:
    loop = [ModelStep(output=[function_call("get_weather", {"city": "Paris"}, call_id=f"c{i}")]) for i in range(3)]
    with pytest.raises(MaxTurnsExceeded):
        run(weather_agent(scripted(*loop), tools=[get_weather]), "async", max_turns=2)
    finished = spans.finished()
    (root,) = named(finished, "invoke_agent weather_agent")
    assert root.status.status_code is StatusCode.ERROR
    assert attrs(root)["error.type"] == "agents.MaxTurnsExceeded"
    assert attrs(root)["agentdiag.stop_reason"] == "max_turns"
    assert len(named(finished, "agent.iteration")) == 2


def test_a_guardrail_tripwire_stops_the_run(spans: Spans, instrumented: object) -> None:
    @input_guardrail
    async def no_weather_talk(ctx: Any, agent: Any, text: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    agent = weather_agent(scripted(*weather_steps()), tools=[get_weather], input_guardrails=[no_weather_talk])
    with pytest.raises(InputGuardrailTripwireTriggered):
        run(agent, "async")
    finished = spans.finished()
    (guardrail,) = named(finished, "agentdiag.guardrail")
    assert attrs(guardrail)["agentdiag.guardrail.name"] == "no_weather_talk"
    assert attrs(guardrail)["agentdiag.guardrail.triggered"] is True
    assert attrs(guardrail)["agentdiag.kind"] == "other"
    (root,) = named(finished, "invoke_agent weather_agent")
    assert attrs(root)["agentdiag.stop_reason"] == "guardrail"
    assert attrs(root)["error.type"] == "agents.guardrail_tripwire"
    assert default_registry.is_registered("guardrail", "no_weather_talk")


def test_a_model_error_fails_the_llm_span_and_the_run_and_reaches_the_caller_unchanged(
    spans: Spans, instrumented: object
) -> None:
    boom = RuntimeError(f"the model is down {fake.SENTINEL_ERROR}")
    with pytest.raises(RuntimeError) as raised:
        run(weather_agent(scripted(ModelStep.raise_error(boom)), tools=[get_weather]), "async")
    assert raised.value is boom
    finished = spans.finished()
    (llm,) = [s for s in finished if attrs(s)["agentdiag.kind"] == "llm"]
    assert llm.status.status_code is StatusCode.ERROR
    assert attrs(llm)["error.type"] == "RuntimeError"
    (root,) = named(finished, "invoke_agent weather_agent")
    assert attrs(root)["agentdiag.stop_reason"] == "error"
    assert root.status.status_code is StatusCode.ERROR
    text = repr([(s.name, s.attributes, [e.attributes for e in s.events], s.status.description) for s in finished])
    assert fake.SENTINEL_ERROR not in text


def test_a_tool_name_the_model_invents_never_becomes_a_span_name(spans: Spans, instrumented: object) -> None:
    model = scripted(ModelStep(output=[function_call("rm_rf_everything", {}, call_id="x1")]))
    with pytest.raises(ModelBehaviorError):
        run(weather_agent(model, tools=[get_weather]), "async")
    finished = spans.finished()
    assert "rm_rf_everything" not in repr([(s.name, s.attributes) for s in finished])
    assert not default_registry.is_tool("rm_rf_everything")
    (root,) = named(finished, "invoke_agent weather_agent")
    assert attrs(root)["error.type"] == "agents.tool_not_found"
    assert attrs(root)["agentdiag.stop_reason"] == "error"


# -- the real OpenAI client: one span per model call, usage that adds up -----------------------------------
@pytest.fixture
def both_instrumented(spans: Spans, instrumented: object) -> Iterator[None]:
    OpenAIInstrumentor().instrument(tracer_provider=spans.provider)
    yield
    OpenAIInstrumentor().uninstrument()


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
@pytest.mark.parametrize("mode", ["async", "streamed"])
def test_with_the_real_client_each_model_call_is_one_enriched_span(
    spans: Spans, both_instrumented: object, server: FakeModelServer, api: str, mode: str
) -> None:
    client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url)
    model_class = OpenAIChatCompletionsModel if api == "chat_completions" else OpenAIResponsesModel
    agent = weather_agent(
        model_class(model=MODEL, openai_client=client),
        tools=[get_weather],
        model_settings=ModelSettings(include_usage=True),
    )
    result = run(agent, mode)
    finished = spans.finished()
    llm = sorted((s for s in finished if attrs(s)["agentdiag.kind"] == "llm"), key=lambda s: s.start_time or 0)
    path = "/v1/chat/completions" if api == "chat_completions" else "/v1/responses"
    assert len(llm) == len(server.requests_to(path)) == 2  # one span per call: the client enriched the SDK's
    assert [name for _, name in tree(finished)] == [
        "invoke_agent weather_agent",
        "agent.iteration",
        f"chat {MODEL}",
        "execute_tool get_weather",
        "agent.iteration",
        f"chat {MODEL}",
    ]
    for span in llm:
        values = attrs(span)
        assert values["gen_ai.provider.name"] == "openai"
        assert values["gen_ai.response.model"] == MODEL + fake.MODEL_SNAPSHOT_SUFFIX  # from the client
        assert raw_ids(span)["gen_ai.conversation.id"] == CONVERSATION
        assert [e.name for e in span.events] == ["agentdiag.http.attempt"]  # the client's attempt event
        assert span.kind.name == "CLIENT"
    (tool,) = named(finished, "execute_tool get_weather")
    assert fake.SENTINEL_TOOL_CALL_ID in raw_ids(tool)["gen_ai.tool.call.id"]  # the id the server made up
    # Token usage: on the leaves only; run and iteration spans carry roll-ups, and they add up to the SDK's.
    usage = result.context_wrapper.usage
    leaves = [(attrs(s)["gen_ai.usage.input_tokens"], attrs(s)["gen_ai.usage.output_tokens"]) for s in llm]
    assert sum(i for i, _ in leaves) == usage.input_tokens > 0
    assert sum(o for _, o in leaves) == usage.output_tokens > 0
    (root,) = named(finished, "invoke_agent weather_agent")
    assert attrs(root)["agentdiag.usage.input_tokens"] == usage.input_tokens
    assert attrs(root)["agentdiag.usage.output_tokens"] == usage.output_tokens
    iterations = sorted(named(finished, "agent.iteration"), key=lambda s: s.start_time or 0)
    rollups = [
        (attrs(s)["agentdiag.usage.input_tokens"], attrs(s)["agentdiag.usage.output_tokens"]) for s in iterations
    ]
    assert rollups == leaves
    for span in finished:
        if attrs(span)["agentdiag.kind"] != "llm":
            assert not [key for key in attrs(span) if key.startswith("gen_ai.usage.")], span.name


def test_spans_started_inside_a_tool_are_its_children(
    spans: Spans, both_instrumented: object, server: FakeModelServer
) -> None:
    client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url)
    manual.use_tracer_provider(spans.provider)

    @function_tool
    async def summarise(city: str) -> str:
        """Asks a model from inside a tool, inside a hand-made span."""
        with otel_agentdiag.tool_call("fetch_forecast"):
            pass
        await client.chat.completions.create(model="gpt-4.1-nano", messages=[{"role": "user", "content": city}])
        return "done"

    model = scripted(
        ModelStep(output=[function_call("summarise", {"city": "Paris"}, call_id="s1")]),
        ModelStep(output=[assistant_message("Summarised.")]),
    )
    try:
        run(weather_agent(model, tools=[summarise]), "async")
    finally:
        manual.use_tracer_provider(None)
    finished = spans.finished()
    (tool,) = named(finished, "execute_tool summarise")
    inner = [s for s in finished if s.name in ("execute_tool fetch_forecast", "chat gpt-4.1-nano")]
    assert len(inner) == 2
    assert tool.context is not None
    for span in inner:
        assert span.parent is not None and span.parent.span_id == tool.context.span_id, span.name
        assert raw_ids(span)["gen_ai.conversation.id"] == CONVERSATION
    # The client call's tokens count in the run's roll-up (the scripted model's calls report none).
    (nano,) = named(finished, "chat gpt-4.1-nano")
    (root,) = named(finished, "invoke_agent weather_agent")
    assert attrs(nano)["gen_ai.usage.input_tokens"] == fake.ANSWER_USAGE.prompt_tokens
    assert attrs(root)["agentdiag.usage.input_tokens"] == fake.ANSWER_USAGE.prompt_tokens
    assert attrs(root)["agentdiag.usage.output_tokens"] == fake.ANSWER_USAGE.completion_tokens


# -- the instrumentor -----------------------------------------------------------------------------------
def _processors() -> list[Any]:
    return list(get_trace_provider()._multi_processor._processors)  # type: ignore[attr-defined]


def test_instrument_replaces_the_sdk_processors_and_uninstrument_restores_them(spans: Spans) -> None:
    before = _processors()
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    try:
        assert _processors() == [instrumentor.processor]
    finally:
        instrumentor.uninstrument()
    assert _processors() == before
    run(weather_agent(scripted(*weather_steps()), tools=[get_weather]), "async")
    assert spans.finished() == []  # uninstrumented: nothing traced


def test_keep_sdk_processors_adds_ours_next_to_them(spans: Spans, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDIAG_OPENAI_AGENTS_KEEP_SDK_PROCESSORS", "true")
    before = _processors()
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    try:
        assert _processors() == [*before, instrumentor.processor]
    finally:
        instrumentor.uninstrument()
    assert _processors() == before


def test_uninstrument_mid_run_ends_the_open_spans(spans: Spans) -> None:
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)

    @function_tool
    def pull_the_plug(city: str) -> str:
        """Removes the instrumentation while the run is inside this tool."""
        instrumentor.uninstrument()
        return "ok"

    model = scripted(
        ModelStep(output=[function_call("pull_the_plug", {"city": "Paris"}, call_id="p1")]),
        ModelStep(output=[assistant_message("Done.")]),
    )
    assert run(weather_agent(model, tools=[pull_the_plug]), "async").final_output == "Done."
    finished = spans.finished()
    open_at_removal = {"invoke_agent weather_agent", "agent.iteration", "execute_tool pull_the_plug"}
    assert {s.name for s in finished if attrs(s).get("error.type") == "agentdiag.uninstrumented"} == open_at_removal
    assert len(finished) == 4  # those three and the first model call; nothing after the removal


class _BrokenTracer:
    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracer failure")


def test_a_failing_tracer_never_reaches_the_agent(caplog: pytest.LogCaptureFixture) -> None:
    from agents.tracing import set_trace_processors

    before = _processors()
    set_trace_processors([AgentDiagTracingProcessor(_BrokenTracer())])  # type: ignore[arg-type]
    try:
        result = run(weather_agent(scripted(*weather_steps()), tools=[get_weather]), "async")
    finally:
        set_trace_processors(before)
    assert result.final_output == "It is sunny."
    assert "RuntimeError" in caplog.text
    assert "tracer failure" not in caplog.text  # logged by type, never by message


# -- through the pipeline into the store ----------------------------------------------------------------
@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[StoredSpan], str]]:
    """One weather run (a tool that fails once, then succeeds) with sentinels everywhere, through
    ``configure()`` with the strict policy into a real SQLite store."""
    store = tmp_path_factory.mktemp("agents") / "traces.db"
    key = b"443fa8be2e27ed500f169b9277313166d1206724a20d0dd9c22ae7ae3ea1dc89"
    diag = otel_agentdiag.configure(
        service_name="agents-test", store=store, hash_key=key, set_global=False, local_policy="strict"
    )
    OpenAIAgentsInstrumentor().instrument()
    OpenAIInstrumentor().instrument()
    failures = iter([True, False])

    @function_tool
    def get_weather(city: str, unit: str) -> str:
        """The weather (fails on the first call)."""
        if next(failures):
            raise ConnectionError(f"weather service down {fake.SENTINEL_ERROR}")
        return f"sunny {fake.SENTINEL_TOOL_RESULT}"

    try:
        with FakeModelServer() as server:
            client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url)
            agent = Agent(
                name="weather_agent",
                instructions=fake.SENTINEL_INSTRUCTIONS,
                model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
                tools=[get_weather],
            )
            config = RunConfig(group_id=fake.SENTINEL_CONVERSATION, trace_include_sensitive_data=True)

            async def main() -> None:
                # The fake server asks for the tool until a tool message comes back: the first call fails
                # (the SDK feeds the error back), the server answers; a second run succeeds at once.
                await Runner.run(agent, fake.SENTINEL_PROMPT, run_config=config)
                await Runner.run(agent, fake.SENTINEL_PROMPT, run_config=config)

            asyncio.run(main())
    finally:
        OpenAIAgentsInstrumentor().uninstrument()
        OpenAIInstrumentor().uninstrument()
        gc.collect()
        diag.shutdown()
    with SpanStore(store, create=False) as reader:
        stored_spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
    yield store, stored_spans, IdHasher(key).digest("conversation", fake.SENTINEL_CONVERSATION)


def test_the_store_holds_the_trees_with_hashed_ids(stored: tuple[Path, list[StoredSpan], str]) -> None:
    _, spans, digest = stored
    runs = [s for s in spans if s.kind == "run"]
    assert len(runs) == 2
    assert {s.attributes["gen_ai.conversation.id"] for s in spans} == {digest}
    tools = [s for s in spans if s.kind == "tool"]
    assert len(tools) == 2
    assert all(s.attributes["gen_ai.tool.call.id"].startswith("hmac-sha256:") for s in tools)
    assert sorted(s.status for s in tools) == ["error", "unset"]
    assert all(s.attributes["agentdiag.stop_reason"] == "completed" for s in runs)
    assert all(s.attributes["gen_ai.tool.name"] == "get_weather" for s in tools)


def test_the_receipt_is_valid_and_the_tool_error_counts_as_recovered(
    stored: tuple[Path, list[StoredSpan], str],
) -> None:
    store, _, digest = stored
    with SpanStore(store, create=False) as reader:
        assert session_receipt(reader, digest).status == "valid"
        status = session_status(reader, digest, as_of_ns=None)
    assert status.counts["runs"] == 2
    assert status.counts["tool_calls"] == 2
    assert status.errors == 1
    assert status.recovered == 1


def test_no_sentinel_reaches_the_store(stored: tuple[Path, list[StoredSpan], str]) -> None:
    store, _, _ = stored
    for path in store.parent.iterdir():
        blob = path.read_bytes()
        assert not [s for s in fake.SENTINELS if s.encode() in blob], path.name
        assert b"cannot reach" not in blob and b"weather service down" not in blob
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    assert "invoke_agent weather_agent" in dump  # the search can find what is allowed
    assert not [s for s in fake.SENTINELS if s in dump]


def test_a_function_span_for_an_undeclared_tool_is_exported_as_the_placeholder(tmp_path: Path) -> None:
    store = tmp_path / "traces.db"
    diag = otel_agentdiag.configure(
        service_name="agents-test",
        store=store,
        hash_key=b"c1d46ce232b379a5a110af02e2a38ba751b17166df70a1fe6fe81a4f4b6eb58d",
        set_global=False,
    )
    OpenAIAgentsInstrumentor().instrument()
    try:
        with agents_trace("workflow"), function_span("tool_the_model_made_up"):
            pass
    finally:
        OpenAIAgentsInstrumentor().uninstrument()
        diag.shutdown()
    with SpanStore(store, create=False) as reader:
        (summary,) = reader.list_traces()
        (span,) = reader.get_trace(summary.trace_id)
    assert span.name == "execute_tool _OTHER"
    assert span.attributes["gen_ai.tool.name"] == "_OTHER"


def test_without_sensitive_data_the_sdk_records_no_answer_and_tools_get_no_call_id(
    spans: Spans, instrumented: object
) -> None:
    model = RecordingModel(
        ([function_call("get_weather", {"city": "Paris"}, call_id="call_1")], TOOL_USAGE),
        ([assistant_message("Sunny.")], ANSWER_USAGE),
    )
    config = RunConfig(group_id=CONVERSATION, trace_include_sensitive_data=False)
    assert run(weather_agent(model, tools=[get_weather]), "async", config).final_output == "Sunny."
    finished = spans.finished()
    (tool,) = named(finished, "execute_tool get_weather")
    assert "gen_ai.tool.call.id" not in raw_ids(tool)
    # Everything else is as with sensitive data: the tree, the usage and its roll-ups.
    names = [name for _, name in tree(finished)]
    assert names[:3] == ["invoke_agent weather_agent", "agent.iteration", "chat gpt-test"]
    (root,) = named(finished, "invoke_agent weather_agent")
    assert attrs(root)["agentdiag.usage.input_tokens"] == TOOL_USAGE.input_tokens + ANSWER_USAGE.input_tokens


# -- content capture (configure(capture_content=True)) -----------------------------------------------------
INPUT, OUTPUT = sc.CONTENT_INPUT_MESSAGES, sc.CONTENT_OUTPUT_MESSAGES
SYSTEM, TOOLS = sc.CONTENT_SYSTEM_INSTRUCTIONS, sc.CONTENT_TOOL_DEFINITIONS
ARGUMENTS, RESULT = sc.CONTENT_TOOL_ARGUMENTS, sc.CONTENT_TOOL_RESULT
PROMPT = "What is the weather in Paris?"
INSTRUCTIONS = "Answer about the weather."


@pytest.fixture
def sink(content_sink: RecordingSink) -> RecordingSink:  # noqa: F811 - the fixture imported above
    """Content capture on, into a :class:`RecordingSink`."""
    return content_sink


def by_start(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return sorted(spans, key=lambda s: s.start_time or 0)


def dump(spans: list[ReadableSpan]) -> str:
    """Everything a span exports besides ids: names, attributes, events, status."""
    return repr([(s.name, attrs(s), [(e.name, dict(e.attributes or {})) for e in s.events], s.status) for s in spans])


def answer_items(output: Any) -> list[dict[str, Any]]:
    """Tool calls and texts of a captured answer, whatever its shape: chat-completions messages, or Responses
    output items (what a Responses call, and a streamed chat-completions call, record)."""
    found: list[dict[str, Any]] = []
    for item in output:
        for call in item.get("tool_calls") or ():
            found.append({"call": call["function"]["name"], "arguments": call["function"]["arguments"]})
        if item.get("type") == "function_call":
            found.append({"call": item["name"], "arguments": item["arguments"]})
        if isinstance(item.get("content"), str):
            found.append({"text": item["content"]})
        elif item.get("type") == "message":
            found.extend({"text": part["text"]} for part in item["content"])
    return found


@pytest.mark.parametrize("mode", ["async", "sync", "streamed"])
def test_content_of_a_scripted_run_is_the_tool_arguments_and_result(
    spans: Spans, instrumented: object, sink: RecordingSink, mode: str
) -> None:
    steps = weather_steps()
    (call,) = steps[0].output
    assert isinstance(call, ResponseFunctionToolCall)
    sent = call.arguments  # the arguments string the scripted model produced
    assert run(weather_agent(scripted(*steps), tools=[get_weather]), mode).final_output == "It is sunny."
    finished = spans.finished()
    (tool,) = named(finished, "execute_tool get_weather")
    captured = sink.for_span(tool)
    assert captured == {ARGUMENTS: sent, RESULT: "sunny in Paris"}
    assert isinstance(captured[ARGUMENTS], str)  # the JSON string as the model sent it, not parsed
    # The scripted model records no input or answer on its generation spans; runs and turns carry no content.
    assert [s.name for s in finished if sink.for_span(s) and s is not tool] == []


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
@pytest.mark.parametrize("mode", ["async", "streamed"])
def test_content_of_a_run_with_the_real_client_comes_once_from_the_sdk(
    spans: Spans,
    both_instrumented: object,
    server: FakeModelServer,
    sink: RecordingSink,
    api: str,
    mode: str,
) -> None:
    client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url)
    model_class = OpenAIChatCompletionsModel if api == "chat_completions" else OpenAIResponsesModel
    agent = weather_agent(model_class(model=MODEL, openai_client=client), tools=[get_weather])
    run(agent, mode)
    finished = spans.finished()
    first, second = by_start([s for s in finished if attrs(s)["agentdiag.kind"] == "llm"])
    (tool,) = named(finished, "execute_tool get_weather")
    result = f"sunny in {fake.TOOL_INPUT['city']}"
    assert sink.for_span(tool) == {ARGUMENTS: fake.TOOL_ARGUMENTS, RESULT: result}
    one, two = sink.for_span(first), sink.for_span(second)
    if api == "chat_completions":
        # The SDK records the messages it sent, the instructions as the first (system) one, and no tools.
        assert set(one) == set(two) == {INPUT, OUTPUT}
        assert one[INPUT] == [{"content": INSTRUCTIONS, "role": "system"}, {"role": "user", "content": PROMPT}]
        assert [m["role"] for m in two[INPUT]] == ["system", "user", "assistant", "tool"]
        assert two[INPUT][-1]["content"] == result
    else:
        # The fake server answers `tools: []` (the real API echoes the tools it was given): tool definitions
        # are captured when the answer names some (test_content_of_a_response_step_names_its_tools).
        assert set(one) - {TOOLS} == set(two) - {TOOLS} == {INPUT, OUTPUT, SYSTEM}
        assert one[INPUT] == [{"content": PROMPT, "role": "user"}]
        assert one[SYSTEM] == two[SYSTEM] == INSTRUCTIONS
        assert [item.get("type") for item in two[INPUT]] == [None, "function_call", "function_call_output"]
        assert two[INPUT][-1]["output"] == result
    assert answer_items(one[OUTPUT]) == [{"call": fake.TOOL_NAME, "arguments": fake.TOOL_ARGUMENTS}]
    text = fake.STREAM_TEXT if mode == "streamed" else fake.ANSWER_TEXT
    assert answer_items(two[OUTPUT]) == [{"text": text}]
    # One owner per call's content: the client instrumentation enriching the SDK's step records nothing of its
    # own, so every (span, role) is captured once, and the input once per model call.
    keys = [(span_id, role) for span_id, _, role, _ in sink.records]
    assert len(keys) == len(set(keys))
    assert [name for name, role in sink.roles() if role == INPUT] == [f"chat {MODEL}"] * 2


@pytest.mark.parametrize("api", ["scripted", "chat_completions", "responses"])
@pytest.mark.parametrize("mode", ["async", "streamed"])
def test_without_sensitive_data_nothing_is_captured(
    spans: Spans,
    both_instrumented: object,
    server: FakeModelServer,
    sink: RecordingSink,
    api: str,
    mode: str,
) -> None:
    client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url)
    model: Any = scripted(*weather_steps())
    if api != "scripted":
        model_class = OpenAIChatCompletionsModel if api == "chat_completions" else OpenAIResponsesModel
        model = model_class(model=MODEL, openai_client=client)
    config = RunConfig(group_id=CONVERSATION, trace_include_sensitive_data=False)
    run(weather_agent(model, tools=[get_weather]), mode, config)
    assert len(spans.finished()) == 6
    assert sink.records == []  # not from the SDK's span data, nor from the client inside its steps


def test_a_tool_error_fed_back_to_the_model_is_its_result(
    spans: Spans, instrumented: object, sink: RecordingSink
) -> None:
    model = scripted(
        ModelStep(output=[function_call("broken_tool", {"city": "Paris"}, call_id="call_b")]),
        ModelStep(output=[assistant_message("The service is down.")]),
    )
    assert run(weather_agent(model, tools=[broken_tool]), "async").final_output == "The service is down."
    (tool,) = named(spans.finished(), "execute_tool broken_tool")
    # What the SDK told the model (its default error function keeps the exception's text from it).
    fed_back = default_tool_error_function(None, ValueError())  # type: ignore[arg-type]
    assert sink.for_span(tool) == {ARGUMENTS: '{"city":"Paris"}', RESULT: fed_back}


def test_a_tool_error_that_ends_the_run_is_the_sdks_error_record(
    spans: Spans, instrumented: object, sink: RecordingSink
) -> None:
    def check_weather(city: str) -> str:
        """A tool whose failure ends the run."""
        raise ConnectionError(f"weather service down {fake.SENTINEL_ERROR}")

    model = scripted(ModelStep(output=[function_call("check_weather", {"city": "Paris"}, call_id="call_c")]))
    with pytest.raises(agents.UserError):
        run(weather_agent(model, tools=[function_tool(check_weather, failure_error_function=None)]), "async")
    finished = spans.finished()
    (tool,) = named(finished, "execute_tool check_weather")
    error = f"weather service down {fake.SENTINEL_ERROR}"
    assert sink.for_span(tool) == {
        ARGUMENTS: '{"city":"Paris"}',
        RESULT: {"message": "Error running tool", "data": {"tool_name": "check_weather", "error": error}},
    }
    assert fake.SENTINEL_ERROR not in dump(finished)


def test_content_of_a_response_step_names_its_tools(spans: Spans, instrumented: object, sink: RecordingSink) -> None:
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": True}
    answer = {"type": "message", "id": "m1", "role": "assistant", "status": "completed", "content": []}
    response = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": MODEL,
            "instructions": "Be brief.",
            "output": [answer],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [tool],
        }
    )
    with agents_trace("workflow"), response_span(response=response) as span:
        span.span_data.input = [{"role": "user", "content": "Hi"}]
    (llm,) = spans.finished()
    captured = sink.for_span(llm)
    assert captured[INPUT] == [{"role": "user", "content": "Hi"}]
    assert captured[SYSTEM] == "Be brief."
    assert [t["name"] for t in captured[TOOLS]] == ["get_weather"]
    assert [item["id"] for item in captured[OUTPUT]] == ["m1"]


def test_content_never_reaches_a_span(
    spans: Spans, both_instrumented: object, server: FakeModelServer, sink: RecordingSink
) -> None:
    @function_tool
    def get_weather(city: str, unit: str) -> str:
        """The weather in a city."""
        return f"sunny {fake.SENTINEL_TOOL_RESULT}"

    client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url)
    agent = Agent(
        name="weather_agent",
        instructions=fake.SENTINEL_INSTRUCTIONS,
        model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        tools=[get_weather],
    )
    asyncio.run(Runner.run(agent, fake.SENTINEL_PROMPT, run_config=RunConfig(group_id=CONVERSATION)))
    captured = repr(sink.records)
    exported = dump(spans.finished())
    for sentinel in (
        fake.SENTINEL_PROMPT,
        fake.SENTINEL_INSTRUCTIONS,
        fake.SENTINEL_TOOL_ARGS,
        fake.SENTINEL_TOOL_RESULT,
        fake.SENTINEL_OUTPUT,
    ):
        assert sentinel in captured, sentinel
        assert sentinel not in exported, sentinel


def _shape(spans: Spans) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Every finished span's name and attributes, in start order."""
    return [(s.name, sorted(attrs(s).items())) for s in by_start(spans.finished())]


def test_capture_off_captures_nothing_and_capture_on_changes_no_span(
    spans: Spans, instrumented: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(_content, "capture", lambda *args: calls.append(args))
    run(weather_agent(scripted(*weather_steps()), tools=[get_weather]), "async")
    assert calls == []  # off: not even a call into the seam
    off = _shape(spans)
    spans.exporter.clear()
    monkeypatch.undo()
    sink = RecordingSink()
    _content.install(sink)
    try:
        run(weather_agent(scripted(*weather_steps()), tools=[get_weather]), "async")
    finally:
        _content.uninstall(sink)
    assert sink.records
    assert _shape(spans) == off


class _BrokenSink:
    def record(self, span: Any, role: str, value: Any) -> None:
        raise RuntimeError(f"sink failure {fake.SENTINEL_TOOL_RESULT}")


@pytest.mark.parametrize("mode", ["async", "streamed"])
def test_a_failing_sink_never_reaches_the_agent(
    spans: Spans, both_instrumented: object, server: FakeModelServer, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url)
    agent = weather_agent(OpenAIChatCompletionsModel(model=MODEL, openai_client=client), tools=[get_weather])
    sink = _BrokenSink()
    _content.install(sink)
    try:
        result = run(agent, mode)
    finally:
        _content.uninstall(sink)
    assert result.final_output == (fake.STREAM_TEXT if mode == "streamed" else fake.ANSWER_TEXT)
    assert [name for _, name in tree(spans.finished())] == [
        "invoke_agent weather_agent",
        "agent.iteration",
        f"chat {MODEL}",
        "execute_tool get_weather",
        "agent.iteration",
        f"chat {MODEL}",
    ]
    assert "RuntimeError" in caplog.text
    assert fake.SENTINEL_TOOL_RESULT not in caplog.text
