"""The agent loop of one trace, rebuilt where its instrumentation reports none: pure, spans in, a plan out.

The convention adapters map one span at a time; what a trace *is* (how many runs, which model call and tool calls
form one turn of the loop) needs the whole trace. :class:`~otel_agentdiag.pipeline.assembly.TraceAssembler`
hands this module the ended spans of a trace that another instrumentation started, once its root has ended, and
applies the :class:`Plan` it gets back before the spans go to any destination. Four rules, each only for spans
no instrumentation of ours made (ours already say what they are):

1. **One LLM span per model call.** Another instrumentation's LLM span that wraps another one (Agno's
   ``OpenAIChat.invoke`` around OpenInference's OpenAI ``ChatCompletion``; DSPy's ``LM.__call__`` around LiteLLM's
   ``completion``) is the same call seen twice: the innermost one that reports usage stays the call, the others
   become steps (``duplicate_llm_call``) without usage. When one of them is ours, ours is the call (as
   :mod:`~otel_agentdiag.pipeline.adapters.owners` decides span by span).
2. **One tool span per tool call.** A tool span inside another tool span, with no run between them (AutoGen:
   autogen-core's ``execute_tool`` and OpenInference's tool span), is the same call: the outer one stays, unless
   only the inner one says the call failed; the other becomes a step (``duplicate_tool_call``).
3. **One run span per agent run.** A run span with no model or tool call of its own and exactly one run inside
   it (the Agents SDK's workflow span, OpenLLMetry's ``{agent}.workflow`` under its ``invoke_agent``, AutoGen's
   ``invoke_agent`` around OpenInference's agent span, a workflow of one agent) is one run with it: the one that
   names the agent stays (the outer one when both name the same agent, or only it does), the other becomes a
   step (``agent_wrapper``). A run that makes calls of its own and delegates to another agent keeps both: a real
   sub-agent stays a nested run. A run inside a run that made no call at all (BeeAI's final-answer event) is a
   step too. AG2's ``conversation`` (a chat between agents) is the run, of the one agent whose replies call the
   model (``invoke_agent {agent}``), and each agent's ``invoke_agent`` reply inside it a step (``agent_reply``).
4. **One iteration per model call and the tool calls it asked for**, under each run that has no iteration of its
   own: a model call opens an iteration, and each tool call joins the iteration of the last model call that
   started before it (tools before the first model call join the first). The iteration span is new
   (``agent.iteration``, ``agentdiag.iteration.index`` 0, 1, ... per run, kind INTERNAL, this module's scope); it
   takes, as its children, the largest subtrees under the run whose calls all belong to it (LangGraph's ``model``
   and ``tools`` nodes, CrewAI's steps, or the calls themselves), and sits where they sat (under the run, or under
   a step that holds the whole loop, as Semantic Kernel's ``AutoFunctionInvocationLoop``). A loop step the
   instrumentation does report (ours, Strands' cycles, smolagents' and the Agents SDK's turns, mapped by the
   adapters) is kept as it is and only gets its index when it has none.

Nothing here reads or adds content: kinds come from ``agentdiag.kind`` or :func:`~.adapters.map_span`, names from
the mapped agent and tool names, order from start times.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.sdk import attribute_dict, span_attributes
from otel_agentdiag.pipeline.adapters import DUPLICATE_LLM_CALL, map_span
from otel_agentdiag.pipeline.adapters._common import LEAF_USAGE_KEYS
from otel_agentdiag.pipeline.adapters.genai import AG2_SCOPE, CONVERSATION
from otel_agentdiag.version import __version__

__all__ = [
    "AGENT_REPLY",
    "AGENT_WRAPPER",
    "DUPLICATE_TOOL_CALL",
    "SCOPE",
    "Plan",
    "plan_trace",
]

AGENT_REPLY = "agent_reply"
"""``agentdiag.framework.span_type`` of one agent's reply inside AG2's conversation run."""
AGENT_WRAPPER = "agent_wrapper"
"""``agentdiag.framework.span_type`` of a run span that only wraps another run."""
DUPLICATE_TOOL_CALL = "duplicate_tool_call"
"""``agentdiag.framework.span_type`` of a tool span that is another tool span's call seen again."""

SCOPE = InstrumentationScope("otel_agentdiag.pipeline.loop", __version__)
"""The instrumentation scope of the iteration spans this module adds."""

