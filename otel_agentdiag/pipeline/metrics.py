"""``MetricsRecorder``: the GenAI metrics, recorded from one branch's redacted spans on its batch worker.

Where it sits (design.md §6, "a span processor after the adapters"): on ONE destination's batch worker, right
after the redactor (pipeline: sequencer → adapters → batch → redact → **record** → export). So

- the agent's thread pays nothing: the recorder runs on the worker, once per batch;
- every foreign span is already in our model (the convention adapters ran), and a peer's copy of a model call
  one of our spans owns is kind ``other`` there: no call is counted twice;
- every value it reads already passed that branch's policy: unregistered tool and agent names are ``_OTHER``,
  ids are digests (and never read: attributes come from a closed set of keys only, :data:`METRIC_KEYS`);
- each span is recorded once, whatever the exporter then does (retries re-export; they never re-record).

The OTLP branch's (strict policy) output is preferred when there is one, else the local branch's
(:func:`otel_agentdiag.pipeline.build.build_pipeline` chooses). A span dropped before redaction (``queue_full``,
``shutdown``) is counted in the pipeline's ledger, not in the metrics.

What is recorded per span (its ``agentdiag.kind`` and ``gen_ai.operation.name``):

- ``gen_ai.client.operation.duration`` (s) for every LLM, tool and agent span whose operation is one of
  :data:`DURATION_OPERATIONS`, with ``error.type`` on a failed one (``_OTHER`` when it failed without one);
- ``gen_ai.client.token.usage`` (``{token}``) per token type, for LLM leaves that report usage (never the
  ``agentdiag.usage.*`` roll-ups: each token is counted once);
- ``gen_ai.client.operation.time_to_first_chunk`` (s) from ``gen_ai.response.time_to_first_chunk`` (streams);
- ``gen_ai.client.cost`` (``{USD}``) from the leaf's ``agentdiag.cost.usd`` when it has one.

Cardinality is bounded twice: the values were already closed or checked by the policy, and each key takes at
most :data:`MAX_VALUES_PER_KEY` distinct values; any further value is recorded as ``_OTHER`` (counted in
:attr:`MetricsRecorder.folded`). Each measurement carries the span's context, so an SDK whose exemplar filter
keeps sampled traces (the default, ``trace_based``) attaches trace and span ids as exemplars. Never raises: a
span that fails is counted in :attr:`MetricsRecorder.failed` and the first failure is logged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import reason_codes
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.sdk import span_attributes
from otel_agentdiag.version import __version__

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram, MeterProvider
    from opentelemetry.sdk.trace import ReadableSpan

_logger = logging.getLogger(__name__)

__all__ = [
    "COST_BUCKETS",
    "DURATION_BUCKETS",
    "DURATION_OPERATIONS",
    "MAX_VALUES_PER_KEY",
    "METER_NAME",
    "METRIC_KEYS",
    "TOKEN_BUCKETS",
    "MetricsRecorder",
]

METER_NAME = "otel_agentdiag"

TOKEN_BUCKETS: tuple[float, ...] = tuple(float(4**k) for k in range(14))
"""The conventions' ExplicitBucketBoundaries for ``gen_ai.client.token.usage``: 1, 4, 16, ..., 67108864."""
DURATION_BUCKETS: tuple[float, ...] = tuple(round(0.01 * 2**k, 2) for k in range(14))
"""The conventions' ExplicitBucketBoundaries for the durations (s): 0.01, 0.02, 0.04, ..., 81.92."""
COST_BUCKETS: tuple[float, ...] = tuple(round(1e-6 * 4**k, 12) for k in range(14))
"""``gen_ai.client.cost`` (US$): the token buckets times one dollar per million tokens (1e-6 ... 67.1). A call's
cost is its tokens times a per-token price, and prices sit within a few powers of ten of $1/M tokens: so a call's
cost lands in roughly the bucket its tokens do, shifted by its price (the factor-4 steps keep the quantile error
of the token histogram), from a one-token call of a cheap model ($1e-6) to a long-context call of the dearest
ones (tens of dollars)."""

