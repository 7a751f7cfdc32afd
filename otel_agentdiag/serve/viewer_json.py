"""The viewer's JSON shapes: runs, conversations and one run's spans (as a tree in display order), built purely.

Times inside a run are offsets in nanoseconds from the run's earliest start (a JavaScript number holds them
exactly; an epoch time in nanoseconds it does not), beside ISO-8601 UTC start times.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.jsonsafe import finite, iso_utc
from otel_agentdiag._internal.money import amount, budget_of, cost_value, leaves_cost
from otel_agentdiag._internal.why_other import other_reason
from otel_agentdiag.storage.rows import ConversationSummary, RunSummary, StoredContent, StoredSpan

__all__ = [
    "ViewSpan",
    "content_by_span",
    "conversation_json",
    "from_readable",
    "from_stored",
    "run_cost",
    "run_json",
    "spans_json",
]

_STATUS = {StatusCode.OK: "ok", StatusCode.ERROR: "error", StatusCode.UNSET: "unset"}
_OWN_USAGE = sc.GEN_AI_USAGE_PREFIX
_ROLLUP_USAGE = sc.AGENTDIAG_USAGE_PREFIX


@dataclass(frozen=True, slots=True)
class ViewSpan:
    """One span as the viewer shows it, whichever way it was read (a stored row for a loopback client, a span
    of the strict projection for any other)."""

    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    span_kind: str
    start_ns: int
    end_ns: int | None
    status: str
    attributes: Mapping[str, Any]
    events: Sequence[Mapping[str, Any]]
    corrupt: bool = False
    imported: bool = False


def from_stored(span: StoredSpan) -> ViewSpan:
    """A stored row, as stored (a loopback client's view)."""
    return ViewSpan(
        span_id=span.span_id,
        parent_span_id=span.parent_span_id,
        name=span.name,
        kind=span.kind,
        span_kind=span.span_kind,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        status=span.status,
        attributes=span.attributes,
        events=span.events,
        corrupt=span.corrupt,
        imported=span.imported,
    )


def from_readable(span: ReadableSpan) -> ViewSpan:
    """A span of the strict projection (what any client that is not loopback sees)."""
    attributes = dict(span.attributes or {})
    parent = span.parent
    context = span.get_span_context()
    kind = attributes.get(sc.AGENTDIAG_KIND)
    return ViewSpan(
        span_id=f"{context.span_id:016x}" if context is not None else "",
        parent_span_id=f"{parent.span_id:016x}" if parent is not None else None,
        name=span.name,
        kind=kind if isinstance(kind, str) else sc.KIND_OTHER,
        span_kind=span.kind.name.lower(),
        start_ns=int(span.start_time or 0),
        end_ns=span.end_time,
        status=_STATUS.get(span.status.status_code, "unset"),
        attributes=attributes,
        events=[{"name": e.name, "time_ns": e.timestamp, "attributes": dict(e.attributes or {})} for e in span.events],
    )


def _duration_ns(start: int, end: int | None) -> int | None:
    return None if end is None else max(end - start, 0)


def run_json(run: RunSummary, receipt: str | None) -> dict[str, Any]:
    """One row of the runs list; ``receipt``: its session's verdict, None when the list cannot tell it."""
    return {
        "trace_id": run.trace_id,
        "name": run.name,
        "agent": run.agent,
        "service": run.service,
        "session": run.session,
        "start_time": iso_utc(run.start_ns),
        "duration_ns": run.duration_ns,
        "status": run.status,
        "stop_reason": run.stop_reason,
        "iterations": run.iterations,
        "llm_calls": run.llm_calls,
        "tool_calls": run.tool_calls,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "span_count": run.span_count,
        "error_count": run.error_count,
        "has_errors": run.error_count > 0,
        "receipt": receipt,
        "cost_usd": run.cost_usd,
        "budget_exceeded": run.budget_exceeded,
    }


def conversation_json(conversation: ConversationSummary) -> dict[str, Any]:
    """One row of the conversations list: a conversation digest with totals over its runs."""
    return {
        "conversation": conversation.session,
        "first_start_time": iso_utc(conversation.first_start_ns),
        "last_activity_time": iso_utc(conversation.last_activity_ns),
        "span_count": conversation.span_count,
        "trace_count": conversation.trace_count,
        "run_count": conversation.run_count,
        "failed_runs": conversation.failed_runs,
        "error_count": conversation.error_count,
        "llm_calls": conversation.llm_calls,
        "tool_calls": conversation.tool_calls,
        "input_tokens": conversation.input_tokens,
        "output_tokens": conversation.output_tokens,
        "cost_usd": conversation.cost_usd,
        "budget_exceeded_runs": conversation.budget_exceeded_runs,
    }


def content_by_span(stored: Iterable[StoredContent]) -> dict[str, list[dict[str, Any]]]:
    """span id -> its captured values ``[{"role", "value"}]`` in capture order, each the JSON projection of the
    authoritative lossless form (``{"$unreadable": true}`` when that does not decode)."""
    from otel_agentdiag.content import ENCODING, ContentDecodeError, decode, project

    out: dict[str, list[dict[str, Any]]] = {}
    for item in stored:
        try:
            if item.encoding != ENCODING:
                raise ContentDecodeError("unknown content encoding")
            value: Any = project(decode(item.lossless))
        except ContentDecodeError:
            value = {"$unreadable": True}
        out.setdefault(item.span_id, []).append({"role": item.role, "value": value})
    return out


_COST_KEYS = frozenset({sc.AGENTDIAG_USAGE_COST_USD})
"""Keys under a usage prefix that are money, not tokens: shown as ``cost``, never among the token counts."""


def _usage(attributes: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The token counts under ``prefix`` (the prefix cut off), never a cost (the run's cost roll-up,
    ``agentdiag.usage.cost.usd``, shares the roll-up prefix: it is the span's ``cost``)."""
    return {
        key[len(prefix) :]: value
        for key, value in attributes.items()
        if key.startswith(prefix) and key not in _COST_KEYS
    }


def _model(attributes: Mapping[str, Any]) -> Any:
    return attributes.get(sc.GEN_AI_RESPONSE_MODEL) or attributes.get(sc.GEN_AI_REQUEST_MODEL)


def _iteration_index(attributes: Mapping[str, Any]) -> int | None:
    value = attributes.get(sc.AGENTDIAG_ITERATION_INDEX)
    return value if type(value) is int else None


def _event_json(event: Mapping[str, Any], origin: int) -> dict[str, Any]:
    time_ns = event.get("time_ns")
    return {
        "name": event.get("name"),
        "offset_ns": time_ns - origin if isinstance(time_ns, int) else None,
        "attributes": dict(event.get("attributes") or {}),
    }


def _span_json(span: ViewSpan, depth: int, origin: int, children: int) -> dict[str, Any]:
    attributes = span.attributes
    events = [_event_json(e, origin) for e in span.events]
    out: dict[str, Any] = {
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "depth": depth,
        "children": children,
        "name": span.name,
        "kind": span.kind,
        "span_kind": span.span_kind,
        "start_time": iso_utc(span.start_ns),
        "offset_ns": span.start_ns - origin,
        "duration_ns": _duration_ns(span.start_ns, span.end_ns),
        "status": span.status,
        "error_type": attributes.get(sc.ERROR_TYPE),
        # Why a name reads _OTHER (never the name): None when none does, or nothing says why.
        "name_note": other_reason(attributes, span.name) if span.kind != sc.KIND_ITERATION else None,
        "model": _model(attributes),
        # An iteration's index as recorded (0-based), None on other spans or when it has none.
        "iteration": _iteration_index(attributes) if span.kind == sc.KIND_ITERATION else None,
        "tokens": {"own": _usage(attributes, _OWN_USAGE), "rollup": _usage(attributes, _ROLLUP_USAGE)},
        # A leaf's own cost (an LLM call) and a run's or iteration's roll-up; None when there is none.
        "cost": {
            "own": cost_value(attributes.get(sc.AGENTDIAG_COST_USD)) if span.kind == sc.KIND_LLM else None,
            "rollup": amount(attributes.get(sc.AGENTDIAG_USAGE_COST_USD)),
        },
        "stream_end": attributes.get(sc.AGENTDIAG_STREAM_END),
        "http_attempts": [e for e in events if e["name"] == sc.AGENTDIAG_HTTP_ATTEMPT_EVENT],
        "events": [e for e in events if e["name"] != sc.AGENTDIAG_HTTP_ATTEMPT_EVENT],
        "attributes": dict(attributes),
    }
    if span.kind == sc.KIND_RUN:
        exceeded, limits, thresholds = budget_of([span])
        out["budget"] = {"exceeded": exceeded, "limits": list(limits), "thresholds": thresholds}
    if span.corrupt:
        out["corrupt"] = True
    if span.imported:
        out["imported"] = True
    return out


def run_cost(spans: Sequence[ViewSpan]) -> dict[str, Any]:
    """A run's ``cost_usd`` (its LLM leaves' cost summed, never a roll-up; None when no leaf has one),
    ``budget_exceeded`` and ``budget_limits`` (over its run spans)."""
    exceeded, limits, _thresholds = budget_of([s for s in spans if s.kind == sc.KIND_RUN])
    return {"cost_usd": leaves_cost(spans), "budget_exceeded": exceeded, "budget_limits": list(limits)}


def spans_json(spans: Sequence[ViewSpan], content: Mapping[str, list[dict[str, Any]]] | None) -> dict[str, Any]:
    """The spans of one run in display order (depth first, children by start time), each with its ``depth``;
    a span whose parent is not in the run is shown at the top. ``content``: captured values by span id (only for
    a loopback client of a store that has them)."""
    origin = min((s.start_ns for s in spans), default=0)
    end = max((s.end_ns if s.end_ns is not None else s.start_ns for s in spans), default=origin)
    ids = {s.span_id for s in spans}
    children: dict[str | None, list[ViewSpan]] = {}
    for span in spans:
        parent = span.parent_span_id if span.parent_span_id in ids and span.parent_span_id != span.span_id else None
        children.setdefault(parent, []).append(span)
    for group in children.values():
        group.sort(key=lambda s: (s.start_ns, s.span_id))
    ordered: list[dict[str, Any]] = []
    seen: set[str] = set()
    stack: list[tuple[ViewSpan, int]] = [(s, 0) for s in reversed(children.get(None, []))]
    while stack:
        span, depth = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        below = children.get(span.span_id, [])
        entry = _span_json(span, depth, origin, len(below))
        if content is not None and span.span_id in content:
            entry["content"] = content[span.span_id]
        ordered.append(entry)
        stack.extend((child, depth + 1) for child in reversed(below))
    # Spans in a parent cycle (no root above them): shown at the top, never lost.
    for span in sorted((s for s in spans if s.span_id not in seen), key=lambda s: (s.start_ns, s.span_id)):
        ordered.append(_span_json(span, 0, origin, 0))
    return {"start_time": iso_utc(origin) if spans else None, "duration_ns": end - origin, "spans": finite(ordered)}


def dumps(value: Any) -> bytes:
    """Strict JSON bytes (non-finite floats as their text)."""
    return json.dumps(finite(value), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
