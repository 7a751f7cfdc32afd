"""``configure()``: resolve the options, build the redacting pipeline, and hand back its handle.

``configure()`` resolves what it was asked for (:mod:`otel_agentdiag.options`: argument > environment
variable > default; :mod:`otel_agentdiag.destinations`: each destination's policy and key, failing closed) and
builds the pipeline from that (:mod:`otel_agentdiag.pipeline.build`). The handle it returns,
:class:`AgentDiag`, flushes and shuts the pipeline down (:mod:`otel_agentdiag.pipeline.handle`).

Each branch (a *destination*) has its own policy and may have its own hash key. Each batch processor counts
the fate of every span; the SQLite branch persists those counts with the spans.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Literal

from otel_agentdiag._internal.lazy import lazy_attributes

if TYPE_CHECKING:  # imported on first use (below); type checkers see them here
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    from otel_agentdiag.cost import Budget
    from otel_agentdiag.options import AgentDiagOptions
    from otel_agentdiag.pipeline.handle import AgentDiag
    from otel_agentdiag.redaction.allowlist import Policy
    from otel_agentdiag.storage import RetentionLimits

_logger = logging.getLogger(__name__)

__all__ = ["AgentDiag", "AgentDiagOptions", "configure"]

_LAZY = {"AgentDiag": "otel_agentdiag.pipeline.handle", "AgentDiagOptions": "otel_agentdiag.options"}
"""The package's names that live elsewhere, imported on first use: resolving ``configure`` (the quick start's
``from otel_agentdiag import configure``) costs this module only; calling it imports the pipeline."""

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals(), __all__)


def configure(
    *,
    service_name: str | None = None,
    store: str | os.PathLike[str] | Literal[False] | None = None,
    otlp_endpoint: str | None = None,
    otlp_protocol: str | None = None,
    hash_key: str | bytes | None = None,
    tracer_provider: TracerProvider | None = None,
    set_global: bool | None = None,
    local_policy: Policy | str | os.PathLike[str] | None = None,
    otlp_policy: Policy | str | os.PathLike[str] | None = None,
    otlp_hash_key: str | bytes | None = None,
    retention: RetentionLimits | None = None,
    capture_content: bool | None = None,
    metrics: bool | None = None,
    meter_provider: MeterProvider | None = None,
    prices: str | os.PathLike[str] | bool | None = None,
    budget: Budget | None = None,
) -> AgentDiag:
    """Install the redacting pipeline and return its handle.

    :param service_name: ``service.name`` of the resource (default: ``OTEL_SERVICE_NAME``, then the SDK's).
    :param store: path of the SQLite store (default: ``AGENTDIAG_STORE``, then ``./.agentdiag/traces.db``);
        ``False`` turns the local branch off.
    :param otlp_endpoint: where the OTLP branch sends spans. For http/protobuf a base URL (``/v1/traces`` is
        appended unless present), e.g. ``http://127.0.0.1:4318``; for gRPC ``http://host:port`` (plaintext),
        ``https://host:port`` or ``host:port`` (TLS unless ``OTEL_EXPORTER_OTLP_INSECURE=true``), e.g.
        ``http://127.0.0.1:4317``. Without it, the OTLP branch is added when ``OTEL_EXPORTER_OTLP_ENDPOINT``
        or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, and the SDK exporter reads the endpoint itself (the
        generic variable gets ``/v1/traces`` appended for http/protobuf; the traces one is used as it is).
        Headers, TLS files, compression and timeout always come from the standard ``OTEL_EXPORTER_OTLP_*``
        variables. Needs the ``otlp`` extra. For http/protobuf the endpoint must start with ``http://`` or
        ``https://``: ``localhost:4318`` raises ``ValueError`` (write ``http://localhost:4318``); such a value in
        one of the variables logs one error and turns the OTLP export off (the local store is unaffected).
    :param otlp_protocol: ``"http/protobuf"`` (default) or ``"grpc"`` (default:
        ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, then ``OTEL_EXPORTER_OTLP_PROTOCOL``). Any other argument,
        ``"http/json"`` included (the Python SDK has no such exporter), raises ``ValueError``; such a
        variable logs a warning and selects http/protobuf.
    :param hash_key: key for the HMAC-SHA256 digests of correlation IDs (default: ``AGENTDIAG_HASH_KEY``,
        then a 32-byte key file ``hash.key`` created mode 0600 beside the store). At least 32 random bytes:
        ``bytes``, or text of 64+ hex digits or base64 (``secrets.token_hex(32)``); a chosen key is refused.
    :param tracer_provider: add the pipeline to this SDK provider instead of building one (its resource
        is kept; ``service_name`` is then ignored).
    :param set_global: make the provider the global one: ``True`` always, ``False`` never, ``None`` (default)
        only when no global provider has been set yet. The manual wrappers use this provider either way.
    :param local_policy: redaction policy of the SQLite store: a :class:`~otel_agentdiag.redaction.Policy`,
        ``"local"`` (default, or ``AGENTDIAG_LOCAL_POLICY``), ``"strict"``, or a TOML policy file.
    :param otlp_policy: redaction policy of the OTLP export: ``"strict"`` (default, or
        ``AGENTDIAG_OTLP_POLICY``), ``"local"``, a policy or a file. ``summary="debug"`` is refused here.
    :param otlp_hash_key: a separate key for the OTLP digests (default: ``AGENTDIAG_OTLP_HASH_KEY``, then
        the local key), so the export cannot be joined with the local store.
    :param retention: how much the SQLite store keeps, a :class:`~otel_agentdiag.storage.RetentionLimits`
        (default: ``RetentionLimits()``: per session 10 000 spans, 64 MiB, 30 days; 1 GiB per store; 256 KiB
        per span). Limits are applied on each write: the oldest rows of the first scope over a limit go.
    :param capture_content: capture prompts and messages, system instructions, model outputs, tool
        definitions, tool arguments and tool results into the local store (default: ``AGENTDIAG_CAPTURE_CONTENT``,
        where only ``true`` is on; else off). Captured content is never an attribute of any span: it goes to the
        store's ``span_content`` table only, never to OTLP, ``push``, ``export`` or a support bundle. It is as
        sensitive as the data itself. Even then environment variables, headers, cookies, credentials, URL
        query strings and user-info, and base64 media over 16 KiB are left out (markers say what was cut).
        Needs the local store: with ``store=False`` it stays off (a warning says so).
    :param metrics: record the GenAI metrics (``gen_ai.client.token.usage``, ``gen_ai.client.operation.duration``,
        ``gen_ai.client.operation.time_to_first_chunk``, ``gen_ai.client.cost``) from the redacted spans, on a
        batch worker (default: ``AGENTDIAG_METRICS``, else off). They go over OTLP to the trace branch's collector,
        or to the global ``MeterProvider`` when there is no OTLP branch. See ``docs/metrics.md``.
    :param meter_provider: record the metrics on this ``MeterProvider`` (implies ``metrics=True``; never flushed
        or shut down by the handle). ``metrics=False`` with it raises ``ValueError``.
    :param prices: the price table behind ``agentdiag.cost.usd`` (docs/cost.md): the path of a TOML table whose
        entries override the bundled table's (same provider and model or pattern) and add the others, ``True``
        for the bundled table alone, ``False`` to turn cost off (default: ``AGENTDIAG_PRICES``, then the bundled
        table). A file that cannot be used raises a :class:`~otel_agentdiag.cost.PriceTableError` (a
        ``ValueError`` naming the file and line); the same in ``AGENTDIAG_PRICES`` logs one error line and the
        bundled table is used.
    :param budget: limits per agent run, a :class:`~otel_agentdiag.Budget` (default: ``AGENTDIAG_BUDGET_USD``
        and ``AGENTDIAG_BUDGET_TOKENS``, else none). A run that passes a limit is marked (the
        ``agentdiag.budget.exceeded`` event and attributes); what the agent does never changes.

    A bad argument raises ``ValueError`` (a :class:`~otel_agentdiag.redaction.PolicyError` for policies)
    before anything is installed; so does a weak ``hash_key``/``otlp_hash_key`` (a
    :class:`~otel_agentdiag.redaction.WeakKeyError`: 32+ random bytes, as bytes, 64+ hex digits or base64). A bad
    ``AGENTDIAG_*_POLICY`` variable logs an error and selects the strict policy. What the machine holds never
    raises, it fails closed with one logged error each: a store folder, database, ``-wal``/``-shm`` or key file
    that is not the effective user's, is writable by group or others, or is a symbolic link, turns off the
    local store (and whatever used that key file); a weak ``AGENTDIAG_HASH_KEY``/``AGENTDIAG_OTLP_HASH_KEY`` or
    key file turns off every destination that would have used the key (a refused key is never replaced by
    another). With ``AGENTDIAG_ENABLED=false`` nothing is installed and no file is created; the handle is inert.
    """
    from otel_agentdiag.cost import install_budget, install_table
    from otel_agentdiag.destinations import OTLP_DESTINATION, resolve_destinations
    from otel_agentdiag.options import resolve_budget, resolve_options, resolve_prices
    from otel_agentdiag.pipeline.build import build_pipeline
    from otel_agentdiag.pipeline.handle import AgentDiag
    from otel_agentdiag.redaction import hash_keys
    from otel_agentdiag.storage import RetentionLimits

    if meter_provider is not None:
        if metrics is False:
            raise ValueError("meter_provider is given but metrics=False: drop one of them")
        if not hasattr(meter_provider, "get_meter"):
            raise ValueError("meter_provider must be an OpenTelemetry MeterProvider")
        metrics = True
    options = resolve_options(service_name, store, otlp_endpoint, otlp_protocol, capture_content, metrics)
    run_budget = resolve_budget(budget)
    if not options.enabled:
        return AgentDiag(options)
    price_table = resolve_prices(prices)
    if tracer_provider is not None and not hasattr(tracer_provider, "add_span_processor"):
        raise ValueError("tracer_provider must be an opentelemetry-sdk TracerProvider")
    if retention is not None and not isinstance(retention, RetentionLimits):
        raise ValueError("retention must be a RetentionLimits")
    refusals: list[hash_keys.Refusal] = []
    if options.otlp_refused is not None:
        refusals.append(hash_keys.Refusal(options.otlp_refused, (OTLP_DESTINATION,)))
    destinations = resolve_destinations(
        options,
        hash_key=hash_key,
        otlp_hash_key=otlp_hash_key,
        local_policy=local_policy,
        otlp_policy=otlp_policy,
        refusals=refusals,
    )
    for refusal in refusals:
        # Fail closed and say why, once per cause: never raise into the agent for what the machine holds.
        _logger.error("otel-agentdiag: %s", refusal.describe())

    if tracer_provider is not None and service_name is not None:
        _logger.warning("otel-agentdiag: service_name is ignored when tracer_provider is given (its resource wins)")
    install_table(price_table)
    install_budget(run_budget)
    return build_pipeline(
        options,
        destinations,
        tracer_provider=tracer_provider,
        set_global=set_global,
        retention=retention,
        meter_provider=meter_provider,
    )
