"""``agentdiag clear`` and ``agentdiag prune`` leave no byte of what they delete in the database, its ``-wal`` or
``-shm`` (searched raw, as an attacker reading the files would), with an agent process still writing other sessions
into the store and after that process is killed; when another connection pins an old snapshot, they exit 1 with
one line and do not claim success.

Everything is real: an agent child with ``configure(capture_content=True)``, ``agentdiag`` run as its own process,
a plain ``sqlite3`` reader. The sentinels are in captured content (prompts, answers, tool arguments and results)
of the cleared session; the other needles are the ids and digests its stored spans carry (see ``clear_support``).
"""

from __future__ import annotations

import random
import sqlite3
import string
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from clear_support import agentdiag_cli, files_holding, send, session_needles, wait_for
from process_support import Child, child, digest, integrity_check

from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.storage import SpanStore

AGENT_CODE = "import sys, clear_support; clear_support.content_agent(*sys.argv[1:])"


def sentinel(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(24))


def texts(word: str, steps: int) -> list[str]:
    """The sentinels :func:`clear_support.content_run` puts in a run of ``steps`` steps."""
    return [f"{word}rz"] + [f"{word}{kind}{i}z" for i in range(steps) for kind in "abcd"]


@contextmanager
def agent(path: Path, tmp_path: Path, *args: str) -> Iterator[Child]:
    with child(AGENT_CODE, str(path), *args, stderr_path=tmp_path / f"agent-{len(list(tmp_path.iterdir()))}.err") as a:
        assert wait_for(a, "start")["pid"] > 0
        yield a


def run(a: Child, conversation: str, word: str, steps: int = 2) -> None:
    send(a, op="run", conversation=conversation, sentinel=word, steps=steps)
    assert wait_for(a, "ran")["ok"] is True


