"""The strict-policy projection of stored spans: conversion back to SDK spans, re-validation, omissions.

Stores are real SQLite files written by ``configure()`` and the manual wrappers (or, for rows the pipeline
would never write, changed by hand behind the store's back with a separate connection).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.diagnostics.projection import (
    OMIT_CORRUPT_ROW,
    OMIT_INVALID_ROW,
    OMIT_REDACTOR_ERROR,
    OMIT_TOMBSTONE,
    load_store_hasher,
    stored_to_readable,
    strict_projection,
)
from otel_agentdiag.redaction import hashing
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.redaction.rules import Callback
from otel_agentdiag.storage import SpanRow, SpanStore, StoredSpan

KEY = "7fefcab74b1516e6261dcf0b427797eadc5395bc5f3d9ac0709dc569c281c4a0"
AGENT = "projection-agent"
TOOL = "lookup_order"
HOST = "sentinel-host-3f9a.internal.example"

agentdiag.register_names(tools=[TOOL], agents=[AGENT])


def run_agent(store: Path, conversation_id: str) -> None:
    """One run: an LLM call that names its server, a tool call that fails with a sentinel message, a recovery."""
    with agentdiag.configure(store=store, hash_key=KEY, set_global=False):
        with agentdiag.agent_run(AGENT, conversation_id=conversation_id, user_id="SENTINEL-user-77"):
            with agentdiag.iteration(0):
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    call.span.set_attribute(sc.SERVER_ADDRESS, HOST)
                    call.record_response(finish_reasons=["tool_calls"], input_tokens=12, output_tokens=5)
                try:
                    with agentdiag.tool_call(TOOL, call_id="SENTINEL-call-1"):
                        raise LookupError("SENTINEL-message: order 123 of alice@example.com")
                except LookupError:
                    pass
            with agentdiag.iteration(1):
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    call.record_response(finish_reasons=["stop"], input_tokens=20, output_tokens=7)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "store" / "traces.db"
    run_agent(path, "SENTINEL-conv-42")
    return path


def rows_of(path: Path) -> list[StoredSpan]:
    with SpanStore(path, create=False) as store:
        (session,) = [s.session for s in store.list_sessions() if s.session]
        return store.session_spans(session)


def execute(path: Path, sql: str, params: tuple[Any, ...] = ()) -> int:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        return conn.execute(sql, params).rowcount
    finally:
        conn.close()


def text_of(spans: list[ReadableSpan]) -> str:
    """Everything a projected span carries, as text (names, ids, attributes, events, links, resource, scope)."""
    parts = []
    for span in spans:
        parts.append(repr((span.name, dict(span.attributes or {}), span.resource.attributes)))
        parts.extend(repr((e.name, dict(e.attributes or {}))) for e in span.events)
        parts.extend(repr(dict(link.attributes or {})) for link in span.links)
        parts.append(repr(span.instrumentation_scope))
    return "\n".join(parts)


# -- load_store_hasher -------------------------------------------------------------------------------------------
def test_the_store_key_comes_from_the_environment_first_then_the_key_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s" / "traces.db"
    assert load_store_hasher(path) is None
    assert not (tmp_path / "s").exists()  # never creates a key file (nor its folder)
    path.parent.mkdir()
    key = hashing.load_or_create_key_file(path.parent / hashing.KEY_FILE_NAME)
    found = load_store_hasher(path)
    assert found is not None and found.key_id == hashing.key_id_for(key)
    monkeypatch.setenv("AGENTDIAG_HASH_KEY", KEY)
    found = load_store_hasher(path)
    assert found is not None and found.key_id == hashing.key_id_for(KEY.encode())


def test_a_key_file_too_short_to_be_a_key_is_refused(tmp_path: Path) -> None:
    # Refused, never silently skipped: a reader must not go on without the key the store was written with.
    (tmp_path / hashing.KEY_FILE_NAME).write_bytes(b"short")
    with pytest.raises(hashing.WeakKeyError, match=r"key file .*hash\.key: it holds 5 bytes; at least 32"):
        load_store_hasher(tmp_path / "traces.db")


# -- stored_to_readable ------------------------------------------------------------------------------------------
def test_a_stored_span_converts_back_with_everything_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    row = SpanRow(
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
        parent_span_id="00f067aa0ba902b7",
        name="chat gpt-4o-mini",
        kind="llm",
        span_kind="client",
        start_ns=1_700_000_000_000_000_000,
        end_ns=1_700_000_000_250_000_000,
        status="error",
        session="hmac-sha256:00000000:" + "ab" * 32,
        attributes={sc.AGENTDIAG_KIND: "llm", sc.GEN_AI_RESPONSE_FINISH_REASONS: ["stop", "length"]},
        events=[{"name": "exception", "time_ns": 1_700_000_000_100_000_000, "attributes": {"exception.type": "E"}}],
        links=[{"trace_id": "1" * 32, "span_id": "2" * 16, "attributes": {"link.kind": "x"}}],
        resource={"service.name": "svc"},
        scope={"name": "otel_agentdiag", "version": "9.9"},
    )
    with SpanStore(path) as store:
        store.write_batch([row], now_ns=row.start_ns)
        (stored,) = store.get_trace(row.trace_id)
    span = stored_to_readable(stored)
    assert span.context is not None and span.parent is not None
    assert f"{span.context.trace_id:032x}" == row.trace_id
    assert f"{span.context.span_id:016x}" == row.span_id
    assert f"{span.parent.span_id:016x}" == row.parent_span_id
    assert span.parent.trace_id == span.context.trace_id
    assert (span.name, span.kind, span.start_time, span.end_time) == (
        row.name,
        SpanKind.CLIENT,
        row.start_ns,
        row.end_ns,
    )
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {}) == row.attributes
    (event,) = span.events
    assert (event.name, event.timestamp, dict(event.attributes or {})) == (
        "exception",
        1_700_000_000_100_000_000,
        {"exception.type": "E"},
    )
    (link,) = span.links
    assert (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") == ("1" * 32, "2" * 16)
    assert dict(link.attributes or {}) == {"link.kind": "x"}
    assert dict(span.resource.attributes) == {"service.name": "svc"}
    assert span.instrumentation_scope is not None
    assert (span.instrumentation_scope.name, span.instrumentation_scope.version) == ("otel_agentdiag", "9.9")
    assert dict(stored_to_readable(stored, {"service.name": "other"}).resource.attributes) == {"service.name": "other"}


# -- strict_projection -------------------------------------------------------------------------------------------
def test_the_projection_keeps_stored_digests_and_drops_what_only_the_local_policy_keeps(store_path: Path) -> None:
    rows = rows_of(store_path)
    # The local policy keeps server.address: the sentinel is in the store, or this test would mean nothing.
    assert [r.attributes.get(sc.SERVER_ADDRESS) for r in rows if r.kind == "llm"] == [HOST, None]
    assert any(e.get("attributes", {}).get(sc.AGENTDIAG_EXCEPTION_FINGERPRINT) for r in rows for e in r.events)

    hasher = load_store_hasher(store_path)
    assert hasher is None  # the key was an argument: neither the environment nor a key file has it
    projection = strict_projection(rows, hasher=IdHasher(KEY.encode()))
    assert projection.omitted == 0 and projection.omitted_reasons == {}
    assert len(projection.spans) == len(rows)
    text = text_of(projection.spans)
    assert HOST not in text and "SENTINEL" not in text and "alice" not in text
    session = rows[0].session
    assert session is not None
    for span, row in zip(projection.spans, rows, strict=True):
        assert span.context is not None and f"{span.context.span_id:016x}" == row.span_id  # order kept
        attributes = dict(span.attributes or {})
        assert attributes[sc.GEN_AI_CONVERSATION_ID] == session  # the store's digest, unchanged
        assert sc.SERVER_ADDRESS not in attributes
        assert span.resource.attributes and all(STRICT.resource_rule_for(k) for k in span.resource.attributes)
    tools = [s for s in projection.spans if (s.attributes or {}).get(sc.AGENTDIAG_KIND) == "tool"]
    assert [s.name for s in tools] == [f"execute_tool {TOOL}"]  # the stored, registered name is kept
    (event,) = tools[0].events
    assert set(event.attributes or {}) <= {sc.EXCEPTION_TYPE, sc.EXCEPTION_ESCAPED, sc.AGENTDIAG_EXCEPTION_FINGERPRINT}


def test_hand_corrupted_and_unknown_schema_rows_are_omitted_and_counted(store_path: Path) -> None:
    rows = rows_of(store_path)
    llm, tool, run = (next(r for r in rows if r.kind == kind) for kind in ("llm", "tool", "run"))
    iteration = next(r for r in rows if r.kind == "iteration")
    assert (
        execute(store_path, "UPDATE spans SET attributes = ? WHERE span_id = ?", ("{not json SENTINEL-c1", llm.span_id))
        == 1
    )
    assert (
        execute(
            store_path,
            "UPDATE spans SET events = ? WHERE span_id = ?",
            ('[{"name": 5, "x": "SENTINEL-c2"}]', tool.span_id),
        )
        == 1
    )
    assert execute(store_path, "UPDATE spans SET span_kind = 'SENTINEL-kind' WHERE span_id = ?", (run.span_id,)) == 1
    assert (
        execute(
            store_path,
            "UPDATE spans SET name = ?,"
            " attributes = json_set(attributes, '$.\"agentdiag.redaction.redactor_error\"', 1) WHERE span_id = ?",
            (sc.TOMBSTONE_SPAN_NAME, iteration.span_id),
        )
        == 1
    )
    changed = rows_of(store_path)
    assert sum(r.corrupt for r in changed) == 1
    projection = strict_projection(changed, hasher=IdHasher(KEY.encode()))
    assert projection.omitted == 4
    assert projection.omitted_reasons == {OMIT_CORRUPT_ROW: 1, OMIT_INVALID_ROW: 2, OMIT_TOMBSTONE: 1}
    kept = {f"{s.context.span_id:016x}" for s in projection.spans if s.context is not None}
    assert kept == {r.span_id for r in rows} - {llm.span_id, tool.span_id, run.span_id, iteration.span_id}
    assert "SENTINEL" not in text_of(projection.spans)


def test_a_span_the_redactor_cannot_rebuild_is_omitted(store_path: Path) -> None:
    def explode(value: Any) -> Any:
        raise RuntimeError("SENTINEL-callback")

    policy = STRICT.derive("exploding", allowed_keys={sc.GEN_AI_REQUEST_MODEL: Callback(explode)})
    rows = rows_of(store_path)
    llm_calls = sum(r.attributes.get(sc.GEN_AI_REQUEST_MODEL) is not None for r in rows)
    assert llm_calls == 2
    projection = strict_projection(rows, hasher=IdHasher(KEY.encode()), policy=policy)
    assert projection.omitted_reasons == {OMIT_REDACTOR_ERROR: llm_calls}
    assert len(projection.spans) == len(rows) - llm_calls


def test_without_the_store_key_digests_are_rekeyed_never_raw(store_path: Path) -> None:
    rows = rows_of(store_path)
    session = rows[0].session
    projection = strict_projection(rows, hasher=None)
    assert len(projection.spans) == len(rows)
    conversations = {(s.attributes or {}).get(sc.GEN_AI_CONVERSATION_ID) for s in projection.spans}
    (conversation,) = conversations
    assert isinstance(conversation, str) and conversation.startswith("hmac-sha256:") and conversation != session
    assert "SENTINEL" not in text_of(projection.spans)


def test_names_the_store_carries_are_kept_only_when_they_are_name_shaped(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    base: dict[str, Any] = {sc.AGENTDIAG_KIND: "tool", sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL}
    rows = [
        SpanRow(
            trace_id="c" * 32,
            span_id=f"{i + 1:016x}",
            parent_span_id=None,
            name=f"execute_tool {name}",
            kind="tool",
            span_kind="internal",
            start_ns=1_700_000_000_000_000_000 + i,
            end_ns=1_700_000_000_000_000_010 + i,
            status="ok",
            session=None,
            attributes={**base, sc.GEN_AI_TOOL_NAME: name},
            events=[],
            links=[],
            resource={},
            scope=None,
        )
        for i, name in enumerate(["get_weather", "SENTINEL free text, with spaces"])
    ]
    with SpanStore(path) as store:
        store.write_batch(rows, now_ns=rows[0].start_ns)
        stored = store.session_spans(None)
    names = [s.name for s in strict_projection(stored, hasher=IdHasher(KEY.encode())).spans]
    assert names == ["execute_tool get_weather", f"execute_tool {sc.OTHER_VALUE}"]
    empty = [s.name for s in strict_projection(stored, hasher=IdHasher(KEY.encode()), names=NameRegistry()).spans]
    assert empty == [f"execute_tool {sc.OTHER_VALUE}"] * 2


def test_a_key_for_another_hash_function_is_refused() -> None:
    with pytest.raises(ValueError, match="sha256"):
        strict_projection([], hasher=IdHasher(KEY.encode(), algorithm="sha256"))
