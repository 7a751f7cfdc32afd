"""Clearing and pruning leave no byte behind: the raw bytes of the database, its ``-wal`` and ``-shm`` are searched
for what the deleted spans carried (ids, attribute values, captured content, index entries) while the store is
still open; a reader pinning an old snapshot makes the clear say so instead of claiming success."""

from __future__ import annotations

import random
import sqlite3
import string
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from storage_helpers import T0, files_holding, query

from otel_agentdiag.content import ENCODING, encode, project_json
from otel_agentdiag.storage import ContentRow, RetentionLimits, ScrubIncomplete, SpanRow, SpanStore
from otel_agentdiag.storage.migrations import APPLICATION_ID
from otel_agentdiag.storage.retention import delete_rows
from otel_agentdiag.storage.scrub import REASON_BUSY, scrub

RESOURCE = {"service.name": "scrub-test"}


def word(rng: random.Random, n: int = 20) -> str:
    """A random lowercase word: unique in the file, and nothing a credential scrubber would touch."""
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(n))


@dataclass
class Session:
    """The rows of one session, and every byte string they put in the file that no other session shares."""

    digest: str
    rows: list[SpanRow] = field(default_factory=list)
    content: list[list[ContentRow]] = field(default_factory=list)
    needles: dict[str, bytes] = field(default_factory=dict)


def make_session(rng: random.Random, spans: int, *, first_start: int = 0) -> Session:
    session = Session("hmac-sha256:0a1b2c3d:" + rng.randbytes(32).hex())
    trace_id = rng.randbytes(16).hex()
    session.needles["trace id"] = trace_id.encode()
    for i in range(spans):
        span_id = rng.randbytes(8).hex()
        start = T0 + first_start + i * 1000 + rng.randrange(1000)
        note, prompt = word(rng), word(rng)
        # Some content is large (overflow pages), most is small.
        padding = word(rng, rng.choice([10, 200, 1500, 6000]))
        session.rows.append(
            SpanRow(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=None,
                name="chat model",
                kind="llm",
                span_kind="client",
                start_ns=start,
                end_ns=start + 500,
                status="ok",
                session=session.digest,
                attributes={"gen_ai.conversation.id": session.digest, "note": note},
                events=[],
                links=[],
                resource=RESOURCE,
                scope={"name": "tests", "version": "1"},
                observer="0123456789abcdef",
                sequence=i,
            )
        )
        value = [{"role": "user", "content": f"remember {prompt} {padding}"}]
        session.content.append([ContentRow("gen_ai.input.messages", ENCODING, encode(value), project_json(value))])
        session.needles[f"span id {i}"] = span_id.encode()
        session.needles[f"attribute {i}"] = f'"note":"{note}"'.encode()
        session.needles[f"content {i}"] = prompt.encode()
        session.needles[f"content tail {i}"] = padding[-16:].encode()
        # The entry of spans_session (session, start_ns): the digest, then start_ns as a big-endian int64.
        session.needles[f"session index {i}"] = session.digest.encode() + start.to_bytes(8, "big")
    session.needles["conversation attribute"] = f'"gen_ai.conversation.id":"{session.digest}"'.encode()
    return session


def write_interleaved(store: SpanStore, sessions: list[Session], rng: random.Random, batch: int = 25) -> None:
    """Write the sessions' rows in batches that mix them (so their rows share pages and indexes split)."""
    pending = [(s.rows[i], s.content[i]) for s in sessions for i in range(len(s.rows))]
    rng.shuffle(pending)
    for at in range(0, len(pending), batch):
        part = pending[at : at + batch]
        store.write_batch([r for r, _ in part], content=[c for _, c in part])


def open_reader(path: Path) -> sqlite3.Connection:
    """Another connection in the middle of a read transaction: it pins the snapshot it read."""
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM spans").fetchone()
    return reader


