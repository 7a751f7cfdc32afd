"""An OpenAI Agents SDK agent traced by otel-agentdiag, offline: run it, then read its trace.

    pip install -e '.[openai-agents]'  # from a checkout: the Agents SDK and the OpenAI client
    python examples/openai_agents_weather.py [--store PATH] [--stream]

Without the ``openai-agents`` extra it prints that install line on stderr and exits with code 2.

The agent's model is the real ``AsyncOpenAI`` client, pointed at the scripted fake OpenAI server of this
repository's tests (``tests/fakes/openai_server.py``) on 127.0.0.1: the first answer asks for the
``get_weather`` tool, the second answers. Both instrumentors are on, so each model call is one span, enriched
with what the client saw. The script prints ``agentdiag show`` of the run's trace.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

try:
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
    from openai import AsyncOpenAI
except ImportError:  # the README's first command installs the base package only
    print("this example needs the OpenAI Agents SDK: pip install -e '.[openai-agents]'", file=sys.stderr)
    raise SystemExit(2) from None

import otel_agentdiag as agentdiag
from otel_agentdiag.cli import cli
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor
from otel_agentdiag.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from otel_agentdiag.storage import SpanStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fakes.openai_server import FakeOpenAIServer


@function_tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """The current weather in a city."""
    return f"Sunny, 21 degrees {unit} in {city}."


async def ask(base_url: str, stream: bool) -> str:
    client = AsyncOpenAI(api_key="sk-not-a-real-key", base_url=base_url)
    agent = Agent(
        name="weather_agent",
        instructions="Answer questions about the weather; use the tool.",
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
        model_settings=ModelSettings(include_usage=True),
        tools=[get_weather],
    )
    config = RunConfig(workflow_name="weather", group_id="thread-42")  # group_id: the conversation
    if stream:
        result = Runner.run_streamed(agent, "What's the weather in Paris?", run_config=config)
        async for _ in result.stream_events():
            pass
    else:
        result = await Runner.run(agent, "What's the weather in Paris?", run_config=config)
    return str(result.final_output)


def main(store: str | None, stream: bool) -> str:
    diag = agentdiag.configure(service_name="weather-agent", store=store)
    OpenAIAgentsInstrumentor().instrument()
    OpenAIInstrumentor().instrument()
    try:
        with FakeOpenAIServer() as server:
            answer = asyncio.run(ask(server.base_url, stream))
    finally:
        OpenAIAgentsInstrumentor().uninstrument()
        OpenAIInstrumentor().uninstrument()
        diag.shutdown()
    print(answer)
    with SpanStore(diag.store_path, create=False) as reader:
        newest = reader.list_traces(limit=1)[0].trace_id
    cli.main(["show", newest, "--store", str(diag.store_path)], prog_name="agentdiag", standalone_mode=False)
    return answer


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="SQLite store (default: ./.agentdiag/traces.db)")
    parser.add_argument("--stream", action="store_true", help="run with Runner.run_streamed")
    arguments = parser.parse_args()
    main(arguments.store, arguments.stream)
