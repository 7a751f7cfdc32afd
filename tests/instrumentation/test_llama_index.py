"""LlamaIndex workflow agents traced by :class:`LlamaIndexInstrumentor` (LlamaIndex's own dispatcher).

The agent is a real ``FunctionAgent`` with three real ``FunctionTool`` s (two succeed, one raises) and
LlamaIndex's own function-calling test model (``MockFunctionCallingLLM``) scripted to call them and to report
usage in its raw response, as LlamaIndex's provider integrations do. No network: llama-index-core ships the nltk
data it uses (stopwords, punkt_tab) inside its wheel and reads it from there unless ``NLTK_DATA`` names another
directory (an empty one would make it download them, on first use): the tests leave ``NLTK_DATA`` alone, and one
checks, in a fresh interpreter with every non-loopback connection refused, that importing LlamaIndex and
loading that data opens none.

In memory: the tree (run → one iteration per ``run_agent_step`` → chat and tool spans), also for two runs under
``asyncio.gather``; the agent's answer and errors unchanged; uninstrument reversible. Through ``configure()`` to a
real SQLite store and a real OTLP/HTTP receiver (strict): the kinds and names, usage on the leaves only and
roll-ups equal to their sums, a valid receipt, and no sentinel (prompt, system prompt, tool arguments, results,
descriptions, call and response ids, the failing tool's message) in the store or on the wire.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from e2e.otlp_receiver import OTLPReceiver, ReceivedSpan
from fakes import openai_server as fake
from llama_index.core.llms import ChatMessage, ChatResponse
from llama_index_agent import ANSWER, MODEL, SENTINELS, USAGE, ScriptedLLM
from llama_index_agent import make_agent as _agent
from llama_index_agent import run_agent as _run
from llm_spans import attrs, named, raw_ids
from opentelemetry.sdk.trace import ReadableSpan

import otel_agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.instrumentation.llama_index import LlamaIndexInstrumentor
from otel_agentdiag.storage import SpanStore, StoredSpan

HASH_KEY = b"c2d8a1f4e7b3096d5a4c1e8f2b7d3a6095e4c1b8a7f2d3e6c9b0a5d4e1f7c2b8"
# llama-index-workflows lists a pydantic model's members with inspect.getmembers, which reads the deprecated
# `__fields__` and `model_computed_fields` of pydantic 2: LlamaIndex's warnings, not ours.
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")


@pytest.fixture
def instrumented(spans: Any) -> Iterator[Any]:
    LlamaIndexInstrumentor().instrument(tracer_provider=spans.provider)
    try:
        yield spans
    finally:
        LlamaIndexInstrumentor().uninstrument()


def _parent(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan | None:
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    return by_id.get(span.parent.span_id) if span.parent is not None else None


def _run_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan | None:
    node: ReadableSpan | None = span
    while node is not None and attrs(node).get(sc.AGENTDIAG_KIND) != sc.KIND_RUN:
        node = _parent(node, spans)
    return node


def test_one_agent_run_is_a_run_of_iterations_of_model_and_tool_calls(instrumented: Any) -> None:
    assert asyncio.run(_run(_agent())) == ANSWER  # the agent's answer, unchanged
    spans = instrumented.finished()
    kinds = sorted(attrs(s)[sc.AGENTDIAG_KIND] for s in spans)
    assert kinds == sorted(["run"] + ["iteration"] * 3 + ["llm"] * 3 + ["tool"] * 3)
    (run,) = named(spans, "invoke_agent weather_agent")
    assert run.parent is None
    iterations = named(spans, sc.ITERATION_SPAN_NAME)
    assert [attrs(i)[sc.AGENTDIAG_ITERATION_INDEX] for i in iterations] == [0, 1, 2]
    assert all(_parent(i, spans) is run for i in iterations)
    chats = named(spans, f"chat {MODEL}")
    assert [_parent(c, spans) for c in chats] == iterations
    tools = sorted((s for s in spans if attrs(s)[sc.AGENTDIAG_KIND] == "tool"), key=lambda s: s.start_time or 0)
    assert [(s.name, _parent(s, spans)) for s in tools] == [
        ("execute_tool get_weather", iterations[0]),
        ("execute_tool get_time", iterations[0]),
        ("execute_tool lookup", iterations[1]),
    ]
    assert [s.status.is_ok for s in tools] == [True, True, False]
    assert attrs(tools[2])[sc.ERROR_TYPE] == "LookupError"  # the type, never the message
    assert [e.attributes for e in tools[2].events] == [{sc.EXCEPTION_TYPE: "LookupError"}]
    assert [raw_ids(s).get(sc.GEN_AI_TOOL_CALL_ID) for s in tools] == [
        f"{fake.SENTINEL_TOOL_CALL_ID}-{n}" for n in (1, 2, 3)
    ]  # beside the span, for the redactor to hash: never an attribute


def test_an_agent_workflow_run_is_the_same_tree_named_after_its_root_agent(instrumented: Any) -> None:
    from llama_index.core.agent.workflow import AgentWorkflow

    from otel_agentdiag._internal.names import default_registry

    workflow = AgentWorkflow(agents=[_agent("desk_agent")], root_agent="desk_agent")

    async def run() -> str:
        return str(await workflow.run(user_msg="hello"))

    assert asyncio.run(run()) == ANSWER
    spans = instrumented.finished()
    (root,) = [s for s in spans if s.parent is None]
    assert root.name == "invoke_agent desk_agent"
    assert sorted(attrs(s)[sc.AGENTDIAG_KIND] for s in spans) == sorted(
        ["run"] + ["iteration"] * 3 + ["llm"] * 3 + ["tool"] * 3
    )
    assert default_registry.is_agent("desk_agent")  # declared by the workflow's agents: code


def test_usage_on_the_model_calls_and_roll_ups_their_sums(instrumented: Any) -> None:
    asyncio.run(_run(_agent()))
    spans = instrumented.finished()
    chats = named(spans, f"chat {MODEL}")
    assert [(attrs(c)[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs(c)[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) for c in chats] == list(
        USAGE
    )
    assert {attrs(c)[sc.GEN_AI_RESPONSE_MODEL] for c in chats} == {MODEL}
    for span in spans:
        if span not in chats:
            assert not [k for k in attrs(span) if k.startswith(sc.GEN_AI_USAGE_PREFIX)], span.name
    (run,) = named(spans, "invoke_agent weather_agent")
    assert attrs(run)["agentdiag.usage.input_tokens"] == sum(p for p, _ in USAGE)
    assert attrs(run)["agentdiag.usage.output_tokens"] == sum(c for _, c in USAGE)
    for iteration, (prompt, _completion) in zip(named(spans, sc.ITERATION_SPAN_NAME), USAGE, strict=True):
        assert attrs(iteration)["agentdiag.usage.input_tokens"] == prompt


def test_a_streamed_model_call_ends_with_its_stream_and_carries_its_usage(instrumented: Any) -> None:
    assert asyncio.run(_run(_agent(streaming=True))) == ANSWER
    spans = instrumented.finished()
    chats = named(spans, f"chat {MODEL}")
    assert [attrs(c)[sc.GEN_AI_USAGE_INPUT_TOKENS] for c in chats] == [p for p, _ in USAGE]
    iterations = named(spans, sc.ITERATION_SPAN_NAME)
    assert [_parent(c, spans) for c in chats] == iterations
    first_tool = named(spans, "execute_tool get_weather")[0]
    assert (chats[0].end_time or 0) <= (first_tool.start_time or 0)  # the stream ended before the tool ran
    (run,) = named(spans, "invoke_agent weather_agent")
    assert attrs(run)["agentdiag.usage.input_tokens"] == sum(p for p, _ in USAGE)


def test_concurrent_runs_under_asyncio_gather_keep_their_own_trees(instrumented: Any) -> None:
    async def both() -> list[str]:
        return list(await asyncio.gather(_run(_agent("weather_agent")), _run(_agent("clock_agent"))))

    assert asyncio.run(both()) == [ANSWER, ANSWER]
    spans = instrumented.finished()
    runs = {s.name: s for s in spans if attrs(s)[sc.AGENTDIAG_KIND] == "run"}
    assert set(runs) == {"invoke_agent weather_agent", "invoke_agent clock_agent"}
    assert runs["invoke_agent weather_agent"].context.trace_id != runs["invoke_agent clock_agent"].context.trace_id
    for run in runs.values():
        mine = [s for s in spans if s is not run and _run_of(s, spans) is run]
        assert sorted(attrs(s)[sc.AGENTDIAG_KIND] for s in mine) == sorted(
            ["iteration"] * 3 + ["llm"] * 3 + ["tool"] * 3
        )
        assert all(s.context.trace_id == run.context.trace_id for s in mine)


def test_a_failing_model_call_fails_its_span_and_reaches_the_agent_unchanged(instrumented: Any) -> None:
    class Broken(ScriptedLLM):
        def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
            raise ConnectionError("model down")

    agent = _agent()
    agent.llm = Broken()
    with pytest.raises(Exception) as caught:
        asyncio.run(_run(agent))
    assert "model down" in str(caught.value)  # LlamaIndex's own wrapping (if any) is untouched
    spans = instrumented.finished()
    (chat,) = named(spans, f"chat {MODEL}")
    assert attrs(chat)[sc.ERROR_TYPE] == "ConnectionError"
    (run,) = named(spans, "invoke_agent weather_agent")
    assert not run.status.is_ok
    assert LlamaIndexInstrumentor().span_handler.table.open_spans == 0


def test_uninstrument_removes_the_handlers(spans: Any) -> None:
    from llama_index.core.instrumentation import get_dispatcher

    root = get_dispatcher()
    before = (list(root.span_handlers), list(root.event_handlers))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    instrumentor.instrument(tracer_provider=spans.provider)  # idempotent
    assert len(root.span_handlers) == len(before[0]) + 1
    instrumentor.uninstrument()
    assert (list(root.span_handlers), list(root.event_handlers)) == before
    assert asyncio.run(_run(_agent())) == ANSWER
    assert spans.finished() == []


_OFFLINE_IMPORT = """
import socket
attempts = []
def refuse(*args, **kwargs):
    attempts.append(args[:2])
    raise OSError("no network in this test")
