"""AutoGen AgentChat traced by ``AutoGenAgentChatInstrumentor``: run by ``test_autogen_agentchat.py`` in its own
environment (``tests/envs/contract-autogen.txt``: autogen-core's protobuf pin cannot share the dev venv)::

    python autogen_agentchat_app.py <mode> <store path> <otlp endpoint> <fake openai base url>

``<mode>``: ``one`` (one ``AssistantAgent.run``), ``stream`` (one ``run_stream`` with a streaming model client),
``gather`` (two agents under ``asyncio.gather``), ``team`` (a ``RoundRobinGroupChat`` of one agent, one turn) or
``zero-code`` (one ``run`` and no tracing code: the app runs under ``opentelemetry-instrument``, whose configurator
builds the pipeline from the environment; store and endpoint arguments are then ignored). The pipeline is the global
provider in every mode, so autogen-core's own spans would reach it. Agents use autogen-ext's real
``OpenAIChatCompletionClient`` (the real ``openai`` client) against the fake server in the test's process; their
tools are ``get_weather`` and ``lookup_city`` (which raises; AutoGen hands the error to the model), and
``reflect_on_tool_use=True``: the second model call answers the tool results. Sentinels sit in the prompt, the
system message, a tool's description and the failing tool's message. The app prints one JSON line: the agents'
answers and the wrappers still on after ``uninstrument()``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the shared sentinels

from fakes import openai_server as fake

import otel_agentdiag

HASH_KEY = b"5b2e0c6f1d8a4b7e9c3f2a1d0e6b8c4f7a9d2e1c3b5f8a0d6e4c2b9f1a7d3e5c"
AGENT = "weather_agent"
PROMPT = f"{fake.SENTINEL_PROMPT} weather in /home/alice?"
FAILING_TOOL_ERROR = f"lookup failed for {fake.SENTINEL_USER}"


def get_weather(city: str, unit: str = "celsius") -> str:
    return f"{fake.SENTINEL_TOOL_RESULT}: sunny in {city}"


def lookup_city(city: str, unit: str = "celsius") -> str:
    raise LookupError(FAILING_TOOL_ERROR)


def agent(base_url: str, name: str, *, stream: bool = False) -> Any:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.tools import FunctionTool
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if stream else {}
    client = OpenAIChatCompletionClient(
        model="gpt-4o-mini", base_url=base_url, api_key=fake.SENTINEL_API_KEY, max_retries=0, **extra
    )
    return AssistantAgent(
        name=name,
        model_client=client,
        tools=[
            FunctionTool(get_weather, description=fake.SENTINEL_TOOL_DESCRIPTION),
            FunctionTool(lookup_city, description="Look a city up."),
        ],
        system_message=fake.SENTINEL_SYSTEM,
        reflect_on_tool_use=True,
        model_client_stream=stream,
    )


def text(result: Any) -> str:
    return str(result.messages[-1].content)


async def run(mode: str, base_url: str) -> list[str]:
    if mode in ("one", "zero-code"):
        return [text(await agent(base_url, AGENT).run(task=PROMPT))]
    if mode == "stream":
        from autogen_agentchat.base import TaskResult

        results = [m async for m in agent(base_url, AGENT, stream=True).run_stream(task=PROMPT)]
        assert isinstance(results[-1], TaskResult)
        return [text(results[-1])]
    if mode == "team":
        from autogen_agentchat.teams import RoundRobinGroupChat

        team = RoundRobinGroupChat([agent(base_url, AGENT)], max_turns=1, name="weather_team")
        return [text(await team.run(task=PROMPT))]
    agents = [agent(base_url, AGENT), agent(base_url, "city_agent")]
    answers = await asyncio.gather(*(a.run(task=PROMPT) for a in agents))
    return [text(answer) for answer in answers]


def main() -> None:
    mode = sys.argv[1]
    store, endpoint, base_url = sys.argv[2:5]
    if mode == "zero-code":
        print(json.dumps({"answers": asyncio.run(run(mode, base_url))}))
        return
    from otel_agentdiag.instrumentation.autogen_agentchat import AutoGenAgentChatInstrumentor

    diag = otel_agentdiag.configure(
        service_name="autogen-test", store=store, otlp_endpoint=endpoint, hash_key=HASH_KEY, set_global=True
    )
    instrumentor = AutoGenAgentChatInstrumentor()
    instrumentor.instrument(tracer_provider=diag.tracer_provider)
    try:
        answers = asyncio.run(run(mode, base_url))
    finally:
        instrumentor.uninstrument()
        diag.shutdown()
    print(json.dumps({"answers": answers, "still_wrapped": still_wrapped()}))


def still_wrapped() -> list[str]:
    """The wrapped methods a wrapt wrapper is still on after ``uninstrument()`` (none, when it reverts)."""
    from autogen_agentchat.agents import AssistantAgent, BaseChatAgent
    from autogen_agentchat.agents import _base_chat_agent as agents_module
    from autogen_agentchat.teams import BaseGroupChat
    from autogen_core.tools import BaseStreamTool, BaseTool
    from autogen_core.tools import _base as tools_module
    from autogen_ext.models.openai import BaseOpenAIChatCompletionClient
    from wrapt import FunctionWrapper

    places: list[tuple[Any, str]] = [
        (BaseChatAgent, "run"),
        (BaseChatAgent, "run_stream"),
        (AssistantAgent, "on_messages"),
        (AssistantAgent, "on_messages_stream"),
        (BaseGroupChat, "run"),
        (BaseGroupChat, "run_stream"),
        (BaseTool, "run_json"),
        (BaseStreamTool, "run_json_stream"),
        (BaseOpenAIChatCompletionClient, "create"),
        (BaseOpenAIChatCompletionClient, "create_stream"),
        (agents_module, "trace_invoke_agent_span"),
        (tools_module, "trace_tool_span"),
    ]
    return [f"{getattr(t, '__name__', t)}.{m}" for t, m in places if isinstance(vars(t).get(m), FunctionWrapper)]


if __name__ == "__main__":
    main()
