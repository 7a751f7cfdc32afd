"""``SpanRedactor``: the pure per-span transform, one ended span in, the span rebuilt under a policy out.

Each attribute value goes through the rule the policy names for its key (verdicts for repeated strings are
remembered); the span name is rebuilt from the redacted attributes; events, links, status, resource and scope
are rebuilt too; what was removed is counted on the span (``agentdiag.redaction.<reason>``), never its value.
Nothing here forwards or exports a span: :mod:`~otel_agentdiag.redaction.processor` does, and fails closed when
this raises.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Status

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.fork import reinit_after_fork
from otel_agentdiag._internal.names import NameRegistry, default_registry
from otel_agentdiag._internal.sdk import attribute_dict, attribute_items, span_attributes, span_fields
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.reasons import (
    EVENT_DROPPED,
    HASHED,
    INVALID_VALUE,
    PUBLIC_SAFETY_VIOLATION,
    REASONS,
    REDACTOR_ERROR,
    SCHEMA_URL,
    SPAN_NAME,
    STATUS_DESCRIPTION,
    UNKNOWN_KEY,
)
from otel_agentdiag.redaction.rules import (
    DEBUG_KEYS,
    INT64_RANGE,
    FloatRange,
    HashedId,
    IntRange,
    RedactionContext,
    Rule,
    Scalar,
)
from otel_agentdiag.redaction.schema_url import allowed_schema_url

_COUNTER_KEYS = {reason: sc.AGENTDIAG_REDACTION_PREFIX + reason for reason in REASONS}
_CACHE_LIMIT = 64
_VERDICT_LIMIT = 8192
_DRIFT_LIMIT = 1024
_DEBUG_KEYS_LIMIT = 64
_UNKNOWN: tuple[None, str] = (None, UNKNOWN_KEY)
_INVALID: tuple[None, str] = (None, INVALID_VALUE)


_Entry = tuple[Rule | None, dict[str, tuple[Any, str | None]] | None, tuple[float, float] | None]
"""Per attribute key: its rule, the per-value verdict memo (strings; None: not cacheable), the int range."""


def _int_bounds(rule: Rule | None) -> tuple[float, float] | None:
    """``(lo, hi)`` when ``rule``'s verdict for an ``int`` (exactly; not a bool) is ``(value, None)`` for
    ``lo <= value <= hi`` and ``(None, invalid_value)`` otherwise, whatever the int; else None.

    Exact types only: a subclass may override ``apply``."""
    kind = type(rule)
    if kind is IntRange or kind is FloatRange:
        return rule.minimum, rule.maximum  # type: ignore[union-attr]
    if kind is Scalar:
        return INT64_RANGE
    return None


def attributes_with_ids(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes with what our instrumentation and sequencer kept beside it (``_internal/ids.py``:
    raw correlation ids, the span's numbers) laid over them: what a policy decides, exactly as if they had been
    attributes."""
    return _ids.TABLE.laid_over(span, attribute_dict(span_attributes(span)))


def _bare_context(ctx: Any) -> Any:
    """The span context without its W3C ``tracestate``: vendor entries from upstream are data too."""
    if ctx is None or not ctx.trace_state:
        return ctx
    return trace.SpanContext(ctx.trace_id, ctx.span_id, ctx.is_remote, ctx.trace_flags, trace.TraceState())


