"""``agentdiag traces`` and ``agentdiag show``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from otel_agentdiag.cli._common import CliError, format_option, open_store, store_option
from otel_agentdiag.cli._render import render_traces_table, render_tree, trace_json, trace_summary_json
from otel_agentdiag.storage import StoreError


@click.command()
@store_option
@format_option
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most this many traces.")
def traces(store_path: Path | None, output_format: str, limit: int | None) -> None:
    """List traces, newest first."""
    with open_store(store_path) as store:
        summaries = store.list_traces(limit=limit)
    if output_format == "json":
        click.echo(json.dumps([trace_summary_json(s) for s in summaries], indent=2, ensure_ascii=False))
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
def show(trace_id: str, store_path: Path | None, output_format: str) -> None:
    """Show one trace as a tree: TRACE_ID is the full id or a unique prefix."""
    with open_store(store_path) as store:
        try:
            full_id = store.resolve_trace_id(trace_id)
        except StoreError as exc:
            raise CliError(str(exc)) from None
        spans = store.get_trace(full_id)
    emit_trace(full_id, spans, output_format)


def emit_trace(trace_id: str, spans: list, output_format: str) -> None:  # type: ignore[type-arg]
    if output_format == "json":
        click.echo(json.dumps(trace_json(trace_id, spans), indent=2, ensure_ascii=False))
        return
    for line in render_tree(trace_id, spans):
        click.echo(line)
    corrupt = sum(1 for s in spans if s.corrupt)
    if corrupt:
        click.echo(f"agentdiag: {corrupt} stored span(s) could not be fully decoded", err=True)
