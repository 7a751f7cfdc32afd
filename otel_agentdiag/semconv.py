"""Attribute names and values used by otel-agentdiag.

The GenAI names follow the OpenTelemetry GenAI semantic conventions. They are spelled out here rather than
imported from ``opentelemetry-semantic-conventions``, whose ``gen_ai`` constants are marked deprecated
("moved to the GenAI semantic conventions repository") since 0.66b2; the strings are the contract, not the
Python constants. ``agentdiag.*`` names are this project's own.
"""

from __future__ import annotations

# --- GenAI semantic conventions -------------------------------------------------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_SYSTEM = "gen_ai.system"
"""The provider's name before ``gen_ai.provider.name`` replaced it (still emitted by many instrumentations)."""
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_REQUEST_TOP_K = "gen_ai.request.top_k"
GEN_AI_REQUEST_SEED = "gen_ai.request.seed"
GEN_AI_REQUEST_STREAM = "gen_ai.request.stream"
GEN_AI_REQUEST_CHOICE_COUNT = "gen_ai.request.choice.count"
GEN_AI_REQUEST_FREQUENCY_PENALTY = "gen_ai.request.frequency_penalty"
GEN_AI_REQUEST_PRESENCE_PENALTY = "gen_ai.request.presence_penalty"
GEN_AI_OUTPUT_TYPE = "gen_ai.output.type"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_REQUEST_ENCODING_FORMATS = "gen_ai.request.encoding_formats"
GEN_AI_EMBEDDINGS_DIMENSION_COUNT = "gen_ai.embeddings.dimension.count"
GEN_AI_USAGE_PREFIX = "gen_ai.usage."
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
"""Metric attribute of :data:`GEN_AI_CLIENT_TOKEN_USAGE`: which tokens a measurement counts (``input``, ``output``)."""

# --- GenAI metrics (the conventions' names and units; agentdiag's cost metric beside them) ---------------------
GEN_AI_CLIENT_TOKEN_USAGE = "gen_ai.client.token.usage"
GEN_AI_CLIENT_OPERATION_DURATION = "gen_ai.client.operation.duration"
GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
GEN_AI_CLIENT_COST = "gen_ai.client.cost"
"""Not (yet) a convention: what each model call cost, unit ``{USD}``, recorded beside the token usage with the
same attributes. Its sum over time is the spend."""


# --- captured content (``configure(capture_content=True)``) ---------------------------------------------
# The names the GenAI conventions give these values as span attributes. otel-agentdiag never sets them on a
# span: captured content travels beside the span to the local store only (``span_content`` table), keyed by
# these names, and no exporter or policy ever sees it.
CONTENT_INPUT_MESSAGES = "gen_ai.input.messages"
"""What the model was sent: the request's messages (or Responses API ``input``), as the caller gave them."""
CONTENT_OUTPUT_MESSAGES = "gen_ai.output.messages"
"""What the model answered: its choices or output items."""
CONTENT_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
"""System instructions given apart from the messages (Responses ``instructions``, Anthropic ``system``)."""
CONTENT_TOOL_DEFINITIONS = "gen_ai.tool.definitions"
"""The tools offered to the model."""
CONTENT_TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
"""What a tool received."""
CONTENT_TOOL_RESULT = "gen_ai.tool.call.result"
"""What a tool returned (or raised)."""
CONTENT_ROLES = (
    CONTENT_SYSTEM_INSTRUCTIONS,
    CONTENT_TOOL_DEFINITIONS,
    CONTENT_INPUT_MESSAGES,
    CONTENT_OUTPUT_MESSAGES,
    CONTENT_TOOL_ARGUMENTS,
    CONTENT_TOOL_RESULT,
)
"""Every content role, in the order ``agentdiag show --content`` prints them."""

# OpenInference (Arize): the one key we speak back, so Phoenix and other OpenInference readers render our tree.
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
"""Set on our exported spans by the redactor: AGENT (runs), CHAIN (iterations), LLM or EMBEDDING, TOOL."""

# Other semantic conventions used on agent spans.
ERROR_TYPE = "error.type"
SESSION_ID = "session.id"
USER_ID = "user.id"
ENDUSER_ID = "enduser.id"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"
HTTP_REQUEST_RESEND_COUNT = "http.request.resend_count"

