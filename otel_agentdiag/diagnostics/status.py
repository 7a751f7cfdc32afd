"""Run-health status: what an agent session is doing, projected from its stored spans. Reads only.

The store holds spans that have *ended* (an exporter only ever sees ended spans). What is still running is
inferred: a span of the session that started (it holds a sequence number) but was never accounted for, and
that stored spans name as their parent, is open — see :func:`otel_agentdiag.diagnostics.receipt.judge`
(``unfinished_spans``). A session with such a span is **active**: its run started and has not finished.

A session whose top was never seen to end is never ``finished`` either: when a span of it (other than an
agent run or an entry span, whose caller may be in another process) names a parent stored nowhere in its
trace (:func:`otel_agentdiag.diagnostics.parents.unseen_parents`) and the session lost no rows on purpose
(retention or ``clear`` could have deleted that parent), its stage is ``unfinished``: the run that parent
belongs to never ended (a writer killed mid-run) or was lost, and the rows cannot tell which.

- ``stage``: ``idle`` (nothing stored), ``running`` / ``llm_running`` / ``tool_running`` (active; the last two
  are inferred from the last finished step: an LLM call that asked for tools is followed by a tool call, a
  finished tool call or iteration by the next LLM call), ``unfinished`` (not active, but the top of the
  session's work was never seen to end: see above), ``errored`` (not active, and the newest run ended with
  an error) or ``finished``.
- ``counts``: finished spans by kind, error origins (error spans with no erroring child: one exception that
  propagates from a tool through its iteration and run is one error), and tokens from LLM spans only
  (``agentdiag.kind == "llm"``: the leaves; rollups on other spans would count twice).
- ``stall``: active and silent (no span started or ended) for longer than the threshold, as of ``as_of``
  (an explicit time; without one the last event, so a stall is only ever reported against a given time).
- ``repetition``: the longest run of consecutive tool calls (in start order, other steps ignored) of one tool;
  suspected from :data:`REPETITION_THRESHOLD` calls. Only real names repeat: a call whose name reads ``_OTHER``
  (undeclared or refused) is not known to be the same tool as another, so it breaks a run and starts none.
- ``recovery``: error origins followed by a later successful LLM or tool call are recovered; the rest are not.
- ``cost_usd``: the sum of the LLM leaves' ``agentdiag.cost.usd`` (never a roll-up), None when no leaf has one.
- ``budget``: whether a run of the session passed a limit of its budget (``agentdiag.budget.exceeded``), which
  limits (``agentdiag.budget.limits``, in the order passed, over the runs) and each limit's value as the run's
  ``agentdiag.budget.exceeded`` event gives it.
- ``signals``: ``stall_suspected``, ``repetition_suspected``, ``unrecovered_error``, ``event_loss`` (the
  receipt found gaps or drops), ``integrity_not_valid`` (the receipt is not ``valid``), ``budget_exceeded``, in
  that order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import reason_codes
from otel_agentdiag._internal.jsonsafe import iso_utc
from otel_agentdiag._internal.money import budget_of, leaves_cost
from otel_agentdiag.diagnostics.parents import spans_elsewhere, unseen_parents
from otel_agentdiag.diagnostics.receipt import Receipt, session_receipt
from otel_agentdiag.storage import SpanStore, StoredSpan

__all__ = [
    "DEFAULT_STALL_THRESHOLD_S",
    "REPETITION_THRESHOLD",
    "SIGNALS",
    "STAGES",
    "Status",
    "project",
    "session_status",
]

DEFAULT_STALL_THRESHOLD_S = 300.0
REPETITION_THRESHOLD = 3
STAGES = ("idle", "running", "llm_running", "tool_running", "unfinished", "errored", "finished")
SIGNALS = (
    "stall_suspected",
    "repetition_suspected",
    "unrecovered_error",
    "event_loss",
    "integrity_not_valid",
    "budget_exceeded",
)
AS_OF_ARGUMENT = "argument"
AS_OF_LAST_EVENT = "last_event"

TOOL_FINISH_REASONS = frozenset({"tool_calls", "tool_call", "tool_use", "function_call"})
"""``gen_ai.response.finish_reasons`` values that mean "the model asked for a tool"."""

_LOSS_REASONS = frozenset({reason_codes.SEQUENCE_GAP, reason_codes.BACKPRESSURE_DROP, reason_codes.EXPORT_FAILURE})


@dataclass(frozen=True)
class Status:
    """The run-health projection of one session (see the module docstring)."""

    session: str | None
    stage: str
    active: bool
    counts: dict[str, int]
    last_event_ns: int | None
    as_of_ns: int | None
    as_of_source: str
    stall_suspected: bool
    silent_seconds: float | None
    threshold_seconds: float
    repetition_tool: str | None
    repetition_longest: int
    repetition_suspected: bool
    errors: int
    recovered: int
    unrecovered: int
    signals: list[str]
    receipt: Receipt
    cost_usd: float | None = None
    budget_exceeded: bool = False
    budget_limits: tuple[str, ...] = ()
    budget_thresholds: Mapping[str, float] = field(default_factory=dict)
    """Limit -> its value, from the runs' ``agentdiag.budget.exceeded`` events (a limit without one is absent)."""

    def to_json(self, *, with_receipt: bool = False) -> dict[str, Any]:
        """The documented JSON shape; ``receipt`` only with ``with_receipt``."""
        out: dict[str, Any] = {
            "session": self.session,
            "stage": self.stage,
            "active": self.active,
            "counts": dict(self.counts),
            "last_event_time": iso_utc(self.last_event_ns),
            "as_of": iso_utc(self.as_of_ns),
            "as_of_source": self.as_of_source,
            "stall": {
                "suspected": self.stall_suspected,
                "silent_seconds": self.silent_seconds,
                "threshold_seconds": self.threshold_seconds,
            },
            "repetition": {
                "tool": self.repetition_tool,
                "longest_run": self.repetition_longest,
                "suspected": self.repetition_suspected,
            },
            "recovery": {"errors": self.errors, "recovered": self.recovered, "unrecovered": self.unrecovered},
            "signals": list(self.signals),
            "provenance": self.receipt.provenance,
            "cost_usd": self.cost_usd,
            "budget_exceeded": self.budget_exceeded,
            "budget_limits": list(self.budget_limits),
            "budget_thresholds": dict(self.budget_thresholds),
        }
        if with_receipt:
            out["receipt"] = self.receipt.to_json()
        return out


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _tool_name(span: StoredSpan) -> str:
    name = span.attributes.get(sc.GEN_AI_TOOL_NAME)
    if isinstance(name, str):
        return name
    prefix = sc.OP_EXECUTE_TOOL + " "
    return span.name[len(prefix) :] if span.name.startswith(prefix) else span.name


