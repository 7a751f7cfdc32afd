"""``python -m benchmarks.push_throughput [--spans 5000] [--rounds 5] [--batch-size 512] [--output FILE]``.

Throughput of ``agentdiag push`` (spans/s) to a real local collector, rotel (``tests/e2e/rotel_collector.py``) on
127.0.0.1, over http/protobuf and gRPC, against a baseline measured in the same run.

Store: the demo agent (``otel_agentdiag.demo.run_demo_agent``, 12 spans a run) run through ``configure()`` (the
local policy, the SQLite exporter) until the store holds ``--spans`` spans or more, each run its own session.
Building it is not timed.

Variants, each a full :func:`otel_agentdiag.diagnostics.push.push_spans` of the whole store (read pages, strict
re-validation, export, mark), with every push mark deleted before it (not timed) so each round pushes
everything:

- ``noop``: an exporter that returns SUCCESS at once: the local cost (reading, re-validation, marking);
- ``http/protobuf`` and ``grpc``: the SDK's OTLP exporters to rotel (``push_exporter``; built before timing).

Each round runs every variant, in an order rotated by one per round; a figure is the median (min..max) over
rounds of ``pushed / seconds`` (``PushResult.seconds``: from the first page read to the last mark). After every
collector push, the run checks that rotel received exactly that many more spans (it fails otherwise). At the
end, the real command (``python -m otel_agentdiag push``) pushes the store once per protocol to a fresh rotel,
and its own summary line is reported as it printed it.
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import otel_agentdiag as agentdiag
from otel_agentdiag.demo import run_demo_agent
from otel_agentdiag.diagnostics.projection import load_store_hasher
from otel_agentdiag.diagnostics.push import endpoint_key, push_exporter, push_spans
from otel_agentdiag.storage import SpanStore

_E2E = Path(__file__).resolve().parents[1] / "tests" / "e2e"
if str(_E2E) not in sys.path:
    sys.path.insert(0, str(_E2E))  # the rotel helper lives with the e2e tests

from rotel_collector import RotelCollector, unavailable_reason  # noqa: E402

PROTOCOLS = ("http/protobuf", "grpc")
WAIT_S = 30.0


class NoOpExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def build_store(folder: Path, spans: int) -> tuple[Path, int]:
    path = folder / "traces.db"
    with agentdiag.configure(service_name="push-bench", store=path, set_global=False) as diag:
        stored = 0
        while stored < spans:
            for _ in range(50):
                run_demo_agent()
            diag.force_flush()
            with SpanStore(path, create=False) as store:
                stored = store.span_count()
    return path, stored


def one_push(path: Path, variant: str, rotel: RotelCollector | None, batch_size: int) -> dict[str, Any]:
    endpoint = "http://127.0.0.1:9" if rotel is None else rotel.endpoint(variant)
    protocol = "http/protobuf" if variant == "noop" else variant
    key = endpoint_key(endpoint, protocol)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM push_marks")
    exporter = NoOpExporter() if rotel is None else push_exporter(endpoint, protocol)
    before = len(rotel.spans()) if rotel is not None else 0
    with SpanStore(path, create=False) as store:
        result = push_spans(store, exporter, endpoint=key, hasher=load_store_hasher(path), batch_size=batch_size)
    exporter.shutdown()
    if not result.ok:
        raise SystemExit(f"{variant}: push failed: {result.error}")
    if rotel is not None and not rotel.wait_for_spans(before + result.pushed, timeout=WAIT_S):
        raise SystemExit(f"{variant}: rotel got {len(rotel.spans()) - before} of {result.pushed} spans")
    return {"pushed": result.pushed, "seconds": result.seconds, "spans_per_second": result.spans_per_second}


def cli_push(path: Path, protocol: str, folder: Path) -> str:
    with RotelCollector(folder / f"rotel-cli-{protocol.replace('/', '-')}") as rotel:
        command = [sys.executable, "-m", "otel_agentdiag", "push", "--endpoint", rotel.endpoint(protocol)]
        done = subprocess.run(
            [*command, "--protocol", protocol, "--store", str(path)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise SystemExit(f"agentdiag push ({protocol}) failed: {done.stderr.strip()}")
        return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--spans", type=int, default=5000, help="spans in the store, at least (default 5000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--batch-size", type=int, default=512, help="spans per export (default 512)")
    parser.add_argument("--output", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    reason = unavailable_reason()
    if reason is not None:
        print(f"rotel cannot run here: {reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="push-bench-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        path, stored = build_store(folder, args.spans)
        print(f"store: {stored} spans ({stored // 12} demo runs) built in {time.perf_counter() - started:.1f} s")
        variants = ["noop", *PROTOCOLS]
        figures: dict[str, list[float]] = {v: [] for v in variants}
        with RotelCollector(folder / "rotel") as rotel:
            for round_number in range(args.rounds):
                shift = round_number % len(variants)
                for variant in variants[shift:] + variants[:shift]:
                    outcome = one_push(path, variant, None if variant == "noop" else rotel, args.batch_size)
                    if outcome["pushed"] != stored:
                        raise SystemExit(f"{variant}: pushed {outcome['pushed']} of {stored}")
                    figures[variant].append(outcome["spans_per_second"])
        summary_lines = {protocol: cli_push(path, protocol, folder) for protocol in PROTOCOLS}
    report: dict[str, Any] = {
        "spans": stored,
        "rounds": args.rounds,
        "batch_size": args.batch_size,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "spans_per_second": {
            v: {"median": statistics.median(f), "min": min(f), "max": max(f)} for v, f in figures.items()
        },
        "cli_summary": summary_lines,
    }
    print(f"push throughput, {stored} spans, batches of {args.batch_size}, median (min..max) of {args.rounds} rounds:")
    baseline = report["spans_per_second"]["noop"]["median"]
    for variant, figure in report["spans_per_second"].items():
        ratio = "" if variant == "noop" else f"  ({figure['median'] / baseline:.2f} x noop)"
        print(f"  {variant:<14} {figure['median']:>8.0f} spans/s  ({figure['min']:.0f}..{figure['max']:.0f}){ratio}")
    for protocol, line in summary_lines.items():
        print(f"  agentdiag push ({protocol}): {line}")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
