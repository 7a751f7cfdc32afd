"""The ``autogen-agentchat`` releases this instrumentation supports."""

from __future__ import annotations

_instruments = ("autogen-agentchat >= 0.7",)
"""The ``autogen-agentchat`` releases this instrumentation supports (tested: 0.7.5, with autogen-core and
autogen-ext 0.7.5: ``BaseChatAgent.run`` / ``run_stream``, ``AssistantAgent.on_messages`` / ``on_messages_stream``,
``BaseGroupChat.run`` / ``run_stream``, ``BaseTool.run_json``, ``BaseStreamTool.run_json_stream`` and
``BaseOpenAIChatCompletionClient.create`` / ``create_stream``)."""
