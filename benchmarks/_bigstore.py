"""A realistic agent-span corpus and a large prefilled trace store, shared by the store benchmarks.

:func:`build_corpus` renders agent runs through the manual wrappers on a real ``TracerProvider`` with the
pipeline's ``SessionSequencer`` and a ``RedactingSpanProcessor`` (``local`` policy, HMAC digests), collected in
memory: the spans ``SQLiteSpanExporter`` receives in production. A run is one trace and one session. Shapes
(``shape=``, :data:`SHAPES`):

- ``mixed`` (the default): an ``invoke_agent`` span, 4 to 16 iterations, each with a chat call (model, usage,
  finish reasons, response id) and a tool call (call id); every fifth run has one failing tool call (ERROR
  status, an ``exception`` event with the type and fingerprint the policy keeps). 13 to 49 spans per trace, 31
  on average;
- ``runs25``: the run span and 8 iterations of (iteration, chat, tool): 25 spans per trace;
- ``runs3``: the run span with one chat call and one tool call right under it (no iteration span), the
  smallest realistic agent run: 3 spans per trace. A 1,000,000-span store of them holds 333,000 sessions.

In both fixed shapes run ``n % 10 == 5`` has a failing tool call that the agent recovers from, and run
``n % 10 == 0`` fails: its last tool call raises through the run span (ERROR on both).

:func:`build_store` makes a store that already holds about ``spans`` spans, fast:

1. a seed corpus (``seed_runs`` runs) is written through the real ``SQLiteSpanExporter`` with accounting,
   into a seed store: the rows, the resource, the ledger (``session_stats``, ``observers``) and the
   bookkeeping (``sessions``, ``store_stats``) exactly as the exporter writes them;
2. the big store is created by ``SpanStore`` (so by the migrations), and the seed is replicated into it with
   SQL, oldest copy first, in one transaction: every copy gets fresh trace ids, span ids (parents mapped
   alike) and session digests (also inside the ``attributes`` JSON; same length, so ``size`` holds), and is
   shifted back in time by 10 minutes per copy; the newest copy is the seed itself. The ledger and
   ``sessions`` rows are replicated per copy the same way, ``store_stats`` is recounted. The secondary
   indexes of ``spans`` are dropped during the load and recreated from their own SQL afterwards;
3. when the library keeps write-time summary tables (``otel_agentdiag.storage.summaries.rebuild_summaries``
   exists; imported with a guard, so the builder works on code without them), they are recomputed from the
   rows on the big store's connection (with migration 13, that includes every row's ``orphan`` flag: an
   anti-join of the rows against the key, about 3 s per 100,000 spans of 3-span runs);
4. the file is left in WAL mode with its WAL checkpointed (empty), so that it can be copied as one file, and
   flushed to disk (so that writing it back does not compete with what is timed next).

The result is a store the library reads as consistent: every session's receipt is ``valid`` (one observer,
sequence numbers 0..n-1 per session, ``observed = accepted = stored``), ``agentdiag status``, ``show`` and
``traces`` work on it. Caveats: event timestamps inside the ``events`` JSON are not shifted with their span;
the secondary indexes are freshly built (densely packed pages) rather than grown by random inserts, so the
first writes into them split more pages than in a store that grew over weeks.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import random
import shutil
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agentdiag as agentdiag
from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.pipeline import SessionSequencer
from otel_agentdiag.redaction import IdHasher, RedactingSpanProcessor
from otel_agentdiag.redaction.presets import LOCAL
from otel_agentdiag.storage import Accounting, SpanStore
from otel_agentdiag.testing import TEST_HASH_KEY

BATCH = 512
"""The pipeline's batch size (``AccountingBatchSpanProcessor`` default)."""
COPY_SPACING_NS = 600 * 1_000_000_000
"""Each older copy of the seed is shifted back by this much."""
TOOLS = ("get_weather", "search_docs")
agentdiag.register_names(tools=list(TOOLS))


class ToolFailed(Exception):
    """Raised by the failing tool call of every fifth run."""


@dataclass(frozen=True)
class Corpus:
    spans: list[ReadableSpan]
    observer: str
    """The ``SessionSequencer``'s observer id: what the pipeline's accounting names."""
    traces: int


