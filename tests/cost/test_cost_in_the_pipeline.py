"""Cost end to end: ``configure()`` with a real SQLite store, the manual wrappers and the real ``openai`` and
``anthropic`` clients against the fake model server; leaf costs, roll-ups equal to their sums, and budgets."""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer

import otel_agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.instrumentation.anthropic import AnthropicInstrumentor
from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor
from otel_agentdiag.storage import SpanStore, StoredSpan

KEY = b"442f18475e673d6886dacd45328a7ec155d9a207f69c7098cd618ac0ac152443"
MILLION = 1_000_000


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        yield running


def _run(tmp_path: Path, server: FakeModelServer, **configure: Any) -> tuple[list[str], list[StoredSpan]]:
    """One scripted agent run (two iterations: a manual call and an OpenAI call; an Anthropic call with cache
    tokens), traced into a fresh store. Returns what the agent returned and the stored spans."""
    store = tmp_path / "traces.db"
    diag = otel_agentdiag.configure(store=store, hash_key=KEY, set_global=False, **configure)
    OpenAIInstrumentor().instrument()
    AnthropicInstrumentor().instrument()
    answers: list[str] = []
    try:
        oai = openai.OpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)
        claude = anthropic.Anthropic(
            api_key="sk-test", base_url=server.anthropic_base_url, max_retries=0, open_telemetry=False
        )
        with otel_agentdiag.agent_run("cost-agent", conversation_id="c-1"):
            with otel_agentdiag.iteration(0):
                with otel_agentdiag.llm_call(provider="openai", model="gpt-4.1") as call:
                    call.record_response(input_tokens=1500, output_tokens=250)
                    answers.append("manual")
                reply = oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
                answers.append(reply.choices[0].message.content or "")
            with otel_agentdiag.iteration(1):
                message = claude.messages.create(
                    model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
                )
                answers.append(message.content[0].text)  # type: ignore[union-attr]
                with otel_agentdiag.llm_call(provider="openai", model="unpriced-model") as unknown:
                    unknown.record_response(input_tokens=10, output_tokens=10)
    finally:
        OpenAIInstrumentor().uninstrument()
        AnthropicInstrumentor().uninstrument()
        gc.collect()
        diag.shutdown()
    with SpanStore(store, create=False) as reader:
        spans = [s for t in reader.list_traces() for s in reader.get_trace(t.trace_id)]
    return answers, spans


def _kind(spans: list[StoredSpan], kind: str) -> list[StoredSpan]:
    return sorted((s for s in spans if s.kind == kind), key=lambda s: s.end_ns or 0)


def test_leaf_costs_and_roll_ups_equal_their_sums(tmp_path: Path, server: FakeModelServer) -> None:
    answers, spans = _run(tmp_path, server)
    assert answers[0] == "manual" and len(answers) == 3
    leaves = {s.attributes.get(sc.GEN_AI_REQUEST_MODEL): s for s in _kind(spans, sc.KIND_LLM)}
    assert set(leaves) == {"gpt-4.1", "gpt-4o-mini", "claude-haiku-4-5", "unpriced-model"}
    cost = {model: span.attributes.get(sc.AGENTDIAG_COST_USD) for model, span in leaves.items()}
    assert cost["gpt-4.1"] == (1500 * 2.0 + 250 * 8.0) / MILLION
    usage = fake.ANSWER_USAGE
    assert cost["gpt-4o-mini"] == (usage.prompt_tokens * 0.15 + usage.completion_tokens * 0.6) / MILLION
    a = fake.ANTHROPIC_USAGE  # input_tokens excludes the cache: uncached at $1, reads at $0.10, writes at $1.25
    expected = a.input_tokens * 1.0 + a.cache_read_input_tokens * 0.1 + a.cache_creation_input_tokens * 1.25
    assert cost["claude-haiku-4-5"] == (expected + a.output_tokens * 5.0) / MILLION
    assert cost["unpriced-model"] is None  # absent, never 0
    (run,) = _kind(spans, sc.KIND_RUN)
    first, second = sorted(_kind(spans, sc.KIND_ITERATION), key=lambda s: s.start_ns)
    priced = [c for c in cost.values() if c is not None]
    assert run.attributes[sc.AGENTDIAG_USAGE_COST_USD] == pytest.approx(math.fsum(priced), rel=1e-12)
    assert first.attributes[sc.AGENTDIAG_USAGE_COST_USD] == pytest.approx(
        cost["gpt-4.1"] + cost["gpt-4o-mini"], rel=1e-12
    )
    assert second.attributes[sc.AGENTDIAG_USAGE_COST_USD] == pytest.approx(cost["claude-haiku-4-5"], rel=1e-12)
    # The token roll-ups beside it: every leaf's tokens, priced or not.
    tokens = sum(s.attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS, 0) for s in leaves.values())
    assert run.attributes[sc.AGENTDIAG_USAGE_PREFIX + "input_tokens"] == tokens
    assert sc.AGENTDIAG_COST_USD not in run.attributes  # a leaf's key, never on a run
    assert sc.AGENTDIAG_BUDGET_EXCEEDED not in run.attributes  # no budget: no mark
    assert not [e for e in run.events if e["name"] == sc.AGENTDIAG_BUDGET_EXCEEDED]


