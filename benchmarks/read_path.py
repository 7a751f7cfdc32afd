"""``python -m benchmarks.read_path [--quick] [--output PATH]``: ``agentdiag show``/``status``, 1k vs 1M spans.

Whether reading one trace or one session's health costs the same in a big store as in a small one (indexes,
not scans), measured in one run:

- ``show``: ``agentdiag show TRACE --store S`` (text), TRACE = the most recent trace (the trace of the span
  that started last), given in full;
- ``status``: ``agentdiag status --store S`` (text): the session with the newest activity, its receipt and its
  run-health projection;
- ``traces`` (secondary, no goal): ``agentdiag traces --limit 20 --store S``.

Each is timed as one in-process call of the CLI's entry (``otel_agentdiag.cli.cli.main``, standalone mode, so
argument parsing, opening the store with its checks, the queries, rendering and the exit code are all in;
stdout goes to a buffer), with ``perf_counter``. The interpreter's start-up and imports are not: they would
hide the difference. Stores: ``small`` holds about 1,000 spans; ``big`` about 1,000,000 (``--quick``: 100,000),
both from :func:`benchmarks._bigstore.build_store` with the same seed size, so their most recent trace and
session have the same shape (the newest copy of the seed is the seed itself). Every (command, store) pair is
warmed up once; then each repetition runs every command on both stores, small and big in an order that
alternates, the commands in an order that rotates. Figures: median seconds per (command, store) with min-max,
and per command the median over repetitions of the paired ratio ``big / small``; goals
``read_show_1m_vs_1k`` and ``read_status_1m_vs_1k``: ratio <= 2.

Checks (raise on failure): exit code 0 for every call; ``show`` prints a header and one line per span of the
trace (its span count, read from the database); ``status`` names the session of the most recent trace and
prints its projection; ``traces`` prints a header and 20 rows, the first being the most recent trace.

Caveats: both stores are in the OS page cache (built just before; a cold cache adds disk reads to every
command, more so in a big file); the big store's indexes were built in bulk (see ``benchmarks/_bigstore.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._bigstore import BigStore, build_store, run_spans
from benchmarks._common import save_results
from otel_agentdiag.cli import cli

GOAL = 2.0
SMALL = 1_000
TRACES_LIMIT = 20


def agentdiag(args: list[str]) -> tuple[int, str]:
    """Run the ``agentdiag`` command in this process: (exit code, stdout)."""
    out = io.StringIO()
    code: Any = 0
    with contextlib.redirect_stdout(out):
        try:
            cli.main(args=args, prog_name="agentdiag")
        except SystemExit as exc:
            code = exc.code
    return (0 if code is None else int(code)), out.getvalue()


def newest_trace(path: Path) -> tuple[str, str, int]:
    """(trace id, session, span count) of the trace of the span that started last."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        trace_id, session = conn.execute(
            "SELECT trace_id, session FROM spans ORDER BY start_ns DESC, trace_id LIMIT 1"
        ).fetchone()
        (count,) = conn.execute("SELECT COUNT(*) FROM spans WHERE trace_id = ?", (trace_id,)).fetchone()
    finally:
        conn.close()
    return str(trace_id), str(session), int(count)


class Target:
    """One store and the commands timed on it, with the checks of their output."""

    def __init__(self, store: BigStore) -> None:
        self.store = store
        self.trace_id, self.session, self.trace_spans = newest_trace(store.path)
        path = str(store.path)
        self.commands = {
            "show": ["show", self.trace_id, "--store", path],
            "status": ["status", "--store", path],
            "traces": ["traces", "--limit", str(TRACES_LIMIT), "--store", path],
        }

    def run(self, command: str) -> float:
        start = time.perf_counter()
        code, out = agentdiag(self.commands[command])
        elapsed = time.perf_counter() - start
        self.check(command, code, out)
        return elapsed

    def check(self, command: str, code: int, out: str) -> None:
        lines = out.splitlines()
        where = f"agentdiag {command} on {self.store.spans:,} spans"
        if code != 0:
            raise RuntimeError(f"{where}: exit code {code}")
        if command == "show":
            if len(lines) != self.trace_spans + 1 or not lines[0].startswith(f"trace {self.trace_id}"):
                raise RuntimeError(f"{where}: {len(lines)} lines for a trace of {self.trace_spans} spans")
            if f"  {self.trace_spans} spans  " not in lines[0]:
                raise RuntimeError(f"{where}: unexpected header {lines[0]!r}")
        elif command == "status":
            if not lines or lines[0] != f"session {self.session}" or not lines[1].strip().startswith("stage:"):
                raise RuntimeError(f"{where}: unexpected output {lines[:2]!r}")
        elif len(lines) != TRACES_LIMIT + 1 or not lines[1].startswith(self.trace_id):
            raise RuntimeError(f"{where}: {len(lines)} lines, first row {lines[1:2]!r}")


