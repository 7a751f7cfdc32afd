"""``python -m benchmarks.soak [--minutes 30] [--output benchmarks/results/soak.json]``: a long mixed load.

Not part of ``python -m benchmarks`` and not a CI test (``tests/reliability/test_soak_smoke.py`` runs it for a
few seconds so it keeps working). It answers two questions about a process that traces for a long time:
does every span stay accounted for, and does memory stay flat once the bounded structures are full?

**Load.** One ``otel_agentdiag.configure(store=<tmp>/traces.db, otlp_endpoint=<flapping collector>,
retention=<small limits>, capture_content=True)`` pipeline, and until the time is up:

- ``--threads`` (8) threads and ``--tasks`` (50) asyncio tasks (one event loop in its own thread) run agent
  loops through the manual wrappers: ``agent_run`` > ``iteration`` > ``llm_call`` + ``tool_call``, 1 to 5
  iterations, a simulated model and tool latency (threads 20 to 80 ms per model call, tasks 50 to 250 ms);
- half the workers record content (messages, tool arguments and results; now and then a 40 KB tool result
  that the store must shrink), the other half none;
- about one tool call in eight raises (caught by the agent, recorded as an error);
- sessions rotate: each conversation gets 1, 2, 3 or (rarely) 60 runs, then the worker starts a new one, so
  the per-session structures of the pipeline fill to their bounds early in the run;
- retention is small so pruning runs on nearly every write: per session 100 spans, 256 KiB and 120 s, per
  store 16 MiB, per span 16 KiB;
- the OTLP branch sends to a child process on 127.0.0.1 (``benchmarks._flapping_collector``) that is up for
  ``--up-seconds`` (40) and down for ``--down-seconds`` (20), each stretched by a seeded random factor of 0.5
  to 1.5: while down its port is closed, so exports are refused, retried by the SDK exporter within
  ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` (``--otlp-timeout``; the SDK's 10 s by default) and the queue fills.

**Samples**, every ``--sample-seconds`` (5): this process's ``VmRSS``, threads, open file descriptors; per
destination (``local``, ``otlp``) the queue depth, spans in flight, the cumulative observed, accepted,
rejected and dropped counts by cause, and how many sessions the ledger and the unwritten drop counts hold;
the store's file and WAL sizes, its rows, bytes and pruned rows (``store_stats``); what the collector
received.

**At the end** the workers finish their runs, the collector comes back up, the pipeline is flushed and shut
down, and the store is checked:

- identity: the spans the workers ended = what each destination observed; per destination
  ``observed = accepted + rejected + dropped`` with nothing pending; every ``session_stats`` row balances;
  their sums equal the local pipeline's totals; per session, stored - pruned - cleared = the rows left;
- ``PRAGMA integrity_check`` is ``ok``; retention bounds hold (store bytes, spans per session); no captured
  content is left without its span; the collector received at least what the OTLP branch counts accepted;
  no worker raised anything but its own tool errors;
- receipts: every session's (``session_receipts``), as counts by status and by reason code, and the store's.
  A receipt ``invalid`` for a ledger reason (``ledger_invalid``, ``stats_missing``) fails the identity;
- RSS flatness: over the samples after the warm-up (the first ``--warmup-fraction``, half, of the run), the
  least-squares slope in MiB per minute and the growth (max - min) in MiB; ``rss_flat`` is true when the
  slope is at most 0.5 MiB/min and the growth at most 16 MiB.

The report is printed and written as JSON. The exit status is 1 when a check fails (identity, integrity,
bounds, a worker error), not when RSS is not flat: that is a finding, reported as ``rss_flat: false``.

Caveats: RSS counts what the allocators keep, not what Python uses. The collector shares the machine's two
cores with the load. The thresholds are this harness's own, not a requirement of the issue beyond "flat".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sqlite3
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import otel_agentdiag as agentdiag
from benchmarks._common import save_results
from benchmarks._flapping_collector import FlappingCollector
from otel_agentdiag.diagnostics.receipt import session_receipts, store_receipt
from otel_agentdiag.storage import RetentionLimits, SpanStore

MIB = 1024 * 1024
AGENT = "soak-agent"
TOOLS = ("search_docs", "get_weather", "run_sql")
HASH_KEY = b"b733db1dc9caa5067db66f33073ab00337d117c30624812c1ef0e94a8e801b79"
RSS_SLOPE_LIMIT_MIB_PER_MIN = 0.5
RSS_GROWTH_LIMIT_MIB = 16.0
RUNS_PER_SESSION = (1, 1, 2, 2, 3, 3, 1, 2, 3, 60)
"""Runs a conversation gets before its worker starts a new one (one in ten is long, to hit the span limit)."""
LEDGER_REASONS = frozenset({"ledger_invalid", "stats_missing"})
"""Receipt reasons that mean the store's accounting does not balance."""