socket.getaddrinfo = refuse
socket.create_connection = refuse
import llama_index.core
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.utils import globals_helper
assert globals_helper.stopwords and globals_helper.punkt_tokenizer
print("attempts", attempts)
"""


def test_llama_index_imports_and_loads_its_nltk_data_offline() -> None:
    env = {k: v for k, v in os.environ.items() if k != "NLTK_DATA"}
    out = subprocess.run(
        [sys.executable, "-c", _OFFLINE_IMPORT], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "attempts []"
    assert "nltk_data" not in out.stderr  # nltk's downloader reports every attempt there


# --- through the pipeline configure() builds ---------------------------------------------------------------
@dataclass
class Stored:
    store: Path
    spans: list[StoredSpan]
    received: list[ReceivedSpan]
    raw_bodies: list[bytes]
    receipt: str


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stored]:
    store = tmp_path_factory.mktemp("llama") / "traces.db"
    with OTLPReceiver() as receiver:
        diag = otel_agentdiag.configure(
            service_name="llama-test", store=store, otlp_endpoint=receiver.endpoint, hash_key=HASH_KEY, set_global=False
        )
        LlamaIndexInstrumentor().instrument(tracer_provider=diag.tracer_provider)
        try:
            assert asyncio.run(_run(_agent())) == ANSWER
        finally:
            LlamaIndexInstrumentor().uninstrument()
            diag.shutdown()
        assert receiver.errors == []
        received = receiver.spans()
        raw_bodies = list(receiver.raw_bodies)
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
        receipt = session_receipt(reader, None)
        status = receipt.status if receipt.status != "valid" else "valid"
        if status != "valid":
            status = f"{receipt.status} {receipt.reasons} {receipt.counts}"
    yield Stored(store, spans, received, raw_bodies, status)


def test_the_store_holds_the_tree_with_declared_names(stored: Stored) -> None:
    spans = stored.spans
    by_id = {s.span_id: s for s in spans}
    (run,) = [s for s in spans if s.kind == "run"]
    assert run.name == "invoke_agent weather_agent"  # the agent's own name: declared in its definition
    iterations = sorted((s for s in spans if s.kind == "iteration"), key=lambda s: s.start_ns)
    assert [by_id[i.parent_span_id or ""] for i in iterations] == [run] * 3
    tools = sorted((s for s in spans if s.kind == "tool"), key=lambda s: s.start_ns)
    assert [t.name for t in tools] == ["execute_tool get_weather", "execute_tool get_time", "execute_tool lookup"]
    assert [t.status == "error" for t in tools] == [False, False, True]
    assert [by_id[t.parent_span_id or ""] for t in tools] == [iterations[0], iterations[0], iterations[1]]
    assert all(t.attributes[sc.GEN_AI_TOOL_CALL_ID].startswith("hmac") for t in tools), tools[0].attributes
    chats = [s for s in spans if s.kind == "llm"]
    assert {s.name for s in chats} == {f"chat {MODEL}"}
    assert sorted(by_id[c.parent_span_id or ""].span_id for c in chats) == sorted(i.span_id for i in iterations)


def test_the_store_counts_tokens_once(stored: Stored) -> None:
    conn = sqlite3.connect(f"file:{stored.store}?mode=ro", uri=True)
    try:
        summary = conn.execute(
            "SELECT kind, llm_calls, tool_calls, input_tokens, output_tokens FROM trace_summaries"
        ).fetchall()
    finally:
        conn.close()
    assert summary == [("run", 3, 3, sum(p for p, _ in USAGE), sum(c for _, c in USAGE))]
    (run,) = [s for s in stored.spans if s.kind == "run"]
    assert run.attributes["agentdiag.usage.input_tokens"] == sum(p for p, _ in USAGE)


def test_the_receipt_is_valid(stored: Stored) -> None:
    assert stored.receipt == "valid"


def test_the_strict_export_carries_the_same_tree(stored: Stored) -> None:
    assert sorted(str(r.attributes.get(sc.AGENTDIAG_KIND)) for r in stored.received) == sorted(
        s.kind for s in stored.spans
    )
    spoken = {
        r.attributes.get(sc.AGENTDIAG_KIND): r.attributes.get(sc.OPENINFERENCE_SPAN_KIND) for r in stored.received
    }
    assert spoken == {"run": "AGENT", "iteration": "CHAIN", "llm": "LLM", "tool": "TOOL"}


def test_no_sentinel_in_the_store_or_on_the_wire(stored: Stored) -> None:
    for path in stored.store.parent.iterdir():
        blob = path.read_bytes().lower()
        assert not [s for s in SENTINELS if s.lower().encode() in blob], path.name
    conn = sqlite3.connect(f"file:{stored.store}?mode=ro", uri=True)
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    assert "weather_agent" in dump and "get_weather" in dump  # the search finds what is allowed
    assert not [s for s in SENTINELS if s in dump]
    wire = b"\n".join(stored.raw_bodies)
    assert b"weather_agent" in wire
    assert not [s for s in SENTINELS if s.encode() in wire]


def test_with_capture_on_the_content_reaches_the_local_table_only(tmp_path: Path) -> None:
    """``capture_content=True``: the prompt, the answers, the tool arguments and results are captured content in
    the store's content table (never span attributes), and nothing of it goes over OTLP."""
    from otel_agentdiag.content.decoder import decode

    store = tmp_path / "traces.db"
    with OTLPReceiver() as receiver:
        diag = otel_agentdiag.configure(
            store=store, otlp_endpoint=receiver.endpoint, hash_key=HASH_KEY, set_global=False, capture_content=True
        )
        LlamaIndexInstrumentor().instrument(tracer_provider=diag.tracer_provider)
        try:
            assert asyncio.run(_run(_agent())) == ANSWER
        finally:
            LlamaIndexInstrumentor().uninstrument()
            diag.shutdown()
        wire = b"\n".join(receiver.raw_bodies)
    with SpanStore(store, create=False) as reader:
        (trace,) = reader.list_traces()
        names = {s.span_id: s.name for s in reader.get_trace(trace.trace_id)}
        content: dict[str, dict[str, list[Any]]] = {}
        for item in reader.trace_content(trace.trace_id):
            content.setdefault(names[item.span_id], {}).setdefault(item.role, []).append(decode(item.lossless))
    chat = content[f"chat {MODEL}"]
    assert fake.SENTINEL_PROMPT in repr(chat[sc.CONTENT_INPUT_MESSAGES])
    assert ANSWER in repr(chat[sc.CONTENT_OUTPUT_MESSAGES])
    weather = content["execute_tool get_weather"]
    assert fake.SENTINEL_TOOL_ARGS in repr(weather[sc.CONTENT_TOOL_ARGUMENTS])
    assert fake.SENTINEL_TOOL_RESULT in repr(weather[sc.CONTENT_TOOL_RESULT])
    assert sc.CONTENT_TOOL_RESULT not in content["execute_tool lookup"]  # it raised: no result
    assert not [s for s in SENTINELS if s.encode() in wire]
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        spans_text = repr(conn.execute("SELECT name, attributes, events FROM spans").fetchall())
    finally:
        conn.close()
    assert not [s for s in SENTINELS if s in spans_text]


