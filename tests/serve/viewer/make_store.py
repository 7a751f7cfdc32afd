"""Write a real store for the viewer tests through the real pipeline: ``python make_store.py KIND PATH``.

Kinds: ``content`` (the demo agent with content capture on, plus a run whose captured values are hostile
markup), ``big`` (one run of ``N`` tool calls through the manual wrappers), ``cost`` (a run whose LLM leaves
carry a cost and that passed its budget, and a run without any cost: see :func:`cost_store`) and ``noise``
(numbers with float noise: see :func:`noise_store`). Run in its own
process, so the tests' process keeps no global tracer provider.
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


COST_LEAVES = (0.25, 0.0042, None)
"""``agentdiag.cost.usd`` of the budget run's three LLM calls (None: a model without a price)."""
COST_THRESHOLD = 0.25


def cost_store(path: str) -> None:
    """Two runs through the manual wrappers, with the cost and budget attributes the pipeline's cost step sets
    (set here by hand, on models no price table knows, so the figures are this file's): ``budget-agent``, whose
    leaves cost :data:`COST_LEAVES` (roll-up 0.2542 on its iteration and run) and which passed its
    ``cost_usd`` budget of :data:`COST_THRESHOLD`; ``free-agent``, whose one LLM call has no cost."""
    import otel_agentdiag as agentdiag
    from otel_agentdiag import semconv as sc

    handle = agentdiag.configure(service_name="viewer-cost", store=path)
    total = sum(c for c in COST_LEAVES if c is not None)
    with agentdiag.agent_run("free-agent", conversation_id="free-conversation"):
        with agentdiag.iteration(0), agentdiag.llm_call(provider="openai", model="unpriced-model") as llm:
            llm.record_response(input_tokens=3, output_tokens=1)
    with agentdiag.agent_run("budget-agent", conversation_id="cost-conversation") as run:
        with agentdiag.iteration(0) as step:
            for index, cost in enumerate(COST_LEAVES):
                with agentdiag.llm_call(provider="openai", model=f"unpriced-model-{index}") as llm:
                    llm.record_response(input_tokens=100, output_tokens=10)
                    if cost is not None:
                        llm.span.set_attribute(sc.AGENTDIAG_COST_USD, cost)
            step.span.set_attribute(sc.AGENTDIAG_USAGE_COST_USD, total)
        run.span.set_attribute(sc.AGENTDIAG_USAGE_COST_USD, total)
        run.span.add_event(
            sc.AGENTDIAG_BUDGET_EXCEEDED,
            {sc.AGENTDIAG_BUDGET_LIMIT: sc.BUDGET_LIMIT_COST, sc.AGENTDIAG_BUDGET_THRESHOLD: COST_THRESHOLD},
        )
        run.span.set_attribute(sc.AGENTDIAG_BUDGET_EXCEEDED, True)
        run.span.set_attribute(sc.AGENTDIAG_BUDGET_LIMITS, [sc.BUDGET_LIMIT_COST])
    handle.shutdown()


NOISY_COST = 58 * 1.6e-06
"""A leaf's cost as a price times tokens leaves it (58 tokens at $1.60 a million): ``0.00009279999999999999``,
0.0000928 to 12 significant digits."""
NOISY_TEMPERATURE = 0.1 + 0.2
"""``0.30000000000000004``: a request temperature as arithmetic left it."""


def noise_store(path: str) -> None:
    """One run, ``noisy-agent``, whose LLM call's cost (:data:`NOISY_COST`, rolled up on the iteration and the
    run) and request temperature (:data:`NOISY_TEMPERATURE`) carry float noise."""
    import otel_agentdiag as agentdiag
    from otel_agentdiag import semconv as sc

    assert repr(NOISY_COST) == "9.279999999999999e-05" and repr(NOISY_TEMPERATURE) == "0.30000000000000004"
    handle = agentdiag.configure(service_name="viewer-noise", store=path)
    with agentdiag.agent_run("noisy-agent", conversation_id="noisy-conversation") as run:
        with agentdiag.iteration(0) as step:
            with agentdiag.llm_call(provider="openai", model="unpriced-model") as llm:
                llm.span.set_attribute(sc.GEN_AI_REQUEST_TEMPERATURE, NOISY_TEMPERATURE)
                llm.record_response(input_tokens=58, output_tokens=4)
                llm.span.set_attribute(sc.AGENTDIAG_COST_USD, NOISY_COST)
            step.span.set_attribute(sc.AGENTDIAG_USAGE_COST_USD, NOISY_COST)
        run.span.set_attribute(sc.AGENTDIAG_USAGE_COST_USD, NOISY_COST)
    handle.shutdown()


if __name__ == "__main__":
    kind, target = sys.argv[1], sys.argv[2]
    if kind == "content":
        content_store(target)
    elif kind == "cost":
        cost_store(target)
    elif kind == "noise":
        noise_store(target)
    elif kind == "big":
        os.environ.setdefault("OTEL_BSP_MAX_QUEUE_SIZE", "50000")
        big_store(target, int(sys.argv[3]))
    else:
        raise SystemExit(f"unknown kind {kind!r}")
