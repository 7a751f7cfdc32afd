"""``python -m benchmarks.phoenix_ingest [--quick] [--phoenix-bin PATH] [--output PATH]``: our store vs Phoenix.

Optional: Arize Phoenix is a large install (about 850 MB) and pins its own OpenTelemetry, so it lives in a venv of
its own (see benchmarks/README.md), and this benchmark runs only when it is told where the ``phoenix`` executable
is: ``--phoenix-bin PATH`` or the environment variable ``AGENTDIAG_BENCH_PHOENIX``. Without either, or if the path
is not an executable file, ``run()`` returns ``{"skipped": <reason>, "goals": []}`` and ``main`` prints the reason
and exits 0.

What is timed: the ingest rate (spans/s, wall clock) of the same finished agent spans into two local stores on the
same machine, from handing the first batch to the exporter until every span is stored and queryable:

- ``agentdiag``: ``SQLiteSpanExporter(SpanStore(path)).export_with_accounting(batch, accounting)``, batches of
  512, into a fresh store per round. A batch is committed when the call returns (WAL, ``synchronous=NORMAL``) and
  readable by any connection, so the clock stops after the last batch; the row count is checked after it.
- ``phoenix``: the SDK's ``OTLPSpanExporter`` (http/protobuf, no compression) to Phoenix's ``/v1/traces``, batches
  of 512, each round into a fresh project (the ``x-project-name`` header). Three times, from the same start:

  - ``accepted``: the last export call has returned (HTTP 200). Phoenix answers once it has parsed the request;
    it converts the spans and writes them to its SQLite database afterwards, in its bulk inserter;
  - ``stored``: Phoenix's database holds all N spans of the project (committed rows, counted every 50 ms on a
    read-only connection to its database file, which costs the server nothing);
  - ``queryable`` (the headline, comparable with ours): then Phoenix's GraphQL API shows them too
    (``getProjectByName(name) { recordCount }``, polled every 0.1 s). The API is polled only once the rows are
    there, because each count costs the server about 20 ms of CPU, as much as inserting a span: polling it
    from the start would slow down what it measures.

Phoenix (``phoenix serve``) runs as a subprocess that this benchmark starts on free ports on 127.0.0.1, with
``PHOENIX_WORKING_DIR`` in a temporary folder, so it uses its default SQLite database there. Telemetry, external
resources, the agent assistant and the MCP server are off, and every other ``PHOENIX_*`` and ``OTEL_*`` variable
is removed from its environment. Phoenix binds its OTLP gRPC server to ``[::]`` (every interface) whatever
``PHOENIX_HOST`` says, so it is started through its own interpreter (from the executable's ``#!`` line) with a
launcher that rewrites that one bind address to 127.0.0.1 and then calls ``phoenix.server.main.main()``, as the
executable does. Readiness: ``/readyz`` (a database round trip) polled every 0.2 s, with a deadline. The server is
terminated (SIGTERM, then SIGKILL) in ``finally:``.

Corpus: agent runs through the manual wrappers from ``benchmarks._bigstore.build_corpus`` (the spans the exporter
receives in production: redacted under the local policy, HMAC digests; 13 to 49 spans per run, chat calls with
usage, tool calls, some failing). Phoenix keeps trace ids unique across projects, so every round builds its own
corpus (untimed) with fresh ids, and both variants of a round get the same spans. Sizes: 64 runs = 1,984 spans a
round, 5 rounds; ``--quick``: 8 runs = 224 spans, 2 rounds. Phoenix ingests about 50 spans/s here, so a round of
20,000 spans would take 7 minutes.

Method: one untimed warm-up of each variant (2 runs), then rounds; each round runs both variants, in an order that
alternates every round. Figures: median (min-max) over rounds of spans/s, and the median of the per-round paired
ratios ``agentdiag / phoenix`` for each of Phoenix's three times; the goal ``phoenix_ingest_ratio`` is the
``queryable`` one. The issue sets no target: ``>= 1.0`` only says which side is faster. Also reported: CPU per
span. Ours is this process's CPU time. Phoenix's is this process's CPU time until ``accepted`` (encoding and HTTP)
plus the server's, all its threads (``/proc/<pid>/stat``), until ``stored``.

Checks (an error raises): every export call succeeds; our store holds exactly N spans after each round; Phoenix's
database and then its API reach exactly N spans for the project before a deadline (60 s + 0.1 s per span), and
both still say N when read again afterwards.

Caveats:

- Phoenix's figure includes its whole ingest path: protobuf encoding in the SDK exporter, an HTTP request on the
  loopback, decoding and span conversion in the server, and its bulk inserter (SQLAlchemy's asyncio ORM on
  aiosqlite, up to 100 spans per transaction, a savepoint and about ten statements per span: trace and project
  upserts, time ranges, cumulative counts, costs). Ours needs no encoding or transport: the exporter writes rows
  in the process that made the spans. This compares the two products' local paths, not two SQLite schemas.
- Where Phoenix's time goes, on the server during ingest: by thread, the event loop uses a full core and the
  aiosqlite worker (the SQLite calls) about 11% of one; py-spy's GIL-holding samples are about 86% in SQLAlchemy
  (building, caching and compiling statements, ORM bulk insert and update) and 9% in aiosqlite. Plain spans (one
  attribute, no GenAI content) go in at about 80 spans/s and 12 ms CPU each, so the rate does not come from these
  spans.
- The two stores do different work. Phoenix also keeps traces, projects, sessions, costs, token counts and
  cumulative columns. We keep the span, its accounting (``session_stats``, ``observers``) and the retention checks.
- Our variant uses one core. Phoenix's uses two processes (the client encodes, the server inserts) on a 2-core
  machine, so its wall time can hide CPU: compare the CPU per span as well.
- Phoenix's database grows across rounds (one server for the run, a fresh project per round), while ours is fresh
  each round. The per-round rates are kept in the JSON, to show whether Phoenix slows as it fills.
- ``stored`` is read directly from Phoenix's database file, which is not a public API; ``queryable`` is the figure
  through its public API. Both clocks have the resolution of their polling (50 ms, 0.1 s).
- Phoenix's startup (imports and migrations, 20-40 s here) is not timed, but it is most of ``--quick``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sqlite3
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from benchmarks._bigstore import BATCH, Corpus, accounting_for, batches, build_corpus
from benchmarks._common import save_results
from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
from otel_agentdiag.storage import SpanStore

ENV_VAR = "AGENTDIAG_BENCH_PHOENIX"
STARTUP_DEADLINE_S = 240.0
STORED_POLL_S = 0.05  # a read of Phoenix's database file: costs Phoenix nothing
API_POLL_S = 0.1  # a GraphQL count costs Phoenix about 20 ms of CPU: polled only once the database holds all
RUNS_PER_ROUND = {True: 8, False: 64}  # 13-49 spans per run: 224 and 1,984 spans
ROUNDS = {True: 2, False: 5}
WARMUP_RUNS = 2

# Run through Phoenix's own interpreter: the same as its ``phoenix`` console script, except that the one address
# Phoenix hard-codes for its OTLP gRPC server ("[::]:<port>", every interface) becomes 127.0.0.1.
_LAUNCHER = """\
import sys
import grpc.aio
_server = grpc.aio.server
def _loopback_server(*args, **kwargs):
    server = _server(*args, **kwargs)
    add_insecure_port = server.add_insecure_port
    server.add_insecure_port = lambda address: add_insecure_port(address.replace("[::]", "127.0.0.1", 1))
    return server
