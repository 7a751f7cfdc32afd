"""The convention adapters on hand-built ended spans: each convention's kinds and keys, hostile values, one
owner per model call, and what the redactor then makes of a mapped span (names are data, content is dropped and
counted, our kinds are spoken back in OpenInference's words)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fakes.secret_names import RECOGNISED
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.pipeline.adapters import DUPLICATE_LLM_CALL, ConventionAdapter, LLMCallOwners, map_span
from otel_agentdiag.redaction import IdHasher
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.redactor import SpanRedactor

TRACE = 0x1234
SENTINEL = "SENTINEL-ADAPTER-4e1d"
HASH_KEY = bytes.fromhex("442f18475e673d6886dacd45328a7ec155d9a207f69c7098cd618ac0ac152443")


def span(
    attributes: dict[str, Any], name: str = "step", span_id: int = 2, parent_id: int | None = 1, start_time: int = 1
) -> ReadableSpan:
    ctx = SpanContext(TRACE, span_id, False, TraceFlags(1))
    parent = SpanContext(TRACE, parent_id, False, TraceFlags(1)) if parent_id is not None else None
    return ReadableSpan(
        name=name, context=ctx, parent=parent, attributes=attributes, start_time=start_time, end_time=start_time + 1
    )


def adapt(
    attributes: dict[str, Any], name: str = "step", owners: LLMCallOwners | None = None, start_time: int = 1
) -> ReadableSpan:
    return ConventionAdapter(owners).adapt(span(attributes, name, start_time=start_time))


def attrs(s: ReadableSpan) -> dict[str, Any]:
    return dict(s.attributes or {})


def redactor(policy: Policy = STRICT, *, tools: tuple[str, ...] = (), agents: tuple[str, ...] = ()) -> SpanRedactor:
    names = NameRegistry()
    names.register(tools=tools, agents=agents)
    return SpanRedactor(policy, IdHasher(HASH_KEY), names)


# --- the cheap paths ----------------------------------------------------------------------------------------
def test_our_span_and_an_unknown_span_are_passed_on_as_they_are() -> None:
    adapter = ConventionAdapter()
    ours = span({sc.AGENTDIAG_KIND: "llm", "openinference.span.kind": "TOOL", sc.GEN_AI_OPERATION_NAME: "chat"})
    unknown = span({"http.method": "GET"})
    assert adapter.adapt_batch([ours, unknown]) == [ours, unknown]
    assert adapter.adapt_batch([ours])[0] is ours
    assert adapter.adapted == 0
    assert map_span({"http.method": "GET"}, "x") is None


# --- the GenAI conventions ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("operation", "kind"),
    [
        ("invoke_agent", "run"),
        ("create_agent", "other"),  # building an agent (AutoGen, in a trace of its own) is no run of it
        ("invoke_workflow", "run"),
        ("chat", "llm"),
        ("text_completion", "llm"),
        ("generate_content", "llm"),
        ("embeddings", "llm"),
        ("execute_tool", "tool"),
        ("retrieval", "other"),
        ("plan", "other"),
        ("made_up", "other"),
        (7, "other"),
        ("x" * 100_000, "other"),
    ],
)
def test_genai_operations_give_the_kind(operation: Any, kind: str) -> None:
    out = attrs(adapt({sc.GEN_AI_OPERATION_NAME: operation}))
    assert out[sc.AGENTDIAG_KIND] == kind
    assert out[sc.GEN_AI_OPERATION_NAME] == operation  # the span's own operation is never replaced


def test_genai_older_usage_keys_move_on_leaves_and_usage_leaves_the_other_kinds() -> None:
    out = attrs(
        adapt(
            {
                sc.GEN_AI_OPERATION_NAME: "chat",
                sc.GEN_AI_SYSTEM: "openai",
                "gen_ai.usage.prompt_tokens": 31,
                "gen_ai.usage.completion_tokens": 12,
                "gen_ai.usage.reasoning_tokens": "3",  # wrong type: not moved
            }
        )
    )
    assert (out[sc.GEN_AI_USAGE_INPUT_TOKENS], out[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (31, 12)
    assert sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS not in out
    assert out[sc.GEN_AI_PROVIDER_NAME] == "openai"
    both = attrs(
        adapt({sc.GEN_AI_OPERATION_NAME: "chat", "gen_ai.usage.prompt_tokens": 1, "gen_ai.usage.input_tokens": 5})
    )
    assert both[sc.GEN_AI_USAGE_INPUT_TOKENS] == 5  # the span's own input_tokens wins
    run = attrs(adapt({sc.GEN_AI_OPERATION_NAME: "invoke_agent", "gen_ai.usage.input_tokens": 90}))
    assert not [k for k in run if k.startswith("gen_ai.usage.")]  # roll-ups are ours, never a second count


def test_genai_aggregated_usage_of_a_run_becomes_its_roll_up_never_leaf_usage() -> None:
    """Pydantic AI's ``gen_ai.aggregated_usage.*`` on its ``invoke_agent`` span: our roll-up keys, and the
    strict policy exports only those (the framework's own key is dropped)."""
    raw = {
        sc.GEN_AI_OPERATION_NAME: "invoke_agent",
        "gen_ai.aggregated_usage.input_tokens": 173,
        "gen_ai.aggregated_usage.output_tokens": 47,
        "gen_ai.aggregated_usage.reasoning_tokens": "9",  # wrong type: not moved
    }
    run = attrs(adapt(raw))
    assert (run["agentdiag.usage.input_tokens"], run["agentdiag.usage.output_tokens"]) == (173, 47)
    assert "agentdiag.usage.reasoning_tokens" not in run
    assert not [k for k in run if k.startswith("gen_ai.usage.")]
    exported = attrs(redactor().redact(adapt(raw)))
    assert (exported["agentdiag.usage.input_tokens"], exported["agentdiag.usage.output_tokens"]) == (173, 47)
    assert not [k for k in exported if k.startswith("gen_ai.aggregated_usage.")]
    chat = attrs(adapt({**raw, sc.GEN_AI_OPERATION_NAME: "chat"}))
    assert not [k for k in chat if k.startswith("agentdiag.usage.")]  # a leaf gets no roll-up


@pytest.mark.parametrize(
    ("attributes", "kind"),
    [
        ({"event_loop.cycle_id": "c1", sc.AGENTDIAG_ITERATION_INDEX: 2}, "iteration"),  # Strands' cycle
        ({"event_loop.cycle_id": "c1"}, "iteration"),  # no index of ours: an iteration without one
        ({}, "other"),  # the operation alone, without the framework's own key: a step we have no kind for
    ],
)
def test_a_framework_loop_step_with_its_own_key_is_an_iteration(attributes: dict[str, Any], kind: str) -> None:
    raw = {sc.GEN_AI_OPERATION_NAME: "execute_event_loop_cycle", "gen_ai.usage.input_tokens": 7, **attributes}
    step = adapt(raw, name="execute_event_loop_cycle")
    got = attrs(step)
    assert got[sc.AGENTDIAG_KIND] == kind
    assert "gen_ai.usage.input_tokens" not in got  # usage on leaves only
    exported = redactor().redact(step)
    if kind == "iteration":
        assert step.name == exported.name == sc.ITERATION_SPAN_NAME
        assert sc.GEN_AI_OPERATION_NAME not in got  # named as ours, not by the framework's operation
        assert attrs(exported).get(sc.AGENTDIAG_ITERATION_INDEX) == attributes.get(sc.AGENTDIAG_ITERATION_INDEX)
        assert "event_loop.cycle_id" not in attrs(exported)  # the framework's id is dropped
    else:
        assert got[sc.GEN_AI_OPERATION_NAME] == "execute_event_loop_cycle"


def test_a_genai_span_session_id_is_its_conversation_a_digest_on_export() -> None:
    chat = attrs(adapt({sc.GEN_AI_OPERATION_NAME: "chat", sc.SESSION_ID: SENTINEL}))
    assert chat[sc.GEN_AI_CONVERSATION_ID] == SENTINEL
    own = attrs(adapt({sc.GEN_AI_OPERATION_NAME: "chat", sc.SESSION_ID: SENTINEL, sc.GEN_AI_CONVERSATION_ID: "c"}))
    assert own[sc.GEN_AI_CONVERSATION_ID] == "c"  # the span's own conversation wins
    exported = attrs(redactor().redact(adapt({sc.GEN_AI_OPERATION_NAME: "chat", sc.SESSION_ID: SENTINEL})))
    assert str(exported[sc.GEN_AI_CONVERSATION_ID]).startswith("hmac-sha256:")
    assert SENTINEL not in repr(exported)


@pytest.mark.parametrize(
    ("scope", "tool", "kind"),
    [
        ("openinference.instrumentation.smolagents", "final_answer", "other"),  # smolagents' answer tool: a step
        ("openinference.instrumentation.beeai", "final_answer", "other"),  # BeeAI's too
        ("openinference.instrumentation.smolagents", "lookup_city", "tool"),  # the agent's own tools: calls
        ("openinference.instrumentation.langchain", "final_answer", "tool"),  # a tool of the user's so named
    ],
)
def test_a_frameworks_own_answer_tool_is_a_step_not_a_tool_call(scope: str, tool: str, kind: str) -> None:
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    raw = {"openinference.span.kind": "TOOL", "tool.name": tool, "session.id": SENTINEL}
    ended = ReadableSpan(
        name=tool,
        context=SpanContext(TRACE, 2, False, TraceFlags(1)),
        parent=SpanContext(TRACE, 1, False, TraceFlags(1)),
        attributes=raw,
        start_time=1,
        end_time=2,
        instrumentation_scope=InstrumentationScope(scope),
    )
    got = attrs(ConventionAdapter().adapt(ended))
    assert got[sc.AGENTDIAG_KIND] == kind
    assert got[sc.GEN_AI_CONVERSATION_ID] == SENTINEL  # the session stays: the step is filed with its run
    if kind == "other":
        assert got[sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE] == "final_answer"
        assert sc.GEN_AI_OPERATION_NAME not in got and sc.GEN_AI_TOOL_NAME not in got
    else:
        assert got[sc.GEN_AI_OPERATION_NAME] == "execute_tool" and got[sc.GEN_AI_TOOL_NAME] == tool


@pytest.mark.parametrize(
    ("scope", "tool", "kind"),
    [
        ("gcp.vertex.agent", "(merged tools)", "other"),  # ADK's merge of parallel calls' answers: a step
        ("gcp.vertex.agent", "lookup_city", "tool"),  # each call's own span: a tool call
        ("another.scope", "(merged tools)", "tool"),  # the placeholder elsewhere means nothing
    ],
)
def test_google_adks_merge_of_parallel_tool_calls_is_a_step_not_a_tool_call(scope: str, tool: str, kind: str) -> None:
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    raw = {sc.GEN_AI_OPERATION_NAME: "execute_tool", sc.GEN_AI_TOOL_NAME: tool, sc.GEN_AI_TOOL_CALL_ID: SENTINEL}
    ended = ReadableSpan(
        name="execute_tool (merged)" if tool.startswith("(") else f"execute_tool {tool}",
        context=SpanContext(TRACE, 2, False, TraceFlags(1)),
        parent=SpanContext(TRACE, 1, False, TraceFlags(1)),
        attributes=raw,
        start_time=1,
        end_time=2,
        instrumentation_scope=InstrumentationScope(scope),
    )
    mapped = ConventionAdapter().adapt(ended)
    got = attrs(mapped)
    assert got[sc.AGENTDIAG_KIND] == kind
    exported = redactor(tools=("lookup_city",)).redact(mapped)
    if kind == "other":
        assert got[sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE] == "merged_tool_calls"
        assert sc.GEN_AI_OPERATION_NAME not in got  # no call: neither named nor counted as one
        assert mapped.name == exported.name == sc.FRAMEWORK_SPAN_NAME
    else:
        assert got[sc.GEN_AI_OPERATION_NAME] == "execute_tool"
        assert exported.name.startswith("execute_tool ")
    assert SENTINEL not in repr(attrs(exported))


# --- OpenInference --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("oi_kind", "kind", "operation", "name"),
    [
        ("AGENT", "run", "invoke_agent", "step"),
        ("LLM", "llm", "chat", "step"),
        ("llm", "llm", "chat", "step"),  # tolerated: the spec spells them in capitals
        ("EMBEDDING", "llm", "embeddings", "step"),
        ("RERANKER", "llm", "rerank", "step"),
        ("TOOL", "tool", "execute_tool", "step"),
        ("RETRIEVER", "other", "retrieval", "step"),
        ("CHAIN", "other", None, sc.FRAMEWORK_SPAN_NAME),
        ("GUARDRAIL", "other", None, sc.GUARDRAIL_SPAN_NAME),
        ("EVALUATOR", "other", None, sc.FRAMEWORK_SPAN_NAME),
        ("UNKNOWN", "other", None, sc.FRAMEWORK_SPAN_NAME),
        ("\uff2c\uff2c\uff2d", "other", None, sc.FRAMEWORK_SPAN_NAME),  # fullwidth LLM: not a kind
        (3, "other", None, sc.FRAMEWORK_SPAN_NAME),
        ("LLM" * 50_000, "other", None, sc.FRAMEWORK_SPAN_NAME),
    ],
)
def test_openinference_kinds(oi_kind: Any, kind: str, operation: str | None, name: str) -> None:
    mapped = adapt({"openinference.span.kind": oi_kind})
    out = attrs(mapped)
    assert out[sc.AGENTDIAG_KIND] == kind
    assert out.get(sc.GEN_AI_OPERATION_NAME) == operation
    assert mapped.name == name


