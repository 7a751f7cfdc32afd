"""CrewAI, traced by our ``CrewAIInstrumentor`` (CrewAI's event bus, parents from its event ids): a real ``Crew`` with
CrewAI's native OpenAI provider (the real ``openai`` client) against a scripted fake model server on 127.0.0.1 in
this process, through the pipeline ``configure()`` builds, to a real SQLite store and a real OTLP/HTTP receiver
(strict policy), with our OpenAIInstrumentor on too.

CrewAI's pins cannot share the dev venv: the crew runs in its own environment (``tests/envs/contract-crewai.txt``,
built by ``tests/isolated_envs.py``), in ``crewai_app.py`` with this checkout on ``PYTHONPATH``.

Zero-code: ``opentelemetry-instrument`` finds otel-agentdiag's entry points (distro, configurator, instrumentors)
in a ``.dist-info`` written from ``pyproject.toml`` beside the checkout (the checkout is on ``PYTHONPATH``, not
installed, in that environment). OpenInference's CrewAI instrumentor, installed in that environment for the
contract suite, is switched off there (``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=crewai``), as a user would.

The model first asks for ``get_weather`` and ``lookup_city`` at once (CrewAI runs the two on a thread pool;
``lookup_city`` raises and CrewAI tells the model), then answers: two turns. The tree must be ours: run → two
iterations → one LLM span each, the two tool spans in the first, usage on the LLM leaves only, the failing tool
marked with its exception's class, a valid receipt, no sentinel in the store or on the wire; and two crews under
``asyncio.gather`` (``kickoff_async`` and ``akickoff``) in two separate, correct trees.
"""

from __future__ import annotations

import json
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

APP = Path(__file__).with_name("crewai_app.py")
ENV = "contract-crewai"
HASH_KEY = b"5b2e0c6f1d8a4b7e9c3f2a1d0e6b8c4f7a9d2e1c3b5f8a0d6e4c2b9f1a7d3e5c"
AGENT = "weather_agent"
TOOLS = ("get_weather", "lookup_city")
"""The tools the model's first answer calls, at once; ``lookup_city`` raises."""
TURNS = 2
SENTINELS = (*fake.SENTINELS, "/home/alice")
CREWAI_QUIET = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
}
"""No traffic to CrewAI's services (the apps set them too; zero-code imports CrewAI before the app runs)."""


class ScriptedServer(FakeModelServer):
    """The fake server answering CrewAI's loop from the request alone (so concurrent crews can share it): before any
    tool result, one answer calling both tools; after, the text answer (CrewAI adds a user message after the tool
    results, so "the last message is a tool result" is not the test)."""

    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        if any(isinstance(m, dict) and m.get("role") == "tool" for m in messages):
            return super().chat_completion({**body, "tools": None})  # the text answer
        out = super().chat_completion({**body, "messages": [{"role": "user", "content": "?"}]})
        (call,) = out["choices"][0]["message"]["tool_calls"]  # its id carries the call-id sentinel
        out["choices"][0]["message"]["tool_calls"] = [
            {**call, "id": f"{call['id']}-{i}", "function": {"name": name, "arguments": fake.TOOL_ARGUMENTS}}
            for i, name in enumerate(TOOLS)
        ]
        return out


@dataclass
class Run:
    store: Path
    spans: list[StoredSpan]
    received: list[ReceivedSpan]
    raw_bodies: list[bytes]
    receipts: dict[str, str]
    answers: list[str]
    requests: int
    still_wrapped: list[str]


