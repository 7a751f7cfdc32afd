"""Reason codes shared across layers, each defined once: drops, rejections, receipt reasons, redaction counters.

Why a span was dropped or rejected, why a receipt is not ``valid``, and the redaction counters those read. The
values are stored (the ledger's ``dropped``/``rejected`` keys, the receipt's reasons, the span counters
``agentdiag.redaction.*``) and printed: they are contracts, never renamed. The modules that speak of them (the
pipeline's ledger, the store's rows and receipt rules, the verdict, the redaction reasons) take them from here.
"""

from __future__ import annotations

from typing import Final

from otel_agentdiag import semconv as sc

# -- why a span was dropped (keys of the ledger's and the store's ``dropped`` counts) ---------------------------
QUEUE_FULL: Final = "queue_full"
"""The batch queue was full: the span never reached its exporter."""
EXPORT_FAILURE: Final = "export_failure"
"""Its batch failed to export after the retries (also the receipt's reason for such drops)."""
SHUTDOWN: Final = "shutdown"
"""Still queued when the pipeline shut down and could not be flushed in time."""
CLEARED: Final = "cleared"
"""In flight when its session was cleared: the generation gate refused it."""
DROP_CAUSES: Final = (QUEUE_FULL, EXPORT_FAILURE, SHUTDOWN, CLEARED)

# -- why a span was rejected (keys of ``rejected``), or removed by redaction ---------------------------------------
REDACTOR_ERROR: Final = "redactor_error"
"""The redactor raised on a span: a tombstone (or nothing) went in its place; also a redaction counter, a
receipt reason and a projection's omission reason."""
PUBLIC_SAFETY_VIOLATION: Final = "public_safety_violation"
"""A value looked like a credential, personal data, a URL or a path: a redaction counter and a receipt reason."""
UNREGISTERED_NAME: Final = "unregistered_name"
"""A tool/agent/model name no code registered, replaced by ``_OTHER`` (a redaction counter)."""

TOMBSTONE_COUNTER: Final = sc.AGENTDIAG_REDACTION_PREFIX + REDACTOR_ERROR
"""The counter on a tombstone: the span the redactor could not rebuild."""
PUBLIC_SAFETY_COUNTER: Final = sc.AGENTDIAG_REDACTION_PREFIX + PUBLIC_SAFETY_VIOLATION
UNREGISTERED_COUNTER: Final = sc.AGENTDIAG_REDACTION_PREFIX + UNREGISTERED_NAME

# -- why a receipt is not ``valid`` (besides the two above and EXPORT_FAILURE) -------------------------------------
SEQUENCE_GAP: Final = "sequence_gap"
DUPLICATE_SEQUENCE: Final = "duplicate_sequence"
BACKPRESSURE_DROP: Final = "backpressure_drop"
"""Spans dropped for a full queue or at shutdown."""
UNFINISHED_SPAN: Final = "unfinished_span"
STATS_MISSING: Final = "stats_missing"
LEDGER_INVALID: Final = "ledger_invalid"
INGEST_VIOLATION: Final = "ingest_violation"
NO_OBSERVATIONS: Final = "no_observations"

# -- a receipt's counts (the keys of its ``counts``, stored in bundles and printed) -------------------------------
COUNT_KEYS: Final = (
    "spans",
    "sequence_gaps",
    "duplicate_sequences",
    "unfinished_spans",
    "dropped_queue_full",
    "dropped_export_failure",
    "dropped_shutdown",
    "dropped_cleared",
    "rejected_redactor_error",
    "public_safety_violations",
    "observed",
    "accepted",
    "rejected",
    "dropped",
    "stored",
    "malformed_rows",
    "pruned_spans",
    "cleared_spans",
    "ingest_violations",
)
"""The keys of a receipt's counts, in output order."""
