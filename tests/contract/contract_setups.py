"""The setups the contract suite runs: one framework each, traced the way docs/integrations.md says.

A setup runs one agent run of the :mod:`contract_server` script through the pipeline the harness configured
(``diag``: ``configure()`` to a real store and a real OTLP receiver, strict policy) and instruments what it needs,
undoing it before it returns. ``short`` names the checks it is known to miss, each with the reason (a third-party
instrumentor that records no usage, say): the suite expects exactly those to fail, so a fix shows as a test to
update, and docs/integrations.md's table says the same.

Adding a framework adds a setup here, not a copy of the tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contract_checks import Truth
from contract_server import ContractServer
from fakes import openai_server as fake

import otel_agentdiag as agentdiag


@dataclass(frozen=True)
class Target:
    """Where a setup's run goes: the scripted server's addresses (the pipeline is configured already), and the
    names its code declares (unique per setup: the name registry is one per process)."""

    base_url: str
    anthropic_base_url: str
    truth: Truth

    @property
    def agent(self) -> str:
        return self.truth.agent or "weather_agent"

    @property
    def weather(self) -> str:
        return self.truth.tools[0]

    @property
    def lookup(self) -> str:
        return self.truth.tools[1]


@dataclass(frozen=True)
class Setup:
    name: str
    """The row's name: the framework, and how it is traced."""
    version_of: tuple[str, ...]
    """The distributions the setup is about."""
    run: Callable[[Any, Target], None] | None = None
    """In this process: run the agent through the configured pipeline (``diag``)."""
    truth: Truth = field(default_factory=Truth)
    short: Mapping[str, str] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    """Modules the setup needs in this process (the test skips without them)."""
    env: str | None = None
    """A framework whose pins cannot share the dev venv: the environment ``tests/envs/<env>.txt``
    (``tests/isolated_envs.py``), where ``app`` runs instead of ``run``."""
    app: str | None = None
    """With ``env``: the script, in ``tests/contract/apps/``, run as ``python APP STORE OTLP_ENDPOINT BASE_URL
    ANTHROPIC_BASE_URL NAMES_JSON`` (``{"agent", "tools"}``, the names to declare); it configures the pipeline
    itself (``contract_app.configure``), runs the agent once, shuts down, exits 0."""
    server: type[ContractServer] = ContractServer
    """The scripted model server: a subclass when a framework's loop needs the script said otherwise (a final
    answer given as a tool call, say), never a different run: two model calls, two tool calls, one failing."""


def get_weather(city: str, unit: str = "celsius") -> str:
    return f"{fake.SENTINEL_TOOL_RESULT}: sunny in {city}"


def lookup_city(city: str, unit: str = "celsius") -> str:
    raise ValueError(f"lookup failed for {fake.SENTINEL_TOOL_RESULT}")


def _tools(target: Target) -> dict[str, Callable[..., str]]:
    return {target.weather: get_weather, target.lookup: lookup_city}


def _openai_tools(target: Target) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}
    return [
        {
            "type": "function",
            "function": {"name": n, "description": fake.SENTINEL_TOOL_DESCRIPTION, "parameters": schema},
        }
        for n in _tools(target)
    ]


def openai_loop(diag: Any, target: Target) -> None:
    """The tutorial loop with the OpenAI SDK: tools offered in the request, names taken from the model's answer
    (no ``register_names``), each tool run under ``tool_call``; a failing tool's error goes back to the model."""
    import openai

    from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    try:
        client = openai.OpenAI(api_key=fake.SENTINEL_API_KEY, base_url=target.base_url)
        messages: list[Any] = [{"role": "user", "content": fake.SENTINEL_PROMPT}]
        tools = _tools(target)
        with agentdiag.agent_run(target.agent, conversation_id=fake.SENTINEL_CONVERSATION):
            for i in range(4):
                with agentdiag.iteration(i):
                    response = client.chat.completions.create(
                        model="gpt-4o-mini", messages=messages, tools=_openai_tools(target)
                    )
                    message = response.choices[0].message
                    if not message.tool_calls:
                        return
                    messages.append(message.model_dump(exclude_none=True))
                    for call in message.tool_calls:
                        try:
                            with agentdiag.tool_call(call.function.name, call_id=call.id):
                                result = tools[call.function.name](**json.loads(call.function.arguments))
                        except ValueError:
                            result = "error"
                        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    finally:
        OpenAIInstrumentor().uninstrument()


