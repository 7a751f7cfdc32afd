"""Concurrent writers: three processes export into one store at once (each its own ``configure()``) while a
fourth runs ``agentdiag status`` in a loop: no ``database is locked`` anywhere, no reader failure, and every
span each writer ended is stored or counted (identity per observer; totals equal what each writer ended)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from process_support import (
    Child,
    assert_store_sound,
    call_main,
    child_env,
    digest,
    stored_by_observer,
)

from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.storage import SpanStore

WRITERS = 3
STEPS = 20
READS = 3


def _status(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otel_agentdiag", "status", "--store", str(path), "--with-receipt", "--format", "json"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_three_writers_and_a_status_loop_on_one_store(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    writers = [
        Child(call_main("writer_child"), str(path), f"w{n}", str(STEPS), "0.05", stderr_path=tmp_path / f"w{n}")
        for n in range(WRITERS)
    ]
    try:
        for writer in writers:
            writer.send("go")  # all start together
        for writer in writers:
            assert writer.line() == {"event": "ready"}, writer.stderr()
        reads = [_status(path) for _ in range(READS)]  # while all three write
        for writer in writers:
            assert writer.proc.poll() is None, writer.stderr()
            writer.send("stop")
        while any(w.proc.poll() is None for w in writers):  # and until they finish
            reads.append(_status(path))
        done: list[dict[str, Any]] = []
        for writer in writers:
            assert writer.wait(120) == 0, writer.stderr()
            (last,) = writer.rest()
            done.append(last)
        errors = [w.stderr() for w in writers]
    finally:
        for writer in writers:
            writer.close()

    for read in reads:
        assert read.returncode == 0, read.stderr
        assert read.stderr == "" and "locked" not in read.stdout, read.stderr
    for err in errors:
        assert "locked" not in err and "Traceback" not in err and "could not" not in err, err

    assert_store_sound(path)
    with SpanStore(path, create=False) as store:
        ledgers = stored_by_observer(store)
        assert set(ledgers) == {d["observer"] for d in done}
        for d in done:
            ended = d["ended"]
            assert d["runs"] >= 1 and ended == d["runs"] * (1 + 3 * STEPS)
            ledger = ledgers[d["observer"]]
            # Every span ended is counted exactly once, and with no pressure, stored.
            assert ledger["observed"] == ended == ledger["accepted"] + ledger["rejected"] + ledger["dropped"]
            assert ledger["stored"] == ledger["rows"] == ledger["accepted"] == ended, ledger
            assert d["totals"]["observed"] == d["totals"]["accepted"] == ended and d["totals"]["pending"] == 0
        for n, d in enumerate(done):
            for r in range(min(3, d["runs"])):  # each writer's sessions: one per run, three at most
                assert session_receipt(store, digest(f"w{n}-{r}")).status == "valid"
