"""The support bundle: every cap, every drop stated, nothing raw, re-validation, 0600 atomic files, the demo.

Stores are real SQLite files: written by ``configure()`` and the manual wrappers, or (for a large store, or a
store the pipeline would never write) through ``SpanStore.write_batch``; corrupted rows are changed behind the
store's back with a separate connection.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

import pytest

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.bundle import (
    BUNDLE_KIND,
    DROP_BUNDLE_SIZE_LIMIT,
    DROP_SESSION_SPAN_LIMIT,
    DROP_SPAN_TOO_LARGE,
    SCHEMA_VERSION,
    BundleLimits,
    build_bundle,
    encode_bundle,
    write_bundle,
)
from otel_agentdiag.diagnostics.projection import load_store_hasher
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.storage import SpanRow, SpanStore
from otel_agentdiag.version import __version__

KEY = "8dfc789c1ac2eca977c60e07c7921bd866e3642dd4ba2295cfe6a9c5a1373a5d"
HASHER = IdHasher(KEY.encode())
AGENT = "bundle-agent"
TOOL = "fetch_invoice"
HOST = "sentinel-host-8c1d.internal.example"
OBSERVER = "0123456789abcdef"
T0 = (time.time_ns() // 10**9 - 3600) * 10**9
"""Row times start an hour ago (the default retention prunes spans older than 30 days)."""

TOP_KEYS = [
    "schema_version",
    "kind",
    "versions",
    "exported_at",
    "policy",
    "hash_key_id",
    "scope",
    "limits",
    "pruned",
    "omitted",
    "sessions",
]
SESSION_KEYS = [
    "session",
    "provenance",
    "availability",
    "omitted",
    "omitted_reasons",
    "dropped",
    "receipt",
    "status",
    "spans",
]
SPAN_KEYS = [
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "start_time",
    "end_time",
    "duration_ms",
    "status",
    "attributes",
    "events",
]

agentdiag.register_names(tools=[TOOL], agents=[AGENT])


def compact_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def execute(path: Path, sql: str, params: tuple[Any, ...] = ()) -> int:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        return conn.execute(sql, params).rowcount
    finally:
        conn.close()


def run_agent(store: Path, conversation_id: str, *, fail_message: str = "SENTINEL-message") -> None:
    """One run through the real pipeline: an LLM call naming its server, a failing tool call, a final answer."""
    with agentdiag.configure(store=store, hash_key=KEY, set_global=False):
        with agentdiag.agent_run(AGENT, conversation_id=conversation_id, user_id="SENTINEL-user@example.com"):
            with agentdiag.iteration(0):
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    call.span.set_attribute(sc.SERVER_ADDRESS, HOST)
                    call.record_response(finish_reasons=["tool_calls"], input_tokens=12, output_tokens=5)
                try:
                    with agentdiag.tool_call(TOOL, call_id="SENTINEL-call-9"):
                        raise KeyError(fail_message)
                except KeyError:
                    pass
            with agentdiag.iteration(1):
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    call.record_response(finish_reasons=["stop"], input_tokens=30, output_tokens=9)


def sessions_of(path: Path) -> list[str]:
    """Session digests, newest activity first."""
    with SpanStore(path, create=False) as store:
        return [s.session for s in store.list_sessions() if s.session]


def bundle_of(path: Path, sessions: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
    with SpanStore(path, create=False) as store:
        return build_bundle(store, sessions, hasher=HASHER, **kwargs)


# -- the large store ---------------------------------------------------------------------------------------------
LARGE = 3000
FAT = {i for i in range(LARGE) if i % 50 == 7}
"""Spans with 40 exception events: over 2 KiB even after the strict policy."""
CORRUPT = (LARGE - 1, LARGE - 10, 1500)
"""Rows whose attributes are replaced with broken JSON (among the newest, so they would be included)."""


def large_row(i: int, session: str) -> SpanRow:
    """An LLM span heavy with digests (about 1.4 KiB in a bundle) and a server address only the local policy keeps."""
    digests = {
        key: HASHER.digest(kind, f"SENTINEL-{key}-{i % 7}")
        for key, kind in sc.CORRELATION_ID_KINDS.items()
        if key not in (sc.GEN_AI_CONVERSATION_ID, sc.SESSION_ID)
    }
    events = []
    if i in FAT:
        events = [
            {
                "name": "exception",
                "time_ns": T0 + i * 1000 + j,
                "attributes": {"exception.type": "ValueError", "exception.message": f"SENTINEL-event-{j}"},
            }
            for j in range(40)
        ]
    return SpanRow(
        trace_id=f"{i // 100 + 1:032x}",
        span_id=f"{i + 1:016x}",
        parent_span_id=None,
        name="chat gpt-4o-mini",
        kind="llm",
        span_kind="client",
        start_ns=T0 + i * 1000,
        end_ns=T0 + i * 1000 + 500,
        status="ok",
        session=session,
        attributes={
            sc.AGENTDIAG_KIND: "llm",
            sc.GEN_AI_OPERATION_NAME: "chat",
            sc.GEN_AI_PROVIDER_NAME: "openai",
            sc.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
            sc.GEN_AI_RESPONSE_MODEL: "gpt-4o-mini-2024-07-18",
            sc.GEN_AI_CONVERSATION_ID: session,
            **digests,
            sc.AGENTDIAG_OBSERVER_ID: OBSERVER,
            sc.AGENTDIAG_SEQUENCE: i,
            sc.GEN_AI_RESPONSE_FINISH_REASONS: ["stop"],
            sc.GEN_AI_USAGE_INPUT_TOKENS: 1000 + i,
            sc.GEN_AI_USAGE_OUTPUT_TOKENS: 100 + i,
            sc.SERVER_ADDRESS: HOST,
        },
        events=events,
        links=[],
        resource={"service.name": "bundle-test", "host.name": "SENTINEL-hostname"},
        scope={"name": "otel_agentdiag", "version": __version__},
        observer=OBSERVER,
        sequence=i,
    )


@pytest.fixture(scope="module")
def large_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("large") / "traces.db"
    session = HASHER.digest(sc.ID_KIND_CONVERSATION, "SENTINEL-large-session")
    with SpanStore(path) as store:
        store.write_batch([large_row(i, session) for i in range(LARGE)])
    for i in CORRUPT:
        assert (
            execute(
                path,
                "UPDATE spans SET attributes = ? WHERE span_id = ?",
                ("{not json SENTINEL-corrupt", f"{i + 1:016x}"),
            )
            == 1
        )
    return path, session


def test_a_bundle_of_a_large_store_respects_every_cap_and_states_every_drop(large_store: tuple[Path, str]) -> None:
    path, session = large_store
    with SpanStore(path, create=False) as store:
        assert store.span_count() == LARGE
        assert store.store_summary().malformed_rows == len(CORRUPT)
    bundle = bundle_of(path)
    data = encode_bundle(bundle)
    limits = BundleLimits()

    # the whole document, each span, each session
    assert len(data) <= limits.max_bundle_bytes
    (entry,) = bundle["sessions"]
    assert entry["session"] == session and bundle["scope"] == {"selection": "newest", "sessions": [session]}
    spans = entry["spans"]
    assert 0 < len(spans) <= limits.max_spans_per_session
    assert max(compact_size(s) for s in spans) <= limits.max_span_bytes

    # every drop is stated, and the numbers add up to the rows of the session
    eligible = [i for i in reversed(range(LARGE)) if i not in FAT and i not in CORRUPT]  # newest first
    assert entry["omitted"] == bundle["omitted"] == len(CORRUPT)
    assert entry["omitted_reasons"] == {"corrupt_row": len(CORRUPT)}
    assert entry["dropped"] == {
        DROP_SPAN_TOO_LARGE: len(FAT),
        DROP_SESSION_SPAN_LIMIT: len(eligible) - limits.max_spans_per_session,
        DROP_BUNDLE_SIZE_LIMIT: limits.max_spans_per_session - len(spans),
    }
    assert entry["dropped"][DROP_BUNDLE_SIZE_LIMIT] > 0  # 500 spans of this store do not fit in 600 KiB
    assert entry["availability"] == {"spans_stored": LARGE, "spans_included": len(spans)}
    assert LARGE == entry["omitted"] + sum(entry["dropped"].values()) + len(spans)

    # the newest spans are kept, in descending sequence order, with nothing in between missing
    sequences = [s["attributes"][sc.AGENTDIAG_SEQUENCE] for s in spans]
    assert sequences == eligible[: len(spans)]
    assert [s["span_id"] for s in spans] == [f"{i + 1:016x}" for i in sequences]

    # nothing the strict policy does not keep, nothing raw
    assert b"SENTINEL" not in data and HOST.encode() not in data
    assert all(sc.SERVER_ADDRESS not in s["attributes"] for s in spans)
    assert bundle["limits"] == limits.to_json()


def test_a_second_session_shares_the_size_budget_oldest_spans_first(
    large_store: tuple[Path, str], tmp_path: Path
) -> None:
    path, session = large_store
    small = tmp_path / "copy.db"
    execute(path, f"VACUUM INTO '{small}'")
    run_agent(small, "SENTINEL-conv-second")
    newest, older = sessions_of(small)
    assert older == session
    bundle = bundle_of(small, [older, newest])
    data = encode_bundle(bundle)
    assert len(data) <= BundleLimits().max_bundle_bytes and b"SENTINEL" not in data
    large, agent = bundle["sessions"]
    assert agent["availability"] == {"spans_stored": 6, "spans_included": 6}  # its spans are the newest
    assert agent["dropped"] == {}
    assert large["dropped"][DROP_BUNDLE_SIZE_LIMIT] > 0


def test_smaller_limits_apply_the_same_way(large_store: tuple[Path, str]) -> None:
    path, _ = large_store
    limits = BundleLimits(max_spans_per_session=60, max_span_bytes=4096, max_bundle_bytes=10**7)
    bundle = bundle_of(path, limits=limits)
    (entry,) = bundle["sessions"]
    assert len(entry["spans"]) == 60 and DROP_SPAN_TOO_LARGE not in entry["dropped"]
    assert DROP_BUNDLE_SIZE_LIMIT not in entry["dropped"]
    fat = [s for s in entry["spans"] if s["events"]]
    assert fat and all(len(s["events"]) == 40 for s in fat)
    assert all(
        e == {"name": "exception", "attributes": {"exception.type": "ValueError"}} for s in fat for e in s["events"]
    )
    assert bundle["limits"]["max_spans_per_session"] == 60


# -- through the real pipeline -----------------------------------------------------------------------------------
@pytest.fixture
def agent_store(tmp_path: Path) -> Path:
    path = tmp_path / "agent" / "traces.db"
    run_agent(path, "SENTINEL-conv-1")
    return path


def test_the_bundle_document(agent_store: Path) -> None:
    (session,) = sessions_of(agent_store)
    now = 1_900_000_000_123_456_000
    bundle = bundle_of(agent_store, now_ns=now)
    assert list(bundle) == TOP_KEYS
    assert bundle["schema_version"] == SCHEMA_VERSION == 1
    assert bundle["kind"] == BUNDLE_KIND
    assert bundle["versions"]["otel_agentdiag"] == __version__
    assert bundle["versions"]["python"] == platform.python_version()
    assert bundle["versions"]["opentelemetry_sdk"].count(".") >= 2
    assert bundle["exported_at"] == "2030-03-17T17:46:40.123456Z"
    assert bundle["policy"] == "strict" and bundle["hash_key_id"] == HASHER.key_id
    assert bundle["scope"] == {"selection": "newest", "sessions": [session]}
    assert (bundle["pruned"], bundle["omitted"]) == (0, 0)
    (entry,) = bundle["sessions"]
    assert list(entry) == SESSION_KEYS
    assert entry["provenance"] == entry["receipt"]["provenance"] == entry["status"]["provenance"] == "observed"
    assert entry["receipt"]["session"] == entry["status"]["session"] == session
    assert entry["receipt"]["status"] == "valid"
    assert entry["status"]["as_of"] == bundle["exported_at"]
    assert entry["status"]["counts"]["tool_calls"] == 1 and entry["status"]["recovery"]["errors"] == 1
    spans = entry["spans"]
    assert len(spans) == 6 and all(list(s) == SPAN_KEYS for s in spans)
    assert [s["attributes"][sc.AGENTDIAG_SEQUENCE] for s in spans] == list(range(5, -1, -1))
    assert {s["attributes"][sc.GEN_AI_CONVERSATION_ID] for s in spans} == {session}
    (tool,) = [s for s in spans if s["kind"] == "tool"]
    assert tool["name"] == f"execute_tool {TOOL}" and tool["status"] == "error"
    assert [e["attributes"]["exception.type"] for e in tool["events"]] == ["KeyError"]


def test_sentinels_in_the_store_and_in_corrupted_rows_never_reach_the_bundle(agent_store: Path) -> None:
    stored = [text for (text,) in query(agent_store, "SELECT attributes FROM spans")]
    assert sum(HOST in text for text in stored) == 1  # the local policy keeps server.address: it is in the store
    with SpanStore(agent_store, create=False) as store:
        (session,) = [s.session for s in store.list_sessions() if s.session]
        rows = store.session_spans(session)
    tool = next(r for r in rows if r.kind == "tool")
    run = next(r for r in rows if r.kind == "run")
    assert (
        execute(
            agent_store,
            "UPDATE spans SET attributes = ? WHERE span_id = ?",
            ('{"gen_ai.tool.name": "SENTINEL-c', tool.span_id),
        )
        == 1
    )
    assert (
        execute(agent_store, "UPDATE spans SET links = ? WHERE span_id = ?", ('[{"SENTINEL-link": 1}]', run.span_id))
        == 1
    )
    bundle = bundle_of(agent_store)
    data = encode_bundle(bundle)
    for needle in (HOST, "SENTINEL", "example.com", "conv-1"):
        assert needle.encode() not in data, needle
    (entry,) = bundle["sessions"]
    assert bundle["omitted"] == entry["omitted"] == 2
    assert entry["omitted_reasons"] == {"corrupt_row": 1, "invalid_row": 1}
    assert {s["span_id"] for s in entry["spans"]} == {r.span_id for r in rows} - {tool.span_id, run.span_id}
    assert entry["availability"] == {"spans_stored": 6, "spans_included": 4}
    assert entry["receipt"]["counts"]["malformed_rows"] == 1  # the receipt of the store says so too


def test_a_session_filed_under_a_raw_label_is_named_by_its_digest(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    label = "SENTINEL-raw-label"
    row = large_row(5, label)
    with SpanStore(path) as store:
        store.write_batch([row])
    assert sessions_of(path) == [label]
    bundle = bundle_of(path, [label])
    digest = HASHER.digest(sc.ID_KIND_CONVERSATION, label)
    assert bundle["scope"]["sessions"] == [digest]
    (entry,) = bundle["sessions"]
    assert entry["session"] == entry["receipt"]["session"] == entry["status"]["session"] == digest
    assert entry["spans"][0]["attributes"][sc.GEN_AI_CONVERSATION_ID] == digest
    assert b"SENTINEL" not in encode_bundle(bundle)


def test_without_the_store_key_every_digest_is_rekeyed_alike(agent_store: Path) -> None:
    (session,) = sessions_of(agent_store)
    assert load_store_hasher(agent_store) is None  # the key was an argument, not a file
    with SpanStore(agent_store, create=False) as store:
        bundle = build_bundle(store, None, hasher=None)
    assert bundle["hash_key_id"] is None
    (label,) = bundle["scope"]["sessions"]
    assert label != session and label.startswith("hmac-sha256:")
    (entry,) = bundle["sessions"]
    assert {s["attributes"][sc.GEN_AI_CONVERSATION_ID] for s in entry["spans"]} == {label}


def test_a_repeated_tool_name_the_strict_policy_drops_is_not_in_the_status(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    session = HASHER.digest(sc.ID_KIND_CONVERSATION, "loop")
    rows = [
        SpanRow(
            trace_id="d" * 32,
            span_id=f"{i + 1:016x}",
            parent_span_id=None,
            name="execute_tool SENTINEL tool name",
            kind="tool",
            span_kind="internal",
            start_ns=T0 + i * 1000,
            end_ns=T0 + i * 1000 + 10,
            status="ok",
            session=session,
            attributes={
                sc.AGENTDIAG_KIND: "tool",
                sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                sc.GEN_AI_TOOL_NAME: "SENTINEL tool name",
                sc.GEN_AI_CONVERSATION_ID: session,
            },
            events=[],
            links=[],
            resource={},
            scope=None,
            observer=OBSERVER,
            sequence=i,
        )
        for i in range(3)
    ]
    with SpanStore(path) as store:
        store.write_batch(rows)
    bundle = bundle_of(path)
    (entry,) = bundle["sessions"]
    assert entry["status"]["repetition"] == {"tool": sc.OTHER_VALUE, "longest_run": 3, "suspected": True}
    assert {s["name"] for s in entry["spans"]} == {f"execute_tool {sc.OTHER_VALUE}"}
    assert b"SENTINEL" not in encode_bundle(bundle)


def test_sessions_newest_by_default_given_ones_in_order_at_most_two(tmp_path: Path) -> None:
    path = tmp_path / "s" / "traces.db"
    for name in ("first", "second", "third"):
        run_agent(path, f"SENTINEL-{name}")
    third, second, first = sessions_of(path)
    assert bundle_of(path)["scope"] == {"selection": "newest", "sessions": [third]}
    bundle = bundle_of(path, [first, third, first])
    assert bundle["scope"] == {"selection": "given", "sessions": [first, third]}
    assert [e["session"] for e in bundle["sessions"]] == [first, third]
    with pytest.raises(ValueError, match="at most 2 sessions per bundle"):
        bundle_of(path, [first, second, third])
    assert len(bundle_of(path, [first, second, third], limits=BundleLimits(max_sessions=3))["sessions"]) == 3


def test_limits_must_be_positive_integers() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_span_bytes"):
            BundleLimits(max_span_bytes=bad)  # type: ignore[arg-type]


# -- the file ----------------------------------------------------------------------------------------------------
def test_the_file_is_written_0600_atomically_and_replaces_a_wider_one(agent_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "bundle.json"
    out.parent.mkdir()
    out.write_text("old")
    out.chmod(0o644)
    bundle = bundle_of(agent_store)
    written = write_bundle(out, bundle)
    assert written == out.stat().st_size == len(encode_bundle(bundle))
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert json.loads(out.read_bytes()) == bundle
    assert sorted(p.name for p in out.parent.iterdir()) == ["bundle.json"]  # no temporary file left


def test_a_failed_write_leaves_nothing_behind(agent_store: Path, tmp_path: Path) -> None:
    bundle = bundle_of(agent_store)
    with pytest.raises(OSError):
        write_bundle(tmp_path / "missing" / "bundle.json", bundle)
    target = tmp_path / "target"
    target.mkdir()
    with pytest.raises(OSError):
        write_bundle(target, bundle)  # a directory is never replaced
    assert list(target.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["agent", "target"]


def test_the_demo_session_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from otel_agentdiag.demo import run_demo_agent

    path = tmp_path / "demo" / "traces.db"
    with agentdiag.configure(service_name="agentdiag-demo", store=path, set_global=False) as diag:
        result = run_demo_agent()
        diag.force_flush()
    hasher = load_store_hasher(path)
    assert hasher is not None  # configure() made hash.key beside the store
    with SpanStore(path, create=False) as store:
        bundle = build_bundle(store, None, hasher=hasher)
    out = tmp_path / "demo-bundle.json"
    size = write_bundle(out, bundle)
    (entry,) = bundle["sessions"]
    assert entry["receipt"]["status"] == "valid" and entry["omitted"] == 0 and entry["dropped"] == {}
    assert entry["availability"]["spans_included"] == entry["availability"]["spans_stored"] == len(entry["spans"])
    assert {s["trace_id"] for s in entry["spans"]} == {result.trace_id}
    data = out.read_bytes()
    assert b"demo-conversation-" not in data and b"demo-user@example.com" not in data
    assert 0 < size <= BundleLimits().max_bundle_bytes
    with capsys.disabled():
        print(f"\n[demo bundle: {len(entry['spans'])} spans, {size} bytes]")
    assert os.path.getsize(out) == size
