"""Strands Agents traced by our ``StrandsInstrumentor`` (Strands' own OpenTelemetry output on our provider): an
``Agent`` named ``a.agent`` with two tools (one raising: Strands hands the error to the model as a failed tool
result), its session in ``trace_attributes``, and Strands' real ``OpenAIModel`` (the real ``openai`` client,
streaming) at the scripted server; one run."""

from __future__ import annotations

import contract_app as c
from strands import Agent, tool
from strands.models.openai import OpenAIModel

from otel_agentdiag.instrumentation.strands import StrandsInstrumentor

a = c.args()
diag = c.configure(a)

instrumentor = StrandsInstrumentor()
instrumentor.instrument(tracer_provider=diag.tracer_provider)
try:
    weather = tool(name=a.weather, description=c.SENTINEL_TOOL_DESCRIPTION)(c.get_weather)
    lookup = tool(name=a.lookup, description="Look a city up.")(c.lookup_city)
    model = OpenAIModel(
        client_args={"api_key": c.SENTINEL_API_KEY, "base_url": a.base_url, "max_retries": 0},
        model_id="gpt-4o-mini",
    )
    agent = Agent(
        model=model,
        tools=[weather, lookup],
        name=a.agent,
        system_prompt=c.SENTINEL_SYSTEM,
        trace_attributes={"session.id": c.SENTINEL_CONVERSATION},
        callback_handler=None,
    )
    agent(c.SENTINEL_PROMPT)
finally:
    instrumentor.uninstrument()
    diag.shutdown()
