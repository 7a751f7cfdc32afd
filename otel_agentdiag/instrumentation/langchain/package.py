"""The ``langchain-core`` releases this instrumentation supports."""

_instruments = ("langchain-core >= 1.0",)
"""The ``langchain-core`` releases this instrumentation supports (the callback system of LangChain 1.x, which
``langchain.agents.create_agent`` and LangGraph's prebuilt agents report through)."""
