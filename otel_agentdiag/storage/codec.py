"""JSON in and out of the store's rows: compact encoders for the columns and the decoder of a stored span."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.jsonsafe import finite
from otel_agentdiag.storage.rows import EXTRA_COLUMNS, SpanRow, StoredSpan

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

_fast_dumps: Callable[[Any], bytes] | None
try:
    import orjson as _orjson
except ImportError:  # not on PyPy, or a platform without its wheel: the standard library's encoder alone
    _fast_dumps = None
else:
    # What the standard encoder would refuse (a subclass, a dataclass, a date) raises, as do big ints: see below.
    _PASS = _orjson.OPT_PASSTHROUGH_SUBCLASS | _orjson.OPT_PASSTHROUGH_DATACLASS | _orjson.OPT_PASSTHROUGH_DATETIME
    _fast_dumps = partial(_orjson.dumps, option=_PASS)


def row_json(value: Any) -> str:
    """Compact JSON for a row's columns (tuples as arrays; non-finite floats as strings, as in
    :func:`canonical_json`). orjson writes it where installed, at a tenth of the standard encoder's cost per span:
    the same JSON value (a float's text may differ: ``0.00001`` for ``1e-05``); what it declines, or writes as
    ``null`` (NaN, infinities, None), the standard library writes."""
    if not value:
        return "[]" if isinstance(value, (list, tuple)) else "{}"
    if _fast_dumps is not None:
        try:
            out = _fast_dumps(value)
        except TypeError:  # orjson.JSONEncodeError is one
            pass
        else:
            if b"null" not in out:
                return out.decode()
    try:
        return _ENCODER.encode(value)
    except ValueError:
        return canonical_json(value)


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON; non-finite floats become strings rather than invalid JSON."""
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(finite(value), separators=(",", ":"), sort_keys=True, ensure_ascii=False)


_NUMBERING = frozenset({sc.AGENTDIAG_OBSERVER_ID, sc.AGENTDIAG_SEQUENCE})
"""The attributes that carry a span's numbering (also its ``observer`` and ``sequence`` columns)."""

SPAN_COLUMNS = (
    "s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, s.span_kind, s.start_ns, s.end_ns, s.status,"
    " s.session, s.attributes, s.events, s.links, r.attributes, s.scope, s.observer, s.sequence"
    + "".join(f", s.{name}" for name in EXTRA_COLUMNS)
)
"""The columns :func:`decode_span` reads, from ``spans s LEFT JOIN resources r ON r.id = s.resource_id``."""


def load_counts(text: Any) -> dict[str, int]:
    """A ``{reason: n}`` column; anything malformed reads as empty (never raises)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


def decode_span(row: tuple[Any, ...]) -> StoredSpan:
    """A :class:`StoredSpan` from a row of :data:`SPAN_COLUMNS`; undecodable JSON columns mark it ``corrupt``."""
    corrupt = False

    def load(text: Any, default: Any) -> Any:
        nonlocal corrupt
        if text is None:
            return default
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            corrupt = True
            return default
        if type(value) is not type(default):
            corrupt = True
            return default
        return value

    attributes = load(row[10], {})
    events = load(row[11], [])
    links = load(row[12], [])
    resource = load(row[13], {})
    scope = load(row[14], {}) if row[14] is not None else None
    sequence = row[16] if isinstance(row[16], int) and not isinstance(row[16], bool) else None
    return StoredSpan(
        trace_id=row[0],
        span_id=row[1],
        parent_span_id=row[2],
        name=row[3],
        kind=row[4],
        span_kind=row[5],
        start_ns=row[6],
        end_ns=row[7],
        status=row[8],
        session=row[9],
        attributes=attributes,
        events=events,
        links=links,
        resource=resource,
        scope=scope,
        observer=row[15] or None,
        sequence=sequence,
        corrupt=corrupt,
        **(dict(zip(EXTRA_COLUMNS, row[17:], strict=True)) if EXTRA_COLUMNS else {}),
    )


def given_conditions(*conditions: tuple[str, Any]) -> tuple[list[str], list[Any]]:
    """The SQL conditions of ``(condition, argument)`` pairs whose argument is given (not None), and their
    arguments, in order: a query's optional filters."""
    pairs = [(condition, argument) for condition, argument in conditions if argument is not None]
    return [condition for condition, _ in pairs], [argument for _, argument in pairs]


def bad_json(column: str, json_type: str) -> str:
    """SQL: ``column`` is not valid JSON of ``json_type`` (json_type is evaluated only on valid JSON)."""
    return f"(CASE WHEN json_valid({column}) THEN json_type({column}) <> '{json_type}' ELSE 1 END)"


def same_content(row: SpanRow, stored: StoredSpan, *, session: str | None, numbering: bool = True) -> bool:
    """Whether ``stored`` holds exactly ``row`` filed under ``session``: every column the same, the JSON ones
    compared as JSON (a tuple and the array it was stored as are equal). ``numbering=False``: the observer and
    sequence number (columns and attributes) are left out, for a span whose numbering is not its own content
    (one ``agentdiag ingest`` numbers because its file did not)."""
    ignore = frozenset() if numbering else _NUMBERING
    if stored.corrupt or (row.trace_id, row.span_id) != (stored.trace_id, stored.span_id):
        return False
    if (row.parent_span_id, row.name, row.kind, row.span_kind, row.start_ns, row.end_ns, row.status, session) != (
        stored.parent_span_id,
        stored.name,
        stored.kind,
        stored.span_kind,
        stored.start_ns,
        stored.end_ns,
        stored.status,
        stored.session,
    ):
        return False
    if numbering and (row.observer, row.sequence) != (stored.observer, stored.sequence):
        return False
    if any(getattr(row, name) != getattr(stored, name) for name in EXTRA_COLUMNS):
        return False

    def kept(attributes: Any) -> dict[str, Any]:
        return {k: v for k, v in dict(attributes).items() if k not in ignore}

    return all(
        canonical_json(mine) == canonical_json(theirs)
        for mine, theirs in (
            (kept(row.attributes), kept(stored.attributes)),
            (list(row.events), stored.events),
            (list(row.links), stored.links),
            (dict(row.resource), stored.resource),
            (row.scope, stored.scope),
        )
    )
