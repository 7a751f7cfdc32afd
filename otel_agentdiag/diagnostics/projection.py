"""The strict-policy projection of stored spans: what may leave the machine (bundles, OTLP/Jaeger files, push).

Every stored row is turned back into a :class:`~opentelemetry.sdk.trace.ReadableSpan` and rebuilt by a
:class:`~otel_agentdiag.redaction.SpanRedactor` under the strict policy, with the store's own hash key, so
the digests already in the store pass through unchanged (a ``HashedId`` accepts a digest made with its key).
A row that cannot take part is **omitted and counted, never serialized**:

- ``corrupt_row``: a JSON column did not decode (:attr:`StoredSpan.corrupt`);
- ``invalid_row``: the row does not convert to a span (ids that are not hex, times that are not integers, an
  event or link of the wrong shape: a row of a schema this version does not know);
- ``redactor_error``: the redactor raised on it;
- ``tombstone``: the row is (or the redactor made it) a redaction tombstone: a placeholder, not a span.

Tool and agent names: the strict policy keeps only registered names. A store is read by a process that did not
register the capturing program's names, so by default the registry is rebuilt from the rows themselves: a
name a row carries is taken if it is registrable (an identifier-like token, as
:data:`~otel_agentdiag._internal.names.NAME_PATTERN` says, that passes the public-safety check: a row is
re-validated, not trusted, and one written by hand may hold a token shaped like a name). Both presets stored
only registered names, so this restores the capture-time registry; pass ``names`` to decide otherwise (an
empty registry turns every tool and agent name into ``_OTHER``).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_agentdiag import environment_variables as env
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import reason_codes
from otel_agentdiag._internal.names import NAME_KEYS, NAME_PATTERN, NameRegistry
from otel_agentdiag.redaction import hash_keys, hashing
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.redaction.processor import SpanRedactor
from otel_agentdiag.redaction.recognizers import is_sensitive
from otel_agentdiag.storage import StoredSpan

__all__ = [
    "OMIT_CORRUPT_ROW",
    "OMIT_INVALID_ROW",
    "OMIT_REASONS",
    "OMIT_REDACTOR_ERROR",
    "OMIT_TOMBSTONE",
    "Projection",
    "load_store_hasher",
    "names_registry",
    "project_row",
    "registrable",
    "row_names",
    "scope_of",
    "stored_names",
    "stored_to_readable",
    "strict_projection",
]

_logger = logging.getLogger(__name__)

OMIT_CORRUPT_ROW = "corrupt_row"
OMIT_INVALID_ROW = "invalid_row"
OMIT_REDACTOR_ERROR = reason_codes.REDACTOR_ERROR
OMIT_TOMBSTONE = "tombstone"
OMIT_REASONS = (OMIT_CORRUPT_ROW, OMIT_INVALID_ROW, OMIT_REDACTOR_ERROR, OMIT_TOMBSTONE)
"""Why a stored row was left out of a projection (keys of :attr:`Projection.omitted_reasons`)."""

_STATUS = {"ok": StatusCode.OK, "error": StatusCode.ERROR, "unset": StatusCode.UNSET}
_STATUSES = {text: Status(code) for text, code in _STATUS.items()}
"""One shared ``Status`` per stored status (it holds no description, and a ``Status`` is never changed)."""
_KINDS = {kind.name.lower(): kind for kind in SpanKind}
_TOMBSTONE_KEY = reason_codes.TOMBSTONE_COUNTER
_MAX_TRACE_ID = (1 << 128) - 1
_MAX_SPAN_ID = (1 << 64) - 1


def load_store_hasher(store_path: Path) -> IdHasher | None:
    """The hash key of the store at ``store_path`` as ``configure()`` resolves it: ``AGENTDIAG_HASH_KEY``, else
    the ``hash.key`` file beside the store. Never creates a key file; None when there is neither (or the file
    cannot be read).

    A refused key raises, never falls back: :class:`~otel_agentdiag.redaction.WeakKeyError` for a weak variable
    or file, :class:`~otel_agentdiag._internal.trust.UntrustedPathError` for a key file (or folder) that is not
    ours, is writable by others or is a symbolic link (someone else would know that key)."""
    from_env = hash_keys.environment_key(env.AGENTDIAG_HASH_KEY)
    if from_env is not None:
        return IdHasher(from_env)
    key_path = hash_keys.key_file_path(Path(store_path))
    try:
        key = hashing.read_key_file(key_path)
    except OSError as exc:
        _logger.warning("otel-agentdiag: cannot read the hash key file %s (%s)", key_path, exc.strerror)
        return None
    return None if key is None else IdHasher(key)


def _hex_id(text: Any, maximum: int) -> int:
    if not isinstance(text, str) or not text or len(text) > (32 if maximum == _MAX_TRACE_ID else 16):
        raise ValueError("not a hex id")
    value = int(text, 16)
    if not 0 < value <= maximum:
        raise ValueError("not a valid id")
    return value


def _ns(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("not a time in nanoseconds")
    return value


def _mapping(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("not an attribute mapping")
    key_types = set(map(type, value))  # one pass in C; a key of a str subclass is checked the slow way
    if key_types and key_types != _STR_ONLY and not all(isinstance(k, str) for k in value):
        raise ValueError("not an attribute mapping")
    return value


_STR_ONLY = {str}


_SAMPLED = trace.TraceFlags(trace.TraceFlags.SAMPLED)


def _context(trace_id: int, span_id: int) -> trace.SpanContext:
    return trace.SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED)


def stored_to_readable(
    span: StoredSpan, resource: Mapping[str, Any] | None = None, *, cache: dict[Any, Any] | None = None
) -> ReadableSpan:
    """The stored row as an ended SDK span (ids, parent, kind, times, status, attributes, events, links, scope).

    ``resource`` replaces the row's own resource attributes when given. ``cache`` (one dict per batch of rows)
    shares one ``Resource`` and one ``InstrumentationScope`` object per distinct value, so the redactor's
    per-object resource and scope caches hit. Raises ``ValueError`` for a row that does not convert (see the
    module docstring); the span is not redacted here.
    """
    trace_id = _hex_id(span.trace_id, _MAX_TRACE_ID)
    context = _context(trace_id, _hex_id(span.span_id, _MAX_SPAN_ID))
    parent = None if span.parent_span_id is None else _context(trace_id, _hex_id(span.parent_span_id, _MAX_SPAN_ID))
    kind = _KINDS.get(span.span_kind) if type(span.span_kind) is str else None
    if kind is None:
        try:
            kind = SpanKind[str(span.span_kind).upper()]
        except KeyError:
            raise ValueError("unknown span kind") from None
    try:
        status = _STATUSES.get(span.status)
    except TypeError:  # not hashable: not a status
        status = None
    if status is None:
        raise ValueError("unknown status")
    start = _ns(span.start_ns)
    end = None if span.end_ns is None else _ns(span.end_ns)
    events = []
    for event in span.events:
        if not isinstance(event, dict) or not isinstance(event.get("name"), str):
            raise ValueError("not an event")
        events.append(Event(event["name"], _mapping(event.get("attributes")), _ns(event.get("time_ns"))))
    links = []
    for link in span.links:
        if not isinstance(link, dict):
            raise ValueError("not a link")
        linked = _context(_hex_id(link.get("trace_id"), _MAX_TRACE_ID), _hex_id(link.get("span_id"), _MAX_SPAN_ID))
        links.append(trace.Link(linked, _mapping(link.get("attributes"))))
    scope = scope_of(span.scope, cache)
    if not isinstance(span.name, str):
        raise ValueError("not a span name")
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=parent,
        resource=_resource(cache, span.resource if resource is None else resource),
        attributes=_mapping(span.attributes),
        events=events,
        links=links,
        kind=kind,
        status=status,
        start_time=start,
        end_time=end,
        instrumentation_scope=scope,
    )


def scope_of(stored: Any, cache: dict[Any, Any] | None) -> InstrumentationScope | None:
    """The ``InstrumentationScope`` of a stored scope column (decoded; None: none), shared through ``cache`` as
    :func:`stored_to_readable` shares it. Raises ``ValueError`` for one of the wrong shape."""
    if stored is None:
        return None
    name, version = stored.get("name"), stored.get("version")
    if not isinstance(name, str) or not (version is None or isinstance(version, str)):
        raise ValueError("not an instrumentation scope")
    scope: InstrumentationScope = _shared(cache, ("scope", name, version), lambda: InstrumentationScope(name, version))
    return scope


def _resource(cache: dict[Any, Any] | None, attributes: Any) -> Resource:
    """The shared ``Resource`` of these resource attributes (one per distinct key-sorted JSON form).

    Rows of a batch repeat the same resource: an exact key of its items and their types (no float among them:
    ``-0.0 == 0.0``) finds the object made for the first row without encoding the mapping again."""
    exact: Any = None
    if cache is not None and type(attributes) is dict:
        types = tuple(map(type, attributes.values()))
        if float not in types:
            try:
                exact = ("resource-items", tuple(attributes.items()), types)
                found = cache.get(exact)
            except TypeError:  # a list or mapping value: not hashable
                exact = found = None
            if found is not None:
                return found  # type: ignore[no-any-return]
    mapping = _mapping(attributes)
    made: Resource = _shared(
        cache, ("resource", json.dumps(mapping, sort_keys=True, default=repr)), lambda: Resource(dict(mapping))
    )
    if exact is not None and cache is not None:
        cache[exact] = made
    return made


def _shared(cache: dict[Any, Any] | None, key: Any, make: Callable[[], Any]) -> Any:
    if cache is None:
        return make()
    found = cache.get(key)
    if found is None:
        found = cache[key] = make()
    return found


def registrable(value: Any) -> bool:
    """Whether a stored tool or agent name is one a registry rebuilt from rows takes (see the module docstring):
    an identifier-like token other than ``_OTHER`` that passes the public-safety check."""
    if not isinstance(value, str) or value == sc.OTHER_VALUE or NAME_PATTERN.fullmatch(value) is None:
        return False
    return not _sensitive_name(str(value))


@functools.lru_cache(maxsize=4096)
def _sensitive_name(name: str) -> bool:
    # Memoised (a name is at most 128 characters): every span of a run repeats its names, and the check is costly.
    return is_sensitive(name)


def row_names(span: StoredSpan) -> set[tuple[str, str]]:
    """``(kind, name)`` of every registrable name the row's attributes carry (none for a corrupt row)."""
    if span.corrupt:
        return set()
    found = set()
    for key, kind in NAME_KEYS.items():
        value = span.attributes.get(key)
        if isinstance(value, str) and registrable(value):
            found.add((kind, value))
    return found


