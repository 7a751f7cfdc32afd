"""SQLiteSpanExporter with a real opentelemetry-sdk TracerProvider and real SQLite files."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter, span_to_row
from otel_agentdiag.pipeline import SessionSequencer
from otel_agentdiag.storage import Accounting, RetentionLimits, SpanStore


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AGENTDIAG_STORE", "AGENTDIAG_ENABLED", "AGENTDIAG_HASH_KEY", "OTEL_SERVICE_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def _provider() -> TracerProvider:
    return TracerProvider(resource=Resource.create({"service.name": "exporter-test"}), shutdown_on_exit=False)


@pytest.fixture
def store(tmp_path: Path):
    with SpanStore(tmp_path / "store" / "traces.db") as s:
        yield s


@pytest.fixture
def pipeline(store: SpanStore):
    """A TracerProvider exporting each ended span through SQLiteSpanExporter into ``store``."""
    exporter = SQLiteSpanExporter(store)
    provider = _provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def make_spans(n: int = 3) -> tuple[ReadableSpan, ...]:
    """``n`` real ended spans (a root and its children), collected by the SDK's in-memory exporter."""
    memory = InMemorySpanExporter()
    provider = _provider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("make-spans")
    with tracer.start_as_current_span("root", attributes={"agentdiag.kind": "run"}):
        for i in range(n - 1):
            with tracer.start_as_current_span(f"child-{i}"):
                pass
    spans = memory.get_finished_spans()
    provider.shutdown()
    assert len(spans) == n
    return spans


def trace_hex(span) -> str:
    return f"{span.get_span_context().trace_id:032x}"


def span_hex(span) -> str:
    return f"{span.get_span_context().span_id:016x}"


def test_real_spans_become_rows(pipeline, store: SpanStore) -> None:
    provider, exporter = pipeline
    tracer = provider.get_tracer("agent-tests", "1.2.3")
    with tracer.start_as_current_span(
        "invoke_agent planner",
        kind=SpanKind.SERVER,
        attributes={"agentdiag.kind": "run", "gen_ai.conversation.id": "conv-1", "tags": ("a", "b")},
    ) as root:
        with tracer.start_as_current_span("agent.iteration", attributes={"agentdiag.kind": "iteration"}) as it:
            with tracer.start_as_current_span(
                "chat model", kind=SpanKind.CLIENT, attributes={"agentdiag.kind": "llm"}
            ) as llm:
                llm.set_status(Status(StatusCode.OK))
            with tracer.start_as_current_span("execute_tool t", attributes={"agentdiag.kind": "tool"}) as tool:
                tool.add_event("exception", {"exception.type": "ValueError", "exception.escaped": True})
                tool.set_status(Status(StatusCode.ERROR))
        with tracer.start_as_current_span("odd", attributes={"agentdiag.kind": "bogus", "session.id": "sess-2"}) as odd:
            pass
        with tracer.start_as_current_span(
            "linked", links=[Link(it.get_span_context(), {"link.reason": "retry", "ns": (1, 2)})]
        ) as linked:
            pass
        with tracer.start_as_current_span("plain", attributes={"gen_ai.conversation.id": 42}) as plain:
            pass

    trace_id = trace_hex(root)
    assert exporter.exported == 7
    assert exporter.failed == 0
    rows = {s.span_id: s for s in store.get_trace(trace_id)}
    assert len(rows) == 7
    assert all(r.trace_id == trace_id and len(r.trace_id) == 32 for r in rows.values())

    r = rows[span_hex(root)]
    assert r.parent_span_id is None
    assert r.name == "invoke_agent planner"
    assert (r.kind, r.span_kind, r.status, r.session) == ("run", "server", "unset", "conv-1")
    assert r.attributes == {"agentdiag.kind": "run", "gen_ai.conversation.id": "conv-1", "tags": ["a", "b"]}
    assert r.scope == {"name": "agent-tests", "version": "1.2.3"}
    assert r.resource["service.name"] == "exporter-test"
    assert r.start_ns == root.start_time
    assert r.end_ns == root.end_time
    assert r.events == []
    assert r.links == []

    r = rows[span_hex(it)]
    assert (r.parent_span_id, r.kind, r.span_kind) == (span_hex(root), "iteration", "internal")
    r = rows[span_hex(llm)]
    assert (r.parent_span_id, r.kind, r.span_kind, r.status) == (span_hex(it), "llm", "client", "ok")
    r = rows[span_hex(tool)]
    assert (r.parent_span_id, r.kind, r.status) == (span_hex(it), "tool", "error")
    assert len(r.events) == 1
    event = r.events[0]
    assert event["name"] == "exception"
    assert event["attributes"] == {"exception.type": "ValueError", "exception.escaped": True}
    assert event["time_ns"] == tool.events[0].timestamp
    r = rows[span_hex(odd)]
    assert (r.kind, r.session) == ("other", "sess-2")
    r = rows[span_hex(linked)]
    assert r.kind == "other"
    assert r.links == [
        {"trace_id": trace_id, "span_id": span_hex(it), "attributes": {"link.reason": "retry", "ns": [1, 2]}}
    ]
    r = rows[span_hex(plain)]
    assert r.session is None  # not a string

    # The JSON columns hold canonical JSON.
    conn = sqlite3.connect(store.path)
    try:
        (events_text,) = conn.execute("SELECT events FROM spans WHERE span_id = ?", (span_hex(tool),)).fetchone()
    finally:
        conn.close()
    assert json.loads(events_text) == rows[span_hex(tool)].events
    assert " " not in events_text