SHAPES = ("mixed", "runs25", "runs3")
"""Run shapes of :func:`build_corpus`: ``mixed`` (13 to 49 spans per run), ``runs25`` (25), ``runs3`` (3)."""


def _mixed_run(run: int, label: str) -> None:
    iterations = 4 + (run * 7) % 13
    failing = run % 5 == 0
    with agentdiag.agent_run("bench-agent", conversation_id=f"{label}-{run}", user_id=f"user-{run % 7}"):
        for i in range(iterations):
            with agentdiag.iteration(i):
                _chat(label, run, i)
                try:
                    with agentdiag.tool_call(TOOLS[i % 2], call_id=f"call-{label}-{run}-{i}"):
                        if failing and i == 1:
                            raise ToolFailed("the tool timed out")
                except ToolFailed:
                    pass


def _chat(label: str, run: int, i: int) -> None:
    with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
        call.record_response(
            response_model="gpt-4o-mini-2024-07-18",
            response_id=f"chatcmpl-{label}-{run}-{i}",
            finish_reasons=["tool_calls"],
            input_tokens=800 + 40 * i,
            output_tokens=40 + i,
        )


def _fixed_run(run: int, label: str, iterations: int) -> None:
    """One run of a fixed shape: ``iterations`` x (iteration, chat, tool) under the run, or (``iterations`` = 0)
    one chat and one tool call right under the run. Run ``n % 10 == 5``: one tool call fails and the agent goes
    on; ``n % 10 == 0``: the last tool call fails and the run fails with it (ERROR on the run span)."""
    recovered, fatal = run % 10 == 5, run % 10 == 0
    steps = max(iterations, 1)
    try:
        with agentdiag.agent_run("bench-agent", conversation_id=f"{label}-{run}", user_id=f"user-{run % 7}"):
            for i in range(steps):
                with agentdiag.iteration(i) if iterations else contextlib.nullcontext():
                    _chat(label, run, i)
                    try:
                        with agentdiag.tool_call(TOOLS[i % 2], call_id=f"call-{label}-{run}-{i}"):
                            if (recovered and i == min(1, steps - 1)) or (fatal and i == steps - 1):
                                raise ToolFailed("the tool timed out")
                    except ToolFailed:
                        if fatal:
                            raise
    except ToolFailed:
        pass