grpc.aio.server = _loopback_server
from phoenix.server.main import main
sys.argv[0] = "phoenix"
sys.exit(main())
"""

_RECORD_COUNT = "query ($name: String!) { getProjectByName(name: $name) { recordCount } }"
_STORED_COUNT = (
    "SELECT count(*) FROM spans JOIN traces ON traces.id = spans.trace_rowid"
    " JOIN projects ON projects.id = traces.project_rowid WHERE projects.name = ?"
)


def skip_reason(phoenix_bin: str | None) -> str | None:
    """Why the benchmark cannot run, or None if it can."""
    if not phoenix_bin:
        return (
            f"Phoenix is not configured: pass --phoenix-bin PATH or set {ENV_VAR} to the `phoenix` executable of a "
            "separate venv (python3 -m venv /work/venv-phoenix && /work/venv-phoenix/bin/pip install arize-phoenix)"
        )
    path = Path(phoenix_bin)
    if not path.is_file():
        return f"Phoenix executable not found: {path} (from --phoenix-bin or {ENV_VAR})"
    if not os.access(path, os.X_OK):
        return f"Phoenix executable is not executable: {path}"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def interpreter_of(executable: Path) -> str:
    """The Python that runs a console script: its ``#!`` line (pip writes an absolute path there)."""
    with executable.open("rb") as handle:
        first = handle.readline().decode("utf-8", "replace").strip()
    if first.startswith("#!"):
        words = first[2:].split()
        if words and Path(words[0]).name.startswith("python") and Path(words[0]).is_file():
            return words[0]
    sibling = executable.parent / "python"
    if sibling.is_file():
        return str(sibling)
    raise RuntimeError(f"cannot find the Python interpreter of {executable}: no '#!/.../python' line and no {sibling}")


