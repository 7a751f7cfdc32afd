"""``python -m benchmarks.memory [--quick] [--output PATH]``: memory stays bounded while the exporter is stalled.

The claim: when the store cannot be written (another process holds its write lock), the pipeline keeps at
most its configured queue of spans and bounded per-session tables, refuses the rest, and counts every span it
refuses; its memory does not grow with the number of sessions. Measured:

- ``stalled``: 1,000,000 spans (``--quick``: 100,000; ``--spans N``) in 3-span runs, one conversation per run
  (about 333,000 sessions), in a tight loop while the store is write-locked by another process;
- ``stalled_few``: the same spans and runs, but the runs cycle over 1,000 conversations (1,000 sessions): the
  growth of ``stalled`` over this one is what the number of sessions costs;
- ``control``: the same child code with no lock held, 100,000 spans (``--quick``: 5,000) in 25-span runs,
  paced so that the exporter keeps up (a ``force_flush`` after every 40 runs, 1,000 spans, half the queue):
  nothing may be dropped, and the growth shows what the pipeline costs when it is not stalled.

Each variant runs in a fresh child process (``python -m benchmarks.memory --child ...``), so its RSS holds
only this workload. The child builds the default pipeline with ``otel_agentdiag.configure(store=<tmp>/traces.db,
hash_key=TEST_HASH_KEY, set_global=False, tracer_provider=<a fresh SDK TracerProvider>)`` with the default
queue bounds of its ``AccountingBatchSpanProcessor`` (reported: ``max_queue_spans``, ``max_queue_bytes``,
``max_drop_sessions``). The spans are agent runs through the manual wrappers: ``agent_run`` (one conversation
per run), with eight iterations of an ``llm_call`` (model, usage, finish reasons and response id) and a
``tool_call`` (a call id), one tool call in ten failing with an exception: 25 spans per run (``control``); or,
for the stalled variants, a short run: ``agent_run``, one ``llm_call`` and one ``tool_call``, 3 spans.

Sequence (every step synchronised by the child's stdin/stdout pipes, no sleeps):

1. the child builds the pipeline, runs a warm-up of 4,000 spans (``--quick``: 2,500; paced) and checks they
   were all stored (imports, caches and first allocations are in the baseline), runs ``gc.collect()``, and
   reads its baseline RSS;
2. for ``stalled``, the parent opens the same store and takes its write lock (``BEGIN EXCLUSIVE``), and
   checks that a third connection cannot write; the exporter's ``BEGIN IMMEDIATE`` then waits its busy
   timeout and fails, so batches are retried and dropped as ``export_failure`` and the queue fills
   (``queue_full``);
3. the child ends all its spans while a thread samples ``VmRSS`` from ``/proc/self/status`` every 5 ms;
   at the end it also reads ``VmHWM`` (the kernel's exact peak for this process) and the queue's stats;
4. the parent releases the lock; the child flushes and shuts the pipeline down, then checks the accounting.

Metric: growth = peak RSS - baseline RSS, in MiB, from both the sampled ``VmRSS`` and ``VmHWM`` (which the
warm-up could only raise, so it never understates); the goal takes the larger. (Not ``ru_maxrss``: Linux keeps it
across ``exec``, so a child reports its parent's peak.)

Checks (an ERROR raises, a missed goal does not):

- the pipeline (``AccountingBatchSpanProcessor.stats()``): it observed every span the workload ended;
  ``observed == accepted + rejected + dropped`` in total and for every session it still tracks, nothing
  pending, nothing rejected by redaction; ``stalled`` dropped spans as ``queue_full``; ``control`` dropped none;
- the store: for this observer, the ``session_stats`` rows balance one by one, their sums equal the
  pipeline's totals (observed, accepted, dropped by cause), and the rows stored equal the spans accepted
  (no duplicate, nothing pruned); every row is filed under a conversation's keyed digest (never the raw id)
  and counts at most that conversation's spans, or is the observer's overflow row
  (``agentdiag:overflow``: drops of sessions beyond the pipeline's table), and the spans missing from the
  conversations' rows are exactly the overflow row's; the store's receipt is not ``invalid``, reports the
  drops and counts every span ended; when there is an overflow row, the receipt of a session whose spans
  went there is not ``valid``, gives the overflow's reasons and names its count for the observer
  (``unattributed_drops``).

Caveats:

- RSS counts what the allocator keeps, not what Python uses: freed memory that pymalloc or glibc keeps for
  reuse still counts, and memory returned to the system does not.
- Spans end here far faster than in an agent, which waits for its model: the stall is the worst case for
  drops. The control must be paced: in a tight loop the exporter does not keep up with the agent's thread
  even without a lock (on the 2-core dev VM, 20,000 spans in a loop dropped about 8% as ``queue_full``).
- Besides the queue, the pipeline keeps per-session state, bounded in sessions: the sequencer and the ledger
  (4,096 and 1,024), and the drop counts not yet written to the store (1,024 sessions, then the overflow entry);
  the report gives the number of each.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import select
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import otel_agentdiag as agentdiag
from benchmarks._common import save_results
from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.receipt import session_receipt, store_receipt
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.storage import SpanStore
from otel_agentdiag.testing import TEST_HASH_KEY

OVERFLOW_SESSION = "agentdiag:overflow"
"""``otel_agentdiag.storage.OVERFLOW_SESSION`` (spelled out: the benchmark also runs against older code)."""

PREFIX = b"@@memory "
"""Marks the child's protocol lines on its stdout (anything else printed there is ignored)."""