class _CleanResource(Resource):
    """A clean ``Resource`` that computes its hash once. A ``Resource``'s attributes are immutable, so its hash
    never changes, and every span of a provider shares one clean resource: the SDK's OTLP encoder groups each
    batch by resource and hashes it once per span (a key-sorted JSON of every attribute each time, about a
    tenth of what it spends on a span), on the worker and in ``agentdiag push``."""

    def __init__(self, attributes: Mapping[str, Any], schema_url: str | None) -> None:
        super().__init__(attributes, schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


class SpanRedactor:
    """The pure part: ``ReadableSpan`` in, redacted ``ReadableSpan`` out. Thread-safe.

    Any exception it raises means "this span cannot be redacted"; the processor then fails closed.
    """

    def __init__(self, policy: Policy, hasher: IdHasher, names: NameRegistry | None = None) -> None:
        if hasher.algorithm != policy.hash_function:
            raise ValueError(
                f"policy {policy.name!r} asks for {policy.hash_function} but the hasher uses {hasher.algorithm}"
            )
        self.policy = policy
        self.hasher = hasher
        self._ctx = RedactionContext(hasher, names if names is not None else default_registry)
        self._entries: dict[str, _Entry] = {}
        # Per resource object: the object, its clean copy, and what the copy lost, by reason (a value that broke
        # its rule, a schema URL; not the keys no rule names). Per scope: how many schema URLs its copy lost.
        self._resources: dict[int, tuple[Resource, Resource, dict[str, int]]] = {}
        self._scopes: dict[int, tuple[InstrumentationScope, InstrumentationScope | None, int]] = {}
        self._drift: dict[str, int] = {}
        self._drift_overflow = 0
        self._drift_lock = threading.Lock()
        reinit_after_fork(self._at_fork_reinit)
        self._debug = policy.summary == "debug"
        self._silent = policy.summary == "silent"
        self._blocked = policy.is_blocked if policy.blocked_values else None
        self._speaks_openinference = self._keeps_openinference_kinds()

    def _keeps_openinference_kinds(self) -> bool:
        """Whether the policy lets ``openinference.span.kind`` out unchanged with every value we would give it
        (the presets do: a closed set); a policy that does not hears nothing from us."""
        rule = self.policy.rule_for(sc.OPENINFERENCE_SPAN_KIND)
        if rule is None:
            return False
        try:
            return all(self._decide(rule, v) == (v, None) for v in (*_OPENINFERENCE_KINDS.values(), "EMBEDDING"))
        except Exception:  # noqa: BLE001 - a rule that cannot decide a constant: say nothing
            return False

    def _at_fork_reinit(self) -> None:
        """The drift lock is taken on the batch worker: one held there at the fork is replaced in the child."""
        self._drift_lock = threading.Lock()

    # -- attributes -----------------------------------------------------------------------------------
    def _decide(self, rule: Rule, value: Any) -> tuple[Any, str | None]:
        verdict = rule.apply(value, self._ctx)
        blocked = self._blocked
        # Every value that is kept, changed or not, meets blocked_values; except digests, which are ours.
        if blocked is not None and verdict[0] is not None and type(rule) is not HashedId and blocked(verdict[0]):
            return None, PUBLIC_SAFETY_VIOLATION
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
            rule, by_value, bounds = entry
            if rule is None or (only is not None and key not in only):
                verdict: tuple[Any, str | None] = _UNKNOWN
                if rule is None:
                    self._seen_unknown(key)  # drift: keys no rule knows (not keys merely not kept on an event)
            elif bounds is not None and type(value) is int:
                # The rule's decision for an int, decided once per key (see _int_bounds): no call per value.
                verdict = (value, None) if bounds[0] <= value <= bounds[1] else _INVALID
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

    def _entry(self, key: str) -> _Entry:
        """The rule for ``key``; when its verdicts may be remembered, the per-value verdict memo; and when its
        decision for an ``int`` is a range test (and no blocked value can apply), the range."""
        rule = self.policy.rule_for(key)
        memo: dict[str, tuple[Any, str | None]] | None = {} if rule is not None and rule.cacheable else None
        entry = (rule, memo, None if self._blocked is not None else _int_bounds(rule))
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
        elif type(method := attributes.get(sc.MCP_METHOD_NAME)) is str:
            # An MCP request's span is named by its method (the conventions' ``{mcp.method.name}``): a closed set,
            # already redacted. Its target (a prompt name, a resource URI) is data and stays out.
            name = method
        elif original in self.policy.allowed_span_names:
            name = original
        if name is None:
            name = sc.OTHER_VALUE
        if name != original:
            counts[SPAN_NAME] = counts.get(SPAN_NAME, 0) + 1
        return name

    # -- events and links -----------------------------------------------------------------------------
    def _events(self, events: Any, counts: dict[str, int], removed: list[str] | None) -> list[Event]:
        out = []
        policy = self.policy
        allowed = policy.allowed_events
        for event in events:
            keys = allowed.get(event.name)
            if keys is None:
                counts[EVENT_DROPPED] = counts.get(EVENT_DROPPED, 0) + 1
                continue
            source = event.attributes
            attributes = self._attributes(source, counts, keys, removed)
            if policy.exception_fingerprint and event.name == sc.EXCEPTION_EVENT_NAME and source:
                message = source.get(sc.EXCEPTION_MESSAGE)
                if isinstance(message, str) and sc.AGENTDIAG_EXCEPTION_FINGERPRINT not in source:
                    attributes[sc.AGENTDIAG_EXCEPTION_FINGERPRINT] = self.hasher.digest(
                        sc.ID_KIND_EXCEPTION_MESSAGE, message
                    )
                    counts[HASHED] = counts.get(HASHED, 0) + 1
            out.append(Event(event.name, attributes, event.timestamp))
        return out

    def _links(self, links: Any, counts: dict[str, int], removed: list[str] | None) -> list[trace.Link]:
        return [
            trace.Link(_bare_context(link.context), self._attributes(link.attributes, counts, None, removed))
            for link in links
        ]

    # -- resource and scope (shared by many spans: cached) --------------------------------------------
    def _table(
        self, attributes: Mapping[str, Any] | None, lookup: Any, counts: dict[str, int] | None = None
    ) -> dict[str, Any]:
        """The attributes ``lookup`` names a rule for, each through its rule; into ``counts`` the reason of every
        value a rule changed or refused (a key without a rule is left out uncounted: resources carry many)."""
        kept: dict[str, Any] = {}
        for key, value in (attributes or {}).items():
            rule = lookup(key)
            if rule is None:
                continue
            new_value, reason = self._decide(rule, value)
            if reason is not None and counts is not None:
                counts[reason] = counts.get(reason, 0) + 1
            if new_value is not None:
                kept[key] = new_value
        return kept

    def _resource(self, resource: Resource) -> tuple[Resource, dict[str, int]]:
        """The clean resource, and what it lost by reason: values its rules refused (a ``service.version`` that
        looks like a key: ``public_safety_violation``) and a schema URL. Counted on every span of it, so a value
        removed from the resource leaves a reason on each span, as one removed from the span does."""
        cached = self._resources.get(id(resource))
        if cached is not None and cached[0] is resource:
            return cached[1], cached[2]
        lost: dict[str, int] = {}
        schema_url, dropped = _schema_url(resource.schema_url)
        clean = _CleanResource(self._table(resource.attributes, self.policy.resource_rule_for, lost), schema_url)
        if dropped:
            lost[SCHEMA_URL] = dropped
        if len(self._resources) >= _CACHE_LIMIT:
            self._resources.clear()
        self._resources[id(resource)] = (resource, clean, lost)
        return clean, lost

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

    def clean_resource(self, resource: Resource) -> Resource:
        """The resource as :meth:`redact` rebuilds it for a span of ``resource`` (the same clean object for the
        same input object while it is cached)."""
        return self._resource(resource)[0]

    # -- the span -------------------------------------------------------------------------------------
    def redact(self, span: ReadableSpan) -> ReadableSpan:
        counts: dict[str, int] = {}
        removed: list[str] | None = [] if self._debug else None
        attributes = self._attributes(attributes_with_ids(span), counts, None, removed)
        if self._speaks_openinference and sc.OPENINFERENCE_SPAN_KIND not in attributes:
            # Speak back: OpenInference readers (Phoenix) see our kinds; a closed value derived from a kept one.
            spoken = _OPENINFERENCE_KINDS.get(attributes.get(sc.AGENTDIAG_KIND))  # type: ignore[arg-type]
            if spoken is not None:
                if spoken == "LLM" and attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EMBEDDINGS:
                    spoken = "EMBEDDING"
                attributes[sc.OPENINFERENCE_SPAN_KIND] = spoken
        original, context, parent, kind, start, end, status, resource, scope, events, links = span_fields(span)
        name = self._span_name(original, attributes, counts)
        events = self._events(events, counts, removed) if events else ()
        links = self._links(links, counts, removed) if links else ()
        if status.description:
            counts[STATUS_DESCRIPTION] = counts.get(STATUS_DESCRIPTION, 0) + 1
            status = Status(status.status_code)
        # Resource and scope are shared by many spans: the cached clean copies, looked up inline when present.
        cached_resource = self._resources.get(id(resource))
        if cached_resource is not None and cached_resource[0] is resource:
            _, resource, resource_lost = cached_resource
        else:
            resource, resource_lost = self._resource(resource)
        cached_scope = self._scopes.get(id(scope))
        if cached_scope is not None and cached_scope[0] is scope:
            _, scope, scope_dropped = cached_scope
        else:
            scope, scope_dropped = self._scope(scope)
        if resource_lost:
            for reason, count in resource_lost.items():
                counts[reason] = counts.get(reason, 0) + count
        if scope_dropped:
            counts[SCHEMA_URL] = counts.get(SCHEMA_URL, 0) + scope_dropped
        if counts and not self._silent:
            for reason, count in counts.items():
                attributes[_COUNTER_KEYS[reason]] = count
            if removed:
                attributes[sc.AGENTDIAG_REDACTION_KEYS] = self._debug_keys(removed)
        return ReadableSpan(
            name=name,
            context=_bare_context(context) if context is not None and context.trace_state else context,
            parent=_bare_context(parent) if parent is not None and parent.trace_state else parent,
            resource=resource,
            attributes=attributes,
            events=events,
            links=links,
            kind=kind,
            status=status,
            start_time=start,
            end_time=end,
            instrumentation_scope=scope,
        )

    def _debug_keys(self, removed: list[str]) -> tuple[str, ...]:
        """Removed key names for ``summary="debug"``; a name that is not key-shaped (prose, an address, a very
        long key) is itself data and is listed as ``_OTHER``."""
        item = DEBUG_KEYS.item
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
        attributes[_COUNTER_KEYS[REDACTOR_ERROR]] = 1
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


_SCOPE_STRING = Scalar(256)

_OPENINFERENCE_KINDS: dict[str, str] = {
    sc.KIND_RUN: "AGENT",
    sc.KIND_ITERATION: "CHAIN",
    sc.KIND_LLM: "LLM",
    sc.KIND_TOOL: "TOOL",
}
"""Our kind → ``openinference.span.kind`` (``other`` says nothing: OpenInference readers show it as unknown)."""

"""The SDK's own span classes, whose properties read the slots :meth:`SpanRedactor.redact` reads directly."""


def _schema_url(url: str | None) -> tuple[str | None, int]:
    """The schema URL to export and whether one was removed: only OpenTelemetry schema URLs leave."""
    if not url:
        return None, 0
    return (url, 0) if allowed_schema_url(url) else (None, 1)