def test_openinference_keys_move_to_ours() -> None:
    llm = attrs(
        adapt(
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4o-mini",
                "llm.provider": "openai",
                "llm.system": "ignored-when-provider-is-there",
                "llm.token_count.prompt": 31,
                "llm.token_count.completion": 12,
                "llm.token_count.prompt_details.cache_read": 4,
                "llm.token_count.completion_details.reasoning": True,  # a bool is no count
                "session.id": SENTINEL,
                "user.id": "u",
            }
        )
    )
    assert llm[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert llm[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert (llm[sc.GEN_AI_USAGE_INPUT_TOKENS], llm[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (31, 12)
    assert llm[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 4
    assert sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS not in llm
    assert llm[sc.GEN_AI_CONVERSATION_ID] == SENTINEL  # raw here; the redactor makes it a digest
    tool = attrs(adapt({"openinference.span.kind": "TOOL", "tool.name": "lookup", "tool.id": "call_1"}, "ignored"))
    assert (tool[sc.GEN_AI_TOOL_NAME], tool[sc.GEN_AI_TOOL_CALL_ID]) == ("lookup", "call_1")
    assert attrs(adapt({"openinference.span.kind": "TOOL"}, "span-named"))[sc.GEN_AI_TOOL_NAME] == "span-named"
    agent = attrs(adapt({"openinference.span.kind": "AGENT", "agent.name": "planner", "llm.token_count.total": 9}))
    assert agent[sc.GEN_AI_AGENT_NAME] == "planner"
    assert "llm.token_count.total" not in agent  # usage on leaves only


# --- OpenLLMetry ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("attributes", "kind", "operation", "target"),
    [
        ({"traceloop.span.kind": "agent", "traceloop.entity.name": "planner"}, "run", "invoke_agent", "planner"),
        ({"traceloop.span.kind": "workflow", "traceloop.entity.name": "flow"}, "run", "invoke_workflow", None),
        ({"traceloop.span.kind": "tool", "traceloop.entity.name": "lookup"}, "tool", "execute_tool", "lookup"),
        ({"traceloop.span.kind": "task"}, "other", None, None),
        ({"traceloop.span.kind": ["agent"]}, "other", None, None),
        ({"llm.request.type": "chat"}, "llm", "chat", None),
        ({"llm.request.type": "completion"}, "llm", "text_completion", None),
        ({"llm.request.type": "embedding"}, "llm", "embeddings", None),
        ({"llm.request.type": "chat", sc.GEN_AI_OPERATION_NAME: "generate_content"}, "llm", "generate_content", None),
        ({"llm.request.type": b"chat"}, "other", None, None),
    ],
)
def test_openllmetry_kinds(attributes: dict[str, Any], kind: str, operation: str | None, target: str | None) -> None:
    out = attrs(adapt(attributes))
    assert out[sc.AGENTDIAG_KIND] == kind
    assert out.get(sc.GEN_AI_OPERATION_NAME) == operation
    assert out.get(sc.GEN_AI_AGENT_NAME, out.get(sc.GEN_AI_TOOL_NAME)) == target


def test_openllmetry_usage_keys_move() -> None:
    out = attrs(
        adapt({"llm.request.type": "chat", "gen_ai.usage.prompt_tokens": 7, "gen_ai.usage.completion_tokens": 2})
    )
    assert (out[sc.GEN_AI_USAGE_INPUT_TOKENS], out[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (7, 2)


@pytest.mark.parametrize(
    ("name", "scope", "index"),
    [
        ("Step 1", "openinference.instrumentation.smolagents", 0),
        ("Step 12", "openinference.instrumentation.smolagents", 11),
        ("Step 0", "openinference.instrumentation.smolagents", None),  # smolagents counts from 1
        ("Step -1", "openinference.instrumentation.smolagents", None),
        ("Step 1234567", "openinference.instrumentation.smolagents", None),
        ("Step \u0661", "openinference.instrumentation.smolagents", None),  # a non-ASCII digit
        ("Steps 1", "openinference.instrumentation.smolagents", None),
        ("Step 1", "openinference.instrumentation.langchain", None),  # another framework's chain: a chain
        ("Step 1", None, None),
    ],
)
def test_smolagents_steps_are_iterations_other_chains_are_not(name: str, scope: str | None, index: int | None) -> None:
    mapped = map_span({"openinference.span.kind": "CHAIN", "llm.token_count.prompt": 3}, name, scope)
    assert mapped is not None
    if index is None:
        assert (mapped.kind, mapped.span_type, sc.AGENTDIAG_ITERATION_INDEX in mapped.set) == ("other", "chain", False)
    else:
        assert (mapped.kind, mapped.name) == ("iteration", sc.ITERATION_SPAN_NAME)
        assert mapped.set[sc.AGENTDIAG_ITERATION_INDEX] == index


@pytest.mark.parametrize(
    ("span_name", "agent", "declared"),
    [
        ("weather_agent.run", "weather_agent", ("weather_agent",)),  # smolagents, Agno
        ("weather_agent.arun", "weather_agent", ("weather_agent",)),
        ("Senior Researcher._execute_core", "Senior Researcher", ("Senior Researcher",)),  # CrewAI: the role
        ("weather_agent.on_messages_stream", "weather_agent", ("weather_agent",)),  # AutoGen AgentChat
        ("weather_agent", "weather_agent", ()),  # a bare span name (LangChain's run name, maybe per call): data
        ("weather_agent.Report the weather in Paris.execute", "weather_agent.Report the weather in Paris.execute", ()),
        (".run", ".run", ()),
    ],
)
def test_an_agent_span_named_agent_dot_method_names_and_declares_its_agent(
    span_name: str, agent: str, declared: tuple[str, ...]
) -> None:
    """OpenInference's instrumentors name agent spans `{agent}.{method}` after the agent object's name in code: the
    agent is declared. A span named after a task's text (CrewAI's event listener) declares nothing."""
    for scope in ("openinference.instrumentation.smolagents", "openinference.instrumentation.x"):
        mapped = map_span({"openinference.span.kind": "AGENT"}, span_name, scope)
        assert mapped is not None
        assert mapped.set[sc.GEN_AI_AGENT_NAME] == agent
        assert mapped.agents == declared
    keyed = map_span({"openinference.span.kind": "AGENT", "agent.name": "a"}, "b.run", None)
    assert keyed is not None and keyed.set[sc.GEN_AI_AGENT_NAME] == "a"


def test_a_declared_agent_name_is_registered_before_its_run_is_judged() -> None:
    import secrets

    name = f"agent_{secrets.token_hex(4)}"
    adapted = ConventionAdapter().adapt(span({"openinference.span.kind": "AGENT"}, f"{name}.run"))
    from otel_agentdiag._internal.names import default_registry

    judge = SpanRedactor(STRICT, IdHasher(HASH_KEY), default_registry)
    assert judge.redact(adapted).name == f"invoke_agent {name}"


# --- one owner per model call -------------------------------------------------------------------------------
def test_a_peer_llm_span_inside_or_around_ours_is_a_duplicate_without_usage() -> None:
    owners = LLMCallOwners()
    adapter = ConventionAdapter(owners)
    peer = {"openinference.span.kind": "LLM", "llm.token_count.prompt": 31, "llm.model_name": "m"}
    ours = span({sc.AGENTDIAG_KIND: "llm", sc.GEN_AI_USAGE_INPUT_TOKENS: 31}, span_id=10, parent_id=5)
    inner = span(peer, span_id=11, parent_id=10)
    owners.mark_inside(inner)  # what the sequencer does when a foreign span starts inside our model call
    around = span(peer, span_id=5, parent_id=4)  # the parent of ours: it ends (and arrives) after ours
    beside = span(peer, span_id=12, parent_id=4)  # another call
    out = [attrs(s) for s in adapter.adapt_batch([inner, ours, around, beside])]
    for duplicate in (out[0], out[2]):
        assert duplicate[sc.AGENTDIAG_KIND] == "other"
        assert duplicate[sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE] == DUPLICATE_LLM_CALL
        assert not [k for k in duplicate if k.startswith(("gen_ai.usage.", "llm.token_count."))]
        assert "openinference.span.kind" not in duplicate
    assert out[1] == attrs(ours)
    assert out[3][sc.AGENTDIAG_KIND] == "llm"
    assert out[3][sc.GEN_AI_USAGE_INPUT_TOKENS] == 31
    assert adapter.duplicates == 2


def test_the_owner_records_are_bounded() -> None:
    owners = LLMCallOwners(max_calls=2)
    for span_id in range(1, 6):
        owners.mark_inside(span({}, span_id=span_id))
    assert len(owners) == 2
    assert owners.forgotten == 3
    assert owners.is_inside(span({}, span_id=5)) and not owners.is_inside(span({}, span_id=1))
    with pytest.raises(ValueError):
        LLMCallOwners(max_calls=0)


def test_a_mapping_that_raises_passes_the_span_on_unmapped() -> None:
    class Broken(ReadableSpan):
        @property
        def name(self) -> str:
            raise RuntimeError("broken")

    broken = Broken(name="x", context=SpanContext(TRACE, 3, False), attributes={"openinference.span.kind": "LLM"})
    adapter = ConventionAdapter()
    assert adapter.adapt_batch([broken]) == [broken]
    assert adapter.failed == 1


# --- through the redactor -------------------------------------------------------------------------------------
def test_foreign_names_are_data_unless_registered() -> None:
    registered = redactor(tools=("lookup",), agents=("planner",))
    tool = registered.redact(adapt({"openinference.span.kind": "TOOL", "tool.name": "lookup"}))
    assert (tool.name, attrs(tool)[sc.GEN_AI_TOOL_NAME]) == ("execute_tool lookup", "lookup")
    made_up = registered.redact(adapt({"openinference.span.kind": "TOOL", "tool.name": SENTINEL}))
    assert (made_up.name, attrs(made_up)[sc.GEN_AI_TOOL_NAME]) == ("execute_tool _OTHER", "_OTHER")
    agent = registered.redact(adapt({"traceloop.span.kind": "agent", "traceloop.entity.name": "planner"}))
    assert agent.name == "invoke_agent planner"
    nameless = registered.redact(adapt({"openinference.span.kind": "AGENT"}, name=SENTINEL))
    assert nameless.name == "invoke_agent _OTHER"
    assert SENTINEL not in repr(attrs(made_up)) + repr(attrs(nameless))


CONTENT_KEYS = (
    "input.value",
    "output.value",
    "llm.input_messages.0.message.content",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "llm.tools.0.tool.json_schema",
    "tool.parameters",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.prompt.0.content",
    "gen_ai.completion.0.content",
    "traceloop.entity.input",
    "traceloop.entity.output",
)


@pytest.mark.parametrize("policy", [STRICT, LOCAL], ids=["strict", "local"])
@pytest.mark.parametrize("convention", ["openinference", "openllmetry", "genai"])
def test_content_keys_are_dropped_and_counted(policy: Policy, convention: str) -> None:
    marker = {
        "openinference": {"openinference.span.kind": "LLM"},
        "openllmetry": {"llm.request.type": "chat"},
        "genai": {sc.GEN_AI_OPERATION_NAME: "chat"},
    }[convention]
    clean = redactor(policy).redact(adapt({**marker, **{key: SENTINEL for key in CONTENT_KEYS}}))
    out = attrs(clean)
    assert not set(CONTENT_KEYS) & set(out)
    assert SENTINEL not in repr(out)
    assert out["agentdiag.redaction.unknown_key"] >= len(CONTENT_KEYS)
    assert out[sc.AGENTDIAG_KIND] == "llm"


def test_hostile_values_are_judged_by_the_policy_after_mapping() -> None:
    clean = attrs(
        redactor().redact(
            adapt(
                {
                    "openinference.span.kind": "LLM",
                    "llm.model_name": "gpt 4o /home/alice",  # not a model token
                    "llm.token_count.prompt": 10**15,  # out of range
                    "llm.provider": "ünïcode",
                    "session.id": "x" * 100_000,
                }
            )
        )
    )
    assert sc.GEN_AI_REQUEST_MODEL not in clean
    assert sc.GEN_AI_USAGE_INPUT_TOKENS not in clean
    assert sc.GEN_AI_PROVIDER_NAME not in clean
    assert sc.GEN_AI_CONVERSATION_ID not in clean  # an id too long to be one: dropped, not hashed
    assert clean["agentdiag.redaction.invalid_value"] >= 4
    unicode_session = attrs(redactor().redact(adapt({"openinference.span.kind": "AGENT", "session.id": "sëssion 🙂"})))
    assert unicode_session[sc.GEN_AI_CONVERSATION_ID].startswith("hmac-sha256:")
    assert unicode_session[sc.GEN_AI_CONVERSATION_ID] == unicode_session[sc.SESSION_ID]  # one concept, one digest


# --- speaking back ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("attributes", "spoken"),
    [
        ({sc.AGENTDIAG_KIND: "run", sc.GEN_AI_OPERATION_NAME: "invoke_agent"}, "AGENT"),
        ({sc.AGENTDIAG_KIND: "iteration"}, "CHAIN"),
        ({sc.AGENTDIAG_KIND: "llm", sc.GEN_AI_OPERATION_NAME: "chat"}, "LLM"),
        ({sc.AGENTDIAG_KIND: "llm", sc.GEN_AI_OPERATION_NAME: "embeddings"}, "EMBEDDING"),
        ({sc.AGENTDIAG_KIND: "tool", sc.GEN_AI_OPERATION_NAME: "execute_tool"}, "TOOL"),
        ({sc.AGENTDIAG_KIND: "other"}, None),
        ({sc.AGENTDIAG_KIND: "nonsense"}, None),
    ],
)
def test_our_kinds_are_spoken_back_in_openinference_words(attributes: dict[str, Any], spoken: str | None) -> None:
    for policy in (STRICT, LOCAL):
        assert attrs(redactor(policy).redact(span(attributes))).get("openinference.span.kind") == spoken


def test_a_policy_without_the_key_hears_nothing_from_us() -> None:
    quiet = STRICT.derive("quiet", allowed_keys={"openinference.span.kind": None})
    assert "openinference.span.kind" not in attrs(redactor(quiet).redact(span({sc.AGENTDIAG_KIND: "run"})))


# --- in the worker ---------------------------------------------------------------------------------------------
class _Seen:
    """A stage after the adapter that records what reaches it: what the redactor would get."""

    def __init__(self) -> None:
        self.seen: list[ReadableSpan] = []

    def process(self, spans: list[ReadableSpan]) -> tuple[list[ReadableSpan], list[tuple[str | None, str]]]:
        self.seen.extend(spans)
        return spans, []


def test_the_worker_maps_before_the_next_stage_sees_the_span() -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_agentdiag.pipeline import AccountingBatchSpanProcessor

    foreign = span({"openinference.span.kind": "TOOL", "tool.name": "lookup"})
    seen, exported = _Seen(), InMemorySpanExporter()
    batcher = AccountingBatchSpanProcessor(exported, stages=[ConventionAdapter(), seen], schedule_delay_s=3600)
    try:
        batcher.enqueue(foreign)
        assert batcher.force_flush(30_000)
    finally:
        batcher.shutdown()
    (mapped,) = exported.get_finished_spans()
    assert seen.seen == [mapped] and mapped is not foreign
    assert attrs(mapped)[sc.AGENTDIAG_KIND] == "tool"


def test_with_a_content_recorder_content_keys_become_captured_content_of_the_mapped_span() -> None:
    from otel_agentdiag.content.recorder import ContentRecorder

    recorder = ContentRecorder()
    owners = LLMCallOwners()
    adapter = ConventionAdapter(owners, content=recorder)
    tool = adapter.adapt(span({"openinference.span.kind": "TOOL", "input.value": '{"q": 1}', "output.value": "42"}))
    assert dict(recorder.content_of(tool) or ()) == {
        sc.CONTENT_TOOL_ARGUMENTS: '{"q": 1}',
        sc.CONTENT_TOOL_RESULT: "42",
    }
    llm = adapter.adapt(span({sc.GEN_AI_OPERATION_NAME: "chat", sc.CONTENT_INPUT_MESSAGES: "[]"}, span_id=7))
    assert dict(recorder.content_of(llm) or ()) == {sc.CONTENT_INPUT_MESSAGES: "[]"}
    inside = span({"openinference.span.kind": "LLM", "input.value": SENTINEL}, span_id=8)
    owners.mark_inside(inside)
    assert recorder.content_of(adapter.adapt(inside)) is None  # a duplicate: the call's content is ours already
    plain = adapter.adapt(span({"openinference.span.kind": "CHAIN", "input.value": SENTINEL}, span_id=9))
    assert recorder.content_of(plain) is None  # only the roles of LLM and tool calls


def test_a_failed_foreign_span_gets_its_error_type_from_its_exception_event() -> None:
    from opentelemetry.sdk.trace import Event
    from opentelemetry.trace import Status, StatusCode

    def failed(events: list[Event], status: StatusCode = StatusCode.ERROR) -> dict[str, Any]:
        s = ReadableSpan(
            name="t",
            context=SpanContext(TRACE, 4, False),
            attributes={"openinference.span.kind": "TOOL", "tool.name": "lookup"},
            events=events,
            status=Status(status),
        )
        return attrs(ConventionAdapter().adapt(s))

    event = Event("exception", {"exception.type": "builtins.LookupError", "exception.message": SENTINEL})
    assert failed([event])[sc.ERROR_TYPE] == "builtins.LookupError"
    assert sc.ERROR_TYPE not in failed([event], StatusCode.OK)
    assert sc.ERROR_TYPE not in failed([Event("exception", {"exception.type": 3})])
    assert sc.ERROR_TYPE not in failed([])


def test_openinference_finish_reason_becomes_ours() -> None:
    out = attrs(adapt({"openinference.span.kind": "LLM", "llm.finish_reason": "tool_calls"}))
    assert out[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    clean = attrs(redactor().redact(adapt({"openinference.span.kind": "LLM", "llm.finish_reason": SENTINEL})))
    assert SENTINEL not in repr(clean)  # not a documented finish reason: the policy's closed set says _OTHER


# --- values other libraries write in shapes the policy would refuse (issue 32) --------------------------------
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"gen_ai.operation.name": "chat", "server.address": "https://api.example.com:8443/v1?k=1"}, "api.example.com"),
        ({"gen_ai.operation.name": "chat", "server.address": "http://user:pw@127.0.0.1:9/x"}, "127.0.0.1"),
        ({"gen_ai.operation.name": "chat", "server.address": "api.example.com"}, "api.example.com"),
        ({"gen_ai.operation.name": "chat", "server.address": "https://"}, None),
    ],
)
def test_a_url_in_server_address_keeps_its_host(given: dict[str, Any], expected: str | None) -> None:
    """Semantic Kernel writes its endpoint there: not a violation that quarantines the session, a host."""
    out = adapt(given)
    assert attrs(out).get("server.address") == expected
    redacted = redactor().redact(out)
    assert (redacted.attributes or {}).get("agentdiag.redaction.public_safety_violation") is None


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("OpenAI", "gpt-4o-mini", "openai"),  # Agno
        ("Anthropic", "claude-haiku-4-5", "anthropic"),
        ("strands-agents", "gpt-4o-mini", "openai"),  # the framework, not the model's provider
        ("strands-agents", "openai/gpt-4.1-mini", "openai"),
        ("strands-agents", "a-model-no-table-prices", "strands-agents"),  # unknown: left as it was
        ("litellm", "anthropic/claude-haiku-4-5", "anthropic"),
        ("google", "gemini-2.5-flash", "gcp.gemini"),
    ],
)
def test_provider_spellings_become_the_conventions_values(provider: str, model: str, expected: str) -> None:
    out = attrs(
        adapt({"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider, "gen_ai.request.model": model})
    )
    assert out["gen_ai.provider.name"] == expected


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        (("FinishReason.TOOL_CALLS",), ("tool_calls",)),  # Semantic Kernel: an enum's repr
        (("END_TURN", "length"), ("end_turn", "length")),
        (("STOP",), ("STOP",)),  # a documented value already (Gemini spells its reasons so)
        ("FinishReason.STOP", ("stop",)),
        (("FinishReason.NOT_A_REASON",), ("FinishReason.NOT_A_REASON",)),  # unknown: the policy makes it _OTHER
    ],
)
def test_finish_reasons_in_other_spellings_become_documented_ones(reasons: Any, expected: tuple[str, ...]) -> None:
    out = attrs(adapt({"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": reasons}))
    assert tuple(out["gen_ai.response.finish_reasons"]) == expected