ITERATIONS = 8
SPANS_PER_RUN = 1 + 3 * ITERATIONS
SHORT_RUN = 3
"""Spans of a short run (``agent_run``, ``llm_call``, ``tool_call``): the stalled variants."""
FEW_SESSIONS = 1_000
"""Conversations the runs of ``stalled_few`` cycle over."""
SESSIONS_RATIO_TARGET = 1.25
PACE_RUNS = 40
"""A paced producer flushes after every 40 runs (1,000 spans, half the default queue)."""
SAMPLE_INTERVAL_S = 0.005
MIB = 1024 * 1024
MEMORY_TARGET_MIB = 64.0
SIZES = {
    "quick": {"stalled": 100_000, "control": 5_000, "warmup": 2_500},
    "full": {"stalled": 1_000_000, "control": 100_000, "warmup": 4_000},
}


# -- measuring ------------------------------------------------------------------------------------------
def rss_bytes() -> int:
    """This process's resident set size now (``VmRSS`` of ``/proc/self/status``)."""
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status (this benchmark needs Linux)")


def max_rss_bytes() -> int:
    """The peak resident set size of this process image so far (``VmHWM`` of ``/proc/self/status``).

    Not ``getrusage().ru_maxrss``: Linux carries that across ``exec`` from the parent, so a child of a big
    process (the umbrella run, after building a 1M-span store) would report the parent's peak.
    """
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status (this benchmark needs Linux)")


class RssSampler(threading.Thread):
    """Samples ``VmRSS`` every ``interval`` seconds until :meth:`stop`, keeping the peak."""

    def __init__(self, interval: float = SAMPLE_INTERVAL_S) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.interval = interval
        self.peak = rss_bytes()
        self.samples = 1
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            value = rss_bytes()
            self.samples += 1
            if value > self.peak:
                self.peak = value

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        value = rss_bytes()
        self.peak = max(self.peak, value)
        return self.peak


# -- the child: one variant in a fresh process ------------------------------------------------------------
class ToolFailed(Exception):
    pass


def conversation(run: int, cycle: int) -> str:
    """The conversation id of run ``run`` (``cycle``: how many conversations the runs cycle over; 0: one per run)."""
    return f"conversation-{run % cycle if cycle else run}"


