"""``python -m benchmarks.read_path [--quick] [--output PATH]``: every read of the store, 1k vs 1M spans.

Whether each command that reads the store, and each query the trace server will make, costs the same in a big
store as in a small one (indexes and summaries kept at write time, not scans), measured in one run. Timed items
(``--store S`` and the default text output unless said):

- ``traces``: ``agentdiag traces --limit 20``; the 20 newest traces;
- ``show``: ``agentdiag show TRACE``, TRACE = the most recent trace (of the span that started last), in full;
- ``sessions``: ``agentdiag sessions --limit 20`` (when the CLI has ``--limit``; before that, the whole list:
  ``agentdiag sessions``, the only form there is);
- ``status``: ``agentdiag status``: the session with the newest activity, its receipt and run-health projection;
- ``receipt_session``: ``agentdiag receipt --session S``, S = the newest session (of the most recent trace);
- ``receipt_store``: ``agentdiag receipt``: the whole store's receipt;
- ``export_session``: ``agentdiag export --session S --out F`` (the default format: a support bundle);
- ``export_otlp_session``: ``agentdiag export --session S --format otlp-json --out F``;
- ``prune``: ``agentdiag prune --max-store-bytes B`` with B = the store's bytes minus those of its 100 oldest
  spans, so that it removes exactly the 100 oldest spans on both sizes (the other limits at their defaults,
  which prune nothing here), then rewrites the file as the command does;
- ``clear``: ``agentdiag clear --session S --yes``: one session of one run, the same shape on both sizes;
- ``runs``, ``runs_page2``: ``SpanStore(path, read_only=True).list_runs(limit=20, agent="bench-agent",
  status=..., since_ns=..., until_ns=...)``: the first page, and the next one through its keyset cursor
  (``before=``), of the runs of the last 5 minutes before the newest span (the newest copy of the seed: the
  same runs on both sizes), status ``error`` for ``runs_status`` (the runs that failed, over all time);
- ``conversations``: ``SpanStore(path, read_only=True).list_conversations(limit=20)``;
- ``group_by_sessions``: the baseline of the store's receipt, not a command: ``SELECT session, count(*) FROM spans
  GROUP BY session`` on a read-only connection to the same file, every row fetched.

The server's queries are timed only where the library has them (``hasattr``); elsewhere they are reported as
not available. Pages are 20 rows (not the server's 50): a 1k store of 25-span runs holds 40 runs, two full pages.

Each CLI call is one in-process call of the CLI's entry (``otel_agentdiag.cli.cli.main``, standalone mode, so
argument parsing, opening the store with its checks, the queries, rendering and the exit code are all in; stdout
goes to a buffer), timed with ``perf_counter``; the interpreter's start-up and imports are not (they would hide
the difference). ``prune`` and ``clear`` change the store: each of their calls gets a fresh copy of it
(:func:`benchmarks._bigstore.copy_store`, untimed, flushed to disk first), removed after.

Stores: for each run shape, ``runs25`` (the run span and 8 iterations of iteration, chat and tool: 25 spans per
run) and ``runs3`` (run span, one chat and one tool call: 3 spans per run, so a 1,000,000-span store holds
333,000 sessions), a ``small`` store of about 1,000 spans and a ``big`` one of about 1,000,000 (``--quick``:
100,000), both from :func:`benchmarks._bigstore.build_store` with the same seed, so their newest trace and
session are the same (the newest copy of the seed is the seed itself). The store's hash key (``hash.key``) is
beside them, as in a real store, so ``export`` keeps the store's digests.

Clocks: every call is timed twice, as wall time (``perf_counter``) and as this process's CPU time
(``process_time``: user and system time of every thread, so SQLite's work and the kernel's copying of pages are
in; time spent waiting for a core that another process holds is not). The goals use CPU time: on a shared
machine, a wall-clock call of a few milliseconds is often stretched tenfold by a neighbour, which would swamp
the ratio; the wall ratios are reported next to them.

Method: every (shape, item) is warmed up once on the small store in this process, and probed once on the big
store in a forked child that is killed after ``timeout`` wall seconds (``--quick`` 4 s, full 60 s): so that the
run ends in reasonable time on code where a whole-store read takes minutes. An item whose probe is killed is
not run on the big store again: its figure is the CPU time the child had used when it was stopped (from
``wait4``), so its ratio is a lower bound, reported as such (``>``, ``lower_bound``). An item whose probe took
more than ``budget`` wall seconds (``--quick`` 2 s, full 20 s) keeps the probe as its one big-store timing,
against the small store's median. Then each repetition (``--quick`` up to 11, full 21) runs every other item on
both stores, small and big in an order that alternates, the items in an order that rotates; an item is
repeated only as often as ``budget`` seconds of its probe time allow (at least once; the small store at least 3
times). Figures: median CPU and wall seconds per (shape, item, store) with min-max, and per (shape, item) the
median over repetitions of the paired ratio ``big / small``, for each clock. Goals ``read_<item>_1m_vs_1k``
(``read_show_1m_vs_1k``, ``read_status_1m_vs_1k``, ``read_sessions_1m_vs_1k``, ...): the worse of the two
shapes' CPU ratios <= 2 (each shape's ratios are in the results and the printed table; the goal carries the
wall ratio of that shape as ``wall``; a goal whose value is a lower bound says so in ``what`` and has
``lower_bound`` true). The server's queries that the library does not have yet get no goal (a goal's value
must be a number): they are listed in ``not_available``. ``receipt_store`` reads every session (issue 35: no
figures kept at write time), so its cost follows the store; its second goal, ``read_receipt_store_vs_group_by_1m``,
is the CPU time of ``agentdiag receipt`` on the big store over that of ``group_by_sessions`` on the same file (the
median of the ratios paired by repetition; the worse shape) <= 3; ``group_by_sessions`` itself has no goal.

Checks (raise on failure, so a fast wrong answer cannot pass): exit code 0 for every call; ``show`` prints a
header and one line per span of the trace; ``status`` names the newest session and prints its stage;
``traces`` prints 20 rows, the first the most recent trace; ``sessions`` prints the expected number of rows, the
first the newest session; ``receipt`` is ``valid`` for the newest session and for the store, with the store's
span count; each export says it wrote the session's spans and its file holds them; ``prune`` pruned exactly
100 spans and ``clear`` deleted the session's spans; ``list_runs`` returns full pages, the first starting with
the newest run, the second disjoint from it; ``list_conversations`` a full page, the first the newest session.

Caveats: every store is in the OS page cache (built just before; a cold cache adds disk reads to every command,
more so in a big file); the big store's indexes were built in bulk (see ``benchmarks/_bigstore.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import select
import signal
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._bigstore import BigStore, build_store, copy_store, remove_store, seed_runs_for
from benchmarks._common import save_results
from otel_agentdiag.cli import cli
from otel_agentdiag.storage import SpanStore
from otel_agentdiag.testing import TEST_HASH_KEY

GOAL = 2.0
SMALL = 1_000
SHAPES = ("runs25", "runs3")
LIMIT = 20
"""Rows of ``traces``, ``sessions`` and every page of the server's queries."""
PRUNED = 100
"""Spans ``prune`` removes on both sizes: the oldest."""
AGENT = "bench-agent"
WINDOW_NS = 300 * 1_000_000_000
"""The time range of ``runs``: this long before the newest span (half the spacing of the seed's copies)."""
CLI_ITEMS = (
    "traces",
    "show",
    "sessions",
    "status",
    "receipt_session",
    "receipt_store",
    "export_session",
    "export_otlp_session",
    "prune",
    "clear",
)
SERVER_ITEMS = ("runs", "runs_page2", "runs_status", "conversations")
BASELINE_ITEMS = ("group_by_sessions",)
"""Timed like the others, for a goal measured against them in the same run."""
MUTATING = frozenset({"prune", "clear"})
STORE_RECEIPT_GOAL = 3.0
GROUP_BY = "SELECT session, count(*) FROM spans GROUP BY session"


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


