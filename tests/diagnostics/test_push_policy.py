"""``push_spans`` re-validates every stored row under the strict preset, whatever policy a caller passes."""

from __future__ import annotations

import uuid
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.projection import load_store_hasher
from otel_agentdiag.diagnostics.push import endpoint_key, push_spans
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.storage import SpanStore

HOST = f"push-host-{uuid.uuid4().hex[:8]}.internal.example"


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "t.db"
    with agentdiag.configure(service_name="push-policy", store=path, set_global=False):
        with agentdiag.agent_run("push_policy_agent", conversation_id="c-1"):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                trace.get_current_span().set_attribute(sc.SERVER_ADDRESS, HOST)  # kept locally, not strictly
                call.record_response(response_model="gpt-4o-mini", finish_reasons=["stop"])
    return path


def _push(path: Path, policy: Policy) -> list[dict[str, object]]:
    sink = InMemorySpanExporter()
    with SpanStore(path, create=False) as store:
        result = push_spans(
            store,
            sink,
            endpoint=endpoint_key("http://127.0.0.1:4318", "http/protobuf"),
            hasher=load_store_hasher(path),
            policy=policy,
        )
    assert result.ok and result.pushed == 2
    return [dict(span.attributes or {}) for span in sink.get_finished_spans()]


def test_a_looser_policy_cannot_let_out_what_the_strict_preset_drops(tmp_path: Path) -> None:
    path = _store(tmp_path)
    with SpanStore(path, create=False) as store:  # the local store holds it: the push must take it out
        stored = [span for t in store.list_traces() for span in store.get_trace(t.trace_id)]
    assert any(span.attributes.get(sc.SERVER_ADDRESS) == HOST for span in stored)
    pushed = _push(path, LOCAL)
    assert all(sc.SERVER_ADDRESS not in attributes for attributes in pushed)
    assert any(attributes.get(sc.GEN_AI_REQUEST_MODEL) == "gpt-4o-mini" for attributes in pushed)


def test_a_tighter_policy_removes_more(tmp_path: Path) -> None:
    tighter = STRICT.derive("tighter", allowed_keys={sc.GEN_AI_REQUEST_MODEL: None})
    pushed = _push(_store(tmp_path), tighter)
    assert all(sc.GEN_AI_REQUEST_MODEL not in attributes for attributes in pushed)
    assert any(attributes.get(sc.GEN_AI_RESPONSE_MODEL) == "gpt-4o-mini" for attributes in pushed)
