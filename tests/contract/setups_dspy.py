"""DSPy's ``ReAct`` traced by OpenInference's DSPy and LiteLLM instrumentors, in an environment of its own
(``tests/envs/contract-dspy.txt``).

ReAct speaks a text protocol (DSPy's ``ChatAdapter`` fields, ``[[ ## next_tool_name ## ]]`` and the rest), not
tool calls, and runs one tool per model call: :class:`DSPyServer` says the contract's run in that shape, and the
run's truth has three model calls: one per tool (the weather tool, then the failing lookup) and ReAct's
extraction of the answer from the trajectory.
"""

from __future__ import annotations

import json
import re
from typing import Any

from contract_checks import Truth
from contract_server import ContractServer
from contract_setups import Setup
from fakes import openai_server as fake

FINISH = "finish"
"""ReAct's own tool that ends the trajectory (not asked for here: ``max_iters=2`` ends it after the two tools)."""
_REQUESTED = re.compile(r"`\[\[ ## (\w+) ## \]\]`")
"""An output field the ChatAdapter asks for (its reminder names each in backticks)."""
_OBSERVATION = re.compile(r"\[\[ ## observation_(\d+) ## \]\]")
"""A step of the trajectory so far, in the prompt."""


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return ""


class DSPyServer(ContractServer):
    """The contract's run as DSPy's ReAct needs it, in ChatAdapter fields: a ReAct step (``next_tool_name``
    asked for) names the weather tool, then the lookup tool, by how many observations the trajectory in the
    prompt already holds (then ``finish``), with the tool-call answer's usage; any other prompt (the extraction)
    gets each field it asks for, ``answer`` the text answer, with the text answer's usage. The answer depends on
    the request alone."""

    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
        prompt = _text(users[-1]) if users else ""
        fields = [f for f in _REQUESTED.findall(prompt) if f != "completed"]
        if "next_tool_name" in fields:
            step = len(set(_OBSERVATION.findall(prompt)))
            name = self.tools[step] if step < len(self.tools) else FINISH
            arguments = fake.TOOL_ARGUMENTS if name != FINISH else json.dumps({})
            values = {"next_thought": "I ask the next tool.", "next_tool_name": name, "next_tool_args": arguments}
            out = super().chat_completion({**body, "messages": [{"role": "user"}]})  # the tool-call usage
        else:
            values = {"reasoning": "The tools have answered.", "answer": fake.ANSWER_TEXT}
            out = super().chat_completion({**body, "messages": [{"role": "tool"}]})  # the text answer's usage
        text = "\n\n".join(f"[[ ## {f} ## ]]\n{values.get(f, fake.ANSWER_TEXT)}" for f in fields)
        choice = out["choices"][0]
        choice["message"] = {"role": "assistant", "content": f"{text}\n\n[[ ## completed ## ]]", "refusal": None}
        choice["finish_reason"] = "stop"
        return out


SETUPS = (
    Setup(
        "DSPy ReAct (OpenInference)",
        ("dspy", "openinference-instrumentation-dspy", "openinference-instrumentation-litellm"),
        env="contract-dspy",
        app="dspy_app.py",
        # ReAct's agent has no name; one tool per model call, then the extraction of the answer.
        truth=Truth(
            agent=None,
            tokens=(
                (fake.TOOL_CALL_USAGE.prompt_tokens, fake.TOOL_CALL_USAGE.completion_tokens),
                (fake.TOOL_CALL_USAGE.prompt_tokens, fake.TOOL_CALL_USAGE.completion_tokens),
                (fake.ANSWER_USAGE.prompt_tokens, fake.ANSWER_USAGE.completion_tokens),
            ),
        ),
        server=DSPyServer,
    ),
)
