"""A smolagents app with no tracing code, traced by ``opentelemetry-instrument`` (``test_zero_code_frameworks.py``).

Run as::

    ZERO_CODE_OPENAI_URL=http://127.0.0.1:<port>/v1 PYTHONPATH=tests opentelemetry-instrument \\
        python tests/e2e/zero_code_smolagents_app.py

One ``ToolCallingAgent`` run with smolagents' ``OpenAIServerModel`` (the real ``openai`` client) against the
scripted fake model server: ``get_weather`` twice, ``lookup_city`` (which raises; the agent goes on), then
smolagents' ``final_answer``. Sentinels sit in the task, the instructions, a tool's description, the tool
arguments, results and call ids and the failing tool's message. It prints one line.
"""

from __future__ import annotations

import os

from fakes import openai_server as fake
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

AGENT = "weather_agent"
ANSWER = f"sunny {fake.SENTINEL_OUTPUT}"


@tool
def get_weather(city: str, unit: str) -> str:
    """Weather of a city. SENTINEL-TOOLDESC-52ae

    Args:
        city: the city
        unit: celsius or fahrenheit
    """
    return fake.SENTINEL_TOOL_RESULT


@tool
def lookup_city(city: str, unit: str) -> str:
    """Look a city up.

    Args:
        city: the city
        unit: celsius or fahrenheit
    """
    raise LookupError(f"lookup failed for {fake.SENTINEL_USER}")


def main() -> None:
    model = OpenAIServerModel(
        model_id="gpt-4o-mini",
        api_base=os.environ["ZERO_CODE_OPENAI_URL"],
        api_key=fake.SENTINEL_API_KEY,
        client_kwargs={"max_retries": 0},
    )
    agent = ToolCallingAgent(
        tools=[get_weather, lookup_city],
        model=model,
        name=AGENT,
        max_steps=6,
        verbosity_level=-1,
        instructions=fake.SENTINEL_SYSTEM,
    )
    print("agent", agent.run(f"{fake.SENTINEL_PROMPT} weather in /home/alice?") == ANSWER)


if __name__ == "__main__":
    main()
