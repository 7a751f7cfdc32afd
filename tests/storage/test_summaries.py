"""Summary tables (migration 7): the writer's incremental figures equal a rebuild from the rows, whatever the mix of
writes, out-of-order batches, duplicates, retention, prune and clear; the backfill of a version-6 store; the runs
and conversations lists (filters, keyset pages) against a count made from the rows."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import T0, query

from otel_agentdiag.storage import LATEST_VERSION, RetentionLimits, SpanRow, SpanStore
from otel_agentdiag.storage.summaries import rebuild_summaries

SUMMARY_QUERIES = (
    "SELECT * FROM trace_summaries ORDER BY trace_id",
    "SELECT * FROM session_traces ORDER BY session, trace_id",
    "SELECT session, span_count, bytes, first_start_ns, last_activity_ns FROM sessions ORDER BY session",
    "SELECT span_count, total_bytes, session_count FROM store_stats",
    "SELECT COUNT(*) FROM summary_dirty",
)
KINDS = ("run", "iteration", "llm", "tool", "other")
COSTS = (0.0042, 0.1, 0.2, 1e-7, 3, 0, 0.0, -1.0, True, "0.1", 2e6, 1e6, float("inf"), float("nan"), None, None)
"""Leaf costs: sums of 0.1 and 0.2 in any order, a tiny one, an int, zero, and values that are no cost."""
RESOURCES = ({"service.name": "svc-a"}, {"service.name": "svc-b"}, {"host.name": "no-service"})


def snapshot(path: Path) -> list[list[tuple[Any, ...]]]:
    return [query(path, sql) for sql in SUMMARY_QUERIES]


def rebuilt(path: Path) -> list[list[tuple[Any, ...]]]:
    """The summaries a rebuild from the rows gives, on a copy (the store itself is left as it is)."""
    copy = path.with_name(path.name + ".copy")
    source = sqlite3.connect(path)
    target = sqlite3.connect(copy, isolation_level=None)
    source.backup(target)
    source.close()
    rebuild_summaries(target)
    target.close()
    try:
        return snapshot(copy)
    finally:
        copy.unlink()


def span(rng: random.Random, trace: int, index: int, *, session: str | None, parent: int | None, start: int) -> SpanRow:
    kind = "run" if parent is None and rng.random() < 0.7 else rng.choice(KINDS)
    attributes: dict[str, Any] = {"k": "v"}
    tokens = rng.choice([5, 0, -3, True, 2.5, "7", None, 120])
    if tokens is not None:
        attributes["gen_ai.usage.input_tokens"] = tokens
        attributes["gen_ai.usage.output_tokens"] = rng.choice([1, 40, False])
    if rng.random() < 0.4:
        attributes["gen_ai.agent.name"] = rng.choice(["planner", "coder", 3])
    if rng.random() < 0.3:
        attributes["agentdiag.stop_reason"] = rng.choice(["completed", "max_turns"])
    cost = rng.choice(COSTS)
    if cost is not None:
        attributes["agentdiag.cost.usd"] = cost  # counted on LLM leaves only, and only when it is a cost
        attributes["agentdiag.usage.cost.usd"] = 99.0  # a roll-up: never counted
    if rng.random() < 0.2:
        attributes["agentdiag.budget.exceeded"] = rng.choice([True, False, "true", 1])
    return SpanRow(
        trace_id=f"{trace:032x}",
        span_id=f"{trace:08x}{index:08x}",
        parent_span_id=None if parent is None else f"{trace:08x}{parent:08x}",
        name=f"span-{index}",
        kind=kind,
        span_kind="internal",
        start_ns=T0 + start,
        end_ns=None if rng.random() < 0.05 else T0 + start + rng.randrange(0, 500),
        status=rng.choice(["ok", "ok", "unset", "error"]),
        session=session,
        attributes=attributes,
        events=[],
        links=[],
        resource=rng.choice(RESOURCES),
        scope=None,
        observer="0123456789abcdef",
        sequence=index,
    )


def random_rows(rng: random.Random, n_traces: int) -> list[SpanRow]:
    rows: list[SpanRow] = []
    sessions: list[str | None] = [None, "sess-a", "sess-b", "sess-c", "imported:sess-x"][:4]
    for trace in range(1, n_traces + 1):
        size = rng.randrange(1, 9)
        base = rng.randrange(0, 10_000)
        for index in range(size):
            parent = None if index == 0 else rng.randrange(0, index)
            # Some traces have their root start late (ties too) or span two sessions.
            start = base + rng.choice([index, 0, size - index])
            session = rng.choice(sessions) if rng.random() < 0.1 else sessions[trace % len(sessions)]
            rows.append(span(rng, trace, index, session=session, parent=parent, start=start))
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_incremental_summaries_equal_a_rebuild_after_a_random_mix(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "traces.db"
    rows = random_rows(rng, 40)
    rng.shuffle(rows)  # children before their root, traces across batches
    limits = RetentionLimits(max_session_spans=rng.choice([None, 25, 60]))
    with SpanStore(path, retention=limits) as store:
        at = 0
        while at < len(rows):
            batch = rows[at : at + rng.randrange(1, 30)]
            at += len(batch)
            if rng.random() < 0.3:
                batch = batch + rng.sample(rows[:at], min(3, at))  # duplicates, in the batch and stored ones
            store.write_batch(batch)
            if rng.random() < 0.1:
                store.clear_session(rng.choice(["sess-a", "sess-b", "sess-c"]), scrub=False)
            assert snapshot(path) == rebuilt(path)
    with SpanStore(path, retention=RetentionLimits(max_session_spans=10)) as store:
        store.prune()
        assert snapshot(path) == rebuilt(path)
        store.write_batch(random_rows(random.Random(seed + 100), 5))
        assert snapshot(path) == rebuilt(path)
        store.clear_session("sess-b")
        assert snapshot(path) == rebuilt(path)
    assert query(path, "SELECT COUNT(*) FROM trace_summaries") == query(
        path, "SELECT COUNT(DISTINCT trace_id) FROM spans"
    )


def test_the_summaries_say_what_the_rows_say(tmp_path: Path) -> None:
    """A run written children first: its root arrives last and names the run; tokens come from LLM leaves."""
    rng = random.Random(1)
    path = tmp_path / "traces.db"
    root = span(rng, 7, 0, session="sess-a", parent=None, start=0)
    root = SpanRow(
        **{
            **_fields(root),
            "kind": "run",
            "status": "error",
            "attributes": {
                "gen_ai.agent.name": "planner",
                "agentdiag.stop_reason": "max_turns",
                "gen_ai.usage.input_tokens": 1000,
            },
        }
    )
    llm = SpanRow(
        **{
            **_fields(span(rng, 7, 1, session="sess-a", parent=0, start=5)),
            "kind": "llm",
            "status": "ok",
            "attributes": {"gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 4},
        }
    )
    tool = SpanRow(
        **{**_fields(span(rng, 7, 2, session="sess-a", parent=0, start=9)), "kind": "tool", "status": "error"}
    )
    with SpanStore(path) as store:
        store.write_batch([llm, tool])
        (early,) = store.list_traces()
        assert (early.name, early.span_count, early.error_count) == ("span-1", 2, 1)
        assert store.list_runs() == []  # no agent root yet
        store.write_batch([root])
        (run,) = store.list_runs()
        assert (run.trace_id, run.name, run.status, run.agent, run.stop_reason) == (
            root.trace_id,
            "span-0",
            "error",
            "planner",
            "max_turns",
        )
        assert (run.span_count, run.error_count, run.llm_calls, run.tool_calls) == (3, 2, 1, 1)
        assert (run.input_tokens, run.output_tokens, run.start_ns, run.end_ns) == (30, 4, root.start_ns, root.end_ns)
        assert run.service == root.resource.get("service.name")
        summary = store.session_summary("sess-a")
        assert summary is not None and summary.trace_ids == (root.trace_id,) and summary.span_count == 3
        assert query(path, "SELECT session_count FROM store_stats") == [(1,)]
        store.clear_session("sess-a")
        assert store.list_runs() == [] and store.list_traces() == []
        assert query(path, "SELECT session_count FROM store_stats") == [(0,)]


def _fields(row: SpanRow) -> dict[str, Any]:
    return {name: getattr(row, name) for name in SpanRow.__dataclass_fields__}


AS_V9 = (
    "DROP INDEX spans_session",
    "CREATE INDEX spans_session ON spans(session, start_ns)",
    "DROP TRIGGER spans_updated_receipt",
    "DROP TRIGGER spans_updated_summaries",
    "DROP INDEX spans_orphans",
    *(f"ALTER TABLE spans DROP COLUMN {name}" for name in ("plain", "orphan")),
    "DELETE FROM schema_migrations WHERE version IN (10, 13, 14)",
)
"""Undo migrations 14 (spans_session widened, spans_receipt dropped) and 13 (receipts from the rows; it dropped
what migration 10 made): the store it was before 10."""


def _as_v6(path: Path) -> None:
    """Turn a current store into the version-6 store it was before migration 7 (same tables and rows)."""
    for statement in (
        *AS_V9,
        "DROP TRIGGER spans_deleted_summaries",
        "DROP TABLE trace_summaries",
        "DROP TABLE session_traces",
        "DROP TABLE summary_dirty",
        "DROP INDEX sessions_activity",
        "ALTER TABLE sessions DROP COLUMN first_start_ns",
        "ALTER TABLE sessions DROP COLUMN last_activity_ns",
        "ALTER TABLE store_stats DROP COLUMN session_count",
        "ALTER TABLE store_stats DROP COLUMN deleted_since_scrub",
        "DELETE FROM schema_migrations WHERE version = 7",
        "DELETE FROM schema_migrations WHERE version = 12",  # its columns went with trace_summaries
    ):
        query(path, statement)


def test_a_version_6_store_is_backfilled_from_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    rows = random_rows(random.Random(5), 30)
    with SpanStore(path) as store:
        store.write_batch(rows)
        store.clear_session("sess-c")
        sessions = store.list_sessions()
        traces = store.list_traces()
    written = snapshot(path)
    _as_v6(path)
    assert query(path, "SELECT name FROM sqlite_master WHERE name = 'trace_summaries'") == []
    columns = ", ".join(str(r[1]) for r in query(path, "PRAGMA table_info(spans)"))  # the rows as version 6 had them
    spans = query(path, f"SELECT {columns} FROM spans ORDER BY rowid")
    with SpanStore(path, create=False) as store:
        assert query(path, "SELECT MAX(version) FROM schema_migrations") == [(LATEST_VERSION,)]
        assert snapshot(path) == written
        assert query(path, f"SELECT {columns} FROM spans ORDER BY rowid") == spans
        assert store.list_sessions() == sessions and store.list_traces() == traces


# -- runs and conversations ------------------------------------------------------------------------------------
def run_rows(n: int, rng: random.Random) -> list[SpanRow]:
    """``n`` runs of 1-3 spans; starts collide often (ties on the cursor's first part)."""
    rows: list[SpanRow] = []
    for trace in range(1, n + 1):
        start = rng.randrange(0, n // 3 + 1) * 1000
        session = f"conv-{trace % 7}"
        agent = ["planner", "coder", None][trace % 3]
        attributes: dict[str, Any] = {} if agent is None else {"gen_ai.agent.name": agent}
        kind = "run" if trace % 5 else "other"
        rows.append(
            SpanRow(
                trace_id=f"{trace:032x}",
                span_id=f"{trace:016x}",
                parent_span_id=None,
                name="invoke_agent",
                kind=kind,
                span_kind="internal",
                start_ns=T0 + start,
                end_ns=T0 + start + 50,
                status="error" if trace % 4 == 0 else "ok",
                session=session,
                attributes=attributes,
                events=[],
                links=[],
                resource=RESOURCES[trace % 2],
                scope=None,
                observer="0123456789abcdef",
                sequence=trace,
            )
        )
        for child in range(rng.randrange(0, 3)):
            rows.append(
                SpanRow(
                    trace_id=f"{trace:032x}",
                    span_id=f"{trace:08x}{child + 1:08x}",
                    parent_span_id=f"{trace:016x}",
                    name="chat",
                    kind="llm",
                    span_kind="client",
                    start_ns=T0 + start + 1,
                    end_ns=T0 + start + 9,
                    status="ok",
                    session=session,
                    attributes={"gen_ai.usage.input_tokens": 10 + child, "gen_ai.usage.output_tokens": 2},
                    events=[],
                    links=[],
                    resource=RESOURCES[trace % 2],
                    scope=None,
                    observer="0123456789abcdef",
                    sequence=10_000 + trace * 3 + child,
                )
            )
    return rows


def expected_runs(rows: list[SpanRow], **filters: Any) -> list[str]:
    roots = [r for r in rows if r.parent_span_id is None and r.kind == "run"]
    keep = []
    for r in roots:
        agent = r.attributes.get("gen_ai.agent.name", r.name)
        if filters.get("agent") is not None and agent != filters["agent"]:
            continue
        if filters.get("service") is not None and r.resource.get("service.name") != filters["service"]:
            continue
        if filters.get("status") is not None and r.status != filters["status"]:
            continue
        if filters.get("since_ns") is not None and r.start_ns < filters["since_ns"]:
            continue
        if filters.get("until_ns") is not None and r.start_ns >= filters["until_ns"]:
            continue
        keep.append(r)
    keep.sort(key=lambda r: (-r.start_ns, r.trace_id))
    return [r.trace_id for r in keep]


@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"agent": "planner"},
        {"agent": "invoke_agent"},
        {"service": "svc-b"},
        {"status": "error"},
        {"agent": "coder", "status": "ok", "service": "svc-a"},
        {"since_ns": T0 + 10_000, "until_ns": T0 + 30_000},
    ],
)
def test_list_runs_pages_through_every_run_once_newest_first(tmp_path: Path, filters: dict[str, Any]) -> None:
    rows = run_rows(120, random.Random(3))
    with SpanStore(tmp_path / "traces.db") as store:
        store.write_batch(rows)
        expected = expected_runs(rows, **filters)
        assert [r.trace_id for r in store.list_runs(limit=1000, **filters)] == expected
        for size in (1, 7, 50):
            seen: list[str] = []
            cursor = None
            while True:
                page = store.list_runs(limit=size, before=cursor, **filters)
                seen += [r.trace_id for r in page]
                if len(page) < size:
                    break
                cursor = page[-1].cursor
            assert seen == expected  # no duplicate, no skip, across ties of start times
        if expected:
            first = store.list_runs(limit=1, **filters)[0]
            root = next(r for r in rows if r.trace_id == first.trace_id and r.parent_span_id is None)
            children = [r for r in rows if r.trace_id == first.trace_id and r.kind == "llm"]
            assert first.llm_calls == len(children)
            assert first.input_tokens == sum(r.attributes["gen_ai.usage.input_tokens"] for r in children)
            assert first.duration_ns == (root.end_ns or 0) - root.start_ns


