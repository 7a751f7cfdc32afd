"""SpanStore and its migrations, against real SQLite files in tmp_path."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from dataclasses import replace
from pathlib import Path

import pytest

from otel_agentdiag.storage import LATEST_VERSION, SpanRow, SpanStore, StoreError
from otel_agentdiag.storage.migrations import MIGRATIONS

LEDGER_CHECK = "no-sizes"
"""Some tests edit JSON columns by hand (sizes then differ from the text); the counts must still balance."""

SPAN_INDEXES = {"spans_session", "spans_start"}


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AGENTDIAG_STORE", "AGENTDIAG_ENABLED", "AGENTDIAG_HASH_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


T0 = (time.time_ns() // 10**9 - 3600) * 10**9
"""Row times are offsets from T0 (an hour ago): the default retention prunes spans older than 30 days."""


def make_row(
    trace_id: str = "a" * 32,
    span_id: str = "0" * 15 + "1",
    *,
    parent_span_id: str | None = None,
    name: str = "span",
    kind: str = "other",
    start_ns: int = 1_000,
    end_ns: int | None = 2_000,
    status: str = "unset",
    session: str | None = None,
    attributes: dict | None = None,
    resource: dict | None = None,
) -> SpanRow:
    return SpanRow(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_span_id,
        name=name,
        kind=kind,
        span_kind="internal",
        start_ns=T0 + start_ns,
        end_ns=None if end_ns is None else T0 + end_ns,
        status=status,
        session=session,
        attributes={"k": "v"} if attributes is None else attributes,
        events=[{"name": "ev", "time_ns": T0 + start_ns, "attributes": {"n": 1}}],
        links=[],
        resource={"service.name": "store-test"} if resource is None else resource,
        scope={"name": "tests", "version": "1"},
    )


def span_id(i: int) -> str:
    return f"{i:016x}"


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def query(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    conn = raw(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# -- migrations ---------------------------------------------------------------------------------------------


def test_new_store_is_migrated_to_latest_version(tmp_path: Path) -> None:
    path = tmp_path / "new" / "traces.db"
    SpanStore(path).close()

    versions = [r[0] for r in query(path, "SELECT version FROM schema_migrations ORDER BY version")]
    # Every declared migration, in order (9 is declared while 8 lives on another branch: see migrations.py).
    assert versions == [m.version for m in MIGRATIONS]
    assert versions[0] == 1 and versions[-1] == LATEST_VERSION
    tables = {r[0] for r in query(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"schema_migrations", "spans", "resources"} <= tables
    indexes = {r[0] for r in query(path, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'spans'")}
    assert indexes >= SPAN_INDEXES
    assert query(path, "PRAGMA journal_mode") == [("wal",)]


def test_reopening_existing_store_does_not_migrate_again_and_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    rows = [make_row(span_id=span_id(i), start_ns=i) for i in range(1, 4)]
    with SpanStore(path) as store:
        assert store.write_spans(rows) == 3

    with SpanStore(path) as store:
        assert store.span_count() == 3
        assert [s.span_id for s in store.get_trace("a" * 32)] == [span_id(i) for i in range(1, 4)]
    with SpanStore(path, create=False) as store:
        assert store.span_count() == 3

    assert query(path, "SELECT COUNT(*), MAX(version) FROM schema_migrations") == [(len(MIGRATIONS), LATEST_VERSION)]


def test_foreign_sqlite_database_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = raw(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT)")
    conn.execute("INSERT INTO customers (email) VALUES ('someone@example.com')")
    conn.close()
    os.chmod(path, 0o600)

    with pytest.raises(StoreError, match="not an otel-agentdiag store"):
        SpanStore(path)
    with pytest.raises(StoreError, match="not an otel-agentdiag store"):
        SpanStore(path, create=False)

    # Nothing of ours was added to it.
    tables = {r[0] for r in query(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"customers"}
    assert query(path, "SELECT email FROM customers") == [("someone@example.com",)]


def _foreign_db(path: Path) -> None:
    conn = raw(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT)")
    conn.close()


def test_rejecting_foreign_database_leaves_its_journal_mode_unchanged(tmp_path: Path) -> None:
    """A file that is not a store must not be altered (WAL mode is persistent, written into its header)."""
    path = tmp_path / "app.db"
    _foreign_db(path)
    os.chmod(path, 0o600)
    assert query(path, "PRAGMA journal_mode") == [("delete",)]

    with pytest.raises(StoreError):
        SpanStore(path, create=False)

    assert query(path, "PRAGMA journal_mode") == [("delete",)]


def test_rejecting_foreign_file_leaves_its_mode_unchanged(tmp_path: Path) -> None:
    """Tightening a loose mode is for our store; a foreign file that is rejected keeps its permissions."""
    path = tmp_path / "app.db"
    _foreign_db(path)
    os.chmod(path, 0o644)

    with pytest.raises(StoreError):
        SpanStore(path, create=False)

    assert mode_of(path) == 0o644


def test_schema_migrations_table_of_another_tool_raises_store_error(tmp_path: Path) -> None:
    """Rails (among others) keeps a ``schema_migrations`` table with text versions in SQLite databases."""
    path = tmp_path / "development.sqlite3"
    conn = raw(path)
    conn.execute('CREATE TABLE "schema_migrations" ("version" varchar NOT NULL PRIMARY KEY)')
    conn.execute("INSERT INTO schema_migrations (version) VALUES ('20240101000000')")
    conn.execute('CREATE TABLE "users" ("id" integer PRIMARY KEY, "email" varchar)')
    conn.close()
    os.chmod(path, 0o600)

    with pytest.raises(StoreError):
        SpanStore(path, create=False)


def test_garbage_file_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    content = b"this is not an SQLite database\x00\xff" * 128
    path.write_bytes(content)
    os.chmod(path, 0o600)

    with pytest.raises(StoreError, match="not a usable otel-agentdiag store"):
        SpanStore(path)
    with pytest.raises(StoreError):
        SpanStore(path, create=False)
    assert path.read_bytes() == content


def test_store_with_newer_schema_version_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_spans([make_row()])
    conn = raw(path)
    conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 'x')")
    conn.close()

    with pytest.raises(StoreError, match="newer") as info:
        SpanStore(path)
    assert "99" in str(info.value)
    with pytest.raises(StoreError, match="newer"):
        SpanStore(path, create=False)
    # The failed open rolled back: the future version and the data are still there.
    assert query(path, "SELECT version FROM schema_migrations ORDER BY version") == [
        *((m.version,) for m in MIGRATIONS),
        (99,),
    ]
    assert query(path, "SELECT COUNT(*) FROM spans") == [(1,)]


def test_create_false_on_missing_file_raises_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "traces.db"
    with pytest.raises(StoreError, match="no trace store"):
        SpanStore(path, create=False)
    assert not path.exists()
    assert not path.parent.exists()
    assert list(tmp_path.iterdir()) == []


# -- file modes ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("umask_022")
def test_store_files_are_private(tmp_path: Path) -> None:
    folder = tmp_path / "private"
    path = folder / "traces.db"
    with SpanStore(path) as store:
        store.write_spans([make_row(span_id=span_id(i)) for i in range(1, 6)])
        wal = Path(f"{path}-wal")
        shm = Path(f"{path}-shm")
        assert wal.is_file()
        assert shm.is_file()
        assert mode_of(folder) == 0o700
        assert mode_of(path) == 0o600
        assert mode_of(wal) == 0o600
        assert mode_of(shm) == 0o600


@pytest.mark.usefixtures("umask_022")
def test_existing_store_with_loose_mode_is_tightened(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "traces.db"
    SpanStore(path).close()
    os.chmod(path, 0o644)

    with SpanStore(path, create=False):
        pass

    assert mode_of(path) == 0o600
    assert any("readable by others" in r.getMessage() for r in caplog.records)


# -- writing ------------------------------------------------------------------------------------------------


def test_successful_batch_writes_every_row(tmp_path: Path) -> None:
    with SpanStore(tmp_path / "traces.db") as store:
        rows = [make_row(span_id=span_id(i), start_ns=i) for i in range(1, 26)]
        assert store.write_spans(rows) == 25
        assert store.span_count() == 25
        assert store.write_spans([]) == 0
    # One resource for all 25 rows.
    assert query(tmp_path / "traces.db", "SELECT COUNT(*) FROM resources") == [(1,)]


def test_batch_with_unencodable_row_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_spans([make_row(span_id=span_id(1))])
        other_resource = {"service.name": "another-service"}
        batch = [
            make_row(span_id=span_id(2), resource=other_resource),
            make_row(span_id=span_id(3), resource=other_resource),
            make_row(span_id=span_id(4), attributes={"bad": object()}),
        ]
        with pytest.raises(TypeError):
            store.write_spans(batch)

        assert store.span_count() == 1
        assert query(path, "SELECT COUNT(*) FROM resources") == [(1,)]
        # The store is still usable, and the rolled-back resource is written again when needed.
        assert store.write_spans(batch[:2]) == 2
        assert store.span_count() == 3
        spans = {s.span_id: s for s in store.get_trace("a" * 32)}
        assert spans[span_id(2)].resource == other_resource


def test_batch_failing_in_the_database_midway_writes_nothing(tmp_path: Path) -> None:
    with SpanStore(tmp_path / "traces.db") as store:
        store.write_spans([make_row(span_id=span_id(1))])
        good = [make_row(span_id=span_id(i)) for i in range(2, 6)]
        bad = replace(make_row(span_id=span_id(6)), name=None)  # NOT NULL constraint, after 4 inserts
        with pytest.raises(sqlite3.IntegrityError):
            store.write_spans([*good, bad])
        assert store.span_count() == 1
        assert store.write_spans(good) == 4
        assert store.span_count() == 5


def test_duplicate_span_is_not_written_twice(tmp_path: Path) -> None:
    with SpanStore(tmp_path / "traces.db") as store:
        rows = [make_row(span_id=span_id(i), name=f"first-{i}") for i in range(1, 4)]
        assert store.write_spans(rows) == 3
        assert store.write_spans(rows) == 0
        renamed = replace(rows[0], name="second")
        assert store.write_spans([renamed, make_row(span_id=span_id(4))]) == 1
        assert store.span_count() == 4
        names = {s.span_id: s.name for s in store.get_trace("a" * 32)}
        assert names[span_id(1)] == "first-1"  # the span already stored is kept
        # Same span id in another trace is a different span.
        assert store.write_spans([make_row(trace_id="b" * 32, span_id=span_id(1))]) == 1
        assert store.span_count() == 5


def test_non_finite_floats_are_stored_as_strings(tmp_path: Path) -> None:
    with SpanStore(tmp_path / "traces.db") as store:
        store.write_spans([make_row(attributes={"x": float("inf"), "y": [1.5, float("nan")]})])
        (span,) = store.get_trace("a" * 32)
    assert span.corrupt is False
    assert span.attributes == {"x": "inf", "y": [1.5, "nan"]}


# -- reading ------------------------------------------------------------------------------------------------


def _three_traces(store: SpanStore) -> list[str]:
    """Traces started at t=100, 300, 200; each a root with two children. Returns ids in start order."""
    ids = ["1" * 32, "3" * 32, "2" * 32]
    starts = [100, 300, 200]
    rows = []
    for n, (tid, start) in enumerate(zip(ids, starts, strict=True)):
        root = span_id(10 * n + 1)
        rows.append(
            make_row(tid, root, name=f"root-{start}", kind="run", start_ns=start, end_ns=start + 50, session=f"s{n}")
        )
        rows.append(make_row(tid, span_id(10 * n + 2), parent_span_id=root, start_ns=start + 1, status="error"))
        rows.append(make_row(tid, span_id(10 * n + 3), parent_span_id=root, start_ns=start + 2, status="ok"))
    store.write_spans(rows)
    return ids


def test_list_traces_newest_first(tmp_path: Path) -> None:
    with SpanStore(tmp_path / "traces.db") as store:
        _three_traces(store)
        summaries = store.list_traces()
        assert [s.trace_id for s in summaries] == ["3" * 32, "2" * 32, "1" * 32]
        newest = summaries[0]
        assert newest.name == "root-300"
        assert newest.start_ns == T0 + 300
        assert newest.duration_ns == 50
        assert newest.span_count == 3
        assert newest.error_count == 1
        assert newest.status == "unset"
        assert newest.session == "s1"
        assert [s.trace_id for s in store.list_traces(limit=2)] == ["3" * 32, "2" * 32]


def _random_store(store: SpanStore, seed: int) -> None:
    """Traces that overlap in time, share start times (ties), span sessions and lack some ends."""
    import random

    rng = random.Random(seed)
    rows = []
    for t in range(40):
        trace_id = f"{rng.randrange(16**32):032x}" if t % 7 else f"{t:032x}"
        root_start = rng.choice([100, 200, 300]) if t % 5 == 0 else rng.randrange(0, 2_000)
        root = span_id(1000 * t)
        session = rng.choice(["s-a", "s-b", "s-c", None])
        end = root_start + rng.randrange(0, 3_000)
        rows.append(make_row(trace_id, root, start_ns=root_start, end_ns=end, session=session, kind="run"))
        for c in range(rng.randrange(0, 6)):
            start = root_start + rng.randrange(0, 400)
            rows.append(
                make_row(
                    trace_id,
                    span_id(1000 * t + c + 1),
                    parent_span_id=root,
                    start_ns=start,
                    end_ns=None if rng.random() < 0.2 else start + rng.randrange(0, 4_000),
                    status=rng.choice(["ok", "error", "unset"]),
                    session=rng.choice([session, "s-d"]),
                )
            )
    store.write_spans(rows)


@pytest.mark.parametrize("seed", range(5))
def test_list_traces_with_a_limit_walks_the_index_to_the_same_answer(tmp_path: Path, seed: int) -> None:
    with SpanStore(tmp_path / "traces.db") as store:
        _random_store(store, seed)
        everything = store.list_traces()
        assert len(everything) == 40
        for limit in (1, 2, 3, 7, 39, 40, 41, 100):
            assert store.list_traces(limit=limit) == everything[:limit]
        assert store.list_traces(limit=0) == []


def test_list_traces_with_a_limit_keeps_ties_at_the_boundary(tmp_path: Path) -> None:
    """Traces tied on the last listed start are all considered; the smallest id wins, whatever the write order."""
    with SpanStore(tmp_path / "traces.db") as store:
        store.write_spans([make_row("1" * 32, span_id(1), start_ns=100)])
        store.write_spans([make_row("2" * 32, span_id(2), start_ns=100)])
        store.write_spans([make_row("3" * 32, span_id(3), start_ns=200)])
        assert [t.trace_id for t in store.list_traces(limit=2)] == ["3" * 32, "1" * 32]
        assert [t.trace_id for t in store.list_traces(limit=2)] == [t.trace_id for t in store.list_traces()][:2]


def test_session_summary_is_the_entry_list_sessions_has(tmp_path: Path) -> None:
    with SpanStore(tmp_path / "traces.db") as store:
        _random_store(store, 11)
        store.clear_session("s-c")
        store.write_spans([make_row("e" * 32, span_id(1), session="", start_ns=5)])  # an empty-string session
        listed = {s.session: s for s in store.list_sessions()}
        assert set(listed) >= {"s-a", "s-b", "s-c", "s-d", None}
        for session in ("s-a", "s-b", "s-c", "s-d", None, "unknown"):
            assert store.session_summary(session) == listed.get(session)
        assert store.session_summary("") == listed[None]


def test_latest_session_is_the_first_named_session_listed(tmp_path: Path) -> None:
    def first_named(store: SpanStore) -> str | None:
        named = [s.session for s in store.list_sessions() if s.session is not None]
        return named[0] if named else None

    with SpanStore(tmp_path / "traces.db") as store:
        assert store.latest_session() is None
        store.write_spans([make_row("f" * 32, span_id(1), start_ns=10, end_ns=99_000)])  # no session
        assert store.latest_session() is None
        for seed in range(4):
            _random_store(store, seed)
            assert store.latest_session() == first_named(store)
        # A long span that ended last, although it started first.
        store.write_spans([make_row("d" * 32, span_id(7), session="s-long", start_ns=-5_000, end_ns=50_000)])
        assert store.latest_session() == first_named(store) == "s-long"
        # Ties on the newest moment (an end equal to another's start): the smallest digest.
        store.write_spans(
            [
                make_row("d" * 32, span_id(8), session="s-tie-b", start_ns=60_000, end_ns=None),
                make_row("d" * 32, span_id(9), session="s-tie-a", start_ns=100, end_ns=60_000),
            ]
        )
        assert store.latest_session() == first_named(store) == "s-tie-a"
        # Only sessions without rows left (cleared): listed by digest.
        for session in {s.session for s in store.list_sessions() if s.session}:
            store.clear_session(session)
        assert store.latest_session() == first_named(store) == "s-a"


def test_list_traces_on_empty_store(tmp_path: Path) -> None:
    with SpanStore(tmp_path / "traces.db") as store:
        assert store.list_traces() == []
        assert store.span_count() == 0


def test_get_trace_orders_spans_by_start_time(tmp_path: Path) -> None:
    tid = "c" * 32
    with SpanStore(tmp_path / "traces.db") as store:
        store.write_spans(
            [
                make_row(tid, span_id(5), start_ns=30),
                make_row(tid, span_id(9), start_ns=10),
                make_row(tid, span_id(2), start_ns=20),
                make_row(tid, span_id(1), start_ns=20),  # same start: ordered by span id
                make_row("d" * 32, span_id(7), start_ns=15),  # another trace
            ]
        )
        spans = store.get_trace(tid)
        assert store.get_trace("e" * 32) == []
    assert [(s.start_ns, s.span_id) for s in spans] == [
        (T0 + 10, span_id(9)),
        (T0 + 20, span_id(1)),
        (T0 + 20, span_id(2)),
        (T0 + 30, span_id(5)),
    ]
    first = spans[0]
    assert first.trace_id == tid
    assert first.attributes == {"k": "v"}
    assert first.events == [{"name": "ev", "time_ns": T0 + 10, "attributes": {"n": 1}}]
    assert first.resource == {"service.name": "store-test"}
    assert first.scope == {"name": "tests", "version": "1"}
    assert first.duration_ns == 2_000 - 10
    assert first.corrupt is False


@pytest.fixture
def id_store(tmp_path: Path):
    with SpanStore(tmp_path / "traces.db") as store:
        store.write_spans(
            [
                make_row("abcd1234" + "0" * 24, span_id(1)),
                make_row("abcd5678" + "0" * 24, span_id(2)),
                make_row("0123456789abcdef" * 2, span_id(3)),
                make_row("0123456789abcdef" * 2, span_id(4)),
            ]
        )
        yield store


def test_resolve_full_trace_id(id_store: SpanStore) -> None:
    full = "0123456789abcdef" * 2
    assert id_store.resolve_trace_id(full) == full
    assert id_store.resolve_trace_id(f"  {full.upper()}\n") == full


@pytest.mark.parametrize(("prefix", "expected"), [("0123", "0123456789abcdef" * 2), ("abcd5", "abcd5678" + "0" * 24)])
def test_resolve_unique_prefix(id_store: SpanStore, prefix: str, expected: str) -> None:
    assert id_store.resolve_trace_id(prefix) == expected
    assert id_store.resolve_trace_id(prefix.upper()) == expected


def test_resolve_ambiguous_prefix(id_store: SpanStore) -> None:
    with pytest.raises(StoreError, match="ambiguous"):
        id_store.resolve_trace_id("abcd")


@pytest.mark.parametrize("text", ["ffff", "abcd9", "0123456789abcdef0123456789abcdee"])
def test_resolve_unknown_id(id_store: SpanStore, text: str) -> None:
    with pytest.raises(StoreError, match="no trace"):
        id_store.resolve_trace_id(text)


@pytest.mark.parametrize("text", ["zzzz", "abc", "", "abcd-1234", "0123456789abcdef0123456789abcdef0", "abcd%"])
def test_resolve_rejects_non_ids(id_store: SpanStore, text: str) -> None:
    with pytest.raises(StoreError, match="not a trace id"):
        id_store.resolve_trace_id(text)


@pytest.mark.parametrize(
    ("column", "value", "field", "default"),
    [
        ("attributes", "{not json", "attributes", {}),
        ("attributes", "[1, 2]", "attributes", {}),
        ("events", '{"a": 1}', "events", []),
        ("links", "\x00\x01", "links", []),
    ],
)
def test_corrupt_json_column_is_flagged_not_raised(
    tmp_path: Path, column: str, value: str, field: str, default: object
) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_spans([make_row(span_id=span_id(1), name="broken"), make_row(span_id=span_id(2), start_ns=5)])
        conn = raw(path)
        conn.execute(f"UPDATE spans SET {column} = ? WHERE span_id = ?", (value, span_id(1)))
        conn.close()

        spans = {s.span_id: s for s in store.get_trace("a" * 32)}
        assert [t.span_count for t in store.list_traces()] == [2]

    broken = spans[span_id(1)]
    assert broken.corrupt is True
    assert getattr(broken, field) == default
    assert broken.name == "broken"
    assert broken.resource == {"service.name": "store-test"}
    if field != "attributes":
        assert broken.attributes == {"k": "v"}
    assert spans[span_id(2)].corrupt is False
