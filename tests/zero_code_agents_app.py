"""An OpenAI Agents SDK app with no tracing code, traced by ``opentelemetry-instrument`` (``test_zero_code.py``).

Run as::

    ZERO_CODE_OPENAI_URL=http://127.0.0.1:<port>/v1 PYTHONPATH=tests opentelemetry-instrument \\
        python tests/zero_code_agents_app.py

One agent run against the fake model server: the model asks for ``get_weather``, the tool answers, the model
answers. The conversation id, the prompt and the instructions carry sentinels. It prints one line.
"""

from __future__ import annotations

import os

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from fakes import openai_server as fake
from openai import AsyncOpenAI


@function_tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """The weather in a city."""
    return f"sunny {fake.SENTINEL_TOOL_RESULT}"


def main() -> None:
    client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=os.environ["ZERO_CODE_OPENAI_URL"], max_retries=0)
    agent = Agent(
        name="weather_agent",
        instructions=fake.SENTINEL_INSTRUCTIONS,
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
        tools=[get_weather],
    )
    result = Runner.run_sync(agent, fake.SENTINEL_PROMPT, run_config=RunConfig(group_id=fake.SENTINEL_CONVERSATION))
    print("agent", result.final_output == fake.ANSWER_TEXT)


if __name__ == "__main__":
    main()