_LEAVES = frozenset({sc.KIND_LLM, sc.KIND_TOOL})


@dataclass(eq=False)
class _Node:
    span: ReadableSpan
    span_id: int
    kind: str
    ours: bool
    agent: str | None
    tool: str | None
    usage: bool
    error: bool
    start: int
    end: int
    conversation: bool = False
    """A run that is AG2's conversation between agents."""
    parent: _Node | None = None
    children: list[_Node] = field(default_factory=list)
    demoted: str | None = None

    @property
    def leaf(self) -> bool:
        return self.kind in _LEAVES and self.demoted is None

    @property
    def run(self) -> bool:
        return self.kind == sc.KIND_RUN and self.demoted is None


@dataclass
class Plan:
    """What to change in a trace: ``parents`` span id → the span id of its new parent; ``demoted`` span id → the
    ``agentdiag.framework.span_type`` of a span that becomes a step; ``indexes`` span id → the
    ``agentdiag.iteration.index`` of an iteration the instrumentation reported without one; ``iterations`` the
    iteration spans to add."""

    parents: dict[int, SpanContext] = field(default_factory=dict)
    demoted: dict[int, str] = field(default_factory=dict)
    indexes: dict[int, int] = field(default_factory=dict)
    iterations: list[ReadableSpan] = field(default_factory=list)
    runs: dict[int, str] = field(default_factory=dict)
    """span id → the agent a run span is the run of, when the rebuild tells it better than the span (AG2's
    conversation: the agent whose replies call the model, not the one that opened the chat)."""

    def __bool__(self) -> bool:
        return bool(self.parents or self.demoted or self.indexes or self.iterations or self.runs)


def _text(value: Any) -> str | None:
    return value if type(value) is str and value else None


def _node(span: ReadableSpan) -> _Node | None:
    ctx = span.context
    if ctx is None:
        return None
    attributes = attribute_dict(span_attributes(span))
    own = attributes.get(sc.AGENTDIAG_KIND)
    mapped_set: Mapping[str, Any] = {}
    if own is not None:
        kind, ours = str(own), True
    else:
        scope = span.instrumentation_scope
        mapped = map_span(attributes, span.name, None if scope is None else scope.name)
        kind, ours = (sc.KIND_OTHER, False) if mapped is None else (mapped.kind, False)
        mapped_set = {} if mapped is None else mapped.set
    usage = any(key in attributes or key in mapped_set for key in LEAF_USAGE_KEYS)
    start = span.start_time or 0
    return _Node(
        span=span,
        span_id=ctx.span_id,
        kind=kind,
        ours=ours,
        agent=_text(attributes.get(sc.GEN_AI_AGENT_NAME)) or _text(mapped_set.get(sc.GEN_AI_AGENT_NAME)),
        tool=_text(attributes.get(sc.GEN_AI_TOOL_NAME)) or _text(mapped_set.get(sc.GEN_AI_TOOL_NAME)),
        usage=usage,
        error=span.status.status_code is StatusCode.ERROR,
        start=start,
        end=span.end_time or start,
        conversation=attributes.get(sc.GEN_AI_OPERATION_NAME) == CONVERSATION,
    )


def _tree(spans: Iterable[ReadableSpan]) -> list[_Node]:
    nodes: dict[int, _Node] = {}
    for span in spans:
        node = _node(span)
        if node is not None:
            nodes[node.span_id] = node
    for node in nodes.values():
        parent = node.span.parent
        found = None if parent is None else nodes.get(parent.span_id)
        if found is not None and found is not node:
            node.parent = found
            found.children.append(node)
    for node in nodes.values():
        node.children.sort(key=lambda n: (n.start, n.span_id))
    return sorted(nodes.values(), key=lambda n: (n.start, n.span_id))


def _below(node: _Node, stop: frozenset[str]) -> Iterable[_Node]:
    """The nodes under ``node`` (depth first), not descending into nodes of a kind in ``stop``."""
    stack = list(reversed(node.children))
    while stack:
        current = stack.pop()
        yield current
        if current.kind not in stop or current.demoted is not None:
            stack.extend(reversed(current.children))