def cli_has_option(command: str, option: str) -> bool:
    return any(option in getattr(p, "opts", ()) for p in cli.commands[command].params)


def server_queries() -> list[str]:
    """The server's queries the library has (``SpanStore.list_runs``, ``list_conversations``)."""
    have = []
    if hasattr(SpanStore, "list_runs"):
        have += ["runs", "runs_page2", "runs_status"]
    if hasattr(SpanStore, "list_conversations"):
        have.append("conversations")
    return have


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _rows(page: Any) -> list[Any]:
    """The rows of a page the server's queries return (a list, or an object with ``items``/``runs``/...)."""
    if isinstance(page, (list, tuple)):
        return list(page)
    for name in ("items", "runs", "conversations", "rows"):
        rows = _field(page, name)
        if rows is not None:
            return list(rows)
    raise RuntimeError(f"unexpected page type {type(page).__name__}")


def _cursor(page: Any, rows: list[Any]) -> Any:
    """The keyset cursor for the page after ``page``: its own (``next_before``/``before``/``cursor``), or the
    last row's (``cursor``/``key``, else ``(start_ns, trace_id)``)."""
    for name in ("next_before", "next_cursor", "before", "cursor"):
        value = None if isinstance(page, (list, tuple)) else _field(page, name)
        if value is not None:
            return value
    last = rows[-1]
    for name in ("cursor", "key"):
        value = _field(last, name)
        if value is not None:
            return value
    return (_field(last, "start_ns"), _field(last, "trace_id"))