def cpu_seconds_of(pid: int) -> float | None:
    """User + system CPU of a process, all its threads (Linux ``/proc``); None where that is not readable."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class PhoenixServer:
    """``phoenix serve`` on 127.0.0.1 with its state in ``folder``."""

    executable: Path
    folder: Path
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    reader: sqlite3.Connection | None = None
    http_port: int = 0
    grpc_port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self) -> None:
        self.http_port, self.grpc_port = free_port(), free_port()
        while self.grpc_port == self.http_port:
            self.grpc_port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
        env.update(
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_PORT=str(self.http_port),
            PHOENIX_GRPC_PORT=str(self.grpc_port),
            PHOENIX_WORKING_DIR=str(self.folder),
            PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
            PHOENIX_DISABLE_AGENT_ASSISTANT="true",
            PHOENIX_ENABLE_MCP_SERVER="false",
            PHOENIX_LOG_MIGRATIONS="false",
        )
        self.log = (self.folder / "phoenix.log").open("wb")
        self.process = subprocess.Popen(
            [interpreter_of(self.executable), "-c", _LAUNCHER, "serve"],
            cwd=self.folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, deadline_s: float) -> float:
        """Poll ``/readyz`` until it answers 200; returns the seconds waited."""
        start = time.perf_counter()
        while True:
            self.check_alive()
            try:
                with urllib.request.urlopen(f"{self.base_url}/readyz", timeout=5) as response:
                    if response.status == 200:
                        return time.perf_counter() - start
            except (urllib.error.URLError, OSError):
                pass
            if time.perf_counter() - start > deadline_s:
                raise RuntimeError(f"Phoenix was not ready after {deadline_s:.0f} s\n{self.log_tail()}")
            time.sleep(0.2)

    def check_alive(self) -> None:
        if self.process is None or self.process.poll() is not None:
            code = None if self.process is None else self.process.returncode
            raise RuntimeError(f"Phoenix exited (code {code})\n{self.log_tail()}")

    def span_count(self, project: str) -> int:
        """The project's span count through Phoenix's GraphQL API (0 while the project does not exist)."""
        body = json.dumps({"query": _RECORD_COUNT, "variables": {"name": project}}).encode()
        request = urllib.request.Request(
            f"{self.base_url}/graphql", data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
        if answer.get("errors"):
            raise RuntimeError(f"Phoenix GraphQL error: {answer['errors']}")
        node = answer["data"]["getProjectByName"]
        return 0 if node is None else int(node["recordCount"])

    def stored_count(self, project: str) -> int:
        """The project's committed spans in Phoenix's SQLite database (a read-only connection: no cost to Phoenix)."""
        if self.reader is None:
            path = self.folder / "phoenix.db"
            self.reader = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None)
        (count,) = self.reader.execute(_STORED_COUNT, (project,)).fetchone()
        return int(count)

    def cpu_seconds(self) -> float | None:
        return None if self.process is None else cpu_seconds_of(self.process.pid)

    def log_tail(self, lines: int = 30) -> str:
        path = self.folder / "phoenix.log"
        if not path.exists():
            return "(no Phoenix log)"
        text = path.read_text(errors="replace").splitlines()
        return "Phoenix log, last lines:\n" + "\n".join(text[-lines:])

    def stop(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.log is not None:
            self.log.close()


class _CountingHandler(logging.Handler):
    """Counts the OTLP exporter's warnings (each retry of a 429/503 or a transport error logs one)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


