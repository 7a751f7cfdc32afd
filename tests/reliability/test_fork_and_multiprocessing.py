"""Fork and multiprocessing: spans of ``os.fork`` children and of ``multiprocessing`` workers (fork, spawn and
forkserver) reach the store under their own observer ids, the parent keeps exporting, and a fork while the
parent's batch worker is exporting never stalls the child (every wait is bounded; a timeout is a failure)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from process_support import (
    assert_store_sound,
    call_main,
    child,
    digest,
    run_child,
    spans_of,
    stored_by_observer,
    summarise,
)

from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.storage import SpanStore

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork and the fork start method need POSIX")


def _lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _assert_complete(store: SpanStore, observer: str, ended: int) -> None:
    """Every span ``observer`` ended is stored, and its ledger balances with nothing dropped."""
    ledger = stored_by_observer(store).get(observer)
    assert ledger is not None, f"nothing of observer {observer} reached the store"
    assert ledger["observed"] == ledger["accepted"] == ledger["stored"] == ledger["rows"] == ended, ledger


def test_os_fork_children_export_under_their_own_observers(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    done = run_child("fork_child_program", str(path), "3")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = _lines(done.stdout)
    (parent,) = summarise(lines, "parent")
    children = summarise(lines, "child")
    assert parent["codes"] == [0, 0, 0]
    assert len(children) == 3
    observers = [parent["observer"], *(c["observer"] for c in children)]
    assert len(set(observers)) == 4
    assert_store_sound(path)
    with SpanStore(path, create=False) as store:
        assert {o.observer: o.pid for o in store.observers()} == {
            parent["observer"]: parent["pid"],
            **{c["observer"]: c["pid"] for c in children},
        }
        _assert_complete(store, parent["observer"], parent["ended"])  # before, between and after the forks
        assert parent["ended"] == spans_of(1) * 4 + spans_of(2)
        for c in children:
            assert c["ended"] == c["accepted"] == spans_of(2)
            _assert_complete(store, c["observer"], c["ended"])
        for k in range(3):
            assert session_receipt(store, digest(f"fork-child-{k}")).status == "valid"
        assert session_receipt(store, digest("parent")).status == "valid"


def _run_mp(tmp_path: Path, method: str, *, configure_in_worker: bool, flush: bool) -> None:
    path = tmp_path / "traces.db"
    done = run_child("mp_program", str(path), method, str(int(configure_in_worker)), str(int(flush)), "2")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    (report,) = _lines(done.stdout)
    parent, workers = report["parent"], report["workers"]
    assert report["exitcodes"] == [0, 0]
    observers = {parent["observer"], *(w["observer"] for w in workers)}
    assert len(observers) == 3, report  # every worker is an observer of its own
    assert_store_sound(path)
    with SpanStore(path, create=False) as store:
        assert parent["ended"] == parent["accepted"] == spans_of(1) * 3
        _assert_complete(store, parent["observer"], parent["ended"])
        pids = {o.observer: o.pid for o in store.observers()}
        for worker in workers:
            _assert_complete(store, worker["observer"], worker["ended"])
            assert pids[worker["observer"]] == worker["pid"]
            assert session_receipt(store, digest(worker["conversation"])).status == "valid"


def test_multiprocessing_fork_workers_use_the_inherited_pipeline(tmp_path: Path) -> None:
    _run_mp(tmp_path, "fork", configure_in_worker=False, flush=True)


def test_multiprocessing_spawn_workers_configure_their_own_pipeline(tmp_path: Path) -> None:
    _run_mp(tmp_path, "spawn", configure_in_worker=True, flush=False)


def test_a_multiprocessing_fork_worker_flushes_when_it_returns(tmp_path: Path) -> None:
    """ "A clean exit flushes": a worker that returns normally is a clean exit, though multiprocessing ends it
    with ``os._exit`` (no ``atexit``)."""
    _run_mp(tmp_path, "fork", configure_in_worker=False, flush=False)


def test_a_forkserver_worker_that_configures_flushes_when_it_returns(tmp_path: Path) -> None:
    """forkserver (the default start method on Linux from Python 3.14) also ends workers with ``os._exit``."""
    _run_mp(tmp_path, "forkserver", configure_in_worker=True, flush=False)


def test_a_fork_while_the_batch_worker_waits_inside_an_export(tmp_path: Path) -> None:
    """The batch worker is blocked inside an export (another process holds the write lock) when the process
    forks: the child neither hangs nor loses its spans, and the parent's blocked batch still lands.

    ``os.fork()`` waits for an export in progress (bounded: the store's busy timeout, then the export gives up
    and is retried), so that no child inherits a connection inside a write transaction (see the next test)."""
    path = tmp_path / "traces.db"
    SpanStore(path).close()
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        with child(call_main("fork_while_exporting_program"), str(path), stderr_path=tmp_path / "err") as proc:
            forked = proc.line()
            assert forked is not None and forked["who"] == "forked" and forked["in_flight"] > 0, proc.stderr()
            blocker.execute("ROLLBACK")
            proc.send("released")
            lines = proc.rest()
            assert proc.wait() == 0, proc.stderr()
            assert "Traceback" not in proc.stderr(), proc.stderr()
    finally:
        if blocker.in_transaction:
            blocker.execute("ROLLBACK")
        blocker.close()
    (parent,) = summarise(lines, "parent")
    (kid,) = summarise(lines, "child")
    assert parent["code"] == 0, "the child hung or failed"
    assert kid["accepted"] == kid["ended"] == spans_of(1)
    assert parent["accepted"] == parent["ended"] == spans_of(1)
    assert_store_sound(path)
    with SpanStore(path, create=False) as store:
        _assert_complete(store, parent["observer"], parent["ended"])
        _assert_complete(store, kid["observer"], kid["ended"])


def test_a_fork_inside_the_parents_write_transaction(tmp_path: Path) -> None:
    """The process forks while its own store connection is inside a write transaction (a large batch): the
    child must still write its spans (SQLite's in-process lock state is inherited, the lock itself is not)."""
    path = tmp_path / "traces.db"
    done = run_child("fork_mid_transaction_program", str(path), "3")
    assert done.returncode == 0, done.stderr
    lines = _lines(done.stdout)
    forked = summarise(lines, "forked")
    children = summarise(lines, "child")
    assert [f["code"] for f in forked] == [0, 0, 0], done.stderr
    assert len(children) == 3
    for kid in children:
        assert kid["dropped"] == {} and kid["accepted"] == kid["ended"] == spans_of(1), (kid, done.stderr[-2000:])
    assert_store_sound(path)
    with SpanStore(path, create=False) as store:
        for kid in children:
            _assert_complete(store, kid["observer"], kid["ended"])
