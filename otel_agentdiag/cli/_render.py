"""Render stored traces as a tree (text) or as the documented JSON contract.

Every stored string shown as text goes through :func:`~otel_agentdiag.cli._common.printable` (content through
:func:`_compact`): a span name, attribute or captured value cannot carry terminal escapes, C1 controls or bidi
overrides to the screen."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import click

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.money import budget_of, format_usd, leaves_cost
from otel_agentdiag._internal.why_other import OTHER_REFUSED, OTHER_UNDECLARED, other_reason
from otel_agentdiag.cli._common import can_encode, duration_ms, human_duration, iso_utc, printable
from otel_agentdiag.storage.rows import StoredSpan, TraceSummary


def trace_summary_json(summary: TraceSummary) -> dict[str, Any]:
    return {
        "trace_id": summary.trace_id,
        "name": summary.name,
        "start_time": iso_utc(summary.start_ns),
        "duration_ms": duration_ms(summary.duration_ns),
        "status": summary.status,
        "span_count": summary.span_count,
        "session": summary.session,
        "error_count": summary.error_count,
        "cost_usd": summary.cost_usd,
        "budget_exceeded": summary.budget_exceeded,
    }


def span_json(span: StoredSpan) -> dict[str, Any]:
    out = {
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "name": span.name,
        "kind": span.kind,
        "start_time": iso_utc(span.start_ns),
        "end_time": iso_utc(span.end_ns),
        "duration_ms": duration_ms(span.duration_ns),
        "status": span.status,
        "attributes": span.attributes,
        "events": [{"name": e.get("name"), "attributes": e.get("attributes", {})} for e in span.events],
    }
    if span.corrupt:
        out["corrupt"] = True  # a stored column could not be decoded; what could be read is shown
    if span.imported:
        out["imported"] = True  # from `agentdiag ingest`, not observed here (its session is imported:<digest>)
    return out


def trace_json(
    trace_id: str, spans: list[StoredSpan], content: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The ``show --format json`` contract; with ``content`` (``show --content``), each span that has captured
    content gets ``"content": {role: projection}``, unfolded."""
    out = []
    for span in spans:
        entry = span_json(span)
        if content is not None and span.span_id in content:
            entry["content"] = content[span.span_id]
        out.append(entry)
    exceeded, limits, _thresholds = budget_of([s for s in spans if s.kind == sc.KIND_RUN])
    return {
        "trace_id": trace_id,
        "spans": out,
        "cost_usd": leaves_cost(spans),
        "budget_exceeded": exceeded,
        "budget_limits": list(limits),
    }


# -- captured content (show --content) ------------------------------------------------------------------------
FOLD_STRING = 160
"""Characters of a string shown before it is folded."""
FOLD_ITEMS = 12
"""Items of a list or object shown before the rest are folded."""
FOLD_LINES = 40
"""Lines of one value shown before the rest are folded."""


def _fold(value: Any) -> Any:
    """``value`` (a JSON projection) with long strings and long containers cut, each cut saying how much."""
    if isinstance(value, str):
        if len(value) > FOLD_STRING:
            return f"{value[:FOLD_STRING]}… (+{len(value) - FOLD_STRING} chars)"
        return value
    if isinstance(value, list):
        kept = [_fold(v) for v in value[:FOLD_ITEMS]]
        if len(value) > FOLD_ITEMS:
            kept.append(f"… (+{len(value) - FOLD_ITEMS} items)")
        return kept
    if isinstance(value, dict):
        items = list(value.items())
        folded = {k: _fold(v) for k, v in items[:FOLD_ITEMS]}
        if len(items) > FOLD_ITEMS:
            folded["…"] = f"+{len(items) - FOLD_ITEMS} keys"
        return folded
    return value


