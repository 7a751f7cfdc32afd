"""AutoGen AgentChat traced by otel-agentdiag's own instrumentor, with our OpenAI instrumentor on too (no
OpenInference): an ``AssistantAgent`` with two ``FunctionTool`` s (the second raising: AutoGen hands the error to the
model) and ``reflect_on_tool_use=True`` (the second model call answers the tool results), with
``OpenAIChatCompletionClient``. The pipeline is the global provider, so autogen-core's own spans would reach it: the
instrumentor keeps them off. AgentChat has no conversation id (``Truth(session=False)``)."""

from __future__ import annotations

import asyncio

import contract_app as c
from autogen_agentchat.agents import AssistantAgent
from autogen_core.tools import FunctionTool
from autogen_ext.models.openai import OpenAIChatCompletionClient

from otel_agentdiag.instrumentation.autogen_agentchat import AutoGenAgentChatInstrumentor
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor


async def run(a: c.Args) -> None:
    client = OpenAIChatCompletionClient(
        model="gpt-4o-mini", base_url=a.base_url, api_key=c.SENTINEL_API_KEY, max_retries=0
    )
    agent = AssistantAgent(
        name=a.agent,
        model_client=client,
        tools=[
            FunctionTool(c.get_weather, description=c.SENTINEL_TOOL_DESCRIPTION, name=a.weather),
            FunctionTool(c.lookup_city, description="Look a city up.", name=a.lookup),
        ],
        system_message=c.SENTINEL_SYSTEM,
        reflect_on_tool_use=True,
        model_client_stream=False,
    )
    await agent.run(task=c.SENTINEL_PROMPT)
    await client.close()


def main() -> None:
    a = c.args()
    diag = c.configure(a, set_global=True)  # autogen-core's spans go to the global provider: ours
    AutoGenAgentChatInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    OpenAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    try:
        asyncio.run(run(a))
    finally:
        OpenAIInstrumentor().uninstrument()
        AutoGenAgentChatInstrumentor().uninstrument()
        diag.shutdown()


if __name__ == "__main__":
    main()
