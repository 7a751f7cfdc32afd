"""``RedactingSpanProcessor``: rebuilds every ended span under a policy and forwards only the rebuilt span.

It *wraps* the processor it feeds (a batching processor in front of an exporter) instead of sitting beside
it on the provider: sibling processors all see the same frozen span, so a sibling could never redact for its
neighbour. The original span is never forwarded. If redaction itself fails, the span is dropped and counted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Status

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.context import current_conversation_id
from otel_agentdiag._internal.errors import handle_internal_errors, log_internal_error
from otel_agentdiag._internal.fork import reinit_after_fork
from otel_agentdiag._internal.names import NameRegistry, default_registry
from otel_agentdiag._internal.spans import attribute_items, span_attributes
from otel_agentdiag.redaction import policy as p
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.schema_url import allowed_schema_url

if TYPE_CHECKING:
    from otel_agentdiag.content.recorder import ContentRecorder

_logger = logging.getLogger(__name__)

_COUNTER_KEYS = {reason: sc.AGENTDIAG_REDACTION_PREFIX + reason for reason in p.REASONS}
_CACHE_LIMIT = 64
_VERDICT_LIMIT = 8192
_DRIFT_LIMIT = 1024
_DEBUG_KEYS_LIMIT = 64
_UNKNOWN: tuple[None, str] = (None, p.UNKNOWN_KEY)
_MISSING: Any = object()


def attributes_with_ids(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes with the raw correlation ids our instrumentation kept beside it
    (``_internal/ids.py``) laid over them: what a policy decides, exactly as if they had been attributes."""
    attributes = span_attributes(span)
    ids = _ids.TABLE.ids_of(span)
    if not ids:
        return attributes
    merged = dict(attribute_items(attributes))
    merged.update(ids)
    return merged


def _bare_context(ctx: Any) -> Any:
    """The span context without its W3C ``tracestate``: vendor entries from upstream are data too."""
    if ctx is None or not ctx.trace_state:
        return ctx
    return trace.SpanContext(ctx.trace_id, ctx.span_id, ctx.is_remote, ctx.trace_flags, trace.TraceState())


