"""LiteLLM, traced by ``openinference-instrumentation-litellm`` and mapped by our OpenInference adapter: a small
hand-written agent loop (our ``agent_run`` / ``iteration`` / ``tool_call``) calling the real ``litellm.completion``
(and ``acompletion``, two agents under ``asyncio.gather``) with model ``openai/gpt-4o-mini`` against the fake
model server on 127.0.0.1, through the pipeline ``configure()`` builds, to a real SQLite store and a real
OTLP/HTTP receiver (strict policy).

Each agent: iteration 0 asks the model (a tool call), runs the tool twice and a failing tool; iteration 1 sends the
result back and gets the answer. With our own OpenAI instrumentor on too, usage is still counted once: LiteLLM
1.110 posts to ``/chat/completions`` through the ``openai`` client's low-level ``post()``, not through
``chat.completions.create``, so ours sees no call and OpenInference's LLM span is the only one.
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agent_runs import trace_summaries
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from leak_search import Surfaces
from otlp_receiver import OTLPReceiver, ReceivedSpan

import otel_agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor as OurOpenAIInstrumentor
from otel_agentdiag.storage import SpanStore, StoredSpan

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the price table at import
litellm = pytest.importorskip("litellm")
pytest.importorskip("openinference.instrumentation.litellm")
pytestmark = [
    # LiteLLM imports its GitHub Copilot provider lazily at the first call; pydantic warns about a TypedDict there.
    pytest.mark.filterwarnings("ignore:Item.* using the `ReadOnly` qualifier:UserWarning"),
    # LiteLLM's sync calls leave an event loop of theirs unclosed (with its two self-pipe sockets) for the GC.
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function BaseEventLoop.__del__:pytest.PytestUnraisableExceptionWarning"
    ),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <socket.socket fd=[0-9]+, family=1:pytest.PytestUnraisableExceptionWarning"
    ),
]

HASH_KEY = b"8c1f4e7a2d5b9c0e3f6a1d4b7e0c2f5a8d1b4e7c0a3f6d9b2e5c8a1f4d7b0e3c"
AGENT = "litellm-agent"
MODEL = "openai/gpt-4o-mini"
FAILING_TOOL = "lookup_city"
FAILING_TOOL_ERROR = f"lookup failed for {fake.SENTINEL_USER}"
SENTINELS = (*fake.SENTINELS, "/home/alice")
PROMPT = f"{fake.SENTINEL_PROMPT} weather in /home/alice?"
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": fake.TOOL_NAME,
            "description": fake.SENTINEL_TOOL_DESCRIPTION,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
TOKENS_IN = fake.TOOL_CALL_USAGE.prompt_tokens + fake.ANSWER_USAGE.prompt_tokens
TOKENS_OUT = fake.TOOL_CALL_USAGE.completion_tokens + fake.ANSWER_USAGE.completion_tokens
AGENTS_IN_GATHER = 2


@dataclass
class Run:
    mode: str
    store: Path
    spans: list[StoredSpan]
    received: list[ReceivedSpan]
    raw_bodies: list[bytes]
    receipts: list[str]
    answers: list[str]


def _messages() -> list[Any]:
    return [{"role": "system", "content": fake.SENTINEL_SYSTEM}, {"role": "user", "content": PROMPT}]


def _tools(call: Any, messages: list[Any]) -> None:
    """Iteration 0's tools: the model's tool twice, then a tool that fails (the agent goes on)."""
    for _ in range(2):
        with otel_agentdiag.tool_call(fake.TOOL_NAME, call_id=call.id):
            result = fake.SENTINEL_TOOL_RESULT
    try:
        with otel_agentdiag.tool_call(FAILING_TOOL, call_id=call.id):
            raise LookupError(FAILING_TOOL_ERROR)
    except LookupError:
        pass
    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def _agent(server: FakeModelServer, conversation: str) -> str:
    options: dict[str, Any] = {"api_base": server.base_url, "api_key": fake.SENTINEL_API_KEY, "tools": TOOLS}
    messages = _messages()
    with otel_agentdiag.agent_run(AGENT, conversation_id=conversation):
        with otel_agentdiag.iteration(0):
            first = litellm.completion(model=MODEL, messages=messages, **options)
            message = first.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            _tools(message.tool_calls[0], messages)
        with otel_agentdiag.iteration(1):
            answer = litellm.completion(model=MODEL, messages=messages, **options)
    return str(answer.choices[0].message.content)


async def _async_agent(server: FakeModelServer, conversation: str) -> str:
    options: dict[str, Any] = {"api_base": server.base_url, "api_key": fake.SENTINEL_API_KEY, "tools": TOOLS}
    messages = _messages()
    with otel_agentdiag.agent_run(AGENT, conversation_id=conversation):
        with otel_agentdiag.iteration(0):
            first = await litellm.acompletion(model=MODEL, messages=messages, **options)
            message = first.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            _tools(message.tool_calls[0], messages)
        with otel_agentdiag.iteration(1):
            answer = await litellm.acompletion(model=MODEL, messages=messages, **options)
    return str(answer.choices[0].message.content)


def _conversation(i: int) -> str:
    return f"{fake.SENTINEL_CONVERSATION}-{i}"


@pytest.fixture(scope="module", params=["sync", "sync+ours", "gather"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    from openinference.instrumentation.litellm import LiteLLMInstrumentor

    mode = request.param
    store = tmp_path_factory.mktemp(mode.replace("+", "_")) / "traces.db"
    otel_agentdiag.register_names(tools=[fake.TOOL_NAME, FAILING_TOOL], agents=[AGENT])
    with OTLPReceiver() as receiver, FakeModelServer() as server:
        diag = otel_agentdiag.configure(
            service_name="litellm-test",
            store=store,
            otlp_endpoint=receiver.endpoint,
            hash_key=HASH_KEY,
            set_global=False,
        )
        instrumentor = LiteLLMInstrumentor()
        instrumentor.instrument(tracer_provider=diag.tracer_provider)
        ours = OurOpenAIInstrumentor() if mode == "sync+ours" else None
        if ours is not None:
            ours.instrument(tracer_provider=diag.tracer_provider)
        try:
            if mode == "gather":

                async def both() -> list[str]:
                    runs = (_async_agent(server, _conversation(i)) for i in range(AGENTS_IN_GATHER))
                    return list(await asyncio.gather(*runs))

                answers = asyncio.run(both())
            else:
                answers = [_agent(server, _conversation(0))]
        finally:
            if ours is not None:
                ours.uninstrument()
            instrumentor.uninstrument()
            gc.collect()
            diag.shutdown()
        assert receiver.errors == []
        assert len(server.requests_to("/v1/chat/completions")) == 2 * len(answers)
        received = receiver.spans()
        raw_bodies = list(receiver.raw_bodies)
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
        receipts = []
        for session in sorted({str(s.attributes.get(sc.GEN_AI_CONVERSATION_ID)) for s in spans if s.kind == "run"}):
            receipt = session_receipt(reader, session)
            receipts.append(f"{receipt.status} {receipt.reasons}" if receipt.status != "valid" else "valid")
    yield Run(mode, store, spans, received, raw_bodies, receipts, answers)


def _kinds(spans: list[StoredSpan], kind: str) -> list[StoredSpan]:
    return sorted((s for s in spans if s.kind == kind), key=lambda s: s.start_ns)


def test_the_agents_get_the_answers(run: Run) -> None:
    assert run.answers == [fake.ANSWER_TEXT] * len(run.answers)


def test_each_run_has_its_iterations_llm_and_tool_spans(run: Run) -> None:
    spans = run.spans
    runs = _kinds(spans, "run")
    assert len(runs) == len(run.answers)
    assert len({s.trace_id for s in runs}) == len(runs)  # one trace per agent, also under gather
    assert {s.kind for s in spans} == {"run", "iteration", "llm", "tool"}
    for agent in runs:
        mine = [s for s in spans if s.trace_id == agent.trace_id]
        assert agent.name == f"invoke_agent {AGENT}"
        iterations = _kinds(mine, "iteration")
        assert [s.attributes[sc.AGENTDIAG_ITERATION_INDEX] for s in iterations] == [0, 1]
        assert {s.parent_span_id for s in iterations} == {agent.span_id}
        llm = _kinds(mine, "llm")
        assert [s.name for s in llm] == [f"chat {MODEL}"] * 2
        assert [s.parent_span_id for s in llm] == [s.span_id for s in iterations]
        assert [s.attributes.get(sc.GEN_AI_PROVIDER_NAME) for s in llm] == ["openai"] * 2
        assert [s.scope and s.scope["name"] for s in llm] == ["openinference.instrumentation.litellm"] * 2
        tools = _kinds(mine, "tool")
        expected = [f"execute_tool {fake.TOOL_NAME}"] * 2 + [f"execute_tool {FAILING_TOOL}"]
        assert [s.name for s in tools] == expected
        assert {s.parent_span_id for s in tools} == {iterations[0].span_id}
        assert [s.status == "error" for s in tools] == [False, False, True]
        assert tools[2].attributes[sc.ERROR_TYPE] == "LookupError"


def test_tokens_on_the_llm_leaves_only_and_once(run: Run) -> None:
    llm = _kinds(run.spans, "llm")
    agents = len(run.answers)
    assert len(llm) == 2 * agents  # with ours on too: no second LLM span of the same call
    assert sum(s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in llm) == agents * TOKENS_IN
    assert sum(s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in llm) == agents * TOKENS_OUT
    for span in run.spans:
        if span.kind != "llm":
            assert not [k for k in span.attributes if k.startswith(("gen_ai.usage.", "llm.token_count."))], span.name
    assert not [s for s in run.spans if s.attributes.get(sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE) == "duplicate_llm_call"]
    summary = trace_summaries(run.store)  # the roll-ups `traces` and `sessions` read
    assert summary == [("run", 2, 3, TOKENS_IN, TOKENS_OUT)] * agents


def test_the_receipts_are_valid(run: Run) -> None:
    assert run.receipts == ["valid"] * len(run.answers)


def test_the_strict_export_carries_the_same_tree(run: Run) -> None:
    assert sorted(str(r.attributes.get(sc.AGENTDIAG_KIND)) for r in run.received) == sorted(s.kind for s in run.spans)


def test_no_sentinel_in_the_store_or_on_the_wire(run: Run) -> None:
    seen = Surfaces.of(run.store, run.raw_bodies, run.received)
    assert AGENT in seen.dump and FAILING_TOOL in seen.dump  # the search finds what is allowed
    assert AGENT.encode() in seen.wire
    assert seen.leaks(SENTINELS) == []
