"""``python -m benchmarks [--quick] [--only NAME,...] [--phoenix] [--output FILE]``: every benchmark, one report.

Runs each benchmark of this folder in turn (each measures its variants against a baseline in the same run, as
paired ratios; see each module's docstring), collects their results and goals into one JSON file
(``benchmarks/results/latest.json`` by default) and prints one table of goals with the measured values.

The exit status says whether every benchmark *ran*: 0 when all did, 1 when one raised (its error is in the
JSON and on stderr; the others still run). A missed goal is a finding, reported in the table and the JSON,
never a failure: timings on a shared machine are not a test.

``--quick`` runs every benchmark in its short form (a few minutes in all; what CI runs through
``tests/test_benchmarks.py``). ``--phoenix`` adds the Arize Phoenix ingest comparison, which needs a separate
Phoenix install (see benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import sqlite3
import sys
import time
import traceback
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

Runner = Callable[[bool], dict[str, Any]]


def _pipeline(quick: bool) -> dict[str, Any]:
    from benchmarks import pipeline

    return pipeline.run(quick)


def _redaction_vs_logfire(quick: bool) -> dict[str, Any]:
    from benchmarks import redaction_vs_logfire as bench

    runs, rounds, warmup = (40, 5, 1) if quick else (500, 31, 3)
    results = bench.run(runs=runs, rounds=rounds, warmup=warmup)
    value = round(results["ratios"]["agentdiag/logfire"]["wall"]["median"], 3)
    results["goals"] = [
        {
            "id": "redaction_vs_logfire",
            "what": "per-span cost of our strict redaction / Logfire's default scrubbing, same spans",
            "value": value,
            "target": 0.4,
            "op": "<=",
            "met": value <= 0.4,
        }
    ]
    return results


def _instrumentation_overhead(quick: bool) -> dict[str, Any]:
    from benchmarks import instrumentation_overhead as bench

    calls, chunk, repetitions, warmup, profiled = (30, 10, 3, 10, 20) if quick else (200, 20, 15, 40, 100)
    results = bench.run(calls=calls, chunk=chunk, repetitions=repetitions, warmup_calls=warmup, profile_calls=profiled)
    results["goals"] = bench.goals(results)
    return results


def _module(name: str) -> Runner:
    def runner(quick: bool) -> dict[str, Any]:
        module = importlib.import_module(f"benchmarks.{name}")
        result: dict[str, Any] = module.run(quick)
        return result

    return runner


BENCHMARKS: dict[str, Runner] = {
    "pipeline": _pipeline,
    "redaction_vs_logfire": _redaction_vs_logfire,
    "throughput": _module("throughput"),
    "instrumentation_overhead": _instrumentation_overhead,
    "memory": _module("memory"),
    "read_path": _module("read_path"),
    "startup": _module("startup"),
    "push_throughput": _module("push_throughput"),
    "serve": _module("serve"),
    "metrics": _module("metrics"),
    "disabled": _module("disabled"),
}
OPTIONAL = {"phoenix_ingest": _module("phoenix_ingest")}


def _versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version}
    for package in ("otel-agentdiag", "opentelemetry-sdk", "openai", "logfire", "openinference-instrumentation-openai"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "not installed"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the short form of every benchmark (a few minutes)")
    parser.add_argument(
        "--only", default="", help=f"comma-separated benchmarks to run (of: {', '.join([*BENCHMARKS, *OPTIONAL])})"
    )
    parser.add_argument("--phoenix", action="store_true", help="add the Arize Phoenix ingest comparison")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/latest.json"))
    args = parser.parse_args(argv)
    chosen = dict(BENCHMARKS)
    if args.phoenix:
        chosen.update(OPTIONAL)
    if args.only:
        names = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = [name for name in names if name not in BENCHMARKS and name not in OPTIONAL]
        if unknown:
            parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
        chosen = {name: {**BENCHMARKS, **OPTIONAL}[name] for name in names}

    report: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "machine": platform.machine()},
        "versions": _versions(),
        "benchmarks": {},
        "seconds": {},
        "errors": {},
        "goals": [],
    }
    for name, runner in chosen.items():
        print(f"== {name}{' (quick)' if args.quick else ''}", flush=True)
        started = time.perf_counter()
        environment = dict(os.environ)  # a benchmark may clear variables for its peers; the next gets them back
        try:
            result = runner(args.quick)
        except Exception as exc:  # noqa: BLE001 - recorded, and the other benchmarks still run
            traceback.print_exc()
            report["errors"][name] = f"{type(exc).__name__}: {exc}"
            result = None
        finally:
            os.environ.clear()
            os.environ.update(environment)
        report["seconds"][name] = round(time.perf_counter() - started, 1)
        if result is not None:
            report["benchmarks"][name] = result
            for goal in result.get("goals", []):
                report["goals"].append({"benchmark": name, **goal})
            if result.get("skipped"):
                print(f"   skipped: {result['skipped']}")
        print(f"   {report['seconds'][name]} s", flush=True)

    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    print()
    print(f"{'benchmark':<26} {'goal':<40} {'value':>8} {'target':>9}  verdict")
    for goal in report["goals"]:
        print(
            f"{goal['benchmark']:<26} {goal['id']:<40} {goal['value']:>8.3g} {goal['op']:>3} {goal['target']:<5g}"
            f"  {'met' if goal['met'] else 'missed'}"
        )
    for name, error in report["errors"].items():
        print(f"ERROR in {name}: {error}", file=sys.stderr)
    print(f"results: {args.output} ({sum(report['seconds'].values()):.0f} s)")
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