def _demote_duplicate_llms(nodes: list[_Node], plan: Plan) -> None:
    """Rule 1: nested foreign LLM spans are one call; the innermost with usage stays."""
    for node in nodes:
        if node.kind != sc.KIND_LLM or node.demoted is not None or _has_llm_ancestor(node):
            continue
        chain = [node, *(n for n in _below(node, frozenset({sc.KIND_RUN, sc.KIND_TOOL})) if n.kind == sc.KIND_LLM)]
        if len(chain) < 2:
            continue
        ours = [n for n in chain if n.ours]
        with_usage = [n for n in chain if n.usage]
        # Ours owns the call (as the per-span owners rule says); else the innermost that reports usage.
        keep = ours[0] if ours else (with_usage or chain)[-1]  # depth first: the last is the innermost
        for other in chain:
            if other is not keep and not other.ours:
                other.demoted = plan.demoted[other.span_id] = DUPLICATE_LLM_CALL


def _has_llm_ancestor(node: _Node) -> bool:
    parent = node.parent
    while parent is not None and parent.kind not in (sc.KIND_RUN, sc.KIND_TOOL):
        if parent.kind == sc.KIND_LLM:
            return True
        parent = parent.parent
    return False


def _demote_duplicate_tools(nodes: list[_Node], plan: Plan) -> None:
    """Rule 2: a foreign tool span inside another tool span (no run between) is the same call."""
    for node in nodes:
        if node.kind != sc.KIND_TOOL or node.demoted is not None:
            continue
        for inner in _below(node, frozenset({sc.KIND_RUN, sc.KIND_TOOL})):
            if inner.kind != sc.KIND_TOOL or inner.demoted is not None or (inner.ours and node.ours):
                continue
            keep_inner = (inner.error and not node.error) or (node.ours is False and inner.ours)
            loser = node if keep_inner else inner
            if loser.ours:
                continue  # ours say what they are
            loser.demoted = plan.demoted[loser.span_id] = DUPLICATE_TOOL_CALL
            if loser is node:
                break


def _nearest_run(node: _Node) -> _Node | None:
    parent = node.parent
    while parent is not None and not parent.run:
        parent = parent.parent
    return parent


def _scope(node: _Node) -> str | None:
    scope = node.span.instrumentation_scope
    return None if scope is None else scope.name


def _demote_replies(nodes: list[_Node], plan: Plan) -> None:
    """AG2: each agent's reply inside its ``conversation`` run (both its own spans) is a step of that run."""
    answering: dict[int, set[str]] = {}
    for node in nodes:
        if node.run and not node.ours and _scope(node) == AG2_SCOPE:
            outer = _nearest_run(node)
            if outer is not None and _scope(outer) == AG2_SCOPE and outer.conversation:
                node.demoted = plan.demoted[node.span_id] = AGENT_REPLY
                calls_model = any(n.kind == sc.KIND_LLM for n in _below(node, frozenset({sc.KIND_RUN})))
                if calls_model and node.agent is not None:
                    answering.setdefault(outer.span_id, set()).add(node.agent)
    for span_id, agents in answering.items():
        if len(agents) == 1:  # one agent answers with the model: the conversation is its run
            plan.runs[span_id] = agents.pop()


def _demote_wrapper_runs(nodes: list[_Node], plan: Plan) -> None:
    """Rule 3: a foreign run with no calls of its own and exactly one run inside wraps that run."""
    changed = True
    while changed:
        changed = False
        for node in nodes:
            if not node.run or node.ours:
                continue
            own_leaves = 0
            inner_runs = []
            for below in _below(node, frozenset({sc.KIND_RUN})):
                if below.run:
                    inner_runs.append(below)
                elif below.leaf:
                    own_leaves += 1
            if own_leaves == 0 and not inner_runs and _nearest_run(node) is not None:
                # A run inside a run that made no call at all (BeeAI reports its agent's final-answer event as an
                # agent span): no run of an agent.
                node.demoted = plan.demoted[node.span_id] = AGENT_WRAPPER
                changed = True
                continue
            if own_leaves == 0 and len(inner_runs) == 1:
                (inner,) = inner_runs
                # The run that names the agent stays: the outer one when both name the same agent (OpenLLMetry's
                # `invoke_agent` around its `{agent}.workflow`) or only it does; else the inner one.
                keep_outer = node.agent is not None and inner.agent in (None, node.agent)
                loser = inner if keep_outer and not inner.ours else node
                loser.demoted = plan.demoted[loser.span_id] = AGENT_WRAPPER
                changed = True