@dataclass
class Timing:
    seconds: float
    """Until every span is queryable (ours: committed; Phoenix: its GraphQL API shows them all)."""
    cpu_seconds: float | None
    accepted_seconds: float | None = None
    """Phoenix: until the last export call returned (HTTP 200)."""
    stored_seconds: float | None = None
    """Phoenix: until its database holds every span (committed rows, read on a read-only connection)."""


def run_agentdiag(path: Path, corpus: Corpus) -> Timing:
    spans = corpus.spans
    store = SpanStore(path)
    exporter = SQLiteSpanExporter(store)
    parts = batches(spans)
    try:
        cpu0, start = time.process_time(), time.perf_counter()
        for part in parts:
            if not exporter.export_with_accounting(part, accounting_for(corpus.observer)):
                raise RuntimeError("the SQLite exporter failed during the benchmark")
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
        stored = store.span_count()
    finally:
        store.close()
    if stored != len(spans):
        raise RuntimeError(f"our store holds {stored} spans, expected {len(spans)}")
    return Timing(elapsed, cpu)


def run_phoenix(server: PhoenixServer, project: str, corpus: Corpus, deadline_s: float) -> Timing:
    """Export to Phoenix; the clock runs until its database, then its API, show all the spans."""
    spans = corpus.spans
    n = len(spans)
    exporter = OTLPSpanExporter(
        endpoint=f"{server.base_url}/v1/traces",
        headers={"x-project-name": project},
        timeout=30,
        compression=Compression.NoCompression,
    )
    parts = batches(spans)
    try:
        server_cpu0 = server.cpu_seconds()
        cpu0, start = time.process_time(), time.perf_counter()
        for part in parts:
            if exporter.export(part) is not SpanExportResult.SUCCESS:
                raise RuntimeError(f"the OTLP export to Phoenix failed\n{server.log_tail()}")
        accepted, client_cpu = time.perf_counter() - start, time.process_time() - cpu0
        stored_count = wait_for(lambda: server.stored_count(project), n, start, deadline_s, STORED_POLL_S)
        stored, server_cpu1 = time.perf_counter() - start, server.cpu_seconds()
        if stored_count != n:
            server.check_alive()
            raise RuntimeError(
                f"Phoenix's database holds {stored_count} spans of {project!r} after {stored:.1f} s, "
                f"expected {n}\n{server.log_tail()}"
            )
        api_count = wait_for(lambda: server.span_count(project), n, start, deadline_s, API_POLL_S)
        queryable = time.perf_counter() - start
    finally:
        exporter.shutdown()
    if api_count != n:
        raise RuntimeError(
            f"Phoenix's API shows {api_count} spans of {project!r} after {queryable:.1f} s, expected {n}"
        )
    again = server.span_count(project), server.stored_count(project)
    if again != (n, n):
        raise RuntimeError(f"Phoenix shows {again} spans (API, database) of {project!r} on a second read, expected {n}")
    cpu = None if server_cpu0 is None or server_cpu1 is None else client_cpu + server_cpu1 - server_cpu0
    return Timing(queryable, cpu, accepted_seconds=accepted, stored_seconds=stored)


