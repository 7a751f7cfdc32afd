"""LiteLLM in a hand-written loop, traced the way docs/integrations.md says: OpenInference's LiteLLM instrumentor
for the model calls (``litellm.completion`` with ``openai/gpt-4o-mini`` against the scripted server), our
``agent_run`` / ``iteration`` / ``tool_call`` for the loop. LiteLLM is a client: the loop is the user's."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from contract_checks import Truth
from contract_setups import Setup, Target, _openai_tools, _tools
from fakes import openai_server as fake

import otel_agentdiag as agentdiag

_LOCAL_PRICES = "LITELLM_LOCAL_MODEL_COST_MAP"


def litellm_loop(diag: Any, target: Target) -> None:
    """The tutorial loop with ``litellm.completion``: tools offered in the request, names taken from the model's
    answer (no ``register_names``), each tool run under ``tool_call``; a failing tool's error goes back to the
    model."""
    before = os.environ.get(_LOCAL_PRICES)
    os.environ[_LOCAL_PRICES] = "True"  # no fetch of LiteLLM's price table at its import
    try:
        import litellm
    finally:
        if before is None:
            del os.environ[_LOCAL_PRICES]
        else:
            os.environ[_LOCAL_PRICES] = before
    from openinference.instrumentation.litellm import LiteLLMInstrumentor

    # LiteLLM's sync calls run their service hooks on the thread's event loop, and make one (left open, for the
    # garbage collector to warn about in a later test) when there is none: this loop is theirs, closed after.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    instrumentor = LiteLLMInstrumentor()
    instrumentor.instrument(tracer_provider=diag.tracer_provider)
    try:
        options: dict[str, Any] = {"api_base": target.base_url, "api_key": fake.SENTINEL_API_KEY}
        messages: list[Any] = [{"role": "user", "content": fake.SENTINEL_PROMPT}]
        tools = _tools(target)
        with agentdiag.agent_run(target.agent, conversation_id=fake.SENTINEL_CONVERSATION):
            for i in range(4):
                with agentdiag.iteration(i):
                    response = litellm.completion(
                        model="openai/gpt-4o-mini", messages=messages, tools=_openai_tools(target), **options
                    )
                    message = response.choices[0].message
                    if not message.tool_calls:
                        return
                    messages.append(message.model_dump(exclude_none=True))
                    for call in message.tool_calls:
                        try:
                            with agentdiag.tool_call(call.function.name, call_id=call.id):
                                result = tools[call.function.name](**json.loads(call.function.arguments))
                        except ValueError:
                            result = "error"
                        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    finally:
        instrumentor.uninstrument()
        asyncio.set_event_loop(None)
        loop.close()


SETUPS = (
    Setup(
        "LiteLLM, a hand-written loop (OpenInference)",
        ("litellm", "openinference-instrumentation-litellm"),
        litellm_loop,
        truth=Truth(),
        requires=("litellm", "openinference.instrumentation.litellm"),
    ),
)