@pytest.mark.parametrize(
    ("attributes", "priced"),
    [
        # LiteLLM and DSPy name models with their provider's prefix.
        ({"openinference.span.kind": "LLM", "llm.model_name": "openai/gpt-4.1-mini", "llm.provider": "openai"}, True),
        ({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "OpenAI", "gen_ai.request.model": "gpt-4o"}, True),
        (
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "strands-agents",
                "gen_ai.request.model": "gpt-4o",
            },
            True,
        ),
        ({"gen_ai.operation.name": "chat", "gen_ai.request.model": "a-model-no-table-prices"}, False),
    ],
)
def test_peer_model_calls_are_priced_whatever_the_spelling(attributes: dict[str, Any], priced: bool) -> None:
    usage = {"gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 100}
    if "openinference.span.kind" in attributes:
        usage = {"llm.token_count.prompt": 1000, "llm.token_count.completion": 100}
    out = attrs(adapt({**attributes, **usage}, name="llm", start_time=time.time_ns()))  # priced as of today
    assert (out.get(sc.AGENTDIAG_COST_USD, 0) > 0) is priced


def test_the_anthropic_sdks_own_span_maps_its_keys() -> None:
    out = attrs(
        adapt(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "claude-haiku-4-5",
                "gen_ai.usage.input_tokens": 120,
                "gen_ai.usage.output_tokens": 17,
                "gen_ai.usage.cache_write.input_tokens": 21,
                "anthropic.message.stop_reason": "tool_use",
            },
            name="anthropic.messages.create",
            start_time=time.time_ns(),
        )
    )
    assert out[sc.AGENTDIAG_KIND] == sc.KIND_LLM
    assert out["gen_ai.usage.cache_creation.input_tokens"] == 21
    assert tuple(out["gen_ai.response.finish_reasons"]) == ("tool_use",)
    assert out[sc.AGENTDIAG_COST_USD] > 0


