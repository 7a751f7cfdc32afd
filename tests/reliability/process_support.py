"""Helpers of the process tests (crash durability, fork and multiprocessing, concurrent writers).

Everything is real: child interpreters started with ``python -c``, ``os.fork``, ``multiprocessing``, SQLite
files, the ``agentdiag`` command. Child programs are functions of this module (``child_main(...)``), so they
are type-checked like the tests; a child imports this module by its bare name (``child_env()`` puts this
folder on ``PYTHONPATH``). Nothing waits by sleeping: lines from a child arrive through a queue read with a
deadline, and other processes are polled against a deadline.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import otel_agentdiag as agentdiag
from otel_agentdiag.redaction import IdHasher
from otel_agentdiag.storage import SpanStore

HERE = Path(__file__).resolve().parent
HASH_KEY = b"c27c3d0f23af313f5c649f685c1059a8f23a0ac3c15a1e212e9d709a69b6d3b3"
AGENT = "process-agent"
TOOL = "lookup"
LOCAL = "local"

agentdiag.register_names(tools=[TOOL])

MAX_WRITER_RUNS = 150
"""Runs of one concurrent writer at most (below the default retention of 10 000 spans per session)."""

DIAG: agentdiag.AgentDiag | None = None
"""The pipeline a child program configured (inherited by ``fork`` children)."""


# -- the agent ----------------------------------------------------------------------------------------------
def _span_id(scope: Any) -> str:
    return f"{scope.span.get_span_context().span_id:016x}"


def agent_step(i: int, tools: int = 1) -> list[dict[str, Any]]:
    """One iteration (an LLM call, then ``tools`` tool calls) inside the current run; the ended spans, in end
    order, as ``{"span_id", "kind"}``. ``1 + 1 + tools`` spans."""
    ended: list[dict[str, Any]] = []
    with agentdiag.iteration(i) as step:
        with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
            call.record_response(input_tokens=12, output_tokens=3, finish_reasons=["tool_calls"])
        ended.append({"span_id": _span_id(call), "kind": "llm"})
        for t in range(tools):
            with agentdiag.tool_call(TOOL, call_id=f"call-{i}-{t}") as tool:
                pass
            ended.append({"span_id": _span_id(tool), "kind": "tool"})
    ended.append({"span_id": _span_id(step), "kind": "iteration"})
    return ended


def run_agent(steps: int, conversation: str) -> int:
    """A whole run of ``steps`` iterations; the number of spans it ended (``1 + 3 * steps``)."""
    n = 0
    with agentdiag.agent_run(AGENT, conversation_id=conversation):
        for i in range(steps):
            n += len(agent_step(i))
    return n + 1


def spans_of(steps: int) -> int:
    return 1 + 3 * steps


def digest(conversation: str) -> str:
    """The session digest the store files ``conversation`` under."""
    return IdHasher(HASH_KEY).digest("conversation", conversation)


def configure(store: str | os.PathLike[str], **kwargs: Any) -> agentdiag.AgentDiag:
    global DIAG
    DIAG = agentdiag.configure(store=store, hash_key=HASH_KEY, set_global=False, **kwargs)
    return DIAG


def local_totals(diag: agentdiag.AgentDiag) -> dict[str, Any]:
    """The local destination's pipeline totals: observed, accepted, rejected, dropped, pending."""
    totals: dict[str, Any] = diag.stats()["destinations"][LOCAL]["pipeline"]["totals"]
    return totals


def emit(**fields: Any) -> None:
    """One JSON line on stdout, written at once (a line shorter than PIPE_BUF never interleaves)."""
    os.write(1, (json.dumps(fields) + "\n").encode())


