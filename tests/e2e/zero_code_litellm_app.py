"""A LiteLLM app with no tracing code, traced by ``opentelemetry-instrument`` (``test_zero_code_frameworks.py``).

Run as::

    ZERO_CODE_OPENAI_URL=http://127.0.0.1:<port>/v1 PYTHONPATH=tests opentelemetry-instrument \\
        python tests/e2e/zero_code_litellm_app.py

A hand-written agent loop (LiteLLM is a client: the loop is the app's) over ``litellm.completion`` with model
``openai/gpt-4o-mini`` against the scripted fake model server: the model asks for ``get_weather`` twice, then
``lookup_city`` (which raises; the error goes back to the model as the tool's answer), then answers. Sentinels sit
in the prompt, the system prompt, a tool's description, the tool arguments, results and call ids and the failing
tool's message. It prints one line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the price table at import

import litellm
from fakes import openai_server as fake

MODEL = "openai/gpt-4o-mini"
MAX_STEPS = 6


def get_weather(city: str, unit: str = "celsius") -> str:
    return f"{fake.SENTINEL_TOOL_RESULT} in {city}"


def lookup_city(city: str, unit: str = "celsius") -> str:
    raise LookupError(f"lookup failed for {fake.SENTINEL_USER}")


TOOLS: dict[str, Callable[..., str]] = {"get_weather": get_weather, "lookup_city": lookup_city}
SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": fake.SENTINEL_TOOL_DESCRIPTION,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}},
        },
    }
    for name in TOOLS
]


def main() -> None:
    messages: list[Any] = [
        {"role": "system", "content": fake.SENTINEL_SYSTEM},
        {"role": "user", "content": f"{fake.SENTINEL_PROMPT} weather in /home/alice?"},
    ]
    options = {"api_base": os.environ["ZERO_CODE_OPENAI_URL"], "api_key": fake.SENTINEL_API_KEY, "tools": SCHEMAS}
    answer = None
    for _ in range(MAX_STEPS):
        message = litellm.completion(model=MODEL, messages=messages, **options).choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            answer = message.content
            break
        for call in message.tool_calls:
            try:
                result = TOOLS[call.function.name](**json.loads(call.function.arguments))
            except LookupError as exc:
                result = f"error: {exc}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    print("agent", answer == fake.ANSWER_TEXT)


if __name__ == "__main__":
    main()
