"""``python -m benchmarks.serve [--quick] [--output PATH]``: ``agentdiag serve`` over HTTP, 1k vs 1M spans.

Whether the trace server's answers cost the same in a big store as in a small one, and what HTTP adds to a
trace-by-id over the same query run directly, measured in one run. The servers are the real application
(:func:`otel_agentdiag.serve.app.create_app`) in a real Uvicorn server, each on its own 127.0.0.1 socket (port 0,
bound first by ``agentdiag serve``'s own ``_bind``) in a thread of this process; the client is one keep-alive
``httpx.Client``. Timed requests:

- ``search``: ``GET /api/traces?service=store-bench&limit=20`` (Jaeger v1 search: the 20 newest traces, each as
  its full strict projection);
- ``trace``: ``GET /api/traces/{id}`` (Jaeger v1), ``id`` = the newest trace (25 spans);
- ``trace_v3``: ``GET /api/v3/traces/{id}`` (Jaeger v3, OTLP-JSON).

Stores: ``small`` about 1,000 spans and ``big`` about 1,000,000 (``--quick``: 100,000) of 25-span runs, both from
:func:`benchmarks._bigstore.build_store` with the same seed shape (their newest traces alike, 25 spans); the
store's hash key (``hash.key``) beside them, as in a real store, so the strict projection keeps the store's digests.

Latency: after a warm-up, each repetition (``--quick`` 31, full 101) makes one request of every item on both
stores, small and big in an order that alternates, the items in an order that rotates. Each request is timed as
wall time (``perf_counter``) and as this process's CPU time (``process_time``: the client, the server's event
loop and its worker thread, SQLite; not the time spent waiting for a core another process holds). Goals
``serve_<item>_1m_vs_1k``: the median of the paired ratios big / small of CPU time <= 2 (the wall ratio beside
it): on a shared machine a few-millisecond wall figure is often stretched tenfold by a neighbour.

Throughput: blocks (``--quick`` 9, full 21) of ``--quick`` 20, full 50 trace-by-id calls on the big store, over
HTTP (``GET /api/traces/{id}``) and directly in this thread (``project_trace`` then ``jaeger_trace`` and the JSON
text, i.e. ``StoreReader.get_trace`` + ``strict_projection`` + ``jaeger_document``: what the handler does,
without HTTP), the two in an order that alternates. Requests per second of each block, from wall time; goal
``serve_trace_rps_vs_direct``: the median of the paired ratios HTTP / direct >= 0.5 (the same from CPU time
beside it).

Checks (raise on failure, so a fast wrong answer cannot pass): every response is 200 and JSON; ``search``
returns 20 traces, the first the newest; ``trace`` one trace of its 25 spans, ``trace_v3`` 25 OTLP spans of that
trace id; the direct call the same trace as the HTTP one.

Caveats: both stores are in the OS page cache (built just before); client and server share this process and the
machine's cores (a client elsewhere would add network time and take none of the server's CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchmarks._bigstore import BigStore, build_store, seed_runs_for
from benchmarks._common import save_results
from benchmarks.startup import agentdiag_command
from otel_agentdiag.diagnostics.projection import load_store_hasher
from otel_agentdiag.serve import queries
from otel_agentdiag.serve.server import running
from otel_agentdiag.serve.settings import ServeSettings, new_token
from otel_agentdiag.storage.reading import ReadOnlyStore
from otel_agentdiag.testing import TEST_HASH_KEY

LATENCY_GOAL = 2.0
RPS_GOAL = 0.5
START_GOAL_S = 1.0
"""The issue's own goal: ``agentdiag serve`` answers within a second of being started."""
SMALL = 1_000
SHAPE = "runs25"
SERVICE = "store-bench"
"""The service name of :func:`benchmarks._bigstore.build_corpus`'s spans."""
LIMIT = 20
ITEMS = ("search", "trace", "trace_v3")
Timing = tuple[float, float]
"""(wall seconds, CPU seconds of this process) of one call or block."""


TOKEN = new_token()
"""The token of the benchmark's servers (every request needs one, as from any client): sent as a bearer header."""
AUTHORIZATION = {"Authorization": f"Bearer {TOKEN}"}