def build_corpus(runs: int, *, label: str, first_run: int = 0, shape: str = "mixed") -> Corpus:
    """``runs`` agent runs (one trace and one session each; conversation ids ``{label}-{n}``), redacted.

    ``shape`` (one of :data:`SHAPES`) is the shape of every run; see :func:`run_spans`.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown run shape {shape!r}")
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "store-bench", "service.version": "1.0.0"}),
        shutdown_on_exit=False,
    )
    sequencer = SessionSequencer()
    provider.add_span_processor(sequencer)
    provider.add_span_processor(
        RedactingSpanProcessor(SimpleSpanProcessor(memory), policy=LOCAL, hasher=IdHasher(TEST_HASH_KEY))
    )
    manual.use_tracer_provider(provider)
    try:
        for run in range(first_run, first_run + runs):
            if shape == "mixed":
                _mixed_run(run, label)
            else:
                _fixed_run(run, label, 8 if shape == "runs25" else 0)
    finally:
        manual.use_tracer_provider(None)
        provider.shutdown()
    spans = list(memory.get_finished_spans())
    expected = sum(run_spans(run, shape) for run in range(first_run, first_run + runs))
    if len(spans) != expected:
        raise RuntimeError(f"{runs} runs of shape {shape} made {len(spans)} spans, not {expected}")
    return Corpus(spans=spans, observer=sequencer.observer_id, traces=runs)


def batches(spans: Sequence[Any], size: int = BATCH) -> list[Sequence[Any]]:
    return [spans[i : i + size] for i in range(0, len(spans), size)]


def accounting_for(observer: str) -> Accounting:
    """The accounting of a pipeline that dropped nothing (as ``AccountingBatchSpanProcessor`` sends it)."""
    return Accounting(observer=observer, peak_queue=BATCH, queue_limit=2048, started_ns=time.time_ns())


def export_corpus(store: SpanStore, corpus: Corpus) -> None:
    """Write the corpus through ``SQLiteSpanExporter.export_with_accounting``, batches of :data:`BATCH`."""
    exporter = SQLiteSpanExporter(store)
    for part in batches(corpus.spans):
        if not exporter.export_with_accounting(part, accounting_for(corpus.observer)):
            raise RuntimeError("the exporter failed while writing the seed corpus")


@dataclass(frozen=True)
class BigStore:
    path: Path
    shape: str
    """The shape of its runs (:data:`SHAPES`)."""
    summaries: bool
    """Whether write-time summary tables were rebuilt after the load (the library has them)."""
    spans: int
    traces: int
    sessions: int
    copies: int
    seed_spans: int
    seconds: float
    """Wall time of the whole build (seed corpus, seed export, replication, indexes, checks)."""
    phases: dict[str, float]
    """Wall seconds per phase: ``corpus``, ``seed_export``, ``replicate``, ``indexes``, ``commit``,
    ``summaries``, ``finish``."""
    file_bytes: int


def _summaries_rebuilder() -> Callable[[sqlite3.Connection], object] | None:
    """``otel_agentdiag.storage.summaries.rebuild_summaries`` when the library has it (None on older code)."""
    try:
        summaries = importlib.import_module("otel_agentdiag.storage.summaries")
    except ImportError:
        return None
    rebuild = getattr(summaries, "rebuild_summaries", None)
    return rebuild if callable(rebuild) else None


def _signed64(hex_text: str) -> int:
    value = int(hex_text, 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def _xor(a: str, b: str) -> str:
    """SQL for ``a XOR b`` on 64-bit integers (no arithmetic, so nothing overflows into a float)."""
    return f"(({a}) | ({b})) & ~(({a}) & ({b}))"


def run_spans(run: int, shape: str = "mixed") -> int:
    """Spans of run number ``run`` of :func:`build_corpus`: the run, and per iteration itself, a chat, a tool
    (``mixed``: 4 to 16 iterations; ``runs25``: 8); ``runs3``: the run, one chat, one tool call."""
    if shape == "runs3":
        return 3
    if shape == "runs25":
        return 25
    return 1 + 3 * (4 + (run * 7) % 13)


def seed_runs_for(spans: int, shape: str = "mixed") -> int:
    """The fewest runs of ``shape`` (from run 0) that make at least ``spans`` spans."""
    runs, total = 0, 0
    while total < spans:
        total += run_spans(runs, shape)
        runs += 1
    return runs


def _fresh_session(session: str, rng: random.Random) -> str:
    """Another digest of the same shape and length: the hex part after the last ``:`` replaced."""
    head, _, digest = session.rpartition(":")
    if not digest or any(c not in "0123456789abcdef" for c in digest):
        raise RuntimeError(f"unexpected session digest shape: {session[:40]}...")
    return f"{head}:{rng.getrandbits(4 * len(digest)):0{len(digest)}x}"


def build_store(path: Path, spans: int, *, seed_runs: int | None = None, run_shape: str = "mixed") -> BigStore:
    """A store at ``path`` (must not exist) holding at least ``spans`` spans: whole copies of a seed corpus.

    The seed is ``seed_runs`` runs of ``run_shape`` (one of :data:`SHAPES`; default: 100 runs, or fewer when
    fewer make ``spans``). When the library keeps write-time summary tables
    (``otel_agentdiag.storage.summaries.rebuild_summaries``), they are rebuilt from the rows after the load.
    """
    started = time.perf_counter()
    if path.exists():
        raise FileExistsError(path)
    if seed_runs is None:
        seed_runs = min(100, seed_runs_for(spans, run_shape))
    seed_path = path.with_name(path.name + ".seed")
    phases: dict[str, float] = {}
    mark = started

    def phase(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        phases[name] = now - mark
        mark = now

    corpus = build_corpus(seed_runs, label="history", shape=run_shape)
    phase("corpus")
    seed_store = SpanStore(seed_path)
    try:
        export_corpus(seed_store, corpus)
    finally:
        seed_store.close()
    SpanStore(path).close()  # the schema, through the migrations
    phase("seed_export")

    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = OFF").fetchall()
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -1048576")  # 1 GiB: the random-key autoindex stays in memory
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("ATTACH DATABASE ? AS seed", (str(seed_path),))
        columns = [row[1] for row in conn.execute("PRAGMA seed.table_info(spans)")]
        if columns[:3] != ["trace_id", "span_id", "parent_span_id"]:
            raise RuntimeError(f"unexpected spans columns: {columns[:3]}")
        seed_rows = conn.execute(
            "SELECT rowid, trace_id, span_id, parent_span_id, session, start_ns FROM seed.spans ORDER BY rowid"
        ).fetchall()
        seed_n = len(seed_rows)
        if seed_n != len(corpus.spans):
            raise RuntimeError(f"the seed store holds {seed_n} spans, expected {len(corpus.spans)}")
        starts = [row[5] for row in seed_rows]
        if max(starts) - min(starts) >= COPY_SPACING_NS:
            raise RuntimeError("the seed corpus spans more time than the spacing of its copies")
        traces = sorted({row[1] for row in seed_rows})
        sessions = sorted({row[4] for row in seed_rows if row[4]})
        if len(sessions) != seed_runs or len(traces) != seed_runs:
            raise RuntimeError(f"expected {seed_runs} traces and sessions in the seed: {len(traces)}, {len(sessions)}")
        if conn.execute("SELECT COUNT(*) FROM seed.session_stats WHERE rejected <> '{}' OR dropped <> '{}'").fetchone()[
            0
        ]:
            raise RuntimeError("the seed ledger has rejections or drops; copies would not add them up")

        conn.execute("BEGIN")
        # Per copy: a new id for each seed trace and session (tmap, smap); span ids XOR a random mask (so
        # parents map alike); the seed's own columns for everything else.
        conn.execute("CREATE TEMP TABLE tmap (old TEXT PRIMARY KEY, new TEXT NOT NULL)")
        conn.execute("CREATE TEMP TABLE smap (old TEXT PRIMARY KEY, new TEXT NOT NULL)")
        conn.execute("CREATE TEMP TABLE ids (r INTEGER PRIMARY KEY, sid INTEGER NOT NULL, pid INTEGER)")
        conn.executemany(
            "INSERT INTO ids VALUES (?, ?, ?)",
            [(row[0], _signed64(row[2]), None if row[3] is None else _signed64(row[3])) for row in seed_rows],
        )
        derived = {
            "start_ns": "s.start_ns - :dt",
            "end_ns": "s.end_ns - :dt",
            "session": "coalesce(m.new, s.session)",
            "attributes": "CASE WHEN m.new IS NULL THEN s.attributes ELSE replace(s.attributes, m.old, m.new) END",
        }
        copy_spans = (
            f"INSERT INTO main.spans ({', '.join(columns)}) SELECT t.new, printf('%016x', {_xor('x.sid', ':mask')}),"
            f" CASE WHEN x.pid IS NULL THEN NULL ELSE printf('%016x', {_xor('x.pid', ':mask')}) END, "
            + ", ".join(derived.get(name, f"s.{name}") for name in columns[3:])
            + " FROM ids x JOIN seed.spans s ON s.rowid = x.r JOIN tmap t ON t.old = s.trace_id"
            " LEFT JOIN smap m ON m.old = s.session ORDER BY x.r"
        )
        copy_stats = (
            "INSERT INTO main.session_stats (observer, session, observed, accepted, stored, duplicates, rejected,"
            " dropped) SELECT t.observer, coalesce(m.new, t.session), t.observed, t.accepted, t.stored, t.duplicates,"
            " t.rejected, t.dropped FROM seed.session_stats t LEFT JOIN smap m ON m.old = t.session WHERE true"
            " ON CONFLICT (observer, session) DO UPDATE SET observed = observed + excluded.observed,"
            " accepted = accepted + excluded.accepted, stored = stored + excluded.stored,"
            " duplicates = duplicates + excluded.duplicates"
        )
        copy_sessions = (
            "INSERT INTO main.sessions (session, span_count, bytes)"
            " SELECT coalesce(m.new, t.session), t.span_count, t.bytes"
            " FROM seed.sessions t LEFT JOIN smap m ON m.old = t.session WHERE true"
            " ON CONFLICT (session) DO UPDATE SET span_count = span_count + excluded.span_count,"
            " bytes = bytes + excluded.bytes"
        )
        conn.execute("INSERT INTO main.resources SELECT * FROM seed.resources")
        conn.execute("INSERT INTO main.observers SELECT * FROM seed.observers")
        secondary = conn.execute(
            "SELECT name, sql FROM main.sqlite_master WHERE type = 'index' AND tbl_name = 'spans' AND sql IS NOT NULL"
        ).fetchall()
        for name, _sql in secondary:
            conn.execute(f'DROP INDEX main."{name}"')
        copies = max(1, math.ceil(spans / seed_n))
        rng = random.Random(0x5EED)
        for c in range(copies):
            newest = c == copies - 1  # the seed itself
            conn.execute("DELETE FROM tmap")
            conn.execute("DELETE FROM smap")
            conn.executemany(
                "INSERT INTO tmap VALUES (?, ?)",
                [(old, old if newest else f"{rng.getrandbits(128):032x}") for old in traces],
            )
            conn.executemany(
                "INSERT INTO smap VALUES (?, ?)",
                [(old, old if newest else _fresh_session(old, rng)) for old in sessions],
            )
            mask = 0 if newest else rng.getrandbits(64) - (1 << 63)
            conn.execute(copy_spans, {"mask": mask, "dt": (copies - 1 - c) * COPY_SPACING_NS})
            conn.execute(copy_stats)
            conn.execute(copy_sessions)
        phase("replicate")
        for _name, sql in secondary:
            conn.execute(sql)
        phase("indexes")
        conn.execute(
            "UPDATE main.store_stats SET span_count = (SELECT COUNT(*) FROM main.spans),"
            " total_bytes = (SELECT coalesce(SUM(size), 0) FROM main.spans) WHERE id = 1"
        )
        conn.execute("COMMIT")
        phase("commit")
        rebuild = _summaries_rebuilder()
        if rebuild is not None:
            rebuild(conn)
            if conn.in_transaction:
                conn.execute("COMMIT")
        phase("summaries")
    finally:
        conn.close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] != "wal":
            raise RuntimeError("the big store could not switch back to WAL")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        total = conn.execute("SELECT span_count FROM store_stats WHERE id = 1").fetchone()[0]
        ledger = conn.execute(
            "SELECT SUM(observed), SUM(accepted), SUM(stored), COUNT(*) FROM session_stats"
        ).fetchone()
        booked = conn.execute("SELECT SUM(span_count), COUNT(*) FROM sessions").fetchone()
    finally:
        conn.close()
    seed_path.unlink()
    for suffix in ("-wal", "-shm"):
        Path(f"{seed_path}{suffix}").unlink(missing_ok=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # the build's pages on disk now, not written back during the timed work that follows
    finally:
        os.close(fd)
    expected = copies * seed_n
    phase("finish")
    if total != expected or ledger[:3] != (expected, expected, expected) or booked[0] != expected:
        raise RuntimeError(f"inconsistent big store: {total} rows, ledger {ledger}, sessions {booked}, not {expected}")
    if ledger[3] != copies * seed_runs or booked[1] != copies * seed_runs:
        raise RuntimeError(f"expected {copies * seed_runs} sessions, the ledger has {ledger[3]}, sessions {booked[1]}")
    return BigStore(
        path=path,
        shape=run_shape,
        summaries=_summaries_rebuilder() is not None,
        spans=expected,
        traces=copies * seed_runs,
        sessions=copies * seed_runs,
        copies=copies,
        seed_spans=seed_n,
        seconds=time.perf_counter() - started,
        phases=phases,
        file_bytes=path.stat().st_size,
    )


def copy_store(source: Path, target: Path) -> Path:
    """Copy a store built by :func:`build_store` (its WAL is empty: the database file is the whole store), and
    flush the copy to disk, as the file of a store in use would be."""
    for suffix in ("-wal", "-shm"):
        wal = Path(f"{source}{suffix}")
        if suffix == "-wal" and wal.exists() and wal.stat().st_size:
            raise RuntimeError(f"{source} has an uncheckpointed WAL")
    shutil.copyfile(source, target)
    os.chmod(target, 0o600)  # as the store keeps its files (it warns about, and tightens, a looser mode)
    # On disk before use: otherwise the first checkpoint's fsync writes back the whole copy, inside the timing.
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return target


def remove_store(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