def _asks_for_tool(span: StoredSpan) -> bool:
    reasons = span.attributes.get(sc.GEN_AI_RESPONSE_FINISH_REASONS)
    if isinstance(reasons, str):
        reasons = [reasons]
    return isinstance(reasons, (list, tuple)) and any(r in TOOL_FINISH_REASONS for r in reasons)


def _end(span: StoredSpan) -> int:
    return span.end_ns if span.end_ns is not None else span.start_ns


def project(
    spans: Sequence[StoredSpan],
    receipt: Receipt,
    *,
    session: str | None,
    as_of_ns: int | None,
    stall_threshold_s: float = DEFAULT_STALL_THRESHOLD_S,
    elsewhere: Mapping[str, frozenset[str]] | None = None,
) -> Status:
    """The status of a session from its stored spans and its receipt. Pure.

    ``elsewhere`` (:func:`~otel_agentdiag.diagnostics.parents.spans_elsewhere`): span ids stored outside the
    session per trace, where a parent the session's spans name may be; None: nowhere.
    """
    if not stall_threshold_s > 0 or stall_threshold_s == float("inf"):
        raise ValueError("stall_threshold_s must be a positive, finite number of seconds")
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.span_id))
    counts = {
        "runs": sum(s.kind == sc.KIND_RUN for s in ordered),
        "iterations": sum(s.kind == sc.KIND_ITERATION for s in ordered),
        "llm_calls": sum(s.kind == sc.KIND_LLM for s in ordered),
        "tool_calls": sum(s.kind == sc.KIND_TOOL for s in ordered),
        "errors": 0,
        "input_tokens": sum(
            _int(s.attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS)) for s in ordered if s.kind == sc.KIND_LLM
        ),
        "output_tokens": sum(
            _int(s.attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)) for s in ordered if s.kind == sc.KIND_LLM
        ),
    }

    # -- errors and recovery ---------------------------------------------------------------------------
    erroring_parents: set[tuple[str, str]] = set()
    for span in ordered:
        if span.status == "error" and span.parent_span_id is not None:
            erroring_parents.add((span.trace_id, span.parent_span_id))
    origins = [s for s in ordered if s.status == "error" and (s.trace_id, s.span_id) not in erroring_parents]
    steps = [s for s in ordered if s.kind in (sc.KIND_LLM, sc.KIND_TOOL) and s.status != "error"]
    recovered = sum(1 for e in origins if any(step.start_ns >= _end(e) for step in steps))
    counts["errors"] = len(origins)

    # -- repetition -------------------------------------------------------------------------------------
    longest, longest_tool, current, current_tool = 0, None, 0, None
    for span in ordered:
        if span.kind != sc.KIND_TOOL:
            continue
        tool = _tool_name(span)
        if tool == sc.OTHER_VALUE:  # a name we do not know: never "the same tool" as another unknown one
            current, current_tool = 0, None
            continue
        current = current + 1 if tool == current_tool else 1
        current_tool = tool
        if current >= longest:  # ties: the most recent run
            longest, longest_tool = current, tool

    # -- activity and stage -----------------------------------------------------------------------------
    runs = [s for s in ordered if s.kind == sc.KIND_RUN]
    exceeded, limits, thresholds = budget_of(runs)
    active = receipt.counts.get("unfinished_spans", 0) > 0 or any(r.end_ns is None for r in runs)
    lost_on_purpose = receipt.counts.get("pruned_spans", 0) > 0 or receipt.counts.get("cleared_spans", 0) > 0
    top_unseen = not active and not lost_on_purpose and unseen_parents(ordered, elsewhere or {}) > 0
    if not ordered:
        stage = "idle"
    elif active:
        stage = _active_stage(ordered)
    elif top_unseen:
        stage = "unfinished"
    else:
        tops = runs or [s for s in ordered if s.parent_span_id is None] or ordered
        stage = "errored" if tops[-1].status == "error" else "finished"

    # -- stall ------------------------------------------------------------------------------------------
    last_event = max((max(s.start_ns, _end(s)) for s in ordered), default=None)
    source = AS_OF_ARGUMENT if as_of_ns is not None else AS_OF_LAST_EVENT
    as_of = as_of_ns if as_of_ns is not None else last_event
    silent: float | None = None
    if as_of is not None and last_event is not None:
        silent = round(max(as_of - last_event, 0) / 1e9, 3)
    stalled = active and silent is not None and silent > stall_threshold_s

    signals = []
    if stalled:
        signals.append("stall_suspected")
    if longest >= REPETITION_THRESHOLD:
        signals.append("repetition_suspected")
    if len(origins) > recovered:
        signals.append("unrecovered_error")
    if _LOSS_REASONS & set(receipt.reasons):
        signals.append("event_loss")
    if receipt.status != "valid":
        signals.append("integrity_not_valid")
    if exceeded:
        signals.append("budget_exceeded")
    return Status(
        session=session,
        stage=stage,
        active=active,
        counts=counts,
        last_event_ns=last_event,
        as_of_ns=as_of,
        as_of_source=source,
        stall_suspected=stalled,
        silent_seconds=silent,
        threshold_seconds=float(stall_threshold_s),
        repetition_tool=longest_tool,
        repetition_longest=longest,
        repetition_suspected=longest >= REPETITION_THRESHOLD,
        errors=len(origins),
        recovered=recovered,
        unrecovered=len(origins) - recovered,
        signals=signals,
        receipt=receipt,
        cost_usd=leaves_cost(ordered),
        budget_exceeded=exceeded,
        budget_limits=limits,
        budget_thresholds=thresholds,
    )