@contextmanager
def running_server(path: Path) -> Iterator[str]:
    """The serve application for the store at ``path`` as ``agentdiag serve`` runs it (its socket, its Uvicorn
    configuration, its token check), on a thread of this process; yields its base URL."""
    with running(ServeSettings(store_path=path, host="127.0.0.1", port=0, token=TOKEN)) as url:
        yield url


class Target:
    """One store behind its server: the newest trace, the URLs of the timed items, and the checks of their
    answers."""

    def __init__(self, store: BigStore, base: str, client: httpx.Client) -> None:
        self.store, self.base, self.client = store, base, client
        reader = ReadOnlyStore(store.path)
        try:
            with reader._lock:
                row = reader._conn.execute(
                    "SELECT trace_id FROM spans ORDER BY start_ns DESC, trace_id LIMIT 1"
                ).fetchone()
        finally:
            reader.close()
        self.trace_id = str(row[0])
        self.urls = {
            "search": f"{base}/api/traces?service={SERVICE}&limit={LIMIT}",
            "trace": f"{base}/api/traces/{self.trace_id}",
            "trace_v3": f"{base}/api/v3/traces/{self.trace_id}",
        }

    def get(self, item: str) -> Any:
        response = self.client.get(self.urls[item])
        if response.status_code != 200:
            raise RuntimeError(f"{item} on {self.store.spans:,} spans: HTTP {response.status_code}: {response.text}")
        return response.json()

    def timed(self, item: str) -> Timing:
        wall, cpu = time.perf_counter(), time.process_time()
        self.get(item)
        return time.perf_counter() - wall, time.process_time() - cpu

    def check(self, item: str, spans: int) -> None:
        """``item``'s answer is the expected one (``spans``: the newest trace's span count)."""
        body = self.get(item)
        where = f"{item} on {self.store.spans:,} spans"
        if item == "search":
            data = body["data"]
            if len(data) != LIMIT or data[0]["traceID"] != self.trace_id:
                raise RuntimeError(f"{where}: {len(data)} traces, not {LIMIT} starting with the newest")
        elif item == "trace":
            data = body["data"]
            if len(data) != 1 or data[0]["traceID"] != self.trace_id or len(data[0]["spans"]) != spans:
                raise RuntimeError(f"{where}: not the newest trace with its {spans} spans")
        else:
            found = [s for rs in body["result"]["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
            if len(found) != spans or any(s["traceId"] != self.trace_id for s in found):
                raise RuntimeError(f"{where}: {len(found)} spans, not the newest trace's {spans}")


class Direct:
    """The handler's query of ``GET /api/traces/{id}`` without HTTP: read, project, encode, to JSON text."""

    def __init__(self, path: Path, trace_id: str) -> None:
        self.reader = ReadOnlyStore(path)
        self.hasher = load_store_hasher(path)
        self.trace_id = trace_id

    def call(self) -> dict[str, Any]:
        found = queries.jaeger_trace(queries.project_trace(self.reader, self.trace_id, self.hasher))
        if found is None:
            raise RuntimeError("direct: the newest trace was not found")
        json.dumps(found)  # the handler's JSONResponse serialises it too
        return found

    def close(self) -> None:
        self.reader.close()


def _start_times(store: Path, rounds: int) -> dict[str, list[float]]:
    """Seconds from spawning ``agentdiag serve --store STORE --port 0`` to its first answer (the URL line, then
    ``GET /api/services``), then Ctrl-C; and, alternating with it, of ``python -c pass`` to its exit (the
    baseline run beside it). One unmeasured round first (bytecode caches)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    command = [*agentdiag_command(), "serve", "--store", str(store), "--port", "0"]
    times: dict[str, list[float]] = {"serve": [], "python": []}
    for r in range(rounds + 1):
        for way in ("serve", "python") if r % 2 == 0 else ("python", "serve"):
            started = time.perf_counter()
            if way == "python":
                subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
                elapsed = time.perf_counter() - started
            else:
                with subprocess.Popen(
                    command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
                ) as process:
                    assert process.stdout is not None
                    line = process.stdout.readline()  # blocks until the URL line: the socket listens
                    printed = line.split(" ")[2] if line.startswith("agentdiag serve: http://") else ""
                    url, _, token = printed.partition("/?token=")
                    headers = {"Authorization": f"Bearer {token}"}
                    answered = (
                        bool(url) and httpx.get(f"{url}/api/services", headers=headers, timeout=30).status_code == 200
                    )
                    elapsed = time.perf_counter() - started  # to its first answer
                    process.send_signal(signal.SIGINT)
                    _out, err = process.communicate(timeout=30)
                if not answered or process.returncode != 0:
                    raise RuntimeError(f"agentdiag serve did not start and stop cleanly: {line!r} {err[-500:]!r}")
            if r:
                times[way].append(elapsed)
    return times


def _block(call: Any, n: int) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        call()
    return time.perf_counter() - wall, time.process_time() - cpu


def _figures(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _paired(a: list[Timing], b: list[Timing], clock: int) -> float:
    return statistics.median(x[clock] / y[clock] for x, y in zip(a, b, strict=True))


def run(quick: bool) -> dict[str, Any]:
    big_spans, repetitions, blocks, per_block = (100_000, 31, 9, 20) if quick else (1_000_000, 101, 21, 50)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "shape": SHAPE,
        "repetitions": repetitions,
        "blocks": blocks,
        "calls_per_block": per_block,
        "items": list(ITEMS),
        "stores": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        key = folder / "hash.key"
        key.write_bytes(TEST_HASH_KEY)
        key.chmod(0o600)
        seed_runs = seed_runs_for(SMALL, SHAPE)
        stores = {
            "small": build_store(folder / "small.db", SMALL, seed_runs=seed_runs, run_shape=SHAPE),
            "big": build_store(folder / "big.db", big_spans, seed_runs=seed_runs, run_shape=SHAPE),
        }
        results["stores"] = {
            name: {"spans": s.spans, "traces": s.traces, "file_bytes": s.file_bytes, "build_seconds": s.seconds}
            for name, s in stores.items()
        }
        with (
            httpx.Client(timeout=60.0, headers=AUTHORIZATION) as client,
            running_server(stores["small"].path) as small_url,
            running_server(stores["big"].path) as big_url,
        ):
            targets = {
                "small": Target(stores["small"], small_url, client),
                "big": Target(stores["big"], big_url, client),
            }
            for target in targets.values():
                for item in ITEMS:
                    target.check(item, 25)
                    for _ in range(3):  # warm-up: connections, page cache, the reader of the worker thread
                        target.get(item)
            timings: dict[str, dict[str, list[Timing]]] = {i: {"small": [], "big": []} for i in ITEMS}
            for r in range(repetitions):
                order = ITEMS[r % len(ITEMS) :] + ITEMS[: r % len(ITEMS)]
                sizes = ("small", "big") if r % 2 == 0 else ("big", "small")
                for item in order:
                    for size in sizes:
                        timings[item][size].append(targets[size].timed(item))
            big = targets["big"]
            direct = Direct(stores["big"].path, big.trace_id)
            try:
                if direct.call()["spans"] != big.get("trace")["data"][0]["spans"]:
                    raise RuntimeError("the direct query and the HTTP answer differ")
                _block(direct.call, 3)
                throughput: dict[str, list[Timing]] = {"http": [], "direct": []}
                for b in range(blocks):
                    for way in ("http", "direct") if b % 2 == 0 else ("direct", "http"):
                        call = direct.call if way == "direct" else lambda: big.get("trace")
                        throughput[way].append(_block(call, per_block))
            finally:
                direct.close()
        starts = _start_times(stores["big"].path, 5 if quick else 11)
    results["start_seconds"] = {way: _figures(ts) for way, ts in starts.items()}
    start_median = results["start_seconds"]["serve"]["median"]
    pairs = zip(starts["serve"], starts["python"], strict=True)
    results["start_over_python"] = statistics.median(serve / python for serve, python in pairs)
    results["seconds"] = {
        item: {
            clock: {size: _figures([t[c] for t in by_size[size]]) for size in ("small", "big")}
            for c, clock in enumerate(("wall", "cpu"))
        }
        for item, by_size in timings.items()
    }
    results["big_over_small"] = {
        item: {"cpu": _paired(by["big"], by["small"], 1), "wall": _paired(by["big"], by["small"], 0)}
        for item, by in timings.items()
    }
    results["requests_per_second"] = {
        way: {clock: _figures([per_block / t[c] for t in ts]) for c, clock in enumerate(("wall", "cpu"))}
        for way, ts in throughput.items()
    }
    # requests/s HTTP over direct = direct time over HTTP time, per block pair
    rps_wall = _paired(throughput["direct"], throughput["http"], 0)
    rps_cpu = _paired(throughput["direct"], throughput["http"], 1)
    results["http_over_direct"] = {"wall": rps_wall, "cpu": rps_cpu}
    small_n, big_n = results["stores"]["small"]["spans"], results["stores"]["big"]["spans"]
    results["goals"] = [
        {
            "id": f"serve_{item}_1m_vs_1k",
            "what": f"GET {path}: CPU time on {big_n:,} spans over CPU time on {small_n:,} spans (real HTTP)",
            "value": results["big_over_small"][item]["cpu"],
            "target": LATENCY_GOAL,
            "op": "<=",
            "met": results["big_over_small"][item]["cpu"] <= LATENCY_GOAL,
            "wall": results["big_over_small"][item]["wall"],
        }
        for item, path in (
            ("search", "/api/traces?service=&limit=20"),
            ("trace", "/api/traces/{id}"),
            ("trace_v3", "/api/v3/traces/{id}"),
        )
    ]
    results["goals"].append(
        {
            "id": "serve_trace_rps_vs_direct",
            "what": f"trace-by-id requests/s over HTTP / the same query run directly, {big_n:,}-span store (wall)",
            "value": rps_wall,
            "target": RPS_GOAL,
            "op": ">=",
            "met": rps_wall >= RPS_GOAL,
            "cpu": rps_cpu,
        }
    )
    results["goals"].append(
        {
            "id": "serve_start_seconds",
            "what": f"agentdiag serve --port 0 on the {big_n:,}-span store: spawn to its first answer, median seconds",
            "value": start_median,
            "target": START_GOAL_S,
            "op": "<=",
            "met": start_median <= START_GOAL_S,
            "over_python": results["start_over_python"],
        }
    )
    results["total_seconds"] = time.perf_counter() - started
    return results


def print_report(results: dict[str, Any], output: Path) -> None:
    for name, store in results["stores"].items():
        print(
            f"{name}: {store['spans']:,} spans, {store['traces']:,} traces, {store['file_bytes'] / 2**20:.1f} MiB,"
            f" built in {store['build_seconds']:.1f} s"
        )
    print(f"{results['repetitions']} requests each; median ms of CPU time [wall]; ratio = median of paired big/small")
    for item, figures in results["seconds"].items():
        ratio = results["big_over_small"][item]
        cells = [
            f"{figures['cpu'][s]['median'] * 1e3:7.2f} [{figures['wall'][s]['median'] * 1e3:.2f}]"
            for s in ("small", "big")
        ]
        print(f"{item:<9} {cells[0]:>18} {cells[1]:>18}  {ratio['cpu']:.2f}x [{ratio['wall']:.2f}x]")
    rps = results["requests_per_second"]
    print(
        f"trace-by-id requests/s, big store: HTTP {rps['http']['wall']['median']:.0f}, direct"
        f" {rps['direct']['wall']['median']:.0f} (wall); HTTP/direct {results['http_over_direct']['wall']:.2f}"
        f" [CPU {results['http_over_direct']['cpu']:.2f}]"
    )
    start = results["start_seconds"]
    print(
        f"agentdiag serve to its first answer: median {start['serve']['median'] * 1e3:.0f} ms (python -c pass:"
        f" {start['python']['median'] * 1e3:.0f} ms; ratio {results['start_over_python']:.1f}x)"
    )
    for goal in results["goals"]:
        verdict = "met" if goal["met"] else "MISSED"
        print(f"goal {goal['id']}: {goal['value']:.2f} {goal['op']} {goal['target']} ({verdict})")
    print(f"took {results['total_seconds']:.1f} s; results: {output}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 vs 100,000 spans, fewer requests")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/serve.json"))
    args = parser.parse_args(argv)
    results = run(args.quick)
    save_results(results, args.output)
    print_report(results, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
