"""AutoGen AgentChat: an ``AssistantAgent`` with two ``FunctionTool`` s (the second raising: AutoGen hands the error
to the model) and ``reflect_on_tool_use=True`` (the second model call answers the tool results), with
``OpenAIChatCompletionClient``, traced by openinference-instrumentation-autogen-agentchat plus autogen-core's own
GenAI spans (which go to the global provider only). AgentChat has no session id: OpenInference's ``using_session``."""

from __future__ import annotations

import asyncio

import contract_app as c
from autogen_agentchat.agents import AssistantAgent
from autogen_core.tools import FunctionTool
from autogen_ext.models.openai import OpenAIChatCompletionClient
from openinference.instrumentation import using_session
from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor


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
    diag = c.configure(a, set_global=True)  # autogen-core's spans: trace.get_tracer("autogen-core")
    AutogenAgentChatInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    try:
        with using_session(c.SENTINEL_CONVERSATION):
            asyncio.run(run(a))
    finally:
        AutogenAgentChatInstrumentor().uninstrument()
        diag.shutdown()


if __name__ == "__main__":
    main()
