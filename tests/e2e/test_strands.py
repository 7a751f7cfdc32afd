"""Strands Agents, traced through its own OpenTelemetry output on our provider (``StrandsInstrumentor``) and mapped
by the GenAI adapter: a real ``Agent`` with Strands' real ``OpenAIModel`` (the real ``openai`` client, streaming)
against a scripted fake model server on 127.0.0.1 in this process, through the pipeline ``configure()`` builds, to
a real SQLite store and a real OTLP/HTTP receiver (strict policy).

Strands' pins cannot share the dev venv: the agent runs in its own environment (``tests/envs/strands.txt``,
built by ``tests/isolated_envs.py``), in ``strands_app.py`` with this checkout on ``PYTHONPATH``.

Zero-code: ``opentelemetry-instrument`` finds otel-agentdiag's entry points (distro, configurator, instrumentors)
in a ``.dist-info`` written from ``pyproject.toml`` beside the checkout (the checkout is on ``PYTHONPATH``, not
installed, in that environment).

The model asks for ``get_weather`` twice, then for ``lookup_city`` (which raises), then answers: four event-loop
cycles. The tree must be ours: run → four iterations (Strands' cycles) → one LLM span each and one tool span in the
first three, usage on the LLM leaves only, a valid receipt, no sentinel in the store or on the wire; and two
agents under ``asyncio.gather`` (Strands' latest conventions, content as span attributes) in two trees.
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
from isolated_envs import entry_points_folder, instrument_args, run_in
from leak_search import Surfaces
from otlp_receiver import OTLPReceiver, ReceivedSpan

from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.storage import SpanStore, StoredSpan

APP = Path(__file__).with_name("strands_app.py")
HASH_KEY = b"5b2e0c6f1d8a4b7e9c3f2a1d0e6b8c4f7a9d2e1c3b5f8a0d6e4c2b9f1a7d3e5c"
AGENT = "weather_agent"
SCRIPT = ("get_weather", "get_weather", "lookup_city")
"""The tool the model asks for at each cycle; after them, it answers."""
CYCLES = len(SCRIPT) + 1
SENTINELS = (*fake.SENTINELS, "/home/alice")


class ScriptedServer(FakeModelServer):
    """The fake server, answering Strands' loop: the step is the number of tool results the request carries, so
    concurrent agents each get the whole script."""

    def chat_chunks(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        messages = body.get("messages") or []
        step = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
        if step >= len(SCRIPT):
            yield from super().chat_chunks(body)  # the text answer
            return
        asking = {**body, "messages": [*messages, {"role": "user", "content": "go on"}]}  # a tool call, again
        for chunk in super().chat_chunks(asking):
            for choice in chunk["choices"]:
                for call in choice["delta"].get("tool_calls") or []:
                    if "name" in call.get("function", {}):
                        call["function"]["name"] = SCRIPT[step]
            yield chunk


@dataclass
class Run:
    store: Path
    spans: list[StoredSpan]
    received: list[ReceivedSpan]
    raw_bodies: list[bytes]
    receipts: dict[str, str]
    answers: list[str]
    requests: int


def _run(mode: str, folder: Path) -> Run:
    store = folder / "store" / "traces.db"  # its own folder: the leak search reads every file there
    with OTLPReceiver() as receiver, ScriptedServer() as server:
        args = [str(APP), mode, str(store), receiver.endpoint, server.base_url]
        env = None
        if mode == "zero-code":
            env = {
                "PYTHONPATH": str(entry_points_folder(folder / "entry-points")),
                "AGENTDIAG_STORE": str(store),
                "AGENTDIAG_HASH_KEY": HASH_KEY.decode(),
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.endpoint}/v1/traces",
                "OTEL_SERVICE_NAME": "strands-zero-code",
            }
            args = instrument_args("strands", args)  # `opentelemetry-instrument python strands_app.py ...`
        done = run_in("strands", args, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        assert receiver.errors == []
        requests = len(server.requests_to("/v1/chat/completions"))
        received = receiver.spans()
        raw_bodies = list(receiver.raw_bodies)
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    answers = printed["answers"]
    assert printed.get("still_wrapped", []) == []  # uninstrument() took every wrapper of ours off
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
        receipts = {}
        for session in {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in spans if s.kind == "run"}:
            receipt = session_receipt(reader, session)
            receipts[str(session)] = (
                "valid" if receipt.status == "valid" else f"{receipt.status} {receipt.reasons} {receipt.counts}"
            )
    return Run(store, spans, received, raw_bodies, receipts, answers, requests)


@pytest.fixture(scope="module")
def one(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run("one", tmp_path_factory.mktemp("strands-one"))


@pytest.fixture(scope="module")
def zero_code(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run("zero-code", tmp_path_factory.mktemp("strands-zero-code"))


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run("gather", tmp_path_factory.mktemp("strands-gather"))


def _kinds(spans: list[StoredSpan], kind: str) -> list[StoredSpan]:
    return sorted((s for s in spans if s.kind == kind), key=lambda s: s.start_ns)


def _assert_one_tree(spans: list[StoredSpan], agent: str) -> None:
    assert len({s.trace_id for s in spans}) == 1
    (run,) = _kinds(spans, "run")
    assert run.name == f"invoke_agent {agent}"
    assert run.parent_span_id is None
    iterations = _kinds(spans, "iteration")
    assert [s.name for s in iterations] == [sc.ITERATION_SPAN_NAME] * CYCLES
    assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == list(range(CYCLES))
    assert {s.parent_span_id for s in iterations} == {run.span_id}
    llm = _kinds(spans, "llm")
    tools = _kinds(spans, "tool")
    assert [s.name for s in llm] == ["chat gpt-4o-mini"] * CYCLES
    assert [s.name for s in tools] == [f"execute_tool {name}" for name in SCRIPT]
    for step, call in enumerate(llm):  # one model call per cycle, and the tool it asked for
        assert call.parent_span_id == iterations[step].span_id, step
    for step, used in enumerate(tools):
        assert used.parent_span_id == iterations[step].span_id, step
    assert [s.status == "error" for s in tools] == [False, False, True]
    assert tools[2].attributes[sc.ERROR_TYPE] == "LookupError"  # the type only: never the message
    assert not [s for s in spans if s.status == "error" and s.kind != "tool"]  # the agent recovered
    assert {s.kind for s in spans} == {"run", "iteration", "llm", "tool"}
    conversations = {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in spans}
    assert len(conversations) == 1 and None not in conversations  # Strands' session.id, on every span


def test_the_agent_answers_as_without_tracing(one: Run) -> None:
    assert [a.strip() for a in one.answers] == [fake.STREAM_TEXT]  # str(AgentResult) ends with a newline
    assert one.requests == CYCLES


def test_run_iterations_llm_and_tool_spans(one: Run) -> None:
    _assert_one_tree(one.spans, AGENT)


def test_tokens_on_the_llm_leaves_only(one: Run) -> None:
    llm = _kinds(one.spans, "llm")
    used = [fake.TOOL_CALL_USAGE] * len(SCRIPT) + [fake.STREAM_USAGE]
    assert [s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm] == [u.prompt_tokens for u in used]
    assert [s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in llm] == [u.completion_tokens for u in used]
    for span in one.spans:
        if span.kind != "llm":  # Strands' run span carries the agent's accumulated usage: not leaf usage
            assert not [k for k in span.attributes if k.startswith("gen_ai.usage.")], span.name
    summary = trace_summaries(one.store)  # the roll-ups `traces` and `sessions` read
    tokens_in = sum(u.prompt_tokens for u in used)
    tokens_out = sum(u.completion_tokens for u in used)
    assert summary == [("run", CYCLES, len(SCRIPT), tokens_in, tokens_out)]


def test_the_receipt_is_valid(one: Run) -> None:
    assert list(one.receipts.values()) == ["valid"]


def test_the_strict_export_carries_the_same_tree(one: Run) -> None:
    assert_same_tree(one.received, one.spans)


def test_no_sentinel_in_the_store_or_on_the_wire(one: Run) -> None:
    seen = Surfaces.of(one.store, one.raw_bodies, one.received)
    assert AGENT in seen.dump and "lookup_city" in seen.dump  # the search finds what is allowed
    assert AGENT.encode() in seen.wire
    assert seen.leaks(SENTINELS) == []


def test_two_agents_under_gather_keep_their_trees_apart(two: Run) -> None:
    assert [a.strip() for a in two.answers] == [fake.STREAM_TEXT] * 2
    traces: dict[str, list[StoredSpan]] = {}
    for span in two.spans:
        traces.setdefault(span.trace_id, []).append(span)
    assert len(traces) == 2
    agents = set()
    for spans in traces.values():
        (run,) = _kinds(spans, "run")
        agents.add(run.attributes[sc.GEN_AI_AGENT_NAME])
        _assert_one_tree(spans, run.attributes[sc.GEN_AI_AGENT_NAME])
    assert agents == {AGENT, "city_agent"}
    assert sorted(two.receipts.values()) == ["valid", "valid"]  # one conversation each


def test_no_sentinel_under_strands_latest_conventions(two: Run) -> None:
    """With ``gen_ai_latest_experimental`` and ``gen_ai_span_attributes_only`` Strands writes prompts, tool
    arguments and results, system instructions and tool definitions as span attributes: none of it is kept."""
    seen = Surfaces.of(two.store, two.raw_bodies, two.received)
    assert seen.leaks(SENTINELS) == []


def test_zero_code_traces_the_same_loop_with_one_llm_span_per_model_call(zero_code: Run) -> None:
    """Under ``opentelemetry-instrument`` our OpenAI instrumentor runs too: its ``chat`` span owns each model call
    (usage, finish reason), and Strands' own ``chat`` span around it becomes a step without usage."""
    spans = zero_code.spans
    assert [a.strip() for a in zero_code.answers] == [fake.STREAM_TEXT]
    (run,) = _kinds(spans, "run")
    assert run.name == f"invoke_agent {AGENT}"
    iterations = _kinds(spans, "iteration")
    assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == list(range(CYCLES))
    assert {s.parent_span_id for s in iterations} == {run.span_id}
    steps = {s.span_id: s for s in _kinds(spans, "other")}
    assert [s.attributes.get(sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE) for s in steps.values()] == [
        "duplicate_llm_call"
    ] * CYCLES
    llm = _kinds(spans, "llm")
    assert [steps[s.parent_span_id].parent_span_id for s in llm] == [s.span_id for s in iterations]
    assert [s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm] == [31, 31, 31, 44]
    assert [s.name for s in _kinds(spans, "tool")] == [f"execute_tool {name}" for name in SCRIPT]
    assert not [s for s in spans if s.kind != "llm" and any(k.startswith("gen_ai.usage.") for k in s.attributes)]
    assert list(zero_code.receipts.values()) == ["valid"]
    seen = Surfaces.of(zero_code.store, zero_code.raw_bodies, zero_code.received)
    assert len(zero_code.received) == len(spans)  # the OTLP branch from the environment, too
    assert seen.leaks(SENTINELS) == []
