"""CrewAI (one crew, one task, one agent whose role is the agent's name) with two tools, the second raising (CrewAI
tells the model), and CrewAI's native OpenAI provider, traced by otel-agentdiag's own CrewAIInstrumentor (run,
iterations, model and tool calls, from CrewAI's event bus) with our OpenAIInstrumentor on too (CrewAI calls
``chat.completions.with_raw_response.create``: the client call enriches CrewAI's model-call span). CrewAI has no
conversation id: the setup's truth says so (``Truth(session=False)``)."""

from __future__ import annotations

import os

os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"  # no anonymous telemetry to CrewAI
os.environ["CREWAI_DISABLE_TRACKING"] = "true"  # (crewai_core.telemetry reads either)
os.environ["CREWAI_TRACING_ENABLED"] = "false"  # no trace upload to CrewAI's service

import contract_app as c
from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool

from otel_agentdiag.instrumentation.crewai import CrewAIInstrumentor
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor


def weather(city: str, unit: str = "celsius") -> str:
    return c.get_weather(city, unit)


def lookup(city: str, unit: str = "celsius") -> str:
    return c.lookup_city(city, unit)


weather.__doc__ = c.SENTINEL_TOOL_DESCRIPTION  # CrewAI's @tool takes the description from the docstring
lookup.__doc__ = "Look a city up."


def main() -> None:
    a = c.args()
    diag = c.configure(a)
    CrewAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    OpenAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    try:
        llm = LLM(model="openai/gpt-4o-mini", base_url=a.base_url, api_key=c.SENTINEL_API_KEY, max_retries=0)
        agent = Agent(
            role=a.agent,
            goal="Answer weather questions",
            backstory=c.SENTINEL_SYSTEM,
            tools=[tool(a.weather)(weather), tool(a.lookup)(lookup)],
            llm=llm,
            verbose=False,
            max_iter=4,
        )
        task = Task(description=c.SENTINEL_PROMPT, expected_output="A short weather report.", agent=agent)
        crew = Crew(agents=[agent], tasks=[task], verbose=False, tracing=False)
        crew.kickoff()
    finally:
        OpenAIInstrumentor().uninstrument()
        CrewAIInstrumentor().uninstrument()
        diag.shutdown()


if __name__ == "__main__":
    main()