# Model Context Protocol (the GenAI conventions' MCP page) and the JSON-RPC keys it uses.
MCP_METHOD_NAME = "mcp.method.name"
"""The request or notification method (``tools/call``, ``initialize``, ...): one of :data:`MCP_METHODS`."""
MCP_PROTOCOL_VERSION = "mcp.protocol.version"
"""The negotiated protocol revision, a date (``2025-11-25``)."""
MCP_SESSION_ID = "mcp.session.id"
"""The transport's session id (Streamable HTTP): a correlation id, hashed by the processors."""
MCP_RESOURCE_URI = "mcp.resource.uri"
"""A resource's URI: data (a path, a query); never set by us, dropped by the presets."""
JSONRPC_REQUEST_ID = "jsonrpc.request.id"
"""A per-connection request counter: never set by us, dropped by the presets (the span parent links the two ends)."""
RPC_RESPONSE_STATUS_CODE = "rpc.response.status_code"
"""The JSON-RPC error code of an error response, as a string (``-32602``)."""
GEN_AI_PROMPT_NAME = "gen_ai.prompt.name"
"""A prompt's name (``prompts/get``): data to us (prompts have no declared-name registry), dropped by the presets."""

# Exception event (OpenTelemetry "Recording Errors").
EXCEPTION_EVENT_NAME = "exception"
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_STACKTRACE = "exception.stacktrace"
EXCEPTION_ESCAPED = "exception.escaped"

# --- gen_ai.operation.name values --------------------------------------------------------------------
OP_CHAT = "chat"
OP_TEXT_COMPLETION = "text_completion"
OP_GENERATE_CONTENT = "generate_content"
OP_EMBEDDINGS = "embeddings"
OP_RETRIEVAL = "retrieval"
OP_CREATE_AGENT = "create_agent"
OP_INVOKE_AGENT = "invoke_agent"
OP_INVOKE_WORKFLOW = "invoke_workflow"
OP_EXECUTE_TOOL = "execute_tool"
OP_PLAN = "plan"

OPERATION_NAMES = frozenset(
    {
        OP_CHAT,
        OP_TEXT_COMPLETION,
        OP_GENERATE_CONTENT,
        OP_EMBEDDINGS,
        OP_RETRIEVAL,
        OP_CREATE_AGENT,
        OP_INVOKE_AGENT,
        OP_INVOKE_WORKFLOW,
        OP_EXECUTE_TOOL,
        OP_PLAN,
    }
)
LLM_OPERATIONS = frozenset({OP_CHAT, OP_TEXT_COMPLETION, OP_GENERATE_CONTENT, OP_EMBEDDINGS})

MCP_METHODS = frozenset(
    {
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "sampling/createMessage",
        "elicitation/create",
        "roots/list",
        "subscriptions/listen",
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/message",
        "notifications/resources/updated",
        "notifications/resources/list_changed",
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/roots/list_changed",
        "notifications/tasks/status",
        "notifications/elicitation/complete",
        "notifications/subscriptions/acknowledged",
    }
)
"""The MCP methods of the protocol revisions up to 2026-07-28 (``mcp_types``): ``mcp.method.name`` is one of these,
else ``_OTHER`` (a server may define its own methods, and their names are data)."""
MCP_TOOL_ERROR = "tool_error"
"""``error.type`` of a ``tools/call`` answered with ``isError: true`` (the MCP conventions' value)."""

OTHER_VALUE = "_OTHER"
"""The semantic conventions' fallback for a value that may not be recorded; also our unregistered-name placeholder."""

