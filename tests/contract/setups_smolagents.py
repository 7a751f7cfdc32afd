"""smolagents' ``ToolCallingAgent`` with ``OpenAIServerModel`` (the real ``openai`` client), traced the way
docs/integrations.md says: OpenInference's smolagents instrumentor for the spans, our ``SmolagentsInstrumentor``
for the declared names, the conversation from OpenInference's ``using_session``.

smolagents ends its loop with a call of its own ``final_answer`` tool, never with a text answer, and tells the
model about a failed tool in a user message (no ``tool`` message): :class:`SmolagentsServer` says the same run
in that shape.
"""

from __future__ import annotations

import json
from typing import Any

from contract_checks import Truth
from contract_server import ContractServer
from contract_setups import Setup, Target
from fakes import openai_server as fake

FINAL_ANSWER = "final_answer"
"""smolagents' own tool, through which its model gives the answer (the loop ends when it is called)."""

TASK = fake.SENTINEL_PROMPT


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return ""


class SmolagentsServer(ContractServer):
    """The contract's run as smolagents' loop needs it: the first call (nothing after the task yet) asks for the
    two tools at once; every later call gives the answer as a ``final_answer`` tool call, with the text answer's
    usage. The answer depends on the request alone: smolagents' first request ends with the task; a later one
    with the step's observations or errors."""

    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        if messages and messages[-1].get("role") == "user" and _text(messages[-1]).rstrip().endswith(TASK):
            return super().chat_completion(body)  # smolagents sends no `tool` message: the two tool calls
        out = super().chat_completion({**body, "messages": [{"role": "tool"}]})  # the text answer, its usage
        choice = out["choices"][0]
        call = {
            "id": f"call-{fake.SENTINEL_TOOL_CALL_ID}-{FINAL_ANSWER}",
            "type": "function",
            "function": {"name": FINAL_ANSWER, "arguments": json.dumps({"answer": fake.ANSWER_TEXT})},
        }
        choice["message"] = {**choice["message"], "content": None, "tool_calls": [call]}
        choice["finish_reason"] = "tool_calls"
        return out


def smolagents_tool_calling(diag: Any, target: Target) -> None:
    """A ``ToolCallingAgent`` with two ``Tool`` s (the second raising: smolagents tells the model) and
    ``OpenAIServerModel``; one run in an OpenInference session."""
    from openinference.instrumentation import using_session
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor as Traces
    from smolagents import OpenAIServerModel, Tool, ToolCallingAgent

    from otel_agentdiag.instrumentation.smolagents import SmolagentsInstrumentor

    schema = {
        "city": {"type": "string", "description": "the city"},
        "unit": {"type": "string", "description": "celsius or fahrenheit"},
    }

    class Weather(Tool):  # type: ignore[misc]
        name = target.weather
        description = fake.SENTINEL_TOOL_DESCRIPTION
        inputs = schema
        output_type = "string"

        def forward(self, city: str, unit: str) -> str:
            return f"sunny {fake.SENTINEL_TOOL_RESULT}"

    class Lookup(Tool):  # type: ignore[misc]
        name = target.lookup
        description = "Look a city up."
        inputs = schema
        output_type = "string"

        def forward(self, city: str, unit: str) -> str:
            raise ValueError(f"lookup failed {fake.SENTINEL_TOOL_RESULT}")

    traces, names = Traces(), SmolagentsInstrumentor()
    traces.instrument(tracer_provider=diag.tracer_provider)
    names.instrument()
    try:
        model = OpenAIServerModel(
            model_id="gpt-4o-mini",
            api_base=target.base_url,
            api_key=fake.SENTINEL_API_KEY,
            client_kwargs={"max_retries": 0},
        )
        agent = ToolCallingAgent(
            tools=[Weather(), Lookup()],
            model=model,
            name=target.agent,
            max_steps=4,
            verbosity_level=-1,
            instructions=fake.SENTINEL_SYSTEM,
        )
        with using_session(fake.SENTINEL_CONVERSATION):
            answer = agent.run(TASK)
        assert fake.SENTINEL_OUTPUT in str(answer), "the run did not end with the scripted answer"
    finally:
        names.uninstrument()
        traces.uninstrument()


SETUPS = (
    Setup(
        "smolagents ToolCallingAgent (ours)",
        ("smolagents", "openinference-instrumentation-smolagents"),
        smolagents_tool_calling,
        truth=Truth(),
        requires=("smolagents", "openinference.instrumentation.smolagents"),
        server=SmolagentsServer,
    ),
)