def short_runs(first: int, runs: int, cycle: int, flush: Callable[[], bool] | None = None) -> int:
    """``runs`` 3-span runs (``agent_run``, ``llm_call``, ``tool_call``) from ``first``; returns the spans ended."""
    for run in range(first, first + runs):
        if flush is not None and run > first and (run - first) % PACE_RUNS == 0 and not flush():
            raise RuntimeError("a pacing flush did not finish within its timeout")
        with agentdiag.agent_run("memory-agent", conversation_id=conversation(run, cycle), user_id=f"user-{run % 97}"):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.record_response(
                    response_model="gpt-4o-mini-2024-07-18",
                    response_id=f"chatcmpl-{run}",
                    finish_reasons=["tool_calls"],
                    input_tokens=800,
                    output_tokens=40,
                )
            tool = "get_weather" if run % 2 else "search_docs"
            try:
                with agentdiag.tool_call(tool, call_id=f"call-{run}"):
                    if run % 10 == 0:
                        raise ToolFailed("upstream returned 503")
            except ToolFailed:
                pass
    return runs * SHORT_RUN


def agent_runs(first: int, runs: int, flush: Callable[[], bool] | None = None) -> int:
    """``runs`` agent runs numbered from ``first`` through the manual wrappers; returns the spans ended.

    With ``flush``, it is called after every ``PACE_RUNS`` runs (fewer spans than the queue holds): a paced
    producer, which the exporter keeps up with. Without it, the runs follow each other in a tight loop.
    """
    for run in range(first, first + runs):
        if flush is not None and run > first and (run - first) % PACE_RUNS == 0 and not flush():
            raise RuntimeError("a pacing flush did not finish within its timeout")
        with agentdiag.agent_run("memory-agent", conversation_id=conversation(run, 0), user_id=f"user-{run % 97}"):
            for i in range(ITERATIONS):
                with agentdiag.iteration(i):
                    with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                        call.record_response(
                            response_model="gpt-4o-mini-2024-07-18",
                            response_id=f"chatcmpl-{run}-{i}",
                            finish_reasons=["tool_calls"],
                            input_tokens=800 + 40 * i,
                            output_tokens=40 + i,
                        )
                    tool = "get_weather" if i % 2 else "search_docs"
                    try:
                        with agentdiag.tool_call(tool, call_id=f"call-{run}-{i}"):
                            if (run + i) % 10 == 0:
                                raise ToolFailed("upstream returned 503")
                    except ToolFailed:
                        pass
    return runs * SPANS_PER_RUN