def run(quick: bool) -> dict[str, Any]:
    big_spans, repetitions = (100_000, 9) if quick else (1_000_000, 21)
    started = time.perf_counter()
    # The seed that makes the small store, reused for the big one: same shape of the newest trace and session.
    seed_runs, total = 0, 0
    while total < SMALL:
        total += run_spans(seed_runs)
        seed_runs += 1
    results: dict[str, Any] = {"repetitions": repetitions, "seed_runs": seed_runs}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        stores = {
            "small": build_store(folder / "small.db", SMALL, seed_runs=seed_runs),
            "big": build_store(folder / "big.db", big_spans, seed_runs=seed_runs),
        }
        targets = {name: Target(store) for name, store in stores.items()}
        results["stores"] = {
            name: {
                "spans": t.store.spans,
                "traces": t.store.traces,
                "sessions": t.store.sessions,
                "file_bytes": t.store.file_bytes,
                "build_seconds": t.store.seconds,
                "build_phases_seconds": t.store.phases,
                "shown_trace_spans": t.trace_spans,
            }
            for name, t in targets.items()
        }
        if targets["small"].trace_spans != targets["big"].trace_spans:
            raise RuntimeError("the most recent traces of the two stores differ in shape")
        commands = list(targets["small"].commands)
        for command in commands:  # warm-up
            for target in targets.values():
                target.run(command)
        seconds: dict[str, dict[str, list[float]]] = {c: {"small": [], "big": []} for c in commands}
        for r in range(repetitions):
            order = commands[r % len(commands) :] + commands[: r % len(commands)]
            sizes = ("small", "big") if r % 2 == 0 else ("big", "small")
            for command in order:
                for size in sizes:
                    seconds[command][size].append(targets[size].run(command))
    results["seconds"] = {
        command: {size: {"median": statistics.median(v), "min": min(v), "max": max(v)} for size, v in by_size.items()}
        for command, by_size in seconds.items()
    }
    ratios = {
        command: statistics.median(b / s for b, s in zip(by_size["big"], by_size["small"], strict=True))
        for command, by_size in seconds.items()
    }
    results["big_over_small"] = ratios
    big = results["stores"]["big"]["spans"]
    small = results["stores"]["small"]["spans"]
    results["goals"] = [
        {
            "id": f"read_{command}_1m_vs_1k",
            "what": f"agentdiag {command}: time on {big:,} spans over time on {small:,} spans",
            "value": ratios[command],
            "target": GOAL,
            "op": "<=",
            "met": ratios[command] <= GOAL,
        }
        for command in ("show", "status")
    ]
    results["total_seconds"] = time.perf_counter() - started
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.read_path", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run (1,000 vs 100,000 spans, 9 repetitions; default 1,000 vs 1,000,000, 21)",
    )
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/read_path.json"))
    args = parser.parse_args(argv)
    results = run(args.quick)
    save_results(results, args.output)
    stores = results["stores"]
    for name, store in stores.items():
        print(
            f"{name}: {store['spans']:,} spans, {store['traces']:,} traces, {store['file_bytes'] / 2**20:.1f} MiB,"
            f" built in {store['build_seconds']:.1f} s"
        )
    print(f"{results['repetitions']} repetitions; median ms [min-max]; ratio = median of paired big/small")
    print(f"{'command':<8} {'small':>22} {'big':>22} {'big/small':>10}")
    for command, by_size in results["seconds"].items():
        cells = [f"{v['median'] * 1e3:7.2f} [{v['min'] * 1e3:.2f}-{v['max'] * 1e3:.2f}]" for v in by_size.values()]
        print(f"{command:<8} {cells[0]:>22} {cells[1]:>22} {results['big_over_small'][command]:>9.2f}x")
    for goal in results["goals"]:
        verdict = "met" if goal["met"] else "MISSED"
        print(f"goal {goal['id']}: {goal['value']:.2f} {goal['op']} {goal['target']} ({verdict})")
    print(f"took {results['total_seconds']:.1f} s; results: {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
