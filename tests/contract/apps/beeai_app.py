"""BeeAI Framework: a ``RequirementAgent`` with ``OpenAIChatModel`` (LiteLLM underneath) and two tools (one
raising: BeeAI hands the error back to the model), traced by OpenInference's BeeAI instrumentor; BeeAI has no
session id, so the run is in OpenInference's ``using_session``."""

from __future__ import annotations

import asyncio
import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # LiteLLM would fetch its price map from GitHub
os.environ["LITELLM_TELEMETRY"] = "False"

import contract_app as c
from beeai_framework.adapters.openai import OpenAIChatModel
from beeai_framework.agents.requirement import RequirementAgent
from beeai_framework.backend import ChatModelParameters
from beeai_framework.tools import tool
from openinference.instrumentation import using_session
from openinference.instrumentation.beeai import BeeAIInstrumentor

a = c.args()
diag = c.configure(a)
BeeAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
try:
    llm = OpenAIChatModel(
        "gpt-4o-mini",
        api_key=c.SENTINEL_API_KEY,
        base_url=a.base_url,
        allow_parallel_tool_calls=True,  # the first answer asks for both tools at once
        parameters=ChatModelParameters(stream=False, temperature=0),
    )
    agent = RequirementAgent(
        llm=llm,
        tools=[
            tool(c.get_weather, name=a.weather, description=c.SENTINEL_TOOL_DESCRIPTION),
            tool(c.lookup_city, name=a.lookup, description="Look a city up."),
        ],
        name=a.agent,
        instructions=c.SENTINEL_SYSTEM,
        final_answer_as_tool=False,  # the second answer is text, as the scripted server sends it
    )

    async def run() -> None:
        with using_session(c.SENTINEL_CONVERSATION):
            await agent.run(c.SENTINEL_PROMPT)

    asyncio.run(run())
finally:
    BeeAIInstrumentor().uninstrument()
    diag.shutdown()
