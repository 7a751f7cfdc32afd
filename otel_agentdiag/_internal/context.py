"""OpenTelemetry context keys through which an agent run reaches its children."""

from __future__ import annotations

import sys
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from otel_agentdiag import semconv as sc

CONVERSATION_ID_KEY = otel_context.create_key("agentdiag-conversation-id")
"""Raw conversation id of the enclosing agent run (hashed by the redacting processor, never exported raw)."""

AGENT_NAME_KEY = otel_context.create_key("agentdiag-agent-name")
"""Name of the enclosing agent run."""


_AGENT_STEPS = frozenset({sc.KIND_LLM, sc.KIND_TOOL})


def enclosing_agent(attributes: Any, ctx: otel_context.Context | None) -> str | None:
    """The ``gen_ai.agent.name`` a model or tool call of ours (``attributes``: its own) takes when it names none:
    the nearest enclosing agent run's (carried by ``ctx``), so its cost and latency can be told apart per agent.
    None for any other span. Set at start by our own start paths, else by the sequencer on ``on_start``."""
    if attributes.get(sc.AGENTDIAG_KIND) not in _AGENT_STEPS or sc.GEN_AI_AGENT_NAME in attributes:
        return None
    agent = otel_context.get_value(AGENT_NAME_KEY, ctx)
    return agent if type(agent) is str else None


def current_conversation_id(ctx: otel_context.Context | None = None) -> str | None:
    value = otel_context.get_value(CONVERSATION_ID_KEY, ctx)
    return value if isinstance(value, str) else None


_UTIL_GENAI_CONVERSATION = "opentelemetry.util.genai._conversation_context"


_OPENINFERENCE_CONTEXT = "openinference.instrumentation.context_attributes"
_OPENINFERENCE_SESSION = "session.id"
"""The context key OpenInference's ``using_session(...)`` sets (a plain string key of ``opentelemetry.context``)."""


def peer_conversation_id(ctx: otel_context.Context | None = None) -> str | None:
    """The conversation id another instrumentation carries in the context for the spans it starts, or None: the
    official GenAI instrumentations' (``opentelemetry-util-genai``: they set ``gen_ai.conversation.id`` on their
    spans only when they end), else OpenInference's ``using_session(...)`` (it sets ``session.id`` on its own
    spans; a model call of ours inside belongs to the same session). Each is looked up only when its package is
    already imported; never raises."""
    module = sys.modules.get(_UTIL_GENAI_CONVERSATION)
    if module is not None:
        try:
            value = module.get_ambient_conversation_id(ctx)
        except Exception:  # noqa: BLE001 - another version of theirs: no conversation from it
            value = None
        if isinstance(value, str):
            return value
    if _OPENINFERENCE_CONTEXT in sys.modules:
        value = otel_context.get_value(_OPENINFERENCE_SESSION, ctx)
        if isinstance(value, str) and value:
            return value
    return None


LLM_CALL_KEY = otel_context.create_key("agentdiag-llm-call")
"""The model call in progress (an ``instrumentation._base.LLMCallState``): who owns its span, where its HTTP
attempts are recorded. A client instrumentation that finds one already set enriches it instead of starting a
second LLM span for the same call."""


ROLLUP_KEY = otel_context.create_key("agentdiag-rollup")
"""The innermost manual run or iteration (an ``otel_agentdiag.cost.Rollup``): an LLM leaf that ends inside it
adds its usage and cost to it (and to every enclosing one)."""


ACTIVE_FRAMEWORK_STEP: ContextVar[Any] = ContextVar("agentdiag_framework_step", default=None)
"""The innermost framework step (an ``instrumentation._framework.Node``) made active in this context. Set
without a token, so ending a step in another context never fails; ended steps are skipped by readers."""


def active_framework_step() -> Any:
    """The innermost framework step still open in this context, if any."""
    node = ACTIVE_FRAMEWORK_STEP.get()
    while node is not None and node.ended:
        node = node.parent
    return node


def framework_parent(ctx: otel_context.Context) -> Any:
    """The framework step a span started now in ``ctx`` belongs to, or ``None``: the active step, unless an
    OpenTelemetry span was made current since that step started (that span is closer).

    A caller starts its span in the step's ``context`` (the step's span as parent, its conversation id); when
    the step is a model call, its ``llm`` state owns the call and a client instrumentation enriches it instead
    of starting a second span."""
    if ACTIVE_FRAMEWORK_STEP.get() is None:
        return None
    node = active_framework_step()
    if node is None or trace.get_current_span(ctx) is not node.ambient:
        return None
    return node


STREAMING_STEP: ContextVar[Any] = ContextVar("agentdiag_streaming_step", default=None)
"""A framework's model-call step that returned a stream whose request is not sent yet (LlamaIndex's streaming
LLMs send it when the stream is first read): the next client call made in this context, with no other owner, is
that step's call. Claimed once (:func:`claim_streaming_step`)."""


STREAMING_IN_USE: list[bool] = [False]
"""Set once a framework handler left a :data:`STREAMING_STEP`: until then no client call looks for one."""


def claim_streaming_step(ctx: otel_context.Context) -> Any:
    """The model-call step still waiting for its streamed request in this context (and forget it), or None. Only
    while no OpenTelemetry span was made current since that step started (that span would be closer)."""
    node = STREAMING_STEP.get()
    if node is None:
        return None
    STREAMING_STEP.set(None)
    if node.ended or trace.get_current_span(ctx) is not node.ambient:
        return None
    return node