def anthropic_loop(diag: Any, target: Target) -> None:
    """The same loop with the Anthropic SDK (its own telemetry off: ``open_telemetry=False``)."""
    import anthropic

    from otel_agentdiag.instrumentation.anthropic import AnthropicInstrumentor

    AnthropicInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    try:
        client = anthropic.Anthropic(
            api_key=fake.SENTINEL_API_KEY, base_url=target.anthropic_base_url, open_telemetry=False
        )
        schema = {"type": "object", "properties": {"city": {"type": "string"}}}
        declared = _tools(target)
        tools = [{"name": n, "description": fake.SENTINEL_TOOL_DESCRIPTION, "input_schema": schema} for n in declared]
        messages: list[Any] = [{"role": "user", "content": fake.SENTINEL_PROMPT}]
        with agentdiag.agent_run(target.agent, conversation_id=fake.SENTINEL_CONVERSATION):
            for i in range(4):
                with agentdiag.iteration(i):
                    answer = client.messages.create(
                        model="claude-haiku-4-5", max_tokens=256, messages=messages, tools=tools
                    )
                    uses = [b for b in answer.content if b.type == "tool_use"]
                    if not uses:
                        return
                    messages.append({"role": "assistant", "content": [b.model_dump() for b in answer.content]})
                    results = []
                    for use in uses:
                        try:
                            with agentdiag.tool_call(use.name, call_id=use.id):
                                content = declared[use.name](**use.input)
                        except ValueError:
                            content = "error"
                        results.append({"type": "tool_result", "tool_use_id": use.id, "content": content})
                    messages.append({"role": "user", "content": results})
    finally:
        AnthropicInstrumentor().uninstrument()


ANTHROPIC_TOKENS = tuple(
    (u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens, u.output_tokens)
    for u in (fake.ANTHROPIC_TOOL_USE_USAGE, fake.ANTHROPIC_USAGE)
)
"""Anthropic's input tokens per the conventions: the whole prompt (input, cache read, cache creation)."""

SETUPS: dict[str, Setup] = {
    setup.name: setup
    for setup in (
        Setup(
            "OpenAI SDK, a hand-written loop (ours)",
            ("openai",),
            openai_loop,
            requires=("openai",),
        ),
        Setup(
            "Anthropic SDK, a hand-written loop (ours)",
            ("anthropic",),
            anthropic_loop,
            truth=Truth(tokens=ANTHROPIC_TOKENS),
            requires=("anthropic",),
        ),
    )
}


def _agents_sdk(diag: Any, target: Target, *, peer: str | None) -> None:
    """The OpenAI Agents SDK: an ``Agent`` with two function tools (one raising; the SDK tells the model) and the
    real ``OpenAIChatCompletionsModel``; traced by our instrumentor, or (``peer``) by OpenInference's."""
    import asyncio

    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
    from agents.tracing import get_trace_provider, set_trace_processors
    from openai import AsyncOpenAI

    @function_tool(name_override=target.weather, description_override=fake.SENTINEL_TOOL_DESCRIPTION)
    def get_weather(city: str, unit: str) -> str:
        return f"sunny {fake.SENTINEL_TOOL_RESULT}"

    @function_tool(name_override=target.lookup)
    def lookup_city(city: str, unit: str) -> str:
        """Look a city up."""
        raise ValueError(f"lookup failed {fake.SENTINEL_TOOL_RESULT}")

    before = list(get_trace_provider()._multi_processor._processors)  # type: ignore[attr-defined]
    set_trace_processors([])  # never the SDK's default exporter (it would send traces to OpenAI)
    if peer is None:
        from otel_agentdiag.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        instrumentor: Any = OpenAIAgentsInstrumentor()
        instrumentor.instrument(tracer_provider=diag.tracer_provider)
    else:
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor as Peer

        instrumentor = Peer()
        instrumentor.instrument(tracer_provider=diag.tracer_provider)

    async def run() -> None:
        client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=target.base_url, max_retries=0)
        agent = Agent(
            name=target.agent,
            instructions=fake.SENTINEL_SYSTEM,
            model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
            model_settings=ModelSettings(include_usage=True),
            tools=[get_weather, lookup_city],
        )
        config = RunConfig(group_id=fake.SENTINEL_CONVERSATION)
        await Runner.run(agent, fake.SENTINEL_PROMPT, run_config=config)
        await client.close()

    try:
        asyncio.run(run())
    finally:
        instrumentor.uninstrument()
        set_trace_processors(before)


