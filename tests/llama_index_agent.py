"""A scripted LlamaIndex workflow agent for the tests (``tests/instrumentation/test_llama_index.py``) and the
zero-code app (``tests/zero_code_llama_index_app.py``).

A real ``FunctionAgent`` with three real ``FunctionTool`` s (two succeed, one raises ``LookupError``) and
LlamaIndex's own function-calling test model (``MockFunctionCallingLLM``), scripted by the conversation so far:
two tool calls, then the failing tool, then the answer, each response with usage and an id in its raw response,
as LlamaIndex's provider integrations report them. Sentinels in the prompt, the system prompt, a tool
description, the tool arguments and results, the call and response ids and the failing tool's message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fakes import openai_server as fake
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage, ChatResponse, MessageRole
from llama_index.core.llms.callbacks import llm_chat_callback
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

MODEL = "gpt-4o-mini"
ANSWER = "It is sunny."
FAILING_TOOL_ERROR = f"lookup failed for {fake.SENTINEL_USER}"
SENTINELS = (*fake.SENTINELS, "/home/alice")
PROMPT = f"{fake.SENTINEL_PROMPT} weather in /home/alice?"
USAGE = ((11, 3), (17, 5), (23, 7))  # (prompt, completion) tokens of the three model calls


class ScriptedLLM(MockFunctionCallingLLM):
    """LlamaIndex's function-calling test model, scripted by the conversation so far (so concurrent runs do not
    share state): two tool calls, then the failing tool, then the answer; each response with usage and an id."""

    @property
    def metadata(self) -> Any:
        meta = super().metadata
        meta.model_name = MODEL
        return meta

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        turn = (
            0
            if not any(m.role == MessageRole.TOOL for m in messages)
            else (2 if len(_tool_results(messages)) >= 3 else 1)
        )
        args = {"city": fake.SENTINEL_TOOL_ARGS}
        if turn == 0:
            blocks: list[Any] = [
                ToolCallBlock(
                    tool_call_id=f"{fake.SENTINEL_TOOL_CALL_ID}-1", tool_name="get_weather", tool_kwargs=args
                ),
                ToolCallBlock(tool_call_id=f"{fake.SENTINEL_TOOL_CALL_ID}-2", tool_name="get_time", tool_kwargs=args),
            ]
            message = ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)
        elif turn == 1:
            block = ToolCallBlock(tool_call_id=f"{fake.SENTINEL_TOOL_CALL_ID}-3", tool_name="lookup", tool_kwargs=args)
            message = ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])
        else:
            message = ChatMessage(role=MessageRole.ASSISTANT, content=ANSWER)
        prompt, completion = USAGE[turn]
        raw = {
            "id": fake.SENTINEL_RESPONSE_ID,
            "model": MODEL,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }
        return ChatResponse(message=message, raw=raw)

    @llm_chat_callback()  # type: ignore[untyped-decorator,misc]
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        """The same script as one streamed chunk (the end event, with the usage, comes when it is consumed)."""
        response = self.chat(messages, **kwargs)

        async def stream() -> Any:
            yield response

        return stream()


def _tool_results(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    return [m for m in messages if m.role == MessageRole.TOOL]


def get_weather(city: str) -> str:
    """SENTINEL-TOOLDESC-52ae: the weather in a city."""
    return fake.SENTINEL_TOOL_RESULT


def get_time(city: str) -> str:
    """The local time in a city."""
    return fake.SENTINEL_TOOL_RESULT


def lookup(city: str) -> str:
    """Look a city up."""
    raise LookupError(FAILING_TOOL_ERROR)


def make_agent(name: str = "weather_agent", *, streaming: bool = False) -> FunctionAgent:
    tools = [FunctionTool.from_defaults(fn) for fn in (get_weather, get_time, lookup)]
    return FunctionAgent(
        name=name,
        description="answers weather questions",
        tools=tools,
        llm=ScriptedLLM(),
        streaming=streaming,
        system_prompt=fake.SENTINEL_SYSTEM,
    )


async def run_agent(agent: FunctionAgent) -> str:
    return str(await agent.run(user_msg=PROMPT))
