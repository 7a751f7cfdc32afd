"""``agentdiag doctor``: is this configuration sound, and does the redaction hold?

It prints the resolved configuration, the policies per destination, the redaction canary, and the span
processors that see spans before redaction.

Exit codes: 0 nothing leaked (or nothing is exported at all), 1 a sentinel survived or the canary did not
come through, 2 a usage or configuration error, including a store or key that would be refused (the report
still shows what would run, then one error line). A processor of another library on the provider is a warning
(the exit code stays): doctor usually runs in a process of its own, where the application's provider is not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from otel_agentdiag import environment_variables as env
from otel_agentdiag.cli._common import CliError, format_option, safe_url, store_option
from otel_agentdiag.redaction.allowlist import open_patterns
from otel_agentdiag.redaction.hash_keys import Refusal
from otel_agentdiag.redaction.rules import PolicyError

EXIT_LEAKED = 1

# Upstream switches that make other instrumentations record content. Our policy removes what they record,
# but the user should know the content exists in process memory.
_CONTENT_SWITCHES: dict[str, frozenset[str]] = {
    # variable -> the values that mean "no content"
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": frozenset({"", "false", "no_content"}),
    "TRACELOOP_TRACE_CONTENT": frozenset({"false", "0"}),
}


def _configuration(store: Path | None, otlp_endpoint: str | None) -> tuple[Any, dict[str, Any]]:
    from otel_agentdiag.options import batch_settings_from_env, resolve_options
    from otel_agentdiag.pipeline.metrics_setup import describe_metrics

    try:
        options = resolve_options(None, store, otlp_endpoint)
    except ValueError as exc:  # an --otlp-endpoint that cannot work: one line, exit 2
        raise CliError(str(exc)) from None
    endpoint = _endpoint(options)
    batch = batch_settings_from_env()
    return options, {
        "enabled": options.enabled,
        "service_name": os.environ.get(env.OTEL_SERVICE_NAME) or None,
        "store": str(options.store_path) if options.store_path else None,
        "otlp_endpoint": endpoint,
        # http/protobuf or grpc, and where that came from (None without an OTLP branch).
        "otlp_protocol": (
            None if options.otlp_protocol is None else f"{options.otlp_protocol} ({options.otlp_protocol_source})"
        ),
        # AGENTDIAG_CAPTURE_CONTENT: content kept in the local store only (never in any export).
        "capture_content": options.capture_content,
        "metrics": describe_metrics(options),  # AGENTDIAG_METRICS / configure(metrics=...): on, and where they go
        "cost": _describe_prices(),  # AGENTDIAG_PRICES: which price table prices the model calls
        # OTEL_BSP_MAX_QUEUE_SIZE / _MAX_EXPORT_BATCH_SIZE / _SCHEDULE_DELAY over the defaults, per destination.
        "batch": {
            "max_queue_spans": batch["max_queue_spans"],
            "max_export_batch": batch["max_export_batch"],
            "schedule_delay_ms": round(batch["schedule_delay_s"] * 1000),
        },
    }


def _describe_prices() -> str:
    """Which price table ``configure()`` would use (``AGENTDIAG_PRICES``), in one line; a file it cannot use is
    named with its error, as ``configure()`` logs it."""
    from otel_agentdiag.cost.loader import PriceTableError, load_price_table
    from otel_agentdiag.cost.pricing import OFF_VALUES, bundled_table

    bundled = bundled_table()
    what = f"the bundled price table ({len(bundled)} entries, as of {bundled.as_of})"
    variable = (os.environ.get(env.AGENTDIAG_PRICES) or "").strip()
    if not variable:
        return what
    if variable.lower() in OFF_VALUES:
        return f"off ({env.AGENTDIAG_PRICES}={variable})"
    try:
        table = load_price_table(variable)
    except PriceTableError as exc:
        return f"{what}: {env.AGENTDIAG_PRICES} is not used ({exc})"
    return f"{what}, overridden by {len(table)} entries of {env.AGENTDIAG_PRICES}"


def _endpoint(options: Any) -> str | None:
    """Where the OTLP branch would send, safe to print (host and port; never user info or a query)."""
    from otel_agentdiag.exporters.otlp import describe_endpoint, endpoint_variable

    def shown(value: str) -> str:
        return safe_url(value) if "://" in value else describe_endpoint(value)

    if options.otlp_endpoint is not None:
        return shown(options.otlp_endpoint)
    variable = endpoint_variable()
    if variable is None:
        return None
    refused = "; refused, the OTLP export is off" if options.otlp_refused else ""
    return f"{shown(os.environ[variable])} (from {variable}{refused})"


def _otlp_refusals(options: Any) -> list[Refusal]:
    """What would turn the OTLP branch off: an endpoint variable it cannot use, or a missing ``otlp`` extra."""
    from otel_agentdiag.exporters.otlp import DEFAULT_PROTOCOL, INSTALL_HINT, exporter_importable

    if options.otlp_refused:
        return [Refusal(options.otlp_refused, ("otlp",))]
    wants_otlp = options.otlp_endpoint is not None or options.otlp_from_env
    if wants_otlp and not exporter_importable(options.otlp_protocol or DEFAULT_PROTOCOL):
        return [Refusal(INSTALL_HINT, ("otlp",))]
    return []


def _destination_info(destination: Any) -> dict[str, Any]:
    policy = destination.policy
    return {
        "destination": destination.name,
        "policy": policy.name,
        "policy_source": destination.policy_source,
        "summary": policy.summary,
        "hash_function": policy.hash_function,
        "key_id": destination.hasher.key_id,
        "key_source": destination.key_source,
        "allowed_keys": len(policy.allowed_keys),
        "allowed_events": sorted(policy.allowed_events),
        "resource_keys": sorted(policy.resource_keys),
        "exception_fingerprint": policy.exception_fingerprint,
        "on_error": policy.on_error,
        "blocked_values": len(policy.blocked_values),
        "open_patterns": list(open_patterns(policy)),
    }


def _span_processors() -> dict[str, Any]:
    """The global TracerProvider of this process and the processors on it that are not otel-agentdiag's
    (class names only: their configuration may hold endpoints and credentials)."""
    from opentelemetry import trace

    from otel_agentdiag._internal.sdk import active_span_processor
    from otel_agentdiag.pipeline.audit import foreign_processors, span_processors

    provider = trace.get_tracer_provider()
    sdk = active_span_processor(provider) is not None
    return {
        "checked": "the global TracerProvider of this process",
        "sdk_provider": sdk,
        "processors": len(span_processors(provider)) if sdk else 0,
        "foreign": [found.as_dict() | {"name": str(found)} for found in foreign_processors(provider)],
    }


def _warnings(processors: dict[str, Any]) -> list[str]:
    from otel_agentdiag.pipeline.audit import FIX

    out = [
        f"span processor {found['name']} sees every span before redaction and exports it under no "
        f"otel-agentdiag policy; {FIX}"
        for found in processors["foreign"]
    ]
    for variable, off in _CONTENT_SWITCHES.items():
        value = os.environ.get(variable)
        if value is not None and value.lower() not in off:
            out.append(
                f"{variable} makes other instrumentations record prompts and outputs; otel-agentdiag's policies "
                "remove them before export, but they exist in process memory"
            )
    return out


@click.command()
@store_option
@click.option(
    "--otlp-endpoint",
    default=None,
    metavar="URL",
    help="Check an OTLP branch to this endpoint [default: $OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT].",
)
@click.option(
    "--local-policy",
    default=None,
    metavar="NAME|FILE",
    help="Policy of the local store to check [default: $AGENTDIAG_LOCAL_POLICY or 'local'].",
)
@click.option(
    "--otlp-policy",
    default=None,
    metavar="NAME|FILE",
    help="Policy of the OTLP export to check [default: $AGENTDIAG_OTLP_POLICY or 'strict'].",
)
@format_option
def doctor(
    store_path: Path | None,
    otlp_endpoint: str | None,
    local_policy: str | None,
    otlp_policy: str | None,
    output_format: str,
) -> int:
    """Show the resolved configuration and prove redaction with a canary.

    The canary puts random sentinel strings in every surface of a span (name, attributes, IDs, tool and agent
    names, events, exception, status, links, resource, scope), sends it through each destination's redacting
    processor exactly as configured, into memory instead of the store or the collector, and reports whether
    any sentinel survived. Nothing is written; no key file is created. Exit 0 when nothing leaked, 1 otherwise.

    It also lists every span processor on this process's TracerProvider that is not otel-agentdiag's (it sees
    spans before redaction), with a warning and the fix. Run under ``opentelemetry-instrument`` to check what
    zero-code set-up builds; in your application, ``configure()`` logs the same warning and
    ``AgentDiag.foreign_processors()`` lists them.
    """
    from otel_agentdiag.destinations import resolve_destinations
    from otel_agentdiag.diagnostics.canary import run_canary

    options, configuration = _configuration(store_path, otlp_endpoint)
    destinations: tuple[Any, ...] = ()
    refusals: list[Refusal] = []
    if options.enabled:
        try:
            destinations = resolve_destinations(
                options, local_policy=local_policy, otlp_policy=otlp_policy, create_key_file=False, refusals=refusals
            )
        except (PolicyError, ValueError) as exc:
            raise CliError(str(exc)) from None
        otlp_off = _otlp_refusals(options)
        if otlp_off:  # the OTLP branch would not run: neither shown nor checked as if it did
            refusals.extend(otlp_off)
            destinations = tuple(d for d in destinations if d.name != "otlp")
    report = run_canary(destinations)
    processors = _span_processors()
    result = {
        "configuration": configuration,
        "destinations": [_destination_info(d) for d in destinations],
        # A store or key configure() would refuse (not yours, writable by others, a symlink, a weak key): the
        # destinations named are off. Never a key, only where it came from.
        "refused": [{"reason": r.reason, "destinations": list(r.destinations)} for r in refusals],
        "canary": report.as_dict(),
        "span_processors": processors,
        "warnings": _warnings(processors),
    }
    if output_format == "json":
        click.echo(json.dumps(result, indent=2))
    else:
        _print_text(result)
    if refusals:
        # The report above shows what still runs; the configuration error is one line and exit 2.
        more = f" (and {len(refusals) - 1} more, above)" if len(refusals) > 1 else ""
        raise CliError(refusals[0].describe() + more)
    return EXIT_LEAKED if report.leaked else 0


def _print_text(result: dict[str, Any]) -> None:
    config = result["configuration"]
    click.echo("configuration")
    click.echo(f"  enabled        {'yes' if config['enabled'] else 'no (AGENTDIAG_ENABLED is false)'}")
    unset = "none in OTEL_SERVICE_NAME: your code's configure(service_name=...), else unknown_service"
    shown = config["service_name"] or unset
    click.echo(f"  service name   {shown}")
    click.echo(f"  store          {config['store'] or '(off)'}")
    click.echo(f"  otlp endpoint  {config['otlp_endpoint'] or '(off)'}")
    if config["otlp_protocol"]:
        click.echo(f"  otlp protocol  {config['otlp_protocol']}")
    click.echo(
        "  content        "
        + (
            "captured into the local store only (AGENTDIAG_CAPTURE_CONTENT)"
            if config["capture_content"]
            else "not captured"
        )
    )
    click.echo(f"  metrics        {config['metrics']}")
    click.echo(f"  cost           {config['cost']}")
    batch = config["batch"]
    click.echo(
        f"  batching       up to {batch['max_queue_spans']} spans queued per destination, "
        f"{batch['max_export_batch']} per export, every {batch['schedule_delay_ms']} ms at most"
    )
    for refused in result["refused"]:
        click.echo()
        click.echo(f"refused: {refused['reason']}")
        click.echo(f"  off            {', '.join(refused['destinations'])} (configure() logs this and fails closed)")
    for info in result["destinations"]:
        click.echo()
        click.echo(f"destination {info['destination']}")
        click.echo(f"  policy         {info['policy']} ({info['policy_source']})")
        click.echo(f"  allowed keys   {info['allowed_keys']}; events: {', '.join(info['allowed_events']) or 'none'}")
        click.echo(f"  resource keys  {', '.join(info['resource_keys']) or 'none'}")
        if info["open_patterns"]:
            click.echo(f"  open patterns  {', '.join(info['open_patterns'])} (keys under them may carry data)")
        click.echo(f"  summary        {info['summary']}; on error: {info['on_error']}")
        key = info["key_id"] or "none (unkeyed)"
        click.echo(f"  hashing        {info['hash_function']}, key id {key}, from {info['key_source']}")
    canary = result["canary"]
    click.echo()
    if not canary["results"]:
        click.echo("canary: nothing is exported, so nothing can leak")
    for outcome in canary["results"]:
        verdict = "PASS" if outcome["ok"] else "FAIL"
        click.echo(
            f"canary {outcome['destination']} ({outcome['policy']}): {verdict} - "
            f"{outcome['spans_received']}/{outcome['spans_sent']} spans, IDs hashed: "
            f"{'yes' if outcome['ids_hashed'] else 'NO'}"
        )
        for surface, state in outcome["surfaces"].items():
            click.echo(f"  {surface:<12} {state}")
        for leak in outcome["leaks"]:
            click.echo(f"  ! a {leak['surface']} sentinel survived in: {', '.join(leak['found_in'])}")
    processors = result["span_processors"]
    click.echo()
    click.echo(f"span processors ({processors['checked']})")
    if not processors["sdk_provider"]:
        click.echo(
            "  no SDK TracerProvider here; in your application, configure() warns about processors of other "
            "libraries and AgentDiag.foreign_processors() lists them"
        )
    elif not processors["foreign"]:
        click.echo(f"  {processors['processors']}, none sees spans before redaction")
    for found in processors["foreign"]:
        click.echo(f"  ! {found['name']} ({found['processor']}) sees spans before redaction")
    for warning in result["warnings"]:
        click.echo(f"warning: {warning}")
