"""The span tree every framework integration builds on: parents from ids, roll-ups, activation, ending once."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest
from conftest import Spans
from llm_spans import raw_ids
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content
from otel_agentdiag._internal.context import active_framework_step, framework_parent
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.instrumentation._framework import SpanTree


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def by_name(spans: Spans) -> dict[str, Any]:
    out = {s.name: s for s in spans.finished()}
    assert len(out) == len(spans.finished())
    return out


def leaf_usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {sc.GEN_AI_USAGE_INPUT_TOKENS: input_tokens, sc.GEN_AI_USAGE_OUTPUT_TOKENS: output_tokens}


def build(tree: SpanTree) -> None:
    """run → iteration 1 → (llm a, tool) ; iteration 2 → llm b ; with conversation "c-1"."""
    tree.start("run", None, kind=sc.KIND_RUN, name="invoke_agent a", attributes={}, conversation_id="c-1")
    tree.start("it1", "run", kind=sc.KIND_ITERATION, name="agent.iteration 1", attributes={})
    tree.start("llm-a", "it1", kind=sc.KIND_LLM, name="chat a", attributes={}, span_kind=SpanKind.CLIENT)
    tree.end("llm-a", attributes=leaf_usage(10, 2))
    tree.start("tool", "it1", kind=sc.KIND_TOOL, name="execute_tool t", attributes={})
    tree.end("tool")
    tree.end("it1")
    tree.start("it2", "run", kind=sc.KIND_ITERATION, name="agent.iteration 2", attributes={})
    tree.start("llm-b", "it2", kind=sc.KIND_LLM, name="chat b", attributes={}, span_kind=SpanKind.CLIENT)
    tree.end("llm-b", attributes=leaf_usage(30, 5))
    tree.end("it2")
    tree.end("run")


def test_parents_come_from_the_ids_and_rollups_sum_the_leaves(spans: Spans) -> None:
    tree = SpanTree(spans.provider.get_tracer("t"))
    build(tree)
    found = by_name(spans)
    run, it1, it2 = found["invoke_agent a"], found["agent.iteration 1"], found["agent.iteration 2"]
    assert found["chat a"].parent.span_id == it1.context.span_id
    assert found["execute_tool t"].parent.span_id == it1.context.span_id
    assert found["chat b"].parent.span_id == it2.context.span_id
    assert it1.parent.span_id == it2.parent.span_id == run.context.span_id
    assert run.parent is None
    assert attrs(run)["agentdiag.usage.input_tokens"] == 40
    assert attrs(run)["agentdiag.usage.output_tokens"] == 7
    assert (attrs(it1)["agentdiag.usage.input_tokens"], attrs(it2)["agentdiag.usage.input_tokens"]) == (10, 30)
    # Usage stays on the leaves; the tool and the ancestors never carry gen_ai.usage.*.
    for name, span in found.items():
        usage = [k for k in attrs(span) if k.startswith("gen_ai.usage.")]
        assert bool(usage) == name.startswith("chat"), name
        assert raw_ids(span)["gen_ai.conversation.id"] == "c-1"
        assert attrs(span)["agentdiag.kind"] in sc.KINDS
    assert "agentdiag.usage.input_tokens" not in attrs(found["execute_tool t"])
    assert len(tree) == 0


def test_no_reported_usage_means_no_rollup(spans: Spans) -> None:
    tree = SpanTree(spans.provider.get_tracer("t"))
    tree.start("run", None, kind=sc.KIND_RUN, name="run", attributes={})
    tree.start("llm", "run", kind=sc.KIND_LLM, name="chat", attributes={})
    tree.end("llm")
    tree.end("run")
    run = by_name(spans)["run"]
    assert not [k for k in attrs(run) if k.startswith("agentdiag.usage.")]


def test_a_span_ends_once_with_its_error_type_only(spans: Spans) -> None:
    tree = SpanTree(spans.provider.get_tracer("t"))
    tree.start("tool", None, kind=sc.KIND_TOOL, name="execute_tool t", attributes={})
    node = tree.end("tool", error_type="ValueError")
    assert node is not None and node.ended
    assert tree.end("tool", error_type="Other") is None
    (span,) = spans.finished()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description is None
    assert attrs(span)["error.type"] == "ValueError"
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
        ("exception", {"exception.type": "ValueError"})
    ]


def test_an_alias_names_the_same_span_and_goes_with_it(spans: Spans) -> None:
    tree = SpanTree(spans.provider.get_tracer("t"))
    node = tree.start("graph", None, kind=sc.KIND_RUN, name="run", attributes={})
    assert node is not None
    tree.alias("node-run", node)
    tree.start("llm", "node-run", kind=sc.KIND_LLM, name="chat", attributes={})
    tree.end("llm")
    tree.end("graph")
    assert tree.get("node-run") is None
    found = by_name(spans)
    assert found["chat"].parent.span_id == found["run"].context.span_id


def test_end_all_ends_children_first(spans: Spans) -> None:
    tree = SpanTree(spans.provider.get_tracer("t"))
    tree.start("run", None, kind=sc.KIND_RUN, name="run", attributes={})
    tree.start("it", "run", kind=sc.KIND_ITERATION, name="it", attributes={})
    tree.start("tool", "it", kind=sc.KIND_TOOL, name="tool", attributes={})
    assert tree.end_all("agentdiag.uninstrumented") == 3
    assert [s.name for s in spans.finished()] == ["tool", "it", "run"]
    assert all(attrs(s)["error.type"] == "agentdiag.uninstrumented" for s in spans.finished())


def test_code_inside_an_active_step_is_parented_to_it_unless_a_newer_span_is_current(spans: Spans) -> None:
    tree = SpanTree(spans.provider.get_tracer("t"))
    manual.use_tracer_provider(spans.provider)
    try:
        tree.start("run", None, kind=sc.KIND_RUN, name="run", attributes={}, conversation_id="c-9")
        tree.start("tool", "run", kind=sc.KIND_TOOL, name="framework tool", attributes={})
        with manual.tool_call("inner"):  # the framework's tool span is its parent
            with manual.tool_call("innermost"):  # the newer OpenTelemetry span wins
                pass
        tree.end("tool")
        with manual.tool_call("after"):  # the tool ended: back under the run
            pass
        tree.end("run")
        with manual.tool_call("outside"):  # nothing active: the ambient context
            pass
    finally:
        manual.use_tracer_provider(None)
    found = by_name(spans)
    assert found["execute_tool inner"].parent.span_id == found["framework tool"].context.span_id
    assert found["execute_tool innermost"].parent.span_id == found["execute_tool inner"].context.span_id
    assert found["execute_tool after"].parent.span_id == found["run"].context.span_id
    assert found["execute_tool outside"].parent is None
    for name in ("execute_tool inner", "execute_tool innermost", "execute_tool after"):
        assert raw_ids(found[name])["gen_ai.conversation.id"] == "c-9"
    assert "gen_ai.conversation.id" not in raw_ids(found["execute_tool outside"])
    assert active_framework_step() is None


def test_an_active_llm_step_is_the_owner_of_the_model_call(spans: Spans) -> None:
    tree = SpanTree(spans.provider.get_tracer("t"))
    node = tree.start("llm", None, kind=sc.KIND_LLM, name="chat", attributes={})
    assert node is not None
    ctx = trace.set_span_in_context(trace.INVALID_SPAN)
    step = framework_parent(ctx)
    assert step is node and step.llm is not None
    assert step.llm.content is False  # the framework captures the call's content; a client enriching it does not
    tree.end("llm")
    assert framework_parent(ctx) is None


class _ListSink:
    """Every capture that reaches the seam, whether or not its span still records."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str, Any]] = []

    def record(self, span: Any, role: str, value: Any) -> None:
        self.records.append((span.name, role, value))


