"""AutoGen AgentChat, traced by otel-agentdiag's own ``AutoGenAgentChatInstrumentor``: a real ``AssistantAgent``
with autogen-ext's real ``OpenAIChatCompletionClient`` (the real ``openai`` client) against a scripted fake model
server on 127.0.0.1 in this process, through the pipeline ``configure()`` builds (the global provider, so
autogen-core's own spans would reach it), to a real SQLite store and a real OTLP/HTTP receiver (strict policy).

autogen-core's protobuf pin cannot share the dev venv: the agent runs in its own environment
(``tests/envs/contract-autogen.txt``, built by ``tests/isolated_envs.py``), in ``autogen_agentchat_app.py`` with this
checkout on ``PYTHONPATH``.

Zero-code: ``opentelemetry-instrument`` finds otel-agentdiag's entry points (distro, configurator, instrumentors)
in a ``.dist-info`` written from ``pyproject.toml`` beside the checkout. The environment also holds OpenInference's
AutoGen instrumentor (for the contract suite's other setup): it is switched off there
(``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``), as a user running ours alone would.

The model asks for ``get_weather`` and ``lookup_city`` (which raises: AutoGen hands the error to the model) at once,
then (``reflect_on_tool_use``) answers: two model calls. The tree must be ours: run → two iterations → the first
holding its model call and both tool calls (run in parallel by AgentChat), the second its model call; usage on the
LLM leaves only; the failing tool marked; a valid receipt; no sentinel in the store or on the wire.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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

APP = Path(__file__).with_name("autogen_agentchat_app.py")
ENV = "contract-autogen"
HASH_KEY = b"5b2e0c6f1d8a4b7e9c3f2a1d0e6b8c4f7a9d2e1c3b5f8a0d6e4c2b9f1a7d3e5c"
AGENT = "weather_agent"
TOOLS = ("get_weather", "lookup_city")
SENTINELS = (*fake.SENTINELS, "/home/alice")


class ScriptedServer(FakeModelServer):
    """The first answer of a conversation asks for both tools at once; once a tool result is in it, the text answer
    (the request alone decides: concurrent agents each get the whole script). A streamed first answer asks for
    ``get_weather`` alone."""

    def chat_completion(self, body: dict) -> dict:  # type: ignore[type-arg]
        messages = body.get("messages") or []
        if any(isinstance(m, dict) and m.get("role") == "tool" for m in messages):
            return super().chat_completion({**body, "tools": None})
        out = super().chat_completion(body)
        (call,) = out["choices"][0]["message"]["tool_calls"]
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
    receipt: str
    answers: list[str]
    requests: int

    def traces(self) -> list[list[StoredSpan]]:
        by_trace: dict[str, list[StoredSpan]] = {}
        for span in self.spans:
            by_trace.setdefault(span.trace_id, []).append(span)
        return list(by_trace.values())


def _run(mode: str, folder: Path) -> Run:
    store = folder / "store" / "traces.db"  # its own folder: the leak search reads every file there
    with OTLPReceiver() as receiver, ScriptedServer() as server:
        args = [str(APP), mode, str(store), receiver.endpoint, server.base_url]
        env: dict[str, str] = {}
        if mode == "team":
            env["AUTOGEN_DISABLE_RUNTIME_TRACING"] = "true"  # the team runtime's message spans: not steps
        if mode == "zero-code":
            env = {
                "PYTHONPATH": str(entry_points_folder(folder / "entry-points")),
                "AGENTDIAG_STORE": str(store),
                "AGENTDIAG_HASH_KEY": HASH_KEY.decode(),
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.endpoint}/v1/traces",
                "OTEL_SERVICE_NAME": "autogen-zero-code",
                "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "autogen_agentchat",  # OpenInference's, in this env too
            }
            args = instrument_args(ENV, args)  # `opentelemetry-instrument python autogen_agentchat_app.py ...`
        done = run_in(ENV, args, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        assert receiver.errors == []
        requests = len(server.requests_to("/v1/chat/completions"))
        received = receiver.spans()
        raw_bodies = list(receiver.raw_bodies)
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    assert printed.get("still_wrapped", []) == []  # uninstrument() took every wrapper of ours off
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
        sessions = {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in spans}
        assert sessions == {None}  # AgentChat has no conversation id
        receipt = session_receipt(reader, None)
        verdict = "valid" if receipt.status == "valid" else f"{receipt.status} {receipt.reasons} {receipt.counts}"
    return Run(store, spans, received, raw_bodies, verdict, printed["answers"], requests)


@pytest.fixture(scope="module")
def one(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run("one", tmp_path_factory.mktemp("autogen-one"))


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run("gather", tmp_path_factory.mktemp("autogen-gather"))


def _kinds(spans: list[StoredSpan], kind: str) -> list[StoredSpan]:
    return sorted((s for s in spans if s.kind == kind), key=lambda s: s.start_ns)


def _assert_one_tree(spans: list[StoredSpan], agent: str, tools: tuple[str, ...] = TOOLS) -> StoredSpan:
    """run → iteration 0 (its model call and the tool calls it asked for) → iteration 1 (the answer); returns the
    run."""
    assert len({s.trace_id for s in spans}) == 1
    (run,) = _kinds(spans, "run")
    assert run.name == f"invoke_agent {agent}"
    assert run.attributes[sc.AGENTDIAG_STOP_REASON] == sc.STOP_COMPLETED
    iterations = _kinds(spans, "iteration")
    assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == [0, 1]
    assert {s.parent_span_id for s in iterations} == {run.span_id}
    llm = _kinds(spans, "llm")
    assert [s.name for s in llm] == ["chat gpt-4o-mini"] * 2
    assert [s.parent_span_id for s in llm] == [s.span_id for s in iterations]
    assert {s.attributes[sc.GEN_AI_PROVIDER_NAME] for s in llm} == {"openai"}
    assert [s.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] for s in llm] == [["tool_calls"], ["stop"]]
    called = _kinds(spans, "tool")
    assert sorted(s.name for s in called) == sorted(f"execute_tool {name}" for name in tools)
    assert {s.parent_span_id for s in called} == {iterations[0].span_id}  # parallel calls, one iteration
    failed = {s.name: s.attributes.get(sc.ERROR_TYPE) for s in called if s.status == "error"}
    assert failed == ({"execute_tool lookup_city": "LookupError"} if "lookup_city" in tools else {})
    assert not [s for s in spans if s.status == "error" and s.kind != "tool"]  # the agent recovered
    assert {s.kind for s in spans} == {"run", "iteration", "llm", "tool"}  # no autogen-core span beside ours
    assert len(spans) == 1 + 2 + 2 + len(tools)
    return run


def test_the_agent_answers_as_without_tracing(one: Run) -> None:
    assert one.answers == [fake.ANSWER_TEXT]
    assert one.requests == 2


def test_run_iterations_llm_and_tool_spans(one: Run) -> None:
    _assert_one_tree(one.spans, AGENT)


def test_tokens_on_the_llm_leaves_only(one: Run) -> None:
    llm = _kinds(one.spans, "llm")
    used = [fake.TOOL_CALL_USAGE, fake.ANSWER_USAGE]
    assert [s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm] == [u.prompt_tokens for u in used]
    assert [s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in llm] == [u.completion_tokens for u in used]
    for span in one.spans:
        if span.kind != "llm":
            assert not [k for k in span.attributes if k.startswith("gen_ai.usage.")], span.name
    iterations = _kinds(one.spans, "iteration")
    assert [s.attributes["agentdiag.usage.input_tokens"] for s in iterations] == [u.prompt_tokens for u in used]
    tokens_in = sum(u.prompt_tokens for u in used)
    tokens_out = sum(u.completion_tokens for u in used)
    assert trace_summaries(one.store) == [("run", 2, len(TOOLS), tokens_in, tokens_out)]


def test_the_receipt_is_valid(one: Run) -> None:
    assert one.receipt == "valid"


def test_the_strict_export_carries_the_same_tree(one: Run) -> None:
    assert_same_tree(one.received, one.spans)


def test_no_sentinel_in_the_store_or_on_the_wire(one: Run) -> None:
    seen = Surfaces.of(one.store, one.raw_bodies, one.received)
    assert AGENT in seen.dump and "lookup_city" in seen.dump  # the search finds what is allowed
    assert AGENT.encode() in seen.wire and b"lookup_city" in seen.wire  # declared names: never _OTHER
    assert seen.leaks(SENTINELS) == []


def test_two_agents_under_gather_keep_their_trees_apart(two: Run) -> None:
    assert two.answers == [fake.ANSWER_TEXT] * 2
    traces = two.traces()
    assert len(traces) == 2
    agents = {
        _assert_one_tree(spans, str(_kinds(spans, "run")[0].attributes[sc.GEN_AI_AGENT_NAME])).name for spans in traces
    }
    assert agents == {f"invoke_agent {AGENT}", "invoke_agent city_agent"}
    assert two.receipt == "valid"
    assert Surfaces.of(two.store, two.raw_bodies, two.received).leaks(SENTINELS) == []


def test_run_stream_with_a_streaming_model_is_one_run(tmp_path: Path) -> None:
    """``run_stream`` (→ ``on_messages_stream``) with ``model_client_stream=True``: one run, the streamed model
    calls' usage (``include_usage``) on their leaves; the streamed first answer asks for ``get_weather`` alone."""
    streamed = _run("stream", tmp_path)
    assert streamed.answers == [fake.STREAM_TEXT]
    _assert_one_tree(streamed.spans, AGENT, tools=("get_weather",))
    llm = _kinds(streamed.spans, "llm")
    assert [s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm] == [
        fake.TOOL_CALL_USAGE.prompt_tokens,
        fake.STREAM_USAGE.prompt_tokens,
    ]
    assert streamed.receipt == "valid"