def _active_stage(ordered: Sequence[StoredSpan]) -> str:
    """The stage of an active session, inferred from its last finished step."""
    steps = [s for s in ordered if s.kind in (sc.KIND_LLM, sc.KIND_TOOL, sc.KIND_ITERATION)]
    if not steps:
        return "running"
    last = max(steps, key=lambda s: (_end(s), s.start_ns))
    if last.kind == sc.KIND_LLM:
        return "tool_running" if _asks_for_tool(last) else "running"
    return "llm_running"


def session_status(
    store: SpanStore,
    session: str | None,
    *,
    as_of_ns: int | None,
    stall_threshold_s: float = DEFAULT_STALL_THRESHOLD_S,
) -> Status:
    """The status of one session (its digest; ``None`` = spans outside any session). Reads only."""
    receipt = session_receipt(store, session)
    spans = store.session_spans(session)
    # A write between the two reads can make them disagree; read once more then (the receipt is the judge).
    if len(spans) != receipt.counts["spans"]:
        receipt = session_receipt(store, session)
        spans = store.session_spans(session)
    elsewhere = spans_elsewhere(store, session, spans)
    return project(
        spans, receipt, session=session, as_of_ns=as_of_ns, stall_threshold_s=stall_threshold_s, elsewhere=elsewhere
    )
