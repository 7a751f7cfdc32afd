"""A CrewAI crew traced by our ``CrewAIInstrumentor`` through ``configure()``: run by ``test_crewai.py`` in its own
environment (``tests/envs/contract-crewai.txt``: CrewAI's pins cannot share the dev venv)::

    python crewai_app.py <mode> <store path> <otlp endpoint> <fake openai base url>

``<mode>``: ``one`` (one crew: one agent, one task, ``crew.kickoff()``), ``gather`` (two crews under
``asyncio.gather``, one through ``kickoff_async`` and one through ``akickoff``, CrewAI's two async paths), or
``zero-code`` (one crew, and no tracing code: the app runs under ``opentelemetry-instrument``, whose configurator
builds the pipeline from the environment and loads our instrumentors from their entry points; store and endpoint
arguments are then ignored). In ``one`` and ``gather`` our OpenAIInstrumentor is on too, as a user who installs
both would have it; in ``zero-code`` the entry points bring it.

The agent uses CrewAI's native OpenAI provider (the real ``openai`` client) against the fake server in the test's
process; its tools are ``get_weather`` and ``lookup_city`` (which raises; CrewAI tells the model). Sentinels sit
in the task description (the prompt), the backstory (the system prompt), a tool's description, the tool's result
and the failing tool's message. The app prints one JSON line: the crews' answers, and (outside zero-code) which
of our wrappers are still on CrewAI's bus after ``uninstrument()``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"  # no anonymous telemetry to CrewAI
os.environ["CREWAI_DISABLE_TRACKING"] = "true"  # (crewai_core.telemetry reads either)
os.environ["CREWAI_TRACING_ENABLED"] = "false"  # no trace upload to CrewAI's service

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the shared sentinels

from fakes import openai_server as fake

MODE = sys.argv[1]
HASH_KEY = b"5b2e0c6f1d8a4b7e9c3f2a1d0e6b8c4f7a9d2e1c3b5f8a0d6e4c2b9f1a7d3e5c"
AGENT = "weather_agent"
PROMPT = f"{fake.SENTINEL_PROMPT} weather in /home/alice?"
FAILING_TOOL_ERROR = f"lookup failed for {fake.SENTINEL_USER}"


def crew(base_url: str, role: str) -> Any:
    from crewai import LLM, Agent, Crew, Task
    from crewai.tools import tool

    @tool("get_weather")
    def get_weather(city: str, unit: str = "celsius") -> str:
        """Weather of a city. SENTINEL-TOOLDESC-52ae"""
        return f"{fake.SENTINEL_TOOL_RESULT} for {city}"

    @tool("lookup_city")
    def lookup_city(city: str, unit: str = "celsius") -> str:
        """Look a city up."""
        raise LookupError(FAILING_TOOL_ERROR)

    llm = LLM(model="openai/gpt-4o-mini", base_url=base_url, api_key=fake.SENTINEL_API_KEY, max_retries=0)
    agent = Agent(
        role=role,
        goal="Answer weather questions",
        backstory=fake.SENTINEL_SYSTEM,
        tools=[get_weather, lookup_city],
        llm=llm,
        verbose=False,
        max_iter=4,
    )
    task = Task(description=PROMPT, expected_output="A short weather report.", agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=False, tracing=False)


def main() -> None:
    store, endpoint, base_url = sys.argv[2:5]
    if MODE == "zero-code":
        print(json.dumps({"answers": [str(crew(base_url, AGENT).kickoff())]}))
        return

    import otel_agentdiag
    from otel_agentdiag.instrumentation.crewai import CrewAIInstrumentor
    from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

    diag = otel_agentdiag.configure(
        service_name="crewai-test", store=store, otlp_endpoint=endpoint, hash_key=HASH_KEY, set_global=False
    )
    CrewAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    CrewAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)  # idempotent: one wrapper, one tree
    OpenAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    try:
        if MODE == "one":
            answers = [str(crew(base_url, AGENT).kickoff())]
        else:
            first, second = crew(base_url, AGENT), crew(base_url, "city_agent")

            async def both() -> list[Any]:
                return await asyncio.gather(first.kickoff_async(), second.akickoff())

            answers = [str(answer) for answer in asyncio.run(both())]
    finally:
        OpenAIInstrumentor().uninstrument()
        CrewAIInstrumentor().uninstrument()
        diag.shutdown()
    print(json.dumps({"answers": answers, "still_wrapped": still_wrapped()}))


def still_wrapped() -> list[str]:
    """The bus methods a wrapt wrapper is still on after ``uninstrument()`` (none, when it reverts)."""
    from crewai.events.event_bus import CrewAIEventsBus
    from wrapt import FunctionWrapper

    return [name for name in ("emit",) if isinstance(vars(CrewAIEventsBus).get(name), FunctionWrapper)]


if __name__ == "__main__":
    main()
