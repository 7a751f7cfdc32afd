"""The receipt's SQL (migration 13): per (session, observer) figures and missing parents read from the index and the
flagged rows say what the decoded rows say, after a random mix of writes, duplicates, retention and clears, and
after rows written, changed or deleted behind the store's back."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import T0, query, row, span_id

from otel_agentdiag.storage import RetentionLimits, SpanRow, SpanStore, StoredSpan
from otel_agentdiag.storage.codec import SPAN_COLUMNS, decode_span
from otel_agentdiag.storage.receipt_reads import MissingParent, RowFigures, read_figures, read_missing

SESSIONS: tuple[str | None, ...] = (None, "sess-a", "sess-b", "imported:sess-x")
OBSERVERS: tuple[str | None, ...] = ("0123456789abcdef", "fedcba9876543210", None)
IMPORTED_OBSERVERS: tuple[str | None, ...] = ("1111222233334444", None)
"""An imported span may not name an observer the store recorded as observed."""
SAFETY = "agentdiag.redaction.public_safety_violation"


def _span(rng: random.Random, trace: int, index: int, parent: int | None, session: str | None) -> SpanRow:
    attributes: dict[str, Any] = {"k": "v"}
    if rng.random() < 0.1:
        attributes[SAFETY] = rng.choice([1, 3, 0, -2, True, "4"])
    sequence = rng.choice([index, index, index, index - 1, -1, None])
    return SpanRow(
        trace_id=f"{trace:032x}",
        span_id=f"{trace:08x}{index:08x}",
        parent_span_id=None if parent is None else f"{trace:08x}{parent:08x}",
        name="agentdiag.redaction_error" if rng.random() < 0.05 else f"span-{index}",
        kind="other",
        span_kind="internal",
        start_ns=T0 + rng.randrange(0, 1000),
        end_ns=T0 + 2000,
        status="ok",
        session=session,
        attributes=attributes,
        events=[],
        links=[],
        resource={"service.name": "receipt-reads"},
        scope=None,
        observer=rng.choice(IMPORTED_OBSERVERS if (session or "").startswith("imported:") else OBSERVERS),
        sequence=sequence,
    )


def _rows(rng: random.Random, traces: int) -> list[SpanRow]:
    rows = []
    for trace in range(1, traces + 1):
        home = rng.choice(SESSIONS)
        for index in range(rng.randrange(1, 8)):
            parent = None if index == 0 else rng.choice([rng.randrange(0, index), 40])  # 40: never written
            session = home if rng.random() < 0.85 else rng.choice(SESSIONS)
            rows.append(_span(rng, trace, index, parent, session))
    return rows


def _decoded(path: Path) -> list[StoredSpan]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(f"SELECT {SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id")
        return [decode_span(row) for row in rows]
    finally:
        conn.close()


def _positive(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def expected_figures(spans: list[StoredSpan]) -> dict[str, dict[str, RowFigures]]:
    """The figures from the decoded rows, as the receipt's rules define them."""
    grouped: dict[tuple[str, str], list[StoredSpan]] = defaultdict(list)
    for s in spans:
        grouped[(s.session or "", s.observer or "")].append(s)
    out: dict[str, dict[str, RowFigures]] = {}
    for (key, observer), group in grouped.items():
        numbers = [s.sequence for s in group if s.observer and isinstance(s.sequence, int) and s.sequence >= 0]
        out.setdefault(key, {})[observer] = RowFigures(
            rows=len(group),
            tombstones=sum(s.name == "agentdiag.redaction_error" for s in group),
            numbered=len(numbers),
            distinct=len(set(numbers)),
            low=min(numbers) if numbers else None,
            high=max(numbers) if numbers else None,
            safety=sum(_positive(s.attributes.get(SAFETY)) for s in group),
            malformed=sum(s.corrupt for s in group),
        )
    return out


def _order(s: StoredSpan) -> tuple[int, int, str]:
    return (s.sequence if s.sequence is not None else -1, s.start_ns, s.span_id)