SETUPS.update(
    {
        setup.name: setup
        for setup in (
            Setup(
                "OpenAI Agents SDK (ours)",
                ("openai-agents",),
                lambda diag, target: _agents_sdk(diag, target, peer=None),
                requires=("agents",),
            ),
            Setup(
                "OpenAI Agents SDK (OpenInference)",
                ("openai-agents", "openinference-instrumentation-openai-agents"),
                lambda diag, target: _agents_sdk(diag, target, peer="openinference"),
                requires=("agents", "openinference.instrumentation.openai_agents"),
                short={
                    "error": "the instrumentor records a failed tool as status text only: no exception event or type",
                    "receipt": "the instrumentor does not record the run's group_id: the run has no conversation",
                },
            ),
        )
    }
)


def _langgraph(diag: Any, target: Target, *, peer: str | None) -> None:
    """LangChain 1.x ``create_agent`` (LangGraph) with ``ChatOpenAI`` and two tools (one raising a
    ``ToolException`` the tool node hands back to the model); traced by our instrumentor or OpenInference's."""
    from langchain.agents import create_agent
    from langchain_core.tools import ToolException, tool
    from langchain_openai import ChatOpenAI

    @tool(target.weather, description=fake.SENTINEL_TOOL_DESCRIPTION)
    def get_weather(city: str, unit: str) -> str:
        return f"sunny {fake.SENTINEL_TOOL_RESULT}"

    @tool(target.lookup)
    def lookup_city(city: str, unit: str) -> str:
        """Look a city up."""
        raise ToolException(f"lookup failed {fake.SENTINEL_TOOL_RESULT}")

    lookup_city.handle_tool_error = True
    if peer is None:
        from otel_agentdiag.instrumentation.langchain import LangChainInstrumentor

        instrumentor: Any = LangChainInstrumentor()
    else:
        from openinference.instrumentation.langchain import LangChainInstrumentor as Peer

        instrumentor = Peer()
    instrumentor.instrument(tracer_provider=diag.tracer_provider)
    try:
        model = ChatOpenAI(model="gpt-4o-mini", api_key=fake.SENTINEL_API_KEY, base_url=target.base_url, max_retries=0)
        agent = create_agent(
            model, tools=[get_weather, lookup_city], system_prompt=fake.SENTINEL_SYSTEM, name=target.agent
        )
        config = {"configurable": {"thread_id": fake.SENTINEL_CONVERSATION}}
        agent.invoke({"messages": [("user", fake.SENTINEL_PROMPT)]}, config)
    finally:
        instrumentor.uninstrument()


SETUPS.update(
    {
        setup.name: setup
        for setup in (
            Setup(
                "LangChain / LangGraph create_agent (ours)",
                ("langchain", "langgraph", "langchain-openai"),
                lambda diag, target: _langgraph(diag, target, peer=None),
                requires=("langchain", "langgraph", "langchain_openai"),
            ),
            Setup(
                "LangChain / LangGraph create_agent (OpenInference)",
                ("langchain", "langgraph", "openinference-instrumentation-langchain"),
                lambda diag, target: _langgraph(diag, target, peer="openinference"),
                requires=("langchain", "langgraph", "langchain_openai", "openinference.instrumentation.langchain"),
                short={
                    "names": "the agent span is named after the graph's run name, which a call may set: data",
                    "error": "a tool error LangChain hands back to the model is recorded as a call that succeeded",
                },
            ),
        )
    }
)


