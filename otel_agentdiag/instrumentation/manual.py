"""Hand-written agent spans: ``agent_run``, ``iteration``, ``llm_call``, ``tool_call``, ``@agent``, ``@tool``.

Span names, kinds and attributes follow the OpenTelemetry GenAI semantic conventions (see design.md §3):

============  ==================================  ========  ==========================================
kind          span name                           SpanKind  attributes set at start
============  ==================================  ========  ==========================================
run           ``invoke_agent {agent name}``       INTERNAL  operation, agent name/id, conversation, user
iteration     ``agent.iteration``                 INTERNAL  iteration index, conversation
llm           ``{operation} {model}``             CLIENT    operation, provider, request model, conversation
tool          ``execute_tool {tool name}``        INTERNAL  operation, tool name, call id, tool type, conversation
============  ==================================  ========  ==========================================

Every span carries ``agentdiag.kind``. The conversation id given to :func:`agent_run` travels through the
OpenTelemetry context, so every span started inside the run carries ``gen_ai.conversation.id``.

Correlation ids (conversation, user, agent id, tool call id, response id) are never set on the span as raw
attributes, where every processor on the provider, a user's or a vendor's, would read them: they are kept
beside the span (``_internal/ids.py``) for otel-agentdiag's redactors, which export them as keyed digests.
A provider without one of our redactors exports none of them.

The wrappers never change what the wrapped code returns or raises. An exception is recorded on the span
(status ERROR without a description, ``error.type`` = the exception class, an ``exception`` event) and
re-raised unchanged; a failure of the telemetry itself is logged and swallowed.

This module is the public surface; the span scopes live in :mod:`._scopes`, the decorators in
:mod:`._decorators`, and the choice of tracer provider in :mod:`._provider`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import default_registry
from otel_agentdiag.instrumentation._decorators import agent, tool
from otel_agentdiag.instrumentation._provider import tracer_provider_in_use, use_tracer_provider
from otel_agentdiag.instrumentation._scopes import LLMCall, _AgentRun, _Iteration, _ToolCall

__all__ = [
    "LLMCall",
    "agent",
    "agent_run",
    "iteration",
    "llm_call",
    "register_names",
    "tool",
    "tool_call",
    "use_tracer_provider",
]

_tracer_provider_in_use = tracer_provider_in_use
"""The provider :func:`use_tracer_provider` set, or ``None`` (its old private name, read by ``configure()``)."""


def register_names(
    *,
    tools: Iterable[str] = (),
    agents: Iterable[str] = (),
    models: Iterable[str] = (),
    guardrails: Iterable[str] = (),
) -> None:
    """Declare tool, agent, guardrail (and, for policies with a ``registered_name`` model rule, model) names as
    code, so the redaction policy lets them through. The framework integrations register the names their
    framework's definitions declare by themselves.

    A tool name that reaches :func:`tool_call` without being declared (typically one taken from the model's
    output) is exported as the placeholder ``_OTHER``. Raises ``ValueError`` for a name that is not an
    identifier-like token of at most 128 characters (the message says which by kind and position, never the
    name). A name of that shape that fails the public-safety check every exported string meets (it looks like
    a credential, an e-mail address, a URL or a path: ``sk-proj-...``, ``ghp_...``, a JWT) is refused: it is not
    registered, spans carry ``_OTHER`` in its place, and one warning names the kind and the reason, never the
    name; the other names are registered.
    """
    default_registry.register(tools=tools, agents=agents, models=models, guardrails=guardrails)


def agent_run(name: str, *, conversation_id: Any = None, user_id: Any = None, agent_id: Any = None) -> _AgentRun:
    """A span for one run of an agent: ``invoke_agent {name}``.

    ``conversation_id`` becomes ``gen_ai.conversation.id`` of this span and every span started inside it;
    ``user_id`` becomes ``user.id``, ``agent_id`` ``gen_ai.agent.id``. They are exported only as keyed
    HMAC-SHA256 digests, by otel-agentdiag's redactors; no raw id is ever set on a span (see the module doc).
    ``name`` is registered as an allowed agent name when it is an identifier-like token that passes the
    public-safety check (else it is exported as ``_OTHER``, and a name that fails the check is refused with a
    warning, once).
    """
    return _AgentRun(name, conversation_id, user_id, agent_id)


def iteration(index: int) -> _Iteration:
    """A span for one turn of the agent's loop: ``agent.iteration`` with ``agentdiag.iteration.index``."""
    return _Iteration(index)


def llm_call(*, provider: str, model: str | None, operation: str = sc.OP_CHAT) -> LLMCall:
    """A CLIENT span for one model call: ``{operation} {model}``. Use the yielded handle's
    :meth:`LLMCall.record_response` to add response model, id, finish reasons and token usage."""
    return LLMCall(provider, model, operation)


def tool_call(name: str, *, call_id: Any = None, arguments: Any = None) -> _ToolCall:
    """A span for one tool execution: ``execute_tool {name}``; ``call_id`` becomes ``gen_ai.tool.call.id``.

    ``arguments`` (and the handle's ``record_result()``) are kept only with content capture on, in the local
    store, never on the span.

    The name is *not* registered: a name only seen here at run time usually comes from the model's output
    and is exported as ``_OTHER`` unless declared by ``@tool``, ``register_names()`` or the policy.
    """
    return _ToolCall(name, call_id, arguments)
