"""A small Google ADK agent run for ``test_google_adk``, inside the isolated ``google_adk`` environment.

``python google_adk_app.py MODE STORE OTLP_ENDPOINT MODEL_BASE_URL HASH_KEY_HEX``: ``configure()`` (our provider
made global, as ADK needs), :class:`~otel_agentdiag.instrumentation.google_adk.GoogleADKInstrumentor`, then one
``LlmAgent`` (MODE ``single``) or two under ``asyncio.gather`` (MODE ``gather``), each with a ``Runner`` over an
``InMemorySessionService`` and ADK's ``LiteLlm`` model (``openai/gpt-4o-mini``) posting to the fake model server on
127.0.0.1. The server asks for ``get_weather`` twice, then ``lookup_city``, which raises: ADK fails the run with
the tool's exception. Prints one JSON line: per agent, the type of the exception the run raised.

MODE ``zero-code``: one agent, and no tracing code at all (otel_agentdiag is not imported): the script runs under
``opentelemetry-instrument``, whose configurator builds the pipeline from the environment and whose entry point
``agentdiag_google_adk`` loads the instrumentor; STORE, OTLP_ENDPOINT and HASH_KEY_HEX are then ignored.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the price table at import
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the fakes' sentinels

from fakes import openai_server as fake

AGENTS = ("weather_agent", "travel_agent")
FAILING_TOOL_ERROR = f"lookup failed for {fake.SENTINEL_USER} in /home/alice"


def get_weather(city: str, unit: str) -> dict[str, Any]:
    """Weather of a city. SENTINEL-TOOLDESC-52ae"""
    return {"result": fake.SENTINEL_TOOL_RESULT}


def lookup_city(city: str, unit: str) -> dict[str, Any]:
    """Look a city up."""
    raise LookupError(FAILING_TOOL_ERROR)


async def run_agent(name: str, session_id: str, base_url: str) -> str:
    from google.adk.agents import LlmAgent
    from google.adk.models.lite_llm import LiteLlm
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    model = LiteLlm(model="openai/gpt-4o-mini", api_base=base_url, api_key=fake.SENTINEL_API_KEY)
    agent = LlmAgent(name=name, model=model, instruction=fake.SENTINEL_SYSTEM, tools=[get_weather, lookup_city])
    sessions = InMemorySessionService()
    await sessions.create_session(app_name="weather_app", user_id=fake.SENTINEL_USER, session_id=session_id)
    runner = Runner(agent=agent, app_name="weather_app", session_service=sessions)
    message = types.Content(role="user", parts=[types.Part(text=f"{fake.SENTINEL_PROMPT} weather in /home/alice?")])
    try:
        async for _ in runner.run_async(user_id=fake.SENTINEL_USER, session_id=session_id, new_message=message):
            pass
    except LookupError as exc:
        return type(exc).__name__ if str(exc) == FAILING_TOOL_ERROR else "altered"
    return "no error"


async def main(mode: str, base_url: str) -> list[str]:
    if mode in ("single", "zero-code"):
        return [await run_agent(AGENTS[0], fake.SENTINEL_CONVERSATION, base_url)]
    return list(
        await asyncio.gather(
            *(run_agent(name, f"{fake.SENTINEL_CONVERSATION}-{n}", base_url) for n, name in enumerate(AGENTS))
        )
    )


def traced(mode: str, store: str, endpoint: str, base_url: str, key: str) -> list[str]:
    """Run ``mode`` with the pipeline and the instrumentor set up in code."""
    import otel_agentdiag
    from otel_agentdiag.instrumentation.google_adk import GoogleADKInstrumentor

    diag = otel_agentdiag.configure(
        service_name="google-adk-test", store=store, otlp_endpoint=endpoint, hash_key=bytes.fromhex(key)
    )
    instrumentor = GoogleADKInstrumentor()
    instrumentor.instrument()
    try:
        return asyncio.run(main(mode, base_url))
    finally:
        instrumentor.uninstrument()
        diag.shutdown()
        still = still_wrapped()
        if still:  # uninstrument() must take every wrapper of ours off
            raise SystemExit(f"still wrapped after uninstrument(): {still}")


def still_wrapped() -> list[str]:
    """The ADK methods a wrapt wrapper is still on after ``uninstrument()`` (none, when it reverts)."""
    from google.adk.flows.llm_flows.base_llm_flow import BaseLlmFlow
    from google.adk.runners import Runner
    from wrapt import FunctionWrapper

    places = {"Runner.run_async": vars(Runner).get("run_async")}
    places["BaseLlmFlow._run_one_step_async"] = vars(BaseLlmFlow).get("_run_one_step_async")
    return [name for name, value in places.items() if isinstance(value, FunctionWrapper)]


if __name__ == "__main__":
    mode, store, endpoint, base_url, key = sys.argv[1:6]
    if mode == "zero-code":
        outcomes = asyncio.run(main(mode, base_url))
    else:
        outcomes = traced(mode, store, endpoint, base_url, key)
    print(json.dumps({"outcomes": outcomes}))
