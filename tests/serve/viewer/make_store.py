"""Write a real store for the viewer tests through the real pipeline: ``python make_store.py KIND PATH``.

Kinds: ``content`` (the demo agent with content capture on, plus a run whose captured values are hostile
markup) and ``big`` (one run of ``N`` tool calls through the manual wrappers). Run in its own process, so the
tests' process keeps no global tracer provider.
"""

from __future__ import annotations

import os
import sys

HOSTILE = "<img src=x onerror=\"document.title='pwned'\">"
"""Markup that would run if the viewer inserted it as HTML."""


def content_store(path: str) -> None:
    import otel_agentdiag as agentdiag
    from otel_agentdiag.demo import run_demo_agent

    handle = agentdiag.configure(service_name="viewer-content", store=path, capture_content=True)
    run_demo_agent()
    agentdiag.register_names(tools=["lookup"])
    with agentdiag.agent_run("hostile-agent", conversation_id="hostile-conversation") as run:
        run.record_content(input_messages=HOSTILE, output_messages=[{"role": "assistant", "content": HOSTILE}])
        with agentdiag.iteration(0), agentdiag.tool_call("lookup", call_id="c1", arguments={"q": HOSTILE}) as tool:
            tool.record_result(HOSTILE)
    handle.shutdown()


def big_store(path: str, tools: int) -> None:
    import otel_agentdiag as agentdiag
    from otel_agentdiag.storage import RetentionLimits

    handle = agentdiag.configure(
        service_name="viewer-big", store=path, retention=RetentionLimits(max_session_spans=None, max_session_bytes=None)
    )
    agentdiag.register_names(tools=["step"])
    per_iteration = 100
    with agentdiag.agent_run("big-agent", conversation_id="big-conversation"):
        for index in range(tools // per_iteration):
            with agentdiag.iteration(index):
                for n in range(per_iteration):
                    with agentdiag.tool_call("step", call_id=f"call-{index}-{n}"):
                        pass
    handle.shutdown()


if __name__ == "__main__":
    kind, target = sys.argv[1], sys.argv[2]
    if kind == "content":
        content_store(target)
    elif kind == "big":
        os.environ.setdefault("OTEL_BSP_MAX_QUEUE_SIZE", "50000")
        big_store(target, int(sys.argv[3]))
    else:
        raise SystemExit(f"unknown kind {kind!r}")
