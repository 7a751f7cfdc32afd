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
- LlamaIndex (``llama_index``): ``FunctionAgent.run`` with LlamaIndex's ``MockFunctionCallingLLM`` scripted.
  ``baseline``: no handler on the dispatcher; ``agentdiag`` and ``agentdiag_pipeline``: ``LlamaIndexInstrumentor``.
- Peers, each on the same SDK provider as ``agentdiag``, with their defaults (OpenInference records content):
  ``openinference`` (``openinference-instrumentation-openai-agents`` / ``-langchain`` / ``-llama-index``) and
  ``otel_genai`` (the official ``opentelemetry-instrumentation-genai-openai-agents`` / ``-langchain``). A peer that
  is not installed is reported as unavailable. They do not make the same spans: the number each makes per run is
  reported.

Timing: calling-thread CPU (``thread_time_ns``) and wall time per run, each run timed alone. In each round every
variant times one chunk of runs, in an order rotated per round, so drift on the machine hits them alike; a
chunk's figure is its median run. Reported, as medians over all rounds of the figures paired with the same
round's baseline: added µs per run, per span, and the ratio (with its quartiles). Then one chunk per variant runs
under cProfile: Python function calls per run, a figure free of timing noise.

Checks (untimed): each run's answer; one run of ``agentdiag`` makes exactly the expected spans (6 for the Agents
SDK and LlamaIndex, 7 for LangChain, whose ReAct graph takes three steps), and so does one run into the store.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import importlib
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from benchmarks._common import benchmark_main

EXPECTED = {
    "openai_agents": ["agent.iteration"] * 2 + ["chat"] * 2 + ["execute_tool", "invoke_agent"],
    "langchain": ["agent.iteration"] * 3 + ["chat"] * 2 + ["execute_tool", "invoke_agent"],
    "llama_index": ["agent.iteration"] * 2 + ["chat"] * 2 + ["execute_tool", "invoke_agent"],
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
Instrument = Callable[[Any], Callable[[], None]]
"""Instruments the framework into a tracer provider; returns the function that removes it again."""


def _peer(module: str, cls: str, **kwargs: Any) -> Instrument:
    """A peer's instrumentor (imported when first used; ``ImportError`` when not installed)."""

    def instrument(provider: Any) -> Callable[[], None]:
        instrumentor = getattr(importlib.import_module(module), cls)()
        instrumentor.instrument(tracer_provider=provider, **kwargs)
        return instrumentor.uninstrument

    return instrument


def _agents_runner() -> tuple[Callable[[], str], dict[str, Instrument], Callable[[], None]]:
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
    peers = {
        "openinference": _peer("openinference.instrumentation.openai_agents", "OpenAIAgentsInstrumentor"),
        "otel_genai": _peer("opentelemetry.instrumentation.genai.openai_agents", "OpenAIAgentsInstrumentor"),
    }
    return one, {"agentdiag": instrument, **peers}, loop.close


def _langchain_runner() -> tuple[Callable[[], str], dict[str, Instrument], Callable[[], None]]:
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

    peers = {
        "openinference": _peer("openinference.instrumentation.langchain", "LangChainInstrumentor"),
        "otel_genai": _peer("opentelemetry.instrumentation.genai.langchain", "LangChainInstrumentor"),
    }
    return one, {"agentdiag": instrument, **peers}, lambda: None


def _llama_index_runner() -> tuple[Callable[[], str], dict[str, Instrument], Callable[[], None]]:
    import warnings

    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ToolCallBlock
    from llama_index.core.llms import ChatMessage, ChatResponse, MessageRole
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool
    from pydantic.warnings import PydanticDeprecationWarning

    from otel_agentdiag.instrumentation.llama_index import LlamaIndexInstrumentor

    # llama-index-workflows reads pydantic 2's deprecated model fields on every run.
    warnings.filterwarnings("ignore", category=PydanticDeprecationWarning)

    class Scripted(MockFunctionCallingLLM):
        def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            if any(m.role == MessageRole.TOOL for m in messages):
                message = ChatMessage(role=MessageRole.ASSISTANT, content="Sunny.")
            else:
                call = ToolCallBlock(tool_call_id="c1", tool_name="get_weather", tool_kwargs={"city": "Paris"})
                message = ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])
            return ChatResponse(message=message, raw={"usage": {"prompt_tokens": 10, "completion_tokens": 2}})

    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    tool = FunctionTool.from_defaults(get_weather)
    loop = asyncio.new_event_loop()

    async def run_once() -> str:  # a workflow starts its tasks on the running loop
        agent = FunctionAgent(name="weather_agent", tools=[tool], llm=Scripted(), streaming=False)
        return str(await agent.run(user_msg="Paris?"))

    def one() -> str:
        return loop.run_until_complete(run_once())

    def instrument(provider: Any) -> Callable[[], None]:
        instrumentor = LlamaIndexInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        return instrumentor.uninstrument

    peers = {"openinference": _peer("openinference.instrumentation.llama_index", "LlamaIndexInstrumentor")}
    return one, {"agentdiag": instrument, **peers}, loop.close


