"""The scripted model server of the contract suite: one agent run of two model calls and two tool calls.

The first answer of a conversation (no tool result in it yet) asks for both tools at once (OpenAI: two
``tool_calls``; Anthropic: two ``tool_use`` blocks), each with :data:`fakes.openai_server.TOOL_ARGUMENTS` (a city
and a unit, carrying the tool-argument sentinel) and an id carrying the call-id sentinel; every later answer is the
text answer. Usage as :mod:`fakes.openai_server` reports it. The answer depends on the request alone, so concurrent
runs can share one server.
"""

from __future__ import annotations

from typing import Any

from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer


class ContractServer(FakeModelServer):
    tools: tuple[str, ...] = ("get_weather", "lookup_city")

    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        if any(isinstance(m, dict) and m.get("role") == "tool" for m in messages):
            return super().chat_completion({**body, "tools": None})  # the text answer
        out = super().chat_completion({**body, "tools": [{"type": "function"}], "messages": [{"role": "user"}]})
        (call,) = out["choices"][0]["message"]["tool_calls"]
        out["choices"][0]["message"]["tool_calls"] = [
            {**call, "id": f"{call['id']}-{i}", "function": {"name": name, "arguments": fake.TOOL_ARGUMENTS}}
            for i, name in enumerate(self.tools)
        ]
        return out

    def anthropic_message(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        answered = any(
            isinstance(m, dict)
            and isinstance(m.get("content"), list)
            and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in m["content"])
            for m in messages
        )
        if answered:
            return super().anthropic_message({**body, "tools": None})
        out = super().anthropic_message(
            {**body, "tools": [{"name": "x"}], "messages": [{"role": "user", "content": "?"}]}
        )
        (block,) = [b for b in out["content"] if b.get("type") == "tool_use"]
        out["content"] = [
            {**block, "id": f"{block['id']}-{i}", "name": name, "input": dict(fake.TOOL_INPUT)}
            for i, name in enumerate(self.tools)
        ]
        return out
