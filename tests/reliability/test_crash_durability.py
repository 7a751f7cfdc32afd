"""Crash durability: a child running an agent is killed with SIGKILL at seeded random points, some of them
aimed inside a write transaction. After every kill the store opens, ``integrity_check`` is ok, every batch the
child confirmed committed is there exactly, the run that never ended is reported unfinished, and the next
process appends under a new observer id with every ledger row balanced."""

from __future__ import annotations

import json
import random
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from process_support import (
    assert_identity,
    assert_store_sound,
    call_main,
    child,
    digest,
    file_signature,
    integrity_check,
    run_child,
    spans_of,
    stored_by_observer,
    wait_until,
    write_lock_held,
)

from otel_agentdiag.cli import cli
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.storage import SpanStore

KIND_OF_NAME = {"llm": "chat gpt-4o-mini", "tool": "execute_tool lookup", "iteration": "agent.iteration"}
BAD_REASONS = {"ledger_invalid", "stats_missing", "sequence_gap", "duplicate_sequence", "export_failure"}


def _confirmed(line: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The spans a ``flushed`` line confirms committed (the child wrote alone: nothing may be dropped)."""
    assert line is not None and line["event"] == "flushed", line
    assert line["ok"] is True and line["dropped"] == {} and line["rejected"] == {}, line
    spans: list[dict[str, Any]] = line["spans"]
    return spans


def _check_after_kill(path: Path, conversation: str, observer: str, confirmed: list[dict[str, Any]]) -> None:
    assert integrity_check(path) == "ok"
    session = digest(conversation)
    with SpanStore(path, create=False) as store:
        mine = {s.span_id: s for s in store.session_spans(session) if s.observer == observer}
        # Every confirmed span is there, exactly once, as it was written.
        for want in confirmed:
            got = mine.get(want["span_id"])
            assert got is not None, f"confirmed span {want} is missing after the kill"
            assert (got.kind, got.name, got.session) == (want["kind"], KIND_OF_NAME[want["kind"]], session)
        sequences = [s.sequence for s in mine.values()]
        assert len(sequences) == len(set(sequences))
        # Atomic batches: the ledger (written in the same transaction) accounts for exactly the rows there.
        ledger = stored_by_observer(store)[observer]
        assert ledger["stored"] == ledger["rows"] == len(mine) >= len(confirmed)
        assert ledger["observed"] == ledger["accepted"] == ledger["stored"]
        assert_identity(store)
        receipt = session_receipt(store, session)
        assert receipt.status == "degraded", receipt
        assert "unfinished_span" in receipt.reasons and not BAD_REASONS & set(receipt.reasons), receipt
        assert receipt.counts["unfinished_spans"] >= 1
    # The same verdict through the command.
    shown = CliRunner().invoke(
        cli, ["receipt", "--store", str(path), "--session", session, "--format", "json"], catch_exceptions=False
    )
    assert shown.exit_code == 0, shown.output
    assert '"unfinished_span"' in shown.stdout


def _append_and_check(path: Path, observers: set[str]) -> None:
    """A new process appends a clean run: a new observer id, its rows complete, every ledger row balanced."""
    done = run_child("append_child", str(path), "after-the-crash", "2")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "locked" not in done.stderr, done.stderr
    new = json.loads(done.stdout)
    assert new["observer"] not in observers
    assert_store_sound(path)
    with SpanStore(path, create=False) as store:
        ledger = stored_by_observer(store)[new["observer"]]
        assert ledger["observed"] == ledger["accepted"] == ledger["stored"] == ledger["rows"] == spans_of(2)
        assert session_receipt(store, digest("after-the-crash")).status == "valid"
        assert {o.observer for o in store.observers()} >= observers | {new["observer"]}


@pytest.mark.parametrize("seed", [11, 23, 41])
def test_sigkill_at_seeded_random_points(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "traces.db"
    conversation = f"crash-{seed}"
    observers: set[str] = set()
    for round_ in range(3):
        confirmed: list[dict[str, Any]] = []
        code = call_main("crash_child")
        with child(code, str(path), conversation, "0", stderr_path=tmp_path / f"stderr-{round_}") as proc:
            start = proc.line()
            assert start is not None and start["event"] == "start", proc.stderr()
            assert start["observer"] not in observers  # every process is a new observer
            observers.add(start["observer"])
            for _ in range(rng.randint(1, 8)):
                confirmed += _confirmed(proc.line())
            # A random kill point somewhere in the next step or flush (the child never waits on us): a seeded
            # delay that chooses where to kill, not one that waits for anything.
            threading.Event().wait(rng.uniform(0.0, 0.02))
            assert proc.kill() == -signal.SIGKILL
            assert "Traceback" not in proc.stderr()
        _check_after_kill(path, conversation, start["observer"], confirmed)
    _append_and_check(path, observers)


@pytest.mark.parametrize("seed", [5, 8])
def test_sigkill_inside_a_write_transaction(tmp_path: Path, seed: int) -> None:
    """Kill while a large batch is being written: the write lock is held and the WAL has grown since."""
    rng = random.Random(seed)
    path = tmp_path / "traces.db"
    wal = Path(f"{path}-wal")
    conversation = f"torn-{seed}"
    observers: set[str] = set()
    for round_ in range(2):
        confirmed: list[dict[str, Any]] = []
        code = call_main("crash_child")
        with child(code, str(path), conversation, "1000", stderr_path=tmp_path / f"stderr-{round_}") as proc:
            start = proc.line()
            assert start is not None and start["event"] == "start", proc.stderr()
            observers.add(start["observer"])
            confirmed += _confirmed(proc.line()) + _confirmed(proc.line())
            assert proc.line() == {"event": "big"}
            for _ in range(rng.randint(0, 2)):  # let a seeded number of large steps commit first
                confirmed += _confirmed(proc.line())
            baseline = file_signature(wal)

            # Aim: the child holds the write lock (a transaction is open) and has written to the WAL since.
            def inside(since: tuple[int, int] = baseline) -> bool:
                return write_lock_held(path) and file_signature(wal) != since

            aimed = wait_until(inside, 60, pause=0.0005)
            assert proc.kill() == -signal.SIGKILL
            assert aimed, "never saw the child inside a write transaction"
        _check_after_kill(path, conversation, start["observer"], confirmed)
    _append_and_check(path, observers)