FRAMEWORKS: dict[str, Callable[[], Any]] = {
    "openai_agents": _agents_runner,
    "langchain": _langchain_runner,
    "llama_index": _llama_index_runner,
}


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


def _python_calls(one: Callable[[], str], instrument: Instrument | None, provider: Any, runs: int) -> float:
    """Python function calls per run in this thread, under cProfile: a figure free of timing noise."""
    remove = instrument(provider) if instrument is not None else (lambda: None)
    try:
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(runs):
            one()
        profile.disable()
    finally:
        remove()
    return pstats.Stats(profile).total_calls / runs  # type: ignore[attr-defined]


def measure(framework: str, *, runs: int, repetitions: int, chunk: int) -> dict[str, Any]:
    import otel_agentdiag
    from otel_agentdiag.storage import SpanStore

    one, instrumentors, close = FRAMEWORKS[framework]()
    exporter = _Counting()
    plain = TracerProvider()
    plain.add_span_processor(BatchSpanProcessor(exporter))
    folder = tempfile.TemporaryDirectory()
    store = Path(folder.name) / "traces.db"
    diag = otel_agentdiag.configure(
        service_name="framework-bench",
        store=store,
        hash_key=b"edbaf4464730428896444fb94284378ef432447d96a85f1ac2ea5d1b8f526baf",
        set_global=False,
    )
    # variant -> (instrument, provider); the baseline instruments nothing.
    variants: dict[str, tuple[Instrument | None, Any]] = {"baseline": (None, None)}
    unavailable: dict[str, str] = {}
    spans_per_variant: dict[str, list[str]] = {}
    try:
        for name, instrument in instrumentors.items():
            exporter.names.clear()
            try:
                remove = instrument(plain)
            except Exception as exc:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
                unavailable[name] = f"{type(exc).__name__}: {exc}"
                continue
            try:
                if one() != "Sunny.":
                    raise RuntimeError(f"{name}: unexpected answer")
            finally:
                remove()
            plain.force_flush()
            spans_per_variant[name] = sorted(exporter.names)
            variants[name] = (instrument, plain)
        ours = instrumentors["agentdiag"]
        remove = ours(diag.tracer_provider)
        try:
            one()
        finally:
            remove()
        diag.force_flush()
        variants["agentdiag_pipeline"] = (ours, diag.tracer_provider)
        # Checks: ours makes exactly the expected spans, on both providers.
        with SpanStore(store, create=False) as reader:
            stored = sum(summary.span_count for summary in reader.list_traces())
        first_words = sorted(name.split(" ")[0] for name in spans_per_variant["agentdiag"])
        spans_per_run = len(EXPECTED[framework])
        if first_words != sorted(EXPECTED[framework]) or stored != spans_per_run:
            raise RuntimeError(f"unexpected spans: {spans_per_variant['agentdiag']}, {stored} stored")
        for _ in range(chunk):  # warm-up
            one()
        names = list(variants)
        # One round: every variant times one chunk, in an order rotated per round; its figure is the chunk's
        # median. Paired per round against the baseline's chunk of the same round.
        rounds: dict[str, list[dict[str, float]]] = {v: [] for v in names}
        for rep in range(repetitions):
            for index in range(runs // chunk):
                shift = (index + rep) % len(names)
                for name in names[shift:] + names[:shift]:
                    instrument, provider = variants[name]
                    remove = instrument(provider) if instrument is not None else (lambda: None)
                    try:
                        gc.collect()
                        cpu, wall = _time(one, chunk)
                    finally:
                        remove()
                    figures = {"cpu_us": statistics.median(cpu) / 1e3, "wall_us": statistics.median(wall) / 1e3}
                    rounds[name].append(figures)
        calls = {name: _python_calls(one, *variants[name], chunk) for name in names}
        out: dict[str, Any] = {
            "runs": runs,
            "repetitions": repetitions,
            "chunk": chunk,
            "spans_per_run": spans_per_run,
            "spans": spans_per_variant,
            "unavailable": unavailable,
            "variants": {},
        }
        base = rounds["baseline"]
        for name in names:
            mine = rounds[name]
            added = [r["cpu_us"] - b["cpu_us"] for r, b in zip(mine, base, strict=True)]
            ratio = [r["cpu_us"] / b["cpu_us"] for r, b in zip(mine, base, strict=True)]
            out["variants"][name] = {
                "cpu_us_per_run": statistics.median(r["cpu_us"] for r in mine),
                "wall_us_per_run": statistics.median(r["wall_us"] for r in mine),
                "added_cpu_us_per_run": statistics.median(added),
                "added_cpu_us_per_span": statistics.median(added) / spans_per_run,
                "cpu_ratio": statistics.median(ratio),
                "cpu_ratio_quartiles": statistics.quantiles(ratio, n=4) if len(ratio) > 1 else [ratio[0]] * 3,
                "python_calls_per_run": calls[name],
                "added_python_calls_per_run": calls[name] - calls["baseline"],
                "rounds": mine,
            }
        for peer in ("openinference", "otel_genai"):
            if peer in out["variants"] and out["variants"][peer]["added_cpu_us_per_run"] > 0:
                out[f"agentdiag_vs_{peer}"] = (
                    out["variants"]["agentdiag"]["added_cpu_us_per_run"] / out["variants"][peer]["added_cpu_us_per_run"]
                )
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
        if not isinstance(result, dict) or "variants" not in result:
            continue
        spans = result["spans_per_run"]
        print(f"{framework}: calling-thread CPU per agent run ({spans} spans), paired medians")
        for name, figures in result["variants"].items():
            print(
                f"  {name:<20} {figures['cpu_us_per_run']:9.0f} µs  added {figures['added_cpu_us_per_run']:7.0f} µs"
                f" ({figures['added_cpu_us_per_span']:5.0f} µs a span)  ratio {figures['cpu_ratio']:.2f}x"
                f"  spans/run {len(result['spans'].get(name, [])) or result['spans_per_run']}"
                f"  +{figures['added_python_calls_per_run']:.0f} Python calls/run"
            )
        for peer in ("openinference", "otel_genai"):
            if f"agentdiag_vs_{peer}" in result:
                print(f"  added CPU, ours / {peer}: {result[f'agentdiag_vs_{peer}']:.2f}x")
        for peer, reason in result["unavailable"].items():
            print(f"  {peer}: unavailable ({reason})")


def main(argv: list[str] | None = None) -> int:
    return benchmark_main(
        argv,
        description=__doc__.splitlines()[0],
        default_output="benchmarks/results/framework_overhead.json",
        run=run,
        print_report=print_report,
    )


if __name__ == "__main__":
    raise SystemExit(main())
