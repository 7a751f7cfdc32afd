"""The trace assembler and the loop rebuild, through ``configure()`` to a real store (issue 32, items 2 and 3).

Another instrumentation's trace, made here with a plain tracer on the configured provider and the keys each peer
writes (OpenInference, OpenLLMetry, the GenAI conventions), in the shapes measured with the real packages (Agno,
CrewAI, AutoGen, LangChain, the Agents SDK, AG2, Semantic Kernel; see docs/integrations.md): its session is its
trace's, it has one run per agent run and an iteration per model call and the tools it asked for, each call is
counted once, its receipt is ``valid``; our own traces are never held.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli
from otel_agentdiag.diagnostics.receipt import session_receipt, store_receipt
from otel_agentdiag.storage import SpanStore, StoredSpan

SESSION = "SESSION-XYZ-1234"


def unique(stem: str) -> str:
    return f"{stem}_{secrets.token_hex(3)}"


@pytest.fixture
def pipe(tmp_path: Path, clean_env: None) -> Iterator[tuple[Any, Path]]:
    store = tmp_path / "traces.db"
    diag = agentdiag.configure(service_name="assembly", store=store, hash_key=secrets.token_bytes(32), set_global=False)
    try:
        yield diag, store
    finally:
        diag.shutdown()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(("OTEL_", "AGENTDIAG_")):
            monkeypatch.delenv(name)


def oi_llm(tools: tuple[str, ...], prompt: int, completion: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o-mini",
        "llm.provider": "OpenAI",
        "llm.token_count.prompt": prompt,
        "llm.token_count.completion": completion,
    }
    for i, name in enumerate(tools):
        out[f"llm.tools.{i}.tool.json_schema"] = json.dumps({"type": "function", "function": {"name": name}})
    return out


@contextmanager
def span(tracer: trace.Tracer, name: str, attributes: dict[str, Any] | None = None, **late: Any) -> Iterator[Any]:
    """A span started with ``attributes``; ``late`` attributes are set just before it ends (as many peers do)."""
    with tracer.start_as_current_span(name, attributes=attributes or {}, record_exception=False) as current:
        yield current
        if late:
            current.set_attributes(late)


def agno_like(tracer: trace.Tracer, agent: str, tools: tuple[str, str], *, session_late: bool = False) -> None:
    """OpenInference's Agno shape: an AGENT span `{agent}.run` naming the session (at start, or only at its end),
    two LLM spans and two TOOL spans (one failing) as its children; nothing marks a loop step."""
    start = {"openinference.span.kind": "AGENT"}
    late = {}
    if session_late:
        late["session.id"] = SESSION
    else:
        start["session.id"] = SESSION
    with span(tracer, f"{agent}.run", start, **late):
        with span(tracer, "OpenAIChat.invoke", oi_llm(tools, 31, 12)):
            pass
        with span(tracer, tools[0], {"openinference.span.kind": "TOOL", "tool.name": tools[0]}):
            pass
        with span(tracer, tools[1], {"openinference.span.kind": "TOOL", "tool.name": tools[1]}) as failing:
            failing.set_status(Status(StatusCode.ERROR))
        with span(tracer, "OpenAIChat.invoke", oi_llm(tools, 57, 9)):
            pass


def stored(store: Path) -> list[StoredSpan]:
    with SpanStore(store, create=False) as reader:
        return [s for t in reader.list_traces() for s in reader.get_trace(t.trace_id)]


def children(spans: list[StoredSpan], parent: StoredSpan) -> list[StoredSpan]:
    return sorted((s for s in spans if s.parent_span_id == parent.span_id), key=lambda s: s.start_ns)


def loop_of(spans: list[StoredSpan]) -> list[list[str]]:
    """Per iteration of the trace's one run (in index order), its leaves as `kind:name` (sorted)."""
    (run,) = [s for s in spans if s.kind == "run"]
    iterations = sorted(
        (s for s in spans if s.kind == "iteration"), key=lambda s: s.attributes[sc.AGENTDIAG_ITERATION_INDEX]
    )
    by_id = {s.span_id: s for s in spans}
    out = []
    for it in iterations:
        leaves = []
        for s in spans:
            if s.kind in ("llm", "tool"):
                parent = by_id.get(s.parent_span_id or "")
                while parent is not None and parent.kind not in ("iteration", "run"):
                    parent = by_id.get(parent.parent_span_id or "")
                if parent is it:
                    leaves.append(f"{s.kind}:{s.name}")
        out.append(sorted(leaves))
        assert _run_of(by_id, it) is run
    return out