def test_tool_definitions_on_a_peer_llm_span_register_their_names() -> None:
    """OpenInference's llm.tools.*, OpenLLMetry's llm.request.functions.*, the conventions' gen_ai.tool.definitions:
    code, registered before a tool span using the name is judged; a name the model invents stays _OTHER."""
    import json
    import secrets

    from otel_agentdiag._internal.names import default_registry

    a, b, c = (f"tool_{secrets.token_hex(4)}" for _ in range(3))
    adapter = ConventionAdapter()
    adapter.adapt_batch(
        [
            span({"openinference.span.kind": "LLM", "llm.tools.0.tool.json_schema": json.dumps({"name": a})}, "llm"),
            span({"llm.request.type": "chat", "llm.request.functions.0.name": b}, "openai.chat", span_id=3),
            span(
                {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps([{"name": c}])}, "c", span_id=4
            ),
        ]
    )
    assert {a, b, c} <= default_registry.tools
    judge = SpanRedactor(STRICT, IdHasher(HASH_KEY), default_registry)  # the process-wide registry, as configure()
    tool = adapter.adapt(span({"openinference.span.kind": "TOOL", "tool.name": a}, a, span_id=5))
    assert (judge.redact(tool).attributes or {})["gen_ai.tool.name"] == a
    invented = adapter.adapt(span({"openinference.span.kind": "TOOL", "tool.name": "made_up_x"}, "x", span_id=6))
    assert (judge.redact(invented).attributes or {})["gen_ai.tool.name"] == "_OTHER"


