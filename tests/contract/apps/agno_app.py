"""Agno traced by ``openinference-instrumentation-agno``: an ``Agent`` named ``a.agent`` with a session id, two
function tools (one raising: Agno tells the model) and ``OpenAIChat`` at the scripted server; one run, not
streaming."""

from __future__ import annotations

import os

os.environ["AGNO_TELEMETRY"] = "false"  # no phone-home

import contract_app as c
from agno.agent import Agent
from agno.models.openai import OpenAIChat
from agno.tools import tool
from openinference.instrumentation.agno import AgnoInstrumentor

a = c.args()
diag = c.configure(a)

instrumentor = AgnoInstrumentor()
instrumentor.instrument(tracer_provider=diag.tracer_provider)
try:
    weather = tool(name=a.weather, description=c.SENTINEL_TOOL_DESCRIPTION)(c.get_weather)
    lookup = tool(name=a.lookup, description="Look a city up.")(c.lookup_city)
    agent = Agent(
        name=a.agent,
        session_id=c.SENTINEL_CONVERSATION,
        model=OpenAIChat(id="gpt-4o-mini", api_key=c.SENTINEL_API_KEY, base_url=a.base_url, max_retries=0),
        tools=[weather, lookup],
        instructions=c.SENTINEL_SYSTEM,
        telemetry=False,
    )
    agent.run(c.SENTINEL_PROMPT)
finally:
    instrumentor.uninstrument()
    diag.shutdown()