def test_list_conversations_pages_with_totals(tmp_path: Path) -> None:
    rows = run_rows(60, random.Random(4))
    with SpanStore(tmp_path / "traces.db") as store:
        store.write_batch(rows)
        everything = store.list_conversations(limit=100)
        assert [c.session for c in everything] == [s.session for s in store.list_sessions()]
        for conversation in everything:
            mine = [r for r in rows if r.session == conversation.session]
            roots = [r for r in mine if r.parent_span_id is None]
            assert conversation.span_count == len(mine)
            assert conversation.trace_count == len(roots)
            assert conversation.run_count == sum(r.kind == "run" for r in roots)
            assert conversation.failed_runs == sum(r.kind == "run" and r.status == "error" for r in roots)
            assert conversation.input_tokens == sum(
                r.attributes.get("gen_ai.usage.input_tokens", 0) for r in mine if r.kind == "llm"
            )
            assert conversation.last_activity_ns == max(r.end_ns or r.start_ns for r in mine)
        paged, cursor = [], None
        while page := store.list_conversations(limit=2, before=cursor):
            paged += page
            cursor = page[-1].cursor
        assert paged == everything
        newest = everything[0].last_activity_ns
        assert store.list_conversations(since_ns=newest) == [c for c in everything if c.last_activity_ns >= newest]