DURATION_OPERATIONS = frozenset(
    {
        sc.OP_CHAT,
        sc.OP_TEXT_COMPLETION,
        sc.OP_GENERATE_CONTENT,
        sc.OP_EMBEDDINGS,
        sc.OP_EXECUTE_TOOL,
        sc.OP_INVOKE_AGENT,
        sc.OP_CREATE_AGENT,
        sc.OP_INVOKE_WORKFLOW,
    }
)
"""The operations whose spans are recorded (a closed set: any other operation, ``retrieval``, ``plan`` or one a
foreign instrumentation made up, is not a metric)."""

_KINDS = frozenset({sc.KIND_LLM, sc.KIND_TOOL, sc.KIND_RUN})

MAX_VALUES_PER_KEY = 200
"""The most distinct values one metric attribute takes in a process; further values are recorded as ``_OTHER``."""
_MAX_VALUE_LENGTH = 256

METRIC_KEYS: tuple[str, ...] = (
    sc.GEN_AI_OPERATION_NAME,
    sc.GEN_AI_PROVIDER_NAME,
    sc.GEN_AI_REQUEST_MODEL,
    sc.GEN_AI_RESPONSE_MODEL,
    sc.GEN_AI_AGENT_NAME,
    sc.GEN_AI_TOOL_NAME,
    sc.ERROR_TYPE,
)
"""The closed set of span attributes a metric may carry (``gen_ai.token.type`` is added on the token metric)."""
_SPAN_KEYS = (sc.GEN_AI_REQUEST_MODEL, sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_AGENT_NAME, sc.GEN_AI_TOOL_NAME)

_TOKEN_TYPES = ((sc.GEN_AI_USAGE_INPUT_TOKENS, "input"), (sc.GEN_AI_USAGE_OUTPUT_TOKENS, "output"))
_TOMBSTONE_KEY = reason_codes.TOMBSTONE_COUNTER