def test_semantic_kernels_singular_finish_reason_and_agent_tool_definitions() -> None:
    """Semantic Kernel: ``gen_ai.response.finish_reason`` (one, an enum's repr) on its chat spans, and the agent's
    tool definitions on its ``invoke_agent`` span (registered, so its ``execute_tool`` spans keep their names)."""
    import json
    import secrets

    from otel_agentdiag._internal.names import default_registry

    chat = attrs(adapt({"gen_ai.operation.name": "chat", "gen_ai.response.finish_reason": "FinishReason.TOOL_CALLS"}))
    assert tuple(chat["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    name = f"WeatherPlugin-get_weather_{secrets.token_hex(3)}"
    definitions = json.dumps([{"type": "function", "name": name, "description": SENTINEL}])
    adapt({"gen_ai.operation.name": "invoke_agent", "gen_ai.tool.definitions": definitions})
    assert name in default_registry.tools


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        ('["tool_calls"]', ("tool_calls",)),
        ('["FinishReason.STOP", "length"]', ("stop", "length")),
        ("[not json", ("[not json",)),
    ],
)
def test_finish_reasons_as_json_text_become_an_array(reasons: str, expected: tuple[str, ...]) -> None:
    """AG2 writes the array as JSON text."""
    out = attrs(adapt({"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": reasons}))
    assert tuple(out["gen_ai.response.finish_reasons"]) == expected


