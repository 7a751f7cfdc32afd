"""The adapter for OpenInference: the kind from ``openinference.span.kind``, and its model, usage and tool keys.

As Arize's ``openinference-instrumentation-*`` packages and Phoenix emit them (spec/semantic_conventions.md of
Arize-ai/openinference):

- ``AGENT`` → ``run``: ``invoke_agent {agent}``, the agent from ``agent.name``, else the span's name;
- ``LLM`` → ``llm``: ``chat {model}``; ``EMBEDDING`` → ``llm``: ``embeddings {model}``; ``RERANKER`` → ``llm``,
  operation ``rerank``;
- ``TOOL`` → ``tool``: ``execute_tool {tool}``, the tool from ``tool.name``, else the span's name;
- ``CHAIN`` → ``other`` (type ``chain``): none of the conventions marks a chain as a loop step (LangGraph's step
  number is inside the ``metadata`` JSON, which is data and not read), so it is never an iteration; except the
  one instrumentation whose chains are the agent's loop steps by construction: smolagents'
  (scope :data:`SMOLAGENTS_SCOPE`), whose ``Step {n}`` CHAIN spans wrap one ``_step_stream`` each (one model call
  and the tool calls it asked for) → ``iteration`` ``agent.iteration``, ``agentdiag.iteration.index`` ``n - 1``
  (smolagents counts from 1, our iterations from 0);
- the Agents SDK's ``turn`` CHAIN spans (scope :data:`OPENAI_AGENTS_SCOPE`) → ``iteration`` (the trace
  assembler gives each its index, in start order per run); in that scope an AGENT span's name is the agent's and
  a TOOL span's the function tool's, both from the ``Agent`` object in code (the SDK runs no tool it was not
  given): declared;
- the CHAIN spans of :data:`AGENT_CHAINS` (Haystack's ``Agent.run``, DSPy's ``ReAct.forward``) → ``run``;
  DSPy's TOOL spans ``{tool}.__call__`` name (and declare) their ``dspy.Tool``;
- an AGENT span named ``{agent}.{method}`` (:data:`AGENT_METHODS`: smolagents' and Agno's ``.run``, CrewAI's
  ``._execute_core``, AutoGen's ``.on_messages_stream``) names its agent without the method, and declares it: the
  instrumentor took it from the agent object in code, so the adapter registers it (if it passes the registry's
  checks) and the run keeps its name;
- ``RETRIEVER`` → ``other``, operation ``retrieval`` (the GenAI conventions' own); ``GUARDRAIL`` → ``other``
  named ``agentdiag.guardrail``; ``EVALUATOR``, ``PROMPT``, ``DECISION``, ``UNKNOWN`` and anything else →
  ``other`` named ``agentdiag.framework_step``, typed (``agentdiag.framework.span_type``) ``evaluator``, ...

Keys: ``llm.token_count.prompt`` / ``completion`` / ``prompt_details.cache_read`` / ``cache_write`` /
``completion_details.reasoning`` → ``gen_ai.usage.*`` (on ``llm`` spans only); ``llm.request.model_name``, else
``llm.model_name`` / ``embedding.model_name`` → ``gen_ai.request.model``; ``llm.response.model_name`` →
``gen_ai.response.model``; ``llm.finish_reason`` → ``gen_ai.response.finish_reasons`` (one);
``llm.provider``, else ``llm.system`` → ``gen_ai.provider.name``; ``tool.name`` →
``gen_ai.tool.name``; ``tool.id`` → ``gen_ai.tool.call.id``; ``agent.name`` → ``gen_ai.agent.name``;
``session.id`` → ``gen_ai.conversation.id`` (both then digests). Names are data: the redactor keeps only
registered ones. Content keys (``input.value``, ``output.value``, ``llm.input_messages.*``, ``tool.parameters``,
...) are never moved to attributes; ``input.value`` / ``output.value`` of LLM and tool spans are named as
content (:attr:`Mapped.content`) for the local store's capture.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag.pipeline.adapters._common import Mapped, copy_if_absent, copy_texts, copy_tokens

__all__ = [
    "AGENT_CHAINS",
    "AGENT_METHODS",
    "AGENT_NAMED_SCOPES",
    "ANSWER_TOOL_SCOPES",
    "DSPY_SCOPE",
    "FINAL_ANSWER",
    "OPENAI_AGENTS_SCOPE",
    "SMOLAGENTS_SCOPE",
    "SPAN_KIND",
    "adapt",
    "recognises",
]

SPAN_KIND = "openinference.span.kind"
SMOLAGENTS_SCOPE = "openinference.instrumentation.smolagents"
"""The instrumentation scope of ``openinference-instrumentation-smolagents``: its CHAIN spans are loop steps."""
OPENAI_AGENTS_SCOPE = "openinference.instrumentation.openai_agents"
"""The instrumentation scope of ``openinference-instrumentation-openai-agents``: its ``turn`` CHAIN spans are the
SDK's turns, one per pass of the agent loop."""
_TURN = "turn"
AGENT_NAMED_SCOPES = frozenset({OPENAI_AGENTS_SCOPE, "openinference.instrumentation.beeai"})
"""Scopes whose AGENT spans are named after the agent object of the code (the Agents SDK's ``Agent``, BeeAI's
agents): the span's name is a declared agent name."""
FINAL_ANSWER = "final_answer"
"""The tool through which smolagents' and BeeAI's agents give their answer: a step (``agentdiag.framework.span_type``
``final_answer``), not a tool call."""
ANSWER_TOOL_SCOPES = frozenset({SMOLAGENTS_SCOPE, "openinference.instrumentation.beeai"})
"""Instrumentations whose ``final_answer`` TOOL span is the framework's answer tool (:data:`FINAL_ANSWER`)."""
DSPY_SCOPE = "openinference.instrumentation.dspy"
AGENT_CHAINS: dict[str, frozenset[str]] = {
    "openinference.instrumentation.haystack": frozenset({"Agent.run", "Agent.run_async"}),
    DSPY_SCOPE: frozenset({"ReAct.forward", "ReAct.aforward", "CodeAct.forward", "CodeAct.aforward"}),
}
"""Per instrumentation scope, the CHAIN spans that are an agent's run (its loop), by span name."""
_TOOL_CALLS = (".__call__", ".acall")
_STEP_PREFIX = "Step "
_MAX_STEP_DIGITS = 6

