"""``python -m benchmarks.throughput [--quick] [--output PATH]``: sustained spans/s into a fresh SQLite store.

How fast the local store takes spans, next to the floor SQLite itself sets, measured in one run:

- ``exporter``: ``SQLiteSpanExporter.export(batch)`` into a fresh :class:`~otel_agentdiag.storage.SpanStore`,
  batches of 512 (the pipeline's batch size): span-to-row conversion, JSON encoding, one transaction per batch
  with the accounting upserts (``session_stats``, ``observers``) and retention checks;
- ``exporter_accounting``: the same through ``export_with_accounting(batch, Accounting(...))``, as the
  pipeline calls it (with an empty delta, as in a run where nothing was dropped);
- ``raw_executemany``: ``executemany`` of the *equivalent rows* (what the exporter stored, read back, JSON
  already encoded) into an identically-shaped database (the store's own ``CREATE TABLE``/``CREATE INDEX``
  statements, WAL, ``synchronous=NORMAL``), one ``BEGIN``/``COMMIT`` per batch of 512: the cost of the
  inserts alone.

Corpus (built once, untimed): realistic redacted agent spans. Agent runs through the manual wrappers (an
``invoke_agent`` run, iterations, chat calls with model, usage, finish reasons and response id, tool calls with
call ids) on a real ``TracerProvider`` with the pipeline's ``SessionSequencer`` and a
``RedactingSpanProcessor`` under the ``local`` policy (HMAC digests), collected in memory: the spans the
exporter receives in production. Each round uses a fresh database per variant (in the system's temporary
folder), every variant once per round in a rotating order. Figures: median spans/s (wall clock) over
rounds, min-max, and the median of per-round paired ratios ``raw/exporter``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agentdiag as agentdiag
from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.pipeline import SessionSequencer
from otel_agentdiag.redaction import IdHasher, RedactingSpanProcessor
from otel_agentdiag.redaction.policy import LOCAL
from otel_agentdiag.storage import Accounting, SpanStore
from otel_agentdiag.testing import TEST_HASH_KEY

BATCH = 512
agentdiag.register_names(tools=["get_weather", "search_docs"])


def build_corpus(runs: int, iterations: int) -> list[ReadableSpan]:
    """``runs`` agent runs of ``iterations`` steps each, redacted under the local policy."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "throughput-bench", "service.version": "1.0.0"}),
        shutdown_on_exit=False,
    )
    provider.add_span_processor(SessionSequencer())
    provider.add_span_processor(
        RedactingSpanProcessor(SimpleSpanProcessor(memory), policy=LOCAL, hasher=IdHasher(TEST_HASH_KEY))
    )
    manual.use_tracer_provider(provider)
    try:
        for run in range(runs):
            with agentdiag.agent_run("bench-agent", conversation_id=f"conversation-{run}", user_id=f"user-{run % 7}"):
                for i in range(iterations):
                    with agentdiag.iteration(i):
                        with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                            call.record_response(
                                response_model="gpt-4o-mini-2024-07-18",
                                response_id=f"chatcmpl-{run}-{i}",
                                finish_reasons=["tool_calls"],
                                input_tokens=800 + i,
                                output_tokens=40 + i,
                            )
                        tool = "get_weather" if i % 2 else "search_docs"
                        with agentdiag.tool_call(tool, call_id=f"call-{run}-{i}"):
                            pass
    finally:
        manual.use_tracer_provider(None)
        provider.shutdown()
    return list(memory.get_finished_spans())


def batches(spans: Sequence[Any]) -> list[Sequence[Any]]:
    return [spans[i : i + BATCH] for i in range(0, len(spans), BATCH)]


def run_exporter(path: Path, spans: Sequence[ReadableSpan], with_accounting: bool) -> float:
    store = SpanStore(path)
    exporter = SQLiteSpanExporter(store)
    observer = "0123456789abcdef"
    parts = batches(spans)
    start = time.perf_counter()
    for part in parts:
        if with_accounting:
            ok = exporter.export_with_accounting(part, Accounting(observer=observer, queue_limit=2048))
        else:
            ok = exporter.export(part) is SpanExportResult.SUCCESS
        if not ok:
            raise RuntimeError("the exporter failed during the benchmark")
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed


def store_shape(path: Path) -> tuple[list[str], list[str], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The store's DDL for ``spans`` and ``resources``, the stored rows and resource rows (read back)."""
    conn = sqlite3.connect(path)
    try:
        ddl = [
            sql
            for (sql,) in conn.execute(
                "SELECT sql FROM sqlite_master WHERE tbl_name IN ('spans', 'resources') AND sql IS NOT NULL"
                " ORDER BY type = 'index', name"
            )
        ]
        columns = [row[1] for row in conn.execute("PRAGMA table_info(spans)")]
        rows = conn.execute(f"SELECT {', '.join(columns)} FROM spans ORDER BY rowid").fetchall()
        resources = conn.execute("SELECT * FROM resources").fetchall()
    finally:
        conn.close()
    return ddl, columns, rows, resources


def run_raw(path: Path, shape: tuple[list[str], list[str], list[tuple[Any, ...]], list[tuple[Any, ...]]]) -> float:
    ddl, columns, rows, resources = shape
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    for statement in ddl:
        conn.execute(statement)
    if resources:
        marks = ", ".join("?" * len(resources[0]))
        conn.executemany(f"INSERT INTO resources VALUES ({marks})", resources)
    insert = f"INSERT INTO spans ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    parts = batches(rows)
    start = time.perf_counter()
    for part in parts:
        conn.execute("BEGIN")
        conn.executemany(insert, part)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def run(quick: bool) -> dict[str, Any]:
    runs, iterations, rounds = (60, 8, 5) if quick else (250, 8, 15)
    spans = build_corpus(runs, iterations)
    n = len(spans)
    results: dict[str, Any] = {"spans": n, "batch": BATCH, "rounds": rounds, "runs": runs, "iterations": iterations}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        counter = iter(range(1_000_000))

        def fresh() -> Path:
            return folder / f"db-{next(counter)}.db"

        # One untimed pass: warms up, and gives the rows the raw variant inserts.
        reference = fresh()
        run_exporter(reference, spans, with_accounting=True)
        shape = store_shape(reference)
        if len(shape[2]) != n:
            raise RuntimeError(f"expected {n} stored rows, found {len(shape[2])}")
        variants: dict[str, Callable[[], float]] = {
            "exporter": lambda: run_exporter(fresh(), spans, with_accounting=False),
            "exporter_accounting": lambda: run_exporter(fresh(), spans, with_accounting=True),
            "raw_executemany": lambda: run_raw(fresh(), shape),
        }
        names = list(variants)
        seconds: dict[str, list[float]] = {name: [] for name in names}
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                seconds[name].append(variants[name]())
    rates = {name: [n / s for s in values] for name, values in seconds.items()}
    results["spans_per_second"] = {
        name: {"median": statistics.median(values), "min": min(values), "max": max(values)}
        for name, values in rates.items()
    }
    results["raw_over_exporter"] = {
        name: statistics.median(raw / mine for raw, mine in zip(rates["raw_executemany"], rates[name], strict=True))
        for name in ("exporter", "exporter_accounting")
    }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.throughput", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="a short run (5 rounds of 1,500 spans; default 15 rounds of 6,250)"
    )
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/throughput.json"))
    args = parser.parse_args(argv)
    results = run(args.quick)
    results["python"] = sys.version.split()[0]
    results["sqlite"] = sqlite3.sqlite_version
    results["machine"] = platform.machine()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2))
    print(f"{results['spans']} spans, batches of {results['batch']}, {results['rounds']} rounds (median, min-max)")
    print(f"{'variant':<22} {'spans/s':>10} {'min':>10} {'max':>10} {'raw/this':>9}")
    for name, rate in results["spans_per_second"].items():
        ratio = results["raw_over_exporter"].get(name)
        shown = f"{ratio:>8.2f}x" if ratio is not None else f"{'':>9}"
        print(f"{name:<22} {rate['median']:>10.0f} {rate['min']:>10.0f} {rate['max']:>10.0f} {shown}")
    print(f"results: {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