def test_a_node_captures_content_only_while_its_span_is_open(spans: Spans, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = SpanTree(spans.provider.get_tracer("t"))
    node = tree.start("tool", None, kind=sc.KIND_TOOL, name="execute_tool t", attributes={})
    assert node is not None
    node.capture(sc.CONTENT_TOOL_ARGUMENTS, {"city": "Paris"})  # capture off: nothing, and no error
    sink = _ListSink()
    content.install(sink)
    try:
        node.capture(sc.CONTENT_TOOL_ARGUMENTS, {"city": "Oslo"})
        tree.end("tool")
        node.capture(sc.CONTENT_TOOL_RESULT, "late")  # the span has ended: dropped before the seam
    finally:
        content.uninstall(sink)
    assert sink.records == [("execute_tool t", sc.CONTENT_TOOL_ARGUMENTS, {"city": "Oslo"})]
    (span,) = spans.finished()
    assert attrs(span) == {"agentdiag.kind": "tool"}  # content is never an attribute


def test_ending_a_step_in_another_context_never_fails(spans: Spans) -> None:
    tree = SpanTree(spans.provider.get_tracer("t"))
    started = contextvars.copy_context()
    started.run(tree.start, "run", None, kind=sc.KIND_RUN, name="run", attributes={})
    assert started.run(active_framework_step) is not None
    ended = threading.Thread(target=tree.end, args=("run",))  # a thread starts with an empty context
    ended.start()
    ended.join()
    assert started.run(active_framework_step) is None  # the stale entry is skipped: the step has ended
    assert [s.name for s in spans.finished()] == ["run"]


def test_concurrent_tasks_build_separate_trees(spans: Spans) -> None:
    tree = SpanTree(spans.provider.get_tracer("t"))

    async def one(run: str) -> None:
        tree.start(run, None, kind=sc.KIND_RUN, name=run, attributes={}, conversation_id=run)
        for i in range(3):
            tree.start(f"{run}-tool-{i}", run, kind=sc.KIND_TOOL, name=f"{run}-tool-{i}", attributes={})
            await asyncio.sleep(0)  # yield to the other task between start and end
            tree.end(f"{run}-tool-{i}")
        tree.end(run)

    async def both() -> None:
        await asyncio.gather(one("a"), one("b"))

    asyncio.run(both())
    found = by_name(spans)
    for run in ("a", "b"):
        for i in range(3):
            tool = found[f"{run}-tool-{i}"]
            assert tool.parent.span_id == found[run].context.span_id
            assert raw_ids(tool)["gen_ai.conversation.id"] == run


@pytest.mark.parametrize("kind", [sc.KIND_ITERATION, sc.KIND_RUN])
def test_a_failing_tracer_is_contained(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def start_span(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("boom")

    tree = SpanTree(Broken())  # type: ignore[arg-type]
    tree.start("x", None, kind=kind, name="x", attributes={})
    tree.end("x")
    assert "RuntimeError" in caplog.text


def test_llm_spans_of_other_instrumentations_inside_a_step_roll_up(spans: Spans) -> None:
    tree = SpanTree(spans.provider.get_tracer("t"))
    manual.use_tracer_provider(spans.provider)
    try:
        tree.start("run", None, kind=sc.KIND_RUN, name="run", attributes={})
        tree.start("it", "run", kind=sc.KIND_ITERATION, name="it", attributes={})
        tree.start("tool", "it", kind=sc.KIND_TOOL, name="tool", attributes={})
        with manual.llm_call(provider="openai", model="m") as call:  # a hand-made LLM span inside the tool
            call.record_response(input_tokens=7, output_tokens=3)
        tree.end("tool")
        tree.start("llm", "it", kind=sc.KIND_LLM, name="chat", attributes={})
        tree.end("llm", attributes=leaf_usage(10, 1))
        tree.end("it")
        tree.end("run")
    finally:
        manual.use_tracer_provider(None)
    found = by_name(spans)
    assert attrs(found["run"])["agentdiag.usage.input_tokens"] == 17
    assert attrs(found["it"])["agentdiag.usage.output_tokens"] == 4
    assert found["chat m"].parent.span_id == found["tool"].context.span_id


def test_end_all_reaches_a_node_known_only_by_an_alias(spans: Spans) -> None:
    tree = SpanTree(spans.provider.get_tracer("t"))
    node = tree.start("run", None, kind=sc.KIND_RUN, name="run", attributes={})
    assert node is not None
    tree.alias("first-agent", node)
    tree.forget("run")  # the integration dropped the node's own key; the alias still names it
    assert tree.end_all("agentdiag.uninstrumented") == 1
    (span,) = spans.finished()
    assert attrs(span)["error.type"] == "agentdiag.uninstrumented"
    assert len(tree) == 0