def _pydantic_ai(diag: Any, target: Target) -> None:
    """Pydantic AI: an ``Agent`` with two plain tools (one raising ``ModelRetry``, Pydantic AI's way to tell the
    model) and ``OpenAIChatModel``, traced through its own OpenTelemetry output (our instrumentor)."""
    import asyncio

    from openai import AsyncOpenAI
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from otel_agentdiag.instrumentation.pydantic_ai import PydanticAIInstrumentor

    PydanticAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    try:

        async def run() -> None:
            client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=target.base_url, max_retries=0)
            model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))
            agent: Agent[None, str] = Agent(model, name=target.agent, instructions=fake.SENTINEL_SYSTEM)

            @agent.tool_plain(name=target.weather, description=fake.SENTINEL_TOOL_DESCRIPTION)
            def weather(city: str, unit: str) -> str:
                return f"sunny {fake.SENTINEL_TOOL_RESULT}"

            @agent.tool_plain(name=target.lookup, sequential=True)
            def lookup(city: str, unit: str) -> str:
                raise ModelRetry(f"lookup failed {fake.SENTINEL_TOOL_RESULT}")

            await agent.run(fake.SENTINEL_PROMPT, conversation_id=fake.SENTINEL_CONVERSATION)
            await client.close()

        asyncio.run(run())
    finally:
        PydanticAIInstrumentor().uninstrument()


def _llama_index(diag: Any, target: Target) -> None:
    """LlamaIndex: a ``FunctionAgent`` (not streaming) with two ``FunctionTool`` s (one raising: the agent tells
    the model) and a function-calling LLM that calls the scripted server through the ``openai`` client, traced by
    our instrumentor with the OpenAI instrumentor on too."""
    import asyncio

    import openai
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms import ChatMessage, ChatResponse, MessageRole
    from llama_index.core.llms.llm import ToolSelection
    from llama_index.core.tools import FunctionTool
    from llama_index_agent import ScriptedLLM

    from otel_agentdiag.instrumentation.llama_index import LlamaIndexInstrumentor
    from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

    class WireLLM(ScriptedLLM):
        """Asks the scripted server, through the real openai client, and answers what it said."""

        def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            client = openai.OpenAI(api_key=fake.SENTINEL_API_KEY, base_url=target.base_url, max_retries=0)
            wire: list[dict[str, Any]] = [{"role": "user", "content": fake.SENTINEL_PROMPT}]
            if any(m.role == MessageRole.TOOL for m in messages):
                wire.append({"role": "tool", "tool_call_id": "x", "content": "done"})
            response = client.chat.completions.create(model="gpt-4o-mini", messages=wire, tools=_openai_tools(target))
            message = response.choices[0].message
            calls = [
                {"tool_id": c.id, "tool_name": c.function.name, "tool_kwargs": json.loads(c.function.arguments)}
                for c in message.tool_calls or []
            ]
            usage = response.usage
            raw = {"usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}}
            chat = ChatMessage(
                role=MessageRole.ASSISTANT, content=message.content or "", additional_kwargs={"tool_calls": calls}
            )
            return ChatResponse(message=chat, raw=raw)

        def get_tool_calls_from_response(self, response: Any, error_on_no_tool_call: bool = True, **kwargs: Any) -> Any:
            return [ToolSelection(**c) for c in response.message.additional_kwargs.get("tool_calls", [])]

    LlamaIndexInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    OpenAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    try:
        tools = [
            FunctionTool.from_defaults(get_weather, name=target.weather, description=fake.SENTINEL_TOOL_DESCRIPTION),
            FunctionTool.from_defaults(lookup_city, name=target.lookup, description="Look a city up."),
        ]
        agent = FunctionAgent(name=target.agent, description="weather", tools=tools, llm=WireLLM(), streaming=False)

        async def run() -> None:
            await agent.run(user_msg=fake.SENTINEL_PROMPT)

        asyncio.run(run())
    finally:
        OpenAIInstrumentor().uninstrument()
        LlamaIndexInstrumentor().uninstrument()


SETUPS.update(
    {
        setup.name: setup
        for setup in (
            Setup(
                "Pydantic AI (ours)",
                ("pydantic-ai-slim",),
                _pydantic_ai,
                requires=("pydantic_ai",),
            ),
            Setup(
                "LlamaIndex FunctionAgent (ours)",
                ("llama-index-core",),
                _llama_index,
                requires=("llama_index.core",),
                truth=Truth(session=False),
            ),
        )
    }
)


def _discover() -> None:
    """Setups of frameworks that run in environments of their own live in ``setups_<framework>.py`` beside this
    module, each with a ``SETUPS`` tuple: one file per framework, so they are added without touching this one."""
    import importlib
    from pathlib import Path

    for path in sorted(Path(__file__).parent.glob("setups_*.py")):
        module = importlib.import_module(path.stem)
        for setup in module.SETUPS:
            assert setup.name not in SETUPS, setup.name
            SETUPS[setup.name] = setup


_discover()
