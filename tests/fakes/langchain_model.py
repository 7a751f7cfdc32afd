"""A scripted LangChain chat model that drives ``create_agent`` / ``create_react_agent`` offline.

Each model call consumes the next step of a script: an :class:`AIMessage` (tool calls or a final text, with
``usage_metadata``) or an exception instance, which the call raises (a fatal model error).

Usage::

    from tests.fakes.langchain_model import ScriptedChatModel, final_text, tool_calls

    model = ScriptedChatModel.from_steps(
        tool_calls(("get_weather", {"city": "Paris"})),  # id defaults to "call_1"
        final_text("Sunny in Paris."),
    )
    agent = create_agent(model, tools=[get_weather], system_prompt="...", name="weather_agent")
    agent.invoke({"messages": [("user", "Weather in Paris?")]})
    assert model.bound_tools[0]["function"]["name"] == "get_weather"
    assert len(model.calls) == 2

What LangChain reports to callbacks for this model: ``on_chat_model_start`` (not ``on_llm_start``) with
``invocation_params["model_name"] == "fake-chat-model"``, ``invocation_params["_type"] == "scripted-chat-model"``
and, once tools are bound, ``invocation_params["tools"]`` (OpenAI format); metadata ``ls_model_name``
(from :attr:`model_name`) and ``ls_provider == "scriptedchatmodel"`` (BaseChatModel derives it from the class
name). Messages carry ``response_metadata["model_name"]`` (``UsageMetadataCallbackHandler`` keys on it).
``on_llm_end`` carries the step's ``usage_metadata`` on ``generations[0][0].message``, also when streamed: text
streams word by word, tool calls stream as ``tool_call_chunks`` (arguments split in two pieces), and the usage
rides only on the final chunk (``chunk_position="last"``), so merged usage is counted once per call.

A model is stateful (its script is consumed), thread-safe, and works for sync and async runs; build a fresh
one per test. Set ``repeat_last=True`` for a model that never stops (recursion-limit tests): once the script
runs out the last step is repeated, with tool call ids suffixed by the call number so they stay unique.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolCall, UsageMetadata
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, PrivateAttr

__all__ = ["ScriptedChatModel", "ScriptExhaustedError", "final_text", "tool_calls", "usage"]

Step = AIMessage | BaseException


class ScriptExhaustedError(RuntimeError):
    """The model was called more often than its script has steps."""


def usage(input_tokens: int = 10, output_tokens: int = 5) -> UsageMetadata:
    """Token usage for one model call."""
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, "total_tokens": input_tokens + output_tokens}


def tool_calls(
    *calls: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str], usage_metadata: UsageMetadata | None = None
) -> AIMessage:
    """A step calling tools: each call is ``(name, args)`` or ``(name, args, id)``; ids default to ``call_<n>``."""
    parsed = [
        ToolCall(name=c[0], args=c[1], id=c[2] if len(c) > 2 else f"call_{i}", type="tool_call")
        for i, c in enumerate(calls, 1)
    ]
    return AIMessage(content="", tool_calls=parsed, usage_metadata=usage_metadata or usage())


def final_text(text: str, usage_metadata: UsageMetadata | None = None) -> AIMessage:
    """A step answering with text (no tool calls), which ends an agent loop."""
    return AIMessage(content=text, usage_metadata=usage_metadata or usage(output_tokens=max(1, len(text.split()))))


class ScriptedChatModel(BaseChatModel):
    """A chat model answering each call with the next scripted step (see the module docstring)."""

    model_name: str = "fake-chat-model"
    steps: list[Any] = Field(default_factory=list)  # list[Step]; Any keeps pydantic from copying exceptions
    repeat_last: bool = False
    calls: list[dict[str, Any]] = Field(default_factory=list)
    """One record per model call: ``{"messages": [...], "kwargs": {...}, "streamed": bool}``."""
    bound_tools: list[dict[str, Any]] = Field(default_factory=list)
    """The tools (OpenAI format) of the last :meth:`bind_tools`."""

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def from_steps(cls, *steps: Step, **kwargs: Any) -> ScriptedChatModel:
        return cls(steps=list(steps), **kwargs)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools the way provider models do: ``tools`` (OpenAI format) become call kwargs."""
        formatted = [convert_to_openai_tool(t) for t in tools]
        self.bound_tools = formatted
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def _next_step(self, messages: list[BaseMessage], kwargs: dict[str, Any], streamed: bool) -> AIMessage:
        with self._lock:
            n = len(self.calls)
            self.calls.append({"messages": list(messages), "kwargs": dict(kwargs), "streamed": streamed})
            step: Step
            if n < len(self.steps):
                step = self.steps[n]
            elif self.repeat_last and self.steps:
                step = self.steps[-1]
                if isinstance(step, AIMessage) and step.tool_calls:
                    calls = [{**tc, "id": f"{tc['id']}_{n + 1}"} for tc in step.tool_calls]
                    step = step.model_copy(update={"tool_calls": calls})
            else:
                raise ScriptExhaustedError(f"model called {n + 1} times, script has {len(self.steps)} steps")
        if isinstance(step, BaseException):
            raise step
        return step

    def _response_metadata(self, step: AIMessage) -> dict[str, Any]:
        return {"model_name": self.model_name, "finish_reason": "tool_calls" if step.tool_calls else "stop"}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        step = self._next_step(messages, kwargs, streamed=False)
        message = step.model_copy(update={"response_metadata": self._response_metadata(step)})
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._generate(messages, stop, **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        # BaseChatModel calls run_manager.on_llm_new_token for every chunk we yield; we must not.
        step = self._next_step(messages, kwargs, streamed=True)
        text = step.content if isinstance(step.content, str) else ""
        for token in (t for t in re.split(r"(\s)", text) if t):
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))
        for index, tc in enumerate(step.tool_calls):
            args = json.dumps(tc["args"])
            cut = len(args) // 2  # two pieces, so consumers must merge the argument fragments
            pieces = [
                tool_call_chunk(name=tc["name"], id=tc["id"], args=args[:cut], index=index),
                tool_call_chunk(name=None, id=None, args=args[cut:], index=index),
            ]
            for piece in pieces:
                yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[piece]))
        last = AIMessageChunk(
            content="",
            usage_metadata=step.usage_metadata,
            response_metadata=self._response_metadata(step),
            chunk_position="last",
        )
        yield ChatGenerationChunk(message=last)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        # Native async (no thread pool), like provider SDK clients.
        for chunk in self._stream(messages, stop, **kwargs):
            yield chunk
