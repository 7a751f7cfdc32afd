"""A new user's own agent, run by ``test_off_is_off.py`` in a subprocess: a hand-written OpenAI function-calling
loop (tools offered, names from the model's answer), a decorated tool and the manual wrappers, with
otel-agentdiag configured and the OpenAI instrumentor on, and every log line of ours and OpenTelemetry's (DEBUG
and up) and every Python warning printed to stderr. It prints one line: the agent's answers and the class of the
global tracer provider once configured. Run as ``python off_app.py STORE BASE_URL``; the switch under test is in
the environment."""

from __future__ import annotations

import json
import logging
import sys
import warnings

import openai
from fakes import openai_server as fake
from opentelemetry import trace

import otel_agentdiag as agentdiag
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

warnings.simplefilter("always")
handler = logging.StreamHandler(sys.stderr)
for name in ("otel_agentdiag", "opentelemetry"):
    logging.getLogger(name).setLevel(logging.DEBUG)
    logging.getLogger(name).addHandler(handler)


@agentdiag.tool("get_weather")
def get_weather(city: str, unit: str = "celsius") -> str:
    return f"sunny in {city}"


def main() -> None:
    store, base_url = sys.argv[1:3]
    diag = agentdiag.configure(service_name="off", store=store)
    provider = type(trace.get_tracer_provider()).__name__  # switched off: still the API's proxy
    OpenAIInstrumentor().instrument()
    client = openai.OpenAI(api_key=fake.SENTINEL_API_KEY, base_url=base_url, max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    answers = []
    for run in range(3):
        messages: list = [{"role": "user", "content": fake.SENTINEL_PROMPT}]
        with agentdiag.agent_run("weather_agent", conversation_id=f"conversation-{run}"):
            for i in range(3):
                with agentdiag.iteration(i):
                    response = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
                    message = response.choices[0].message
                    if not message.tool_calls:
                        answers.append(message.content)
                        break
                    messages.append(message.model_dump(exclude_none=True))
                    for call in message.tool_calls:
                        with agentdiag.tool_call(call.function.name, call_id=call.id):
                            result = get_weather(**json.loads(call.function.arguments))
                        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.record_response(input_tokens=3, output_tokens=2)
    OpenAIInstrumentor().uninstrument()
    diag.shutdown()
    print(json.dumps({"answers": answers, "provider": provider}))


if __name__ == "__main__":
    main()