def test_the_store_zeroes_what_sqlite_frees_on_every_connection(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SpanStore(path) as writer, SpanStore(path, create=False) as reader:
        for store in (writer, reader):
            assert store._conn.execute("PRAGMA secure_delete").fetchone() == (1,)


def test_clear_leaves_no_byte_of_the_session_while_the_store_stays_open(tmp_path: Path) -> None:
    rng = random.Random(20)
    path = tmp_path / "t.db"
    sessions = [make_session(rng, 60, first_start=k) for k in range(4)]
    victim, kept = sessions[0], sessions[1:]
    with SpanStore(path) as store:
        write_interleaved(store, sessions, rng)
        # The search finds every needle before the clear: it would see one that is left.
        for s in sessions:
            assert set(files_holding(path, s.needles)) == set(s.needles)
        assert store.clear_session(victim.digest) == 60
        assert files_holding(path, victim.needles) == {}
        for s in kept:
            assert set(files_holding(path, s.needles)) == set(s.needles)
        assert Path(f"{path}-wal").stat().st_size == 0  # the WAL was reset, the store still open
        # The store goes on as before.
        late = make_session(rng, 5, first_start=10_000)
        write_interleaved(store, [late], rng)
        assert len(store.session_spans(late.digest)) == 5
        assert {c.span_id for c in store.trace_content(kept[0].rows[0].trace_id)} == {r.span_id for r in kept[0].rows}
    assert query(path, "PRAGMA integrity_check") == [("ok",)]
    assert query(path, "PRAGMA application_id") == [(APPLICATION_ID,)]


def test_copies_left_by_page_rebalancing_are_gone_after_the_rewrite(tmp_path: Path) -> None:
    """Sessions churned through shared pages and indexes. secure_delete zeroes what SQLite frees, but rebalancing
    copies cells between sibling pages and leaves the old copy in unused page space: with this seed, on SQLite
    3.40, deleting alone (``scrub=False``) leaves the primary-key index entries of some cleared spans in the file.
    The next clear rewrites the file: none of any cleared session is left."""
    rng = random.Random(0)
    path = tmp_path / "t.db"
    sessions = [make_session(rng, 40, first_start=k) for k in range(10)]
    with SpanStore(path) as store:
        write_interleaved(store, sessions, rng, batch=7)
        for s in sessions[:6]:
            assert store.clear_session(s.digest, scrub=False) == 40
            more = make_session(rng, 10, first_start=50_000 + len(store.list_sessions()))
            write_interleaved(store, [more], rng, batch=3)
            sessions.append(more)
        assert store.clear_session(sessions[6].digest) == 40
        for s in sessions[:7]:
            assert files_holding(path, s.needles) == {}
        for s in sessions[7:]:
            assert set(files_holding(path, s.needles)) == set(s.needles)


def test_a_reader_pinning_a_snapshot_makes_clear_say_so_after_deleting(tmp_path: Path) -> None:
    rng = random.Random(3)
    path = tmp_path / "t.db"
    victim, kept = make_session(rng, 30), make_session(rng, 30, first_start=1)
    with SpanStore(path) as store:
        write_interleaved(store, [victim, kept], rng)
    reader = open_reader(path)
    try:
        with SpanStore(path, busy_timeout=0.2) as store:
            with pytest.raises(ScrubIncomplete) as raised:
                store.clear_session(victim.digest)
            failure = raised.value
            assert failure.deleted == 30
            assert (failure.report.complete, failure.report.reason) == (False, REASON_BUSY)
            assert failure.report.checkpointed < failure.report.wal_frames
            message = str(failure)
            assert "\n" not in message and "read transaction" in message and "again" in message
            # Deleted for every reader that starts now ...
            assert store.session_spans(victim.digest) == []
            # ... but the failure is true: the pinned snapshot still reads the rows, and their bytes are in the files.
            assert reader.execute("SELECT COUNT(*) FROM spans WHERE session = ?", (victim.digest,)).fetchone() == (30,)
            assert files_holding(path, victim.needles) != {}
            reader.execute("ROLLBACK")
            reader.close()
            # The same clear again, once the reader is gone, finishes it.
            assert store.clear_session(victim.digest) == 0
            assert files_holding(path, victim.needles) == {}
            assert set(files_holding(path, kept.needles)) == set(kept.needles)
    finally:
        reader.close()


def test_clear_without_scrub_only_deletes_and_a_later_scrub_finishes(tmp_path: Path) -> None:
    rng = random.Random(4)
    path = tmp_path / "t.db"
    sessions = [make_session(rng, 20, first_start=k) for k in range(3)]
    with SpanStore(path, busy_timeout=0.2) as store:
        write_interleaved(store, sessions, rng)
        reader = open_reader(path)
        try:
            assert [store.clear_session(s.digest, scrub=False) for s in sessions[:2]] == [20, 20]
            report = store.scrub()
            assert (report.complete, report.reason) == (False, REASON_BUSY)
            assert "read transaction" in report.problem and "run agentdiag prune again" in report.advice(
                "agentdiag prune"
            )
        finally:
            reader.close()
        report = store.scrub()
        assert report.complete and report.reason is None and report.wal_frames == report.checkpointed
        assert (report.problem, report.advice()) == ("", "")
        for s in sessions[:2]:
            assert files_holding(path, s.needles) == {}


def test_scrub_removes_what_an_earlier_version_left_in_free_space(tmp_path: Path) -> None:
    """A store pruned before this version on a SQLite built without secure_delete (the python.org and macOS
    builds): the pruned rows' bytes are in free pages and free blocks of the database file itself."""
    rng = random.Random(5)
    path = tmp_path / "t.db"
    old, victim, kept = (make_session(rng, 40, first_start=k) for k in range(3))
    with SpanStore(path) as store:
        write_interleaved(store, [old, victim, kept], rng)
    legacy = sqlite3.connect(path, isolation_level=None)
    try:
        legacy.execute("PRAGMA secure_delete = OFF")
        legacy.execute("BEGIN IMMEDIATE")
        delete_rows(legacy, legacy.execute("SELECT rowid, size, session FROM spans WHERE session = ?", (old.digest,)))
        legacy.execute("COMMIT")
        assert legacy.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone() == (0, 0, 0)
    finally:
        legacy.close()
    left = files_holding(path, old.needles)
    assert left and all(where == ["db"] for where in left.values())  # in the database file's free space
    with SpanStore(path) as store:
        store.clear_session(victim.digest)
    assert files_holding(path, old.needles) == {}
    assert files_holding(path, victim.needles) == {}
    assert set(files_holding(path, kept.needles)) == set(kept.needles)


def test_prune_then_scrub_leaves_no_byte_of_a_pruned_span(tmp_path: Path) -> None:
    rng = random.Random(6)
    path = tmp_path / "t.db"
    sessions = [make_session(rng, 30, first_start=k) for k in range(3)]
    with SpanStore(path) as store:
        write_interleaved(store, sessions, rng)
    with SpanStore(path, retention=RetentionLimits(max_session_spans=10)) as store:
        assert store.prune().spans == 60
        assert store.scrub().complete
        for s in sessions:
            kept_ids = {span.span_id for span in store.session_spans(s.digest)}
            assert len(kept_ids) == 10
            pruned = {i for i, r in enumerate(s.rows) if r.span_id not in kept_ids}
            gone = {k: v for k, v in s.needles.items() if k.split()[-1].isdigit() and int(k.split()[-1]) in pruned}
            assert len(gone) == 5 * 20
            assert files_holding(path, gone) == {}
            stays = {k: v for k, v in s.needles.items() if k.split()[-1].isdigit() and int(k.split()[-1]) not in pruned}
            assert set(files_holding(path, stays)) == set(stays)


def test_clear_forgets_the_push_marks_of_its_spans_and_prune_those_of_pruned_spans(tmp_path: Path) -> None:
    rng = random.Random(8)
    path = tmp_path / "t.db"
    victim, kept = make_session(rng, 12), make_session(rng, 12, first_start=1)
    with SpanStore(path) as store:
        write_interleaved(store, [victim, kept], rng)
        for endpoint in ("sha256:" + "a" * 64, "sha256:" + "b" * 64):
            store.mark_pushed(endpoint, [(r.trace_id, r.span_id) for r in victim.rows + kept.rows])
        store.clear_session(victim.digest)
        assert files_holding(path, {k: v for k, v in victim.needles.items() if k.startswith("span id")}) == {}
        assert query(path, "SELECT COUNT(DISTINCT span_id), COUNT(*) FROM push_marks") == [(12, 24)]
    with SpanStore(path, retention=RetentionLimits(max_session_spans=4)) as store:
        assert store.prune().spans == 8
        assert query(path, "SELECT COUNT(DISTINCT span_id), COUNT(*) FROM push_marks") == [(4, 8)]
        kept_ids = {(s.trace_id, s.span_id) for s in store.session_spans(kept.digest)}
        assert store.pushed_span_ids("sha256:" + "a" * 64) == kept_ids


def test_scrub_keeps_the_store_whole_and_refuses_a_connection_inside_a_transaction(tmp_path: Path) -> None:
    rng = random.Random(9)
    path = tmp_path / "t.db"
    first, second = make_session(rng, 10), make_session(rng, 10, first_start=1)
    with SpanStore(path) as store:
        write_interleaved(store, [first], rng)
        assert store.scrub().complete
        write_interleaved(store, [second], rng)  # the cached resource id still names the same row
        assert query(path, "SELECT COUNT(*) FROM resources") == [(1,)]
        assert {len(store.session_spans(s.digest)) for s in (first, second)} == {10}
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        with pytest.raises(ValueError, match="outside a transaction"):
            scrub(conn, path)
        conn.execute("ROLLBACK")
    finally:
        conn.close()
    assert query(path, "PRAGMA integrity_check") == [("ok",)]