@pytest.mark.parametrize(
    ("module", "provider"),
    [
        ("llama_index.llms.openai.base", "openai"),
        ("llama_index.llms.anthropic.base", "anthropic"),
        ("llama_index.llms.azure_openai.base", "azure.ai.openai"),
        ("my_app.llms", "llama_index"),  # a class of one's own: no provider we can tell
    ],
)
def test_a_model_calls_provider_is_its_llm_packages(module: str, provider: str) -> None:
    """LlamaIndex's integrations live in ``llama_index.llms.<provider>``: the model call names that provider (its
    cost is then found in the price table), not the framework."""
    from otel_agentdiag.instrumentation.llama_index._mapping import llm_span

    llm_class = type("SomeLLM", (), {"__module__": module, "model": "gpt-4o-mini"})
    _name, attributes = llm_span(llm_class(), "chat")
    assert attributes["gen_ai.provider.name"] == provider


class _WireStreamingLLM(ScriptedLLM):
    """As LlamaIndex's OpenAI LLM streams: the request goes out only when the returned stream is first read."""

    base_url: str = ""

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        import openai

        response = self.chat(messages, **kwargs)
        client = openai.AsyncOpenAI(api_key=fake.SENTINEL_API_KEY, base_url=self.base_url)

        async def stream() -> Any:
            wire = await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "?"}], stream=True
            )
            async for _chunk in wire:
                pass
            yield response

        return stream()


