"""A framework integration's span tree: LLM leaves priced as they end, roll-ups on run and iteration, the budget
checked on the run, and a framework run inside a manual one counted there too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.cost import Budget, install_budget
from otel_agentdiag.instrumentation._framework import SpanTree
from otel_agentdiag.instrumentation.manual import use_tracer_provider

MILLION = 1_000_000


@pytest.fixture
def exporter() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    use_tracer_provider(provider)
    yield provider, memory
    use_tracer_provider(None)
    provider.shutdown()


def _llm(tree: SpanTree, key: str, parent: str, model: str, tokens_in: int, tokens_out: int) -> None:
    tree.start(
        key,
        parent,
        kind=sc.KIND_LLM,
        name=f"chat {model}",
        attributes={sc.GEN_AI_PROVIDER_NAME: "openai", sc.GEN_AI_REQUEST_MODEL: model},
    )
    tree.end(key, attributes={sc.GEN_AI_USAGE_INPUT_TOKENS: tokens_in, sc.GEN_AI_USAGE_OUTPUT_TOKENS: tokens_out})


def _by_name(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def test_framework_leaves_roll_up_their_cost_and_the_run_checks_the_budget(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = exporter
    install_budget(Budget(max_output_tokens=500))
    tree = SpanTree(provider.get_tracer("test"))
    with otel_agentdiag.agent_run("outer"):
        tree.start("run", None, kind=sc.KIND_RUN, name="invoke_agent inner", attributes={})
        tree.start("it", "run", kind=sc.KIND_ITERATION, name="agent.iteration", attributes={})
        _llm(tree, "a", "it", "gpt-4o-mini", 1000, 400)
        _llm(tree, "b", "it", "gpt-4o-mini", 2000, 300)  # output reaches 700: over the budget's 500
        _llm(tree, "c", "it", "not-a-priced-model", 5, 5)
        tree.end("it")
        tree.end("run")
    spans = memory.get_finished_spans()
    leaf_a = (1000 * 0.15 + 400 * 0.6) / MILLION
    leaf_b = (2000 * 0.15 + 300 * 0.6) / MILLION
    costs = [s.attributes.get(sc.AGENTDIAG_COST_USD) for s in spans if s.name.startswith("chat ")]
    assert costs == [leaf_a, leaf_b, None]
    inner = _by_name(spans, "invoke_agent inner")
    iteration = _by_name(spans, "agent.iteration")
    for span in (inner, iteration):
        assert span.attributes[sc.AGENTDIAG_USAGE_COST_USD] == leaf_a + leaf_b
        assert span.attributes[sc.AGENTDIAG_USAGE_PREFIX + "output_tokens"] == 705
    assert inner.attributes[sc.AGENTDIAG_BUDGET_EXCEEDED] is True
    assert tuple(inner.attributes[sc.AGENTDIAG_BUDGET_LIMITS]) == ("output_tokens",)
    (event,) = [e for e in inner.events if e.name == sc.AGENTDIAG_BUDGET_EXCEEDED]
    assert dict(event.attributes or {}) == {
        sc.AGENTDIAG_BUDGET_LIMIT: "output_tokens",
        sc.AGENTDIAG_BUDGET_THRESHOLD: 500.0,
    }
    # The manual run around the framework's run counts its leaves too (and passes the budget as well).
    outer = _by_name(spans, "invoke_agent outer")
    assert outer.attributes[sc.AGENTDIAG_USAGE_COST_USD] == leaf_a + leaf_b
    assert tuple(outer.attributes[sc.AGENTDIAG_BUDGET_LIMITS]) == ("output_tokens",)
    assert sc.AGENTDIAG_BUDGET_EXCEEDED not in iteration.attributes


def test_a_cost_the_user_set_is_kept(exporter: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    _, memory = exporter
    with otel_agentdiag.agent_run("agent"):
        with otel_agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
            call.record_response(input_tokens=100, output_tokens=100)
            call.span.set_attribute(sc.AGENTDIAG_COST_USD, 0.25)
    spans = memory.get_finished_spans()
    assert _by_name(spans, "chat gpt-4o-mini").attributes[sc.AGENTDIAG_COST_USD] == 0.25
    assert _by_name(spans, "invoke_agent agent").attributes[sc.AGENTDIAG_USAGE_COST_USD] == 0.25


def test_a_run_none_of_whose_leaves_had_a_cost_has_no_cost_roll_up(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    _, memory = exporter
    with otel_agentdiag.agent_run("agent"):
        with otel_agentdiag.llm_call(provider="openai", model="mystery") as call:
            call.record_response(input_tokens=100, output_tokens=100)
        with otel_agentdiag.llm_call(provider="openai", model="gpt-4o-mini"):
            pass  # no usage reported
    run = _by_name(memory.get_finished_spans(), "invoke_agent agent")
    assert sc.AGENTDIAG_USAGE_COST_USD not in run.attributes
    assert run.attributes[sc.AGENTDIAG_USAGE_PREFIX + "input_tokens"] == 100