def test_the_agents_sdks_turns_are_iterations_and_its_names_are_declared() -> None:
    """OpenInference's Agents SDK instrumentor: `turn` CHAIN spans are the SDK's turns; its AGENT and TOOL spans
    are named after the Agent object and its function tools (code)."""
    scope = "openinference.instrumentation.openai_agents"
    turn = map_span({"openinference.span.kind": "CHAIN"}, "turn", scope)
    assert turn is not None and (turn.kind, turn.name) == (sc.KIND_ITERATION, sc.ITERATION_SPAN_NAME)
    other_turn = map_span({"openinference.span.kind": "CHAIN"}, "turn", "openinference.instrumentation.langchain")
    assert other_turn is not None and other_turn.kind == sc.KIND_OTHER
    agent = map_span({"openinference.span.kind": "AGENT", "agent.name": "weather_agent"}, "weather_agent", scope)
    tool = map_span({"openinference.span.kind": "TOOL", "tool.name": "get_weather"}, "get_weather", scope)
    assert agent is not None and agent.agents == ("weather_agent",)
    assert tool is not None and tool.tools == ("get_weather",)
    elsewhere = map_span({"openinference.span.kind": "TOOL", "tool.name": "x"}, "x", "openinference.instrumentation.y")
    assert elsewhere is not None and elsewhere.tools == ()