# -- waiting --------------------------------------------------------------------------------------------
def wait_until(predicate: Callable[[], bool], timeout: float, pause: float = 0.005) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes (a deadline, not a sleep to synchronise)."""
    deadline = time.monotonic() + timeout
    idle = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            return False
        idle.wait(pause)
    return True


def reap(pid: int, timeout: float) -> int | None:
    """Wait for child ``pid`` at most ``timeout`` seconds: its exit code (``-signal`` if killed), or None
    when it is still running at the deadline (it is then killed and reaped: a hang is reported, not waited on)."""
    status: list[int] = []

    def done() -> bool:
        found, st = os.waitpid(pid, os.WNOHANG)
        if found:
            status.append(st)
        return bool(found)

    if wait_until(done, timeout):
        return os.waitstatus_to_exitcode(status[0])
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


# -- child interpreters -----------------------------------------------------------------------------------
def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child: no AGENTDIAG_*/OTEL_* settings leak in; this folder importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(extra)
    return env


class Child:
    """A ``python -c`` child whose stdout lines are read on a thread (``line(timeout)``); stderr goes to a file."""

    def __init__(self, code: str, *args: str, stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self._stderr: IO[bytes] = open(stderr_path, "wb")  # closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self._lines.put(raw)
        self._lines.put(None)

    def line(self, timeout: float = 60.0) -> dict[str, Any] | None:
        """The next complete JSON line (None at end of output). A line cut by a kill is not complete."""
        try:
            raw = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line from the child within {timeout} s; stderr: {self.stderr()}") from None
        if raw is None:
            return None
        if not raw.endswith(b"\n"):
            return None  # cut by the kill: not a confirmation
        found: dict[str, Any] = json.loads(raw)
        return found

    def rest(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Every complete line until the end of output."""
        out: list[dict[str, Any]] = []
        while True:
            found = self.line(timeout)
            if found is None:
                if self._lines.empty() and not self._reader.is_alive():
                    return out
                continue
            out.append(found)

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def kill(self) -> int:
        os.kill(self.proc.pid, signal.SIGKILL)
        return self.proc.wait(60)

    def wait(self, timeout: float = 60.0) -> int:
        return self.proc.wait(timeout)

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(60)
        self._reader.join(60)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self._stderr.close()


@contextmanager
def child(code: str, *args: str, stderr_path: Path) -> Iterator[Child]:
    started = Child(code, *args, stderr_path=stderr_path)
    try:
        yield started
    finally:
        started.close()


def call_main(function: str, *args: str) -> str:
    """The ``-c`` program that runs ``process_support.<function>(*sys.argv[1:])``."""
    return f"import sys, process_support; process_support.{function}(*sys.argv[1:])"


def run_child(function: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", call_main(function), *args],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- the store ------------------------------------------------------------------------------------------
def integrity_check(path: Path) -> str:
    """``PRAGMA integrity_check`` through a plain connection of its own (which also recovers the WAL)."""
    conn = sqlite3.connect(path, timeout=30)
    try:
        return "\n".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall())
    finally:
        conn.close()


def write_lock_held(path: Path) -> bool:
    """Whether another connection holds the store's write lock right now (a write transaction is in flight)."""
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return True
        raise
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()
    return False


