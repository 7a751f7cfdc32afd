"""``agentdiag demo``: run the scripted demo agent on the local store and print its trace."""

from __future__ import annotations

import contextlib
import importlib.resources
import os
from collections.abc import Iterator
from pathlib import Path

import click

from otel_agentdiag.cli._common import CliError, resolve_store_path, store_option
from otel_agentdiag.cli.traces import emit_trace, read_content
from otel_agentdiag.destinations import LOCAL_DESTINATION
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.environment_variables import AGENTDIAG_PRICES
from otel_agentdiag.redaction.hash_keys import resolve_key
from otel_agentdiag.storage import SpanStore, StoreError

SHUTDOWN_WAIT_S = 1.5
"""How long the demo waits for its OTLP branch, if any, once the local store has every span."""


@click.command()
@store_option
@click.option(
    "--capture-content",
    is_flag=True,
    help="Also capture prompts, model outputs, tool arguments and results into the store (local only) and "
    "show them under the spans.",
)
def demo(store_path: Path | None, capture_content: bool) -> None:
    """Run a scripted demo agent (fake model, real tools, one recovered tool error) and print its trace."""
    import otel_agentdiag as agentdiag
    from otel_agentdiag.demo import run_demo_agent
    from otel_agentdiag.options import is_enabled

    path = resolve_store_path(store_path)
    if not is_enabled():
        raise CliError("AGENTDIAG_ENABLED is false: nothing would be recorded")
    try:
        SpanStore(path).close()  # create or check the store first: the pipeline itself never raises
        resolve_key(None, path)  # and the key it will use (a refused one is one line and exit 2)
    except (StoreError, OSError) as exc:
        raise CliError(f"cannot use the store {path}: {exc}") from None
    with (
        _demo_prices() as prices,
        agentdiag.configure(
            service_name="agentdiag-demo",
            store=path,
            set_global=False,
            capture_content=capture_content,
            prices=prices,
        ) as diag,
    ):
        result = run_demo_agent()
        # The local store gets everything; an OTLP branch (OTEL_EXPORTER_OTLP_ENDPOINT) gets a short while only,
        # so a collector that is down costs one summary line and about a second, not the exporter's backoff.
        for destination, processor in zip(diag.destinations, diag.processors, strict=True):
            if destination.name == LOCAL_DESTINATION:
                processor.force_flush()
        diag.shutdown(timeout_s=SHUTDOWN_WAIT_S)
    click.echo(f"demo agent answered after {result.iterations} iterations ({result.tool_errors} tool error recovered):")
    click.echo(f"  {result.answer}")
    click.echo()
    with SpanStore(path, create=False) as store:
        spans = store.get_trace(result.trace_id)
        if not spans:
            raise CliError(f"the demo trace did not reach {path}")
        receipt = session_receipt(store, spans[0].session)
        content = read_content(store.trace_content(result.trace_id))[0] if capture_content else None
    emit_trace(result.trace_id, spans, "text", content)
    click.echo()
    counts = receipt.counts
    click.echo(
        f"receipt: {receipt.status}{' (' + ', '.join(receipt.reasons) + ')' if receipt.reasons else ''} - "
        f"{counts['spans']} spans stored; observed {counts['observed']} = accepted {counts['accepted']} + "
        f"rejected {counts['rejected']} + dropped {counts['dropped']}; sequence gaps {counts['sequence_gaps']}"
    )
    if capture_content:
        click.echo(
            f"stored in {path}, with the captured content: as sensitive as the data itself, it never leaves this "
            "file (not in OTLP, push, export or support bundles); raw IDs were not stored"
        )
    else:
        click.echo(f"stored in {path} (prompts, tool arguments and raw IDs were not)")
    click.echo(f"next: agentdiag traces --store {path}")
    click.echo(f"      agentdiag show {result.trace_id[:12]} --store {path} --format json")
    click.echo(f"      agentdiag status --with-receipt --store {path}")


@contextlib.contextmanager
def _demo_prices() -> Iterator[Path | None]:
    """The bundled prices plus the demo model's invented one (``cost/demo_prices.toml``), so the demo shows a
    priced run; None (the variable's table) when ``AGENTDIAG_PRICES`` is set."""
    if os.environ.get(AGENTDIAG_PRICES) is not None:
        yield None
        return
    with importlib.resources.as_file(importlib.resources.files("otel_agentdiag.cost") / "demo_prices.toml") as file:
        yield file