def _iteration_id(trace_id: int, run_id: int, index: int) -> int:
    digest = hashlib.sha256(f"{trace_id:032x}{run_id:016x}{index}".encode()).digest()
    value = int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF_FFFF_FFFF
    return value or 1


def _iterations_of(run: _Node, plan: Plan) -> None:
    """Rule 4 for one run: index the loop steps it reports, or add one per model call and its tool calls."""
    steps = []
    leaves = []
    for below in _below(run, frozenset({sc.KIND_RUN})):
        if below.run:
            continue
        if below.kind == sc.KIND_ITERATION and below.demoted is None and _nearest_run(below) is run:
            steps.append(below)
        elif below.leaf and _nearest_run(below) is run:
            leaves.append(below)
    if steps:
        for index, step in enumerate(sorted(steps, key=lambda n: (n.start, n.span_id))):
            if sc.AGENTDIAG_ITERATION_INDEX not in span_attributes(step.span):
                plan.indexes[step.span_id] = index
        return
    leaves.sort(key=lambda n: (n.start, n.span_id))
    if not any(n.kind == sc.KIND_LLM for n in leaves):
        return  # no model call: no loop to show
    turn_of: dict[int, int] = {}
    turn = 0
    seen_llm = False
    for leaf in leaves:
        if leaf.kind == sc.KIND_LLM:
            if seen_llm:
                turn += 1
            seen_llm = True
        turn_of[leaf.span_id] = turn
    # Each node's turns (of this run's calls beneath it); a subtree holding one turn moves whole.
    turns_below: dict[int, set[int]] = {}

    def collect(node: _Node) -> set[int]:
        found = {turn_of[node.span_id]} if node.span_id in turn_of else set()
        for child in node.children:
            if child.run:
                continue  # another agent's calls are not this run's turns
            found |= collect(child)
        turns_below[node.span_id] = found
        return found

    collect(run)
    tops: dict[int, list[_Node]] = {}
    for leaf in leaves:
        top = leaf
        while (
            top.parent is not None
            and top.parent is not run
            and turns_below.get(top.parent.span_id) == {turn_of[leaf.span_id]}
        ):
            top = top.parent
        group = tops.setdefault(turn_of[leaf.span_id], [])
        if top not in group:
            group.append(top)
    trace_id = run.span.context.trace_id  # type: ignore[union-attr]
    flags = run.span.context.trace_flags  # type: ignore[union-attr]
    for index in sorted(tops):
        members = tops[index]
        holder = _common_parent(members, run)
        iteration_id = _iteration_id(trace_id, run.span_id, index)
        context = SpanContext(trace_id, iteration_id, is_remote=False, trace_flags=flags)
        plan.iterations.append(
            ReadableSpan(
                name=sc.ITERATION_SPAN_NAME,
                context=context,
                parent=holder.span.context,
                resource=run.span.resource,
                attributes={sc.AGENTDIAG_KIND: sc.KIND_ITERATION, sc.AGENTDIAG_ITERATION_INDEX: index},
                kind=SpanKind.INTERNAL,
                start_time=min(m.start for m in members),
                end_time=max(m.end for m in members),
                instrumentation_scope=SCOPE,
            )
        )
        for member in members:
            plan.parents[member.span_id] = context


def _common_parent(members: Sequence[_Node], run: _Node) -> _Node:
    """The deepest node under (or at) ``run`` that holds every member's parent."""
    paths = []
    for member in members:
        path = []
        node = member.parent
        while node is not None and node is not run:
            path.append(node)
            node = node.parent
        paths.append(list(reversed(path)))
    holder = run
    for level in zip(*paths, strict=False):
        first = level[0]
        if all(n is first for n in level):
            holder = first
        else:
            break
    return holder


def plan_trace(spans: Sequence[ReadableSpan]) -> Plan:
    """What to change so that ``spans`` (the ended spans of one trace) show one run per agent run and its loop. An
    empty plan when nothing needs changing. Pure: reads the spans, changes none."""
    plan = Plan()
    nodes = _tree(spans)
    if not nodes:
        return plan
    _demote_duplicate_llms(nodes, plan)
    _demote_duplicate_tools(nodes, plan)
    _demote_replies(nodes, plan)
    _demote_wrapper_runs(nodes, plan)
    for node in nodes:
        if node.run and not node.ours:
            _iterations_of(node, plan)
    return plan