# --- agentdiag.* ---------------------------------------------------------------------------------------
AGENTDIAG_KIND = "agentdiag.kind"
AGENTDIAG_ITERATION_INDEX = "agentdiag.iteration.index"
AGENTDIAG_SEQUENCE = "agentdiag.sequence"
"""Monotonic per (observer, session), from 0, assigned at span start: a gap means a span never arrived."""
AGENTDIAG_OBSERVER_ID = "agentdiag.observer.id"
"""16 hex digits, random per pipeline instance (one ``configure()`` in one process)."""
AGENTDIAG_REDACTION_PREFIX = "agentdiag.redaction."
AGENTDIAG_REDACTION_KEYS = "agentdiag.redaction.keys"
"""With ``summary="debug"`` only: the names of the keys removed from the span (local use)."""
AGENTDIAG_EXCEPTION_FINGERPRINT = "agentdiag.exception.fingerprint"
"""A keyed digest of an exception message, on the exception event, when the policy asks for it."""
AGENTDIAG_STREAM_END = "agentdiag.stream.end"
"""How a streamed model answer ended: one of :data:`STREAM_ENDS`."""
AGENTDIAG_HTTP_ATTEMPT_EVENT = "agentdiag.http.attempt"
"""Event on an LLM span, one per HTTP attempt the SDK made (its own retries included)."""
AGENTDIAG_USAGE_PREFIX = "agentdiag.usage."
"""Token usage *rolled up* from the leaf LLM spans below a run or iteration span: ``agentdiag.usage.input_tokens``
is the sum of the ``gen_ai.usage.input_tokens`` its LLM descendants reported. A separate namespace, so a backend
that sums ``gen_ai.usage.*`` over a trace counts every token once."""
AGENTDIAG_STOP_REASON = "agentdiag.stop_reason"
"""Why a run stopped: one of :data:`STOP_REASONS`."""
AGENTDIAG_HANDOFF_SOURCE_AGENT = "agentdiag.handoff.source_agent"
"""On a handoff's ``execute_tool transfer_to_{agent}`` span: the agent handing off (a registered agent name)."""
AGENTDIAG_HANDOFF_TARGET_AGENT = "agentdiag.handoff.target_agent"
"""On a handoff's span: the agent taking over (a registered agent name)."""
AGENTDIAG_GUARDRAIL_NAME = "agentdiag.guardrail.name"
"""On a guardrail span: the guardrail's name (a registered guardrail name)."""
AGENTDIAG_GUARDRAIL_TRIGGERED = "agentdiag.guardrail.triggered"
"""On a guardrail span: whether its tripwire triggered."""
AGENTDIAG_FRAMEWORK_SPAN_TYPE = "agentdiag.framework.span_type"
"""On a span mapped from a framework step with no GenAI equivalent: the framework's type for that step."""
AGENTDIAG_COST_USD = "agentdiag.cost.usd"
"""On an LLM leaf: what the call cost in US dollars, from its provider, model and token usage and the price table
(:mod:`otel_agentdiag.cost`). Absent, never 0, when the model has no known price or the call reported no usage."""
AGENTDIAG_USAGE_COST_USD = "agentdiag.usage.cost.usd"
"""On a run or iteration: the sum of the :data:`AGENTDIAG_COST_USD` of the LLM leaves below it that have one (a
roll-up, beside the token roll-ups; a key no backend adds to the leaves' cost)."""
AGENTDIAG_BUDGET_EXCEEDED = "agentdiag.budget.exceeded"
"""On a run whose roll-ups passed a limit of the configured budget: ``True``. Also the name of the event added to
the run when it first passed one (its attributes: :data:`AGENTDIAG_BUDGET_LIMIT` and the limit's value)."""
AGENTDIAG_BUDGET_LIMIT = "agentdiag.budget.limit"
"""On an ``agentdiag.budget.exceeded`` event: which limit of the budget the run passed, one of :data:`BUDGET_LIMITS`."""
AGENTDIAG_BUDGET_LIMITS = "agentdiag.budget.limits"
"""On a run that passed limits of its budget: which ones (:data:`BUDGET_LIMITS`), in the order they were passed."""
AGENTDIAG_BUDGET_THRESHOLD = "agentdiag.budget.threshold"
"""On an ``agentdiag.budget.exceeded`` event: the value of the limit that was passed (US dollars or tokens)."""
BUDGET_LIMIT_COST = "cost_usd"
BUDGET_LIMIT_TOKENS = "total_tokens"
BUDGET_LIMIT_INPUT_TOKENS = "input_tokens"
BUDGET_LIMIT_OUTPUT_TOKENS = "output_tokens"
BUDGET_LIMITS = (BUDGET_LIMIT_COST, BUDGET_LIMIT_TOKENS, BUDGET_LIMIT_INPUT_TOKENS, BUDGET_LIMIT_OUTPUT_TOKENS)
TOMBSTONE_SPAN_NAME = "agentdiag.redaction_error"
"""The name of the span that replaces one the redactor could not rebuild."""

