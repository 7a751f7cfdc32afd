"""What content capture costs: the demo agent with ``capture_content`` on against off, same pipeline, same run.

Each round runs a chunk of demo-agent runs (``otel_agentdiag.demo``: 12 spans and 22 captured values a run,
through the manual wrappers' ``record_content``) once with capture off and once with it on, in alternating
order, each through its own ``configure(store=...)`` pipeline. Two figures per variant, paired per round:

* calling-thread CPU per run: what the agent's own thread pays (the snapshot is taken there);
* process CPU per run including the flush: what the whole pipeline pays (encoding and the ``span_content``
  rows are written on the SQLite branch's worker).

Ratios are on/off. ``python -m benchmarks.content_capture [--quick] [--output F]``.
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import benchmark_main


def _chunk(diag: Any, runs: int) -> tuple[float, float]:
    """Median calling-thread CPU per run (µs) and process CPU per run including the flush (µs)."""
    from otel_agentdiag.demo import run_demo_agent

    gc.collect()
    per_run = []
    p0 = time.process_time_ns()
    for _ in range(runs):
        c0 = time.thread_time_ns()
        result = run_demo_agent()
        per_run.append(time.thread_time_ns() - c0)
        if result.tool_errors != 1:
            raise RuntimeError("the demo agent did not run as scripted")
    if not diag.force_flush():
        raise RuntimeError("the pipeline did not flush")
    return statistics.median(per_run) / 1e3, (time.process_time_ns() - p0) / runs / 1e3


def measure(*, runs: int, repetitions: int, chunk: int) -> dict[str, Any]:
    import otel_agentdiag
    from otel_agentdiag.instrumentation import manual
    from otel_agentdiag.storage import SpanStore

    folder = tempfile.TemporaryDirectory()
    stores = {name: Path(folder.name) / f"{name}.db" for name in ("off", "on")}
    # Generous retention: the benchmark must not measure pruning.
    diags = {
        name: otel_agentdiag.configure(
            service_name="content-bench",
            store=path,
            hash_key=b"3d335240f970e481f291935feef988b68d29b20346c967e99e19119a5d865b7a",
            set_global=False,
            capture_content=name == "on",
        )
        for name, path in stores.items()
    }
    recorder = diags["on"].content
    assert recorder is not None

    def use(name: str) -> None:
        manual.use_tracer_provider(diags[name].tracer_provider)
        if name == "on":
            recorder.install()
        else:
            recorder.uninstall()

    try:
        rounds: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
        for name in ("off", "on"):  # warm-up, and the checks
            use(name)
            _chunk(diags[name], chunk)
        with SpanStore(stores["on"], create=False) as reader:
            (trace, *_rest) = reader.list_traces()
            spans_per_run = trace.span_count
            values_per_run = len(reader.trace_content(trace.trace_id))
            content_bytes = reader.content_summary()[1] / chunk
        with SpanStore(stores["off"], create=False) as reader:
            if reader.content_summary()[0] != 0:
                raise RuntimeError("capture off stored content")
        for rep in range(repetitions):
            for index in range(runs // chunk):
                order = ("off", "on") if (index + rep) % 2 == 0 else ("on", "off")
                for name in order:
                    use(name)
                    rounds[name].append(_chunk(diags[name], chunk))
        off, on = rounds["off"], rounds["on"]
        thread_ratio = [b[0] / a[0] for a, b in zip(off, on, strict=True)]
        process_ratio = [b[1] / a[1] for a, b in zip(off, on, strict=True)]
        added_thread = [b[0] - a[0] for a, b in zip(off, on, strict=True)]
        added_process = [b[1] - a[1] for a, b in zip(off, on, strict=True)]
        return {
            "runs": runs,
            "repetitions": repetitions,
            "chunk": chunk,
            "spans_per_run": spans_per_run,
            "captured_values_per_run": values_per_run,
            "content_bytes_per_run": content_bytes,
            "thread_cpu_us_per_run": {
                "off": statistics.median(a for a, _ in off),
                "on": statistics.median(a for a, _ in on),
            },
            "process_cpu_us_per_run": {
                "off": statistics.median(p for _, p in off),
                "on": statistics.median(p for _, p in on),
            },
            "thread_cpu_ratio": statistics.median(thread_ratio),
            "thread_cpu_ratio_quartiles": statistics.quantiles(thread_ratio, n=4),
            "process_cpu_ratio": statistics.median(process_ratio),
            "process_cpu_ratio_quartiles": statistics.quantiles(process_ratio, n=4),
            "added_thread_cpu_us_per_span": statistics.median(added_thread) / spans_per_run,
            "added_process_cpu_us_per_span": statistics.median(added_process) / spans_per_run,
            "rounds": rounds,
        }
    finally:
        recorder.uninstall()
        for diag in diags.values():
            diag.shutdown()
        folder.cleanup()


def run(*, quick: bool = False) -> dict[str, Any]:
    runs, repetitions, chunk = (40, 2, 10) if quick else (400, 5, 20)
    return measure(runs=runs, repetitions=repetitions, chunk=chunk)


def print_report(result: dict[str, Any]) -> None:
    spans, values, size = result["spans_per_run"], result["captured_values_per_run"], result["content_bytes_per_run"]
    print(f"demo agent: {spans} spans, {values} captured values, {size:.0f} content bytes a run")
    for label, key in (("calling-thread CPU", "thread"), ("process CPU incl. flush", "process")):
        figures = result[f"{key}_cpu_us_per_run"]
        low, _mid, high = result[f"{key}_cpu_ratio_quartiles"]
        print(
            f"  {label:<24} off {figures['off']:8.0f} µs  on {figures['on']:8.0f} µs  ratio on/off"
            f" {result[f'{key}_cpu_ratio']:.2f}x [{low:.2f}..{high:.2f}]"
            f"  +{result[f'added_{key}_cpu_us_per_span']:.1f} µs a span"
        )


def main(argv: list[str] | None = None) -> int:
    return benchmark_main(
        argv,
        description=__doc__.splitlines()[0],
        default_output="benchmarks/results/content_capture.json",
        run=run,
        print_report=print_report,
    )


if __name__ == "__main__":
    raise SystemExit(main())