class Target:
    """One store and the items timed on it, with the checks of their output."""

    def __init__(self, store: BigStore, items: list[str]) -> None:
        self.store = store
        path = store.path
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            self.trace_id, self.session, newest_start = conn.execute(
                "SELECT trace_id, session, start_ns FROM spans ORDER BY start_ns DESC, trace_id LIMIT 1"
            ).fetchone()
            (self.trace_spans,) = conn.execute(
                "SELECT COUNT(*) FROM spans WHERE trace_id = ?", (self.trace_id,)
            ).fetchone()
            (self.session_spans,) = conn.execute(
                "SELECT COUNT(*) FROM spans WHERE session = ?", (self.session,)
            ).fetchone()
            (total_bytes,) = conn.execute("SELECT total_bytes FROM store_stats WHERE id = 1").fetchone()
            (oldest_bytes,) = conn.execute(
                "SELECT SUM(size) FROM (SELECT size FROM spans ORDER BY start_ns, rowid LIMIT ?)", (PRUNED,)
            ).fetchone()
            (newest_end,) = conn.execute("SELECT MAX(end_ns) FROM spans").fetchone()
        finally:
            conn.close()
        self.window = (int(newest_start) - WINDOW_NS, int(newest_end) + 1)
        self.sessions_limited = cli_has_option("sessions", "--limit")
        self.sessions_rows = min(LIMIT, store.sessions) if self.sessions_limited else store.sessions
        self.work = path.with_name(path.stem + ".work.db")
        self.out = path.with_name(path.stem + ".export.json")
        s, p, o = self.session, str(path), str(self.out)
        self.args = {
            "traces": ["traces", "--limit", str(LIMIT), "--store", p],
            "show": ["show", self.trace_id, "--store", p],
            "sessions": ["sessions", "--store", p] + (["--limit", str(LIMIT)] if self.sessions_limited else []),
            "status": ["status", "--store", p],
            "receipt_session": ["receipt", "--session", s, "--store", p],
            "receipt_store": ["receipt", "--store", p],
            "export_session": ["export", "--session", s, "--out", o, "--store", p],
            "export_otlp_session": ["export", "--session", s, "--format", "otlp-json", "--out", o, "--store", p],
            "prune": ["prune", "--max-store-bytes", str(int(total_bytes) - int(oldest_bytes)), "--store"],
            "clear": ["clear", "--session", s, "--yes", "--store"],
        }
        self.items = items
        self.page1: list[Any] | None = None

    # -- the server's queries ------------------------------------------------------------------------------------

    def _runs(self, **kwargs: Any) -> tuple[Any, list[Any]]:
        with SpanStore(self.store.path, read_only=True) as store:
            page = store.list_runs(limit=LIMIT, **kwargs)  # type: ignore[attr-defined]
            return page, _rows(page)

    def _server(self, item: str) -> Callable[[], Any]:
        since, until = self.window
        filters = {"agent": AGENT, "since_ns": since, "until_ns": until}
        if item == "runs":
            return lambda: self._runs(**filters)
        if item == "runs_page2":
            page, rows = self._runs(**filters)  # untimed: the cursor
            before = _cursor(page, rows)
            return lambda: self._runs(before=before, **filters)
        if item == "runs_status":
            return lambda: self._runs(status="error")

        def conversations() -> Any:
            with SpanStore(self.store.path, read_only=True) as store:
                page = store.list_conversations(limit=LIMIT)  # type: ignore[attr-defined]
                return page, _rows(page)

        return conversations

    # -- one timed call ------------------------------------------------------------------------------------------

    def group_by(self) -> Timing:
        wall, cpu = time.perf_counter(), time.process_time()
        conn = sqlite3.connect(f"file:{self.store.path}?mode=ro", uri=True)
        try:
            rows = conn.execute(GROUP_BY).fetchall()
        finally:
            conn.close()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if sum(n for _session, n in rows) != self.store.spans:
            raise RuntimeError(f"group_by_sessions on {self.store.spans:,} spans: counted {len(rows)} groups wrong")
        return wall, cpu

    def run(self, item: str, *, fresh: bool = True) -> Timing:
        """One call of ``item``: its (wall, CPU) seconds (checked). A mutating item works on a fresh copy of the
        store (made here unless ``fresh`` is False: then the caller made it, :meth:`prepare`), removed after."""
        if item in BASELINE_ITEMS:
            return self.group_by()
        if item in SERVER_ITEMS:
            call = self._server(item)
            wall, cpu = time.perf_counter(), time.process_time()
            result = call()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            self.check_server(item, result)
            return wall, cpu
        args = self.args[item]
        if item in MUTATING:
            if fresh:
                self.prepare(item)
            args = [*args, str(self.work)]
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            code, out = agentdiag(args)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            self.check(item, code, out)
        finally:
            if item in MUTATING:
                remove_store(self.work)
        return wall, cpu

    def prepare(self, item: str) -> None:
        """A fresh copy of the store for a mutating ``item`` (nothing for the others)."""
        if item in MUTATING:
            remove_store(self.work)
            copy_store(self.store.path, self.work)

    def check(self, item: str, code: int, out: str) -> None:
        lines = out.splitlines()
        where = f"agentdiag {item} on {self.store.spans:,} spans of {self.store.shape}"

        def fail(why: str) -> RuntimeError:
            return RuntimeError(f"{where}: {why}; output {lines[:3]!r}")

        if code != 0:
            raise fail(f"exit code {code}")
        if item == "show":
            if len(lines) != self.trace_spans + 1 or not lines[0].startswith(f"trace {self.trace_id}"):
                raise fail(f"{len(lines)} lines for a trace of {self.trace_spans} spans")
            if f"  {self.trace_spans} spans  " not in lines[0]:
                raise fail("unexpected header")
        elif item == "status":
            if len(lines) < 2 or lines[0] != f"session {self.session}" or not lines[1].strip().startswith("stage:"):
                raise fail("not the newest session's status")
        elif item == "traces":
            if len(lines) != LIMIT + 1 or not lines[1].startswith(self.trace_id):
                raise fail(f"{len(lines)} lines, the first row not the newest trace")
        elif item == "sessions":
            first = lines[1].split()[0] if len(lines) > 1 else ""
            if len(lines) != self.sessions_rows + 1 or len(first) < 20 or not self.session.startswith(first):
                raise fail(f"{len(lines)} lines for {self.sessions_rows} sessions, or the first not the newest")
        elif item == "receipt_session":
            if lines[:1] != [f"receipt for session {self.session}: valid"]:
                raise fail("not the newest session's valid receipt")
        elif item == "receipt_store":
            if not lines or not lines[0].startswith("receipt for the store ") or not lines[0].endswith(": valid"):
                raise fail("not a valid store receipt")
            if not any(line.strip().startswith(f"spans stored {self.store.spans} ") for line in lines):
                raise fail(f"not {self.store.spans} spans stored")
        elif item in ("export_session", "export_otlp_session"):
            self.check_export(item, out, fail)
        elif item == "prune":
            if not out.startswith(f"pruned {PRUNED} span(s), "):
                raise fail(f"not {PRUNED} spans pruned")
        elif item == "clear":
            if out.strip() != f"cleared session {self.session}: {self.session_spans} span(s) deleted":
                raise fail(f"not {self.session_spans} spans of the session cleared")

    def check_export(self, item: str, out: str, fail: Callable[[str], RuntimeError]) -> None:
        data = json.loads(self.out.read_text())
        self.out.unlink()
        n = self.session_spans
        if item == "export_session":
            if f": {n} span(s) of 1 session(s); omitted 0" not in out or len(data.get("sessions", ())) != 1:
                raise fail(f"not a bundle of the session's {n} spans")
            if data["sessions"][0].get("session") != self.session:
                raise fail("the bundle holds another session")
        else:
            spans = sum(len(ss["spans"]) for rs in data["resourceSpans"] for ss in rs["scopeSpans"])
            ids = {s["traceId"] for rs in data["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]}
            if f": {n} span(s); omitted 0" not in out or spans != n or len(ids) != 1:
                raise fail(f"{spans} spans of {len(ids)} traces written, not {n} of one")

    def check_server(self, item: str, result: Any) -> None:
        _page, rows = result
        where = f"{item} on {self.store.spans:,} spans of {self.store.shape}"
        if item == "runs_status":
            if not rows or len(rows) > LIMIT:
                raise RuntimeError(f"{where}: {len(rows)} rows")
            for row in rows:
                status = _field(row, "status")
                if status is not None and str(status).lower() not in ("error", "2"):
                    raise RuntimeError(f"{where}: a run of status {status!r}")
            return
        if len(rows) != LIMIT:
            raise RuntimeError(f"{where}: {len(rows)} rows, not {LIMIT}")
        if item in ("runs", "runs_page2"):
            ids = [_field(row, "trace_id") for row in rows]
            if item == "runs":
                self.page1 = ids
                if ids[0] is not None and ids[0] != self.trace_id:
                    raise RuntimeError(f"{where}: the first run is not the newest trace")
            elif self.page1 is not None and set(ids) & set(self.page1):
                raise RuntimeError(f"{where}: the second page repeats runs of the first")
        else:
            first = _field(rows[0], "session")
            if first is not None and first != self.session:
                raise RuntimeError(f"{where}: the first conversation is not the newest session")


Timing = tuple[float, float]
"""(wall seconds, CPU seconds of this process) of one call."""
CLOCKS = ("cpu", "wall")


def probe(call: Callable[[], Timing], timeout: float) -> tuple[Timing, bool]:
    """``call()`` in a forked child, killed after ``timeout`` wall seconds: ``(its timing, False)``, or when
    killed ``((timeout, CPU seconds the child had used), True)``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, and never return into the caller's code
        os.close(read)
        try:
            message = "ok {} {}".format(*call())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
            message = f"error {type(exc).__name__}: {exc}"
        os.write(write, message.encode()[:60000])
        os._exit(0)
    os.close(write)
    killed = False
    chunks = []
    try:
        ready, _, _ = select.select([read], [], [], timeout)
        if ready:
            while chunk := os.read(read, 65536):
                chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
            killed = True
    finally:
        os.close(read)
        _pid, _status, usage = os.wait4(pid, 0)
    if killed:
        return (timeout, usage.ru_utime + usage.ru_stime), True
    text = b"".join(chunks).decode()
    if not text.startswith("ok "):
        raise RuntimeError(f"probe failed: {text or 'the child died without a word'}")
    wall, cpu = text[3:].split()
    return (float(wall), float(cpu)), False


def seconds_figures(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _ratio(big: list[Timing], small: list[Timing], paired: bool, clock: int) -> float:
    """Median of the paired ratios big / small (``paired``), else the one big figure over the small median."""
    if paired:
        return statistics.median(b[clock] / s[clock] for b, s in zip(big, small[: len(big)], strict=True))
    return big[0][clock] / statistics.median(s[clock] for s in small)


def run(quick: bool, shapes: tuple[str, ...] = SHAPES) -> dict[str, Any]:
    big_spans, repetitions, timeout, budget = (100_000, 11, 4.0, 2.0) if quick else (1_000_000, 21, 60.0, 20.0)
    started = time.perf_counter()
    items = list(CLI_ITEMS) + server_queries() + list(BASELINE_ITEMS)
    results: dict[str, Any] = {
        "repetitions": repetitions,
        "timeout_seconds": timeout,
        "budget_seconds": budget,
        "shapes": list(shapes),
        "items": items,
        "not_available": [i for i in SERVER_ITEMS if i not in items],
        "sessions_limited": cli_has_option("sessions", "--limit"),
        "stores": {},
    }
    timings: dict[str, dict[str, dict[str, list[Timing]]]] = {}
    probes: dict[str, dict[str, tuple[Timing, bool]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        key = folder / "hash.key"
        key.write_bytes(TEST_HASH_KEY)
        key.chmod(0o600)
        targets: dict[str, dict[str, Target]] = {}
        for shape in shapes:
            seed_runs = seed_runs_for(SMALL, shape)
            stores = {
                "small": build_store(folder / f"{shape}-small.db", SMALL, seed_runs=seed_runs, run_shape=shape),
                "big": build_store(folder / f"{shape}-big.db", big_spans, seed_runs=seed_runs, run_shape=shape),
            }
            targets[shape] = {name: Target(store, items) for name, store in stores.items()}
            results["stores"][shape] = {
                name: {
                    "spans": t.store.spans,
                    "traces": t.store.traces,
                    "sessions": t.store.sessions,
                    "file_bytes": t.store.file_bytes,
                    "build_seconds": t.store.seconds,
                    "build_phases_seconds": t.store.phases,
                    "summaries_rebuilt": t.store.summaries,
                    "shown_trace_spans": t.trace_spans,
                }
                for name, t in targets[shape].items()
            }
            small, big = targets[shape]["small"], targets[shape]["big"]
            if (small.trace_spans, small.session_spans) != (big.trace_spans, big.session_spans):
                raise RuntimeError(f"the newest traces of the two {shape} stores differ in shape")
            timings[shape] = {i: {"small": [], "big": []} for i in items}
            probes[shape] = {}
            for item in items:  # warm-up on the small store, the probe (with its timeout) on the big one
                small.run(item)
                big.prepare(item)  # the copy a mutating item needs, before the clock of the probe starts
                try:
                    probes[shape][item] = probe(functools.partial(big.run, item, fresh=False), timeout)
                finally:
                    remove_store(big.work)
        reps = {
            shape: {
                item: 0 if killed or wall > budget else max(1, min(repetitions, int(budget / max(wall, 1e-9))))
                for item, ((wall, _cpu), killed) in by_item.items()
            }
            for shape, by_item in probes.items()
        }
        for r in range(repetitions):
            order = items[r % len(items) :] + items[: r % len(items)]
            sizes = ("small", "big") if r % 2 == 0 else ("big", "small")
            for shape in shapes:
                for item in order:
                    for size in sizes:
                        if size == "big" and r >= reps[shape][item]:
                            continue
                        if size == "small" and r >= max(reps[shape][item], 3):
                            continue
                        timings[shape][item][size].append(targets[shape][size].run(item))
    results["probes"] = {
        shape: {item: {"wall": t[0], "cpu": t[1], "killed": killed} for item, (t, killed) in by_item.items()}
        for shape, by_item in probes.items()
    }
    results["repetitions_done"] = reps
    results["seconds"] = {}
    results["big_over_small"] = {}
    for shape, by_item in timings.items():
        results["seconds"][shape], results["big_over_small"][shape] = {}, {}
        for item, by_size in by_item.items():
            (probe_timing, killed), paired = probes[shape][item], bool(reps[shape][item])
            on_big = by_size["big"] if paired else [probe_timing]  # slower than the budget, or killed: the probe
            results["seconds"][shape][item] = {
                clock: {
                    "small": seconds_figures([t[c] for t in by_size["small"]]),
                    "big": seconds_figures([t[c] for t in on_big]),
                }
                for c, clock in enumerate(("wall", "cpu"))
            }
            results["big_over_small"][shape][item] = {
                "cpu": _ratio(on_big, by_size["small"], paired, 1),
                "wall": _ratio(on_big, by_size["small"], paired, 0),
                "big_timings": len(on_big),
                "lower_bound": killed,
            }
    ratios = results["big_over_small"]
    results["goals"] = []
    for item in [i for i in items if i not in BASELINE_ITEMS]:
        worst = max(shapes, key=lambda shape: ratios[shape][item]["cpu"])
        value = ratios[worst][item]["cpu"]
        sizes = results["stores"][worst]
        bound = any(ratios[shape][item]["lower_bound"] for shape in shapes)  # the worse may be a stopped one
        results["goals"].append(
            {
                "id": f"read_{item}_1m_vs_1k",
                "what": f"{item}: CPU time on {sizes['big']['spans']:,} spans over CPU time on"
                f" {sizes['small']['spans']:,} spans, the worse of the run shapes {' and '.join(shapes)} ({worst})"
                + (f"; a lower bound: a big store's call was stopped after {timeout:g} s" if bound else ""),
                "value": value,
                "target": GOAL,
                "op": "<=",
                "met": value <= GOAL,
                "lower_bound": bound,
                "wall": ratios[worst][item]["wall"],
            }
        )
    results["goals"].append(_store_receipt_goal(timings, probes, reps, results["stores"], shapes, timeout))
    results["total_seconds"] = time.perf_counter() - started
    return results


def _store_receipt_goal(
    timings: dict[str, dict[str, dict[str, list[Timing]]]],
    probes: dict[str, dict[str, tuple[Timing, bool]]],
    reps: dict[str, dict[str, int]],
    stores: dict[str, Any],
    shapes: tuple[str, ...],
    timeout: float,
) -> dict[str, Any]:
    """``agentdiag receipt`` on the big store against ``group_by_sessions`` on the same file: per shape the median
    of the ratios paired by repetition (the probes when an item was timed once), the worse shape."""
    by_shape: dict[str, tuple[float, float, bool]] = {}
    for shape in shapes:
        series = []
        for item in ("receipt_store", "group_by_sessions"):
            (probe_timing, killed), paired = probes[shape][item], bool(reps[shape][item])
            series.append((timings[shape][item]["big"] if paired else [probe_timing], killed))
        (receipt, killed), (baseline, _) = series
        n = min(len(receipt), len(baseline))
        by_shape[shape] = (
            statistics.median(r[1] / b[1] for r, b in zip(receipt[:n], baseline[:n], strict=True)),
            statistics.median(r[0] / b[0] for r, b in zip(receipt[:n], baseline[:n], strict=True)),
            killed,
        )
    worst = max(shapes, key=lambda shape: by_shape[shape][0])
    value, wall, bound = by_shape[worst]
    return {
        "id": "read_receipt_store_vs_group_by_1m",
        "what": f"agentdiag receipt (the whole store) over {GROUP_BY!r}, CPU time on the same"
        f" {stores[worst]['big']['spans']:,}-span store, the worse of the run shapes {' and '.join(shapes)} ({worst})"
        + (f"; a lower bound: a call was stopped after {timeout:g} s" if bound else ""),
        "value": value,
        "target": STORE_RECEIPT_GOAL,
        "op": "<=",
        "met": value <= STORE_RECEIPT_GOAL,
        "lower_bound": bound,
        "wall": wall,
        "per_shape": {shape: {"cpu": v[0], "wall": v[1]} for shape, v in by_shape.items()},
    }


def print_report(results: dict[str, Any], output: Path) -> None:
    for shape, stores in results["stores"].items():
        for name, store in stores.items():
            print(
                f"{shape} {name}: {store['spans']:,} spans, {store['sessions']:,} sessions,"
                f" {store['file_bytes'] / 2**20:.1f} MiB, built in {store['build_seconds']:.1f} s"
                f"{' (summaries rebuilt)' if store['summaries_rebuilt'] else ''}"
            )
    print(
        f"up to {results['repetitions']} repetitions (an item slow on the big store: fewer); median ms of CPU"
        f" time [wall]; ratio = median of paired big/small, CPU [wall]; '>': the big store's call was stopped"
        f" after {results['timeout_seconds']:g} s (a lower bound)"
    )
    print(f"{'shape':<7} {'item':<20} {'small':>20} {'big':>22} {'n':>3} {'big/small':>20}")
    for shape, by_item in results["seconds"].items():
        for item, figures in by_item.items():
            ratio = results["big_over_small"][shape][item]
            mark = ">" if ratio["lower_bound"] else " "
            cells = [
                f"{mark if size == 'big' else ' '}{figures['cpu'][size]['median'] * 1e3:8.2f}"
                f" [{figures['wall'][size]['median'] * 1e3:.2f}]"
                for size in ("small", "big")
            ]
            print(
                f"{shape:<7} {item:<20} {cells[0]:>20} {cells[1]:>22} {ratio['big_timings']:>3}"
                f" {mark}{ratio['cpu']:>8.2f}x [{ratio['wall']:.2f}x]"
            )
    for item in results["not_available"]:
        print(f"{item}: not available (SpanStore has no list_runs/list_conversations in this version)")
    if not results["sessions_limited"]:
        print("sessions: this CLI has no --limit; timed as the whole list ('agentdiag sessions')")
    for goal in results["goals"]:
        verdict = "met" if goal["met"] else "MISSED"
        bound = ">= " if goal["lower_bound"] else ""
        print(
            f"goal {goal['id']}: {bound}{goal['value']:.2f} {goal['op']} {goal['target']} ({verdict});"
            f" wall {bound}{goal['wall']:.2f}"
        )
    print(f"took {results['total_seconds']:.1f} s; results: {output}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.read_path", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run (1,000 vs 100,000 spans, up to 11 repetitions, 4 s timeout; default 1,000 vs 1,000,000,"
        " 21, 60 s)",
    )
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/read_path.json"))
    parser.add_argument(
        "--shapes",
        default=",".join(SHAPES),
        help=f"run shapes to time, comma-separated (default {','.join(SHAPES)}; the goals need both)",
    )
    args = parser.parse_args(argv)
    shapes = tuple(shape.strip() for shape in args.shapes.split(",") if shape.strip())
    if not shapes or not set(shapes) <= set(SHAPES):
        parser.error(f"--shapes: one or more of {', '.join(SHAPES)}")
    results = run(args.quick, shapes)
    save_results(results, args.output)
    print_report(results, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
