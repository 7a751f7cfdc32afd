"""``redacting_processor()``: put an exporter of your own under otel-agentdiag's policy.

A processor on the TracerProvider sees every span as the instrumentation made it; one that exports (a
``BatchSpanProcessor(OTLPSpanExporter(...))`` you already had, a vendor's) sends it out under no policy of
ours. Instead of adding that processor, add ``redacting_processor(exporter)``: the same exporter, behind the
pipeline ``configure()`` builds for its OTLP branch (design.md §2)::

    provider.add_span_processor(otel_agentdiag.redacting_processor(OTLPSpanExporter(endpoint=...)))

It is a :class:`~otel_agentdiag.redaction.RedactingSpanProcessor` over an
:class:`~otel_agentdiag.pipeline.AccountingBatchSpanProcessor` over the exporter: the exporter only ever
receives spans rebuilt under the policy (strict by default), correlation ids as keyed digests (the raw ids our
instrumentation keeps beside the spans reach it only that way), and every span's fate is counted. The redaction
runs as spans end (the one synchronous wrapper); batching and export run on the batch worker. It also files
other libraries' spans inside an agent run under the run's conversation (as a digest), as ``configure()``'s
pipeline does.
"""

from __future__ import annotations

import os

from opentelemetry.sdk.trace.export import SpanExporter

from otel_agentdiag import environment_variables as env
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.pipeline import AccountingBatchSpanProcessor
from otel_agentdiag.redaction import hashing
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.policy_file import resolve_policy
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.redaction.processor import RedactingSpanProcessor
from otel_agentdiag.redaction.rules import PolicyError

__all__ = ["redacting_processor"]


def redacting_processor(
    exporter: SpanExporter,
    *,
    policy: Policy | str | os.PathLike[str] = STRICT,
    hash_key: str | bytes | None = None,
    names: NameRegistry | None = None,
) -> RedactingSpanProcessor:
    """A span processor that exports to ``exporter`` only what ``policy`` lets through. Add it to your provider
    in place of the processor that fed ``exporter``; shutting it down shuts ``exporter`` down.

    :param exporter: any OpenTelemetry SDK ``SpanExporter`` (OTLP, console, a vendor's).
    :param policy: ``"strict"`` (default), ``"local"``, a :class:`~otel_agentdiag.redaction.Policy` or a TOML
        policy file. ``summary="debug"`` is refused: it lists removed key names, for the local store only.
    :param hash_key: key of the correlation ids' HMAC-SHA256 digests. Default: the key ``configure()`` gives
        its OTLP branch (``AGENTDIAG_OTLP_HASH_KEY``, else ``AGENTDIAG_HASH_KEY``, else the key file beside the
        store, created 0600 if missing), so the digests this exporter carries are the ones the strict OTLP
        export carries. The store is ``AGENTDIAG_STORE`` or ``./.agentdiag/traces.db``: when ``configure()``
        was given another ``store=``, pass its key here (or set ``AGENTDIAG_HASH_KEY``) for the digests to match.
    :param names: the tool/agent/model name registry the policy consults (default: the process's).

    Batching follows ``OTEL_BSP_MAX_QUEUE_SIZE``, ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` and
    ``OTEL_BSP_SCHEDULE_DELAY``, as ``configure()`` does; a failed export is not retried (the exporter retries
    as it is built to) and is counted. Raises ``ValueError`` (a ``PolicyError`` for the policy) for a bad
    argument, before anything starts.
    """
    from otel_agentdiag.destinations import _hasher
    from otel_agentdiag.options import batch_settings_from_env
    from otel_agentdiag.redaction.hash_keys import argument_key, environment_key, resolve_key

    if not callable(getattr(exporter, "export", None)):
        raise ValueError("exporter must be an OpenTelemetry SpanExporter")
    resolved = resolve_policy(policy)
    if resolved.summary == "debug":
        raise PolicyError("summary='debug' lists removed key names and is for the local store only")
    key = (
        argument_key(hash_key, "hash_key") or environment_key(env.AGENTDIAG_OTLP_HASH_KEY) or resolve_key(None, None)[0]
    )
    hasher: hashing.IdHasher = _hasher(key, resolved, {})
    batching = AccountingBatchSpanProcessor(exporter, max_retries=0, **batch_settings_from_env())
    return RedactingSpanProcessor(
        batching,
        policy=resolved,
        hasher=hasher,
        names=names,
        propagate_conversation=True,
        warn_undeclared=True,
    )