def _compact(value: Any) -> str:
    """Compact JSON of a content value, every character a terminal would act on or hide escaped (JSON escapes
    C0 controls itself; :func:`printable` takes the C1 controls, bidi, format and tag characters)."""
    return printable(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")))


CONTENT_WIDTH = 100
"""A value whose compact JSON is at most this long is shown on its role's line; a longer list or object shows
one item or key per line."""


def content_lines(content: dict[str, Any]) -> list[str]:
    """Lines showing one span's content (``{role: projection}``), folded: a short value on its role's line, a
    list one item a line (``- item``), an object one key a line."""
    lines: list[str] = []
    for role, value in content.items():
        folded = _fold(value)
        label = click.style(printable(role.removeprefix("gen_ai.")), fg="cyan")
        text = _compact(folded)
        if len(text) <= CONTENT_WIDTH or not isinstance(folded, (list, dict)) or not folded:
            lines.append(f"{label}: {text}")
            continue
        lines.append(f"{label}:")
        if isinstance(folded, list):
            body = [f"  - {_compact(item)}" for item in folded]
        else:
            body = [f"  {_compact(key)}: {_compact(item)}" for key, item in folded.items()]
        if len(body) > FOLD_LINES:
            body = [*body[:FOLD_LINES], f"  … (+{len(body) - FOLD_LINES} lines)"]
        lines.extend(body)
    return lines


class _Glyphs:
    def __init__(self) -> None:
        fancy = can_encode("✓✗…├└│─")
        self.ok, self.error, self.open = ("✓", "✗", "…") if fancy else ("+", "x", "?")
        self.branch, self.last, self.pipe = ("├─ ", "└─ ", "│  ") if fancy else ("|- ", "`- ", "|  ")


def _short(value: object) -> str:
    """Digests are long; show algorithm, key id and 8 hex digits. Whatever else is shown escaped (printable)."""
    text = printable(value)
    if text.startswith("hmac-sha256:") and text.count(":") == 2:
        return text[: text.rindex(":") + 9] + "…"
    return text


def _details(span: StoredSpan) -> list[str]:
    a = span.attributes
    out: list[str] = []
    if span.kind in (sc.KIND_RUN, sc.KIND_ITERATION):
        if span.kind == sc.KIND_RUN:
            if sc.GEN_AI_CONVERSATION_ID in a:
                out.append(f"conversation={_short(a[sc.GEN_AI_CONVERSATION_ID])}")
            if sc.USER_ID in a:
                out.append(f"user={_short(a[sc.USER_ID])}")
        # Roll-ups of the LLM spans below (agentdiag.usage.*), labelled "total" to tell them from a leaf's own.
        totals = [
            f"{label} {printable(a[sc.AGENTDIAG_USAGE_PREFIX + key])}"
            for label, key in (("in", "input_tokens"), ("out", "output_tokens"))
            if sc.AGENTDIAG_USAGE_PREFIX + key in a
        ]
        if totals:
            out.append("total " + "/".join(totals))
        if sc.AGENTDIAG_USAGE_COST_USD in a:
            out.append(f"total cost {format_usd(a[sc.AGENTDIAG_USAGE_COST_USD])}")
        if span.kind == sc.KIND_RUN and a.get(sc.AGENTDIAG_BUDGET_EXCEEDED) is True:
            _exceeded, limits, _thresholds = budget_of([span])
            named = f": {', '.join(limits)}" if limits else ""
            out.append(click.style(f"budget exceeded{named}", fg="red", bold=True))
        if sc.AGENTDIAG_STOP_REASON in a:
            out.append(f"stop={printable(a[sc.AGENTDIAG_STOP_REASON])}")
    elif span.kind == sc.KIND_LLM:
        if sc.GEN_AI_PROVIDER_NAME in a:
            out.append(printable(a[sc.GEN_AI_PROVIDER_NAME]))
        tokens = [
            f"{label} {printable(a[key])}"
            for label, key in (("in", sc.GEN_AI_USAGE_INPUT_TOKENS), ("out", sc.GEN_AI_USAGE_OUTPUT_TOKENS))
            if key in a
        ]
        if tokens:
            out.append("tokens " + "/".join(tokens))
        if sc.AGENTDIAG_COST_USD in a:
            out.append(f"cost {format_usd(a[sc.AGENTDIAG_COST_USD])}")
        reasons = a.get(sc.GEN_AI_RESPONSE_FINISH_REASONS)
        if reasons:
            out.append("finish=" + ",".join(printable(r) for r in reasons))
    elif span.kind == sc.KIND_TOOL:
        if sc.GEN_AI_TOOL_CALL_ID in a:
            out.append(f"call={_short(a[sc.GEN_AI_TOOL_CALL_ID])}")
    if sc.ERROR_TYPE in a:
        out.append(f"error={printable(a[sc.ERROR_TYPE])}")
    if span.kind != sc.KIND_ITERATION:
        why = other_reason(a, span.name)
        if why == OTHER_UNDECLARED:
            out.append("_OTHER=undeclared name")
        elif why == OTHER_REFUSED:
            out.append("_OTHER=unsafe name")
    redacted = sum(
        v
        for k, v in a.items()
        if k.startswith(sc.AGENTDIAG_REDACTION_PREFIX)
        and k != sc.AGENTDIAG_REDACTION_PREFIX + "hashed"
        and isinstance(v, int)
    )
    if redacted:
        out.append(f"redacted={redacted}")
    if span.corrupt:
        out.append("CORRUPT ROW")
    if span.imported:
        out.append("IMPORTED")
    return out


def render_tree(trace_id: str, spans: list[StoredSpan], content: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """Lines of the tree: status mark, name, duration, key attributes; nested by parent. With ``content``
    (``show --content``), each span's captured content is shown under it, folded."""
    glyphs = _Glyphs()
    ids = {s.span_id for s in spans}
    children: dict[str | None, list[StoredSpan]] = defaultdict(list)
    for span in spans:
        parent = span.parent_span_id if span.parent_span_id in ids else None
        children[parent].append(span)

    start = min((s.start_ns for s in spans), default=0)
    end = max((s.end_ns or s.start_ns for s in spans), default=0)
    errors = sum(1 for s in spans if s.status == "error")
    header = f"trace {printable(trace_id)}  {len(spans)} spans  {human_duration(end - start)}"
    if errors:
        header += f"  {errors} error{'s' if errors != 1 else ''}"
    cost = leaves_cost(spans)
    if cost is not None:
        header += f"  {format_usd(cost)}"
    lines = [click.style(header, bold=True)]

    def mark(span: StoredSpan) -> str:
        if span.end_ns is None:
            return click.style(glyphs.open, fg="yellow")
        if span.status == "error":
            return click.style(glyphs.error, fg="red")
        return click.style(glyphs.ok, fg="green")

    def walk(span: StoredSpan, prefix: str, connector: str, child_prefix: str) -> None:
        name = printable(span.name)
        if span.kind == sc.KIND_ITERATION and sc.AGENTDIAG_ITERATION_INDEX in span.attributes:
            name = f"{name} #{printable(span.attributes[sc.AGENTDIAG_ITERATION_INDEX])}"
        parts = [f"{prefix}{connector}{mark(span)} {click.style(name, bold=span.kind == sc.KIND_RUN)}"]
        parts.append(click.style(human_duration(span.duration_ns), dim=True))
        parts.extend(_details(span))
        lines.append("  ".join(parts))
        kids = children.get(span.span_id, [])
        if content is not None and span.span_id in content:
            gutter = prefix + child_prefix + (glyphs.pipe if kids else "   ") + "  "
            lines.extend(click.style(gutter, dim=True) + line for line in content_lines(content[span.span_id]))
        for i, kid in enumerate(kids):
            last = i == len(kids) - 1
            walk(kid, prefix + child_prefix, glyphs.last if last else glyphs.branch, glyphs.pipe if not last else "   ")

    for root in children.get(None, []):
        walk(root, "", "", "")
    return lines


def render_traces_table(summaries: list[TraceSummary]) -> list[str]:
    glyphs = _Glyphs()
    lines = [
        click.style(f"{'TRACE':<32}  {'START (UTC)':<19}  {'DURATION':>10}  {'SPANS':>5}  {'COST':>9}  NAME", bold=True)
    ]
    for s in summaries:
        start = (iso_utc(s.start_ns) or "")[:19].replace("T", " ")
        mark = click.style(glyphs.error, fg="red") if s.status == "error" else click.style(glyphs.ok, fg="green")
        errors = f"  ({s.error_count} error{'s' if s.error_count != 1 else ''})" if s.error_count else ""
        duration = human_duration(s.duration_ns)
        name = printable(s.name)
        cost = format_usd(s.cost_usd)
        budget = click.style("  (budget exceeded)", fg="red") if s.budget_exceeded else ""
        lines.append(
            f"{printable(s.trace_id)}  {start:<19}  {duration:>10}  {s.span_count:>5}  {cost:>9}  {mark} {name}{errors}"
            f"{budget}"
        )
    return lines
