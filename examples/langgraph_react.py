"""A LangChain ``create_agent`` ReAct loop traced by otel-agentdiag, offline: run it, then read its trace.

    pip install -e '.[langchain]' 'langchain>=1.0'   # from a checkout: langchain-core, langchain, langgraph
    python examples/langgraph_react.py [--store PATH] [--stream]

Without them it prints that install line on stderr and exits with code 2.

The agent's model is a tiny scripted chat model defined below (no network, no API key): the first answer asks
for the ``get_weather`` tool, the second answers. The LangChain instrumentor turns the run into
``invoke_agent weather_agent`` → one ``agent.iteration`` per model call → ``chat scripted-model`` and the
``execute_tool get_weather`` it asked for; the thread id is the conversation. The script prints ``agentdiag show``
of the run's trace.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

try:
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
    from langchain_core.tools import tool
    from langchain_core.utils.function_calling import convert_to_openai_tool
except ImportError:  # the README's first command installs the base package only
    print("this example needs LangChain and LangGraph: pip install -e '.[langchain]' 'langchain>=1.0'", file=sys.stderr)
    raise SystemExit(2) from None

import otel_agentdiag as agentdiag
from otel_agentdiag.cli import cli
from otel_agentdiag.instrumentation.langchain import LangChainInstrumentor
from otel_agentdiag.storage import SpanStore


class ScriptedModel(BaseChatModel):
    """Stands in for a provider's chat model: calls ``get_weather`` until a tool answer is in the conversation,
    then answers with it. Reports token usage like a provider does."""

    model_name: str = "scripted-model"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        # Like a provider model: the tools go to the API (and to the callbacks) in OpenAI format.
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **{k: v for k, v in kwargs.items() if v})

    def _answer(self, messages: list[BaseMessage]) -> AIMessage:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        metadata = {"model_name": self.model_name}
        if not results:
            call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}
            usage = {"input_tokens": 52, "output_tokens": 14, "total_tokens": 66}
            return AIMessage(
                content="",
                tool_calls=[call],
                usage_metadata=usage,
                response_metadata={**metadata, "finish_reason": "tool_calls"},
            )
        usage = {"input_tokens": 81, "output_tokens": 9, "total_tokens": 90}
        return AIMessage(
            content=str(results[-1].content),
            usage_metadata=usage,
            response_metadata={**metadata, "finish_reason": "stop"},
        )

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages))])

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        answer = self._answer(messages)
        for word in str(answer.content).split(" "):
            yield ChatGenerationChunk(message=AIMessageChunk(content=word + " "))
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                tool_call_chunks=[
                    {"name": c["name"], "args": str(c["args"]).replace("'", '"'), "id": c["id"], "index": i}
                    for i, c in enumerate(answer.tool_calls)
                ],
                usage_metadata=answer.usage_metadata,
                response_metadata=answer.response_metadata,
                chunk_position="last",
            )
        )


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny, 21 degrees in {city}."


def main(store: str | None, stream: bool) -> str:
    diag = agentdiag.configure(service_name="langgraph-react", store=store)
    LangChainInstrumentor().instrument()
    try:
        agent = create_agent(ScriptedModel(), tools=[get_weather], system_prompt="Use the tool.", name="weather_agent")
        inputs = {"messages": [("user", "What's the weather in Paris?")]}
        config: Any = {"configurable": {"thread_id": "thread-42"}}  # thread_id: the conversation
        if stream:
            state: Any = None
            for mode, chunk in agent.stream(inputs, config, stream_mode=["messages", "values"]):
                if mode == "values":
                    state = chunk
        else:
            state = agent.invoke(inputs, config)
        answer = str(state["messages"][-1].content).strip()
    finally:
        LangChainInstrumentor().uninstrument()
        diag.shutdown()
    print(answer)
    with SpanStore(diag.store_path, create=False) as reader:
        newest = reader.list_traces(limit=1)[0].trace_id
    cli.main(["show", newest, "--store", str(diag.store_path)], prog_name="agentdiag", standalone_mode=False)
    return answer


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="SQLite store (default: ./.agentdiag/traces.db)")
    parser.add_argument("--stream", action="store_true", help="stream the run (the model's tokens too)")
    arguments = parser.parse_args()
    main(arguments.store, arguments.stream)