def _run_of(by_id: dict[str, StoredSpan], node: StoredSpan) -> StoredSpan | None:
    parent = by_id.get(node.parent_span_id or "")
    while parent is not None and parent.kind != "run":
        parent = by_id.get(parent.parent_span_id or "")
    return parent


def status_json(store: Path, session: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        cli, ["status", "--session", session, "--store", str(store), "--format", "json"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("session_late", [False, True], ids=["session-at-start", "session-at-end"])
def test_a_peer_trace_gets_its_loop_its_session_and_a_valid_receipt(pipe: Any, session_late: bool) -> None:
    diag, store = pipe
    agent, tools = unique("weather_agent"), (unique("get_weather"), unique("lookup_city"))
    agno_like(
        diag.tracer_provider.get_tracer("openinference.instrumentation.agno"), agent, tools, session_late=session_late
    )
    diag.shutdown()
    spans = stored(store)
    assert len({s.trace_id for s in spans}) == 1
    (run,) = [s for s in spans if s.kind == "run"]
    assert run.name == f"invoke_agent {agent}"  # declared by the span name `{agent}.run`
    assert loop_of(spans) == [
        sorted(["llm:chat gpt-4o-mini", f"tool:execute_tool {tools[0]}", f"tool:execute_tool {tools[1]}"]),
        ["llm:chat gpt-4o-mini"],
    ]
    sessions = {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in spans}
    assert len(sessions) == 1 and None not in sessions  # the whole trace, the iterations too, in one session
    (session,) = sessions
    with SpanStore(store, create=False) as reader:
        receipt = session_receipt(reader, session)
        assert (receipt.status, list(receipt.reasons)) == ("valid", [])
        assert store_receipt(reader).status == "valid"
    status = status_json(store, session)
    assert status["counts"] | {"errors": None} == {
        "runs": 1,
        "iterations": 2,
        "llm_calls": 2,
        "tool_calls": 2,
        "errors": None,
        "input_tokens": 88,
        "output_tokens": 21,
    }
    assert status["cost_usd"] > 0  # provider `OpenAI` read as openai
    assert "integrity_not_valid" not in status["signals"] and "event_loss" not in status["signals"]


def test_wrapper_runs_become_steps_and_a_sub_agent_stays_a_run(pipe: Any) -> None:
    """OpenLLMetry's Agents SDK shape (a workflow run around one agent run, no calls of its own): one run. A run
    that calls a model and hands work to another agent keeps its sub-agent as a nested run."""
    diag, store = pipe
    tracer = diag.tracer_provider.get_tracer("opentelemetry.instrumentation.openai_agents")
    agent, helper = unique("weather_agent"), unique("helper_agent")
    with span(tracer, "Agent Workflow", {"traceloop.span.kind": "workflow"}):
        with span(tracer, f"{agent}.run", {"openinference.span.kind": "AGENT"}):
            with span(tracer, "chat", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}):
                pass
            with span(tracer, "delegate", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delegate"}):
                with span(tracer, f"{helper}.run", {"openinference.span.kind": "AGENT"}):
                    with span(tracer, "chat", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}):
                        pass
            with span(tracer, "chat", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}):
                pass
    diag.shutdown()
    spans = stored(store)
    runs = sorted(s.name for s in spans if s.kind == "run")
    assert runs == sorted([f"invoke_agent {agent}", f"invoke_agent {helper}"])
    (wrapper,) = [s for s in spans if s.attributes.get(sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE) == "agent_wrapper"]
    assert wrapper.kind == "other" and wrapper.parent_span_id is None
    outer = next(s for s in spans if s.name == f"invoke_agent {agent}")
    iterations = [s for s in spans if s.kind == "iteration"]
    by_id = {s.span_id: s for s in spans}
    assert sorted(_run_of(by_id, it).name for it in iterations) == sorted(  # type: ignore[union-attr]
        [outer.name, outer.name, f"invoke_agent {helper}"]
    )


