"""``python -m benchmarks.metrics [--quick] [--output PATH]``: what turning the GenAI metrics on costs, per span.

Two variants of the pipeline ``configure(store=...)`` builds (local store, SQLite, redaction on the batch worker),
measured in the same run, each round running both in an order that rotates per round, each after a
``gc.collect()``:

- ``off`` (the baseline): metrics off, the default;
- ``on``: ``configure(meter_provider=...)`` with a real SDK ``MeterProvider`` and an ``InMemoryMetricReader`` (the
  recording cost alone: no export), so the batch worker records the four GenAI metrics from each redacted batch.

Shape: one agent run through the manual wrappers, ``agent_run`` > ``iteration`` > ``llm_call`` with usage and a cost
> ``tool_call``: 4 spans, 4 measurements of duration, 2 of tokens, 1 of cost. Runs go in chunks of 200 (800 spans,
under the default queue bound of 2,048), each chunk followed by ``force_flush``.

Metrics per span: caller-thread CPU of the loop that makes the spans (``thread_time``, the issue's goal: at most 5%
more with metrics on), and CPU of all threads until every chunk's ``force_flush`` returned (``process_time``: the
worker's redaction, recording and SQLite writes, the honest throughput cost). Figures are medians over rounds of
the paired per-round ratio ``on / off``. Every round checks that the ``on`` variant recorded every span.

Goal: ``metrics_caller_cpu`` (<= 1.05). The all-thread ratio ``metrics_all_cpu`` is reported with no target.
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import otel_agentdiag as agentdiag
from benchmarks._common import benchmark_main
from otel_agentdiag import semconv as sc

HASH_KEY = "6f1d0c7a2b9e4f3a8d5c1e0b7a6f2d4c9e8b3a1f0d7c6b5a4e3f2d1c0b9a8e7f"
CHUNK = 200
SPANS_PER_RUN = 4
GOAL = 1.05
VARIANTS = ("off", "on")


def _one_run(i: int) -> None:
    with agentdiag.agent_run("bench-agent", conversation_id=f"conv-{i % 50}"):
        with agentdiag.iteration(0):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.record_response(response_model="gpt-4o-mini-2024-07-18", input_tokens=120, output_tokens=30)
                call.span.set_attribute(sc.AGENTDIAG_COST_USD, 0.000036)
            with agentdiag.tool_call("lookup"):
                pass


def _measure(variant: str, runs: int, folder: Path) -> dict[str, float]:
    """One variant, ``runs`` agent runs: caller-thread and all-thread CPU (µs per span)."""
    provider = MeterProvider(metric_readers=[InMemoryMetricReader()]) if variant == "on" else None
    diag = agentdiag.configure(
        store=folder / f"{variant}.db", hash_key=HASH_KEY, set_global=False, meter_provider=provider
    )
    try:
        gc.collect()
        caller = 0.0
        all_start = time.process_time()
        for start in range(0, runs, CHUNK):
            t0 = time.thread_time()
            for i in range(start, min(start + CHUNK, runs)):
                _one_run(i)
            caller += time.thread_time() - t0
            if not diag.force_flush():
                raise RuntimeError("the pipeline did not flush")
        all_cpu = time.process_time() - all_start
        stats = diag.stats()
    finally:
        diag.shutdown()
        if provider is not None:
            provider.shutdown()
    spans = runs * SPANS_PER_RUN
    accepted = stats["destinations"]["local"]["pipeline"]["totals"]["accepted"]
    if accepted != spans:
        raise RuntimeError(f"{variant}: {accepted} of {spans} spans stored")
    if variant == "on" and stats["metrics"]["spans"] != runs * 3:  # the iteration span is no operation
        raise RuntimeError(f"on: {stats['metrics']['spans']} spans recorded of {runs * 3}")
    return {"caller_cpu_us": caller / spans * 1e6, "all_cpu_us": all_cpu / spans * 1e6}


def run(quick: bool) -> dict[str, Any]:
    rounds, runs = (3, 400) if quick else (15, 2000)
    samples: dict[str, list[dict[str, float]]] = {variant: [] for variant in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "warmup").mkdir()
        for variant in VARIANTS:  # untimed: imports, first store, first meter
            _measure(variant, CHUNK, folder / "warmup")
        for round_index in range(rounds):
            order = VARIANTS if round_index % 2 == 0 else tuple(reversed(VARIANTS))
            round_folder = folder / f"round{round_index}"
            round_folder.mkdir()
            for variant in order:
                samples[variant].append(_measure(variant, runs, round_folder))
    ratios = {metric: _paired(samples, metric) for metric in ("caller_cpu_us", "all_cpu_us")}
    results: dict[str, Any] = {
        "rounds": rounds,
        "runs_per_round": runs,
        "spans_per_run": SPANS_PER_RUN,
        "samples": samples,
        "median_us_per_span": {
            variant: {metric: statistics.median(s[metric] for s in samples[variant]) for metric in samples[variant][0]}
            for variant in VARIANTS
        },
        "ratio_on_vs_off": ratios,
    }
    results["goals"] = goals(results)
    return results


def _paired(samples: dict[str, list[dict[str, float]]], metric: str) -> float:
    pairs = zip(samples["on"], samples["off"], strict=True)
    return round(statistics.median(on[metric] / off[metric] for on, off in pairs), 3)


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    value = results["ratio_on_vs_off"]["caller_cpu_us"]
    return [
        {
            "id": "metrics_caller_cpu",
            "what": "caller-thread CPU per span with metrics on / off (local pipeline, manual agent runs)",
            "value": value,
            "target": GOAL,
            "op": "<=",
            "met": value <= GOAL,
        }
    ]


def _print(results: dict[str, Any]) -> None:
    medians = results["median_us_per_span"]
    for variant in VARIANTS:
        print(
            f"{variant:>4}: caller {medians[variant]['caller_cpu_us']:.1f} µs/span, "
            f"all threads {medians[variant]['all_cpu_us']:.1f} µs/span"
        )
    ratios = results["ratio_on_vs_off"]
    print(f"on/off: caller {ratios['caller_cpu_us']:.3f}x, all threads {ratios['all_cpu_us']:.3f}x")
    for goal in results["goals"]:
        verdict = "met" if goal["met"] else "MISSED"
        print(f"goal {goal['id']}: {goal['value']:.3f} {goal['op']} {goal['target']} ({verdict})")


def main(argv: list[str] | None = None) -> int:
    runner: Callable[..., Any] = run
    return benchmark_main(
        argv,
        description=__doc__.splitlines()[0] if __doc__ else "",
        default_output="benchmarks/results/metrics.json",
        run=runner,
        print_report=_print,
    )


if __name__ == "__main__":
    raise SystemExit(main())
