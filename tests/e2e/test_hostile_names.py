"""End to end: names that are credentials never leave, through any entry point, to any destination (issue 20,
class 2).

One agent program, run through ``configure()`` (local SQLite store and strict OTLP to a real receiver on
127.0.0.1), declares tool, agent, model and guardrail names that are credentials (``tests/fakes/secret_names.py``)
through every way a name gets in: ``register_names()``, ``@tool``, ``@agent``, ``agent_run(name)``,
``tool_call(name)``, ``llm_call(model=...)``, the raw API, a LangChain tool definition, a per-call ``run_name``, a
LangGraph graph and node, and the Agents SDK's agent, tool, handoff and guardrail objects. Then every destination
is read as bytes: the store's database, ``-wal`` and ``-shm`` (while the writer has them open and after it
closed), every OTLP request body, ``agentdiag export`` in each format, and ``agentdiag show``/``traces`` output.
None holds a secret (nor its tail, in any case); the names' places hold ``_OTHER``; the warnings name kinds only.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import operator
import os
import secrets
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph", reason="langgraph (a dev dependency) is not installed")
pytest.importorskip("agents", reason="the openai-agents package (the `openai-agents` extra) is not installed")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the `otlp` extra is not installed")

from agents import Agent, GuardrailFunctionOutput, RunConfig, Runner, function_tool, handoff, input_guardrail
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.tracing import get_trace_provider, set_trace_processors
from click.testing import CliRunner
from fakes.langchain_model import ScriptedChatModel, final_text, tool_calls
from fakes.secret_names import RECOGNISED, WITH_SPACES
from langchain.agents import create_agent
from langchain_core.tools import tool as lc_tool
from langgraph.graph import END, START, StateGraph
from opentelemetry import trace
from otlp_receiver import OTLPReceiver

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli
from otel_agentdiag.instrumentation.langchain import LangChainInstrumentor
from otel_agentdiag.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from otel_agentdiag.storage import SpanStore

TAG = uuid.uuid4().hex[:8]
SAFE_AGENT, SAFE_TOOL, SAFE_LC_AGENT, SAFE_SDK_AGENT = (
    f"hostile_safe_agent_{TAG}",
    f"hostile_safe_tool_{TAG}",
    f"hostile_lc_agent_{TAG}",
    f"hostile_sdk_agent_{TAG}",
)
HARMLESS_RUN_NAME = f"nightly_batch_{TAG}"
WAIT_S = 10.0


@dataclass
class Secrets:
    """A fresh credential per entry point, cycling through every recognised format."""

    made: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._formats = list(RECOGNISED.values())

    def new(self, where: str, spaced: bool = False) -> str:
        make = WITH_SPACES["bearer_header"] if spaced else self._formats[len(self.made) % len(self._formats)]
        value = self.made[where] = make()
        return value

    def needles(self) -> list[bytes]:
        """What must appear nowhere: each secret, lower-cased too, and its last 16 characters (a name a framework
        rewrote, "transfer_to_bearer_...", still carries those); plus the harmless per-call run name (data)."""
        out = {HARMLESS_RUN_NAME.encode()}
        for value in self.made.values():
            out |= {value.encode(), value.lower().encode(), value[-16:].lower().encode()}
        return sorted(out)


def leaks(blob: bytes, needles: list[bytes]) -> list[bytes]:
    lowered = blob.lower()
    return [n for n in needles if n in blob or n.lower() in lowered]


class _Count(TypedDict):
    steps: Annotated[list[str], operator.add]


def _graph(name: str, node: str) -> Any:
    graph = StateGraph(_Count)
    graph.add_node(node, lambda state: {"steps": ["done"]})
    graph.add_edge(START, node)
    graph.add_edge(node, END)
    return graph.compile(name=name)


def run_manual(s: Secrets) -> None:
    registered_tool, registered_agent = s.new("register_names tool"), s.new("register_names agent")
    registered_model, registered_guardrail = s.new("register_names model"), s.new("register_names guardrail")
    agentdiag.register_names(
        tools=[SAFE_TOOL, registered_tool],
        agents=[SAFE_AGENT, registered_agent],
        models=[registered_model],
        guardrails=[registered_guardrail],
    )

    @agentdiag.tool(s.new("@tool"))
    def fetch(x: int) -> int:
        return x + 1

    @agentdiag.agent(s.new("@agent"))
    def helper(x: int) -> int:
        return x * 2

    run_name, runtime_tool = s.new("agent_run"), s.new("tool_call")
    with agentdiag.agent_run(SAFE_AGENT, conversation_id=f"conv-manual-{TAG}", user_id="user-1"):
        with agentdiag.iteration(0):
            trace.get_current_span().set_attribute(sc.AGENTDIAG_GUARDRAIL_NAME, registered_guardrail)
            with agentdiag.llm_call(provider="openai", model=registered_model) as call:
                call.record_response(response_model=registered_model, input_tokens=3, output_tokens=2)
            with agentdiag.tool_call(SAFE_TOOL, call_id="c0"):
                pass
            with agentdiag.tool_call(registered_tool, call_id="c1"):
                pass
            with agentdiag.tool_call(runtime_tool, call_id="c2"):
                pass
            assert fetch(1) == 2
            assert helper(2) == 4
        with agentdiag.agent_run(registered_agent):
            pass
    with agentdiag.agent_run(run_name, conversation_id=f"conv-manual-2-{TAG}"):
        pass


def run_langchain(s: Secrets) -> None:
    tool_name = s.new("LangChain tool definition")

    @lc_tool(tool_name)
    def lookup(city: str) -> str:
        """Looks a city up."""
        return "found"

    def model() -> ScriptedChatModel:
        return ScriptedChatModel.from_steps(tool_calls((tool_name, {"city": "Oslo"})), final_text("Found."))

    inputs = {"messages": [("user", "Where is Oslo?")]}
    safe = create_agent(model(), tools=[lookup], name=SAFE_LC_AGENT)
    assert safe.invoke(inputs, {"configurable": {"thread_id": f"lc-{TAG}"}})["messages"][-1].content == "Found."
    for run_name in (HARMLESS_RUN_NAME, s.new("LangChain per-call run_name")):
        agent = create_agent(model(), tools=[lookup], name=SAFE_LC_AGENT)
        assert agent.invoke(inputs, {"run_name": run_name})["messages"][-1].content == "Found."
    named = create_agent(model(), tools=[lookup], name=s.new("create_agent(name=...)"))
    assert named.invoke(inputs)["messages"][-1].content == "Found."
    graph = _graph(s.new("LangGraph compile(name=...)"), s.new("LangGraph node name"))
    assert graph.invoke({"steps": []}) == {"steps": ["done"]}


def run_agents_sdk(s: Secrets) -> None:
    tool_name = s.new("Agents SDK function tool")

    @function_tool(name_override=tool_name)
    def lookup(city: str) -> str:
        """Looks a city up."""
        return "found"

    @input_guardrail(name=s.new("Agents SDK guardrail"))
    async def allow(ctx: Any, agent: Any, text: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)

    target = Agent(
        name=s.new("Agents SDK handoff target", spaced=True),
        instructions="Answer.",
        model=ScriptedModel([ModelStep(output=[assistant_message("Done.")])], emit_traces=True),
    )
    transfer = handoff(target)
    triage = Agent(
        name=SAFE_SDK_AGENT,
        instructions="Route.",
        tools=[lookup],
        handoffs=[transfer],
        input_guardrails=[allow],
        model=ScriptedModel(
            [
                ModelStep(output=[function_call(tool_name, {"city": "Oslo"}, call_id="c1")]),
                ModelStep(output=[function_call(transfer.tool_name, {}, call_id="h1")]),
            ],
            emit_traces=True,
        ),
    )
    lone = Agent(
        name=s.new("Agents SDK agent"),
        instructions="Answer.",
        model=ScriptedModel([ModelStep(output=[assistant_message("Hi.")])], emit_traces=True),
    )

    async def main() -> None:
        config = RunConfig(group_id=f"sdk-{TAG}")
        assert (await Runner.run(triage, "Hello", run_config=config)).final_output == "Done."
        assert (await Runner.run(lone, "Hello", run_config=config)).final_output == "Hi."

    asyncio.run(main())


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Outcome:
    secrets: Secrets
    store: Path
    files_open: dict[str, bytes]
    files_closed: dict[str, bytes]
    receiver: OTLPReceiver
    stored: int
    stored_names: list[str]
    outputs: dict[str, str]
    records: list[logging.LogRecord]


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


def _cli(*args: str | Path) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    folder = tmp_path_factory.mktemp("hostile-names")
    store = folder / "store" / "traces.db"
    made = Secrets()
    records = _Records()
    logger = logging.getLogger("otel_agentdiag")
    logger.addHandler(records)
    before = list(get_trace_provider()._multi_processor._processors)  # type: ignore[attr-defined]
    set_trace_processors([])  # never the Agents SDK's default processor (it sends traces to OpenAI)
    with pytest.MonkeyPatch.context() as env, OTLPReceiver() as receiver:
        for name in list(os.environ):
            if name.startswith(("OTEL_", "AGENTDIAG_")):
                env.delenv(name)
        handle = agentdiag.configure(
            service_name="hostile-names",
            store=store,
            otlp_endpoint=receiver.endpoint,
            hash_key=secrets.token_bytes(32),
            set_global=False,
        )
        instrumentors = [LangChainInstrumentor(), OpenAIAgentsInstrumentor()]
        try:
            for instrumentor in instrumentors:
                instrumentor.instrument()
            run_manual(made)
            run_langchain(made)
            run_agents_sdk(made)
            assert handle.force_flush()
            files_open = _files(store.parent)  # the writer still has the database (and its -wal) open
        finally:
            for instrumentor in instrumentors:
                instrumentor.uninstrument()
            gc.collect()
            handle.shutdown()
            logger.removeHandler(records)
            set_trace_processors(before)
        files_closed = _files(store.parent)
        with SpanStore(store, create=False) as reader:
            traces = reader.list_traces()
            spans = [span for t in traces for span in reader.get_trace(t.trace_id)]
        assert receiver.wait_for_spans(len(spans), timeout=WAIT_S), f"{receiver.span_count} of {len(spans)}"
        outputs: dict[str, str] = {"traces": _cli("traces", "--store", store, "--format", "json")}
        outputs["traces text"] = _cli("traces", "--store", store)
        for t in traces:
            outputs[f"show {t.trace_id}"] = _cli("show", t.trace_id, "--store", store)
            outputs[f"show {t.trace_id} json"] = _cli("show", t.trace_id, "--store", store, "--format", "json")
        for kind in ("bundle", "otlp-json", "jaeger-json"):
            out = folder / f"export.{kind}"
            _cli("export", "--out", out, "--format", kind, "--store", store)
            outputs[f"export {kind}"] = out.read_text()
        yield Outcome(
            made,
            store,
            files_open,
            files_closed,
            receiver,
            len(spans),
            [span.name for span in spans],
            outputs,
            records.records,
        )
        assert receiver.errors == []


# -- the entry points declared what they were meant to ---------------------------------------------------------
def test_every_entry_point_was_attacked(outcome: Outcome) -> None:
    assert len(outcome.secrets.made) == 17
    assert len(set(outcome.secrets.made.values())) == 17


def test_the_names_places_hold_the_placeholder_and_safe_names_are_kept(outcome: Outcome) -> None:
    names = sorted(outcome.stored_names)
    assert f"invoke_agent {SAFE_AGENT}" in names
    assert f"execute_tool {SAFE_TOOL}" in names
    assert f"invoke_agent {SAFE_LC_AGENT}" in names  # the graph's own name, without a per-call run_name
    assert f"invoke_agent {SAFE_SDK_AGENT}" in names
    agents = [n for n in names if n.startswith("invoke_agent ")]
    tools = [n for n in names if n.startswith("execute_tool ")]
    # Manual: the registered agent, @agent, agent_run. LangChain: two per-call run names, create_agent(name=),
    # the graph. Agents SDK: the handoff target and the lone agent.
    assert agents.count("invoke_agent _OTHER") == 9
    assert set(agents) == {
        "invoke_agent _OTHER",
        f"invoke_agent {SAFE_AGENT}",
        f"invoke_agent {SAFE_LC_AGENT}",
        f"invoke_agent {SAFE_SDK_AGENT}",
    }
    assert set(tools) == {"execute_tool _OTHER", f"execute_tool {SAFE_TOOL}"}
    # Manual: registered, run-time, @tool. LangChain: the tool, four runs. Agents SDK: the tool and the handoff.
    assert tools.count("execute_tool _OTHER") == 9
    assert "chat" in names  # the model whose name is a credential: no model in the span name


def test_no_secret_reaches_the_store_files(outcome: Outcome) -> None:
    needles = outcome.secrets.needles()
    assert "traces.db-wal" in outcome.files_open  # the WAL was read while the writer had it
    for when, files in (("open", outcome.files_open), ("closed", outcome.files_closed)):
        for name, blob in files.items():
            assert leaks(blob, needles) == [], f"{name} ({when})"
    assert f"invoke_agent {SAFE_AGENT}".encode() in outcome.files_open["traces.db-wal"] + outcome.files_closed.get(
        "traces.db", b""
    )  # the search finds what is allowed


def test_no_secret_crosses_the_wire(outcome: Outcome) -> None:
    receiver, needles = outcome.receiver, outcome.secrets.needles()
    assert receiver.span_count == outcome.stored
    for index, (raw, decoded) in enumerate(zip(receiver.raw_bodies, receiver.decoded_bodies, strict=True)):
        assert leaks(raw, needles) == [], f"request {index} as sent"
        assert leaks(decoded, needles) == [], f"request {index} decoded"
    received = [s.name for s in receiver.spans()]
    assert sorted(received) == sorted(outcome.stored_names)  # the strict policy names them as the store does
    for span in receiver.spans():
        for key in (sc.GEN_AI_AGENT_NAME, sc.GEN_AI_TOOL_NAME, sc.AGENTDIAG_GUARDRAIL_NAME):
            value = span.attributes.get(key)
            assert value is None or value == sc.OTHER_VALUE or TAG in value, (key, value)


def test_no_secret_in_any_cli_output(outcome: Outcome) -> None:
    needles = outcome.secrets.needles()
    for what, text in outcome.outputs.items():
        assert leaks(text.encode(), needles) == [], what
    requests = [json.loads(line) for line in outcome.outputs["export otlp-json"].splitlines()]  # JSON lines
    scopes = [scope for request in requests for r in request["resourceSpans"] for scope in r["scopeSpans"]]
    exported = [span["name"] for scope in scopes for span in scope["spans"]]
    assert sorted(exported) == sorted(outcome.stored_names)
    assert "invoke_agent _OTHER" in outcome.outputs["export jaeger-json"]
    assert any("_OTHER" in text for what, text in outcome.outputs.items() if what.startswith("show"))


def test_each_refusal_is_a_warning_that_names_the_kind_never_the_name(outcome: Outcome) -> None:
    ours = [r for r in outcome.records if r.name.startswith("otel_agentdiag")]
    needles = outcome.secrets.needles()
    for record in ours:
        assert leaks((record.getMessage() + repr(record.args)).encode(), needles) == [], record.getMessage()
    kinds = sorted(r.getMessage().split()[2] for r in ours if r.name == "otel_agentdiag._internal.names")
    # Declared names only, once each: register_names (4), @tool, @agent, agent_run; the LangChain tool, create_agent
    # and the graph; the SDK's tool, guardrail, handoff target and agent. A per-call run_name, tool_call()'s name
    # and the LangGraph node's name are not declarations (they are never registered, so never refused).
    manual = ["tool", "agent", "model", "guardrail", "tool", "agent", "agent"]
    langchain = ["tool", "agent", "agent"]
    agents_sdk = ["tool", "guardrail", "agent", "agent"]
    assert kinds == sorted([*manual, *langchain, *agents_sdk])