def expected_missing(spans: list[StoredSpan]) -> dict[str, Counter[MissingParent]]:
    """Per session, the parents its rows name that are stored nowhere in their trace (only observed rows count
    for an observed one), by their first child."""
    ids = {(s.trace_id, s.span_id): s for s in spans}
    first: dict[tuple[str, str, str], StoredSpan] = {}
    for s in spans:
        if s.parent_span_id is None:
            continue
        parent = ids.get((s.trace_id, s.parent_span_id))
        if parent is not None and (s.imported or not parent.imported):
            continue
        at = (s.session or "", s.trace_id, s.parent_span_id)
        known = first.get(at)
        if known is None or _order(s) < _order(known):
            first[at] = s
    out: dict[str, Counter[MissingParent]] = defaultdict(Counter)
    for (key, _trace, _parent), child in first.items():
        below = 0
        if child.observer and child.sequence is not None and child.sequence > 0:
            below = len(
                {
                    s.sequence
                    for s in spans
                    if (s.session or "") == key
                    and s.observer == child.observer
                    and s.sequence is not None
                    and 0 <= s.sequence < child.sequence
                }
            )
        out[key][MissingParent(child.observer or "", child.sequence, below)] += 1
    return dict(out)


def check(path: Path) -> None:
    spans = _decoded(path)
    conn = sqlite3.connect(path)
    try:
        assert read_figures(conn) == expected_figures(spans)
        found = {key: Counter(parents) for key, parents in read_missing(conn).items()}
        assert found == expected_missing(spans)
        for key in {s.session or "" for s in spans}:
            session = key or None
            assert read_figures(conn, session) == {key: expected_figures(spans)[key]}
            assert {k: Counter(v) for k, v in read_missing(conn, session).items()} == {
                k: v for k, v in expected_missing(spans).items() if k == key
            }
    finally:
        conn.close()