def test_a_model_or_tool_call_seen_twice_is_counted_once(pipe: Any) -> None:
    """Agno's LLM span around OpenInference's OpenAI span (both with usage), AutoGen's two tool spans per call
    (only the inner one says it failed): one LLM leaf per call, its usage once; one tool leaf per call, failed."""
    diag, store = pipe
    tracer = diag.tracer_provider.get_tracer("peers")
    agent, tool = unique("weather_agent"), unique("lookup_city")
    with span(tracer, f"{agent}.run", {"openinference.span.kind": "AGENT", "session.id": SESSION}):
        with span(tracer, "OpenAIChat.invoke", oi_llm((tool,), 31, 12)):
            with span(tracer, "ChatCompletion", oi_llm((tool,), 31, 12)):
                pass
        with span(tracer, f"{agent}.{tool}", {"openinference.span.kind": "TOOL", "tool.name": tool}):
            with span(
                tracer, f"execute_tool {tool}", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
            ) as inner:
                inner.set_attribute("error.type", "ValueError")
                inner.set_status(Status(StatusCode.ERROR))
    diag.shutdown()
    spans = stored(store)
    llm = [s for s in spans if s.kind == "llm"]
    tools = [s for s in spans if s.kind == "tool"]
    assert len(llm) == 1 and llm[0].attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 31
    assert len(tools) == 1 and tools[0].status == "error" and tools[0].attributes["error.type"] == "ValueError"
    steps = sorted(s.attributes.get(sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE) for s in spans if s.kind == "other")
    assert steps == ["duplicate_llm_call", "duplicate_tool_call"]
    assert not any(k.startswith("gen_ai.usage.") for s in spans if s.kind != "llm" for k in s.attributes)


def test_our_own_traces_are_never_held(pipe: Any) -> None:
    diag, store = pipe
    with agentdiag.agent_run("ours", conversation_id="c-1"):
        with agentdiag.iteration(0):
            with agentdiag.tool_call("t"):
                pass
    assert diag.assembler.stats()["held"] == 0
    assert diag.assembler.stats()["assembled"] == 0
    diag.shutdown()
    assert len(stored(store)) == 3


def test_a_span_still_open_when_the_root_ends_leaves_a_gap_until_it_ends(pipe: Any) -> None:
    """A span of a peer's trace that has not ended when its root ends keeps a number reserved: the receipt says a
    span is missing until it arrives, then the trace is complete."""
    diag, store = pipe
    tracer = diag.tracer_provider.get_tracer("peer")
    root = tracer.start_span("root", attributes={"openinference.span.kind": "AGENT", "session.id": SESSION})
    ctx = trace.set_span_in_context(root)
    straggler = tracer.start_span("background", context=ctx)
    done = tracer.start_span("done", context=ctx)
    done.end()
    root.end()
    diag.force_flush()
    with SpanStore(store, create=False) as reader:
        (session,) = {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in stored(store)}
        assert session_receipt(reader, session).status == "degraded"
    straggler.end()
    diag.force_flush()
    with SpanStore(store, create=False) as reader:
        assert session_receipt(reader, session).status == "valid"
        assert len(reader.get_trace(next(iter(reader.list_traces())).trace_id)) == 3


def test_a_trace_over_the_span_bound_is_handed_on_early_and_still_complete(tmp_path: Path, clean_env: None) -> None:
    from otel_agentdiag.pipeline.assembly import TraceAssembler

    diag = agentdiag.configure(
        service_name="bound", store=tmp_path / "t.db", hash_key=secrets.token_bytes(32), set_global=False
    )
    try:
        assembler: TraceAssembler = diag.assembler
        assembler.max_spans = 3
        tracer = diag.tracer_provider.get_tracer("peer")
        with span(tracer, "root", {"openinference.span.kind": "CHAIN", "session.id": SESSION}):
            for i in range(5):
                with span(tracer, f"step-{i}", {"openinference.span.kind": "CHAIN"}):
                    pass
        assert assembler.stats()["early"] == 1
    finally:
        diag.shutdown()
    spans = stored(tmp_path / "t.db")
    assert len(spans) == 6
    (session,) = {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in spans}
    with SpanStore(tmp_path / "t.db", create=False) as reader:
        assert session_receipt(reader, session).status == "valid"


def test_a_span_that_ends_after_its_root_is_waited_for(pipe: Any) -> None:
    """AutoGen closes its agent span after its parent's: the rebuild waits for it (a short grace), so the wrapper
    run is seen and the calls get their iterations."""
    diag, store = pipe
    tracer = diag.tracer_provider.get_tracer("peer")
    agent = unique("late_agent")
    root = tracer.start_span(
        f"invoke_agent {agent}",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent, "session.id": SESSION},
    )
    inner = tracer.start_span(
        f"{agent}.on_messages_stream",
        context=trace.set_span_in_context(root),
        attributes={"openinference.span.kind": "AGENT"},
    )
    ctx = trace.set_span_in_context(inner)
    for tokens in ((31, 12), (57, 9)):
        tracer.start_span("chat", context=ctx, attributes=oi_llm((), *tokens)).end()
    root.end()  # before its child
    inner.end()
    diag.shutdown()
    spans = stored(store)
    assert [s.kind for s in spans].count("run") == 1
    assert len(loop_of(spans)) == 2