def test_many_spans_share_one_resource_row(pipeline, store: SpanStore) -> None:
    provider, exporter = pipeline
    tracer = provider.get_tracer("dedup")
    for _ in range(5):
        with tracer.start_as_current_span("root"):
            for i in range(4):
                with tracer.start_as_current_span(f"child-{i}"):
                    pass

    assert exporter.exported == 25
    assert store.span_count() == 25
    assert len(store.list_traces()) == 5
    conn = sqlite3.connect(store.path)
    try:
        assert conn.execute("SELECT COUNT(*) FROM resources").fetchone() == (1,)
        assert conn.execute("SELECT COUNT(DISTINCT resource_id) FROM spans").fetchone() == (1,)
        (text,) = conn.execute("SELECT attributes FROM resources").fetchone()
    finally:
        conn.close()
    assert json.loads(text)["service.name"] == "exporter-test"


def test_exporter_from_path_opens_store_lazily(tmp_path: Path) -> None:
    path = tmp_path / "lazy" / "traces.db"
    exporter = SQLiteSpanExporter(path)
    assert not path.exists()
    assert not path.parent.exists()

    spans = make_spans(3)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert exporter.exported == 3
    exporter.shutdown()

    with SpanStore(path, create=False) as store:
        assert store.span_count() == 3


