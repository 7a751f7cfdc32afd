"""``agentdiag sessions``, ``receipt``, ``status``, ``prune`` and ``clear``: the health of stored sessions.

Readers open the store with ``create=False`` and never write to it; ``prune`` and ``clear`` are the only
commands here that delete, and both rewrite the file afterwards so that nothing deleted is left in it (exit 1
when another process keeps that from happening). Arguments are checked before the store is opened, so a bad
``--as-of`` is reported the same way whether or not the store exists.
"""

from __future__ import annotations

import math
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from otel_agentdiag._internal.money import describe_limit, format_usd
from otel_agentdiag.cli._common import (
    CliError,
    CliIncomplete,
    describe_input,
    format_option,
    iso_utc,
    json_text,
    open_store,
    printable,
    resolve_store_path,
    store_option,
)
from otel_agentdiag.cli._duration import Duration, format_duration
from otel_agentdiag.cli._sessions import _short, resolve_session
from otel_agentdiag.diagnostics.receipt import Receipt, nothing_to_judge, session_receipt, store_overview, store_receipt
from otel_agentdiag.diagnostics.status import (
    DEFAULT_STALL_THRESHOLD_S,
    REPETITION_THRESHOLD,
    Status,
    session_status,
)
from otel_agentdiag.diagnostics.verdict import NO_OBSERVATIONS
from otel_agentdiag.storage import RetentionLimits, ScrubIncomplete, SpanStore, StoreError
from otel_agentdiag.storage.provenance import (
    provenance_of,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


# -- argument parsing -----------------------------------------------------------------------------------------
def parse_as_of(text: str) -> int:
    """An ISO-8601 time with a timezone (``Z`` or ``±HH:MM``) as nanoseconds since the epoch.

    Raises ``ValueError`` (one line) for an empty, malformed or timezone-free value.
    """
    raw = text.strip()
    if not raw:
        raise ValueError("an empty time; give an ISO-8601 time with a timezone, e.g. 2025-01-31T12:00:00Z")
    if raw[-1] in "zZ":
        raw = raw[:-1] + "+00:00"  # Python 3.10's fromisoformat does not read "Z"
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(f"{describe_input(text)} is not an ISO-8601 time (e.g. 2025-01-31T12:00:00Z)") from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{describe_input(text)} is a time without a timezone; add one, e.g. Z or +02:00")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _as_of_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_as_of(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def _threshold_option(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"{describe_input(value)} is not a positive number of seconds", ctx=ctx, param=param)
    return value


def _limit_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | float | None:
    """A retention limit in spans or bytes: a positive integer, or ``none`` to switch the limit off."""
    if value is None:
        return None
    if value.strip().lower() == "none":
        return math.inf
    try:
        number = int(value)
    except ValueError:
        raise click.BadParameter(
            f"{describe_input(value)} is not a positive number or 'none'", ctx=ctx, param=param
        ) from None
    if number <= 0:
        raise click.BadParameter(f"{describe_input(value)} is not a positive number or 'none'", ctx=ctx, param=param)
    return number


# -- rendering --------------------------------------------------------------------------------------------------
_COLOURS = {"valid": "green", "imported": "cyan", "degraded": "yellow", "quarantined": "magenta", "invalid": "red"}


def _receipt_lines(receipt: Receipt, *, title: str) -> list[str]:
    c = receipt.counts
    colour = _COLOURS.get(receipt.status, "red")
    lines = [
        f"{title}: {click.style(receipt.status, fg=colour, bold=True)}",
        f"  reasons: {_reasons_text(receipt.reasons)}",
        f"  spans stored {c['spans']}  (ledger: stored {c['stored']}, pruned {c['pruned_spans']},"
        f" cleared {c['cleared_spans']})",
        f"  observed {c['observed']} = accepted {c['accepted']} + rejected {c['rejected']} + dropped {c['dropped']}",
        f"  dropped: queue_full {c['dropped_queue_full']}, export_failure {c['dropped_export_failure']},"
        f" shutdown {c['dropped_shutdown']}, cleared {c['dropped_cleared']}",
        f"  sequence gaps {c['sequence_gaps']}, duplicates {c['duplicate_sequences']},"
        f" unfinished spans {c['unfinished_spans']}",
        f"  redactor errors {c['rejected_redactor_error']}, public-safety removals {c['public_safety_violations']},"
        f" malformed rows {c['malformed_rows']}",
        f"  observers: {printable(', '.join(receipt.observers)) if receipt.observers else 'none'}",
        f"  provenance: {receipt.provenance}",
    ]
    if receipt.status == "invalid" and set(receipt.reasons) <= {NO_OBSERVATIONS}:
        why = nothing_to_judge(receipt)
        if why is not None:
            lines.insert(1, f"  (nothing to judge: {_NOT_JUDGED[why]}; the store's receipt leaves it out)")
        else:
            lines.insert(1, "  (nothing to judge)" if c["spans"] == 0 else "  (malformed rows)")
    if receipt.unattributed_drops:
        n = sum(receipt.unattributed_drops.values())
        lines.append(
            f"  unattributed drops: {n} span(s) of its observer(s) were counted under no session (the pipeline's"
            " table of per-session drop counts was full); some may be this session's: the reasons say so"
        )
    if receipt.not_judged:
        lines.append(
            f"  not judged: {len(receipt.not_judged)} session(s) with nothing left to judge (cleared or pruned);"
            " agentdiag sessions lists them as invalid"
        )
    return lines


def _reasons_text(reasons: list[str]) -> str:
    if not reasons:
        return "none"
    if reasons == [NO_OBSERVATIONS]:
        return f"{NO_OBSERVATIONS} (nothing was recorded here: nothing is wrong, and nothing can be vouched for)"
    return printable(", ".join(reasons))


_NOT_JUDGED = {
    "cleared": "every span of it was cleared on request",
    "pruned": "every span of it was pruned by retention",
    "empty": "no span of it is stored",
}
"""Why a session has nothing to judge (:func:`~otel_agentdiag.diagnostics.verdict.nothing_to_judge`), in words."""


def _status_lines(status: Status) -> list[str]:
    c = status.counts
    active = "active" if status.active else "not active"
    as_of = f"{iso_utc(status.as_of_ns)} ({'given' if status.as_of_source == 'argument' else 'last event'})"
    if status.stall_suspected:
        stall = f"SUSPECTED: silent {status.silent_seconds} s, over the {status.threshold_seconds:g} s threshold"
    else:
        stall = f"no (silent {status.silent_seconds} s, threshold {status.threshold_seconds:g} s)"
    if status.repetition_tool is None:
        repetition = "no tool calls" if not c.get("tool_calls") else "none (no tool call has a declared name)"
    else:
        flag = "SUSPECTED" if status.repetition_suspected else "no"
        repetition = f"{flag}: longest run {status.repetition_longest} x {printable(status.repetition_tool)}"
        repetition += f" (suspected from {REPETITION_THRESHOLD})"
    lines = [
        f"session {printable(status.session) if status.session is not None else '(no session)'}",
        f"  stage: {click.style(printable(status.stage), bold=True)} ({active})",
        f"  runs {c['runs']}, iterations {c['iterations']}, LLM calls {c['llm_calls']}, tool calls {c['tool_calls']},"
        f" errors {c['errors']}, tokens in {c['input_tokens']} / out {c['output_tokens']},"
        f" cost {format_usd(status.cost_usd, unknown='unknown')}",
        f"  last event: {iso_utc(status.last_event_ns) or 'none'}; as of {as_of}",
        f"  stall: {stall}",
        f"  repetition: {repetition}",
        f"  recovery: {status.errors} errors, {status.recovered} recovered, {status.unrecovered} unrecovered",
        f"  signals: {printable(', '.join(status.signals)) if status.signals else 'none'}",
    ]
    if status.budget_exceeded:
        passed = [describe_limit(limit, status.budget_thresholds) for limit in status.budget_limits]
        why = f": {', '.join(passed)}" if passed else ""
        lines.insert(3, "  budget: " + click.style("EXCEEDED", fg="red", bold=True) + why)
    return lines


# -- commands ---------------------------------------------------------------------------------------------------
@click.command()
@store_option
@format_option
@click.option("--limit", type=click.IntRange(min=1), default=None, help="List at most this many sessions.")
@click.option(
    "--since",
    "since_s",
    type=Duration(example="24h"),
    default=None,
    help="Only sessions active within this long before now (30d, 12h, 90m, 45s, 500ms, or seconds).",
)
def sessions(store_path: Path | None, output_format: str, limit: int | None, since_s: float | None) -> None:
    """List sessions, newest activity first, with their receipt status."""
    since_ns = None if since_s is None else time.time_ns() - int(since_s * 1_000_000_000)
    with open_store(store_path) as store:
        # Rows and receipts of one reading, the one the store receipt combines; with --limit/--since only the
        # sessions listed are read and judged.
        overview = store_overview(store, limit=limit, since_ns=since_ns)
    rows: list[dict[str, Any]] = []
    unjudged: list[str | None] = []
    for s, receipt in overview.sessions:
        if s is None:
            continue  # known only from the ledger or a violation: not a session with rows or bookkeeping
        unjudged.append(nothing_to_judge(receipt))
        rows.append(
            {
                "session": s.session,
                "span_count": s.span_count,
                "bytes": s.bytes,
                "first_start_time": iso_utc(s.first_start_ns),
                "last_activity_time": iso_utc(s.last_activity_ns),
                "trace_ids": list(s.trace_ids),
                "cleared_at": iso_utc(s.cleared_at_ns),
                "generation": s.generation,
                "pruned_spans": s.pruned_spans,
                "receipt_status": receipt.status,
                "provenance": provenance_of(s.session),
            }
        )
    if output_format == "json":
        click.echo(json_text(rows))
        return
    if not rows:
        click.echo(f"no sessions in {store.path}")
        return
    header = f"{'SESSION':<34}  {'SPANS':>6}  {'TRACES':>6}  {'LAST ACTIVITY (UTC)':<19}  RECEIPT"
    click.echo(click.style(header, bold=True))
    for row, why in zip(rows, unjudged, strict=True):
        last = (row["last_activity_time"] or "")[:19].replace("T", " ")
        verdict = row["receipt_status"] if why is None else f"{row['receipt_status']} (nothing to judge: {why})"
        click.echo(
            f"{printable(_short(row['session'])):<34}  {row['span_count']:>6}  {len(row['trace_ids']):>6}  {last:<19}"
            f"  {verdict}"
        )


@click.command()
@click.option("--session", "session_text", default=None, help="A session digest, unique prefix, or raw id.")
@store_option
@format_option
def receipt(session_text: str | None, store_path: Path | None, output_format: str) -> None:
    """Print the integrity receipt of a session, or of the whole store."""
    with open_store(store_path) as store:
        if session_text is None:
            result = store_receipt(store)
            title = f"receipt for the store {store.path}"
        else:
            session = resolve_session(store, session_text, resolve_store_path(store_path))
            result = session_receipt(store, session)
            title = f"receipt for session {printable(session)}"
    if output_format == "json":
        click.echo(json_text(result.to_json()))
        return
    for line in _receipt_lines(result, title=title):
        click.echo(line)


@click.command()
@click.option("--session", "session_text", default=None, help="A session digest, unique prefix, or raw id.")
@click.option(
    "--as-of",
    "as_of_ns",
    default=None,
    callback=_as_of_option,
    help="Judge a stall as of this ISO-8601 time with a timezone [default: the session's last event].",
)
@click.option(
    "--stall-threshold",
    type=Duration(example="10m"),
    default=format_duration(DEFAULT_STALL_THRESHOLD_S),
    show_default=True,
    callback=_threshold_option,
    help="Silence (30d, 12h, 90m, 45s, 500ms, or seconds) after which an active session is a suspected stall.",
)
@click.option("--with-receipt", is_flag=True, help="Include the session's integrity receipt.")
@store_option
@format_option
def status(
    session_text: str | None,
    as_of_ns: int | None,
    stall_threshold: float,
    with_receipt: bool,
    store_path: Path | None,
    output_format: str,
) -> None:
    """Project a session's run health: stage, counts, stall, repetition, recovery, signals.

    Without --session: the session with the newest activity.
    """
    with open_store(store_path) as store:
        if session_text is not None:
            session: str | None = resolve_session(store, session_text, resolve_store_path(store_path))
        else:
            session = store.latest_session()  # the first named session `agentdiag sessions` lists
        result = session_status(store, session, as_of_ns=as_of_ns, stall_threshold_s=stall_threshold)
    if output_format == "json":
        click.echo(json_text(result.to_json(with_receipt=with_receipt)))
        return
    for line in _status_lines(result):
        click.echo(line)
    if with_receipt:
        for line in _receipt_lines(result.receipt, title="receipt"):
            click.echo(f"  {line}")


@click.command()
@click.option(
    "--max-session-spans",
    callback=_limit_option,
    help=f"Spans kept per session, or 'none' [default: {RetentionLimits().max_session_spans}].",
)
@click.option(
    "--max-session-bytes",
    callback=_limit_option,
    help=f"Bytes kept per session, or 'none' [default: {RetentionLimits().max_session_bytes}].",
)
@click.option(
    "--max-session-age",
    type=Duration(allow_none=True, example="30d"),
    help="How long a span is kept (30d, 12h, 90m, 45s, 500ms, or seconds), or 'none' "
    f"[default: {format_duration(RetentionLimits().max_session_age_s)}].",
)
@click.option(
    "--max-store-bytes",
    callback=_limit_option,
    help=f"Bytes kept in the whole store, or 'none' [default: {RetentionLimits().max_store_bytes}].",
)
@store_option
@format_option
def prune(
    max_session_spans: float | None,
    max_session_bytes: float | None,
    max_session_age: float | None,
    max_store_bytes: float | None,
    store_path: Path | None,
    output_format: str,
) -> None:
    """Apply the retention limits now (the defaults unless given) and print what was pruned.

    Then the store is rewritten so that no byte of a pruned span (now or by an earlier write) is left in its
    files; when another process keeps that from happening (an open read transaction), exit 1 with one line.
    """
    defaults = RetentionLimits()

    def pick(value: float | None, default: Any) -> Any:
        if value is None:
            return default
        return None if math.isinf(value) else value

    limits = RetentionLimits(
        max_session_spans=pick(max_session_spans, defaults.max_session_spans),
        max_session_bytes=pick(max_session_bytes, defaults.max_session_bytes),
        max_session_age_s=pick(max_session_age, defaults.max_session_age_s),
        max_store_bytes=pick(max_store_bytes, defaults.max_store_bytes),
        max_span_bytes=defaults.max_span_bytes,
    )
    path = resolve_store_path(store_path)
    if not path.exists():
        raise CliError(f"no trace store at {path} (run 'agentdiag demo', or configure() in your agent, first)")
    try:
        store = SpanStore(path, create=False, retention=limits)
    except StoreError as exc:
        raise CliError(str(exc)) from None
    with store:
        result = store.prune()
        # The rewrite is O(store): skipped when no span was deleted since the last complete one (nothing to remove).
        report = store.scrub() if result.spans or store.needs_scrub() else None
    if report is not None and not report.complete:
        raise CliIncomplete(
            f"pruned {result.spans} span(s), {result.bytes} byte(s) from {path}, but {report.problem};"
            f" {report.advice('agentdiag prune')}"
        )
    if output_format == "json":
        click.echo(json_text({"pruned_spans": result.spans, "pruned_bytes": result.bytes}))
        return
    click.echo(f"pruned {result.spans} span(s), {result.bytes} byte(s) from {path}")


@click.command()
@click.option("--session", "session_text", required=True, help="A session digest, unique prefix, or raw id.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation on a terminal.")
@store_option
@format_option
def clear(session_text: str, yes: bool, store_path: Path | None, output_format: str) -> None:
    """Delete a session's spans and captured content; spans of it still in flight are dropped when they arrive
    (counted).

    Exit 0: no byte of them is left in the store's file, its -wal or -shm. Exit 1 (one line): they are deleted,
    but another process holds a read transaction open on the store, so their bytes may remain; stop it and run
    the same clear again. On an interactive terminal it asks first (``--yes`` skips the question); in scripts it
    does what it is told.
    """
    with open_store(store_path, write=True) as store:
        session = resolve_session(store, session_text, resolve_store_path(store_path))
        if not yes and sys.stdin.isatty():
            click.confirm(f"delete every span of session {printable(session)}?", abort=True, err=True)
        try:
            deleted = store.clear_session(session)
        except ScrubIncomplete as exc:
            raise CliIncomplete(
                f"session {session}: {exc.deleted} span(s) deleted, but {exc.report.problem};"
                f" {exc.report.advice('agentdiag clear with the same --session')}"
            ) from None
    if output_format == "json":
        click.echo(json_text({"session": session, "cleared_spans": deleted}))
        return
    click.echo(f"cleared session {printable(session)}: {deleted} span(s) deleted")
