"""``python -m benchmarks.framework_overhead [--quick] [--output PATH]``: what the framework integrations cost.

One agent run is the weather loop of the tests: the model asks for ``get_weather``, the tool answers, the model
answers (two turns, one tool call), with a scripted model in process (no network), so the figure is the
framework's own work plus ours.

- OpenAI Agents SDK (``agents``): ``Runner.run`` with the SDK's ``ScriptedModel`` (``emit_traces=True``).
  ``baseline``: the SDK's tracing on with no trace processor (``set_trace_processors([])``: the SDK still builds
  its spans); ``agentdiag``: ``OpenAIAgentsInstrumentor`` on an SDK ``TracerProvider`` with a
  ``BatchSpanProcessor`` over a no-op exporter; ``agentdiag_pipeline``: the same on the provider
  ``otel_agentdiag.configure(store=<tmp>)`` builds (sequencer, redaction on the worker, SQLite).
- LangChain (``langchain``): ``create_agent(...).invoke`` with the tests' ``ScriptedChatModel``. ``baseline``: no
  handler; ``agentdiag`` and ``agentdiag_pipeline``: ``LangChainInstrumentor``, as above.

Timing: calling-thread CPU (``thread_time_ns``) and wall time per run, each run timed alone; variants take turns
on chunks of runs, rotated, so drift on the machine hits them alike; figures are medians over repetitions of the
per-chunk medians. Reported: added µs per run against the same repetition's baseline, per span,
and the ratio. Checks (untimed): each run's answer, and one run of each traced variant makes the expected spans
(6 for the Agents SDK, 7 for LangChain, whose ReAct graph takes three steps).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from benchmarks._common import save_results

EXPECTED = {
    "openai_agents": ["agent.iteration"] * 2 + ["chat"] * 2 + ["execute_tool", "invoke_agent"],
    "langchain": ["agent.iteration"] * 3 + ["chat"] * 2 + ["execute_tool", "invoke_agent"],
}
"""The first word of each span's name in one run: an Agents SDK turn holds the model call and the tool call;
a LangGraph step runs one node (model, tools, model)."""

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


class _Counting(SpanExporter):
    def __init__(self) -> None:
        self.names: list[str] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.names.extend(s.name for s in spans)
        return SpanExportResult.SUCCESS


# -- the two frameworks ---------------------------------------------------------------------------------
def _agents_runner() -> tuple[Callable[[], str], Callable[[Any], Callable[[], None]], Callable[[], None]]:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
    from agents.tracing import set_trace_processors

    from otel_agentdiag.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    loop = asyncio.new_event_loop()

    def one() -> str:
        model = ScriptedModel(
            [
                ModelStep(output=[function_call("get_weather", {"city": "Paris"}, call_id="c1")]),
                ModelStep(output=[assistant_message("Sunny.")]),
            ],
            emit_traces=True,
        )
        agent = Agent(name="weather_agent", instructions="x", model=model, tools=[get_weather])
        result = loop.run_until_complete(Runner.run(agent, "Paris?", run_config=RunConfig(group_id="t")))
        return str(result.final_output)

    def instrument(provider: Any) -> Callable[[], None]:
        instrumentor = OpenAIAgentsInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        return instrumentor.uninstrument

    set_trace_processors([])
    return one, instrument, loop.close


def _langchain_runner() -> tuple[Callable[[], str], Callable[[Any], Callable[[], None]], Callable[[], None]]:
    from fakes.langchain_model import ScriptedChatModel, final_text, tool_calls
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from otel_agentdiag.instrumentation.langchain import LangChainInstrumentor

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    def one() -> str:
        model = ScriptedChatModel.from_steps(tool_calls(("get_weather", {"city": "Paris"})), final_text("Sunny."))
        agent = create_agent(model, tools=[get_weather], name="weather_agent")
        state = agent.invoke({"messages": [("user", "Paris?")]}, config={"configurable": {"thread_id": "t"}})
        return str(state["messages"][-1].content)

    def instrument(provider: Any) -> Callable[[], None]:
        instrumentor = LangChainInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        return instrumentor.uninstrument

    return one, instrument, lambda: None


FRAMEWORKS: dict[str, Callable[[], Any]] = {"openai_agents": _agents_runner, "langchain": _langchain_runner}


# -- measuring ------------------------------------------------------------------------------------------
def _time(one: Callable[[], str], runs: int) -> tuple[list[int], list[int]]:
    cpu, wall = [], []
    for _ in range(runs):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        answer = one()
        c1, w1 = time.thread_time_ns(), time.perf_counter_ns()
        if answer != "Sunny.":
            raise RuntimeError(f"unexpected answer {answer!r}")
        cpu.append(c1 - c0)
        wall.append(w1 - w0)
    return cpu, wall


def measure(framework: str, *, runs: int, repetitions: int, chunk: int) -> dict[str, Any]:
    one, instrument, close = FRAMEWORKS[framework]()
    exporter = _Counting()
    plain = TracerProvider()
    plain.add_span_processor(BatchSpanProcessor(exporter))
    import otel_agentdiag

    folder = tempfile.TemporaryDirectory()
    diag = otel_agentdiag.configure(
        service_name="framework-bench", store=Path(folder.name) / "traces.db", hash_key=b"k" * 32, set_global=False
    )
    providers: dict[str, Any] = {"baseline": None, "agentdiag": plain, "agentdiag_pipeline": diag.tracer_provider}
    variants = list(providers)
    try:
        # Check once per traced variant: one run makes the expected spans.
        for name in ("agentdiag", "agentdiag_pipeline"):
            remove = instrument(providers[name])
            try:
                one()
            finally:
                remove()
        plain.force_flush()
        diag.force_flush()
        from otel_agentdiag.storage import SpanStore

        with SpanStore(Path(folder.name) / "traces.db", create=False) as reader:
            stored = sum(summary.span_count for summary in reader.list_traces())
        names = sorted(name.split(" ")[0] for name in exporter.names)
        spans_per_run = len(EXPECTED[framework])
        if names != sorted(EXPECTED[framework]) or stored != spans_per_run:
            raise RuntimeError(f"unexpected spans: {exporter.names}, {stored} stored")
        for _ in range(chunk):  # warm-up
            one()
        per_rep: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        for rep in range(repetitions):
            samples: dict[str, tuple[list[int], list[int]]] = {v: ([], []) for v in variants}
            for index in range(runs // chunk):
                order = variants[(index + rep) % 3 :] + variants[: (index + rep) % 3]
                for name in order:
                    remove = instrument(providers[name]) if providers[name] is not None else (lambda: None)
                    try:
                        gc.collect()
                        cpu, wall = _time(one, chunk)
                    finally:
                        remove()
                    samples[name][0].extend(cpu)
                    samples[name][1].extend(wall)
            for name in variants:
                cpu_us, wall_us = statistics.median(samples[name][0]) / 1e3, statistics.median(samples[name][1]) / 1e3
                per_rep[name].append({"cpu_us": cpu_us, "wall_us": wall_us})
        out: dict[str, Any] = {
            "runs": runs,
            "repetitions": repetitions,
            "chunk": chunk,
            "spans_per_run": spans_per_run,
            "variants": {},
        }
        for name in variants:
            cpu = [r["cpu_us"] for r in per_rep[name]]
            added = [r["cpu_us"] - b["cpu_us"] for r, b in zip(per_rep[name], per_rep["baseline"], strict=True)]
            ratio = [r["cpu_us"] / b["cpu_us"] for r, b in zip(per_rep[name], per_rep["baseline"], strict=True)]
            out["variants"][name] = {
                "cpu_us_per_run": statistics.median(cpu),
                "wall_us_per_run": statistics.median(r["wall_us"] for r in per_rep[name]),
                "added_cpu_us_per_run": statistics.median(added),
                "added_cpu_us_per_span": statistics.median(added) / spans_per_run,
                "cpu_ratio": statistics.median(ratio),
                "samples": per_rep[name],
            }
        return out
    finally:
        close()
        diag.shutdown()
        plain.shutdown()
        folder.cleanup()


def run(*, quick: bool = False) -> dict[str, Any]:
    runs, repetitions, chunk = (60, 2, 10) if quick else (400, 5, 20)
    return {name: measure(name, runs=runs, repetitions=repetitions, chunk=chunk) for name in FRAMEWORKS}


def print_report(results: dict[str, Any]) -> None:
    for framework, result in results.items():
        spans = result["spans_per_run"]
        print(f"{framework}: calling-thread CPU per agent run ({spans} spans), median of repetitions")
        for name, figures in result["variants"].items():
            print(
                f"  {name:<20} {figures['cpu_us_per_run']:9.0f} µs  added {figures['added_cpu_us_per_run']:7.0f} µs"
                f" ({figures['added_cpu_us_per_span']:5.0f} µs a span)  ratio {figures['cpu_ratio']:.2f}x"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few runs (a smoke test; noisy figures)")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/framework_overhead.json"))
    arguments = parser.parse_args(argv)
    results = run(quick=arguments.quick)
    print_report(results)
    save_results(results, arguments.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