def _run(mode: str, folder: Path) -> Run:
    store = folder / "store" / "traces.db"  # its own folder: the leak search reads every file there
    with OTLPReceiver() as receiver, ScriptedServer() as server:
        args = [str(APP), mode, str(store), receiver.endpoint, server.base_url]
        env = dict(CREWAI_QUIET)
        if mode == "zero-code":
            env |= {
                "PYTHONPATH": str(entry_points_folder(folder / "entry-points")),
                "AGENTDIAG_STORE": str(store),
                "AGENTDIAG_HASH_KEY": HASH_KEY.decode(),
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.endpoint}/v1/traces",
                "OTEL_SERVICE_NAME": "crewai-zero-code",
                "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "crewai",  # OpenInference's, installed beside ours
            }
            args = instrument_args(ENV, args)  # `opentelemetry-instrument python crewai_app.py ...`
        done = run_in(ENV, args, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        assert receiver.errors == []
        requests = len(server.requests_to("/v1/chat/completions"))
        received = receiver.spans()
        raw_bodies = list(receiver.raw_bodies)
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
        receipts = {}
        for session in {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in spans if s.kind == "run"}:
            receipt = session_receipt(reader, session)
            receipts[str(session)] = (
                "valid" if receipt.status == "valid" else f"{receipt.status} {receipt.reasons} {receipt.counts}"
            )
    return Run(
        store, spans, received, raw_bodies, receipts, printed["answers"], requests, printed.get("still_wrapped", [])
    )


@pytest.fixture(scope="module")
def one(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run("one", tmp_path_factory.mktemp("crewai-one"))


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run("gather", tmp_path_factory.mktemp("crewai-gather"))


@pytest.fixture(scope="module")
def zero_code(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run("zero-code", tmp_path_factory.mktemp("crewai-zero-code"))


def _kinds(spans: list[StoredSpan], kind: str) -> list[StoredSpan]:
    return sorted((s for s in spans if s.kind == kind), key=lambda s: s.start_ns)


def _assert_one_tree(spans: list[StoredSpan], agent: str) -> None:
    assert len({s.trace_id for s in spans}) == 1
    (run,) = _kinds(spans, "run")
    assert run.name == f"invoke_agent {agent}"
    assert run.parent_span_id is None  # the crew's kickoff is not a second run
    assert run.attributes[sc.GEN_AI_AGENT_NAME] == agent
    assert run.attributes.get(sc.AGENTDIAG_STOP_REASON) == sc.STOP_COMPLETED
    iterations = _kinds(spans, "iteration")
    assert [s.name for s in iterations] == [sc.ITERATION_SPAN_NAME] * TURNS
    assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == list(range(TURNS))
    assert {s.parent_span_id for s in iterations} == {run.span_id}
    llm = _kinds(spans, "llm")
    assert [s.name for s in llm] == ["chat gpt-4o-mini"] * TURNS
    for turn, call in enumerate(llm):  # one model call per turn
        assert call.parent_span_id == iterations[turn].span_id, turn
        assert call.attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
        assert call.attributes[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert [s.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] for s in llm] == [["tool_calls"], ["stop"]]
    tools = {s.name: s for s in _kinds(spans, "tool")}
    assert sorted(tools) == [f"execute_tool {name}" for name in TOOLS]  # declared names, never _OTHER
    assert {s.parent_span_id for s in tools.values()} == {iterations[0].span_id}  # the tools the first call asked for
    failed = tools["execute_tool lookup_city"]
    assert failed.status == "error"
    assert failed.attributes[sc.ERROR_TYPE] == "LookupError"  # the exception's class: never its message
    assert tools["execute_tool get_weather"].status != "error"
    assert not [s for s in spans if s.status == "error" and s.kind != "tool"]  # CrewAI told the model; it recovered
    assert {s.kind for s in spans} == {"run", "iteration", "llm", "tool"}
    assert len(spans) == 1 + TURNS + TURNS + len(TOOLS)


def test_the_crew_answers_as_without_tracing(one: Run) -> None:
    assert [a.strip() for a in one.answers] == [fake.ANSWER_TEXT]
    assert one.requests == TURNS


def test_run_iterations_llm_and_tool_spans(one: Run) -> None:
    _assert_one_tree(one.spans, AGENT)


def test_one_span_per_model_call_enriched_by_the_openai_instrumentor(one: Run) -> None:
    """Our OpenAIInstrumentor is on: it enriches CrewAI's model-call span (the response model, the HTTP attempt)
    instead of starting a second LLM span."""
    for call in _kinds(one.spans, "llm"):
        assert call.attributes[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini" + fake.MODEL_SNAPSHOT_SUFFIX
        assert [e["name"] for e in call.events] == [sc.AGENTDIAG_HTTP_ATTEMPT_EVENT]


def test_tokens_on_the_llm_leaves_only(one: Run) -> None:
    llm = _kinds(one.spans, "llm")
    used = [fake.TOOL_CALL_USAGE, fake.ANSWER_USAGE]
    assert [s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm] == [u.prompt_tokens for u in used]
    assert [s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in llm] == [u.completion_tokens for u in used]
    for span in one.spans:
        if span.kind != "llm":
            assert not [k for k in span.attributes if k.startswith(sc.GEN_AI_USAGE_PREFIX)], span.name
    (run,) = _kinds(one.spans, "run")
    tokens_in = sum(u.prompt_tokens for u in used)
    tokens_out = sum(u.completion_tokens for u in used)
    assert run.attributes[sc.AGENTDIAG_USAGE_PREFIX + "input_tokens"] == tokens_in  # the roll-up, marked as one
    assert trace_summaries(one.store) == [("run", TURNS, len(TOOLS), tokens_in, tokens_out)]


def test_the_receipt_is_valid(one: Run) -> None:
    assert one.receipts == {"None": "valid"}  # CrewAI has no conversation id: the run is filed in no session


def test_the_strict_export_carries_the_same_tree(one: Run) -> None:
    assert_same_tree(one.received, one.spans)


def test_no_sentinel_in_the_store_or_on_the_wire(one: Run) -> None:
    seen = Surfaces.of(one.store, one.raw_bodies, one.received)
    assert AGENT in seen.dump and "lookup_city" in seen.dump  # the search finds what is allowed
    assert AGENT.encode() in seen.wire
    assert seen.leaks(SENTINELS) == []


def test_uninstrument_takes_the_wrapper_off(one: Run, two: Run) -> None:
    assert one.still_wrapped == [] and two.still_wrapped == []


def test_two_crews_under_gather_keep_their_trees_apart(two: Run) -> None:
    assert [a.strip() for a in two.answers] == [fake.ANSWER_TEXT] * 2
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
    assert list(two.receipts.values()) == ["valid"]
    assert Surfaces.of(two.store, two.raw_bodies, two.received).leaks(SENTINELS) == []


def test_zero_code_finds_the_entry_point_and_traces_the_same_tree(zero_code: Run) -> None:
    """Under ``opentelemetry-instrument`` the configurator builds the pipeline from the environment and the entry
    points load our CrewAI and OpenAI instrumentors: the same tree, one LLM span per model call."""
    assert [a.strip() for a in zero_code.answers] == [fake.ANSWER_TEXT]
    _assert_one_tree(zero_code.spans, AGENT)
    assert list(zero_code.receipts.values()) == ["valid"]
    assert len(zero_code.received) == len(zero_code.spans)  # the OTLP branch from the environment, too
    seen = Surfaces.of(zero_code.store, zero_code.raw_bodies, zero_code.received)
    assert seen.leaks(SENTINELS) == []