_TOKENS: tuple[tuple[str, str], ...] = (
    ("llm.token_count.prompt", sc.GEN_AI_USAGE_INPUT_TOKENS),
    ("llm.token_count.completion", sc.GEN_AI_USAGE_OUTPUT_TOKENS),
    ("llm.token_count.prompt_details.cache_read", sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
    ("llm.token_count.prompt_details.cache_write", sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
    ("llm.token_count.completion_details.reasoning", sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS),
)

_COMMON: tuple[tuple[str, str], ...] = (
    (sc.SESSION_ID, sc.GEN_AI_CONVERSATION_ID),
    ("llm.provider", sc.GEN_AI_PROVIDER_NAME),
    ("llm.system", sc.GEN_AI_PROVIDER_NAME),
)
_MODELS: tuple[tuple[str, str], ...] = (
    ("llm.request.model_name", sc.GEN_AI_REQUEST_MODEL),
    ("llm.model_name", sc.GEN_AI_REQUEST_MODEL),
    ("embedding.model_name", sc.GEN_AI_REQUEST_MODEL),
    ("llm.response.model_name", sc.GEN_AI_RESPONSE_MODEL),
)

_LLM_CONTENT: tuple[tuple[str, str], ...] = (
    ("input.value", sc.CONTENT_INPUT_MESSAGES),
    ("output.value", sc.CONTENT_OUTPUT_MESSAGES),
)
_TOOL_CONTENT: tuple[tuple[str, str], ...] = (
    ("input.value", sc.CONTENT_TOOL_ARGUMENTS),
    ("output.value", sc.CONTENT_TOOL_RESULT),
)

_LLM_OPERATIONS = {"LLM": sc.OP_CHAT, "EMBEDDING": sc.OP_EMBEDDINGS, "RERANKER": "rerank"}
_OTHER_TYPES = {
    "CHAIN": "chain",
    "RETRIEVER": "retriever",
    "GUARDRAIL": "guardrail",
    "EVALUATOR": "evaluator",
    "PROMPT": "prompt",
    "DECISION": "decision",
}


def recognises(attributes: Mapping[str, Any]) -> bool:
    return SPAN_KIND in attributes


def adapt(attributes: Mapping[str, Any], span_name: str, scope: str | None = None) -> Mapped:
    """Our kind and keys for an OpenInference span (``scope``: its instrumentation scope's name, which tells a
    smolagents loop step). Pure; a kind of the wrong type or unknown is ``other``."""
    value = attributes.get(SPAN_KIND)
    oi_kind = value.upper() if type(value) is str and len(value) <= 32 else ""
    out: dict[str, Any] = {}
    copy_texts(attributes, out, _COMMON)
    operation = _LLM_OPERATIONS.get(oi_kind)
    if operation is not None:
        out.setdefault(sc.GEN_AI_OPERATION_NAME, operation)
        copy_texts(attributes, out, _MODELS)
        copy_tokens(attributes, out, _TOKENS)
        reason = attributes.get("llm.finish_reason")
        if type(reason) is str and len(reason) <= 64 and sc.GEN_AI_RESPONSE_FINISH_REASONS not in attributes:
            out[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (reason,)  # the policy's closed set judges it
        return Mapped(sc.KIND_LLM, _keep_operation(attributes, out), content=_LLM_CONTENT)
    if oi_kind == "AGENT":
        out[sc.GEN_AI_OPERATION_NAME] = sc.OP_INVOKE_AGENT
        declared = span_name if scope in AGENT_NAMED_SCOPES else _declared_agent(span_name)
        copy_if_absent(attributes, out, "agent.name", sc.GEN_AI_AGENT_NAME)
        copy_if_absent({"name": declared or span_name}, out, "name", sc.GEN_AI_AGENT_NAME)
        return Mapped(sc.KIND_RUN, _keep_operation(attributes, out), agents=(declared,) if declared else ())
    if oi_kind == "TOOL":
        if scope in ANSWER_TOOL_SCOPES and (span_name == FINAL_ANSWER or attributes.get("tool.name") == FINAL_ANSWER):
            # The framework's own answer tool (the loop ends when the model calls it): the run's answer, not a
            # tool call of the agent's. A step, so that status, health and the contract count the agent's tools.
            return Mapped(sc.KIND_OTHER, out, name=sc.FRAMEWORK_SPAN_NAME, span_type=FINAL_ANSWER)
        out[sc.GEN_AI_OPERATION_NAME] = sc.OP_EXECUTE_TOOL
        called = _declared_tool(span_name) if scope == DSPY_SCOPE else None
        copy_if_absent(attributes, out, "tool.name", sc.GEN_AI_TOOL_NAME)
        copy_if_absent({"name": called or span_name}, out, "name", sc.GEN_AI_TOOL_NAME)
        copy_if_absent(attributes, out, "tool.id", sc.GEN_AI_TOOL_CALL_ID)
        # The Agents SDK runs only the tools its agent declares (an unknown name fails before any span), and
        # DSPy's `{tool}.__call__` is a `dspy.Tool` object's call: code.
        tools = (span_name,) if scope == OPENAI_AGENTS_SCOPE else (called,) if called else ()
        return Mapped(sc.KIND_TOOL, _keep_operation(attributes, out), content=_TOOL_CONTENT, tools=tools)
    if oi_kind == "CHAIN" and scope == SMOLAGENTS_SCOPE:
        index = _step_index(span_name)
        if index is not None:
            out[sc.AGENTDIAG_ITERATION_INDEX] = index
            return Mapped(sc.KIND_ITERATION, out, name=sc.ITERATION_SPAN_NAME)
    if oi_kind == "CHAIN" and span_name in AGENT_CHAINS.get(scope or "", ()):
        # A framework's agent loop that its OpenInference instrumentor reports as a chain (Haystack's `Agent`,
        # DSPy's `ReAct`): the run. These agents have no name of their own.
        out[sc.GEN_AI_OPERATION_NAME] = sc.OP_INVOKE_AGENT
        return Mapped(sc.KIND_RUN, _keep_operation(attributes, out))
    if oi_kind == "CHAIN" and scope == OPENAI_AGENTS_SCOPE and span_name == _TURN:
        # The Agents SDK's turn: one model call and the tool calls it asked for (its index: the trace assembler).
        return Mapped(sc.KIND_ITERATION, out, name=sc.ITERATION_SPAN_NAME)
    span_type = _OTHER_TYPES.get(oi_kind, "unknown")
    if oi_kind == "RETRIEVER":
        out[sc.GEN_AI_OPERATION_NAME] = sc.OP_RETRIEVAL
        return Mapped(sc.KIND_OTHER, _keep_operation(attributes, out), span_type=span_type)
    name: str | None = sc.GUARDRAIL_SPAN_NAME if oi_kind == "GUARDRAIL" else sc.FRAMEWORK_SPAN_NAME
    if sc.GEN_AI_OPERATION_NAME in attributes:
        name = None  # the span names its operation: the redactor names it from that
    return Mapped(sc.KIND_OTHER, out, name=name, span_type=span_type)


AGENT_METHODS: tuple[str, ...] = (".run", ".arun", "._execute_core", ".on_messages_stream", ".on_messages")
"""The methods OpenInference's instrumentors name an agent span after, as ``{agent}.{method}``: smolagents' and
Agno's ``run``/``arun``, CrewAI's ``_execute_core``, AutoGen AgentChat's ``on_messages_stream``. The ``{agent}``
is the name the agent object was given in code (its ``name``, CrewAI's ``role``)."""


def _declared_agent(span_name: str) -> str | None:
    """The agent of a span named ``{agent}.{method}`` (:data:`AGENT_METHODS`), the agent itself a name with no
    dot (so a span named after a task's text, as ``{role}.{description}.execute``, declares nothing)."""
    for method in AGENT_METHODS:
        if span_name.endswith(method):
            agent = span_name[: -len(method)]
            return agent if agent and "." not in agent and len(agent) <= 128 else None
    return None


def _declared_tool(span_name: str) -> str | None:
    """DSPy's tool spans are named ``{tool}.__call__`` (or ``.acall``): the tool."""
    for method in _TOOL_CALLS:
        if span_name.endswith(method):
            tool = span_name[: -len(method)]
            return tool if tool and "." not in tool and len(tool) <= 128 else None
    return None


def _step_index(span_name: str) -> int | None:
    """``n - 1`` for a span named ``Step {n}`` (``n`` a positive decimal of at most six digits), else None."""
    if not span_name.startswith(_STEP_PREFIX):
        return None
    digits = span_name[len(_STEP_PREFIX) :]
    if not (0 < len(digits) <= _MAX_STEP_DIGITS and digits.isascii() and digits.isdigit()):
        return None
    step = int(digits)
    return step - 1 if step > 0 else None


def _keep_operation(attributes: Mapping[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """A span that names its own GenAI operation keeps it (ours is only a default)."""
    if sc.GEN_AI_OPERATION_NAME in attributes:
        out.pop(sc.GEN_AI_OPERATION_NAME, None)
    return out
