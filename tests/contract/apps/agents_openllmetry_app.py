"""The OpenAI Agents SDK: an ``Agent`` with two function tools (the second raising: the SDK tells the model) and the
real ``OpenAIChatCompletionsModel``, traced by OpenLLMetry's ``opentelemetry-instrumentation-openai-agents`` alone,
its processor replacing the SDK's own (which would send traces to OpenAI). The run's conversation: ``group_id``."""

from __future__ import annotations

import asyncio
import os

os.environ.pop("OPENAI_API_KEY", None)  # nothing to send the SDK's own exporter's traces with, were it left on

import contract_app as c
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from openai import AsyncOpenAI
from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor


def main() -> None:
    a = c.args()
    diag = c.configure(a)

    @function_tool(name_override=a.weather, description_override=c.SENTINEL_TOOL_DESCRIPTION)
    def weather(city: str, unit: str) -> str:
        return c.get_weather(city, unit)

    @function_tool(name_override=a.lookup)
    def lookup(city: str, unit: str) -> str:
        """Look a city up."""
        return c.lookup_city(city, unit)

    instrumentor = OpenAIAgentsInstrumentor(replace_existing_processors=True)
    instrumentor.instrument(tracer_provider=diag.tracer_provider)

    async def run() -> None:
        client = AsyncOpenAI(api_key=c.SENTINEL_API_KEY, base_url=a.base_url, max_retries=0)
        agent = Agent(
            name=a.agent,
            instructions=c.SENTINEL_SYSTEM,
            model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
            model_settings=ModelSettings(include_usage=True),
            tools=[weather, lookup],
        )
        await Runner.run(agent, c.SENTINEL_PROMPT, run_config=RunConfig(group_id=c.SENTINEL_CONVERSATION))
        await client.close()

    try:
        asyncio.run(run())
    finally:
        instrumentor.uninstrument()
        diag.shutdown()


if __name__ == "__main__":
    main()
