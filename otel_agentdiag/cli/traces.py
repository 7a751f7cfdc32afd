"""``agentdiag traces`` and ``agentdiag show``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from otel_agentdiag.cli._common import CliError, format_option, json_text, open_reader, store_option
from otel_agentdiag.cli._render import render_traces_table, render_tree, trace_json, trace_summary_json
from otel_agentdiag.storage.migrations import StoreError
from otel_agentdiag.storage.rows import StoredContent


@click.command()
@store_option
@format_option
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most this many traces.")
def traces(store_path: Path | None, output_format: str, limit: int | None) -> None:
    """List traces, newest first."""
    with open_reader(store_path) as store:
        summaries = store.list_traces(limit=limit)
    if output_format == "json":
        click.echo(json_text([trace_summary_json(s) for s in summaries]))
        return
    if not summaries:
        click.echo(f"no traces in {store.path}")
        return
    for line in render_traces_table(summaries):
        click.echo(line)


@click.command()
@click.argument("trace_id")
@store_option
@format_option
@click.option(
    "--content",
    "with_content",
    is_flag=True,
    help="Also show the content captured with capture_content (prompts, outputs, tool arguments and results) "
    "under each span; long values are folded in text (--format json shows them whole). Local only.",
)
def show(trace_id: str, store_path: Path | None, output_format: str, with_content: bool) -> None:
    """Show one trace as a tree: TRACE_ID is the full id or a unique prefix of it (4 hex digits or more)."""
    with open_reader(store_path) as store:
        try:
            full_id = store.resolve_trace_id(trace_id)
        except StoreError as exc:
            raise CliError(str(exc)) from None
        spans = store.get_trace(full_id)
        stored = store.trace_content(full_id) if with_content else None
    content, unreadable = (None, 0) if stored is None else read_content(stored)
    emit_trace(full_id, spans, output_format, content)
    if with_content and not content:
        click.echo("agentdiag: no content was captured for this trace (see capture_content)", err=True)
    if unreadable:
        click.echo(f"agentdiag: {unreadable} captured value(s) could not be decoded", err=True)


def read_content(stored: list[StoredContent]) -> tuple[dict[str, dict[str, Any]], int]:
    """``({span_id: {role: projection}}, values that could not be decoded)``: each value's projection is made
    from its authoritative lossless form; an undecodable value shows as ``{"$unreadable": true}``."""
    from otel_agentdiag.content import ENCODING, ContentDecodeError, decode, project

    content: dict[str, dict[str, Any]] = {}
    unreadable = 0
    for item in stored:
        try:
            if item.encoding != ENCODING:
                raise ContentDecodeError(f"unknown content encoding {item.encoding!r}")
            value: Any = project(decode(item.lossless))
        except ContentDecodeError:
            unreadable += 1
            value = {"$unreadable": True}
        content.setdefault(item.span_id, {})[item.role] = value
    return content, unreadable


def emit_trace(
    trace_id: str,
    spans: list,  # type: ignore[type-arg]
    output_format: str,
    content: dict[str, dict[str, Any]] | None = None,
) -> None:
    if output_format == "json":
        click.echo(json_text(trace_json(trace_id, spans, content)))
        return
    for line in render_tree(trace_id, spans, content):
        click.echo(line)
    corrupt = sum(1 for s in spans if s.corrupt)
    if corrupt:
        click.echo(f"agentdiag: {corrupt} stored span(s) could not be fully decoded", err=True)
