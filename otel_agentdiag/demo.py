"""The scripted demo agent behind ``agentdiag demo``.

A deterministic fake model plans a short trip: it calls two real tools, makes one bad tool call that fails,
recovers by retrying with corrected arguments, and answers. Everything is traced through the public API.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import otel_agentdiag as agentdiag

AGENT_NAME = "trip-planner"
MODEL = "demo-model-1"
PROVIDER = "demo"

_RATES_TO_USD = {"USD": 1.0, "EUR": 1.08, "GBP": 1.27, "JPY": 0.0067}
_WEATHER = {"Lisbon": ("sunny", 24), "Oslo": ("snow", -3), "Kyoto": ("rain", 12)}


def get_weather(city: str) -> dict[str, Any]:
    """A real (offline) tool: the weather for a city."""
    sky, celsius = _WEATHER[city]
    return {"city": city, "sky": sky, "celsius": celsius}


def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict[str, Any]:
    """A real (offline) tool: convert an amount between currencies; unknown codes raise ``ValueError``."""
    for code in (from_currency, to_currency):
        if code not in _RATES_TO_USD:
            raise ValueError(f"unknown currency code {code!r}")
    value = amount * _RATES_TO_USD[from_currency] / _RATES_TO_USD[to_currency]
    return {"amount": round(value, 2), "currency": to_currency}


TOOLS: dict[str, Callable[..., dict[str, Any]]] = {"get_weather": get_weather, "convert_currency": convert_currency}

SYSTEM_PROMPT = "You plan day trips. Use the tools for weather and currency; answer in one sentence."
TOOL_DEFINITIONS = [
    {"name": "get_weather", "parameters": {"city": "string"}},
    {
        "name": "convert_currency",
        "parameters": {"amount": "number", "from_currency": "string", "to_currency": "string"},
    },
]

# Tool names are code: declare them, so the redaction policy lets them through. A name the model invents
# would be exported as "_OTHER".
agentdiag.register_names(tools=TOOLS)


@dataclass
class ModelReply:
    """What the fake model says: a tool call or a final answer, with usage like a real provider reports."""

    response_id: str
    finish_reason: str
    input_tokens: int
    output_tokens: int
    tool_name: str | None = None
    tool_args: dict[str, Any] = field(default_factory=dict)
    tool_call_id: str | None = None
    text: str = ""

    def as_message(self) -> dict[str, Any]:
        """The reply as an assistant message, in the shape chat APIs use."""
        if self.tool_name is None:
            return {"role": "assistant", "content": self.text, "finish_reason": self.finish_reason}
        return {
            "role": "assistant",
            "tool_calls": [{"id": self.tool_call_id, "name": self.tool_name, "arguments": self.tool_args}],
            "finish_reason": self.finish_reason,
        }


class DemoModel:
    """A deterministic stand-in for an LLM: it reads the transcript and picks the next step."""

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, messages: list[dict[str, Any]]) -> ModelReply:
        self.calls += 1
        n = self.calls
        input_tokens = sum(len(str(m["content"]).split()) for m in messages) * 4 + 40
        last = messages[-1]
        tool_results = [m for m in messages if m["role"] == "tool"]
        if not tool_results:
            return self._tool(n, input_tokens, "get_weather", {"city": "Lisbon"})
        if last["role"] == "tool" and last.get("name") == "get_weather":
            # The model's first try uses a currency code that does not exist.
            return self._tool(
                n, input_tokens, "convert_currency", {"amount": 120, "from_currency": "USD", "to_currency": "EURO"}
            )
        if last["role"] == "tool" and last.get("error"):
            return self._tool(
                n, input_tokens, "convert_currency", {"amount": 120, "from_currency": "USD", "to_currency": "EUR"}
            )
        weather = next(m["content"] for m in tool_results if m.get("name") == "get_weather")
        money = last["content"]
        text = (
            f"Lisbon looks {weather['sky']} at {weather['celsius']} C; "
            f"your 120 USD budget is {money['amount']} {money['currency']}."
        )
        return ModelReply(f"resp_demo_{n:03d}", "stop", input_tokens, len(text.split()) * 2, text=text)

    @staticmethod
    def _tool(n: int, input_tokens: int, name: str, args: dict[str, Any]) -> ModelReply:
        return ModelReply(
            f"resp_demo_{n:03d}", "tool_calls", input_tokens, 18 + 3 * len(args), name, args, f"call_demo_{n:03d}"
        )


@dataclass
class DemoResult:
    trace_id: str
    answer: str
    iterations: int
    tool_errors: int


def run_demo_agent(*, user_id: str = "demo-user@example.com", max_iterations: int = 6) -> DemoResult:
    """Run the demo agent once, traced through whatever pipeline ``configure()`` installed."""
    model = DemoModel()
    conversation_id = f"demo-conversation-{uuid.uuid4()}"
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Plan a day in Lisbon on a 120 USD budget; what is that in euros?"}
    ]
    tool_errors = 0
    answer = ""
    with agentdiag.agent_run(AGENT_NAME, conversation_id=conversation_id, user_id=user_id) as run:
        # Content is kept only with configure(capture_content=True), in the local store; else these are no-ops.
        run.record_content(input_messages=messages[0]["content"])
        trace_id = f"{run.span.get_span_context().trace_id:032x}"
        index = 0
        for index in range(max_iterations):
            with agentdiag.iteration(index):
                with agentdiag.llm_call(provider=PROVIDER, model=MODEL) as call:
                    call.record_content(
                        system_instructions=SYSTEM_PROMPT, input_messages=messages, tool_definitions=TOOL_DEFINITIONS
                    )
                    reply = model.complete(messages)
                    call.record_content(output_messages=[reply.as_message()])
                    call.record_response(
                        response_model=MODEL,
                        response_id=reply.response_id,
                        finish_reasons=[reply.finish_reason],
                        input_tokens=reply.input_tokens,
                        output_tokens=reply.output_tokens,
                    )
                if reply.tool_name is None:
                    answer = reply.text
                    break
                messages.append({"role": "assistant", "content": f"call {reply.tool_name}"})
                try:
                    # The call id (hashed on export) links the tool span to the model's request.
                    with agentdiag.tool_call(
                        reply.tool_name, call_id=reply.tool_call_id, arguments=reply.tool_args
                    ) as tool:
                        try:
                            result = TOOLS[reply.tool_name](**reply.tool_args)
                        except ValueError as exc:
                            tool.record_result(exc)
                            raise
                        tool.record_result(result)
                except ValueError as exc:
                    tool_errors += 1
                    messages.append({"role": "tool", "name": reply.tool_name, "content": str(exc), "error": True})
                else:
                    messages.append({"role": "tool", "name": reply.tool_name, "content": result})
        run.record_content(output_messages=answer)
    return DemoResult(trace_id=trace_id, answer=answer, iterations=index + 1, tool_errors=tool_errors)
