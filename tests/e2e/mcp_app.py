"""An MCP client and server, both instrumented by ``MCPInstrumentor``, both exporting through ``configure()``.

Run by ``test_mcp_processes.py`` in subprocesses (the mcp SDK's own tracer follows the first global provider a
process sets, so each run gets a fresh interpreter)::

    python mcp_app.py client <memory|stdio|http> <store path> <otlp endpoint>
    python mcp_app.py server <store path> <otlp endpoint>           # started by the stdio client
    opentelemetry-instrument python mcp_app.py zero-code             # no configure(), no instrument()

The client runs one agent run with one iteration: it lists the server's tools, calls two of them and one that
fails, calls a tool no listing declared (a model's made-up name), reads a resource, gets a prompt and reads a
resource that does not exist (an error response whose message quotes the URI). ``memory`` serves the server in the same
process over ``mcp.shared.memory``; ``stdio`` starts this script as the server, a second process that configures
its own pipeline into the same store file and OTLP endpoint; ``http`` serves it over Streamable HTTP from a uvicorn
server on a loopback socket bound before the client connects (same process: no readiness wait). Every argument,
result, error message and id carries a sentinel; the client prints one line per call (what it got back, which must
not have changed).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError

import otel_agentdiag
from otel_agentdiag.instrumentation.mcp import MCPInstrumentor

HASH_KEY = b"e9b55b2b0b719fcba0253cd37be9f18b1336ab349aec5d6dbefda5971862be68"
SENTINEL_ARGUMENT = "SENTINEL-MCP-ARGUMENT-8c1f"
SENTINEL_RESULT = "SENTINEL-MCP-RESULT-5d2e"
SENTINEL_ERROR = "SENTINEL-MCP-ERROR-77ab"
SENTINEL_CONVERSATION = "SENTINEL-MCP-CONVERSATION-19fe"
SENTINEL_TOOL = "made_up_SENTINEL-MCP-TOOL-4b0c"
SENTINELS = (SENTINEL_ARGUMENT, SENTINEL_RESULT, SENTINEL_ERROR, SENTINEL_CONVERSATION, SENTINEL_TOOL)
TOOLS = ("get_vocabulary", "save_progress", "broken_tool")


def build_server() -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("vocab-server")

    @server.tool()
    def get_vocabulary(word: str) -> str:
        return f"{SENTINEL_RESULT} {word}"

    @server.tool()
    def save_progress(word: str, score: int) -> str:
        return f"{SENTINEL_RESULT} saved {word} {score}"

    @server.tool()
    def broken_tool(word: str) -> str:
        raise ValueError(f"{SENTINEL_ERROR} {word}")

    @server.resource("vocab://words/{word}")
    def word_card(word: str) -> str:
        return f"{SENTINEL_RESULT} card {word}"

    @server.prompt()
    def quiz(word: str) -> str:
        return f"{SENTINEL_RESULT} quiz {word}"

    return server


def _configure(service: str, store: str, endpoint: str) -> Any:
    diag = otel_agentdiag.configure(
        service_name=service, store=store, otlp_endpoint=endpoint, hash_key=HASH_KEY, set_global=True
    )
    MCPInstrumentor().instrument()
    return diag


async def _drive(session: Any) -> None:
    with otel_agentdiag.agent_run("mcp-agent", conversation_id=SENTINEL_CONVERSATION):
        with otel_agentdiag.iteration(0):
            listed = await session.list_tools()
            print("listed", sorted(tool.name for tool in listed.tools))
            first = await session.call_tool("get_vocabulary", {"word": SENTINEL_ARGUMENT})
            print("get_vocabulary", first.is_error, first.content[0].text == f"{SENTINEL_RESULT} {SENTINEL_ARGUMENT}")
            second = await session.call_tool("save_progress", {"word": SENTINEL_ARGUMENT, "score": 3})
            print("save_progress", second.is_error, SENTINEL_RESULT in second.content[0].text)
            failed = await session.call_tool("broken_tool", {"word": SENTINEL_ARGUMENT})
            print("broken_tool", failed.is_error)
            unknown = await session.call_tool(SENTINEL_TOOL, {"word": SENTINEL_ARGUMENT})
            print("made_up", unknown.is_error)
            card = await session.read_resource(f"vocab://words/{SENTINEL_ARGUMENT}")
            print("resource", SENTINEL_RESULT in card.contents[0].text)
            prompt = await session.get_prompt("quiz", {"word": SENTINEL_ARGUMENT})
            print("prompt", SENTINEL_RESULT in prompt.messages[0].content.text)
            try:
                await session.read_resource(f"missing://{SENTINEL_ARGUMENT}")
            except MCPError as exc:  # the error message quotes the URI
                print("missing resource", exc.error.code, SENTINEL_ARGUMENT in exc.error.message)


async def _client(transport: str, store: str, endpoint: str) -> None:
    from mcp.client.session import ClientSession

    if transport == "memory":
        from mcp.shared.memory import create_client_server_memory_streams

        lowlevel = build_server()._lowlevel_server  # the MCPServer's Server: run it over the memory streams
        async with create_client_server_memory_streams() as (client_streams, server_streams):
            async with anyio.create_task_group() as group:
                options = lowlevel.create_initialization_options()
                group.start_soon(lowlevel.run, server_streams[0], server_streams[1], options)
                async with ClientSession(client_streams[0], client_streams[1]) as session:
                    await session.initialize()
                    await _drive(session)
                group.cancel_scope.cancel()
        return
    if transport == "http":
        await _over_http()
        return
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "AGENTDIAG_"))}
    params = StdioServerParameters(
        command=sys.executable, args=[str(Path(__file__).resolve()), "server", store, endpoint], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await _drive(session)


async def _over_http() -> None:
    import socket
    import threading

    import uvicorn
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.bind(("127.0.0.1", 0))
    listening.listen()  # connections wait in the backlog until uvicorn has started: no readiness wait
    port = listening.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(build_server().streamable_http_app(), log_level="warning"))
    thread = threading.Thread(target=web.run, kwargs={"sockets": [listening]}, name="mcp-http", daemon=True)
    thread.start()
    try:
        async with (
            streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await _drive(session)
    finally:
        web.should_exit = True
        await anyio.to_thread.run_sync(thread.join)
        listening.close()


async def _zero_code() -> None:
    """The memory transport, with nothing of ours called: ``opentelemetry-instrument`` loaded our configurator and
    the ``agentdiag_mcp`` instrumentor (from the environment: ``AGENTDIAG_STORE``, ``AGENTDIAG_HASH_KEY``)."""
    from mcp.client.session import ClientSession
    from mcp.shared.memory import create_client_server_memory_streams

    lowlevel = build_server()._lowlevel_server
    async with create_client_server_memory_streams() as (client_streams, server_streams):
        async with anyio.create_task_group() as group:
            options = lowlevel.create_initialization_options()
            group.start_soon(lowlevel.run, server_streams[0], server_streams[1], options)
            async with ClientSession(client_streams[0], client_streams[1]) as session:
                await session.initialize()
                await _drive(session)
            group.cancel_scope.cancel()


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[1] == "zero-code":
        anyio.run(_zero_code)
        print("done")
        return 0
    if len(argv) == 5 and argv[1] == "client" and argv[2] in ("memory", "stdio", "http"):
        diag = _configure("mcp-client", argv[3], argv[4])
        try:
            anyio.run(_client, argv[2], argv[3], argv[4])
        finally:
            diag.shutdown()
        print("done")
        return 0
    if len(argv) == 4 and argv[1] == "server":
        diag = _configure("mcp-server", argv[2], argv[3])
        try:
            build_server().run("stdio")
        finally:
            diag.shutdown()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