class SpanRedactor:
    """The pure part: ``ReadableSpan`` in, redacted ``ReadableSpan`` out. Thread-safe.

    Any exception it raises means "this span cannot be redacted"; the processor then fails closed.
    """

    def __init__(self, policy: p.Policy, hasher: IdHasher, names: NameRegistry | None = None) -> None:
        if hasher.algorithm != policy.hash_function:
            raise ValueError(
                f"policy {policy.name!r} asks for {policy.hash_function} but the hasher uses {hasher.algorithm}"
            )
        self.policy = policy
        self.hasher = hasher
        self._ctx = p.RedactionContext(hasher, names if names is not None else default_registry)
        self._entries: dict[str, tuple[p.Rule | None, dict[str, tuple[Any, str | None]] | None]] = {}
        # Per resource/scope object: the object, its clean copy, and how many schema URLs the copy lost.
        self._resources: dict[int, tuple[Resource, Resource, int]] = {}
        self._scopes: dict[int, tuple[InstrumentationScope, InstrumentationScope | None, int]] = {}
        self._drift: dict[str, int] = {}
        self._drift_overflow = 0
        self._drift_lock = threading.Lock()
        reinit_after_fork(self._at_fork_reinit)
        self._debug = policy.summary == "debug"
        self._blocked = policy.is_blocked if policy.blocked_values else None

    def _at_fork_reinit(self) -> None:
        """The drift lock is taken on the batch worker: one held there at the fork is replaced in the child."""
        self._drift_lock = threading.Lock()

    # -- attributes -----------------------------------------------------------------------------------
    def _decide(self, rule: p.Rule, value: Any) -> tuple[Any, str | None]:
        verdict = rule.apply(value, self._ctx)
        blocked = self._blocked
        # Every value that is kept, changed or not, meets blocked_values; except digests, which are ours.
        if blocked is not None and verdict[0] is not None and type(rule) is not p.HashedId and blocked(verdict[0]):
            return None, p.PUBLIC_SAFETY_VIOLATION
        return verdict

    def _attributes(
        self,
        attributes: Mapping[str, Any] | None,
        counts: dict[str, int],
        only: frozenset[str] | None = None,
        removed: list[str] | None = None,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if not attributes:
            return out
        entries = self._entries
        for key, value in attribute_items(attributes):
            entry = entries.get(key)
            if entry is None:
                entry = self._entry(key)
            rule, by_value = entry
            if rule is None or (only is not None and key not in only):
                verdict: tuple[Any, str | None] = _UNKNOWN
                if rule is None:
                    self._seen_unknown(key)  # drift: keys no rule knows (not keys merely not kept on an event)
            elif by_value is not None and type(value) is str:
                # Strings repeat from span to span (kind, operation, provider, model, the session's ids): a
                # verdict is remembered per key and value. Only strings, since 1 == 1.0 == True.
                verdict = by_value.get(value)  # type: ignore[assignment]
                if verdict is None:
                    verdict = self._decide(rule, value)
                    if len(by_value) >= _VERDICT_LIMIT:
                        by_value.clear()
                    by_value[value] = verdict
            else:
                verdict = self._decide(rule, value)
            new_value, reason = verdict
            if reason is not None:
                counts[reason] = counts.get(reason, 0) + 1
                if removed is not None and new_value is None:
                    removed.append(key)
            if new_value is not None:
                out[key] = new_value
        return out

    def _entry(self, key: str) -> tuple[p.Rule | None, dict[str, tuple[Any, str | None]] | None]:
        """The rule for ``key`` and, when its verdicts may be remembered, the per-value verdict memo."""
        rule = self.policy.rule_for(key)
        memo: dict[str, tuple[Any, str | None]] | None = {} if rule is not None and rule.cacheable else None
        entry = (rule, memo)
        entries = self._entries
        if len(entries) >= _VERDICT_LIMIT:
            entries.clear()  # keys from a misbehaving instrumentation could be unbounded
        entries[key] = entry
        return entry

    def _seen_unknown(self, key: str) -> None:
        with self._drift_lock:
            drift = self._drift
            if key in drift:
                drift[key] += 1
            elif len(drift) < _DRIFT_LIMIT:
                drift[key] = 1
            else:
                self._drift_overflow += 1

    def drift_report(self, candidates: Iterable[str] = ()) -> dict[str, Any]:
        """What attribute keys this redactor has dropped as unknown, and how often: value-free.

        Keys appear as keyed digests (``attribute_key`` kind) unless the policy's summary is ``debug``;
        ``candidates`` are key names the caller suspects: their digests are shown by name instead, so an
        allowlist can be grown without the report ever listing keys on its own.
        """
        with self._drift_lock:
            drift = dict(self._drift)
            overflow = self._drift_overflow
        known = set(candidates)
        unknown: dict[str, int] = {}
        for key, count in sorted(drift.items()):
            if self._debug or key in known:
                label = key
            else:
                label = self.hasher.digest(sc.ID_KIND_ATTRIBUTE_KEY, key)
            unknown[label] = unknown.get(label, 0) + count
        return {
            "policy": self.policy.name,
            "summary": self.policy.summary,
            "unknown_keys": unknown,
            "distinct_keys": len(drift),
            "overflow": overflow,
        }

    # -- name -----------------------------------------------------------------------------------------
    def _span_name(self, original: str, attributes: Mapping[str, Any], counts: dict[str, int]) -> str:
        operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
        kind = attributes.get(sc.AGENTDIAG_KIND)
        name: str | None = None
        if operation is not None:
            if operation in (sc.OP_INVOKE_AGENT, sc.OP_CREATE_AGENT):
                target = attributes.get(sc.GEN_AI_AGENT_NAME)
            elif operation == sc.OP_EXECUTE_TOOL:
                target = attributes.get(sc.GEN_AI_TOOL_NAME)
            else:
                target = attributes.get(sc.GEN_AI_REQUEST_MODEL)
            name = f"{operation} {target}" if target is not None else operation
        elif kind == sc.KIND_ITERATION:
            name = sc.ITERATION_SPAN_NAME
        elif original in self.policy.allowed_span_names:
            name = original
        if name is None:
            name = sc.OTHER_VALUE
        if name != original:
            counts[p.SPAN_NAME] = counts.get(p.SPAN_NAME, 0) + 1
        return name

    # -- events and links -----------------------------------------------------------------------------
    def _events(self, events: Any, counts: dict[str, int], removed: list[str] | None) -> list[Event]:
        out = []
        policy = self.policy
        allowed = policy.allowed_events
        for event in events:
            keys = allowed.get(event.name)
            if keys is None:
                counts[p.EVENT_DROPPED] = counts.get(p.EVENT_DROPPED, 0) + 1
                continue
            source = event.attributes
            attributes = self._attributes(source, counts, keys, removed)
            if policy.exception_fingerprint and event.name == sc.EXCEPTION_EVENT_NAME and source:
                message = source.get(sc.EXCEPTION_MESSAGE)
                if isinstance(message, str) and sc.AGENTDIAG_EXCEPTION_FINGERPRINT not in source:
                    attributes[sc.AGENTDIAG_EXCEPTION_FINGERPRINT] = self.hasher.digest(
                        sc.ID_KIND_EXCEPTION_MESSAGE, message
                    )
                    counts[p.HASHED] = counts.get(p.HASHED, 0) + 1
            out.append(Event(event.name, attributes, event.timestamp))
        return out

    def _links(self, links: Any, counts: dict[str, int], removed: list[str] | None) -> list[trace.Link]:
        return [
            trace.Link(_bare_context(link.context), self._attributes(link.attributes, counts, None, removed))
            for link in links
        ]

    # -- resource and scope (shared by many spans: cached) --------------------------------------------
    def _table(self, attributes: Mapping[str, Any] | None, lookup: Any) -> dict[str, Any]:
        kept: dict[str, Any] = {}
        for key, value in (attributes or {}).items():
            rule = lookup(key)
            if rule is None:
                continue
            new_value, _ = self._decide(rule, value)
            if new_value is not None:
                kept[key] = new_value
        return kept

    def _resource(self, resource: Resource) -> tuple[Resource, int]:
        """The clean resource, and how many schema URLs it lost (0 or 1: counted on every span of it)."""
        cached = self._resources.get(id(resource))
        if cached is not None and cached[0] is resource:
            return cached[1], cached[2]
        schema_url, dropped = _schema_url(resource.schema_url)
        clean = Resource(self._table(resource.attributes, self.policy.resource_rule_for), schema_url)
        if len(self._resources) >= _CACHE_LIMIT:
            self._resources.clear()
        self._resources[id(resource)] = (resource, clean, dropped)
        return clean, dropped

    def _scope(self, scope: InstrumentationScope | None) -> tuple[InstrumentationScope | None, int]:
        """The clean scope, and how many schema URLs it lost (0 or 1)."""
        if scope is None:
            return None, 0
        cached = self._scopes.get(id(scope))
        if cached is not None and cached[0] is scope:
            return cached[1], cached[2]
        # Scope name and version are code, still checked as bounded, non-sensitive strings.
        name, _ = self._decide(_SCOPE_STRING, scope.name)
        version, _ = self._decide(_SCOPE_STRING, scope.version) if scope.version else (None, None)
        attributes = self._table(getattr(scope, "attributes", None), self.policy.scope_rule_for)
        schema_url, dropped = _schema_url(scope.schema_url)
        clean = InstrumentationScope(
            name if isinstance(name, str) else sc.OTHER_VALUE, version, schema_url, attributes or None
        )
        if len(self._scopes) >= _CACHE_LIMIT:
            self._scopes.clear()
        self._scopes[id(scope)] = (scope, clean, dropped)
        return clean, dropped

    # -- the span -------------------------------------------------------------------------------------
    def redact(self, span: ReadableSpan) -> ReadableSpan:
        counts: dict[str, int] = {}
        removed: list[str] | None = [] if self._debug else None
        attributes = self._attributes(attributes_with_ids(span), counts, None, removed)
        name = self._span_name(span.name, attributes, counts)
        # The SDK's ``events``/``links`` properties copy into a tuple; most spans have neither.
        events: Any = getattr(span, "_events", _MISSING)
        if events is _MISSING:
            events = span.events
        events = self._events(events, counts, removed) if events else ()
        links: Any = getattr(span, "_links", _MISSING)
        if links is _MISSING:
            links = span.links
        links = self._links(links, counts, removed) if links else ()
        status = span.status
        if status.description:
            counts[p.STATUS_DESCRIPTION] = counts.get(p.STATUS_DESCRIPTION, 0) + 1
            status = Status(status.status_code)
        resource, resource_dropped = self._resource(span.resource)
        scope, scope_dropped = self._scope(span.instrumentation_scope)
        if resource_dropped or scope_dropped:
            counts[p.SCHEMA_URL] = resource_dropped + scope_dropped
        if counts and self.policy.summary != "silent":
            for reason, count in counts.items():
                attributes[_COUNTER_KEYS[reason]] = count
            if removed:
                attributes[sc.AGENTDIAG_REDACTION_KEYS] = self._debug_keys(removed)
        return ReadableSpan(
            name=name,
            context=_bare_context(span.context),
            parent=_bare_context(span.parent),
            resource=resource,
            attributes=attributes,
            events=events,
            links=links,
            kind=span.kind,
            status=status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=scope,
        )

    def _debug_keys(self, removed: list[str]) -> tuple[str, ...]:
        """Removed key names for ``summary="debug"``; a name that is not key-shaped (prose, an address, a very
        long key) is itself data and is listed as ``_OTHER``."""
        item = p.DEBUG_KEYS.item
        names = {key if item.apply(key, self._ctx)[1] is None else sc.OTHER_VALUE for key in removed}
        return tuple(sorted(names)[:_DEBUG_KEYS_LIMIT])

    def accounting_attributes(self, span: ReadableSpan) -> dict[str, Any]:
        """The attributes that file a span in the books, each through its own rule: session digest, observer
        id and sequence number. Whatever cannot be decided is left out (this runs after a failure)."""
        out: dict[str, Any] = {}
        attributes = attributes_with_ids(span)
        for key in (sc.GEN_AI_CONVERSATION_ID, sc.SESSION_ID, sc.AGENTDIAG_OBSERVER_ID, sc.AGENTDIAG_SEQUENCE):
            try:
                rule = self.policy.rule_for(key) if key in attributes else None
                value = None if rule is None else self._decide(rule, attributes[key])[0]
            except Exception:  # noqa: BLE001 - a rule that fails here is left out, not retried
                continue
            if value is not None:
                out[key] = value
        return out

    def tombstone(self, span: ReadableSpan) -> ReadableSpan:
        """What replaces a span that could not be redacted: ids, timing, kind, status code, and its place in the
        books (session digest, observer id, sequence number; so the session's receipt sees it), nothing else."""
        try:
            resource = self._resource(span.resource)[0]
        except Exception:  # noqa: BLE001 - the resource may be what failed
            resource = Resource.get_empty()
        attributes = self.accounting_attributes(span)
        attributes[_COUNTER_KEYS[p.REDACTOR_ERROR]] = 1
        return ReadableSpan(
            name=sc.TOMBSTONE_SPAN_NAME,
            context=_bare_context(span.context),
            parent=_bare_context(span.parent),
            resource=resource,
            attributes=attributes,
            kind=span.kind,
            status=Status(span.status.status_code),
            start_time=span.start_time,
            end_time=span.end_time,
        )


_SCOPE_STRING = p.Scalar(256)


def _schema_url(url: str | None) -> tuple[str | None, int]:
    """The schema URL to export and whether one was removed: only OpenTelemetry schema URLs leave."""
    if not url:
        return None, 0
    return (url, 0) if allowed_schema_url(url) else (None, 1)


class RedactingSpanProcessor(SpanProcessor):
    """Apply ``policy`` to every ended span and hand the rebuilt span to ``span_processor``.

    Fail closed: when the redactor cannot rebuild a span (a rule or callback raised), the original is never
    forwarded; per ``policy.on_error`` a tombstone (ids, timing, kind, status code and
    ``agentdiag.redaction.redactor_error``) goes in its place, or nothing. Either way it is counted.

    ``redact_in_worker=True`` (what ``configure()`` uses) moves the redaction off the thread that ends the span:
    ``span_processor`` must be an :class:`~otel_agentdiag.pipeline.AccountingBatchSpanProcessor`, which then
    queues spans as they ended and passes every one through :meth:`finish_span` on its worker thread before any
    exporter sees it. Same policy, same fail-closed outcome, same counts; the agent's thread pays only for
    queueing. The raw spans wait in the queue in process memory (bounded, as the SDK's own batching does).

    ``content`` (the local store's branch only, from ``configure(capture_content=True)``): content captured
    for a span moves onto its redacted copy, where the SQLite exporter finds it. It never becomes an attribute,
    so the policy never sees it and no other branch carries it.

    Correlation ids our instrumentation kept beside the span (``_internal/ids.py``, never on it) are laid over
    its attributes before the policy applies, so they leave as this destination's digests and nowhere raw.

    ``on_start`` is not forwarded (the wrapped processor would see a raw, mutable span); it only records the
    enclosing agent run's conversation id beside spans that lack one, so spans from other instrumentations
    inside a run are filed under its session (as a digest, at ``on_end``), while no other processor on the
    provider sees the raw id.

    Counters (monotonic, read without a lock): ``redacted`` spans rebuilt and forwarded; ``failed`` spans
    the redactor could not rebuild (of which ``tombstoned`` were replaced by a tombstone); ``dropped`` spans
    nothing was forwarded for (a failure with ``on_error="drop"``, or the wrapped processor raised).
    """

    def __init__(
        self,
        span_processor: SpanProcessor,
        *,
        policy: p.Policy | None = None,
        hasher: IdHasher,
        names: NameRegistry | None = None,
        propagate_conversation: bool = True,
        redact_in_worker: bool = False,
        content: ContentRecorder | None = None,
    ) -> None:
        self._next = span_processor
        self._content = content
        """The local store's branch only: captured content moves from each ended span onto its redacted copy."""
        self._propagate = propagate_conversation
        """``False`` when something before it on the provider (``configure()``'s sequencer) already records the
        run's conversation id beside spans at start and pins their ids at end: one on_start and one pin less per
        span and destination."""
        self.redactor = SpanRedactor(policy or p.STRICT, hasher, names)
        self._lock = threading.Lock()
        self._shutdown = False
        self.redacted = 0
        """Spans rebuilt and forwarded."""
        self.failed = 0
        """Spans the redactor could not rebuild (never forwarded as they were)."""
        self.tombstoned = 0
        """Failed spans replaced by a tombstone."""
        self.dropped = 0
        """Spans for which nothing was forwarded."""
        self._in_worker = False
        reinit_after_fork(self._at_fork_reinit)
        if redact_in_worker:
            attach = getattr(span_processor, "set_finisher", None)
            if attach is None:
                raise TypeError(
                    "redact_in_worker=True needs a span processor that redacts on its export thread "
                    f"(AccountingBatchSpanProcessor); {type(span_processor).__name__} cannot"
                )
            attach(self)
            self._in_worker = True

    def _at_fork_reinit(self) -> None:
        """The counters' lock is taken on the batch worker: one held there at the fork is replaced in the child."""
        self._lock = threading.Lock()

    exports_only_redacted = True
    """It forwards only the spans it rebuilt (see :func:`otel_agentdiag.pipeline.audit.foreign_processors`)."""

    @property
    def policy(self) -> p.Policy:
        return self.redactor.policy

    @property
    def redacts_in_worker(self) -> bool:
        """Whether the wrapped batch processor redacts every span on its worker (``redact_in_worker=True``)."""
        return self._in_worker

    def drift_report(self, candidates: Iterable[str] = ()) -> dict[str, Any]:
        """See :meth:`SpanRedactor.drift_report`."""
        return self.redactor.drift_report(candidates)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not self._propagate:
            return
        try:
            conversation = current_conversation_id(parent_context)
            if conversation is not None and sc.GEN_AI_CONVERSATION_ID not in span_attributes(span):
                _ids.TABLE.record_conversation(span, conversation)  # beside the span, never on it
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("propagating the conversation id", exc)

    def _count(self, counter: str) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)

    def on_end(self, span: ReadableSpan) -> None:
        if self._shutdown:
            return
        if self._propagate:
            # The span's raw ids are tied to the ended span: found there by finish_span() on the worker, and
            # released with it. Without propagation the processor that recorded them at start (configure()'s
            # sequencer, first on the provider) has pinned them already.
            try:
                _ids.TABLE.pin(span)
            except Exception as exc:  # noqa: BLE001
                log_internal_error("handing a span's ids over", exc)
        if self._in_worker:
            # Queued as it ended; the batch processor's worker calls finish_span() before export.
            self._forward(span)
            return
        clean, tombstone = self._redact_or_tombstone(span)
        if clean is None:
            self._report_rejected(span)
        elif self._forward(clean):
            self._count("tombstoned" if tombstone else "redacted")

    def _redact_or_tombstone(self, span: ReadableSpan) -> tuple[ReadableSpan | None, bool]:
        """The redacted span; on failure the tombstone (``on_error="tombstone"``) or None (nothing may go on);
        and whether it is a tombstone. Counts ``failed`` and, for None, ``dropped``.
        """
        try:
            clean = self.redactor.redact(span)
            if self._content is not None:
                self._content.transfer(span, clean)
            return clean, False
        except Exception as exc:  # noqa: BLE001 - fail closed: never export the original
            self._count("failed")
            _logger.warning(
                "otel-agentdiag: a span could not be redacted (%s); %s",
                type(exc).__name__,
                "a tombstone was exported instead" if self.policy.on_error == "tombstone" else "it was dropped",
            )
        if self._content is not None:
            self._content.discard(span)  # a tombstone carries nothing of the span
        if self.policy.on_error == "tombstone":
            try:
                return self.redactor.tombstone(span), True
            except Exception:  # noqa: BLE001
                pass
        self._count("dropped")
        return None, False

    # -- finishing on the batch processor's worker (redact_in_worker=True) ---------------------------------
    def finish_span(self, span: ReadableSpan) -> ReadableSpan | None:
        """:class:`~otel_agentdiag.pipeline.batching.SpanFinisher`: the span to export, or None (rejected: the
        batch processor counts it as ``redactor_error``). Runs on the worker thread; never raises."""
        try:
            clean, tombstone = self._redact_or_tombstone(span)
            if clean is not None:
                self._count("tombstoned" if tombstone else "redacted")
            return clean
        except Exception as exc:  # noqa: BLE001 - counted as rejected by the caller
            log_internal_error("redacting a span", exc)
            return None

    def session_of(self, span: ReadableSpan) -> str | None:
        """:class:`~otel_agentdiag.pipeline.batching.SpanFinisher`: the session digest of an unfinished span."""
        try:
            kept = self.redactor.accounting_attributes(span)
            found = kept.get(sc.GEN_AI_CONVERSATION_ID, kept.get(sc.SESSION_ID))
            return found if isinstance(found, str) else None
        except Exception:  # noqa: BLE001 - the span is still counted, without its session
            return None

    def _report_rejected(self, span: ReadableSpan) -> None:
        """Tell the wrapped processor, if it keeps accounts (``record_rejected``), that a span was rejected.

        It is filed under the session digest the store would have used, when that can still be computed.
        """
        record = getattr(self._next, "record_rejected", None)
        if record is None:
            return
        try:
            record(self.session_of(span), p.REDACTOR_ERROR)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("counting a rejected span", exc)

    def _forward(self, span: ReadableSpan) -> bool:
        try:
            self._next.on_end(span)
        except Exception as exc:  # noqa: BLE001 - a downstream failure must not reach the agent
            self._count("dropped")
            _logger.warning("otel-agentdiag: the span pipeline failed (%s); span dropped", type(exc).__name__)
            return False
        return True

    def shutdown(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        with handle_internal_errors("shutting down the span pipeline"):
            self._next.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with handle_internal_errors("flushing the span pipeline"):
            return self._next.force_flush(timeout_millis)
        return False