@pytest.mark.parametrize("seed", range(4))
def test_the_receipt_sql_says_what_the_decoded_rows_say_after_a_random_mix(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "traces.db"
    rows = _rows(rng, 30)
    rng.shuffle(rows)  # children before their parents, traces across batches
    with SpanStore(path, retention=RetentionLimits(max_session_spans=rng.choice([None, 20]))) as store:
        observed = [r for r in rows if not (r.session or "").startswith("imported:")]
        imported = [r for r in rows if (r.session or "").startswith("imported:")]
        at = 0
        while at < len(observed):
            batch = observed[at : at + rng.randrange(1, 12)]
            at += len(batch)
            if rng.random() < 0.3:
                batch = batch + rng.sample(observed[:at], min(2, at))  # duplicates
            store.write_batch(batch)
            if rng.random() < 0.1:
                store.clear_session(rng.choice(["sess-a", "sess-b"]), scrub=False)
            check(path)
        # Imported spans keep their own keys (their observers are re-keyed by ``ingest``, not here).
        for row in imported:  # filed under imported:<its session>
            store.write_batch([replace(row, session=(row.session or "")[len("imported:") :])], imported=True)
        check(path)


def test_rows_written_changed_and_deleted_behind_the_stores_back(tmp_path: Path) -> None:
    path = tmp_path / "tampered.store"  # not *.db: its ledger cannot hold (the conftest checks those)
    rows = _rows(random.Random(7), 12)
    with SpanStore(path) as store:
        store.write_batch(rows)
    check(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        # A damaged row, a renamed one, a parent removed, a row copied in without the writer's figures.
        conn.execute("UPDATE spans SET attributes = '{broken' WHERE rowid = (SELECT MIN(rowid) FROM spans)")
        conn.execute("UPDATE spans SET name = 'agentdiag.redaction_error' WHERE rowid = (SELECT MAX(rowid) FROM spans)")
        conn.execute("DELETE FROM spans WHERE parent_span_id IS NULL AND rowid % 2 = 0")
        conn.execute(
            "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, span_kind, start_ns, status, session,"
            " attributes, events, links, observer, sequence) SELECT trace_id, 'ffff' || substr(span_id, 5),"
            " parent_span_id, name, kind, span_kind, start_ns, status, session,"
            f" '{{\"{SAFETY}\": 2}}', events, '{{}}', observer, sequence FROM spans WHERE rowid % 3 = 0"
        )
        conn.execute("UPDATE spans SET parent_span_id = '00000000000000aa' WHERE rowid = 5")
    finally:
        conn.close()
    check(path)
    with SpanStore(path) as store:  # the next transaction of ours settles the flags of the traces touched
        store.write_batch([])
        store.prune()
    check(path)


def test_a_session_of_several_observers_is_figured_per_observer_from_the_index(tmp_path: Path) -> None:
    """One GROUP BY per session reads the index; a session two pipelines numbered (a client and its MCP server in
    another process, under one conversation) is grouped again per observer, its figures as its rows say; one whose
    second observer has a row that does not count plainly is read from its rows."""
    path = tmp_path / "observers.db"
    first, second = "0123456789abcdef", "fedcba9876543210"
    with SpanStore(path) as store:
        store.write_batch(
            [row(i, session="two", observer=first, sequence=i) for i in range(3)]
            + [row(10 + i, session="two", observer=second, sequence=i, trace_id="b" * 32) for i in range(2)]
            + [row(20, session="mixed", observer=first, sequence=0, trace_id="c" * 32)]
            + [row(21, session="mixed", observer=second, trace_id="d" * 32, name="agentdiag.redaction_error")]
            + [row(30, session="one", observer=first, sequence=5, trace_id="e" * 32)]
        )
    conn = sqlite3.connect(path)
    try:
        figures = read_figures(conn)
    finally:
        conn.close()
    assert figures["two"] == {first: RowFigures(3, 0, 3, 3, 0, 2), second: RowFigures(2, 0, 2, 2, 0, 1)}
    assert figures["mixed"] == {first: RowFigures(1, 0, 1, 1, 0, 0), second: RowFigures(1, 1, 1, 1, 21, 21)}
    assert figures["one"] == {first: RowFigures(1, 0, 1, 1, 5, 5)}
    check(path)


# -- the writer's orphan flags: looked at only where a flagged row may wait ------------------------------------
def _child(i: int, trace: str, parent: int | None) -> SpanRow:
    return replace(row(i, trace_id=trace), parent_span_id=None if parent is None else span_id(parent))


def assert_no_parent_missing(path: Path) -> None:
    """The receipt finds every parent (whatever the flags say), and its SQL says what the decoded rows say."""
    conn = sqlite3.connect(path)
    try:
        assert read_missing(conn) == {}
    finally:
        conn.close()
    check(path)


def _flags(path: Path) -> dict[str, int | None]:
    return {span: flag for span, flag in query(path, "SELECT span_id, orphan FROM spans")}


def test_batches_of_root_spans_look_for_no_waiting_children(tmp_path: Path) -> None:
    path = tmp_path / "roots.db"
    trace = "a" * 32
    with SpanStore(path) as store:
        store.write_batch([_child(1, trace, 0)])  # a child whose parent ends later: flagged, remembered
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        store.write_batch([_child(i, f"{i:032x}", None) for i in range(10, 20)])  # ten one-span traces
        roots = [s for s in statements if "orphan = 0" in s]
        statements.clear()
        store.write_batch([_child(2, trace, 1), _child(3, f"{3:032x}", None)])  # a grandchild, one more root
        grandchild = [s for s in statements if "orphan = 0" in s]
        statements.clear()
        store.write_batch([_child(0, trace, None)])  # the parent the child waits for
        parent = [s for s in statements if "orphan = 0" in s]
        store._conn.set_trace_callback(None)
    assert roots == []  # one look per (session, trace) before
    assert len(grandchild) == 1 and "json_each" in grandchild[0]  # its parent, stored already, looked up by key
    assert len(parent) == 1 and "spans_orphans" in parent[0]  # the one waiting child, by the parent's id
    assert _flags(path) == {span_id(i): 0 for i in (0, 1, 2, 3, *range(10, 20))}
    check(path)


def test_a_child_waiting_for_a_parent_already_awaited_is_not_looked_up_again(tmp_path: Path) -> None:
    """The iterations of a long run wait for the run's span: the first batch looks it up by key (not stored), the
    later ones know it is awaited and look for nothing; the run's span, once written, clears them all."""
    path = tmp_path / "awaited.db"
    trace = "e" * 32
    with SpanStore(path) as store:
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        store.write_batch([_child(2, trace, 1)])
        first = [s for s in statements if "orphan = 0" in s]
        statements.clear()
        store.write_batch([_child(3, trace, 1), _child(4, trace, 1)])
        later = [s for s in statements if "orphan = 0" in s]
        statements.clear()
        store._conn.set_trace_callback(None)
        assert _flags(path) == {span_id(2): 1, span_id(3): 1, span_id(4): 1}
        store.write_batch([_child(1, trace, None)])
    assert len(first) == 1 and "json_each" in first[0]
    assert later == []
    assert _flags(path) == {span_id(i): 0 for i in (1, 2, 3, 4)}
    check(path)


def test_a_parent_another_connection_wrote_while_awaited_leaves_flags_the_receipt_sees_through(
    tmp_path: Path,
) -> None:
    path = tmp_path / "awaited-elsewhere.db"
    trace = "9" * 32
    with SpanStore(path) as store:
        store.write_batch([_child(2, trace, 1)])  # awaited from here on
        with SpanStore(path) as other:
            other.write_batch([_child(1, trace, None)])
        store.write_batch([_child(3, trace, 1)])  # not looked up: "maybe missing"
    assert _flags(path)[span_id(3)] == 1
    assert_no_parent_missing(path)


def test_a_late_child_of_a_parent_written_meanwhile_is_looked_up_and_cleared(tmp_path: Path) -> None:
    """A parent written by this connection is awaited no more: a child that comes after it is looked up by key."""
    path = tmp_path / "late.db"
    trace = "f" * 32
    with SpanStore(path) as store:
        store.write_batch([_child(2, trace, 1)])
        store.write_batch([_child(1, trace, None)])
        store.write_batch([_child(3, trace, 1)])  # late: its parent is stored
    assert _flags(path) == {span_id(i): 0 for i in (1, 2, 3)}
    assert_no_parent_missing(path)


def test_a_parent_written_later_clears_its_childrens_flags(tmp_path: Path) -> None:
    path = tmp_path / "later.db"
    trace = "b" * 32
    with SpanStore(path) as store:
        store.write_batch([_child(2, trace, 1), _child(3, trace, 1)])  # children end first
        store.write_batch([_child(4, f"{4:032x}", None)])  # another trace between
        assert _flags(path)[span_id(2)] == 1
        store.write_batch([_child(1, trace, None)])
    assert _flags(path) == {span_id(1): 0, span_id(2): 0, span_id(3): 0, span_id(4): 0}
    check(path)


def test_a_child_another_connection_flagged_keeps_its_flag_and_the_receipt_still_finds_its_parent(
    tmp_path: Path,
) -> None:
    path = tmp_path / "two.db"
    trace = "c" * 32
    with SpanStore(path) as first:
        first.write_batch([_child(2, trace, 1)])
    with SpanStore(path) as second:
        second.write_batch([_child(1, trace, None)])
    assert _flags(path)[span_id(2)] == 1  # "maybe missing": a reader checks it against the key
    assert_no_parent_missing(path)


def test_the_remembered_pairs_are_bounded_and_a_forgotten_one_only_errs_towards_maybe_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_agentdiag.storage import writer

    monkeypatch.setattr(writer, "_MAX_AWAITED", 3)
    path = tmp_path / "bounded.db"
    traces = [f"{t:032x}" for t in range(1, 6)]
    with SpanStore(path) as store:
        for t, trace in enumerate(traces):
            store.write_batch([_child(100 + t, trace, 200 + t)])  # five traces wait for their parent
        store.write_batch([_child(200 + t, trace, None) for t, trace in enumerate(traces)])
    flags = _flags(path)
    assert [flags[span_id(100 + t)] for t in range(5)] == [1, 1, 0, 0, 0]  # the two oldest were forgotten
    assert_no_parent_missing(path)


def test_the_work_of_a_batch_does_not_grow_with_the_children_waiting_for_a_long_runs_span(tmp_path: Path) -> None:
    # A long agent run: every iteration waits for the run's span, which ends (and is written) last. Counted in
    # SQLite's virtual-machine steps (deterministic, unlike time): the last batch costs what an early one costs.
    trace, run = "d" * 32, 1
    rows: list[SpanRow] = []
    for unit in range(2_000):
        iteration = 10 + 3 * unit
        rows += [_child(iteration + 1, trace, iteration), _child(iteration + 2, trace, iteration)]
        rows.append(_child(iteration, trace, run))
    batches = [rows[at : at + 300] for at in range(0, len(rows), 300)]
    steps: list[int] = []
    with SpanStore(tmp_path / "long.db", retention=RetentionLimits(max_session_spans=None)) as store:
        for batch in batches:
            counted = [0]

            def count(counted: list[int] = counted) -> int:
                counted[0] += 1
                return 0

            store._conn.set_progress_handler(count, 100)
            store.write_batch(batch)
            store._conn.set_progress_handler(None, 100)
            steps.append(counted[0])
        store.write_batch([_child(run, trace, None)])
    assert steps[-1] <= 1.3 * steps[1], steps
    print(steps)  # 2,000 iterations wait by the last batch
    assert all(flag == 0 for flag in _flags(tmp_path / "long.db").values())


def test_the_parents_remembered_in_one_trace_count_against_the_same_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_agentdiag.storage import writer

    monkeypatch.setattr(writer, "_MAX_AWAITED", 2)
    path = tmp_path / "awaited.db"
    trace = "e" * 32
    with SpanStore(path) as store:
        store.write_batch([_child(10 + k, trace, 20 + k) for k in range(3)])  # three children, three parents
        store.write_batch([_child(20 + k, trace, None) for k in range(3)])
    flags = _flags(path)
    assert [flags[span_id(10 + k)] for k in range(3)] == [1, 0, 0]  # the oldest parent was forgotten
    assert_no_parent_missing(path)
