"""Google ADK, through its own OpenTelemetry output and our ``GoogleADKInstrumentor`` (iterations, declared
names), mapped by the GenAI adapter: a real ``LlmAgent`` and ``Runner`` with ADK's ``LiteLlm`` model against a
scripted fake model server on 127.0.0.1, through the pipeline ``configure()`` builds, to a real SQLite store and a
real OTLP/HTTP receiver (strict policy).

google-adk 2.x caps ``opentelemetry-api`` below the dev venv's, so the agent runs in the isolated environment
``tests/envs/google_adk.txt`` (``tests/isolated_envs.py``; ``google_adk_app.py`` is its script, with this checkout
on ``PYTHONPATH``); the fake server, the receiver and every assertion live here.

Each agent: the model asks for ``get_weather`` twice, then for ``lookup_city``, which raises; ADK fails the run
with that exception. Sentinels sit in the prompt, the instruction, a tool's description, the tool arguments and
results, the tool call ids, the session and user ids and the failing tool's message. The store must hold
``invoke_workflow`` → ``invoke_agent`` → three iterations → one ``generate_content`` and one ``execute_tool``
each, tokens on the LLM leaves only, a valid receipt, and no sentinel in the store or on the wire; under
``asyncio.gather`` (two agents at once) each run keeps its own trace.

Zero-code (mode ``zero-code``): the same agent with no tracing code, run under ``opentelemetry-instrument`` in that
environment, the pipeline built from the environment (``AGENTDIAG_STORE``, ``AGENTDIAG_HASH_KEY``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) and ``GoogleADKInstrumentor`` loaded by its entry point
``agentdiag_google_adk`` (from a ``.dist-info`` written beside the checkout, :func:`isolated_envs.entry_points_folder`):
the same tree, iterations included (only our instrumentor makes them). Our ``agentdiag_openai`` instrumentor runs too
and adds nothing: ADK's ``LiteLlm`` posts through the ``openai`` client's low-level ``post()``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agent_runs import assert_same_tree, trace_summaries
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from isolated_envs import ROOT, entry_points_folder, instrument_args, run_in
from leak_search import Surfaces
from otlp_receiver import OTLPReceiver, ReceivedSpan

from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.storage import SpanStore, StoredSpan

HASH_KEY = "9d3b7e1f5a2c8d4e6b0f3a7c1e5d9b2f4a8c6e0d2b7f1a5c9e3d7b1f5a2c8e4d"
AGENTS = ("weather_agent", "travel_agent")
SCRIPT = ("get_weather", "get_weather", "lookup_city")  # the model's tool call at each step; the last one raises
STEPS = len(SCRIPT)
SENTINELS = (*fake.SENTINELS, "/home/alice")
APP = ROOT / "tests" / "e2e" / "google_adk_app.py"


class ScriptedServer(FakeModelServer):
    """The fake server, answering ADK's loop: the n-th step's request carries n tool results, so the request
    alone tells the step (two agents may ask at once)."""

    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        step = sum(1 for m in body.get("messages", ()) if m.get("role") == "tool")
        first = [m for m in body.get("messages", ()) if m.get("role") != "tool"][:2]
        out = super().chat_completion({**body, "messages": first})  # a tool call of the fake's tool, with usage
        (call,) = out["choices"][0]["message"]["tool_calls"]
        call["function"]["name"] = SCRIPT[min(step, STEPS - 1)]
        return out


@dataclass
class Run:
    mode: str
    store: Path
    spans: list[StoredSpan]
    received: list[ReceivedSpan]
    raw_bodies: list[bytes]
    receipts: list[str]
    outcomes: list[str]
    stderr: str


@pytest.fixture(scope="module", params=["single", "gather", "zero-code"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    mode = request.param
    store = tmp_path_factory.mktemp(f"adk_{mode}") / "traces.db"
    with OTLPReceiver() as receiver, ScriptedServer() as server:
        args = [str(APP), mode, str(store), receiver.endpoint, server.base_url, HASH_KEY]
        env = None
        if mode == "zero-code":  # `opentelemetry-instrument python google_adk_app.py zero-code ...`
            args = instrument_args("google_adk", args)
            env = {
                "PYTHONPATH": str(entry_points_folder(tmp_path_factory.mktemp("adk_entry_points") / "site")),
                "AGENTDIAG_STORE": str(store),
                "AGENTDIAG_HASH_KEY": HASH_KEY,
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.endpoint}/v1/traces",
                "OTEL_SERVICE_NAME": "google-adk-zero-code",
            }
        done = run_in("google_adk", args, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        assert receiver.errors == []
        agents = len(AGENTS) if mode == "gather" else 1
        assert len(server.requests_to("/v1/chat/completions")) == STEPS * agents
        received = receiver.spans()
        raw_bodies = list(receiver.raw_bodies)
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])["outcomes"]
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
        receipts = []
        for session in sorted({str(s.attributes.get(sc.GEN_AI_CONVERSATION_ID)) for s in spans if s.kind == "run"}):
            receipt = session_receipt(reader, session)
            receipts.append(f"{receipt.status} {receipt.reasons}" if receipt.status != "valid" else "valid")
    yield Run(mode, store, spans, received, raw_bodies, receipts, outcomes, done.stderr)


def _kinds(spans: list[StoredSpan], kind: str) -> list[StoredSpan]:
    return sorted((s for s in spans if s.kind == kind), key=lambda s: s.start_ns)


def _traces(run: Run) -> dict[str, list[StoredSpan]]:
    by_trace: dict[str, list[StoredSpan]] = {}
    for span in run.spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    return by_trace


def test_each_run_fails_with_its_tools_exception(run: Run) -> None:
    assert run.outcomes == ["LookupError"] * (len(AGENTS) if run.mode == "gather" else 1)


def test_workflow_run_iterations_llm_and_tool_spans(run: Run) -> None:
    traces = _traces(run)
    assert len(traces) == len(run.outcomes)  # under asyncio.gather too: one trace per run, nothing crossed
    names = set()
    for spans in traces.values():
        # One run per agent run: the workflow of one agent, with no calls of its own, wraps that run (a step).
        (agent,) = _kinds(spans, "run")
        (workflow,) = _kinds(spans, "other")
        assert workflow.attributes[sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE] == "agent_wrapper"
        assert workflow.parent_span_id is None
        assert agent.name.startswith("invoke_agent ") and agent.parent_span_id == workflow.span_id
        names.add(agent.name.removeprefix("invoke_agent "))
        iterations = _kinds(spans, "iteration")
        assert [s.name for s in iterations] == [sc.ITERATION_SPAN_NAME] * STEPS
        assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == list(range(STEPS))
        assert {s.parent_span_id for s in iterations} == {agent.span_id}
        llm, tools = _kinds(spans, "llm"), _kinds(spans, "tool")
        assert [s.name for s in llm] == ["generate_content openai/gpt-4o-mini"] * STEPS
        assert [s.name for s in tools] == [f"execute_tool {name}" for name in SCRIPT]  # declared: registered
        for step, (call, used) in enumerate(zip(llm, tools, strict=True)):  # one model call and its tool per step
            assert call.parent_span_id == used.parent_span_id == iterations[step].span_id, step
        assert [s.status for s in tools] == ["unset", "unset", "error"]
        assert tools[-1].attributes[sc.ERROR_TYPE] == "LookupError"  # the type only, never the message
        assert [s.status for s in iterations] == ["unset", "unset", "error"]
        assert iterations[-1].attributes[sc.ERROR_TYPE] == "LookupError"
        assert workflow.status == agent.status == "error"
        assert {s.kind for s in spans} == {"other", "run", "iteration", "llm", "tool"}
    assert names == set(AGENTS[: len(traces)])


def test_tokens_on_the_llm_leaves_only(run: Run) -> None:
    llm = _kinds(run.spans, "llm")
    assert [s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm] == [fake.TOOL_CALL_USAGE.prompt_tokens] * len(llm)
    assert [s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in llm] == [fake.TOOL_CALL_USAGE.completion_tokens] * len(
        llm
    )
    for span in run.spans:
        if span.kind != "llm":
            assert not [k for k in span.attributes if k.startswith("gen_ai.usage.")], span.name
    summary = trace_summaries(run.store)  # the roll-ups `traces` and `sessions` read
    tokens_in = STEPS * fake.TOOL_CALL_USAGE.prompt_tokens
    tokens_out = STEPS * fake.TOOL_CALL_USAGE.completion_tokens
    # The trace's root is the workflow that wraps the agent's run: a step.
    assert summary == [("other", STEPS, STEPS, tokens_in, tokens_out)] * len(run.outcomes)


def test_the_receipts_are_valid(run: Run) -> None:
    assert run.receipts == ["valid"] * len(run.outcomes)  # one session per run, every span numbered in it


def test_the_strict_export_carries_the_same_tree(run: Run) -> None:
    assert_same_tree(run.received, run.spans)


def test_no_sentinel_nor_adk_key_in_the_store_or_on_the_wire(run: Run) -> None:
    seen = Surfaces.of(run.store, run.raw_bodies, run.received)
    assert AGENTS[0] in seen.dump and "lookup_city" in seen.dump  # the search finds what is allowed
    assert AGENTS[0].encode() in seen.wire
    assert seen.leaks(SENTINELS) == []
    for key in ("gcp.vertex.agent.", "gen_ai.tool.definitions", "gen_ai.tool.description", "gen_ai.agent.description"):
        assert key not in seen.dump and key.encode() not in seen.wire, key  # ADK-only keys (its scope is named so)
