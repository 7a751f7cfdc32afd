"""Google ADK traced by our ``GoogleADKInstrumentor`` (ADK's own OpenTelemetry output, made global as ADK needs,
plus our iterations): an ``LlmAgent`` named ``a.agent`` with two function tools, one raising, whose error an
``on_tool_error_callback`` hands back to the model (ADK's way to tell it; without one the run fails), and ADK's
``LiteLlm`` model (``openai/gpt-4o-mini``) at the scripted server. One ``Runner.run_async`` over an in-memory
session whose id is the run's conversation."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the price table at import

import asyncio
from typing import Any

import contract_app as c
from google.adk.agents import LlmAgent
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from otel_agentdiag.instrumentation.google_adk import GoogleADKInstrumentor

a = c.args()
diag = c.configure(a, set_global=True)  # ADK traces into the global tracer provider


def weather(city: str, unit: str) -> dict[str, Any]:
    return {"result": c.get_weather(city, unit)}


def lookup(city: str, unit: str) -> dict[str, Any]:
    return {"result": c.lookup_city(city, unit)}


weather.__name__, weather.__doc__ = a.weather, c.SENTINEL_TOOL_DESCRIPTION  # ADK names a tool by its function
lookup.__name__, lookup.__doc__ = a.lookup, "Look a city up."


def tell_the_model(tool: Any, args: dict[str, Any], tool_context: Any, error: Exception) -> dict[str, Any]:
    return {"error": type(error).__name__}


async def run() -> None:
    model = LiteLlm(model="openai/gpt-4o-mini", api_base=a.base_url, api_key=c.SENTINEL_API_KEY)
    agent = LlmAgent(
        name=a.agent,
        model=model,
        instruction=c.SENTINEL_SYSTEM,
        tools=[weather, lookup],
        on_tool_error_callback=tell_the_model,
    )
    sessions = InMemorySessionService()
    await sessions.create_session(app_name="weather_app", user_id="user", session_id=c.SENTINEL_CONVERSATION)
    runner = Runner(agent=agent, app_name="weather_app", session_service=sessions)
    message = types.Content(role="user", parts=[types.Part(text=c.SENTINEL_PROMPT)])
    async for _ in runner.run_async(user_id="user", session_id=c.SENTINEL_CONVERSATION, new_message=message):
        pass


instrumentor = GoogleADKInstrumentor()
instrumentor.instrument()
try:
    asyncio.run(run())
finally:
    instrumentor.uninstrument()
    diag.shutdown()
