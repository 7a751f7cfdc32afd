"""Semantic Kernel traced by its own OpenTelemetry output (to the global provider only): a
``ChatCompletionAgent`` named ``a.agent`` with a plugin of the two functions (the failing one's error goes back to
the model), ``OpenAIChatCompletion`` at the scripted server, auto function calling, a thread with the session id.
SK offers a plugin's function to the model as ``{plugin}-{function}``: the declared names are such, split here."""

from __future__ import annotations

import os

os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS"] = "true"  # read when SK's settings load
os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE"] = "false"
os.environ["AZURE_TELEMETRY_DISABLED"] = "true"  # no SK user-agent telemetry header

import asyncio

import contract_app as c
from openai import AsyncOpenAI
from semantic_kernel.agents import ChatCompletionAgent, ChatHistoryAgentThread
from semantic_kernel.connectors.ai import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion, OpenAIChatPromptExecutionSettings
from semantic_kernel.functions import KernelArguments, KernelPlugin, kernel_function

a = c.args()
diag = c.configure(a, set_global=True)

plugin, weather = a.weather.split("-", 1)
plugin_too, lookup = a.lookup.split("-", 1)
assert plugin == plugin_too, (a.weather, a.lookup)


async def run() -> None:
    functions = [
        kernel_function(c.get_weather, name=weather, description=c.SENTINEL_TOOL_DESCRIPTION),
        kernel_function(c.lookup_city, name=lookup, description="Look a city up."),
    ]
    client = AsyncOpenAI(api_key=c.SENTINEL_API_KEY, base_url=a.base_url, max_retries=0)
    settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    agent = ChatCompletionAgent(
        service=OpenAIChatCompletion(ai_model_id="gpt-4o-mini", async_client=client),
        name=a.agent,
        instructions=c.SENTINEL_SYSTEM,
        plugins=[KernelPlugin(name=plugin, functions=functions)],
        arguments=KernelArguments(settings=settings),
    )
    thread = ChatHistoryAgentThread(thread_id=c.SENTINEL_CONVERSATION)
    await agent.get_response(messages=c.SENTINEL_PROMPT, thread=thread)
    await client.close()


try:
    asyncio.run(run())
finally:
    diag.shutdown()