def file_signature(path: Path) -> tuple[int, int]:
    """``(size, mtime_ns)`` of ``path`` ((0, 0) when it does not exist)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return 0, 0
    return st.st_size, st.st_mtime_ns


def assert_identity(store: SpanStore) -> None:
    """``observed = accepted + rejected + dropped`` on every ledger row of the store (and there are rows)."""
    rows = store.session_stats()
    assert rows, "no ledger rows"
    for row in rows:
        assert row.observed == row.accepted + sum(row.rejected.values()) + sum(row.dropped.values()), row


def assert_store_sound(path: Path) -> None:
    """The store file is intact and every ledger row balances."""
    assert integrity_check(path) == "ok"
    with SpanStore(path, create=False) as store:
        assert_identity(store)


def stored_by_observer(store: SpanStore) -> dict[str, dict[str, int]]:
    """Per observer: ``observed``, ``accepted``, ``stored``, ``dropped``, ``rejected`` summed over its sessions,
    and ``rows``: the span rows that carry it."""
    out: dict[str, dict[str, int]] = {}
    for row in store.session_stats():
        mine = out.setdefault(
            row.observer, dict.fromkeys(("observed", "accepted", "stored", "dropped", "rejected", "rows"), 0)
        )
        mine["observed"] += row.observed
        mine["accepted"] += row.accepted
        mine["stored"] += row.stored
        mine["dropped"] += sum(row.dropped.values())
        mine["rejected"] += sum(row.rejected.values())
    for session in store.list_sessions():
        for span in store.session_spans(session.session):
            mine = out.setdefault(
                span.observer or "", dict.fromkeys(("observed", "accepted", "stored", "dropped", "rejected", "rows"), 0)
            )
            mine["rows"] += 1
    return out


# -- child programs -----------------------------------------------------------------------------------
def crash_child(store: str, conversation: str, big_tools: str) -> None:
    """Run one agent forever, flushing after every step and confirming what was committed, until killed.

    Lines: ``{"event": "start", "observer", "pid", "run"}``, then per step ``{"event": "flushed", "ok",
    "spans": [{"span_id", "kind"}], "accepted", "dropped", "rejected"}``: every span in ``spans`` ended before
    ``force_flush()`` returned ``ok``. With ``big_tools > 0``, from the third step on each step has that many
    tool calls (several batches of up to 512 spans, so write transactions stay in flight for a while), and
    a ``{"event": "big"}`` line comes first.
    """
    diag = configure(store)
    tools = int(big_tools)
    with agentdiag.agent_run(AGENT, conversation_id=conversation) as run:
        emit(event="start", observer=diag.observer_id, pid=os.getpid(), run=_span_id(run))
        i = 0
        while True:
            if tools and i == 2:
                emit(event="big")
            ended = agent_step(i, tools if tools and i >= 2 else 1)
            ok = diag.force_flush(60_000)
            totals = local_totals(diag)
            emit(
                event="flushed",
                ok=ok,
                spans=ended,
                accepted=totals["accepted"],
                dropped=totals["dropped"],
                rejected=totals["rejected"],
            )
            i += 1


def append_child(store: str, conversation: str, steps: str) -> None:
    """A clean run that exits normally (the interpreter's exit flushes): prints observer, pid and spans."""
    diag = configure(store)
    n = run_agent(int(steps), conversation)
    emit(observer=diag.observer_id, pid=os.getpid(), spans=n)


def writer_child(store: str, name: str, steps: str, pause: str) -> None:
    """A concurrent writer: waits for ``go`` on stdin, then runs agents of ``steps`` steps (flushing after each)
    until ``stop`` arrives on stdin (at most ``MAX_WRITER_RUNS``, paced by ``pause`` seconds so that readers get
    CPU too); prints ``{"event": "ready"}`` after its first flush and a final summary."""
    diag = configure(store)
    sys.stdin.readline()
    stop = threading.Event()

    def wait_for_stop() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_for_stop, daemon=True).start()
    ended = runs = 0
    while not stop.is_set() and runs < MAX_WRITER_RUNS:
        ended += run_agent(int(steps), f"{name}-{runs % 3}")
        diag.force_flush(60_000)
        if runs == 0:
            emit(event="ready")
        runs += 1
        stop.wait(float(pause))
    stop.wait(120)
    diag.shutdown()
    totals = local_totals(diag)
    emit(event="done", observer=diag.observer_id, pid=os.getpid(), ended=ended, runs=runs, totals=totals)


def fork_child_program(store: str, children: str) -> None:
    """Parent: a run, then ``children`` ``os.fork()`` children each running its own agent, then more runs of
    its own while they work. Each child prints ``{"who": "child", ...}`` and leaves with ``os._exit``; the
    parent prints ``{"who": "parent", ...}`` with the children's exit codes (None: hung past the deadline)."""
    diag = configure(store)
    ended = run_agent(1, "parent")
    pids = []
    for k in range(int(children)):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                n = run_agent(2, f"fork-child-{k}")
                diag.shutdown()
                totals = local_totals(diag)
                emit(who="child", observer=diag.observer_id, pid=os.getpid(), ended=n, accepted=totals["accepted"])
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
        ended += run_agent(1, "parent")  # the parent keeps exporting between forks
    ended += run_agent(2, "parent")
    codes = [reap(pid, 60) for pid in pids]
    diag.shutdown()
    totals = local_totals(diag)
    emit(
        who="parent", observer=diag.observer_id, pid=os.getpid(), ended=ended, accepted=totals["accepted"], codes=codes
    )


def mp_worker(results: Any, conversation: str, store: str | None, flush: bool) -> None:
    """A ``multiprocessing`` worker: with ``store`` it configures its own pipeline (spawn, forkserver), else it
    uses the one inherited through ``fork``. ``flush``: flush explicitly before returning."""
    diag = configure(store) if store is not None else DIAG
    assert diag is not None
    n = run_agent(2, conversation)
    if flush:
        diag.force_flush(60_000)
    results.put({"observer": diag.observer_id, "pid": os.getpid(), "ended": n, "conversation": conversation})


