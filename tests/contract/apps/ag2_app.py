"""AG2 0.14 (``import autogen``, the classic ConversableAgent API) traced by its own OpenTelemetry instrumentation
(``autogen.opentelemetry``): the assistant ``a.agent`` proposes both tools, a user proxy runs them (the failing
one's error goes back to the model as the tool result); a two-turn chat. AG2 gives the chat a conversation id of its
own (``ChatResult.chat_id``): the caller cannot set one. AG2 records no tool definitions, so our OpenAI
instrumentor is on too: it registers the tools the request offered (and owns each model call; AG2's ``chat`` span
becomes a step)."""

from __future__ import annotations

import os

os.environ["AUTOGEN_USE_DOCKER"] = "False"  # no code execution anywhere

import contract_app as c
from autogen import ConversableAgent, LLMConfig, UserProxyAgent, register_function
from autogen.oai.client import OpenAIWrapper
from autogen.opentelemetry import instrument_agent, instrument_llm_wrapper

from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

a = c.args()
diag = c.configure(a)

original_create = OpenAIWrapper.create  # AG2 has no uninstrument: its wrapper is undone by hand
OpenAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
try:
    instrument_llm_wrapper(tracer_provider=diag.tracer_provider)
    llm_config = LLMConfig(
        {"api_type": "openai", "model": "gpt-4o-mini", "base_url": a.base_url, "api_key": c.SENTINEL_API_KEY},
        cache_seed=None,
    )
    assistant = ConversableAgent(
        name=a.agent, system_message=c.SENTINEL_SYSTEM, llm_config=llm_config, human_input_mode="NEVER"
    )
    user_proxy = UserProxyAgent(
        name="user_proxy", human_input_mode="NEVER", code_execution_config=False, llm_config=False
    )
    register_function(
        c.get_weather, caller=assistant, executor=user_proxy, name=a.weather, description=c.SENTINEL_TOOL_DESCRIPTION
    )
    register_function(
        c.lookup_city, caller=assistant, executor=user_proxy, name=a.lookup, description="Look a city up."
    )
    instrument_agent(assistant, tracer_provider=diag.tracer_provider)
    instrument_agent(user_proxy, tracer_provider=diag.tracer_provider)
    user_proxy.initiate_chat(assistant, message=c.SENTINEL_PROMPT, max_turns=2, silent=True)
finally:
    OpenAIWrapper.create = original_create  # type: ignore[method-assign]
    OpenAIInstrumentor().uninstrument()
    diag.shutdown()