def send(message: dict[str, Any]) -> None:
    sys.stdout.buffer.write(PREFIX + json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def wait_for(word: str) -> None:
    line = sys.stdin.readline().strip()
    if line != word:
        raise RuntimeError(f"expected {word!r} from the parent, got {line!r}")


def deltas_size(deltas: Mapping[str | None, Mapping[str, int]]) -> int:
    """Approximate bytes of per-session drop counts (``session -> cause -> n``): the dicts, keys and counts."""
    size = sys.getsizeof(deltas)
    for session, by_cause in deltas.items():
        size += sys.getsizeof(session) + sys.getsizeof(by_cause) + sum(sys.getsizeof(n) for n in by_cause.values())
    return size


def ledger_size(sessions: Mapping[str | None, Any]) -> int:
    """Approximate bytes of the ledger's per-session counts (measured on the copy ``stats()`` returns)."""
    size = sys.getsizeof(sessions)
    for session, counts in sessions.items():
        size += sys.getsizeof(session) + sys.getsizeof(counts) + sys.getsizeof(getattr(counts, "__dict__", None))
        size += sys.getsizeof(counts.rejected) + sys.getsizeof(counts.dropped)
    return size


def check_ledger(counts: Any, where: str) -> None:
    """``observed == accepted + rejected + dropped`` with nothing pending (a ``LedgerCounts``)."""
    settled = counts.accepted + sum(counts.rejected.values()) + sum(counts.dropped.values())
    if counts.observed != settled:
        raise AssertionError(f"{where}: observed {counts.observed} != accepted+rejected+dropped {settled}")


def child(config: dict[str, Any]) -> None:
    """One variant: warm up, report the baseline, end ``config['spans']`` spans on the parent's word, report."""
    store_path = Path(config["store"])
    spans = int(config["spans"])
    per_run = int(config.get("spans_per_run", SPANS_PER_RUN))
    cycle = int(config.get("cycle", 0))
    warmup_runs = int(config["warmup"]) // per_run
    runs = -(-spans // per_run)

    def workload(first: int, n: int, flush: Callable[[], bool] | None) -> int:
        if per_run == SHORT_RUN:
            return short_runs(first, n, cycle, flush)
        return agent_runs(first, n, flush)

    agentdiag.register_names(tools=["get_weather", "search_docs"])
    provider = TracerProvider(
        resource=Resource.create({"service.name": "memory-bench", "service.version": "1.0.0"}), shutdown_on_exit=False
    )
    diag = agentdiag.configure(store=store_path, hash_key=TEST_HASH_KEY, set_global=False, tracer_provider=provider)
    if len(diag.batch_processors) != 1:
        raise RuntimeError(f"expected the local branch alone, got {len(diag.batch_processors)} batch processors")
    batching = diag.batch_processors[0]

    def pace() -> bool:
        return diag.force_flush(60_000)

    warmup = workload(0, warmup_runs, pace)
    if not diag.force_flush(60_000):
        raise RuntimeError("the warm-up did not flush within 60 s")
    warm = batching.stats()
    if warm.totals.accepted != warmup or warm.totals.observed != warmup:
        raise AssertionError(f"warm-up: {warmup} spans ended, stats {warm.totals.as_dict()}")
    gc.collect()
    baseline = rss_bytes()
    baseline_max = max_rss_bytes()
    send({"event": "ready", "baseline_rss": baseline})

    wait_for("go")
    sampler = RssSampler()
    sampler.start()
    started = time.perf_counter()
    ended = workload(warmup_runs, runs, pace if config["paced"] else None)
    elapsed = time.perf_counter() - started
    peak_sampled = sampler.stop()
    peak_max = max_rss_bytes()
    during = batching.stats()
    redaction_during = diag.stats()["destinations"]["local"]["redaction"]
    send({"event": "ended"})

    wait_for("released")
    started_flush = time.perf_counter()
    flushed = diag.force_flush(120_000)
    flush_s = time.perf_counter() - started_flush
    if not flushed:
        raise RuntimeError("force_flush did not finish within 120 s after the lock was released")
    final = batching.stats()
    redaction = diag.stats()["destinations"]["local"]["redaction"]
    diag.shutdown()
    after = batching.stats()
    gc.collect()
    rss_after = rss_bytes()

    # -- the pipeline's accounting
    total = warmup + ended
    totals = after.totals
    check_ledger(totals, "pipeline totals")
    for session, counts in after.sessions.items():
        check_ledger(counts, f"pipeline session {session}")
    uncounted_pipeline = total - totals.observed
    if redaction["failed"] or redaction["dropped"] or totals.rejected:
        raise AssertionError(f"redaction rejected spans of a clean workload: {redaction}, {totals.rejected}")
    if after.totals.as_dict() != final.totals.as_dict():
        raise AssertionError(f"shutdown changed the counts after a complete flush: {after.totals.as_dict()}")

    # -- the store's accounting (read back by a separate connection)
    observer = after.observer
    # Every conversation's digest under the benchmark's key, and the spans it ended.
    hasher = IdHasher(TEST_HASH_KEY)
    expected: dict[str, int] = {}
    for run in range(warmup_runs + runs):
        digest = hasher.digest(sc.ID_KIND_CONVERSATION, conversation(run, cycle))
        expected[digest] = expected.get(digest, 0) + per_run
    with SpanStore(store_path, create=False) as store:
        rows = [row for row in store.session_stats() if row.observer == observer]
        other = [row.observer for row in store.session_stats() if row.observer != observer]
        summary = store.store_summary()
        observers = {info.observer: info for info in store.observers()}
        started_receipt = time.perf_counter()
        receipt = store_receipt(store)
        receipt_s = time.perf_counter() - started_receipt
        overflow_rows = [row for row in rows if row.session == OVERFLOW_SESSION]
        filed = {row.session: row.observed for row in rows if row.session != OVERFLOW_SESSION}
        # A session some of whose spans are not in its own row: they can only be in the overflow row.
        short = next((s for s, n in expected.items() if filed.get(s, 0) < n), None)
        honest = session_receipt(store, short) if short is not None and overflow_rows else None
    if other:
        raise AssertionError(f"the store holds counts of other observers: {sorted(set(other))}")
    stored_dropped: dict[str, int] = {}
    if len(overflow_rows) > 1:
        raise AssertionError(f"{len(overflow_rows)} overflow rows for one observer")
    for row in rows:
        settled = row.accepted + sum(row.rejected.values()) + sum(row.dropped.values())
        if row.observed != settled:
            raise AssertionError(f"store session {row.session}: observed {row.observed} != {settled}")
        # Each drop is filed under its own session's digest, or under the observer's overflow row.
        if row.session != OVERFLOW_SESSION and (row.session not in expected or row.observed > expected[row.session]):
            raise AssertionError(f"store session {row.session!r}: observed {row.observed}, not a conversation's")
        for cause, n in row.dropped.items():
            stored_dropped[cause] = stored_dropped.get(cause, 0) + n
    overflow_observed = sum(row.observed for row in overflow_rows)
    unfiled = sum(n - filed.get(session, 0) for session, n in expected.items())
    if unfiled != overflow_observed:
        raise AssertionError(f"{unfiled} spans missing from their sessions' rows, {overflow_observed} in the overflow")
    store_observed = sum(row.observed for row in rows)
    store_accepted = sum(row.accepted for row in rows)
    store_stored = sum(row.stored for row in rows)
    store_duplicates = sum(row.duplicates for row in rows)
    uncounted_store = total - store_observed
    mismatches = []
    if store_observed != totals.observed:
        mismatches.append(f"observed: store {store_observed}, pipeline {totals.observed}")
    if store_accepted != totals.accepted:
        mismatches.append(f"accepted: store {store_accepted}, pipeline {totals.accepted}")
    if stored_dropped != totals.dropped:
        mismatches.append(f"dropped: store {stored_dropped}, pipeline {totals.dropped}")
    if not (summary.span_count == store_stored == store_accepted) or store_duplicates or summary.pruned_spans:
        mismatches.append(
            f"rows {summary.span_count}, stored {store_stored}, accepted {store_accepted},"
            f" duplicates {store_duplicates}, pruned {summary.pruned_spans}"
        )
    if uncounted_pipeline or uncounted_store or mismatches:
        raise AssertionError(
            f"{total} spans ended; uncounted: pipeline {uncounted_pipeline}, store {uncounted_store};"
            f" {'; '.join(mismatches)}"
        )
    if receipt.status == "invalid":
        raise AssertionError(f"the store's receipt is invalid: {receipt.reasons}")
    if receipt.counts["observed"] != total or receipt.counts["dropped"] != sum(totals.dropped.values()):
        raise AssertionError(f"the store's receipt does not count every span: {receipt.counts}")
    if honest is not None:
        named = getattr(honest, "unattributed_drops", {}).get(observer)
        if "backpressure_drop" not in honest.reasons or honest.status == "valid" or named != overflow_observed:
            raise AssertionError(f"a session with drops in the overflow got {honest.to_json()}")

    info = observers.get(observer)
    send(
        {
            "event": "result",
            "spans": ended,
            "runs": runs,
            "spans_per_run": per_run,
            "warmup_spans": warmup,
            "sessions": len(expected),
            "seconds": elapsed,
            "spans_per_second": ended / elapsed,
            "flush_after_release_s": flush_s,
            "rss": {
                "baseline_mib": baseline / MIB,
                "baseline_max_mib": baseline_max / MIB,
                "peak_sampled_mib": peak_sampled / MIB,
                "peak_max_mib": peak_max / MIB,
                "growth_sampled_mib": (peak_sampled - baseline) / MIB,
                "growth_max_mib": (peak_max - baseline) / MIB,
                "after_shutdown_mib": rss_after / MIB,
                "samples": sampler.samples,
            },
            "queue": {
                "max_queue_spans": during.max_queue_spans,
                "max_queue_bytes": during.max_queue_bytes,
                "max_export_batch": batching.max_export_batch,
                "max_retries": batching.max_retries,
                "depth_at_end": during.queue_depth,
                "estimated_bytes_at_end": during.queue_bytes,
                "in_flight_at_end": during.in_flight,
                "peak_depth": after.peak_queue,
                "flush_attempts": after.flush_attempts,
                "flush_failures": after.flush_failures,
            },
            "state_at_end_of_phase": {
                "ledger_sessions": len(during.sessions),
                "ledger_approx_bytes": ledger_size(during.sessions),
                "ledger_evicted_sessions": during.evicted_sessions,
                "unwritten_drop_sessions": len(during.unpersisted_dropped),
                "max_drop_sessions": getattr(during, "max_drop_sessions", None),
                "folded_spans": getattr(during, "folded_spans", None),
                "unwritten_drop_approx_bytes": deltas_size(during.unpersisted_dropped),
                "sequencer_forgotten_sessions": diag.sequencer.forgotten if diag.sequencer else 0,
                "dropped_so_far": dict(sorted(during.totals.dropped.items())),
                "redaction": redaction_during,
            },
            "pipeline": {
                "observed": totals.observed,
                "accepted": totals.accepted,
                "rejected": dict(sorted(totals.rejected.items())),
                "dropped": dict(sorted(totals.dropped.items())),
                "uncounted": uncounted_pipeline,
                "redaction": redaction,
            },
            "store": {
                "rows": summary.span_count,
                "observed": store_observed,
                "accepted": store_accepted,
                "dropped": dict(sorted(stored_dropped.items())),
                "stats_rows": len(rows),
                "overflow_observed": overflow_observed,
                "uncounted": uncounted_store,
                "observer_peak_queue": info.peak_queue if info else None,
                "observer_queue_limit": info.queue_limit if info else None,
                "observer_flush_failures": info.flush_failures if info else None,
                "receipt": {"status": receipt.status, "reasons": list(receipt.reasons)},
                "unattributed_session_receipt": None if honest is None else honest.to_json(),
                "receipt_s": receipt_s,
            },
        }
    )


# -- the parent ---------------------------------------------------------------------------------------------
class Channel:
    """The parent's end of a child's stdin/stdout: send words, wait (bounded) for protocol messages."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log = log
        self._buffer = b""

    def send(self, word: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(word.encode() + b"\n")
        self.process.stdin.flush()

    def expect(self, event: str, timeout_s: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\n" in self._buffer:
                line, _, self._buffer = self._buffer.partition(b"\n")
                if not line.startswith(PREFIX):
                    continue
                message: dict[str, Any] = json.loads(line[len(PREFIX) :])
                if message.get("event") != event:
                    raise RuntimeError(f"expected {event!r} from the child, got {message.get('event')!r}")
                return message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"the child sent no {event!r} within {timeout_s:.0f} s{self.tail()}")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    code = self.process.wait()
                    raise RuntimeError(f"the child exited with {code} before {event!r}{self.tail()}")
                self._buffer += chunk

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return "\nchild's stderr:\n" + "\n".join(text) if text else ""


def hold_write_lock(store: Path) -> sqlite3.Connection:
    """Take the store's write lock on a connection of this process and check that nobody else can write."""
    locker = sqlite3.connect(store, isolation_level=None, timeout=30)
    try:
        locker.execute("BEGIN EXCLUSIVE")
        probe = sqlite3.connect(store, isolation_level=None, timeout=0)
        try:
            probe.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
        else:
            raise RuntimeError("another connection could still write: the store is not locked")
        finally:
            probe.close()
    except BaseException:
        locker.close()
        raise
    return locker


def run_variant(
    folder: Path, name: str, spans: int, warmup: int, stall: bool, spans_per_run: int = SPANS_PER_RUN, cycle: int = 0
) -> dict[str, Any]:
    """One variant in a fresh child process; returns its result message plus the parent's timings."""
    work = folder / name
    work.mkdir()
    store = work / "traces.db"
    log = work / "child.log"
    config = json.dumps(
        {
            "store": str(store),
            "spans": spans,
            "warmup": warmup,
            "paced": not stall,
            "spans_per_run": spans_per_run,
            "cycle": cycle,
        }
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    root = Path(__file__).resolve().parent.parent
    started = time.perf_counter()
    locker: sqlite3.Connection | None = None
    with open(log, "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.memory", "--child", config],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=root,
            env=env,
        )
    channel = Channel(process, log)
    try:
        channel.expect("ready", 120)
        if stall:
            locker = hold_write_lock(store)
        locked_at = time.perf_counter()
        channel.send("go")
        channel.expect("ended", 300 + spans / 1000)
        if locker is not None:
            locker.execute("ROLLBACK")
            locker.close()
            locker = None
        held_s = time.perf_counter() - locked_at
        channel.send("released")
        result = channel.expect("result", 300)
        code = process.wait(60)
        if code != 0:
            raise RuntimeError(f"the child exited with {code}{channel.tail()}")
    finally:
        if locker is not None:
            locker.close()
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()
    lines = log.read_text(errors="replace").replace(str(folder), "<tmp>").splitlines()
    result.pop("event")
    result["variant"] = name
    result["lock_held_s"] = held_s if stall else 0.0
    result["child_wall_s"] = time.perf_counter() - started
    result["child_log"] = {"lines": len(lines), "first": [line[:200] for line in lines[:8]]}
    return result


def run(quick: bool, spans: int | None = None) -> dict[str, Any]:
    sizes = dict(SIZES["quick" if quick else "full"])
    if spans is not None:
        sizes["stalled"] = spans
    results: dict[str, Any] = {
        "sizes": sizes,
        "spans_per_run": {"control": SPANS_PER_RUN, "stalled": SHORT_RUN, "stalled_few": SHORT_RUN},
        "few_sessions": FEW_SESSIONS,
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        control = run_variant(folder, "control", sizes["control"], sizes["warmup"], stall=False)
        stalled = run_variant(folder, "stalled", sizes["stalled"], sizes["warmup"], stall=True, spans_per_run=SHORT_RUN)
        few = run_variant(
            folder, "stalled_few", sizes["stalled"], sizes["warmup"], True, spans_per_run=SHORT_RUN, cycle=FEW_SESSIONS
        )
    results["variants"] = {"control": control, "stalled": stalled, "stalled_few": few}
    results["seconds"] = time.perf_counter() - started

    if control["pipeline"]["dropped"]:
        raise AssertionError(f"control: the exporter kept up, yet spans were dropped: {control['pipeline']['dropped']}")
    for name, variant in (("stalled", stalled), ("stalled_few", few)):
        if not variant["pipeline"]["dropped"].get("queue_full"):
            raise AssertionError(f"{name}: no queue_full drop, so the stall did not bite: {variant['pipeline']}")
        if "backpressure_drop" not in variant["store"]["receipt"]["reasons"]:
            raise AssertionError(f"{name}: the receipt does not report the drops: {variant['store']['receipt']}")

    def growth_of(variant: dict[str, Any]) -> float:
        rss = variant["rss"]
        return float(max(rss["growth_sampled_mib"], rss["growth_max_mib"]))

    growth = growth_of(stalled)
    growth_few = growth_of(few)
    ratio = growth / growth_few if growth_few > 0 else float("inf")
    extra_sessions = stalled["sessions"] - few["sessions"]
    results["growth_per_1k_sessions_kib"] = (growth - growth_few) * 1024 / (extra_sessions / 1000)
    uncounted = max(abs(v["pipeline"]["uncounted"]) + abs(v["store"]["uncounted"]) for v in (control, stalled, few))
    results["goals"] = [
        {
            "id": "memory_growth_stalled_mib",
            "what": f"peak RSS growth over baseline, {stalled['spans']:,} spans with the store write-locked (MiB)",
            "value": growth,
            "target": MEMORY_TARGET_MIB,
            "op": "<=",
            "met": growth <= MEMORY_TARGET_MIB,
        },
        {
            "id": "memory_growth_sessions_ratio",
            "what": f"peak RSS growth with {stalled['sessions']:,} sessions over growth with {few['sessions']:,},"
            f" {stalled['spans']:,} spans each in 3-span runs, store write-locked",
            "value": ratio,
            "target": SESSIONS_RATIO_TARGET,
            "op": "<=",
            "met": ratio <= SESSIONS_RATIO_TARGET,
        },
        {
            "id": "drops_counted",
            "what": "spans ended but not counted as accepted, rejected or dropped (pipeline and store)",
            "value": float(uncounted),
            "target": 0.0,
            "op": "<=",
            "met": uncounted <= 0,
        },
    ]
    return results


def versions() -> dict[str, str]:
    found = {"python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version}
    for package in ("opentelemetry-sdk", "otel-agentdiag"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "unknown"
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (100,000 stalled spans; default 1,000,000)")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/memory.json"))
    parser.add_argument("--spans", type=int, help="spans of the stalled variant (overrides the default)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(json.loads(args.child))
        return 0
    results = run(args.quick, args.spans)
    results.update(versions())
    results["machine"] = {"arch": platform.machine(), "cpus": os.cpu_count(), "system": platform.system()}
    save_results(results, args.output)

    print(
        f"{'variant':<11} {'spans':>9} {'sessions':>8} {'s':>6} {'baseline':>9} {'growth VmRSS':>13}"
        f" {'growth VmHWM':>14} {'peak queue':>11} {'accepted':>9}  dropped"
    )
    for name, v in results["variants"].items():
        rss = v["rss"]
        print(
            f"{name:<11} {v['spans']:>9,} {v['sessions']:>8,} {v['seconds']:>6.1f} {rss['baseline_mib']:>6.1f}MiB"
            f" {rss['growth_sampled_mib']:>10.1f}MiB {rss['growth_max_mib']:>11.1f}MiB"
            f" {v['queue']['peak_depth']:>11,} {v['pipeline']['accepted']:>9,}  {v['pipeline']['dropped']}"
        )
    queue = results["variants"]["stalled"]["queue"]
    print(f"queue bound: {queue['max_queue_spans']:,} spans, {queue['max_queue_bytes'] / MIB:.0f} MiB estimated")
    for name in ("stalled", "stalled_few"):
        state = results["variants"][name]["state_at_end_of_phase"]
        print(
            f"{name}, end of phase: {state['unwritten_drop_sessions']:,} sessions with unwritten drop counts"
            f" (~{state['unwritten_drop_approx_bytes'] / MIB:.1f} MiB; bound {state['max_drop_sessions']},"
            f" {state['folded_spans']} spans folded into the overflow), {state['ledger_sessions']:,} ledger sessions"
            f" (~{state['ledger_approx_bytes'] / MIB:.1f} MiB)"
        )
    print(f"growth per 1,000 more sessions: {results['growth_per_1k_sessions_kib']:.1f} KiB")
    for goal in results["goals"]:
        verdict = "met" if goal["met"] else "MISSED"
        print(f"goal {goal['id']}: {goal['value']:.1f} {goal['op']} {goal['target']:g}: {verdict}")
    print(f"results: {args.output} ({results['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
