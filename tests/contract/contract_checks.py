"""The ten checks every integration passes, one definition for all of them (issue 32, item 7).

A *setup* (one framework, traced the way docs/integrations.md says) runs one agent run against the scripted model
server of :mod:`contract_server`: the first model call asks for two tools at once (one of them fails), the second
answers. What reached the store, the strict OTLP export and ``agentdiag export`` is then held against the
:class:`Truth` of that run, check by check:

``runs``          one run span per agent run, every call of the run in its trace
``iterations``    one iteration per model call, every LLM and tool span inside one, inside the run
``llm_calls``     one LLM span per model call
``tool_calls``    one tool span per tool call
``names``         the names code declared (tools, the agent) are the span names, never ``_OTHER``
``tokens``        each model call's usage, on its LLM leaf only, once
``cost``          each LLM leaf priced (``agentdiag.cost.usd`` > 0)
``error``         the failing tool's span failed, with its ``error.type``
``receipt``       the run's session is the trace's, its receipt ``valid``, ``status`` counts it right, no false alarm
``no_leak``       no sentinel (prompt, tool arguments and results, ids, key) in the store's files, the OTLP bodies,
                  the received attributes or the exports

Each check returns the problems it found (empty: passed), never raises for a wrong trace, so one run shows every
check's verdict.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fakes import openai_server as fake

from otel_agentdiag import semconv as sc
from otel_agentdiag.storage import StoredSpan

CHECKS: tuple[str, ...] = (
    "runs",
    "iterations",
    "llm_calls",
    "tool_calls",
    "names",
    "tokens",
    "cost",
    "error",
    "receipt",
    "no_leak",
)


@dataclass(frozen=True)
class Truth:
    """What the scripted run really was."""

    tools: tuple[str, str] = ("get_weather", "lookup_city")
    """The two tools the first answer calls, as declared in code; the second one raises."""
    agent: str | None = "weather_agent"
    """The agent's name as declared in code; None when the framework gives its agents no name."""
    tokens: tuple[tuple[int, int], ...] = (
        (fake.TOOL_CALL_USAGE.prompt_tokens, fake.TOOL_CALL_USAGE.completion_tokens),
        (fake.ANSWER_USAGE.prompt_tokens, fake.ANSWER_USAGE.completion_tokens),
    )
    """(input, output) tokens of each model call, as the server reports them."""
    session: bool = True
    """Whether the setup gives the run a conversation (session) id."""

    @property
    def model_calls(self) -> int:
        return len(self.tokens)


@dataclass
class Outcome:
    """What one setup's run left behind."""

    store: Path
    spans: list[StoredSpan]
    received: list[Any]
    """The spans the strict OTLP receiver decoded (``otlp_receiver.ReceivedSpan``)."""
    bodies: list[bytes]
    """The OTLP request bodies as sent."""
    exports: list[bytes]
    """``agentdiag export`` of the run's trace, in each format."""
    receipt: tuple[str, list[str]]
    """The run's session receipt: status and reasons."""
    status: dict[str, Any]
    """``agentdiag status --format json`` of the run's session."""
    sentinels: tuple[str, ...] = field(default=fake.SENTINELS)


def _by_id(spans: Sequence[StoredSpan]) -> dict[str, StoredSpan]:
    return {s.span_id: s for s in spans}


def _ancestor(span: StoredSpan, by_id: dict[str, StoredSpan], kind: str, stop: tuple[str, ...] = ()) -> Any:
    parent = by_id.get(span.parent_span_id or "")
    while parent is not None and parent.kind != kind:
        if parent.kind in stop:
            return None
        parent = by_id.get(parent.parent_span_id or "")
    return parent


def _kinds(outcome: Outcome, kind: str) -> list[StoredSpan]:
    return sorted((s for s in outcome.spans if s.kind == kind), key=lambda s: s.start_ns)


def check_runs(outcome: Outcome, truth: Truth) -> list[str]:
    runs = _kinds(outcome, sc.KIND_RUN)
    if len(runs) != 1:
        return [f"{len(runs)} run spans: {[r.name for r in runs]}"]
    (run,) = runs
    by_id = _by_id(outcome.spans)
    strays = [
        s.name
        for s in outcome.spans
        if s.kind in (sc.KIND_LLM, sc.KIND_TOOL)
        and (s.trace_id != run.trace_id or _ancestor(s, by_id, "run") is not run)
    ]
    return [f"calls outside the run: {strays}"] if strays else []


def check_iterations(outcome: Outcome, truth: Truth) -> list[str]:
    iterations = _kinds(outcome, sc.KIND_ITERATION)
    problems = []
    if len(iterations) != truth.model_calls:
        problems.append(f"{len(iterations)} iterations, {truth.model_calls} model calls")
    by_id = _by_id(outcome.spans)
    outside = [
        s.name
        for s in outcome.spans
        if s.kind in (sc.KIND_LLM, sc.KIND_TOOL) and _ancestor(s, by_id, sc.KIND_ITERATION, ("run",)) is None
    ]
    if outside:
        problems.append(f"calls in no iteration: {outside}")
    return problems


def check_llm_calls(outcome: Outcome, truth: Truth) -> list[str]:
    llm = _kinds(outcome, sc.KIND_LLM)
    return [] if len(llm) == truth.model_calls else [f"{len(llm)} LLM spans for {truth.model_calls} model calls"]