def test_export_fails_when_store_folder_cannot_exist(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a regular file, not a folder")
    exporter = SQLiteSpanExporter(blocker / "traces.db")

    spans = make_spans(3)
    assert exporter.export(spans) is SpanExportResult.FAILURE
    assert exporter.export(spans[:2]) is SpanExportResult.FAILURE
    assert exporter.failed == 5
    assert exporter.exported == 0
    assert blocker.read_text() == "a regular file, not a folder"
    assert any(r.levelno == logging.WARNING and "could not write 3 spans" in r.getMessage() for r in caplog.records)


def test_failing_exporter_does_not_raise_into_the_sdk(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    exporter = SQLiteSpanExporter(blocker / "traces.db")
    provider = _provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("root"):
        with tracer.start_as_current_span("child"):
            pass
    provider.shutdown()
    assert exporter.failed == 2
    assert exporter.exported == 0


def test_export_fails_while_database_is_locked(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    spans = make_spans(4)
    with SpanStore(path, busy_timeout=0.05) as store:
        exporter = SQLiteSpanExporter(store)
        locker = sqlite3.connect(path, isolation_level=None)
        try:
            locker.execute("BEGIN EXCLUSIVE")
            assert exporter.export(spans) is SpanExportResult.FAILURE
            assert exporter.failed == 4
            assert exporter.exported == 0
            locker.execute("ROLLBACK")
        finally:
            locker.close()
        assert store.span_count() == 0

        # Once the lock is gone, the same exporter and store work again.
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        assert exporter.exported == 4
        assert exporter.failed == 4
        assert store.span_count() == 4


def test_export_after_shutdown_fails_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    exporter = SQLiteSpanExporter(path)
    first = make_spans(2)
    assert exporter.export(first) is SpanExportResult.SUCCESS
    exporter.shutdown()

    later = make_spans(3)
    assert exporter.export(later) is SpanExportResult.FAILURE
    assert exporter.exported == 2
    assert exporter.failed == 3  # counted, not silently lost
    with SpanStore(path, create=False) as store:
        assert store.span_count() == 2


def test_shutdown_leaves_a_given_store_open(store: SpanStore) -> None:
    exporter = SQLiteSpanExporter(store)
    assert exporter.export(make_spans(2)) is SpanExportResult.SUCCESS
    exporter.shutdown()
    assert exporter.export(make_spans(2)) is SpanExportResult.FAILURE
    # The caller owns the store: it is still usable.
    assert store.span_count() == 2
    assert store.write_spans([]) == 0


def test_same_spans_exported_twice_are_stored_once(store: SpanStore) -> None:
    exporter = SQLiteSpanExporter(store)
    spans = make_spans(3)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert store.span_count() == 3
    assert exporter.exported == 6  # "written (or already present)"


# -- issue 4: sequence, accounting, retention, a store that goes away --------------------------------------
def _numbered_spans(n: int, conversation: str = "conv-1") -> tuple[tuple[ReadableSpan, ...], SessionSequencer]:
    """``n`` ended spans of one session, numbered by a real SessionSequencer."""
    memory = InMemorySpanExporter()
    provider = _provider()
    sequencer = SessionSequencer()
    provider.add_span_processor(sequencer)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("numbered")
    for i in range(n):
        with tracer.start_as_current_span(f"s-{i}", attributes={"gen_ai.conversation.id": conversation}):
            pass
    provider.shutdown()
    return memory.get_finished_spans(), sequencer


def test_rows_carry_observer_and_sequence(store: SpanStore) -> None:
    spans, sequencer = _numbered_spans(3)
    assert SQLiteSpanExporter(store).export(spans) is SpanExportResult.SUCCESS
    rows = store.session_spans("conv-1")
    assert [(r.observer, r.sequence) for r in rows] == [(sequencer.observer_id, i) for i in range(3)]
    (stats,) = store.session_stats()
    assert (stats.observer, stats.observed, stats.accepted, stats.stored) == (sequencer.observer_id, 3, 3, 3)


def test_malformed_observer_or_sequence_is_not_stored_as_such() -> None:
    (span,) = make_spans(1)
    for observer, sequence in (("not-hex", True), ("ABCDEF0123456789", -1), (7, "3")):
        odd = ReadableSpan(
            name="odd",
            context=span.context,
            attributes={"agentdiag.observer.id": observer, "agentdiag.sequence": sequence},
            start_time=span.start_time,
            end_time=span.end_time,
        )
        row = span_to_row(odd)
        assert (row.observer, row.sequence) == (None, None)


@pytest.mark.parametrize("kind", list(SpanKind))
@pytest.mark.parametrize("code", list(StatusCode))
def test_every_span_kind_and_status_code_is_named(kind: SpanKind, code: StatusCode) -> None:
    (span,) = make_spans(1)
    odd = ReadableSpan(
        name="odd", context=span.context, kind=kind, status=Status(code), start_time=1, end_time=2, attributes={}
    )
    row = span_to_row(odd)
    assert row.span_kind == kind.name.lower()
    assert row.status == {StatusCode.UNSET: "unset", StatusCode.OK: "ok", StatusCode.ERROR: "error"}[code]
    assert row.attributes == {}


def test_observer_ids_checked_once_are_still_checked_exactly() -> None:
    """Valid observer ids are remembered; anything else (or a str subclass) goes through the full check."""

    class Text(str):
        pass

    (span,) = make_spans(1)

    def observer_of(value: object) -> str | None:
        odd = ReadableSpan(
            name="odd", context=span.context, attributes={"agentdiag.observer.id": value}, start_time=1, end_time=2
        )
        return span_to_row(odd).observer

    assert observer_of("0123456789abcdef") == "0123456789abcdef"
    assert observer_of("0123456789abcdef") == "0123456789abcdef"
    assert observer_of(Text("fedcba9876543210")) == "fedcba9876543210"
    assert observer_of("0123456789abcde") is None
    assert observer_of("0123456789abcdef0") is None
    for i in range(200):  # more distinct ids than the memo holds
        assert observer_of(f"{i:016x}") == f"{i:016x}"
    assert observer_of("0123456789ABCDEF") is None


def test_spans_of_one_tracer_share_their_scope_row() -> None:
    memory = InMemorySpanExporter()
    provider = _provider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    for name, version in (("scope-a", "1"), ("scope-a", "1"), ("scope-b", None)):
        with provider.get_tracer(name, version).start_as_current_span("s"):
            pass
    provider.shutdown()
    spans = memory.get_finished_spans()
    a1, a2, b = (span_to_row(s) for s in spans)
    assert a1.scope == a2.scope == {"name": "scope-a", "version": "1"}
    assert b.scope == {"name": "scope-b", "version": spans[2].instrumentation_scope.version}


def test_export_with_accounting_writes_counts_in_the_same_transaction(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    spans, sequencer = _numbered_spans(2)
    accounting = Accounting(
        observer=sequencer.observer_id, dropped={"conv-1": {"queue_full": 3}}, rejected={None: {"redactor_error": 1}}
    )
    with SpanStore(path, busy_timeout=0.05) as store:
        exporter = SQLiteSpanExporter(store)
        locker = sqlite3.connect(path, isolation_level=None)
        try:
            locker.execute("BEGIN EXCLUSIVE")
            assert exporter.export_with_accounting(spans, accounting) is False
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        assert store.span_count() == 0 and store.session_stats() == []  # neither spans nor counts

        assert exporter.export_with_accounting(spans, accounting) is True
        rows = {r.session: r for r in store.session_stats()}
        assert (rows["conv-1"].observed, rows["conv-1"].stored, rows["conv-1"].dropped) == (5, 2, {"queue_full": 3})
        assert (rows[None].observed, rows[None].rejected) == (1, {"redactor_error": 1})
        assert exporter.last_result is not None and exporter.last_result.inserted == 2

        assert exporter.record_accounting(Accounting(observer=sequencer.observer_id, dropped={None: {"shutdown": 2}}))
        rows = {r.session: r for r in store.session_stats()}
        assert rows[None].dropped == {"shutdown": 2} and rows[None].observed == 3
        exporter.shutdown()
        assert exporter.record_accounting(Accounting(observer=sequencer.observer_id)) is False


def test_retention_applies_to_a_store_the_exporter_opens(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    exporter = SQLiteSpanExporter(path, retention=RetentionLimits(max_session_spans=2))
    spans, _ = _numbered_spans(5)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    with SpanStore(path, create=False) as store:
        assert [r.sequence for r in store.session_spans("conv-1")] == [3, 4]  # the oldest went first


def test_an_owned_store_that_was_deleted_is_opened_afresh(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "store" / "traces.db"
    exporter = SQLiteSpanExporter(path)
    assert exporter.export(make_spans(2)) is SpanExportResult.SUCCESS
    for name in list(path.parent.iterdir()):
        name.unlink()
    path.parent.rmdir()
    assert exporter.export(make_spans(3)) is SpanExportResult.SUCCESS
    exporter.shutdown()
    with SpanStore(path, create=False) as store:
        assert store.span_count() == 3  # in a file that exists, not the deleted one
    assert any("removed or replaced" in r.getMessage() for r in caplog.records)


def test_a_given_store_that_was_deleted_fails_instead_of_writing_into_it(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        exporter = SQLiteSpanExporter(store)
        path.unlink()
        assert exporter.export(make_spans(2)) is SpanExportResult.FAILURE
        assert exporter.failed == 2
    assert not path.exists()


def test_shutdown_does_not_wait_for_a_stuck_write(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    exporter = SQLiteSpanExporter(SpanStore(path, busy_timeout=60), owns_store=True)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    results: list[SpanExportResult] = []
    spans = make_spans(2)
    writer = threading.Thread(target=lambda: results.append(exporter.export(spans)))
    writer.start()
    try:
        # White box: the write is under way once it holds the exporter's lock (it then waits for SQLite's).
        deadline = time.monotonic() + 30
        while not exporter._lock.locked() and time.monotonic() < deadline:
            threading.Event().wait(0.005)
        assert exporter._lock.locked()
        exporter.shutdown(timeout_millis=50)  # returns while the write waits for the lock
        assert writer.is_alive()
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    writer.join(60)
    assert results == [SpanExportResult.SUCCESS]  # the write that was under way completed...
    assert exporter.export(make_spans(1)) is SpanExportResult.FAILURE  # ...and nothing after shutdown
    with SpanStore(path, create=False) as store:
        assert store.span_count() == 2


def test_a_store_opened_afresh_keeps_the_retention_it_was_given(tmp_path: Path) -> None:
    path = tmp_path / "store" / "traces.db"
    limits = RetentionLimits(max_session_spans=2)
    exporter = SQLiteSpanExporter(SpanStore(path, retention=limits), owns_store=True)  # as configure() builds it
    for name in list(path.parent.iterdir()):
        name.unlink()
    spans, _ = _numbered_spans(5)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    with SpanStore(path, create=False) as store:
        assert [r.sequence for r in store.session_spans("conv-1")] == [3, 4]