def wait_for(count: Callable[[], int], n: int, start: float, deadline_s: float, poll_s: float) -> int:
    """Poll ``count()`` until it reaches ``n`` or the deadline passes (measured from ``start``); the last count."""
    while True:
        seen = count()
        if seen >= n or time.perf_counter() - start > deadline_s:
            return seen
        time.sleep(poll_s)


def corpus_of(runs: int, label: str) -> Corpus:
    """A fresh corpus of ``runs`` agent runs: new trace and span ids every call (Phoenix keeps trace ids unique)."""
    return build_corpus(runs, label=label)


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def run(quick: bool, phoenix_bin: str | None = None) -> dict[str, Any]:
    phoenix_bin = phoenix_bin or os.environ.get(ENV_VAR) or None
    reason = skip_reason(phoenix_bin)
    if reason is not None:
        return {"skipped": reason, "goals": []}
    assert phoenix_bin is not None
    runs, rounds = RUNS_PER_ROUND[quick], ROUNDS[quick]
    began = time.perf_counter()
    warnings = _CountingHandler()
    exporter_logger = logging.getLogger("opentelemetry.exporter.otlp.proto.http")
    exporter_logger.addHandler(warnings)
    results: dict[str, Any] = {"batch": BATCH, "rounds": rounds, "runs_per_round": runs}
    with tempfile.TemporaryDirectory(prefix="agentdiag-phoenix-") as tmp:
        folder = Path(tmp)
        (folder / "phoenix").mkdir()
        server = PhoenixServer(Path(phoenix_bin), folder / "phoenix")
        try:
            started = time.perf_counter()
            server.start()
            # Phoenix takes tens of seconds to import and migrate: build the first corpora meanwhile (untimed).
            warm = corpus_of(WARMUP_RUNS, "warmup")
            first = corpus_of(runs, "round-0")
            n = len(first.spans)
            deadline_s = 60.0 + 0.1 * n
            results["spans"] = n
            server.wait_ready(STARTUP_DEADLINE_S)
            results["phoenix_startup_seconds"] = time.perf_counter() - started
            results["phoenix_version"] = phoenix_version(server)

            run_agentdiag(folder / "warmup.db", warm)
            run_phoenix(server, "agentdiag-bench-warmup", warm, 60.0 + 0.1 * len(warm.spans))

            timings: dict[str, list[Timing]] = {"agentdiag": [], "phoenix": []}
            for r in range(rounds):
                corpus = first if r == 0 else corpus_of(runs, f"round-{r}")
                if len(corpus.spans) != n:
                    raise RuntimeError(f"round {r}: {len(corpus.spans)} spans, expected {n}")
                order = ["agentdiag", "phoenix"] if r % 2 == 0 else ["phoenix", "agentdiag"]
                for name in order:
                    if name == "agentdiag":
                        timings[name].append(run_agentdiag(folder / f"round-{r}.db", corpus))
                    else:
                        timings[name].append(run_phoenix(server, f"agentdiag-bench-{r}", corpus, deadline_s))
                for leftover in folder.glob(f"round-{r}.db*"):
                    leftover.unlink()
            server.check_alive()
        finally:
            server.stop()
            exporter_logger.removeHandler(warnings)

    ours = [n / t.seconds for t in timings["agentdiag"]]
    phoenix = {
        "phoenix_queryable": [n / t.seconds for t in timings["phoenix"]],
        "phoenix_stored": [n / t.stored_seconds for t in timings["phoenix"] if t.stored_seconds],
        "phoenix_accepted": [n / t.accepted_seconds for t in timings["phoenix"] if t.accepted_seconds],
    }
    rates = {"agentdiag": ours, **phoenix}
    results["spans_per_second"] = {name: summary(values) for name, values in rates.items()}
    results["per_round_spans_per_second"] = rates
    results["ratio_agentdiag_over_phoenix"] = {
        name.removeprefix("phoenix_"): statistics.median(a / b for a, b in zip(ours, values, strict=True))
        for name, values in phoenix.items()
    }
    ratio = results["ratio_agentdiag_over_phoenix"]["queryable"]
    cpu = {
        name: [t.cpu_seconds / n * 1e6 for t in values if t.cpu_seconds is not None] for name, values in timings.items()
    }
    if all(len(values) == rounds for values in cpu.values()):
        results["cpu_us_per_span"] = {name: summary(values) for name, values in cpu.items()}
        results["cpu_ratio_phoenix_over_agentdiag"] = statistics.median(
            p / a for a, p in zip(cpu["agentdiag"], cpu["phoenix"], strict=True)
        )
    results["exporter_warnings"] = warnings.count
    results["seconds"] = time.perf_counter() - began
    results["goals"] = [
        {
            "id": "phoenix_ingest_ratio",
            "what": (
                f"ingest rate, ours / Phoenix's (OTLP http to stored and queryable), {n:,} agent spans: "
                "a report, the issue sets no target"
            ),
            "value": ratio,
            "target": 1.0,
            "op": ">=",
            "met": ratio >= 1.0,
        }
    ]
    return results