def check_tool_calls(outcome: Outcome, truth: Truth) -> list[str]:
    tools = _kinds(outcome, sc.KIND_TOOL)
    return [] if len(tools) == len(truth.tools) else [f"{len(tools)} tool spans for {len(truth.tools)} tool calls"]


def check_names(outcome: Outcome, truth: Truth) -> list[str]:
    problems = []
    tools = sorted(s.name for s in _kinds(outcome, sc.KIND_TOOL))
    expected = sorted(f"{sc.OP_EXECUTE_TOOL} {name}" for name in truth.tools)
    if tools != expected:
        problems.append(f"tool spans {tools}, declared {expected}")
    if truth.agent is not None:
        runs = [s.name for s in _kinds(outcome, sc.KIND_RUN)]
        if f"{sc.OP_INVOKE_AGENT} {truth.agent}" not in runs:
            problems.append(f"run spans {runs}, declared agent {truth.agent!r}")
    return problems


def check_tokens(outcome: Outcome, truth: Truth) -> list[str]:
    problems = []
    leaves = _kinds(outcome, sc.KIND_LLM)
    reported = sorted(
        (s.attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS), s.attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS))
        for s in leaves
    )
    if reported != sorted(truth.tokens):
        problems.append(f"usage {reported}, reported {sorted(truth.tokens)}")
    elsewhere = [
        s.name
        for s in outcome.spans
        if s.kind != sc.KIND_LLM and any(k.startswith("gen_ai.usage.") for k in s.attributes)
    ]
    if elsewhere:
        problems.append(f"leaf usage on non-LLM spans: {elsewhere}")
    return problems


def check_cost(outcome: Outcome, truth: Truth) -> list[str]:
    unpriced = [s.name for s in _kinds(outcome, sc.KIND_LLM) if not (s.attributes.get(sc.AGENTDIAG_COST_USD) or 0) > 0]
    return [f"LLM spans without a cost: {unpriced}"] if unpriced else []


def check_error(outcome: Outcome, truth: Truth) -> list[str]:
    failing = f"{sc.OP_EXECUTE_TOOL} {truth.tools[1]}"
    tools = [s for s in _kinds(outcome, sc.KIND_TOOL) if s.name == failing] or [
        s for s in _kinds(outcome, sc.KIND_TOOL) if s.status == "error"
    ]
    if not tools:
        return [f"no tool span {failing!r}"]
    span = tools[0]
    problems = []
    if span.status != "error":
        problems.append(f"{span.name} status {span.status}")
    if not span.attributes.get(sc.ERROR_TYPE):
        problems.append(f"{span.name} has no error.type")
    ok = [s.name for s in _kinds(outcome, sc.KIND_TOOL) if s is not span and s.status == "error"]
    if ok:
        problems.append(f"tools that did not fail marked failed: {ok}")
    return problems


def check_receipt(outcome: Outcome, truth: Truth) -> list[str]:
    problems = []
    status, reasons = outcome.receipt
    if status != "valid":
        problems.append(f"receipt {status} {reasons}")
    sessions = {s.attributes.get(sc.GEN_AI_CONVERSATION_ID) for s in outcome.spans}
    if len(sessions) != 1:
        problems.append(f"the run's spans are filed in {len(sessions)} sessions")
    elif truth.session and None in sessions:
        problems.append("the run has a conversation id, its spans are filed in none")
    counts = outcome.status.get("counts", {})
    expected = {
        "runs": 1,
        "iterations": truth.model_calls,
        "llm_calls": truth.model_calls,
        "tool_calls": len(truth.tools),
        "input_tokens": sum(t[0] for t in truth.tokens),
        "output_tokens": sum(t[1] for t in truth.tokens),
    }
    wrong = {k: (counts.get(k), v) for k, v in expected.items() if counts.get(k) != v}
    if wrong:
        problems.append(f"status counts (got, truth): {wrong}")
    alarms = [
        s
        for s in outcome.status.get("signals", [])
        if s in ("event_loss", "integrity_not_valid", "repetition_suspected")
    ]
    if alarms:
        problems.append(f"false alarms: {alarms}")
    return problems


def check_no_leak(outcome: Outcome, truth: Truth) -> list[str]:
    surfaces: dict[str, bytes] = {p.name: p.read_bytes().lower() for p in outcome.store.parent.iterdir() if p.is_file()}
    surfaces["otlp"] = b"\n".join(outcome.bodies).lower()
    surfaces["received"] = json.dumps([r.attributes for r in outcome.received], default=str).encode().lower()
    for index, export in enumerate(outcome.exports):
        surfaces[f"export#{index}"] = export.lower()
    found = [
        f"{needle} in {where}"
        for needle in outcome.sentinels
        for where, blob in surfaces.items()
        if needle.lower().encode() in blob
    ]
    return found


CHECK_FUNCTIONS: dict[str, Callable[[Outcome, Truth], list[str]]] = {
    "runs": check_runs,
    "iterations": check_iterations,
    "llm_calls": check_llm_calls,
    "tool_calls": check_tool_calls,
    "names": check_names,
    "tokens": check_tokens,
    "cost": check_cost,
    "error": check_error,
    "receipt": check_receipt,
    "no_leak": check_no_leak,
}
assert tuple(CHECK_FUNCTIONS) == CHECKS
