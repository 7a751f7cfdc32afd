"""A store that cannot be written never reaches the agent: retried, then counted (issue 4, item 2).

Each scenario makes the database really fail, and keeps failing when the tests run as root (where file modes
do not stop writes):

- *locked*: another connection holds ``BEGIN EXCLUSIVE`` (SQLite's own lock; root is no exception);
- *read-only*: mode 0400 **and** the file format's write version (header byte 18) set to 3, which makes
  SQLite treat the file as read-only for every user, root included (``attempt to write a readonly database``);
- *folder removed*: ``rmtree`` of the store's folder, then (second test) a regular file where the folder was,
  which no user can create a folder through;
- *full*: ``PRAGMA max_page_count`` at the store's current size on the exporter's own connection
  (``database or disk is full``); and in a child process, ``RLIMIT_FSIZE`` (the kernel refuses to grow the
  file, for root too), with no access to any internals.

In each, the agent's calls return their values unchanged and no exception reaches it; the lost spans are
counted as ``export_failure`` exactly; and once the store works again the counts are in it, with
``observed = accepted + rejected + dropped`` on every row.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pipeline_support import (
    HASH_KEY,
    assert_identity,
    digest,
    expected_results,
    pipeline,
    run_agent,
    spans_of,
    total,
)

import otel_agentdiag as agentdiag
from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
from otel_agentdiag.storage import SpanStore

FLUSH_MS = 60_000


def _configure(path: Path, *, timer: bool = True) -> agentdiag.AgentDiag:
    """configure(); ``timer=False`` switches off the 0.5 s export timer, so that batches go out only on flush
    (exact batch boundaries: a slow machine cannot split a run into two batches)."""
    diag = agentdiag.configure(store=path, hash_key=HASH_KEY, set_global=False)
    if not timer:
        for processor in diag.batch_processors:
            processor.schedule_delay_s = 3600
    return diag


def _pipeline_stats(diag: agentdiag.AgentDiag) -> dict:
    return diag.stats()["destinations"]["local"]["pipeline"]


def _store_totals(path: Path) -> dict:
    with SpanStore(path, create=False) as store:
        assert_identity(store)
        return total(store.session_stats()) | {"spans": store.span_count()}


def test_locked_database_never_blocks_or_reaches_the_agent(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with _configure(path) as diag:
        locker = sqlite3.connect(path, isolation_level=None)
        try:
            locker.execute("BEGIN EXCLUSIVE")
            # The whole agent runs while the database is locked: its calls never wait for the store.
            assert run_agent(3) == expected_results(3)
            assert run_agent(2, "c-2") == expected_results(2)
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        assert diag.force_flush(FLUSH_MS)
        stats = _pipeline_stats(diag)
    assert stats["totals"]["dropped"] == {}
    totals = _store_totals(path)
    assert totals["spans"] == totals["stored"] == totals["observed"] == spans_of(3) + spans_of(2)


def test_locked_database_retries_then_counts_export_failure(tmp_path: Path) -> None:
    """The same pipeline as configure() builds, on a store with a 50 ms busy timeout (configure uses 5 s)."""
    path = tmp_path / "traces.db"
    with SpanStore(path, busy_timeout=0.05) as store:
        with pipeline(SQLiteSpanExporter(store), schedule_delay_s=3600, retry_backoff_s=0.01) as pipe:
            locker = sqlite3.connect(path, isolation_level=None)
            try:
                locker.execute("BEGIN EXCLUSIVE")
                assert run_agent(3) == expected_results(3)
                assert pipe.batcher.force_flush(FLUSH_MS)
                stats = pipe.batcher.stats()
                assert stats.totals.dropped == {"export_failure": spans_of(3)}
                assert (stats.flush_attempts, stats.flush_failures) == (4, 4)  # 1 + max_retries=3
                assert stats.unpersisted_dropped == {digest(): {"export_failure": spans_of(3)}}
            finally:
                locker.execute("ROLLBACK")
                locker.close()
            assert store.span_count() == 0  # nothing partial
            assert run_agent(1, "c-2") == expected_results(1)
            assert pipe.batcher.force_flush(FLUSH_MS)
        rows = {row.session: row for row in store.session_stats()}
        assert (rows[digest()].observed, rows[digest()].dropped) == (spans_of(3), {"export_failure": spans_of(3)})
        assert rows[digest("c-2")].stored == spans_of(1)
        (observer,) = store.observers()
        assert observer.flush_failures == 4
        assert_identity(store)


def _make_read_only(path: Path) -> None:
    """Read-only for SQLite whoever we are: write version 3 in the header (root ignores the 0400 mode)."""
    with open(path, "r+b") as f:
        f.seek(18)
        f.write(bytes([3]))
    os.chmod(path, 0o400)


def _make_writable(path: Path) -> None:
    os.chmod(path, 0o600)
    with open(path, "r+b") as f:
        f.seek(18)
        f.write(bytes([2]))


def test_read_only_store_counts_export_failure_and_recovers(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    SpanStore(path).close()
    _make_read_only(path)
    probe = sqlite3.connect(path)  # precondition: this really is read-only for this user, root or not
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        probe.execute("CREATE TABLE probe (x)")
    probe.close()

    with _configure(path, timer=False) as diag:
        assert run_agent(3) == expected_results(3)
        assert diag.force_flush(FLUSH_MS)
        stats = _pipeline_stats(diag)
        assert stats["totals"]["dropped"] == {"export_failure": spans_of(3)}
        assert stats["flush_failures"] == 4
        assert stats["unpersisted"]["dropped"] == {digest(): {"export_failure": spans_of(3)}}  # could not be written

        _make_writable(path)
        assert run_agent(2) == expected_results(2)
        assert diag.force_flush(FLUSH_MS)
        assert _pipeline_stats(diag)["unpersisted"]["dropped"] == {}
    totals = _store_totals(path)
    assert totals["dropped"] == {"export_failure": spans_of(3)}
    assert totals["spans"] == totals["stored"] == spans_of(2)
    assert totals["observed"] == spans_of(3) + spans_of(2)


def test_store_folder_removed_mid_run_starts_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "store" / "traces.db"
    with _configure(path) as diag:
        assert run_agent(2) == expected_results(2)
        assert diag.force_flush(FLUSH_MS)
        shutil.rmtree(path.parent)
        assert run_agent(3, "c-2") == expected_results(3)
        assert diag.force_flush(FLUSH_MS)
        assert _pipeline_stats(diag)["totals"]["dropped"] == {}
    # Not written into the deleted file: the spans after the removal are in a new store at the same path.
    totals = _store_totals(path)
    assert totals["spans"] == totals["observed"] == spans_of(3)
    with SpanStore(path, create=False) as store:
        assert {row.session for row in store.session_stats()} == {digest("c-2")}


def test_store_folder_that_cannot_come_back_counts_export_failure(tmp_path: Path) -> None:
    path = tmp_path / "store" / "traces.db"
    with _configure(path) as diag:
        assert run_agent(1) == expected_results(1)
        assert diag.force_flush(FLUSH_MS)
        shutil.rmtree(path.parent)
        path.parent.write_text("a file where the store's folder was")  # no user can mkdir through this
        assert run_agent(3) == expected_results(3)
        assert diag.force_flush(FLUSH_MS)
        assert _pipeline_stats(diag)["totals"]["dropped"] == {"export_failure": spans_of(3)}

        path.parent.unlink()
        assert run_agent(2, "c-2") == expected_results(2)
        assert diag.force_flush(FLUSH_MS)
    totals = _store_totals(path)
    assert totals["dropped"] == {"export_failure": spans_of(3)}
    assert totals["spans"] == spans_of(2)


def test_full_database_counts_export_failure_and_recovers(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with _configure(path, timer=False) as diag:  # one batch: too big to fit in the pages already there
        assert run_agent(1) == expected_results(1)
        assert diag.force_flush(FLUSH_MS)
        # White box, on purpose: max_page_count is per connection, so it must be the exporter's own.
        exporter = diag.batch_processors[0].exporter
        assert isinstance(exporter, SQLiteSpanExporter)
        conn = exporter._store._conn  # type: ignore[union-attr]
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages}")

        assert run_agent(40) == expected_results(40)
        assert diag.force_flush(FLUSH_MS)
        dropped = _pipeline_stats(diag)["totals"]["dropped"]
        assert dropped == {"export_failure": spans_of(40)}

        conn.execute("PRAGMA max_page_count = 1073741823")
        assert run_agent(1, "c-2") == expected_results(1)
        assert diag.force_flush(FLUSH_MS)
    totals = _store_totals(path)
    assert totals["dropped"] == {"export_failure": spans_of(40)}
    assert totals["spans"] == spans_of(1) * 2


_FULL_DISK_CHILD = textwrap.dedent(
    """
    import json, os, resource, signal, sys
    sys.path.insert(0, sys.argv[2])
    import otel_agentdiag as agentdiag
    from pipeline_support import HASH_KEY, run_agent, expected_results

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG from write(), not a signal
    diag = agentdiag.configure(store=sys.argv[1], hash_key=HASH_KEY, set_global=False)
    assert run_agent(1) == expected_results(1)
    assert diag.force_flush(60_000)
    folder = os.path.dirname(sys.argv[1])
    biggest = max(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (biggest, hard))  # no file may grow any more
    results = run_agent(40)
    assert diag.force_flush(60_000)
    failed = diag.stats()["destinations"]["local"]["pipeline"]["totals"]["dropped"]
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert run_agent(1, "c-2") == expected_results(1)
    diag.shutdown()
    print(json.dumps({"results_ok": results == expected_results(40), "dropped": failed}))
    """
)


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="RLIMIT_FSIZE semantics: Linux")
def test_file_size_limit_in_a_child_process_counts_export_failure(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK_CHILD, str(path), str(Path(__file__).parent)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"results_ok": True, "dropped": {"export_failure": spans_of(40)}}
    totals = _store_totals(path)
    assert totals["dropped"] == {"export_failure": spans_of(40)}
    assert totals["spans"] == spans_of(1) * 2
