"""The shipped policies: ``strict`` (OTLP export, support bundles) and ``local`` (the SQLite store).

:data:`STRICT` names every key that may leave, each family key by key (:mod:`~otel_agentdiag.redaction.keys`:
what a ``*`` would match could be data). :data:`LOCAL` is strict plus a few more diagnostic fields: still no
content, still pseudonymised. The named rules below (``MODEL_NAME``, ``ERROR_TYPE``, ...) are their building
blocks, for policies written in Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from otel_agentdiag import semconv as sc
from otel_agentdiag.redaction import keys as _keys
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.finish_reasons import FINISH_REASONS
from otel_agentdiag.redaction.reasons import REASONS
from otel_agentdiag.redaction.rules import (
    Boolean,
    ClosedSet,
    Enum,
    FloatRange,
    HashedId,
    IntRange,
    RegisteredName,
    Rule,
    Scalar,
    StringArray,
    token,
)

MODEL_NAME = token(r"[A-Za-z0-9][A-Za-z0-9._:/@+\-]*", 128)
PROVIDER_NAME = token(r"[a-z0-9][a-z0-9_.\-]*", 64)
OPERATION_NAME = token(r"[a-z][a-z0-9_]*", 64)
ERROR_TYPE = token(r"[A-Za-z_<][A-Za-z0-9_.<>]*|[1-5][0-9]{2}|-[0-9]{1,6}", 256)
"""An exception class name, an HTTP status code (the HTTP conventions' error.type for a failed response), or a
JSON-RPC error code (the MCP conventions' error.type for an error response: ``-32602``)."""
JSONRPC_ERROR_CODE = token(r"-?[0-9]{1,6}", 7)
"""``rpc.response.status_code`` of a JSON-RPC error response: the error code as a string."""
MCP_PROTOCOL_VERSION = token(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", 10)
"""An MCP protocol revision: a date."""
FINISH_REASON = ClosedSet(FINISH_REASONS)
"""One finish reason (OpenInference's ``llm.finish_reason``): a documented one, else ``_OTHER``."""
FINISH_REASON_ARRAY = ClosedSet(FINISH_REASONS, 16)
"""``gen_ai.response.finish_reasons``: up to 16 documented finish reasons, each unknown one ``_OTHER``."""
IDENTIFIER = token(r"[A-Za-z_][A-Za-z0-9_.\-]*", 128)
SERVICE_TIER = token(r"[a-z][a-z0-9_\-]*", 32)
SYSTEM_FINGERPRINT = token(r"fp_[0-9a-f]{1,64}", 67)
"""OpenAI's backend configuration fingerprint, in the only shape OpenAI makes it: anything else is data."""
HOST_NAME = token(r"[A-Za-z0-9][A-Za-z0-9.\-]*|\[[0-9A-Fa-f:.]+\]", 253)

_INT64 = 2**63 - 1
_TOKENS = IntRange(0, 10**12)
_COST = FloatRange(0.0, 1e9)
"""US dollars: a call's cost or a roll-up's, finite and never negative."""

OPENINFERENCE_SPAN_KINDS = frozenset(
    {"LLM", "CHAIN", "TOOL", "AGENT", "RETRIEVER", "EMBEDDING", "RERANKER", "GUARDRAIL", "EVALUATOR", "PROMPT"}
    | {"UNKNOWN"}
)

# Fixed span names of the common OpenAI instrumentations (OpenInference, OpenLLMetry): code, not data.
PEER_SPAN_NAMES = frozenset(
    {
        "ChatCompletion",
        "Completion",
        "CreateEmbeddings",
        "Embedding",
        "Response",
        "openai.chat",
        "openai.completion",
        "openai.embeddings",
        "openai.response",
    }
)


def _strict() -> Policy:
    hashed = {key: HashedId(kind) for key, kind in sc.CORRELATION_ID_KINDS.items()}
    keys: dict[str, Rule] = {
        # otel-agentdiag's own keys
        sc.AGENTDIAG_KIND: Enum(frozenset(sc.KINDS)),
        sc.AGENTDIAG_ITERATION_INDEX: IntRange(0, 10**9),
        sc.AGENTDIAG_SEQUENCE: IntRange(0, _INT64),
        sc.AGENTDIAG_OBSERVER_ID: token(r"[0-9a-f]{16}", 16),
        # counts from an earlier redaction: one key per reason code, nothing else under the prefix
        **{key: IntRange(0, 10**9) for key in _keys.redaction_counter_keys(REASONS)},
        sc.AGENTDIAG_EXCEPTION_FINGERPRINT: HashedId(sc.ID_KIND_EXCEPTION_MESSAGE),
        # GenAI semantic conventions
        sc.GEN_AI_OPERATION_NAME: OPERATION_NAME,
        sc.GEN_AI_PROVIDER_NAME: PROVIDER_NAME,
        sc.GEN_AI_SYSTEM: PROVIDER_NAME,
        sc.GEN_AI_REQUEST_MODEL: MODEL_NAME,
        sc.GEN_AI_RESPONSE_MODEL: MODEL_NAME,
        sc.GEN_AI_REQUEST_MAX_TOKENS: IntRange(0, 10**9),
        sc.GEN_AI_REQUEST_TEMPERATURE: FloatRange(0.0, 10.0),
        sc.GEN_AI_REQUEST_TOP_P: FloatRange(0.0, 1.0),
        sc.GEN_AI_REQUEST_TOP_K: FloatRange(0.0, 1e6),
        sc.GEN_AI_REQUEST_SEED: IntRange(-_INT64 - 1, _INT64),
        sc.GEN_AI_REQUEST_STREAM: Boolean(),
        sc.GEN_AI_REQUEST_CHOICE_COUNT: IntRange(1, 1000),
        sc.GEN_AI_REQUEST_FREQUENCY_PENALTY: FloatRange(-10.0, 10.0),
        sc.GEN_AI_REQUEST_PRESENCE_PENALTY: FloatRange(-10.0, 10.0),
        sc.GEN_AI_OUTPUT_TYPE: OPERATION_NAME,
        sc.GEN_AI_RESPONSE_FINISH_REASONS: FINISH_REASON_ARRAY,
        sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: FloatRange(0.0, 86_400.0),
        "gen_ai.is_streaming": Boolean(),
        "gen_ai.embeddings.dimension.count": IntRange(0, 10**6),
        "openai.api.type": Enum(frozenset({"chat_completions", "responses", "embeddings", "completions"})),
        # Every key of a family is named (keys.py): what a "*" would match could be data.
        **{key: _TOKENS for key in _keys.GEN_AI_USAGE_KEYS},
        sc.GEN_AI_AGENT_NAME: RegisteredName("agent"),
        sc.GEN_AI_TOOL_NAME: RegisteredName("tool"),
        sc.GEN_AI_TOOL_TYPE: Enum(frozenset({"function", "extension", "datastore"})),
        sc.ERROR_TYPE: ERROR_TYPE,
        sc.SERVER_PORT: IntRange(0, 65535),
        sc.HTTP_RESPONSE_STATUS_CODE: IntRange(100, 599),
        sc.HTTP_REQUEST_RESEND_COUNT: IntRange(0, 1000),
        sc.AGENTDIAG_STREAM_END: Enum(frozenset(sc.STREAM_ENDS)),
        # Framework integrations: roll-ups, why a run stopped, handoffs, guardrails
        **{key: _TOKENS for key in _keys.AGENTDIAG_USAGE_KEYS},
        # Cost: a leaf's, and its roll-up on runs and iterations; a run's budget, when one was set and passed
        sc.AGENTDIAG_COST_USD: _COST,
        sc.AGENTDIAG_USAGE_COST_USD: _COST,
        sc.AGENTDIAG_BUDGET_EXCEEDED: Boolean(),
        sc.AGENTDIAG_BUDGET_LIMITS: ClosedSet(frozenset(sc.BUDGET_LIMITS), len(sc.BUDGET_LIMITS)),
        sc.AGENTDIAG_BUDGET_LIMIT: ClosedSet(frozenset(sc.BUDGET_LIMITS)),
        sc.AGENTDIAG_BUDGET_THRESHOLD: FloatRange(0.0, 1e15),
        sc.AGENTDIAG_STOP_REASON: Enum(frozenset(sc.STOP_REASONS)),
        sc.AGENTDIAG_HANDOFF_SOURCE_AGENT: RegisteredName("agent"),
        sc.AGENTDIAG_HANDOFF_TARGET_AGENT: RegisteredName("agent"),
        sc.AGENTDIAG_GUARDRAIL_NAME: RegisteredName("guardrail"),
        sc.AGENTDIAG_GUARDRAIL_TRIGGERED: Boolean(),
        sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE: token(r"[a-z][a-z0-9_]*", 32),
        sc.EXCEPTION_TYPE: ERROR_TYPE,
        sc.EXCEPTION_ESCAPED: Boolean(),
        # Model Context Protocol (instrumentation/mcp and the mcp SDK's own spans). Never a resource URI, prompt
        # name or JSON-RPC request id (data, or a per-connection counter): those are dropped.
        sc.MCP_METHOD_NAME: ClosedSet(sc.MCP_METHODS),
        sc.MCP_PROTOCOL_VERSION: MCP_PROTOCOL_VERSION,
        sc.RPC_RESPONSE_STATUS_CODE: JSONRPC_ERROR_CODE,
        # OpenInference's names for the same facts
        "openinference.span.kind": Enum(OPENINFERENCE_SPAN_KINDS),
        "llm.model_name": MODEL_NAME,
        "llm.provider": PROVIDER_NAME,
        "llm.system": PROVIDER_NAME,
        **{key: _TOKENS for key in _keys.OPENINFERENCE_TOKEN_COUNT_KEYS},
        "llm.finish_reason": FINISH_REASON,
        "embedding.model_name": MODEL_NAME,
        "tool.name": RegisteredName("tool"),
        # OpenLLMetry's
        "llm.request.type": Enum(frozenset({"chat", "completion", "embedding", "rerank", "unknown"})),
        "llm.usage.total_tokens": _TOKENS,
        "llm.is_streaming": Boolean(),
        **hashed,
    }
    resource = Scalar(256)
    return Policy(
        name="strict",
        allowed_keys=keys,
        allowed_span_names=frozenset(
            {sc.ITERATION_SPAN_NAME, sc.TOMBSTONE_SPAN_NAME, sc.GUARDRAIL_SPAN_NAME, sc.FRAMEWORK_SPAN_NAME}
        )
        | PEER_SPAN_NAMES,
        # Exception events keep the exception's type only: message and stack trace are data. The fingerprint
        # is a keyed digest, present only when the policy asks for it.
        allowed_events={
            sc.EXCEPTION_EVENT_NAME: frozenset(
                {sc.EXCEPTION_TYPE, sc.EXCEPTION_ESCAPED, sc.AGENTDIAG_EXCEPTION_FINGERPRINT}
            ),
            # One per HTTP attempt of a model call (the SDKs retry inside one call).
            sc.AGENTDIAG_HTTP_ATTEMPT_EVENT: frozenset(
                {sc.HTTP_REQUEST_RESEND_COUNT, sc.HTTP_RESPONSE_STATUS_CODE, sc.ERROR_TYPE}
            ),
            # A run passing a limit of its budget: which limit, and its value.
            sc.AGENTDIAG_BUDGET_EXCEEDED: frozenset({sc.AGENTDIAG_BUDGET_LIMIT, sc.AGENTDIAG_BUDGET_THRESHOLD}),
        },
        resource_keys={
            "service.name": resource,
            "service.namespace": resource,
            "service.version": resource,
            "service.instance.id": resource,
            **{key: resource for key in _keys.TELEMETRY_RESOURCE_KEYS},
            "deployment.environment": resource,
            "deployment.environment.name": resource,
        },
        summary="info",
    )


STRICT: Final[Policy] = _strict()
"""The strict preset: the default for OTLP export and support bundles."""


def _local() -> Policy:
    resource = Scalar(256)
    return STRICT.derive(
        "local",
        allowed_keys={
            sc.SERVER_ADDRESS: HOST_NAME,
            "gen_ai.openai.request.service_tier": SERVICE_TIER,
            "gen_ai.openai.response.service_tier": SERVICE_TIER,
            "gen_ai.openai.response.system_fingerprint": SYSTEM_FINGERPRINT,
            "openai.request.service_tier": SERVICE_TIER,
            "openai.response.service_tier": SERVICE_TIER,
            "openai.response.system_fingerprint": SYSTEM_FINGERPRINT,
            "gen_ai.request.encoding_formats": StringArray(token(r"[a-z0-9_]+", 32), 8),
            "thread.id": IntRange(0, _INT64),
            "thread.name": IDENTIFIER,
            "code.function.name": token(r"[A-Za-z_<][A-Za-z0-9_.<>]*", 256),
            "code.function": token(r"[A-Za-z_<][A-Za-z0-9_.<>]*", 256),
            "code.line.number": IntRange(0, 10**7),
            "code.lineno": IntRange(0, 10**7),
        },
        resource_keys={
            "process.pid": resource,
            "process.runtime.name": resource,
            "process.runtime.version": resource,
            "host.arch": resource,
            "os.type": resource,
        },
        exception_fingerprint=True,
    )


LOCAL: Final[Policy] = _local()
"""The local preset: the default for the SQLite store. Strict plus server address, service tiers, thread and
code-location names, process id/runtime, and a keyed fingerprint of exception messages. No content."""

PRESETS: Final[Mapping[str, Policy]] = {"strict": STRICT, "local": LOCAL}
