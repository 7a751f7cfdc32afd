"""The MCP keys under both presets: a closed method vocabulary, a date-shaped protocol version, JSON-RPC codes,
a keyed digest for the session id; the request id, resource URI and prompt name never leave; an MCP span is
named by its kept method (data in the method name leaves as ``_OTHER``, in the attribute and in the name)."""

from __future__ import annotations

from typing import Any

import pytest
from hostile_vocabulary import DATA_SEGMENTS
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.processor import SpanRedactor

HASHER = IdHasher(bytes.fromhex("5b1d0e4f7c2a93e8d6b0a41f2c9e7d3584a6f0b1c2d3e4f5a6b7c8d9e0f1a2b3"))
PRESETS = pytest.mark.parametrize("policy", [STRICT, LOCAL], ids=["strict", "local"])
SESSION = "3f2c0a9d1e8b4c7aa5d6e0f1b2c3d4e5"


def redact(policy: Policy, name: str, attributes: dict[str, Any], description: str | None = None) -> ReadableSpan:
    span = ReadableSpan(
        name=name,
        context=SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED)),
        resource=Resource({}),
        attributes=attributes,
        status=Status(StatusCode.ERROR if description else StatusCode.UNSET, description),
        start_time=1,
        end_time=2,
    )
    return SpanRedactor(policy, HASHER, NameRegistry()).redact(span)


@PRESETS
def test_a_request_span_keeps_the_safe_facts_and_its_method_names_it(policy: Policy) -> None:
    out = redact(
        policy,
        "MCP send resources/read",
        {
            sc.MCP_METHOD_NAME: "resources/read",
            sc.MCP_PROTOCOL_VERSION: "2025-11-25",
            sc.ERROR_TYPE: "-32602",
            sc.RPC_RESPONSE_STATUS_CODE: "-32602",
            sc.JSONRPC_REQUEST_ID: "7",
            sc.MCP_RESOURCE_URI: "file:///home/alice/notes.txt",
            sc.GEN_AI_PROMPT_NAME: "quiz_for_alice",
        },
        description="Unknown resource: file:///home/alice/notes.txt",
    )
    attributes = dict(out.attributes or {})
    assert out.name == "resources/read"
    assert attributes[sc.MCP_METHOD_NAME] == "resources/read"
    assert attributes[sc.MCP_PROTOCOL_VERSION] == "2025-11-25"
    assert attributes[sc.ERROR_TYPE] == attributes[sc.RPC_RESPONSE_STATUS_CODE] == "-32602"
    for key in (sc.JSONRPC_REQUEST_ID, sc.MCP_RESOURCE_URI, sc.GEN_AI_PROMPT_NAME):
        assert key not in attributes
    assert out.status.status_code is StatusCode.ERROR and out.status.description is None


@PRESETS
def test_the_session_id_leaves_as_a_keyed_digest_of_its_own_kind(policy: Policy) -> None:
    out = redact(policy, "tools/list", {sc.MCP_METHOD_NAME: "tools/list", sc.MCP_SESSION_ID: SESSION})
    digest = (out.attributes or {})[sc.MCP_SESSION_ID]
    assert digest == HASHER.digest(sc.ID_KIND_MCP_SESSION, SESSION)
    assert digest != HASHER.digest(sc.ID_KIND_CONVERSATION, SESSION)  # not confusable with a conversation


@PRESETS
@pytest.mark.parametrize("segment", DATA_SEGMENTS[:6])
def test_data_in_the_method_or_the_version_does_not_leave(policy: Policy, segment: str) -> None:
    out = redact(
        policy,
        f"{segment}/call",
        {sc.MCP_METHOD_NAME: f"{segment}/call", sc.MCP_PROTOCOL_VERSION: segment, sc.RPC_RESPONSE_STATUS_CODE: segment},
    )
    attributes = dict(out.attributes or {})
    assert attributes[sc.MCP_METHOD_NAME] == sc.OTHER_VALUE
    assert out.name == sc.OTHER_VALUE
    assert sc.MCP_PROTOCOL_VERSION not in attributes
    assert sc.RPC_RESPONSE_STATUS_CODE not in attributes
    assert segment not in repr(attributes) + out.name


@PRESETS
def test_a_tool_call_span_is_named_by_its_operation_not_its_method(policy: Policy) -> None:
    attributes = {
        sc.MCP_METHOD_NAME: "tools/call",
        sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
        sc.GEN_AI_TOOL_NAME: "lookup_customer_4111111111111111",  # not registered: data
    }
    out = redact(policy, "tools/call lookup_customer_4111111111111111", attributes)
    assert out.name == f"{sc.OP_EXECUTE_TOOL} {sc.OTHER_VALUE}"
    assert (out.attributes or {})[sc.GEN_AI_TOOL_NAME] == sc.OTHER_VALUE
