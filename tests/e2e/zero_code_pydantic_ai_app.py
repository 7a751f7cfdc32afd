"""A Pydantic AI app with no tracing code, traced by ``opentelemetry-instrument`` (``test_zero_code_frameworks.py``).

Run as::

    ZERO_CODE_OPENAI_URL=http://127.0.0.1:<port>/v1 PYTHONPATH=tests opentelemetry-instrument \\
        python tests/e2e/zero_code_pydantic_ai_app.py

One run of a Pydantic AI agent with its ``OpenAIChatModel`` (the real ``openai`` client) against the scripted fake
model server: the model asks for ``get_weather`` twice, then ``lookup_city``, which fails (``ModelRetry``: the
model is told and the run goes on), then answers. Sentinels sit in the prompt, the instructions, the tool
descriptions, arguments, results and call ids, the retry message and the conversation id. It prints one line.
"""

from __future__ import annotations

import os

from fakes import openai_server as fake
from openai import AsyncOpenAI
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

AGENT = "weather_agent"


def main() -> None:
    client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=os.environ["ZERO_CODE_OPENAI_URL"], max_retries=0)
    model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))
    agent: Agent[None, str] = Agent(model, name=AGENT, instructions=f"{fake.SENTINEL_SYSTEM} /home/alice")

    @agent.tool_plain(description=fake.SENTINEL_TOOL_DESCRIPTION)
    def get_weather(city: str, unit: str = "celsius") -> str:
        return fake.SENTINEL_TOOL_RESULT

    @agent.tool_plain(description=fake.SENTINEL_TOOL_DESCRIPTION)
    def lookup_city(city: str, unit: str = "celsius") -> str:
        raise ModelRetry(f"lookup failed for {fake.SENTINEL_ERROR} {city}")

    prompt = f"{fake.SENTINEL_PROMPT} weather in /home/alice?"
    result = agent.run_sync(prompt, conversation_id=fake.SENTINEL_CONVERSATION)
    print("agent", result.output == fake.ANSWER_TEXT)


if __name__ == "__main__":
    main()
