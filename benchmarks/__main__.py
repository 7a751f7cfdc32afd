"""``python -m benchmarks [--quick] [--output FILE]``: per-span cost of the pipeline against the bare SDK.

Every variant runs in every round, in rotating order; a figure is the median over rounds of the *paired*
ratio variant/baseline within a round (absolute times on a shared machine move by up to 50% between runs,
paired ratios by a few percent; see ``shared/research/perf.md``).

Variants (each a fresh TracerProvider per round, not timed):

- ``bare``: opentelemetry-sdk + BatchSpanProcessor + a no-op exporter (the baseline);
- ``redact_noop``: RedactingSpanProcessor(strict, HMAC) + BatchSpanProcessor + no-op exporter (redaction alone);
- ``agentdiag``: the default local pipeline ``configure()`` builds: SessionSequencer + RedactingSpanProcessor
  (local, HMAC) + AccountingBatchSpanProcessor + SQLiteSpanExporter into a temporary store.

Shapes: ``span``: one span with 10 GenAI attributes (two of them correlation IDs); ``iteration``: one agent
iteration through the manual wrappers (iteration > llm call with usage + tool call), the same wrappers
on both variants. Metrics: caller-thread CPU per span (``thread_time``), and CPU of all threads per span
from the first span to the end of ``force_flush`` (``process_time``: the export thread's work counts).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import otel_agentdiag as agentdiag
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.redaction import IdHasher, RedactingSpanProcessor
from otel_agentdiag.redaction.policy import STRICT
from otel_agentdiag.testing import TEST_HASH_KEY


class NoOpExporter(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


def make_bare(_: Path) -> tuple[TracerProvider, Callable[[], None]]:
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(NoOpExporter(), max_queue_size=65536))
    return provider, provider.shutdown


def make_agentdiag(folder: Path) -> tuple[TracerProvider, Callable[[], None]]:
    provider = TracerProvider(shutdown_on_exit=False)
    diag = agentdiag.configure(
        store=folder / f"bench-{time.perf_counter_ns()}.db",
        hash_key=TEST_HASH_KEY,
        tracer_provider=provider,
        set_global=False,
    )
    # Same queue bound as the baseline, so neither drops spans inside a round.
    for processor in diag.batch_processors:
        processor.max_queue_spans = 65536
        processor.max_queue_bytes = 1 << 30

    def close() -> None:
        diag.shutdown()
        provider.shutdown()

    return provider, close


def make_redact_noop(_: Path) -> tuple[TracerProvider, Callable[[], None]]:
    """Redaction alone: RedactingSpanProcessor(strict) in front of Batch(no-op), to split the cost."""
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(
        RedactingSpanProcessor(
            BatchSpanProcessor(NoOpExporter(), max_queue_size=65536), policy=STRICT, hasher=IdHasher(TEST_HASH_KEY)
        )
    )
    return provider, provider.shutdown


VARIANTS = {"bare": make_bare, "redact_noop": make_redact_noop, "agentdiag": make_agentdiag}
agentdiag.register_names(tools=["get_weather"])


def shape_span(provider: TracerProvider, n: int) -> int:
    tracer = provider.get_tracer("bench")
    for i in range(n):
        with tracer.start_as_current_span(
            "chat gpt-4o-mini",
            attributes={
                "agentdiag.kind": "llm",
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.conversation.id": f"conversation-{i % 8}",
                "user.id": f"user-{i % 8}@example.com",
            },
        ) as span:
            span.set_attribute("gen_ai.response.model", "gpt-4o-mini-2024-07-18")
            span.set_attribute("gen_ai.response.finish_reasons", ("stop",))
            span.set_attribute("gen_ai.usage.input_tokens", 120)
            span.set_attribute("gen_ai.usage.output_tokens", 15)
    return n


def shape_iteration(provider: TracerProvider, n: int) -> int:
    manual.use_tracer_provider(provider)
    try:
        with agentdiag.agent_run("bench-agent", conversation_id="bench-conversation", user_id="bench-user"):
            for i in range(n):
                with agentdiag.iteration(i):
                    with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                        call.record_response(
                            response_model="gpt-4o-mini",
                            response_id=f"resp-{i}",
                            finish_reasons=["tool_calls"],
                            input_tokens=120,
                            output_tokens=15,
                        )
                    with agentdiag.tool_call("get_weather", call_id=f"call-{i}"):
                        pass
    finally:
        manual.use_tracer_provider(None)
    return 3 * n + 1


SHAPES = {"span": shape_span, "iteration": shape_iteration}


def run(quick: bool) -> dict:
    rounds, per_round = (7, 400) if quick else (21, 2000)
    results: dict = {"rounds": rounds, "units_per_round": per_round, "shapes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for shape_name, shape in SHAPES.items():
            samples = {v: {"caller_cpu_us": [], "all_cpu_us": [], "wall_us": []} for v in VARIANTS}
            names = list(VARIANTS)
            # Warm-up: one untimed pass per variant.
            for v in names:
                provider, close = VARIANTS[v](folder)
                shape(provider, per_round // 10)
                provider.force_flush()
                close()
            for r in range(rounds):
                order = names[r % len(names) :] + names[: r % len(names)]
                for v in order:
                    provider, close = VARIANTS[v](folder)
                    t_all, t_thread, t_wall = time.process_time_ns(), time.thread_time_ns(), time.perf_counter_ns()
                    spans = shape(provider, per_round)
                    d_thread, d_wall = time.thread_time_ns() - t_thread, time.perf_counter_ns() - t_wall
                    provider.force_flush()
                    d_all = time.process_time_ns() - t_all
                    close()
                    samples[v]["caller_cpu_us"].append(d_thread / spans / 1000)
                    samples[v]["wall_us"].append(d_wall / spans / 1000)
                    samples[v]["all_cpu_us"].append(d_all / spans / 1000)
            shape_result: dict = {}
            for v in names:
                shape_result[v] = {
                    metric: {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
                    for metric, vals in samples[v].items()
                }
                if v != "bare":
                    shape_result[v]["ratio_vs_bare"] = {
                        metric: statistics.median(
                            a / b for a, b in zip(samples[v][metric], samples["bare"][metric], strict=True)
                        )
                        for metric in samples[v]
                    }
            results["shapes"][shape_name] = shape_result
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (7 rounds of 400 units)")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/latest.json"))
    args = parser.parse_args(argv)
    results = run(args.quick)
    results["python"] = sys.version.split()[0]
    results["machine"] = platform.machine()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2))
    print(
        f"{'shape':<10} {'variant':<12} {'caller CPU µs/span':>20} {'all-thread CPU µs/span':>24}"
        f" {'ratio caller':>13} {'ratio all':>10}"
    )
    for shape_name, shape_result in results["shapes"].items():
        for v, r in shape_result.items():
            ratio = r.get("ratio_vs_bare", {})
            print(
                f"{shape_name:<10} {v:<12} {r['caller_cpu_us']['median']:>20.1f} {r['all_cpu_us']['median']:>24.1f}"
                f" {ratio.get('caller_cpu_us', 1.0):>12.2f}x {ratio.get('all_cpu_us', 1.0):>9.2f}x"
            )
    print(f"results: {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
