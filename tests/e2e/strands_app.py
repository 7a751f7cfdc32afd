"""A Strands agent traced through ``configure()``: run by ``test_strands.py`` in its own environment
(``tests/envs/strands.txt``: Strands' pins cannot share the dev venv)::

    python strands_app.py <mode> <store path> <otlp endpoint> <fake openai base url>

``<mode>``: ``one`` (one agent run), ``gather`` (two agents under ``asyncio.gather``, each with its own
conversation id, Strands set to its latest conventions with content as span attributes: the most it records), or
``zero-code`` (one agent run, and no tracing code: the app runs under ``opentelemetry-instrument``, whose
configurator builds the pipeline from the environment; store and endpoint arguments are then ignored).
The agent uses Strands' real ``OpenAIModel`` (the real ``openai`` client, streaming) against the fake server in
the test's process; its tools are ``get_weather`` (asked twice) and ``lookup_city`` (which raises). Sentinels
sit in the prompt, the system prompt, a tool's description, the failing tool's message, the conversation id and
the user id. The app prints one JSON line: the agents' answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

MODE = sys.argv[1]
if MODE == "gather":  # before strands is imported: its tracer reads the setting once
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = (
        "gen_ai_latest_experimental,gen_ai_tool_definitions,gen_ai_span_attributes_only"
    )

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the shared sentinels

from fakes import openai_server as fake  # noqa: E402

import otel_agentdiag  # noqa: E402
from otel_agentdiag.instrumentation.strands import StrandsInstrumentor  # noqa: E402

HASH_KEY = b"5b2e0c6f1d8a4b7e9c3f2a1d0e6b8c4f7a9d2e1c3b5f8a0d6e4c2b9f1a7d3e5c"
AGENT = "weather_agent"
PROMPT = f"{fake.SENTINEL_PROMPT} weather in /home/alice?"
FAILING_TOOL_ERROR = f"lookup failed for {fake.SENTINEL_USER}"
CONVERSATIONS = (fake.SENTINEL_CONVERSATION, f"{fake.SENTINEL_CONVERSATION}-second")


def agent(base_url: str, name: str, conversation: str) -> Any:
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    @tool
    def get_weather(city: str, unit: str) -> str:
        """Weather of a city. SENTINEL-TOOLDESC-52ae

        Args:
            city: the city
            unit: celsius or fahrenheit
        """
        return f"{fake.SENTINEL_TOOL_RESULT} for {city}"

    @tool
    def lookup_city(city: str, unit: str) -> str:
        """Look a city up.

        Args:
            city: the city
            unit: celsius or fahrenheit
        """
        raise LookupError(FAILING_TOOL_ERROR)

    model = OpenAIModel(
        client_args={"api_key": fake.SENTINEL_API_KEY, "base_url": base_url, "max_retries": 0},
        model_id="gpt-4o-mini",
    )
    return Agent(
        model=model,
        tools=[get_weather, lookup_city],
        name=name,
        system_prompt=fake.SENTINEL_SYSTEM,
        trace_attributes={"session.id": conversation, "user.id": fake.SENTINEL_USER},
        callback_handler=None,
    )


def main() -> None:
    store, endpoint, base_url = sys.argv[2:5]
    if MODE == "zero-code":
        print(json.dumps({"answers": [str(agent(base_url, AGENT, CONVERSATIONS[0])(PROMPT))]}))
        return
    diag = otel_agentdiag.configure(
        service_name="strands-test", store=store, otlp_endpoint=endpoint, hash_key=HASH_KEY, set_global=False
    )
    instrumentor = StrandsInstrumentor()
    instrumentor.instrument(tracer_provider=diag.tracer_provider)
    try:
        if MODE == "one":
            answers = [str(agent(base_url, AGENT, CONVERSATIONS[0])(PROMPT))]
        else:
            names = (AGENT, "city_agent")
            agents = [agent(base_url, name, conv) for name, conv in zip(names, CONVERSATIONS, strict=True)]

            async def both() -> list[Any]:
                return await asyncio.gather(*(a.invoke_async(PROMPT) for a in agents))

            answers = [str(answer) for answer in asyncio.run(both())]
    finally:
        instrumentor.uninstrument()
        diag.shutdown()
    print(json.dumps({"answers": answers, "still_wrapped": still_wrapped()}))


def still_wrapped() -> list[str]:
    """The Strands tracer methods a wrapt wrapper is still on after ``uninstrument()`` (none, when it reverts)."""
    from strands.telemetry import Tracer
    from wrapt import FunctionWrapper

    from otel_agentdiag.instrumentation.strands.patch import CUSTOM_ATTRIBUTES_AT

    return [name for name in CUSTOM_ATTRIBUTES_AT if isinstance(vars(Tracer).get(name), FunctionWrapper)]


if __name__ == "__main__":
    main()
