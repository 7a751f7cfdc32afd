"""The scripted model server of the contract suite: one agent run of two model calls and two tool calls.

The first answer of a conversation (no tool result in it yet) asks for both tools at once (OpenAI: two
``tool_calls``; Anthropic: two ``tool_use`` blocks), each with :data:`fakes.openai_server.TOOL_ARGUMENTS` (a city
and a unit, carrying the tool-argument sentinel) and an id carrying the call-id sentinel; every later answer is the
text answer. Streamed (``stream=true``) the same script comes as chunks: the two calls one after the other
(indexes 0 and 1), then the streamed text answer. Usage as :mod:`fakes.openai_server` reports it. The answer depends
on the request alone, so concurrent runs can share one server.
"""

from __future__ import annotations

from collections.abc import Iterator
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

    def chat_chunks(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        messages = body.get("messages") or []
        if any(isinstance(m, dict) and m.get("role") == "tool" for m in messages):
            yield from super().chat_chunks({**body, "tools": None})  # the streamed text answer
            return
        chunks = list(super().chat_chunks({**body, "tools": [{"type": "function"}], "messages": [{"role": "user"}]}))
        calls = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("tool_calls")]
        (opening,) = [c for c in calls if "id" in c["choices"][0]["delta"]["tool_calls"][0]]
        first = opening["choices"][0]["delta"]["tool_calls"][0]
        for i, name in enumerate(self.tools):
            for chunk in calls:
                delta = dict(chunk["choices"][0]["delta"])
                if i and chunk is opening:
                    delta.pop("role", None)
                    delta.pop("content", None)
                (call,) = delta["tool_calls"]
                call = {**call, "index": i}
                if chunk is opening:
                    call.update(id=f"{first['id']}-{i}", function={"name": name, "arguments": ""})
                delta["tool_calls"] = [call]
                yield {**chunk, "choices": [{**chunk["choices"][0], "delta": delta}]}
        yield from (c for c in chunks if not any(c is d for d in calls))  # the finish reason, then the usage

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
