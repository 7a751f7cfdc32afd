"""The read-path benchmark's store builder and checks: fixed-shape stores read as consistent, and a wrong answer
or a call past its timeout is caught (``benchmarks/_bigstore.py``, ``benchmarks/read_path.py``).

No timing is asserted: these test what the benchmark relies on, on real SQLite files through the real CLI.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from benchmarks import read_path
from benchmarks._bigstore import build_store, run_spans, seed_runs_for
from otel_agentdiag.testing import TEST_HASH_KEY


@pytest.mark.parametrize(("shape", "per_run"), [("runs25", 25), ("runs3", 3)])
def test_a_fixed_shape_store_holds_whole_runs_of_that_shape_and_reads_as_valid(
    tmp_path: Path, shape: str, per_run: int
) -> None:
    seed = seed_runs_for(200, shape)
    assert seed * per_run >= 200 > (seed - 1) * per_run
    store = build_store(tmp_path / "s.db", 3 * seed * per_run, seed_runs=seed, run_shape=shape)
    assert (store.spans, store.traces, store.sessions, store.copies) == (3 * seed * per_run, 3 * seed, 3 * seed, 3)
    assert all(run_spans(n, shape) == per_run for n in range(20))
    conn = sqlite3.connect(store.path)
    try:
        per_trace = {n for (n,) in conn.execute("SELECT COUNT(*) FROM spans GROUP BY trace_id")}
        failed_runs = conn.execute(
            "SELECT COUNT(*) FROM spans WHERE parent_span_id IS NULL AND status = 'error'"
        ).fetchone()[0]
    finally:
        conn.close()
    assert per_trace == {per_run}
    assert failed_runs == 3 * len([n for n in range(seed) if n % 10 == 0])
    code, out = read_path.agentdiag(["receipt", "--store", str(store.path)])
    assert code == 0 and out.splitlines()[0].endswith(": valid"), out
    assert f"spans stored {store.spans} " in out


def test_every_item_passes_its_checks_on_a_small_store_and_a_wrong_answer_does_not(tmp_path: Path) -> None:
    (tmp_path / "hash.key").write_bytes(TEST_HASH_KEY)
    (tmp_path / "hash.key").chmod(0o600)
    store = build_store(tmp_path / "s.db", 300, seed_runs=seed_runs_for(300, "runs3"), run_shape="runs3")
    items = list(read_path.CLI_ITEMS) + read_path.server_queries()
    target = read_path.Target(store, items)
    for item in items:
        wall, cpu = target.run(item)
        assert wall > 0 and cpu > 0
    assert not target.work.exists()  # the copy a mutating item worked on is gone
    code, out = read_path.agentdiag(target.args["traces"])
    assert code == 0
    with pytest.raises(RuntimeError, match="first row not the newest trace"):
        target.check("traces", code, out.replace(target.trace_id, "0" * 32))
    code, out = read_path.agentdiag(target.args["receipt_store"])
    with pytest.raises(RuntimeError, match="spans stored"):
        target.check("receipt_store", code, out.replace(f"spans stored {store.spans} ", "spans stored 1 "))
    with pytest.raises(RuntimeError, match="exit code 1"):
        target.check("show", 1, "")
    with pytest.raises(RuntimeError, match="pruned"):
        target.check("prune", 0, f"pruned {read_path.PRUNED + 1} span(s), 5 byte(s) from x")


def test_a_probe_returns_the_call_s_own_figures_and_stops_a_call_past_its_timeout() -> None:
    assert read_path.probe(lambda: (0.25, 0.125), timeout=60) == ((0.25, 0.125), False)

    def forever() -> tuple[float, float]:
        while True:
            pass

    (wall, cpu), killed = read_path.probe(forever, timeout=0.2)
    assert killed and wall == 0.2 and cpu >= 0
    with pytest.raises(RuntimeError, match="probe failed: error ZeroDivisionError"):
        read_path.probe(lambda: (1 / 0, 0.0), timeout=60)