def test_a_team_run_holds_its_agents_runs(tmp_path: Path) -> None:
    """A team's ``run`` is a run; each agent's turn (the team calls ``on_messages_stream``) a run nested in it."""
    team = _run("team", tmp_path)
    assert team.answers == [fake.ANSWER_TEXT]
    (outer,) = [s for s in team.spans if s.parent_span_id is None]
    assert outer.name == "invoke_agent weather_team"
    inner = [s for s in team.spans if s is not outer]
    run = _assert_one_tree(inner, AGENT)
    assert run.parent_span_id == outer.span_id
    assert team.receipt == "valid"


def test_zero_code_finds_the_entry_point_and_keeps_one_llm_span_per_call(tmp_path: Path) -> None:
    """Under ``opentelemetry-instrument`` our OpenAI instrumentor runs too: it enriches the ``chat`` span of each
    model call (one span per call), and the configurator's global provider receives no autogen-core span."""
    zero_code = _run("zero-code", tmp_path)
    assert zero_code.answers == [fake.ANSWER_TEXT]
    _assert_one_tree(zero_code.spans, AGENT)
    llm = _kinds(zero_code.spans, "llm")
    assert [s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm] == [31, 57]
    assert all(str(s.attributes.get(sc.GEN_AI_RESPONSE_MODEL, "")).startswith("gpt-4o-mini") for s in llm)  # enriched
    assert zero_code.receipt == "valid"
    assert len(zero_code.received) == len(zero_code.spans)  # the OTLP branch from the environment, too
    assert Surfaces.of(zero_code.store, zero_code.raw_bodies, zero_code.received).leaks(SENTINELS) == []
