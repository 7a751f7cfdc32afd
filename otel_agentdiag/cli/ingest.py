"""``agentdiag ingest``: OTLP-JSON into the store, re-checked through the local policy and filed as imported.

Never filed as observed; rejected lines are recorded.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from otel_agentdiag.cli._common import (
    CliError,
    format_option,
    json_text,
    resolve_store_path,
    store_option,
)
from otel_agentdiag.cli._duration import Duration, format_duration
from otel_agentdiag.interchange.ingest import IngestError, IngestResult, UnusableInput, ingest_otlp_json
from otel_agentdiag.storage import RetentionLimits

EXIT_REJECTED = 1
_SHOWN = 20
"""Rejected lines listed one by one in the text summary (the JSON lists them all)."""


def _summary_json(result: IngestResult) -> dict[str, Any]:
    return {
        "file": str(result.path),
        "store": str(result.store),
        "observer": result.observer,
        "policy": result.policy,
        "documents": result.documents,
        "accepted": result.accepted,
        "rejected": len(result.rejected),
        "rejected_reasons": result.reason_counts(),
        "rejections": [
            {"location": r.location, "reason": r.reason, "sessions": list(r.sessions)} for r in result.rejected
        ],
        "spans": result.spans,
        "inserted": result.inserted,
        "duplicates": result.duplicates,
        "unchanged": result.unchanged,
        "pruned": result.pruned,
        "numbered": result.numbered,
        "claimed_observers": result.claimed_observers,
        "redaction_failures": result.redaction_failures,
    }


def _summary_lines(result: IngestResult) -> list[str]:
    lines = [
        f"ingested {result.spans} span(s) from {result.accepted} of {result.documents} document(s) of {result.path}"
        f" into {result.store} (policy {result.policy})",
        f"  {result.inserted} new, {result.duplicates} already stored; {result.numbered} numbered by this ingest"
        f" (observer {result.observer})",
        "  filed as imported (sessions imported:<digest>): their receipts say imported, never valid",
    ]
    if result.pruned:
        lines.append(
            f"  {result.pruned} span(s) pruned by retention at once (older than the store's age limit? see"
            " --max-session-age)"
        )
    if result.redaction_failures:
        lines.append(f"  {result.redaction_failures} span(s) could not be redacted (counted as rejected)")
    if result.rejected:
        reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(result.reason_counts().items()))
        lines.append(f"rejected {len(result.rejected)} document(s): {reasons}")
        for rejection in result.rejected[:_SHOWN]:
            lines.append(f"  {rejection.location}: {rejection.reason}")
        if len(result.rejected) > _SHOWN:
            lines.append(f"  ... and {len(result.rejected) - _SHOWN} more (--format json lists them all)")
        lines.append("each is recorded in the store: its receipts now say invalid (ingest_violation)")
    return lines


@click.command()
@click.argument("file", type=click.Path(path_type=Path, dir_okay=True))
@store_option
@click.option(
    "--trust-names",
    is_flag=True,
    help="Keep the identifier-like tool and agent names that pass the public-safety check (default: every name "
    "in the file becomes _OTHER, whatever the file claims).",
)
@click.option(
    "--max-session-age",
    type=Duration(allow_none=True, example="30d"),
    help="How long a span is kept (30d, 12h, 90m, 45s, 500ms, or seconds), or 'none', for this write "
    f"[default: {format_duration(RetentionLimits().max_session_age_s)}]. "
    "Older spans are pruned as they arrive (and by the next write that applies the default).",
)
@format_option
@click.pass_context
def ingest(
    ctx: click.Context,
    file: Path,
    store_path: Path | None,
    trust_names: bool,
    max_session_age: float | None,
    output_format: str,
) -> None:
    """Ingest an OTLP-JSON FILE (one request per line, or one document) into the store, as imported spans.

    Nothing in the file is trusted: every span goes through the store's local policy and hash key, whatever
    observer it claims, and is filed under an imported session (imported:<digest>) that never touches a
    session this machine observed. A line that is malformed or rejected is recorded in the store (never its
    content), so the store's receipts say invalid. Exit 0 when every line was taken, 1 when some were
    rejected, 2 when the file is unusable.
    """
    path = resolve_store_path(store_path)
    try:
        retention = None
        if max_session_age is not None:
            retention = RetentionLimits(max_session_age_s=None if math.isinf(max_session_age) else max_session_age)
        result = ingest_otlp_json(file, path, trust_names=trust_names, retention=retention)
    except UnusableInput as exc:
        raise CliError(str(exc)) from None
    except IngestError as exc:
        done = exc.result
        raise CliError(
            f"{exc}; {done.accepted} document(s) ({done.spans} spans) were ingested before it,"
            f" {len(done.rejected)} rejected"
        ) from None
    if output_format == "json":
        click.echo(json_text(_summary_json(result)))
    else:
        for line in _summary_lines(result):
            click.echo(line)
    if not result.clean:
        ctx.exit(EXIT_REJECTED)