def names_registry(found: Iterable[tuple[str, str]], registry: NameRegistry | None = None) -> NameRegistry:
    """``registry`` (a new one by default) with the ``(kind, name)`` pairs registered; when a kind would hold
    more names than a registry does, a new empty registry instead (fail closed: none is restored)."""
    by_kind: dict[str, set[str]] = {kind: set() for kind in NameRegistry.KINDS}
    for kind, name in found:
        by_kind[kind].add(name)
    registry = NameRegistry() if registry is None else registry
    try:
        registry.register_found(by_kind)
    except ValueError:  # more names than a registry holds: none is restored (fail closed)
        _logger.warning("otel-agentdiag: too many distinct tool or agent names in the store; exported as _OTHER")
        return NameRegistry()
    return registry


def stored_names(spans: Iterable[StoredSpan]) -> NameRegistry:
    """A name registry of the registrable tool and agent names the rows carry that pass the public-safety check
    (see the module docstring)."""
    found: set[tuple[str, str]] = set()
    for span in spans:
        found |= row_names(span)
    return names_registry(found)


@dataclass
class Projection:
    """The spans that may leave (already rebuilt under the policy, in the order given) and what was left out."""

    spans: list[ReadableSpan]
    omitted: int = 0
    omitted_reasons: dict[str, int] = field(default_factory=dict)

    def _omit(self, reason: str) -> None:
        self.omitted += 1
        self.omitted_reasons[reason] = self.omitted_reasons.get(reason, 0) + 1


