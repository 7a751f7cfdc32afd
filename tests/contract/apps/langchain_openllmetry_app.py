"""LangChain 1.x ``create_agent`` (LangGraph) with ``ChatOpenAI`` and two tools (the second raising a
``ToolException`` the tool node hands back to the model: ``handle_tool_error = True``), traced by OpenLLMetry's
``opentelemetry-instrumentation-langchain`` (Traceloop) alone. The run's conversation: LangGraph's ``thread_id``.

LangChain is imported before the instrumentor runs, as in the suite's in-process LangChain setups: OpenLLMetry then
records no ``create_agent`` span (it wraps the module attribute, which this module has already bound), whose trace
would hold no conversation."""

from __future__ import annotations

import contract_app as c
from langchain.agents import create_agent
from langchain_core.tools import ToolException, tool
from langchain_openai import ChatOpenAI
from opentelemetry.instrumentation.langchain import LangchainInstrumentor


def main() -> None:
    a = c.args()
    diag = c.configure(a)

    @tool(a.weather, description=c.SENTINEL_TOOL_DESCRIPTION)
    def weather(city: str, unit: str = "celsius") -> str:
        return c.get_weather(city, unit)

    @tool(a.lookup)
    def lookup(city: str, unit: str = "celsius") -> str:
        """Look a city up."""
        try:
            return c.lookup_city(city, unit)
        except ValueError as e:
            raise ToolException(str(e)) from e

    lookup.handle_tool_error = True  # the tool node hands the error back to the model
    instrumentor = LangchainInstrumentor()
    instrumentor.instrument(tracer_provider=diag.tracer_provider)
    try:
        model = ChatOpenAI(model="gpt-4o-mini", api_key=c.SENTINEL_API_KEY, base_url=a.base_url, max_retries=0)
        agent = create_agent(model, tools=[weather, lookup], system_prompt=c.SENTINEL_SYSTEM, name=a.agent)
        config = {"configurable": {"thread_id": c.SENTINEL_CONVERSATION}}
        agent.invoke({"messages": [("user", c.SENTINEL_PROMPT)]}, config)
    finally:
        instrumentor.uninstrument()
        diag.shutdown()


if __name__ == "__main__":
    main()
