"""``RedactingSpanProcessor``: rebuilds every ended span under a policy and forwards only the rebuilt span.

It *wraps* the processor it feeds (a batching processor in front of an exporter) instead of sitting beside
it on the provider: sibling processors all see the same frozen span, so a sibling could never redact for its
neighbour. The original span is never forwarded. If redaction itself fails, the span is dropped and counted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Status

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.context import current_conversation_id
from otel_agentdiag._internal.errors import handle_internal_errors, log_internal_error
from otel_agentdiag._internal.names import NameRegistry, default_registry
from otel_agentdiag._internal.spans import attribute_items, span_attributes
from otel_agentdiag.redaction import policy as p
from otel_agentdiag.redaction.hashing import IdHasher

_logger = logging.getLogger(__name__)

_COUNTER_KEYS = {reason: sc.AGENTDIAG_REDACTION_PREFIX + reason for reason in p.REASONS}
_CACHE_LIMIT = 64
_VERDICT_LIMIT = 8192
_UNKNOWN: tuple[None, str] = (None, p.UNKNOWN_KEY)
_INVALID: tuple[None, str] = (None, p.INVALID_VALUE)
_MISSING: Any = object()


def _bare_context(ctx: Any) -> Any:
    """The span context without its W3C ``tracestate``: vendor entries from upstream are data too."""
    if ctx is None or not ctx.trace_state:
        return ctx
    return trace.SpanContext(ctx.trace_id, ctx.span_id, ctx.is_remote, ctx.trace_flags, trace.TraceState())


def _apply(rule: p.Rule, value: Any, ctx: p.RedactionContext) -> tuple[Any, str | None]:
    try:
        return rule.apply(value, ctx)
    except TypeError:  # e.g. an unhashable value from a hand-built span: not a valid attribute
        return _INVALID


class SpanRedactor:
    """The pure part: ``ReadableSpan`` in, redacted ``ReadableSpan`` out. Thread-safe."""

    def __init__(self, policy: p.Policy, hasher: IdHasher, names: NameRegistry | None = None) -> None:
        self.policy = policy
        self._ctx = p.RedactionContext(hasher, names if names is not None else default_registry)
        self._entries: dict[str, tuple[p.Rule | None, dict[str, tuple[Any, str | None]] | None]] = {}
        self._resources: dict[int, tuple[Resource, Resource]] = {}
        self._scopes: dict[int, tuple[InstrumentationScope, InstrumentationScope]] = {}

    # -- attributes -----------------------------------------------------------------------------------
    def _attributes(
        self, attributes: Mapping[str, Any] | None, counts: dict[str, int], only: frozenset[str] | None = None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if not attributes:
            return out
        entries = self._entries
        ctx = self._ctx
        for key, value in attribute_items(attributes):
            entry = entries.get(key)
            if entry is None:
                entry = self._entry(key)
            rule, by_value = entry
            if rule is None or (only is not None and key not in only):
                verdict: tuple[Any, str | None] = _UNKNOWN
            elif by_value is not None and type(value) is str:
                # Strings repeat from span to span (kind, operation, provider, model, the session's ids): a
                # verdict is remembered per key and value. Only strings, since 1 == 1.0 == True.
                verdict = by_value.get(value)  # type: ignore[assignment]
                if verdict is None:
                    verdict = _apply(rule, value, ctx)
                    if len(by_value) >= _VERDICT_LIMIT:
                        by_value.clear()
                    by_value[value] = verdict
            else:
                verdict = _apply(rule, value, ctx)
            new_value, reason = verdict
            if reason is not None:
                counts[reason] = counts.get(reason, 0) + 1
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
    def _events(self, events: Any, counts: dict[str, int]) -> list[Event]:
        out = []
        allowed = self.policy.allowed_events
        for event in events:
            keys = allowed.get(event.name)
            if keys is None:
                counts[p.EVENT_DROPPED] = counts.get(p.EVENT_DROPPED, 0) + 1
                continue
            out.append(Event(event.name, self._attributes(event.attributes, counts, keys), event.timestamp))
        return out

    def _links(self, links: Any, counts: dict[str, int]) -> list[trace.Link]:
        return [trace.Link(_bare_context(link.context), self._attributes(link.attributes, counts)) for link in links]

    # -- resource and scope (shared by many spans: cached) --------------------------------------------
    def _resource(self, resource: Resource) -> Resource:
        cached = self._resources.get(id(resource))
        if cached is not None and cached[0] is resource:
            return cached[1]
        prefixes = self.policy.allowed_resource_prefixes
        kept: dict[str, Any] = {}
        for key, value in resource.attributes.items():
            if not key.startswith(prefixes):
                continue
            if isinstance(value, str):
                value, reason = p.RESOURCE_STRING.apply(value, self._ctx)
                if reason is not None:
                    continue
            elif type(value) not in (bool, int, float):
                continue
            kept[key] = value
        clean = Resource(kept, resource.schema_url)
        if len(self._resources) >= _CACHE_LIMIT:
            self._resources.clear()
        self._resources[id(resource)] = (resource, clean)
        return clean

    def _scope(self, scope: InstrumentationScope | None) -> InstrumentationScope | None:
        if scope is None:
            return None
        cached = self._scopes.get(id(scope))
        if cached is not None and cached[0] is scope:
            return cached[1]
        # Scope name and version are code, still checked as bounded tokens; scope attributes go.
        name, reason = p.RESOURCE_STRING.apply(scope.name, self._ctx)
        version, _ = p.RESOURCE_STRING.apply(scope.version, self._ctx) if scope.version else (None, None)
        clean = InstrumentationScope(sc.OTHER_VALUE if reason else name, version, scope.schema_url)
        if len(self._scopes) >= _CACHE_LIMIT:
            self._scopes.clear()
        self._scopes[id(scope)] = (scope, clean)
        return clean

    # -- the span -------------------------------------------------------------------------------------
    def redact(self, span: ReadableSpan) -> ReadableSpan:
        counts: dict[str, int] = {}
        attributes = self._attributes(span_attributes(span), counts)
        name = self._span_name(span.name, attributes, counts)
        # The SDK's ``events``/``links`` properties copy into a tuple; most spans have neither.
        events: Any = getattr(span, "_events", _MISSING)
        if events is _MISSING:
            events = span.events
        events = self._events(events, counts) if events else ()
        links: Any = getattr(span, "_links", _MISSING)
        if links is _MISSING:
            links = span.links
        links = self._links(links, counts) if links else ()
        status = span.status
        if status.description:
            counts[p.STATUS_DESCRIPTION] = counts.get(p.STATUS_DESCRIPTION, 0) + 1
            status = Status(status.status_code)
        if counts and self.policy.summary == "info":
            for reason, count in counts.items():
                attributes[_COUNTER_KEYS[reason]] = count
        return ReadableSpan(
            name=name,
            context=_bare_context(span.context),
            parent=_bare_context(span.parent),
            resource=self._resource(span.resource),
            attributes=attributes,
            events=events,
            links=links,
            kind=span.kind,
            status=status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=self._scope(span.instrumentation_scope),
        )


class RedactingSpanProcessor(SpanProcessor):
    """Apply ``policy`` to every ended span and hand the rebuilt span to ``span_processor``.

    Fail closed: a span the redactor cannot rebuild is dropped and counted in :attr:`failed`; the original
    is never forwarded. ``on_start`` is not forwarded either (the wrapped processor would see a raw,
    mutable span); it only copies the enclosing agent run's conversation id onto spans that lack it, so
    spans from other instrumentations inside a run can be correlated (the id is hashed at ``on_end``).
    """

    def __init__(
        self,
        span_processor: SpanProcessor,
        *,
        policy: p.Policy | None = None,
        hasher: IdHasher,
        names: NameRegistry | None = None,
    ) -> None:
        self._next = span_processor
        self.redactor = SpanRedactor(policy or p.STRICT, hasher, names)
        self._lock = threading.Lock()
        self._shutdown = False
        self.redacted = 0
        """Spans rebuilt and forwarded."""
        self.failed = 0
        """Spans dropped because the redactor (or the wrapped processor) failed on them."""

    @property
    def policy(self) -> p.Policy:
        return self.redactor.policy

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            conversation = current_conversation_id(parent_context)
            if conversation is not None and sc.GEN_AI_CONVERSATION_ID not in span_attributes(span):
                span.set_attribute(sc.GEN_AI_CONVERSATION_ID, conversation)
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("propagating the conversation id", exc)

    def on_end(self, span: ReadableSpan) -> None:
        if self._shutdown:
            return
        try:
            clean = self.redactor.redact(span)
        except Exception as exc:  # noqa: BLE001 - fail closed: drop, count, never export the original
            with self._lock:
                self.failed += 1
            _logger.warning("otel-agentdiag: a span could not be redacted (%s) and was dropped", type(exc).__name__)
            return
        try:
            self._next.on_end(clean)
        except Exception as exc:  # noqa: BLE001 - a downstream failure must not reach the agent
            with self._lock:
                self.failed += 1
            _logger.warning("otel-agentdiag: the span pipeline failed (%s); span dropped", type(exc).__name__)
            return
        with self._lock:
            self.redacted += 1

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