def test_a_call_that_names_its_error_fails_even_with_its_status_unset() -> None:
    """AG2 sets `error.type` on a failed tool call and leaves the status unset: the call failed."""
    from opentelemetry.trace import StatusCode

    failed = adapt({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "error.type": "ExecutionError"})
    assert failed.status.status_code is StatusCode.ERROR and failed.status.description is None
    fine = adapt({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    assert fine.status.status_code is StatusCode.UNSET


def test_agent_loops_reported_as_chains_are_runs_and_dspy_tools_are_declared() -> None:
    """Haystack's `Agent.run` and DSPy's `ReAct.forward` CHAIN spans are the agent's run (by scope); DSPy's tool
    spans `{tool}.__call__` name their `dspy.Tool`. The same names under another scope are only chains."""
    haystack = map_span({"openinference.span.kind": "CHAIN"}, "Agent.run", "openinference.instrumentation.haystack")
    dspy = map_span({"openinference.span.kind": "CHAIN"}, "ReAct.forward", "openinference.instrumentation.dspy")
    elsewhere = map_span({"openinference.span.kind": "CHAIN"}, "Agent.run", "openinference.instrumentation.x")
    assert haystack is not None and haystack.kind == sc.KIND_RUN
    assert dspy is not None and dspy.kind == sc.KIND_RUN
    assert elsewhere is not None and elsewhere.kind == sc.KIND_OTHER
    tool = map_span({"openinference.span.kind": "TOOL"}, "get_weather.__call__", "openinference.instrumentation.dspy")
    assert tool is not None and tool.set[sc.GEN_AI_TOOL_NAME] == "get_weather" and tool.tools == ("get_weather",)


@pytest.mark.parametrize("shape", sorted(RECOGNISED))
def test_declared_name_sources_never_let_a_credential_or_personal_data_out(
    shape: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Attacks on the new name sources: a tool definition named with a credential (the GenAI conventions',
    OpenInference's and OpenLLMetry's keys), an agent object named with one or with an e-mail address (a span named
    `{agent}.run`): none is registered, every one leaves as `_OTHER`, and no log line repeats it."""
    import json

    from otel_agentdiag._internal.names import default_registry

    secret = RECOGNISED[shape]()
    email = f"jane.doe.{shape}@example.com"
    adapter = ConventionAdapter()
    judge = SpanRedactor(STRICT, IdHasher(HASH_KEY), default_registry)
    with caplog.at_level("DEBUG", logger="otel_agentdiag"):
        spans = adapter.adapt_batch(
            [
                span({"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps([{"name": secret}])}, "c"),
                span(
                    {"openinference.span.kind": "LLM", "llm.tools.0.tool.json_schema": json.dumps({"name": secret})},
                    "llm",
                    span_id=3,
                ),
                span({"llm.request.type": "chat", "llm.request.functions.0.name": secret}, "o", span_id=4),
                span({"openinference.span.kind": "AGENT"}, f"{secret}.run", span_id=5),
                span({"openinference.span.kind": "AGENT"}, f"{email}._execute_core", span_id=6),
                span({"openinference.span.kind": "TOOL", "tool.name": secret}, "t", span_id=7),
            ]
        )
        redacted = [judge.redact(s) for s in spans]
    assert secret not in default_registry.tools and secret not in default_registry.agents
    assert email not in default_registry.agents
    (agent, other_agent, tool) = redacted[3:]
    assert (agent.attributes or {})["gen_ai.agent.name"] == "_OTHER"
    assert (other_agent.attributes or {})["gen_ai.agent.name"] == "_OTHER"
    assert (tool.attributes or {})["gen_ai.tool.name"] == "_OTHER"
    for s in redacted:
        assert secret not in s.name and email not in s.name
        assert all(secret not in str(v) and email not in str(v) for v in (s.attributes or {}).values())
    assert all(secret not in r.getMessage() and email not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("attributes", "name", "scope", "agents", "tools"),
    [
        (
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t1"},
            "execute_tool t1",
            "autogen-core",
            (),
            ("t1",),
        ),
        ({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t1"}, "execute_tool t1", "elsewhere", (), ()),
        (
            {"traceloop.span.kind": "agent", "gen_ai.agent.name": "a1"},
            "a1.agent",
            "opentelemetry.instrumentation.openai_agents",
            ("a1",),
            (),
        ),
        (
            {"traceloop.span.kind": "tool", "gen_ai.tool.name": "t2"},
            "t2.tool",
            "opentelemetry.instrumentation.openai_agents",
            (),
            ("t2",),
        ),
        ({"traceloop.span.kind": "agent", "gen_ai.agent.name": "a1"}, "a1.agent", "opentelemetry.x", (), ()),
        (
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a3"},
            "invoke_agent a3",
            "semantic_kernel.utils.telemetry.agent_diagnostics.decorators",
            ("a3",),
            (),
        ),
        (
            {"openinference.span.kind": "AGENT", "agent.name": "a4"},
            "a4",
            "openinference.instrumentation.beeai",
            ("a4",),
            (),
        ),
    ],
)
def test_spans_named_after_objects_of_the_code_declare_them_by_scope(
    attributes: dict[str, Any], name: str, scope: str, agents: tuple[str, ...], tools: tuple[str, ...]
) -> None:
    """Scopes whose spans are named after the code's agent and tool objects (autogen-core's tools, OpenLLMetry's Agents
    SDK, Semantic Kernel's and BeeAI's agents) declare those names; the same keys elsewhere declare nothing."""
    mapped = map_span(attributes, name, scope)
    assert mapped is not None
    assert (mapped.agents, mapped.tools) == (agents, tools)
