"""``python -m benchmarks.disabled [--quick] [--output PATH]``: what otel-agentdiag costs when it is switched off.

The same program (one agent run through the manual wrappers: ``agent_run`` > ``iteration`` > ``llm_call`` with
usage > ``tool_call``, 4 spans) in four variants, each round running every variant in its own fresh process (the
switches are process-wide), in an order that rotates per round:

- ``unconfigured`` (the baseline): ``configure()`` never called: the OpenTelemetry API with nothing set up;
- ``disabled``: ``AGENTDIAG_ENABLED=false`` and ``configure(store=...)`` called: it must set up nothing (no
  provider, global or not; no file), so the wrappers cost what they cost unconfigured (goal: at most 5% more);
- ``sampled_out``: ``configure(store=...)`` with ``OTEL_TRACES_SAMPLER=always_off``: a real provider whose
  sampler drops every span (reported, no target: the SDK's sampling decision is paid per span);
- ``otel_api``: the same four nested spans made with the OpenTelemetry API's ``start_as_current_span`` and
  nothing set up (reported, no target: what our wrappers add over the API's own no-op spans).

Metric: caller-thread CPU per span (``thread_time``) over the timed runs, after an untimed warm-up in the same
process. Figures are medians over rounds of the paired per-round ratio against ``unconfigured``. The ``disabled``
child checks that nothing was set up (the global tracer provider is still the API's proxy, no store file).

Goal: ``disabled_vs_unconfigured_caller_cpu`` (<= 1.05).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._common import benchmark_main

VARIANTS = ("unconfigured", "disabled", "sampled_out", "otel_api")
SPANS_PER_RUN = 4
GOAL = 1.05
_ENV = {
    "unconfigured": {},
    "disabled": {"AGENTDIAG_ENABLED": "false"},
    "sampled_out": {"OTEL_TRACES_SAMPLER": "always_off"},
    "otel_api": {},
}


def _child(variant: str, runs: int, folder: str) -> dict[str, float]:
    """In a fresh process: the variant's program, ``runs`` agent runs timed after as many untimed."""
    import time

    from opentelemetry import trace

    import otel_agentdiag as agentdiag

    diag = None
    store = Path(folder) / f"{variant}.db"
    if variant in ("disabled", "sampled_out"):
        diag = agentdiag.configure(service_name="bench", store=store)
    if variant == "disabled":
        if type(trace.get_tracer_provider()).__name__ != "ProxyTracerProvider" or store.exists():
            raise RuntimeError("configure() set something up while AGENTDIAG_ENABLED=false")

    if variant == "otel_api":
        tracer = trace.get_tracer("bench")

        def one_run(i: int) -> None:
            with tracer.start_as_current_span("invoke_agent bench-agent"):
                with tracer.start_as_current_span("agent.iteration"):
                    with tracer.start_as_current_span("chat gpt-4o-mini") as span:
                        span.set_attribute("gen_ai.usage.input_tokens", 120)
                        span.set_attribute("gen_ai.usage.output_tokens", 30)
                    with tracer.start_as_current_span("execute_tool lookup"):
                        pass

    else:

        def one_run(i: int) -> None:
            with agentdiag.agent_run("bench-agent", conversation_id=f"conv-{i % 50}"):
                with agentdiag.iteration(0):
                    with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                        call.record_response(input_tokens=120, output_tokens=30)
                    with agentdiag.tool_call("lookup"):
                        pass

    for i in range(runs):  # warm-up: imports, caches, first-use paths
        one_run(i)
    start = time.thread_time()
    for i in range(runs):
        one_run(i)
    caller = time.thread_time() - start
    if diag is not None:
        diag.shutdown()
    return {"caller_cpu_us": caller / (runs * SPANS_PER_RUN) * 1e6}


def _measure(variant: str, runs: int, folder: Path) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    env.update(_ENV[variant])
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.disabled", "--child", variant, str(runs), str(folder)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0 or done.stderr.strip():
        raise RuntimeError(f"{variant}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    result: dict[str, float] = json.loads(done.stdout)
    return result


def run(quick: bool) -> dict[str, Any]:
    rounds, runs = (3, 5_000) if quick else (11, 50_000)
    samples: dict[str, list[dict[str, float]]] = {variant: [] for variant in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(rounds):
            shift = round_index % len(VARIANTS)
            order = VARIANTS[shift:] + VARIANTS[:shift]
            folder = Path(tmp) / f"round{round_index}"
            folder.mkdir()
            for variant in order:
                samples[variant].append(_measure(variant, runs, folder))
    ratios = {
        variant: round(
            statistics.median(
                v["caller_cpu_us"] / b["caller_cpu_us"]
                for v, b in zip(samples[variant], samples["unconfigured"], strict=True)
            ),
            3,
        )
        for variant in VARIANTS
        if variant != "unconfigured"
    }
    results: dict[str, Any] = {
        "rounds": rounds,
        "runs_per_round": runs,
        "spans_per_run": SPANS_PER_RUN,
        "samples": samples,
        "median_us_per_span": {
            variant: statistics.median(s["caller_cpu_us"] for s in samples[variant]) for variant in VARIANTS
        },
        "ratio_vs_unconfigured": ratios,
    }
    results["goals"] = goals(results)
    return results


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    value = results["ratio_vs_unconfigured"]["disabled"]
    return [
        {
            "id": "disabled_vs_unconfigured_caller_cpu",
            "what": "caller-thread CPU per span, AGENTDIAG_ENABLED=false / configure() never called (manual runs)",
            "value": value,
            "target": GOAL,
            "op": "<=",
            "met": value <= GOAL,
        }
    ]


def _print(results: dict[str, Any]) -> None:
    medians = results["median_us_per_span"]
    ratios = results["ratio_vs_unconfigured"]
    for variant in VARIANTS:
        ratio = "" if variant == "unconfigured" else f"  {ratios[variant]:.3f}x unconfigured"
        print(f"{variant:>12}: {medians[variant]:.2f} µs/span (caller thread){ratio}")
    for goal in results["goals"]:
        verdict = "met" if goal["met"] else "MISSED"
        print(f"goal {goal['id']}: {goal['value']:.3f} {goal['op']} {goal['target']} ({verdict})")


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["--child"]:
        variant, runs, folder = arguments[1:4]
        print(json.dumps(_child(variant, int(runs), folder)))
        return 0
    runner: Callable[..., Any] = run
    return benchmark_main(
        arguments,
        description=__doc__.splitlines()[0] if __doc__ else "",
        default_output="benchmarks/results/disabled.json",
        run=runner,
        print_report=_print,
    )


if __name__ == "__main__":
    raise SystemExit(main())
