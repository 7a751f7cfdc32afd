"""The manual wrappers: span tree, names, kinds, attributes, errors, async, decorators."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.testing import capture_spans, correlation_ids


def _by_kind(spans, kind):
    return [s for s in spans if s.attributes.get(sc.AGENTDIAG_KIND) == kind]


def test_sync_run_tree_names_kinds_and_attributes():
    with capture_spans() as captured:
        with agentdiag.agent_run("planner", conversation_id="conv-1", user_id="u-1", agent_id="a-1"):
            with agentdiag.iteration(0):
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    call.record_response(
                        response_model="gpt-4o-mini-2024",
                        response_id="resp-1",
                        finish_reasons=["tool_calls"],
                        input_tokens=12,
                        output_tokens=3,
                    )
                with agentdiag.tool_call("search", call_id="call-1"):
                    pass
            with agentdiag.iteration(1):
                with agentdiag.llm_call(provider="anthropic", model="claude-x", operation="text_completion"):
                    pass
    spans = captured.spans()
    assert len(spans) == 6
    (run,) = _by_kind(spans, sc.KIND_RUN)
    iterations = _by_kind(spans, sc.KIND_ITERATION)
    llms = _by_kind(spans, sc.KIND_LLM)
    (tool,) = _by_kind(spans, sc.KIND_TOOL)

    assert run.name == "invoke_agent planner"
    assert run.kind is SpanKind.INTERNAL
    assert run.parent is None
    assert run.attributes[sc.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert run.attributes[sc.GEN_AI_AGENT_NAME] == "planner"
    # Correlation ids travel beside the span to our redactors, never as attributes any processor could export.
    assert correlation_ids(run)[sc.GEN_AI_AGENT_ID] == "a-1"
    assert correlation_ids(run)[sc.USER_ID] == "u-1"

    assert [s.name for s in iterations] == ["agent.iteration", "agent.iteration"]
    assert sorted(s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations) == [0, 1]
    assert all(s.parent.span_id == run.context.span_id for s in iterations)

    first, second = sorted(llms, key=lambda s: s.start_time)
    assert first.name == "chat gpt-4o-mini"
    assert first.kind is SpanKind.CLIENT
    assert first.attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert first.attributes[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert first.attributes[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini-2024"
    assert correlation_ids(first)[sc.GEN_AI_RESPONSE_ID] == "resp-1"
    assert first.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert first.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 12
    assert first.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert second.name == "text_completion claude-x"
    assert second.attributes[sc.GEN_AI_OPERATION_NAME] == "text_completion"

    assert tool.name == "execute_tool search"
    assert tool.attributes[sc.GEN_AI_OPERATION_NAME] == "execute_tool"
    assert tool.attributes[sc.GEN_AI_TOOL_NAME] == "search"
    assert correlation_ids(tool)[sc.GEN_AI_TOOL_CALL_ID] == "call-1"
    assert tool.attributes[sc.GEN_AI_TOOL_TYPE] == "function"
    first_iteration = next(s for s in iterations if s.attributes[sc.AGENTDIAG_ITERATION_INDEX] == 0)
    assert tool.parent.span_id == first_iteration.context.span_id
    assert first.parent.span_id == first_iteration.context.span_id

    # One trace; every span carries its kind and the run's conversation (beside it).
    assert {s.context.trace_id for s in spans} == {run.context.trace_id}
    assert all(correlation_ids(s)[sc.GEN_AI_CONVERSATION_ID] == "conv-1" for s in spans)
    # The user and agent ids stay with the run span.
    assert all(sc.USER_ID not in correlation_ids(s) for s in spans if s is not run)
    # No correlation id is ever an attribute.
    assert all(not set(sc.CORRELATION_ID_KINDS) & set(s.attributes) for s in spans)


def test_sampling_relevant_attributes_are_set_at_start():
    seen = {}

    from opentelemetry.sdk.trace import SpanProcessor

    class StartRecorder(SpanProcessor):
        def on_start(self, span, parent_context=None):
            seen[span.name] = dict(span.attributes)

    with capture_spans() as captured:
        captured.tracer_provider.add_span_processor(StartRecorder())
        with agentdiag.llm_call(provider="openai", model="m1"):
            pass
        with agentdiag.agent_run("a"):
            pass
    assert seen["chat m1"][sc.GEN_AI_OPERATION_NAME] == "chat"
    assert seen["chat m1"][sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert seen["chat m1"][sc.GEN_AI_REQUEST_MODEL] == "m1"
    assert seen["invoke_agent a"][sc.GEN_AI_AGENT_NAME] == "a"


def test_usage_not_given_is_absent_never_zero():
    with capture_spans() as captured:
        with agentdiag.llm_call(provider="openai", model="m") as call:
            call.record_response(finish_reasons=["stop"])
    (span,) = captured.spans()
    assert not any(key.startswith("gen_ai.usage.") for key in span.attributes)
    assert sc.GEN_AI_RESPONSE_ID not in span.attributes
    assert sc.GEN_AI_RESPONSE_ID not in correlation_ids(span)


def test_nested_iterations_and_subagent_inherit_conversation():
    with capture_spans() as captured:
        with agentdiag.agent_run("outer", conversation_id="conv-outer"):
            with agentdiag.iteration(0):
                with agentdiag.iteration(0):  # a nested loop, e.g. a retry loop inside a turn
                    with agentdiag.agent_run("inner"):
                        with agentdiag.tool_call("t"):
                            pass
    spans = {s.name: s for s in captured.spans()}
    iterations = captured.by_name("agent.iteration")
    assert len(iterations) == 2
    outer_it, inner_it = sorted(iterations, key=lambda s: s.start_time)
    assert inner_it.parent.span_id == outer_it.context.span_id
    assert spans["invoke_agent inner"].parent.span_id == inner_it.context.span_id
    assert spans["execute_tool t"].parent.span_id == spans["invoke_agent inner"].context.span_id
    assert all(correlation_ids(s)[sc.GEN_AI_CONVERSATION_ID] == "conv-outer" for s in captured.spans())
    assert all(sc.GEN_AI_CONVERSATION_ID not in s.attributes for s in captured.spans())


def test_no_conversation_outside_a_run():
    with capture_spans() as captured:
        with agentdiag.tool_call("t"):
            pass
    (span,) = captured.spans()
    assert sc.GEN_AI_CONVERSATION_ID not in span.attributes
    assert correlation_ids(span) == {}


class QuotaExceeded(RuntimeError):
    pass


def test_exception_is_recorded_and_reraised_unchanged():
    error = QuotaExceeded("secret detail")
    with capture_spans() as captured:
        with pytest.raises(QuotaExceeded) as raised:
            with agentdiag.agent_run("a"):
                with agentdiag.tool_call("t"):
                    raise error
    assert raised.value is error
    assert raised.value.args == ("secret detail",)
    tool, run = captured.spans()
    for span in (tool, run):
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description is None
        assert span.attributes[sc.ERROR_TYPE] == f"{__name__}.QuotaExceeded"
        (event,) = span.events
        assert event.name == "exception"
        assert event.attributes["exception.type"] == f"{__name__}.QuotaExceeded"


def test_builtin_exception_type_is_bare_and_base_exceptions_propagate():
    with capture_spans() as captured:
        with pytest.raises(KeyboardInterrupt):
            with agentdiag.iteration(0):
                raise KeyboardInterrupt
        with pytest.raises(ValueError):
            with agentdiag.llm_call(provider="p", model="m"):
                raise ValueError("x")
    iteration_span, llm_span = captured.spans()
    assert iteration_span.attributes[sc.ERROR_TYPE] == "KeyboardInterrupt"
    assert llm_span.attributes[sc.ERROR_TYPE] == "ValueError"


def test_successful_spans_leave_status_unset():
    with capture_spans() as captured:
        with agentdiag.tool_call("t"):
            pass
    (span,) = captured.spans()
    assert span.status.status_code is StatusCode.UNSET
    assert sc.ERROR_TYPE not in span.attributes


def test_decorators_sync_keep_results_names_and_register():
    @agentdiag.tool
    def add(a, b):
        """Adds."""
        return a + b

    @agentdiag.tool("mul_tool")
    def mul(a, b):
        return a * b

    @agentdiag.agent("calc_agent")
    def run(x):
        return mul(add(x, 1), 2)

    with capture_spans() as captured:
        assert run(3) == 8
    assert add.__name__ == "add" and add.__doc__ == "Adds."
    names = sorted(s.name for s in captured.spans())
    assert names == ["execute_tool add", "execute_tool mul_tool", "invoke_agent calc_agent"]
    from otel_agentdiag._internal.names import default_registry

    assert default_registry.is_tool("add") and default_registry.is_tool("mul_tool")
    assert default_registry.is_agent("calc_agent")


def test_async_decorators_and_gather_parent_correctly():
    @agentdiag.tool("fetch_async")
    async def fetch(i):
        await asyncio.sleep(0)
        return i * 10

    @agentdiag.agent("async_agent")
    async def agent_main():
        with agentdiag.iteration(0):
            return await asyncio.gather(fetch(1), fetch(2), fetch(3))

    async def main():
        with agentdiag.agent_run("host", conversation_id="conv-async"):
            return await agent_main()

    with capture_spans() as captured:
        assert asyncio.run(main()) == [10, 20, 30]
    spans = captured.spans()
    (iteration_span,) = captured.by_name("agent.iteration")
    tools = captured.by_name("execute_tool fetch_async")
    assert len(tools) == 3
    assert all(t.parent.span_id == iteration_span.context.span_id for t in tools)
    (inner,) = captured.by_name("invoke_agent async_agent")
    assert iteration_span.parent.span_id == inner.context.span_id
    assert all(correlation_ids(s)[sc.GEN_AI_CONVERSATION_ID] == "conv-async" for s in spans)


def test_async_exception_reraised():
    @agentdiag.tool("fails_async")
    async def fails():
        raise LookupError("nope")

    with capture_spans() as captured:
        with pytest.raises(LookupError, match="nope"):
            asyncio.run(fails())
    (span,) = captured.spans()
    assert span.attributes[sc.ERROR_TYPE] == "LookupError"


def test_generator_functions_are_rejected_at_decoration():
    with pytest.raises(TypeError, match="generator"):

        @agentdiag.tool("gen")
        def gen():
            yield 1


def test_invalid_names_are_rejected_by_register_names():
    with pytest.raises(ValueError):
        agentdiag.register_names(tools=["has space"])
    with pytest.raises(ValueError):
        agentdiag.register_names(agents=["x" * 200])


def test_wrappers_run_user_code_without_any_provider():
    # No configure(), no capture: the global API is a no-op, and the code still runs unchanged.
    with agentdiag.agent_run("a", conversation_id="c") as run:
        with agentdiag.llm_call(provider="p", model="m") as call:
            call.record_response(input_tokens=1)
            result = 42
    assert result == 42
    assert not run.span.is_recording()


def test_bad_arguments_do_not_break_the_agent():
    with capture_spans() as captured:
        with agentdiag.iteration(None):  # type: ignore[arg-type]
            with agentdiag.llm_call(provider="p", model=None) as call:
                call.record_response(input_tokens=None, finish_reasons=[1, 2])  # type: ignore[list-item]
                value = "still runs"
    assert value == "still runs"
    names = sorted(s.name for s in captured.spans())
    assert names == ["agent.iteration", "chat"]


def test_a_failing_pipeline_never_reaches_the_agent(caplog):
    from opentelemetry.sdk.trace import SpanProcessor

    class Broken(SpanProcessor):
        def on_start(self, span, parent_context=None):
            raise RuntimeError("processor bug at start")

        def on_end(self, span):
            raise RuntimeError("processor bug at end")

    error = KeyError("the agent's own error")
    with capture_spans() as captured:
        captured.tracer_provider.add_span_processor(Broken())
        with agentdiag.agent_run("a", conversation_id="c"):
            with agentdiag.llm_call(provider="p", model="m") as call:
                call.record_response(input_tokens=1)
                result = "unchanged"
        with pytest.raises(KeyError) as raised:
            with agentdiag.tool_call("t"):
                raise error
    assert result == "unchanged"
    assert raised.value is error
    assert "failed (RuntimeError)" in caplog.text
    assert "processor bug" not in caplog.text  # the step and type are logged, never the message