@dataclass(frozen=True)
class SoakConfig:
    minutes: float = 30.0
    threads: int = 8
    tasks: int = 50
    sample_seconds: float = 5.0
    up_seconds: float = 40.0
    down_seconds: float = 20.0
    otlp_timeout_s: float | None = None
    """``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` for the OTLP branch; ``None`` keeps the SDK's default (10 s)."""
    warmup_fraction: float = 0.5
    seed: int = 11
    max_session_spans: int = 100
    max_session_bytes: int = 256 * 1024
    max_session_age_s: float = 120.0
    max_store_bytes: int = 16 * MIB
    max_span_bytes: int = 16 * 1024

    def retention(self) -> RetentionLimits:
        return RetentionLimits(
            max_session_spans=self.max_session_spans,
            max_session_bytes=self.max_session_bytes,
            max_session_age_s=self.max_session_age_s,
            max_store_bytes=self.max_store_bytes,
            max_span_bytes=self.max_span_bytes,
        )


# -- measuring --------------------------------------------------------------------------------------------
def _status_value(key: bytes) -> int:
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key.decode()} in /proc/self/status (this benchmark needs Linux)")


def rss_bytes() -> int:
    """This process's resident set size now (``VmRSS``)."""
    return _status_value(b"VmRSS:")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def slope_per_minute(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(seconds, value)`` points, per minute; ``None`` with fewer than two points."""
    if len(points) < 2:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return None
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return cov / var * 60.0


class LogCounter(logging.Handler):
    """Counts log records by logger and level, keeping each distinct message template once (never its args:
    they may carry values)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()
        self.templates: dict[str, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        key = f"{record.name} {record.levelname}"
        self.counts[key] += 1
        self.templates.setdefault(key, str(record.msg)[:200])


# -- the load ---------------------------------------------------------------------------------------------
class ToolFailed(Exception):
    pass


@dataclass
class Worker:
    """One agent loop's state and tallies (each worker writes only its own, so no lock is needed)."""

    name: str
    seed: int
    content: bool
    ended: int = 0
    runs: int = 0
    sessions: int = 0
    tool_errors: int = 0
    errors: list[str] = field(default_factory=list)
    _session: str = ""
    _left: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def next_session(self) -> str:
        if self._left <= 0:
            self.sessions += 1
            self._session = f"{self.name}-conversation-{self.sessions}"
            self._left = self.rng.choice(RUNS_PER_SESSION)
        self._left -= 1
        return self._session

    def tool_result(self, tool: str, i: int) -> Any:
        if self.rng.random() < 0.02:
            return {"rows": ["x" * 100] * 400}  # about 40 KB: over the 16 KiB span limit
        return {"tool": tool, "step": i, "text": "lorem ipsum " * self.rng.randint(2, 60)}


def _messages(worker: Worker, run: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"question {run} from {worker.name}: " + "why " * worker.rng.randint(5, 150)}]


def sync_run(worker: Worker, stop: threading.Event, latency: tuple[float, float]) -> None:
    """One agent run on this thread; model and tool latency are waits on ``stop`` (they end early at the end)."""
    rng = worker.rng
    iterations = rng.randint(1, 5)
    session = worker.next_session()
    with agentdiag.agent_run(AGENT, conversation_id=session, user_id=f"user-{worker.seed % 17}") as run:
        if worker.content:
            run.record_content(input_messages=_messages(worker, worker.runs))
        for i in range(iterations):
            with agentdiag.iteration(i):
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    stop.wait(rng.uniform(*latency))
                    if worker.content:
                        call.record_content(
                            input_messages=_messages(worker, worker.runs),
                            output_messages=[{"role": "assistant", "content": "calling a tool " * 10}],
                        )
                    call.record_response(
                        response_model="gpt-4o-mini-2024-07-18",
                        response_id=f"chatcmpl-{worker.name}-{worker.runs}-{i}",
                        finish_reasons=["tool_calls"],
                        input_tokens=rng.randint(100, 4000),
                        output_tokens=rng.randint(5, 400),
                    )
                worker.ended += 1
                tool = rng.choice(TOOLS)
                arguments = {"query": f"q{i}", "limit": i} if worker.content else None
                try:
                    with agentdiag.tool_call(
                        tool, call_id=f"call-{worker.name}-{worker.runs}-{i}", arguments=arguments
                    ) as t:
                        stop.wait(rng.uniform(latency[0] / 4, latency[1] / 4))
                        if rng.random() < 0.125:
                            error = ToolFailed("upstream answered 503")
                            if worker.content:
                                t.record_result(error)
                            raise error
                        if worker.content:
                            t.record_result(worker.tool_result(tool, i))
                except ToolFailed:
                    worker.tool_errors += 1
                finally:
                    worker.ended += 1
            worker.ended += 1
        if worker.content:
            run.record_content(output_messages="done")
    worker.ended += 1
    worker.runs += 1


async def async_run(worker: Worker, latency: tuple[float, float]) -> None:
    """One agent run as an asyncio task (the same shape as :func:`sync_run`)."""
    rng = worker.rng
    iterations = rng.randint(1, 5)
    session = worker.next_session()
    with agentdiag.agent_run(AGENT, conversation_id=session, user_id=f"user-{worker.seed % 17}") as run:
        if worker.content:
            run.record_content(input_messages=_messages(worker, worker.runs))
        for i in range(iterations):
            with agentdiag.iteration(i):
                with agentdiag.llm_call(provider="anthropic", model="claude-sonnet-4") as call:
                    await asyncio.sleep(rng.uniform(*latency))
                    if worker.content:
                        call.record_content(output_messages=[{"role": "assistant", "content": "tool please " * 8}])
                    call.record_response(
                        response_model="claude-sonnet-4-20250514",
                        response_id=f"msg-{worker.name}-{worker.runs}-{i}",
                        finish_reasons=["tool_use"],
                        input_tokens=rng.randint(100, 4000),
                        output_tokens=rng.randint(5, 400),
                    )
                worker.ended += 1
                tool = rng.choice(TOOLS)
                arguments = {"city": f"city-{i}"} if worker.content else None
                try:
                    with agentdiag.tool_call(
                        tool, call_id=f"toolu-{worker.name}-{worker.runs}-{i}", arguments=arguments
                    ) as t:
                        await asyncio.sleep(rng.uniform(latency[0] / 4, latency[1] / 4))
                        if rng.random() < 0.125:
                            error = ToolFailed("tool timed out")
                            if worker.content:
                                t.record_result(error)
                            raise error
                        if worker.content:
                            t.record_result(worker.tool_result(tool, i))
                except ToolFailed:
                    worker.tool_errors += 1
                finally:
                    worker.ended += 1
            worker.ended += 1
        if worker.content:
            run.record_content(output_messages="done")
    worker.ended += 1
    worker.runs += 1


def _record_error(worker: Worker, exc: BaseException) -> None:
    if len(worker.errors) < 5:
        worker.errors.append("".join(traceback.format_exception_only(type(exc), exc)).strip()[:500])
    else:
        worker.errors.append(type(exc).__name__)


def thread_main(worker: Worker, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            sync_run(worker, stop, (0.020, 0.080))
        except Exception as exc:  # noqa: BLE001 - reported (and failed) at the end, the load goes on
            _record_error(worker, exc)


def async_main(workers: Sequence[Worker], stop: threading.Event) -> None:
    async def task(worker: Worker) -> None:
        while not stop.is_set():
            try:
                await async_run(worker, (0.050, 0.250))
            except Exception as exc:  # noqa: BLE001 - reported (and failed) at the end
                _record_error(worker, exc)

    async def everything() -> None:
        await asyncio.gather(*(task(w) for w in workers))

    asyncio.run(everything())


# -- sampling ---------------------------------------------------------------------------------------------
def _destination_sample(batching: Any) -> dict[str, Any]:
    stats = batching.stats()
    totals = stats.totals
    return {
        "queue_depth": stats.queue_depth,
        "queue_bytes": stats.queue_bytes,
        "in_flight": stats.in_flight,
        "peak_queue": stats.peak_queue,
        "observed": totals.observed,
        "accepted": totals.accepted,
        "rejected": sum(totals.rejected.values()),
        "dropped": dict(sorted(totals.dropped.items())),
        "flush_failures": stats.flush_failures,
        "ledger_sessions": len(stats.sessions),
        "evicted_sessions": stats.evicted_sessions,
        "unpersisted_drop_sessions": len(stats.unpersisted_dropped),
    }


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _store_sample(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {
        "file_bytes": _file_size(path),
        "wal_bytes": _file_size(path.with_name(path.name + "-wal")),
    }
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            row = conn.execute("SELECT span_count, total_bytes, pruned_spans FROM store_stats WHERE id = 1").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    if row is not None:
        out["spans"], out["span_bytes"], out["pruned_spans"] = (int(v) for v in row)
    return out


# -- the checks at the end --------------------------------------------------------------------------------
class Checks:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, name: str, ok: bool, detail: Any = None) -> None:
        self.items.append({"name": name, "ok": bool(ok), "detail": detail})

    @property
    def ok(self) -> bool:
        return all(item["ok"] for item in self.items)


def _query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _sum_counts(rows: Any, attribute: str) -> dict[str, int]:
    found: Counter[str] = Counter()
    for row in rows:
        for reason, n in getattr(row, attribute).items():
            found[reason] += n
    return dict(sorted(found.items()))


def check_pipeline(checks: Checks, name: str, final: dict[str, Any], pending: int, spans_ended: int) -> None:
    balanced = final["observed"] == final["accepted"] + final["rejected"] + sum(final["dropped"].values())
    checks.add(f"{name}_observed_every_span", final["observed"] == spans_ended, [final["observed"], spans_ended])
    checks.add(f"{name}_identity", balanced and pending == 0, {**final, "pending": pending})


def check_store(checks: Checks, path: Path, config: SoakConfig, local: Any) -> dict[str, Any]:
    """The store's own checks; returns its final figures and the receipts."""
    integrity = _query(path, "PRAGMA integrity_check")
    checks.add("integrity_check", integrity == [("ok",)], [r[0] for r in integrity[:5]])
    store = SpanStore(path, create=False, retention=config.retention())
    try:
        rows = store.session_stats()
        unbalanced = [
            (r.observer, r.session)
            for r in rows
            if r.observed != r.accepted + sum(r.rejected.values()) + sum(r.dropped.values())
        ]
        checks.add(
            "store_rows_balance", not unbalanced and bool(rows), {"rows": len(rows), "unbalanced": unbalanced[:5]}
        )
        observers = sorted({r.observer for r in rows})
        checks.add("store_one_observer", observers == [local.observer], observers)
        totals = local.totals
        store_totals = {
            "observed": sum(r.observed for r in rows),
            "accepted": sum(r.accepted for r in rows),
            "rejected": _sum_counts(rows, "rejected"),
            "dropped": _sum_counts(rows, "dropped"),
        }
        pipeline_totals = {
            "observed": totals.observed,
            "accepted": totals.accepted,
            "rejected": dict(sorted((k, v) for k, v in totals.rejected.items() if v)),
            "dropped": dict(sorted((k, v) for k, v in totals.dropped.items() if v)),
        }
        checks.add(
            "store_totals_equal_pipeline",
            store_totals == pipeline_totals,
            {"store": store_totals, "pipeline": pipeline_totals},
        )
        left = dict(_query(path, "SELECT coalesce(session, ''), COUNT(*) FROM spans GROUP BY 1"))
        stored = dict(_query(path, "SELECT session, SUM(stored) FROM session_stats GROUP BY session"))
        gone = {s: p + c for s, p, c in _query(path, "SELECT session, pruned_spans, cleared_spans FROM sessions")}
        mismatched = [
            s for s in set(left) | set(stored) | set(gone) if stored.get(s, 0) - gone.get(s, 0) != left.get(s, 0)
        ]
        checks.add("store_rows_accounted", not mismatched, {"sessions": len(stored), "mismatched": mismatched[:5]})

        summary = store.store_summary()
        biggest_session = _query(
            path, "SELECT coalesce(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM spans GROUP BY session)"
        )
        biggest_span = _query(path, "SELECT coalesce(MAX(size), 0) FROM spans")[0][0]
        checks.add(
            "retention_bounds",
            summary.total_bytes <= config.max_store_bytes and biggest_session[0][0] <= config.max_session_spans,
            {
                "store_bytes": summary.total_bytes,
                "max_store_bytes": config.max_store_bytes,
                "largest_session_spans": biggest_session[0][0],
                "max_session_spans": config.max_session_spans,
                "largest_span_bytes": biggest_span,
            },
        )
        orphans = _query(
            path,
            "SELECT COUNT(*) FROM span_content c WHERE NOT EXISTS"
            " (SELECT 1 FROM spans s WHERE s.trace_id = c.trace_id AND s.span_id = c.span_id)",
        )[0][0]
        content_rows = _query(path, "SELECT COUNT(*) FROM span_content")[0][0]
        checks.add("no_orphan_content", orphans == 0, {"content_rows": content_rows, "orphans": orphans})

        started = time.perf_counter()
        receipts, malformed = session_receipts(store)
        by_status = Counter(r.status for r in receipts)
        by_reason = Counter(reason for r in receipts for reason in r.reasons)
        ledger_failures = [r.session for r in receipts if LEDGER_REASONS & set(r.reasons)]
        # A session retention pruned away entirely has no stored span: ``invalid`` (README, receipt table).
        emptied = sum(1 for r in receipts if r.status == "invalid" and r.counts["spans"] == 0)
        checks.add("receipts_ledger_consistent", not ledger_failures, ledger_failures[:5])
        whole = store_receipt(store).to_json()
        receipts_seconds = time.perf_counter() - started
        return {
            "spans": summary.span_count,
            "span_bytes": summary.total_bytes,
            "pruned_spans": summary.pruned_spans,
            "pruned_bytes": summary.pruned_bytes,
            "malformed_rows": malformed,
            "sessions_with_rows": summary.session_count,
            "sessions_with_stats": len({r.session for r in rows}),
            "content_rows": content_rows,
            "file_bytes": _file_size(path),
            "wal_bytes": _file_size(path.with_name(path.name + "-wal")),
            "integrity_check": integrity[0][0] if integrity else None,
            "receipts": {
                "sessions": len(receipts),
                "by_status": dict(sorted(by_status.items())),
                "by_reason": dict(sorted(by_reason.items())),
                "invalid_no_stored_span": emptied,
                "store": whole,
                "seconds": round(receipts_seconds, 2),
            },
        }
    finally:
        store.close()


def rss_report(samples: Sequence[dict[str, Any]], warmup_s: float) -> dict[str, Any]:
    after = [(s["t"], s["rss_mib"]) for s in samples if s["t"] >= warmup_s]
    values = [v for _, v in after]
    slope = slope_per_minute(after)
    growth = max(values) - min(values) if values else None
    flat = slope is not None and growth is not None
    flat = flat and slope <= RSS_SLOPE_LIMIT_MIB_PER_MIN and growth <= RSS_GROWTH_LIMIT_MIB  # type: ignore[operator]
    return {
        "baseline_mib": samples[0]["rss_mib"] if samples else None,
        "final_mib": samples[-1]["rss_mib"] if samples else None,
        "max_mib": max(s["rss_mib"] for s in samples) if samples else None,
        "warmup_s": round(warmup_s, 1),
        "samples_after_warmup": len(after),
        "slope_mib_per_min": None if slope is None else round(slope, 3),
        "growth_after_warmup_mib": None if growth is None else round(growth, 2),
        "thresholds": {"slope_mib_per_min": RSS_SLOPE_LIMIT_MIB_PER_MIN, "growth_mib": RSS_GROWTH_LIMIT_MIB},
        "rss_flat": bool(flat),
    }


# -- the run ----------------------------------------------------------------------------------------------
def run(config: SoakConfig, *, store_dir: Path | None = None, progress: bool = True) -> dict[str, Any]:
    """Run the soak; returns the report (``checks_ok`` says whether every check passed)."""

    def say(text: str) -> None:
        if progress:
            print(text, flush=True)

    if config.otlp_timeout_s is not None:
        os.environ["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"] = str(config.otlp_timeout_s)
    log_counter = LogCounter()
    logging.getLogger().addHandler(log_counter)
    folder = tempfile.TemporaryDirectory(prefix="agentdiag-soak-") if store_dir is None else None
    root = Path(folder.name) if folder is not None else store_dir
    assert root is not None
    path = root / "traces.db"
    duration_s = config.minutes * 60.0
    checks = Checks()
    samples: list[dict[str, Any]] = []
    timeline: list[dict[str, Any]] = []
    rng = random.Random(config.seed)
    try:
        with FlappingCollector() as collector:
            diag = agentdiag.configure(
                service_name="soak",
                store=path,
                otlp_endpoint=collector.endpoint,
                hash_key=HASH_KEY,
                set_global=False,
                retention=config.retention(),
                capture_content=True,
            )
            agentdiag.register_names(tools=list(TOOLS), agents=[AGENT])
            names = [d.name for d in diag.destinations]
            batching = dict(zip(names, diag.batch_processors, strict=True))
            workers = [Worker(f"t{i}", config.seed * 1000 + i, content=i % 2 == 0) for i in range(config.threads)]
            workers += [Worker(f"a{i}", config.seed * 1000 + 500 + i, content=i % 2 == 0) for i in range(config.tasks)]
            stop = threading.Event()
            stop_flapping = threading.Event()
            started = time.monotonic()

            def flap() -> None:
                while True:
                    up_for = config.up_seconds * rng.uniform(0.5, 1.5)
                    if stop_flapping.wait(up_for):
                        return
                    collector.down()
                    timeline.append({"t": round(time.monotonic() - started, 2), "collector": "down"})
                    down_for = config.down_seconds * rng.uniform(0.5, 1.5)
                    if stop_flapping.wait(down_for):
                        return
                    collector.up()
                    timeline.append({"t": round(time.monotonic() - started, 2), "collector": "up"})

            def sample() -> dict[str, Any]:
                received = collector.count()
                return {
                    "t": round(time.monotonic() - started, 2),
                    "rss_mib": round(rss_bytes() / MIB, 2),
                    "threads": threading.active_count(),
                    "fds": open_fds(),
                    "spans_ended": sum(w.ended for w in workers),
                    "collector_up": received["up"],
                    "collector_spans": received["spans"],
                    "destinations": {name: _destination_sample(b) for name, b in batching.items()},
                    "store": _store_sample(path),
                }

            say(
                f"soak: {config.minutes:g} min, {config.threads} threads + {config.tasks} asyncio tasks, "
                f"collector {collector.endpoint} up ~{config.up_seconds:g} s / down ~{config.down_seconds:g} s"
            )
            samples.append(sample())
            threads = [
                threading.Thread(target=thread_main, args=(w, stop), name=f"soak-{w.name}", daemon=True)
                for w in workers[: config.threads]
            ]
            threads.append(
                threading.Thread(
                    target=async_main, args=(workers[config.threads :], stop), name="soak-asyncio", daemon=True
                )
            )
            flapper = threading.Thread(target=flap, name="soak-flapper", daemon=True)
            for thread in [*threads, flapper]:
                thread.start()
            tick = threading.Event()
            k = 1
            while True:
                due = min(k * config.sample_seconds, duration_s)
                tick.wait(max(due - (time.monotonic() - started), 0.0))
                samples.append(sample())
                s = samples[-1]
                queues = " ".join(f"{n}={d['queue_depth']}" for n, d in s["destinations"].items())
                say(
                    f"  t={s['t']:7.1f}s rss={s['rss_mib']:6.1f} MiB ended={s['spans_ended']} queue {queues}"
                    f" stored={s['store'].get('spans')} pruned={s['store'].get('pruned_spans')}"
                    f" collector={'up' if s['collector_up'] else 'down'}"
                )
                if due >= duration_s:
                    break
                k += 1

            stop.set()
            stop_flapping.set()
            for thread in [*threads, flapper]:
                thread.join(60)
            stuck = [t.name for t in [*threads, flapper] if t.is_alive()]
            checks.add("workers_stopped", not stuck, stuck)
            if not collector.is_up:
                collector.up()
                timeline.append({"t": round(time.monotonic() - started, 2), "collector": "up"})
            load_seconds = time.monotonic() - started
            flushed = diag.force_flush(120_000)
            checks.add("final_flush", flushed)
            diag.shutdown(30)
            spans_ended = sum(w.ended for w in workers)
            final = {name: _destination_sample(b) for name, b in batching.items()}
            finals = {name: b.stats() for name, b in batching.items()}
            for name in names:
                pending = finals[name].totals.pending
                check_pipeline(checks, name, final[name], pending, spans_ended)
            received = collector.count()
            if "otlp" in final:
                checks.add(
                    "collector_received_what_otlp_accepted",
                    received["spans"] >= final["otlp"]["accepted"],
                    {"received": received["spans"], "accepted": final["otlp"]["accepted"]},
                )
            errors = [e for w in workers for e in w.errors]
            checks.add("no_worker_exception", not errors, errors[:5])
            content = diag.content.stats() if diag.content is not None else None
        store = check_store(checks, path, config, finals["local"])
    finally:
        logging.getLogger().removeHandler(log_counter)
        if folder is not None:
            folder.cleanup()

    rss = rss_report(samples, duration_s * config.warmup_fraction)
    report: dict[str, Any] = {
        "benchmark": "soak",
        "config": asdict(config),
        "load_seconds": round(load_seconds, 1),
        "spans_ended": spans_ended,
        "runs": sum(w.runs for w in workers),
        "sessions_started": sum(w.sessions for w in workers),
        "tool_errors": sum(w.tool_errors for w in workers),
        "spans_per_second": round(spans_ended / load_seconds, 1) if load_seconds else None,
        "rss": rss,
        "destinations": final,
        "content": content,
        "collector": {
            "received_spans": received["spans"],
            "requests": received["requests"],
            "rejected_requests": received["rejected_requests"],
            "transitions": collector.transitions,
            "timeline": timeline,
        },
        "store": store,
        "log_records": {
            "counts": dict(sorted(log_counter.counts.items())),
            "templates": dict(sorted(log_counter.templates.items())),
        },
        "checks": checks.items,
        "checks_ok": checks.ok,
        "samples": samples,
    }
    return report


def summary_lines(report: dict[str, Any]) -> list[str]:
    rss = report["rss"]
    lines = [
        f"load: {report['load_seconds']} s, {report['spans_ended']} spans ended ({report['spans_per_second']}/s), "
        f"{report['runs']} runs, {report['sessions_started']} sessions, {report['tool_errors']} tool errors",
        f"RSS: baseline {rss['baseline_mib']} MiB, max {rss['max_mib']}, final {rss['final_mib']}; after the "
        f"{rss['warmup_s']} s warm-up: slope {rss['slope_mib_per_min']} MiB/min, growth "
        f"{rss['growth_after_warmup_mib']} MiB -> rss_flat={rss['rss_flat']} (limits "
        f"{rss['thresholds']['slope_mib_per_min']} MiB/min, {rss['thresholds']['growth_mib']} MiB)",
    ]
    peaks = {
        name: max(s["destinations"][name]["queue_depth"] for s in report["samples"]) for name in report["destinations"]
    }
    for name, d in report["destinations"].items():
        lines.append(
            f"{name}: observed {d['observed']}, accepted {d['accepted']}, rejected {d['rejected']}, "
            f"dropped {d['dropped'] or 0}; queue peak {d['peak_queue']} (max sampled depth {peaks[name]}), "
            f"flush failures {d['flush_failures']}"
        )
    collector = report["collector"]
    lines.append(
        f"collector: {collector['transitions']} up/down transitions, received {collector['received_spans']} spans "
        f"in {collector['requests']} requests"
    )
    store = report["store"]
    receipts = store["receipts"]
    lines.append(
        f"store: {store['spans']} spans ({store['span_bytes']} bytes, file {store['file_bytes']}, WAL "
        f"{store['wal_bytes']}), pruned {store['pruned_spans']}, integrity {store['integrity_check']}"
    )
    lines.append(
        f"receipts: {receipts['sessions']} sessions {receipts['by_status']} ({receipts['invalid_no_stored_span']} "
        f"invalid for want of any stored span: pruned away), reasons {receipts['by_reason']}; "
        f"store {receipts['store']['status']} {receipts['store']['reasons']} ({receipts['seconds']} s)"
    )
    failed = [c for c in report["checks"] if not c["ok"]]
    lines.append(f"checks: {len(report['checks']) - len(failed)}/{len(report['checks'])} ok")
    lines.extend(f"  FAILED {c['name']}: {json.dumps(c['detail'])[:600]}" for c in failed)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.splitlines()[0])
    defaults = SoakConfig()
    parser.add_argument("--minutes", type=float, default=defaults.minutes, help="length of the load (default 30)")
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument("--tasks", type=int, default=defaults.tasks, help="asyncio tasks")
    parser.add_argument("--sample-seconds", type=float, default=defaults.sample_seconds)
    parser.add_argument("--up-seconds", type=float, default=defaults.up_seconds, help="collector up, on average")
    parser.add_argument("--down-seconds", type=float, default=defaults.down_seconds, help="collector down, on average")
    parser.add_argument("--otlp-timeout", type=float, default=None, help="OTLP export timeout, s (SDK default 10)")
    parser.add_argument("--warmup-fraction", type=float, default=defaults.warmup_fraction)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--store-dir", type=Path, default=None, help="keep the store in this folder (default: a temp)")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/soak.json"))
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.sample_seconds <= 0 or not 0 <= args.warmup_fraction < 1:
        parser.error("--minutes and --sample-seconds must be positive, --warmup-fraction in [0, 1)")
    config = SoakConfig(
        minutes=args.minutes,
        threads=args.threads,
        tasks=args.tasks,
        sample_seconds=args.sample_seconds,
        up_seconds=args.up_seconds,
        down_seconds=args.down_seconds,
        otlp_timeout_s=args.otlp_timeout,
        warmup_fraction=args.warmup_fraction,
        seed=args.seed,
    )
    if args.store_dir is not None:
        args.store_dir.mkdir(parents=True, exist_ok=True)
    report = run(config, store_dir=args.store_dir)
    save_results(report, args.output)
    print()
    for line in summary_lines(report):
        print(line)
    print(f"results: {args.output}")
    return 0 if report["checks_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