def test_list_sessions_limit_and_since_keep_the_order(tmp_path: Path) -> None:
    rows = run_rows(40, random.Random(6))
    with SpanStore(tmp_path / "traces.db") as store:
        store.write_batch([*rows, *run_rows(3, random.Random(7))[:0]])
        store.clear_session("conv-3")
        everything = store.list_sessions()
        assert everything[-1].session == "conv-3" and everything[-1].span_count == 0
        for limit in (0, 1, 3, 100):
            assert store.list_sessions(limit=limit) == everything[:limit]
        since = everything[2].last_activity_ns
        assert store.list_sessions(since_ns=since) == [
            s for s in everything if s.last_activity_ns is not None and s.last_activity_ns >= since
        ]


def test_a_scrub_is_needed_only_after_a_delete(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        assert store.needs_scrub()  # a new store: its history is not known
        assert store.scrub().complete and not store.needs_scrub()
        store.write_batch(random_rows(random.Random(2), 6))
        assert not store.needs_scrub()  # inserts delete nothing
        store.clear_session("sess-a", scrub=False)
        assert store.needs_scrub()
        assert store.scrub().complete and not store.needs_scrub()
    conn = sqlite3.connect(path, isolation_level=None)  # another program deletes a row (and puts it back)
    conn.execute("CREATE TEMP TABLE kept AS SELECT * FROM spans WHERE rowid = (SELECT MIN(rowid) FROM spans)")
    conn.execute("DELETE FROM spans WHERE rowid = (SELECT MIN(rowid) FROM spans)")
    conn.execute("INSERT INTO spans SELECT * FROM kept")
    conn.close()
    with SpanStore(path) as store:
        assert store.needs_scrub()