def mp_program(store: str, method: str, configure_in_worker: str, flush: str, workers: str) -> None:
    """Parent of ``multiprocessing`` workers started with ``method``: runs an agent before, during and after them
    and prints ``{"parent": {...}, "workers": [...], "exitcodes": [...]}``."""
    import multiprocessing

    diag = configure(store)
    ended = run_agent(1, "mp-parent")
    ctx: Any = multiprocessing.get_context(method)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=mp_worker,
            args=(results, f"mp-{method}-{k}", store if configure_in_worker == "1" else None, flush == "1"),
        )
        for k in range(int(workers))
    ]
    for proc in procs:
        proc.start()
    ended += run_agent(1, "mp-parent")  # the parent keeps exporting while they run
    found = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(60)
    exitcodes = [proc.exitcode for proc in procs]
    for proc in procs:
        if proc.is_alive():
            proc.kill()
            proc.join(60)
    ended += run_agent(1, "mp-parent")
    diag.shutdown()
    totals = local_totals(diag)
    emit(
        parent={"observer": diag.observer_id, "pid": os.getpid(), "ended": ended, "accepted": totals["accepted"]},
        workers=found,
        exitcodes=exitcodes,
    )


def fork_mid_transaction_program(store: str, forks: str) -> None:
    """Fork ``forks`` times, each time the moment the pipeline's own connection is inside a write transaction
    (a thread keeps the batch worker busy with large batches). Each child runs an agent and shuts down within
    a bounded time; it reports whether it was forked mid-transaction and what became of its spans."""
    diag = configure(store)
    exporter = diag.batch_processors[0].exporter
    stop = threading.Event()
    going = threading.Event()  # cleared while a child runs: SQLite's lock is not fair, and a parent writing
    going.set()  # without pause can keep another process from it past any bound (a starved child, not a stuck one)

    def load() -> None:
        r = 0
        while not stop.is_set():
            going.wait()
            with agentdiag.agent_run(AGENT, conversation_id=f"busy-{r % 4}"):
                agent_step(0, tools=600)
            r += 1

    def in_transaction() -> bool:
        conn = getattr(getattr(exporter, "_store", None), "_conn", None)
        return bool(conn is not None and conn.in_transaction)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    for k in range(int(forks)):
        if not wait_until(in_transaction, 60, pause=0.0005):
            raise AssertionError("the batch worker never wrote")
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                inherited = getattr(sys.modules["otel_agentdiag.exporters.sqlite"], "_INHERITED", [])
                mid = any(s._conn.in_transaction for s in inherited)
                n = run_agent(1, f"fork-mid-{k}")
                started = time.monotonic()
                # Generous: the parent's loader keeps the write lock busy, and on a loaded machine SQLite's busy
                # handler may wait many rounds for it. What this guards against is a lock lost for good.
                diag.shutdown(timeout_s=45)
                totals = local_totals(diag)
                emit(
                    who="child",
                    observer=diag.observer_id,
                    mid_transaction=mid,
                    ended=n,
                    accepted=totals["accepted"],
                    dropped=totals["dropped"],
                    shutdown_s=round(time.monotonic() - started, 3),
                )
                code = 0
            finally:
                os._exit(code)
        going.clear()  # the fork happened mid-transaction; now let the child reach the lock
        emit(who="forked", pid=pid, code=reap(pid, 90))
        going.set()
    stop.set()
    loader.join(60)
    diag.shutdown()
    emit(who="parent", observer=diag.observer_id)


def fork_while_exporting_program(store: str) -> None:
    """The batch worker is blocked inside an export (the test holds the store's write lock) when the process
    forks. The child runs an agent and shuts down; the parent reports the child's exit code (None: hung)."""
    diag = configure(store)
    batching = diag.batch_processors[0]
    ended = run_agent(1, "parent")
    flusher = threading.Thread(target=diag.force_flush, args=(60_000,), daemon=True)
    flusher.start()
    if not wait_until(lambda: batching.stats().in_flight > 0 and batching.flush_attempts > 0, 30):
        raise AssertionError("the batch worker never started exporting")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            n = run_agent(1, "fork-child")
            diag.shutdown(timeout_s=20)
            totals = local_totals(diag)
            emit(who="child", observer=diag.observer_id, ended=n, accepted=totals["accepted"])
            code = 0
        finally:
            os._exit(code)
    emit(who="forked", in_flight=batching.stats().in_flight)
    sys.stdin.readline()  # the test releases the write lock, then answers
    child_code = reap(pid, 60)
    flusher.join(60)
    diag.shutdown()
    totals = local_totals(diag)
    emit(who="parent", observer=diag.observer_id, ended=ended, accepted=totals["accepted"], code=child_code)


def summarise(lines: Sequence[dict[str, Any]], who: str) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("who") == who]