def test_cost_off_leaves_no_cost_anywhere(tmp_path: Path, server: FakeModelServer) -> None:
    _, spans = _run(tmp_path, server, prices=False)
    costs = {sc.AGENTDIAG_COST_USD, sc.AGENTDIAG_USAGE_COST_USD}
    assert not [s for s in spans if costs & set(s.attributes)]
    assert [s for s in spans if sc.GEN_AI_USAGE_INPUT_TOKENS in s.attributes]  # usage is still there


def test_a_budget_passed_marks_the_run_and_changes_nothing_else(tmp_path: Path, server: FakeModelServer) -> None:
    plain, _ = _run(tmp_path / "plain", server)
    budget = otel_agentdiag.Budget(max_cost_usd=0.004, max_total_tokens=100, max_output_tokens=10**6)
    answers, spans = _run(tmp_path / "budget", server, budget=budget)
    assert answers == plain  # the agent's results are unchanged
    (run,) = _kind(spans, sc.KIND_RUN)
    assert run.status != "error"
    events = [e for e in run.events if e["name"] == sc.AGENTDIAG_BUDGET_EXCEEDED]
    # The manual gpt-4.1 call (1750 tokens, $0.005) passes both limits at once, in the documented order.
    assert [e["attributes"] for e in events] == [
        {sc.AGENTDIAG_BUDGET_LIMIT: "cost_usd", sc.AGENTDIAG_BUDGET_THRESHOLD: 0.004},
        {sc.AGENTDIAG_BUDGET_LIMIT: "total_tokens", sc.AGENTDIAG_BUDGET_THRESHOLD: 100.0},
    ]
    assert run.attributes[sc.AGENTDIAG_BUDGET_EXCEEDED] is True
    assert list(run.attributes[sc.AGENTDIAG_BUDGET_LIMITS]) == ["cost_usd", "total_tokens"]
    # Only the run is marked; its iterations and leaves are not.
    assert [s.name for s in spans if sc.AGENTDIAG_BUDGET_EXCEEDED in s.attributes] == [run.name]


def test_a_budget_not_passed_leaves_no_mark(tmp_path: Path, server: FakeModelServer) -> None:
    _, spans = _run(tmp_path, server, budget=otel_agentdiag.Budget(max_cost_usd=100.0))
    (run,) = _kind(spans, sc.KIND_RUN)
    assert sc.AGENTDIAG_BUDGET_EXCEEDED not in run.attributes and sc.AGENTDIAG_BUDGET_LIMITS not in run.attributes
    assert not [e for e in run.events if e["name"] == sc.AGENTDIAG_BUDGET_EXCEEDED]


def test_budget_arguments_and_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from otel_agentdiag.options import resolve_budget

    for bad in ({}, {"max_cost_usd": -1}, {"max_total_tokens": 0}, {"max_cost_usd": float("nan")}):
        with pytest.raises(ValueError, match="Budget"):
            otel_agentdiag.Budget(**bad)
    with pytest.raises(ValueError, match="budget must be"):
        otel_agentdiag.configure(store=tmp_path / "t.db", hash_key=KEY, set_global=False, budget=5)  # type: ignore[arg-type]
    monkeypatch.setenv("AGENTDIAG_BUDGET_USD", "0.25")
    monkeypatch.setenv("AGENTDIAG_BUDGET_TOKENS", "5000")
    assert resolve_budget(None) == otel_agentdiag.Budget(max_cost_usd=0.25, max_total_tokens=5000)
    monkeypatch.setenv("AGENTDIAG_BUDGET_USD", "lots")
    monkeypatch.setenv("AGENTDIAG_BUDGET_TOKENS", "-3")
    assert resolve_budget(None) is None
