"""The ``llama-index-core`` releases this instrumentation supports."""

_instruments = ("llama-index-core >= 0.14",)
"""The ``llama-index-core`` releases this instrumentation supports (the workflow agents, ``FunctionAgent``,
``ReActAgent``, ``CodeActAgent`` and ``AgentWorkflow``, report their steps through the instrumentation dispatcher
of ``llama-index-instrumentation``, which 0.14 uses; tested 0.14.25)."""