KIND_RUN = "run"
KIND_ITERATION = "iteration"
KIND_LLM = "llm"
KIND_TOOL = "tool"
KIND_OTHER = "other"
KINDS = (KIND_RUN, KIND_ITERATION, KIND_LLM, KIND_TOOL, KIND_OTHER)

ITERATION_SPAN_NAME = "agent.iteration"
GUARDRAIL_SPAN_NAME = "agentdiag.guardrail"
FRAMEWORK_SPAN_NAME = "agentdiag.framework_step"
"""A framework step with no GenAI meaning (custom spans, MCP tool listing, speech ...)."""

STOP_COMPLETED = "completed"
"""The run produced its final output."""
STOP_MAX_TURNS = "max_turns"
"""The run hit its turn limit (the Agents SDK's ``max_turns``)."""
STOP_RECURSION_LIMIT = "recursion_limit"
"""The run hit its step limit (LangGraph's ``recursion_limit``)."""
STOP_GUARDRAIL = "guardrail"
"""A guardrail's tripwire stopped the run."""
STOP_ERROR = "error"
"""The run failed with an error."""
STOP_CANCELLED = "cancelled"
"""The run was cancelled or interrupted."""
STOP_REASONS = (STOP_COMPLETED, STOP_MAX_TURNS, STOP_RECURSION_LIMIT, STOP_GUARDRAIL, STOP_ERROR, STOP_CANCELLED)

STREAM_EXHAUSTED = "exhausted"
"""The caller read the stream to its end."""
STREAM_CLOSED = "closed"
"""The caller closed the stream (``close()``, leaving its ``with`` block) before or after its end."""
STREAM_ERROR = "error"
"""Reading the stream raised."""
STREAM_CANCELLED = "cancelled"
"""The task reading the stream was cancelled (or interrupted)."""
STREAM_ABANDONED = "abandoned"
"""The stream was garbage-collected unread and unclosed: the outcome of the call is unknown."""
STREAM_ENDS = (STREAM_EXHAUSTED, STREAM_CLOSED, STREAM_ERROR, STREAM_CANCELLED, STREAM_ABANDONED)
ERROR_TYPE_UNINSTRUMENTED = "agentdiag.uninstrumented"
"""``error.type`` of a framework span ended because its instrumentation was removed while the step ran."""
ERROR_TYPE_STREAM_ABANDONED = "agentdiag.stream_abandoned"
"""``error.type`` of an LLM span whose stream was abandoned."""

# Correlation IDs and the kind of ID each one is: digests are domain-separated by kind, so a conversation
# id and a user id with the same raw value do not share a digest, while ``session.id`` and
# ``gen_ai.conversation.id`` (the same concept) do.
ID_KIND_CONVERSATION = "conversation"
ID_KIND_USER = "user"
ID_KIND_AGENT = "agent"
ID_KIND_TOOL_CALL = "tool_call"
ID_KIND_RESPONSE = "response"
ID_KIND_MCP_SESSION = "mcp_session"
ID_KIND_EXCEPTION_MESSAGE = "exception_message"
ID_KIND_ATTRIBUTE_KEY = "attribute_key"

CORRELATION_ID_KINDS: dict[str, str] = {
    GEN_AI_CONVERSATION_ID: ID_KIND_CONVERSATION,
    SESSION_ID: ID_KIND_CONVERSATION,
    USER_ID: ID_KIND_USER,
    ENDUSER_ID: ID_KIND_USER,
    GEN_AI_AGENT_ID: ID_KIND_AGENT,
    GEN_AI_TOOL_CALL_ID: ID_KIND_TOOL_CALL,
    GEN_AI_RESPONSE_ID: ID_KIND_RESPONSE,
    MCP_SESSION_ID: ID_KIND_MCP_SESSION,
}

UNKNOWN_SERVICE = "unknown_service"
"""The service of a span whose resource has no non-empty ``service.name``: its Jaeger process's name, and the
service the trace server lists it under (Jaeger's own convention)."""