def test_a_stream_whose_request_is_sent_when_read_is_its_model_calls_span(spans: Any) -> None:
    """With the OpenAI instrumentor on too, the HTTP call a LlamaIndex stream makes when it is read enriches that
    model call's span: no second LLM span, no trace of its own."""
    pytest.importorskip("openai")
    from fakes.openai_server import FakeModelServer

    from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

    LlamaIndexInstrumentor().instrument(tracer_provider=spans.provider)
    OpenAIInstrumentor().instrument(tracer_provider=spans.provider)
    try:
        with FakeModelServer() as server:
            agent = _agent(streaming=True)
            llm = _WireStreamingLLM()
            llm.base_url = server.base_url
            agent.llm = llm
            assert asyncio.run(_run(agent)) == ANSWER
            assert len(server.requests_to("/v1/chat/completions")) == len(USAGE)
    finally:
        OpenAIInstrumentor().uninstrument()
        LlamaIndexInstrumentor().uninstrument()
    finished = spans.finished()
    assert len({s.context.trace_id for s in finished}) == 1  # no model call in a trace of its own
    chats = [s for s in finished if attrs(s).get(sc.AGENTDIAG_KIND) == sc.KIND_LLM]
    assert len(chats) == len(USAGE)  # one LLM span per model call: LlamaIndex's, enriched
    assert all(attrs(c).get(sc.GEN_AI_RESPONSE_MODEL) for c in chats)
    assert all(_parent(c, finished) in named(finished, sc.ITERATION_SPAN_NAME) for c in chats)