def _is_tombstone(span: ReadableSpan | StoredSpan) -> bool:
    attributes = span.attributes or {}
    return span.name == sc.TOMBSTONE_SPAN_NAME or _TOMBSTONE_KEY in attributes


def strict_projection(
    spans: Iterable[StoredSpan],
    *,
    hasher: IdHasher | None,
    policy: Policy = STRICT,
    names: NameRegistry | None = None,
) -> Projection:
    """Re-validate every stored span under ``policy`` (the strict preset by default); keep the rebuilt spans.

    ``hasher`` should be the store's key (:func:`load_store_hasher`), so stored digests stay as they are.
    Without one, a key for this process only is used: nothing raw can pass, but every digest in the output is
    a digest of the stored digest and does not match the store's. Rows that cannot be re-validated are
    omitted and counted by reason (:data:`OMIT_REASONS`); nothing of them is returned.
    """
    rows = list(spans)
    if hasher is None:
        hasher = IdHasher(hashing.ephemeral_key(), algorithm=policy.hash_function)
    elif hasher.algorithm != policy.hash_function:
        raise ValueError(
            f"policy {policy.name!r} asks for {policy.hash_function} but the key is for {hasher.algorithm}"
        )
    redactor = SpanRedactor(policy, hasher, stored_names(rows) if names is None else names)
    out = Projection(spans=[])
    shared: dict[Any, Any] = {}
    for row in rows:
        clean = project_row(row, redactor, shared, out)
        if clean is not None:
            out.spans.append(clean)
    return out


def project_row(
    row: StoredSpan, redactor: SpanRedactor, shared: dict[Any, Any], out: Projection
) -> ReadableSpan | None:
    """One row of :func:`strict_projection`: the rebuilt span, or None after counting on ``out`` why it is
    omitted. ``shared`` is the batch's cache of :func:`stored_to_readable`."""
    if row.corrupt:
        out._omit(OMIT_CORRUPT_ROW)
        return None
    if _is_tombstone(row):
        out._omit(OMIT_TOMBSTONE)
        return None
    try:
        readable = stored_to_readable(row, cache=shared)
    except (ValueError, TypeError, AttributeError, OverflowError):
        out._omit(OMIT_INVALID_ROW)
        return None
    try:
        clean = redactor.redact(readable)
    except Exception:  # noqa: BLE001 - fail closed: a span that cannot be rebuilt is not exported
        out._omit(OMIT_REDACTOR_ERROR)
        return None
    if _is_tombstone(clean):
        out._omit(OMIT_TOMBSTONE)
        return None
    return clean