def phoenix_version(server: PhoenixServer) -> str | None:
    try:
        with urllib.request.urlopen(f"{server.base_url}/arize_phoenix_version", timeout=10) as response:
            return response.read().decode().strip() or None
    except (urllib.error.URLError, OSError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.phoenix_ingest", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="a short run (2 rounds of 224 spans; default 5 rounds of 1,984)"
    )
    parser.add_argument(
        "--phoenix-bin", help=f"the `phoenix` executable of a separate venv (default: ${ENV_VAR}; unset: skip)"
    )
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/phoenix_ingest.json"))
    args = parser.parse_args(argv)
    results = run(args.quick, args.phoenix_bin)
    results["cpus"] = os.cpu_count()
    save_results(results, args.output)
    if "skipped" in results:
        print(f"phoenix_ingest skipped: {results['skipped']}")
        return 0
    n = results["spans"]
    print(
        f"{n:,} spans, batches of {results['batch']}, {results['rounds']} rounds (median, min-max); "
        f"Phoenix {results['phoenix_version']}, started in {results['phoenix_startup_seconds']:.0f} s"
    )
    cpu = results.get("cpu_us_per_span", {})
    print(f"{'variant':<20} {'spans/s':>9} {'min':>9} {'max':>9} {'CPU µs/span':>12}")
    for name, rate in results["spans_per_second"].items():
        cpu_of = cpu.get("phoenix" if name == "phoenix_stored" else name)
        shown = f"{cpu_of['median']:>12.0f}" if cpu_of else f"{'':>12}"
        print(f"{name:<20} {rate['median']:>9.0f} {rate['min']:>9.0f} {rate['max']:>9.0f} {shown}")
    ratios = results["ratio_agentdiag_over_phoenix"]
    print("agentdiag / phoenix: " + ", ".join(f"{ratio:.1f}x ({name})" for name, ratio in ratios.items()))
    if "cpu_ratio_phoenix_over_agentdiag" in results:
        print(f"CPU per span, phoenix / agentdiag: {results['cpu_ratio_phoenix_over_agentdiag']:.2f}x")
    for goal in results["goals"]:
        print(f"goal {goal['id']}: {goal['value']:.2f} {goal['op']} {goal['target']:g} ({goal['what']})")
    print(f"results: {args.output} ({results['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