class _BoundedValues:
    """Per attribute key, the values seen so far, at most ``limit`` of them; one writer (the batch worker)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: dict[str, set[str]] = {key: set() for key in METRIC_KEYS}
        self.folded = 0

    def value(self, key: str, value: Any) -> str | None:
        """``value`` as it may be recorded under ``key``: itself, ``_OTHER`` past the bound, None if not text."""
        if type(value) is not str or not value or len(value) > _MAX_VALUE_LENGTH:
            return None
        seen = self.seen[key]
        if value in seen or value == sc.OTHER_VALUE:  # the policy's placeholder takes no slot
            return value
        if len(seen) < self.limit:
            seen.add(value)
            return value
        self.folded += 1
        return sc.OTHER_VALUE


def _number(value: Any) -> float | None:
    """A non-negative int or float (never a bool), else None."""
    if (type(value) is int or type(value) is float) and value >= 0 and value == value and value != float("inf"):
        return float(value)
    return None


class MetricsRecorder:
    """Record the GenAI metrics of redacted spans on ``meter_provider`` (see the module doc).

    It is the last stage of one batch worker (:meth:`process`, after the redactor); the counters are read by
    :meth:`stats` from any thread. ``max_values_per_key``: the cardinality bound per key.
    """

    def __init__(self, meter_provider: MeterProvider, *, max_values_per_key: int = MAX_VALUES_PER_KEY) -> None:
        if max_values_per_key < 1:
            raise ValueError("max_values_per_key must be positive")
        meter = meter_provider.get_meter(METER_NAME, __version__)

        def histogram(name: str, unit: str, description: str, buckets: Sequence[float]) -> Histogram:
            return meter.create_histogram(name, unit, description, explicit_bucket_boundaries_advisory=buckets)

        self._tokens: Histogram = histogram(
            sc.GEN_AI_CLIENT_TOKEN_USAGE, "{token}", "Number of input and output tokens used", TOKEN_BUCKETS
        )
        self._duration: Histogram = histogram(
            sc.GEN_AI_CLIENT_OPERATION_DURATION, "s", "GenAI operation duration", DURATION_BUCKETS
        )
        self._first_chunk: Histogram = histogram(
            sc.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
            "s",
            "Time to receive the first chunk of a streamed response",
            DURATION_BUCKETS,
        )
        self._cost: Histogram = histogram(
            sc.GEN_AI_CLIENT_COST, "{USD}", "What each model call cost, in US dollars", COST_BUCKETS
        )
        self._values = _BoundedValues(max_values_per_key)
        self._lock = threading.Lock()
        self.spans = 0
        """Spans recorded (each gave one duration, and tokens, time to first chunk and cost when it had them)."""
        self.measurements = 0
        self.failed = 0
        """Spans whose recording raised (the first is logged; the spans still went to the exporter)."""

    @property
    def folded(self) -> int:
        """Attribute values recorded as ``_OTHER`` because their key had reached its bound."""
        return self._values.folded

    def process(self, spans: list[ReadableSpan]) -> tuple[list[ReadableSpan], list[tuple[str | None, str]]]:
        """The batch worker's stage (:class:`~otel_agentdiag.pipeline.worker.Stage`): the redacted batch recorded
        once, whatever its export does, and passed on whole."""
        self.record_batch(spans)
        return spans, []

    def record_batch(self, spans: Sequence[ReadableSpan]) -> None:
        """Record every span of a redacted batch that is an LLM, tool or agent operation. Never raises."""
        recorded = measured = failed = 0
        for span in spans:
            try:
                n = self._record(span)
            except Exception as exc:  # noqa: BLE001 - a metric is never worth a span or the agent
                failed += 1
                if not self.failed and failed == 1:
                    log_internal_error("recording GenAI metrics", exc)
                continue
            if n:
                recorded += 1
                measured += n
        with self._lock:
            self.spans += recorded
            self.measurements += measured
            self.failed += failed

    def _record(self, span: ReadableSpan) -> int:
        """Record one span's measurements; how many were made."""
        attributes = span_attributes(span)
        kind = attributes.get(sc.AGENTDIAG_KIND)
        operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
        if kind not in _KINDS or operation not in DURATION_OPERATIONS or _TOMBSTONE_KEY in attributes:
            return 0
        start, end, span_context = span.start_time, span.end_time, span.context
        if start is None or end is None or span_context is None:
            return 0
        common = self._common(attributes, operation)
        context = trace.set_span_in_context(NonRecordingSpan(span_context))
        timed = dict(common)
        status = span.status
        if status is not None and status.status_code is StatusCode.ERROR:
            error = self._values.value(sc.ERROR_TYPE, attributes.get(sc.ERROR_TYPE))
            timed[sc.ERROR_TYPE] = error if error is not None else sc.OTHER_VALUE
        self._duration.record(max(end - start, 0) / 1e9, timed, context)
        n = 1
        if kind != sc.KIND_LLM:
            return n
        for key, token_type in _TOKEN_TYPES:
            tokens = attributes.get(key)
            if type(tokens) is int and tokens >= 0:
                self._tokens.record(tokens, {**common, sc.GEN_AI_TOKEN_TYPE: token_type}, context)
                n += 1
        first_chunk = _number(attributes.get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK))
        if first_chunk is not None:
            self._first_chunk.record(first_chunk, common, context)
            n += 1
        cost = _number(attributes.get(sc.AGENTDIAG_COST_USD))
        if cost is not None:
            self._cost.record(cost, common, context)
            n += 1
        return n

    def _common(self, attributes: Mapping[str, Any], operation: str) -> dict[str, str]:
        """The span's metric attributes besides ``error.type``: from :data:`METRIC_KEYS` only, each bounded."""
        bounded = self._values.value
        out = {sc.GEN_AI_OPERATION_NAME: operation}
        provider = attributes.get(sc.GEN_AI_PROVIDER_NAME)
        provider = bounded(sc.GEN_AI_PROVIDER_NAME, attributes.get(sc.GEN_AI_SYSTEM) if provider is None else provider)
        if provider is not None:
            out[sc.GEN_AI_PROVIDER_NAME] = provider
        for key in _SPAN_KEYS:
            value = attributes.get(key)
            if value is not None:
                checked = bounded(key, value)
                if checked is not None:
                    out[key] = checked
        return out

    def stats(self) -> dict[str, int]:
        """The recorder's counters, JSON-ready."""
        with self._lock:
            return {
                "spans": self.spans,
                "measurements": self.measurements,
                "failed": self.failed,
                "folded_values": self._values.folded,
            }
