"""instructor (structured outputs over the ``openai`` client; not an agent framework) in a hand-written loop traced
as the README's quick start traces one: ``agent_run`` / ``iteration`` / ``tool_call`` around the calls, with
openinference-instrumentation-instructor (its ``instructor.create`` spans) and openinference-instrumentation-openai
(the model calls). The first extraction is instructor's parallel tool calling (``Mode.PARALLEL_TOOLS``, a response
model per tool, named as the tool, ``Iterable[Weather | Lookup]``): the loop runs the objects it returns by hand,
the second failing (the loop tells the model); the second call takes the answer as text (``response_model=None``).
``Mode.TOOLS`` cannot take the server's two tool calls: it forces one function (``Iterable[...]`` becomes one
``tasks`` list), so the calls' names match nothing and the extraction is empty."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import contract_app as c
import instructor
from openai import OpenAI
from openinference.instrumentation.instructor import InstructorInstrumentor
from openinference.instrumentation.openai import OpenAIInstrumentor
from pydantic import create_model

import otel_agentdiag as agentdiag


def main() -> None:
    a = c.args()
    diag = c.configure(a)
    agentdiag.register_names(tools=[a.weather, a.lookup])  # tool names are code, as in the quick start
    InstructorInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    OpenAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    try:
        tools = {a.weather: c.get_weather, a.lookup: c.lookup_city}
        # One response model per tool, named as the tool: instructor offers each as a function of that name.
        weather: Any = create_model(a.weather, __doc__=c.SENTINEL_TOOL_DESCRIPTION, city=(str, ...), unit=(str, ...))
        lookup: Any = create_model(a.lookup, __doc__="Look a city up.", city=(str, ...), unit=(str, ...))
        client = instructor.from_openai(
            OpenAI(api_key=c.SENTINEL_API_KEY, base_url=a.base_url, max_retries=0), mode=instructor.Mode.PARALLEL_TOOLS
        )
        completions: list[Any] = []
        client.on("completion:response", completions.append)  # the raw answer: the calls' ids
        messages: list[Any] = [
            {"role": "system", "content": c.SENTINEL_SYSTEM},
            {"role": "user", "content": c.SENTINEL_PROMPT},
        ]
        with agentdiag.agent_run(a.agent, conversation_id=c.SENTINEL_CONVERSATION):
            with agentdiag.iteration(0):
                calls = list(
                    client.chat.completions.create(
                        model="gpt-4o-mini",
                        response_model=Iterable[weather | lookup],  # type: ignore[valid-type]
                        messages=messages,
                        max_retries=0,
                    )
                )
                message = completions[-1].choices[0].message
                wire_calls = [call.model_dump() for call in message.tool_calls or []]
                messages.append({"role": "assistant", "content": message.content, "tool_calls": wire_calls})
                for call, wire in zip(calls, message.tool_calls or [], strict=True):
                    name = type(call).__name__
                    try:
                        with agentdiag.tool_call(name, call_id=wire.id):
                            result = tools[name](**call.model_dump())
                    except ValueError:
                        result = "error"
                    messages.append({"role": "tool", "tool_call_id": wire.id, "content": result})
            with agentdiag.iteration(1):
                answer = client.chat.completions.create(model="gpt-4o-mini", response_model=None, messages=messages)
                assert answer.choices[0].message.content, answer
    finally:
        OpenAIInstrumentor().uninstrument()
        InstructorInstrumentor().uninstrument()
        diag.shutdown()


if __name__ == "__main__":
    main()
