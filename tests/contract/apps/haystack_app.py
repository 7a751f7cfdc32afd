"""Haystack 3.x: an ``Agent`` with ``OpenAIChatGenerator`` and two tools (one raising: the Agent hands the error
back to the model), traced by OpenInference's Haystack instrumentor; Haystack has no session id, so the run is in
OpenInference's ``using_session``.

The instrumentor wraps the components in Haystack's registry when it instruments, and Haystack imports lazily: the
components are imported first, or a standalone ``Agent`` is not traced at all."""

from __future__ import annotations

import os

os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"  # no posthog calls

import contract_app as c
from haystack.components.agents import Agent
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage
from haystack.tools import create_tool_from_function
from haystack.utils import Secret
from openinference.instrumentation import using_session
from openinference.instrumentation.haystack import HaystackInstrumentor

a = c.args()
diag = c.configure(a)
HaystackInstrumentor().instrument(tracer_provider=diag.tracer_provider)
try:
    generator = OpenAIChatGenerator(
        api_key=Secret.from_token(c.SENTINEL_API_KEY), model="gpt-4o-mini", api_base_url=a.base_url, max_retries=0
    )
    tools = [
        create_tool_from_function(c.get_weather, name=a.weather, description=c.SENTINEL_TOOL_DESCRIPTION),
        create_tool_from_function(c.lookup_city, name=a.lookup, description="Look a city up."),
    ]
    agent = Agent(chat_generator=generator, tools=tools, system_prompt=c.SENTINEL_SYSTEM)
    with using_session(c.SENTINEL_CONVERSATION):
        agent.run(messages=[ChatMessage.from_user(c.SENTINEL_PROMPT)])
finally:
    HaystackInstrumentor().uninstrument()
    diag.shutdown()
