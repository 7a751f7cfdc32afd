"""MCP tools in the hand-written OpenAI loop, traced the way docs/integrations.md says: our ``MCPInstrumentor`` on
a real ``MCPServer`` and a real ``Client`` (in process, over mcp's memory transport), our OpenAI instrumentor for
the model calls, ``agent_run`` / ``iteration`` around the loop. The tools the model is offered are the server's
listing; each tool call the model asks for is one ``tools/call`` (the second tool raises on the server, which
answers ``isError``). The client's ``execute_tool`` span is the one tool span of a call: the server's span of its
handling is a step under it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from contract_checks import Truth
from contract_setups import Setup, Target, get_weather, lookup_city
from fakes import openai_server as fake

import otel_agentdiag as agentdiag


def _server(target: Target) -> Any:
    """The two tools on a real MCP server (built after ``instrument()``, so our middleware is in it)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("weather-server")
    server.tool(name=target.weather, description=fake.SENTINEL_TOOL_DESCRIPTION)(get_weather)
    server.tool(name=target.lookup, description="Look a city up.")(lookup_city)
    return server


def _text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def mcp_openai_loop(diag: Any, target: Target) -> None:
    """The tutorial loop with the OpenAI SDK, its tools an MCP server's: the listing is offered to the model (its
    names are the server's definitions), each tool call the model asks for goes to the server as ``tools/call``;
    a failed call's ``isError`` result goes back to the model."""
    from mcp import Client
    from openai import AsyncOpenAI

    from otel_agentdiag.instrumentation.mcp import MCPInstrumentor
    from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

    async def run() -> None:
        client = AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=target.base_url, max_retries=0)
        messages: list[Any] = [{"role": "user", "content": fake.SENTINEL_PROMPT}]
        with agentdiag.agent_run(target.agent, conversation_id=fake.SENTINEL_CONVERSATION):
            async with Client(_server(target)) as tools:
                listed = (await tools.list_tools()).tools
                offered = [
                    {
                        "type": "function",
                        "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                    }
                    for t in listed
                ]
                for i in range(4):
                    with agentdiag.iteration(i):
                        response = await client.chat.completions.create(
                            model="gpt-4o-mini", messages=messages, tools=offered
                        )
                        message = response.choices[0].message
                        if not message.tool_calls:
                            break
                        messages.append(message.model_dump(exclude_none=True))
                        for call in message.tool_calls:
                            result = await tools.call_tool(call.function.name, json.loads(call.function.arguments))
                            content = "error" if result.is_error else _text(result)
                            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        await client.close()

    MCPInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    OpenAIInstrumentor().instrument(tracer_provider=diag.tracer_provider)
    try:
        asyncio.run(run())
    finally:
        OpenAIInstrumentor().uninstrument()
        MCPInstrumentor().uninstrument()


SETUPS = (
    Setup(
        "MCP tools in an OpenAI loop (ours)",
        ("mcp", "openai"),
        mcp_openai_loop,
        truth=Truth(),
        requires=("mcp", "openai"),
    ),
)