@contextmanager
def reader_on(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection in the middle of a read transaction (BEGIN + SELECT): it pins its snapshot."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute("SELECT COUNT(*) FROM span_content").fetchone()
        yield conn
    finally:
        conn.close()


def assert_all_there(path: Path, needles: dict[str, bytes]) -> None:
    """Every needle is found: the search would see any one that is left."""
    missing = set(needles) - set(files_holding(path, needles))
    assert not missing, sorted(missing)[:5]


def assert_cleared(result: object, session: str, spans: int) -> None:
    assert getattr(result, "returncode", None) == 0, result
    assert getattr(result, "stdout", "") == f"cleared session {session}: {spans} span(s) deleted\n"
    assert getattr(result, "stderr", None) == ""


AGAIN = "then run agentdiag clear with the same --session again"
"""What ``clear`` says when another connection kept it from rewriting the files (exit 1, the rows deleted)."""


def clear_while_writing(path: Path, session: str, spans: int) -> None:
    """``agentdiag clear`` while another process writes: it deletes the session's ``spans`` and rewrites the files.
    A write transaction of the other process that outlasts the busy timeout (a loaded machine) keeps the WAL from
    being truncated; then clear exits 1 saying so, its rows deleted, and the user runs the same clear again, as
    it says. Done here as the user would (at most 5 times), each answer checked."""
    result = agentdiag_cli("clear", "--session", session, "--yes", "--store", path)
    if result.returncode == 0:
        assert_cleared(result, session, spans)
        return
    assert result.returncode == 1 and f"{spans} span(s) deleted" in result.stderr and AGAIN in result.stderr, result
    for _ in range(4):
        result = agentdiag_cli("clear", "--session", session, "--yes", "--store", path)
        if result.returncode == 0:
            assert_cleared(result, session, 0)  # nothing left to delete: this run rewrote the files
            return
        assert result.returncode == 1 and AGAIN in result.stderr, result
    raise AssertionError(f"clear never completed while the agent wrote: {result}")


def test_clear_with_no_other_process(tmp_path: Path) -> None:
    rng = random.Random(1)
    path = tmp_path / "traces.db"
    victim_word, kept_word = sentinel(rng), sentinel(rng)
    with agent(path, tmp_path) as a:
        run(a, "conv-victim", victim_word, steps=3)
        run(a, "conv-kept", kept_word, steps=3)
        a.proc.stdin.close()  # type: ignore[union-attr]  # the agent exits, its exit flushes
        assert a.wait() == 0
    victim, kept = digest("conv-victim"), digest("conv-kept")
    gone = session_needles(path, victim, texts(victim_word, 3))
    stays = session_needles(path, kept, texts(kept_word, 3))
    assert_all_there(path, gone)
    assert_all_there(path, stays)
    assert_cleared(agentdiag_cli("clear", "--session", victim, "--yes", "--store", path), victim, 10)
    assert files_holding(path, gone) == {}
    assert_all_there(path, stays)
    assert integrity_check(path) == "ok"


def test_clear_while_an_agent_writes_other_sessions_then_the_agent_is_killed(tmp_path: Path) -> None:
    rng = random.Random(2)
    path = tmp_path / "traces.db"
    victim_word, open_word, kept_word = sentinel(rng), sentinel(rng), sentinel(rng)
    victim, kept = digest("conv-victim"), digest("conv-kept")
    with agent(path, tmp_path) as a:
        run(a, "conv-victim", victim_word, steps=3)
        run(a, "conv-kept", kept_word, steps=3)
        # A second run of the victim's session is open across the clear: its first step is stored, its run span
        # (with content) ends after the clear, so the generation gate must drop it.
        send(a, op="open", conversation="conv-victim", sentinel=open_word)
        assert wait_for(a, "opened")["ok"] is True
        gone = session_needles(path, victim, texts(victim_word, 3) + texts(open_word, 1)[1:])
        in_flight = {"open run content": f"{open_word}rz".encode()}
        stays = session_needles(path, kept, texts(kept_word, 3))
        assert_all_there(path, gone)
        assert_all_there(path, stays)
        assert files_holding(path, in_flight) == {}  # not written yet: its span has not ended
        send(a, op="burst", prefix="conv-other")
        assert wait_for(a, "burst")["ok"] is True  # the agent is writing other sessions
        clear_while_writing(path, victim, 13)
        for _ in range(3):  # it went on writing after the clear returned
            assert wait_for(a, "burst")["ok"] is True
        assert files_holding(path, gone) == {}
        send(a, op="close")
        assert wait_for(a, "closed")["ok"] is True
        assert wait_for(a, "burst")["ok"] is True
        assert files_holding(path, gone | in_flight) == {}
        assert_all_there(path, stays)
        a.kill()  # SIGKILL, in the middle of its writing
        assert files_holding(path, gone | in_flight) == {}
        assert_all_there(path, stays)
    assert integrity_check(path) == "ok"  # recovers the killed writer's WAL
    assert files_holding(path, gone | in_flight) == {}
    with SpanStore(path, create=False) as store:
        assert store.session_spans(victim) == []
        assert session_receipt(store, victim).counts["dropped_cleared"] == 1  # the open run's span
        assert len(store.session_spans(digest("conv-other-0"))) == 4


def test_clear_with_a_reader_holding_a_snapshot_exits_1_and_the_next_clear_finishes(tmp_path: Path) -> None:
    rng = random.Random(3)
    path = tmp_path / "traces.db"
    victim_word, kept_word = sentinel(rng), sentinel(rng)
    with agent(path, tmp_path) as a:
        run(a, "conv-victim", victim_word)
        run(a, "conv-kept", kept_word)
        victim, kept = digest("conv-victim"), digest("conv-kept")
        gone = session_needles(path, victim, texts(victim_word, 2))
        stays = session_needles(path, kept, texts(kept_word, 2))
        with reader_on(path) as reader:
            result = agentdiag_cli("clear", "--session", victim, "--yes", "--store", path)
            assert result.returncode == 1, result
            assert result.stdout == ""  # nothing claims success
            (line,) = result.stderr.splitlines()
            assert line.startswith(f"agentdiag: error: session {victim}: 7 span(s) deleted, but their bytes may remain")
            assert "read transaction" in line and "run agentdiag clear with the same --session again" in line
            # It is true: the reader's snapshot still holds them, in the files.
            assert reader.execute("SELECT COUNT(*) FROM spans WHERE session = ?", (victim,)).fetchone() == (7,)
            assert files_holding(path, gone) != {}
        assert_cleared(agentdiag_cli("clear", "--session", victim, "--yes", "--store", path), victim, 0)
        assert files_holding(path, gone) == {}
        assert_all_there(path, stays)
        run(a, "conv-after", sentinel(rng))  # the agent still writes
    assert integrity_check(path) == "ok"


def test_prune_leaves_no_byte_of_the_spans_retention_pruned(tmp_path: Path) -> None:
    """The agent's own writes prune (a retention limit of 6 spans per session); ``agentdiag prune`` then prunes
    further and rewrites the file: no captured value of a pruned span is left, none of a kept one is lost. With a
    reader holding a snapshot, prune exits 1."""
    rng = random.Random(4)
    path = tmp_path / "traces.db"
    words = [sentinel(rng) for _ in range(3)]
    with agent(path, tmp_path, "6") as a:
        for k, word in enumerate(words):
            for step in range(6):  # one run per session, flushed after each step's run: pruned as it goes
                run(a, f"conv-{k}", f"{word}s{step}s", steps=1)
        a.proc.stdin.close()  # type: ignore[union-attr]
        assert a.wait() == 0

    def captured(word: str) -> dict[str, bytes]:
        return {text: text.encode() for step in range(6) for text in texts(f"{word}s{step}s", 1)}

    def stored_texts() -> set[bytes]:
        conn = sqlite3.connect(path)
        try:
            return {bytes(row[0]) for row in conn.execute("SELECT lossless FROM span_content")}
        finally:
            conn.close()

    def split() -> tuple[dict[str, bytes], dict[str, bytes]]:
        """The captured values of pruned spans and of stored ones (as the table says)."""
        blobs = stored_texts()
        every = {k: v for word in words for k, v in captured(word).items()}
        kept = {k: v for k, v in every.items() if any(v in blob for blob in blobs)}
        assert kept and len(kept) < len(every)
        return {k: v for k, v in every.items() if k not in kept}, kept

    with reader_on(path):
        result = agentdiag_cli("prune", "--store", path)
        assert result.returncode == 1 and result.stdout == "", result
        (line,) = result.stderr.splitlines()
        assert line.startswith("agentdiag: error: pruned 0 span(s), 0 byte(s) from ")
        assert "read transaction" in line and "run agentdiag prune again" in line
    result = agentdiag_cli("prune", "--store", path)
    assert result.returncode == 0 and result.stdout.startswith("pruned 0 span(s)"), result
    pruned, kept = split()
    assert pruned and files_holding(path, pruned) == {}  # what the agent's retention pruned is gone
    assert_all_there(path, kept)
    result = agentdiag_cli("prune", "--max-session-spans", "2", "--store", path)
    assert result.returncode == 0 and result.stdout.startswith("pruned 12 span(s)"), result
    pruned, kept = split()
    assert files_holding(path, pruned) == {}
    assert_all_there(path, kept)
    assert integrity_check(path) == "ok"


def test_clearing_every_session_leaves_no_span_byte_of_any(tmp_path: Path) -> None:
    rng = random.Random(5)
    path = tmp_path / "traces.db"
    words = {f"conv-{k}": sentinel(rng) for k in range(4)}
    with agent(path, tmp_path) as a:
        for conversation, word in words.items():
            run(a, conversation, word)
        needles = {
            label: needle
            for conversation, word in words.items()
            for label, needle in session_needles(path, digest(conversation), texts(word, 2)).items()
        }
        assert_all_there(path, needles)
        for conversation in words:
            session = digest(conversation)
            assert_cleared(agentdiag_cli("clear", "--session", session, "--yes", "--store", path), session, 7)
        assert files_holding(path, needles) == {}
    assert files_holding(path, needles) == {}
    with SpanStore(path, create=False) as store:
        assert store.span_count() == 0 and store.content_summary() == (0, 0)
