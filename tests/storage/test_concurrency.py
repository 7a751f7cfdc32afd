"""Concurrent writers (threads on one store; processes with their own stores on one file): the ledger holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from storage_helpers import check_ledger, row, stats_rows

from otel_agentdiag.storage import Accounting, RetentionLimits, SpanStore


def test_threads_writing_and_reading_one_store(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    errors: list[BaseException] = []
    done = threading.Event()
    with SpanStore(path, retention=RetentionLimits(max_session_spans=40)) as store:

        def writer(n: int) -> None:
            try:
                for b in range(20):
                    base = 100_000 * n + 10 * b
                    rows = [row(base + k, session=f"s{k % 3}", observer=f"{n:016x}") for k in range(10)]
                    store.write_batch(rows, Accounting(observer=f"{n:016x}", dropped={"s0": {"queue_full": 1}}))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        def reader() -> None:
            try:
                while not done.is_set():
                    store.list_sessions()
                    store.store_summary()
                    store.session_stats()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        watcher = threading.Thread(target=reader)
        watcher.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        done.set()
        watcher.join(timeout=120)
        assert errors == []
        assert not any(t.is_alive() for t in [*threads, watcher])
        stats = stats_rows(path)
        for n in range(4):
            observer = f"{n:016x}"
            assert sum(s["stored"] for (o, _s), s in stats.items() if o == observer) == 200
            assert stats[(observer, "s0")]["dropped"] == {"queue_full": 20}
        assert {s.session: s.span_count for s in store.list_sessions()} == {"s0": 40, "s1": 40, "s2": 40}
    check_ledger(path)


WRITER = textwrap.dedent(
    """
    import json, sys
    from storage_helpers import row
    from otel_agentdiag.storage import Accounting, RetentionLimits, SpanStore

    path, n = sys.argv[1], int(sys.argv[2])
    observer = f"{n:016x}"
    sys.stdin.readline()  # start together
    inserted = pruned = 0
    with SpanStore(path, busy_timeout=30, retention=RetentionLimits(max_session_spans=50, max_store_bytes=60_000)) as s:
        for b in range(30):
            rows = [row(100_000 * n + 10 * b + k, session=f"s{k % 3}", observer=observer) for k in range(10)]
            result = s.write_batch(rows, Accounting(observer=observer, dropped={"s1": {"shutdown": 1}}))
            inserted += result.inserted
            pruned += result.pruned
    print(json.dumps([inserted, pruned]))
    """
)


def test_processes_writing_one_file(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    SpanStore(path).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(3)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], [err for _out, err in outputs]
    results = [json.loads(out) for out, _err in outputs]
    assert [inserted for inserted, _pruned in results] == [300, 300, 300]
    check_ledger(path)
    stats = stats_rows(path)
    with SpanStore(path, create=False) as store:
        summary = store.store_summary()
        assert summary.pruned_spans == sum(pruned for _inserted, pruned in results) > 0
        assert summary.span_count == 900 - summary.pruned_spans
        assert summary.total_bytes <= 60_000
        assert all(s.span_count <= 50 for s in store.list_sessions())
    for n in range(3):
        assert stats[(f"{n:016x}", "s1")]["dropped"] == {"shutdown": 30}
