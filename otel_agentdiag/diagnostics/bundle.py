"""The support bundle: one bounded, versioned JSON document about at most two sessions, safe to hand to anyone.

It holds the strict-policy projection of the sessions' spans (see :mod:`otel_agentdiag.diagnostics.projection`:
every row is re-validated at export time; a row that fails is omitted and counted, never serialized), each
session's integrity receipt and status projection, and what the store pruned. Sessions appear only as their
keyed digests: a session the store files under anything but a digest of its key is named by that digest here.

Document (``schema_version`` 1)::

    {
      "schema_version": 1,
      "kind": "otel-agentdiag.support-bundle",
      "versions": {"otel_agentdiag": "...", "opentelemetry_sdk": "...", "python": "..."},
      "exported_at": "2025-01-31T12:00:00.000000Z",
      "policy": "strict",
      "hash_key_id": "1a2b3c4d",              # the store key's id (null: not found; digests re-keyed for this file)
      "scope": {"selection": "given" | "newest", "sessions": ["hmac-sha256:..."]},
      "limits": {"max_sessions": 2, "max_spans_per_session": 500, "max_span_bytes": 2048,
                 "max_bundle_bytes": 614400},
      "pruned": 0,                           # spans pruned by retention, cumulative for the whole store
      "omitted": 0,                          # rows of the scope that failed re-validation
      "sessions": [
        {"session": "hmac-sha256:...",       # "imported:hmac-sha256:..." for a session agentdiag ingest imported
         "provenance": "observed",           # or "imported"
         "availability": {"spans_stored": 12, "spans_included": 12},
         "omitted": 0, "omitted_reasons": {},
         "dropped": {},                      # reason -> spans left out by a limit (DROP_REASONS)
         "receipt": {...},                   # Receipt.to_json()
         "status": {...},                    # Status.to_json(), as of the export time
         "spans": [...]}                     # newest first (descending agentdiag.sequence)
      ]
    }

Each span has the shape ``agentdiag show --format json`` prints, plus its ``trace_id``.

Bounds (:class:`BundleLimits`): a span whose compact JSON exceeds ``max_span_bytes`` is dropped
(``span_too_large``); each session keeps its ``max_spans_per_session`` newest spans (``session_span_limit``);
the whole compact document (the file, newline included) stays within ``max_bundle_bytes``: the oldest spans of
the scope go first (``bundle_size_limit``). Every drop is counted on its session.
"""

from __future__ import annotations

import heapq
import json
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.files import write_private_file
from otel_agentdiag._internal.jsonsafe import finite, iso_utc
from otel_agentdiag.diagnostics.parents import spans_elsewhere
from otel_agentdiag.diagnostics.projection import strict_projection
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.diagnostics.status import project
from otel_agentdiag.redaction.hashing import IdHasher, ephemeral_key
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.storage import SpanStore, StoredSpan
from otel_agentdiag.storage.provenance import imported_session, is_imported, observed_digest
from otel_agentdiag.version import __version__

__all__ = [
    "BUNDLE_KIND",
    "DROP_REASONS",
    "SCHEMA_VERSION",
    "BundleLimits",
    "build_bundle",
    "encode_bundle",
    "span_to_json",
    "write_bundle",
]

SCHEMA_VERSION = 1
BUNDLE_KIND = "otel-agentdiag.support-bundle"

DROP_SPAN_TOO_LARGE = "span_too_large"
DROP_SESSION_SPAN_LIMIT = "session_span_limit"
DROP_BUNDLE_SIZE_LIMIT = "bundle_size_limit"
DROP_REASONS = (DROP_SPAN_TOO_LARGE, DROP_SESSION_SPAN_LIMIT, DROP_BUNDLE_SIZE_LIMIT)
"""Why a re-validated span was left out of a bundle (keys of a session's ``dropped``)."""

SELECTION_GIVEN = "given"
SELECTION_NEWEST = "newest"

_STATUS = {StatusCode.OK: "ok", StatusCode.ERROR: "error", StatusCode.UNSET: "unset"}
_KINDS = frozenset(sc.KINDS)
_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


@dataclass(frozen=True, kw_only=True)
class BundleLimits:
    """The bounds of one bundle (the defaults are the documented ones)."""

    max_sessions: int = 2
    max_spans_per_session: int = 500
    max_span_bytes: int = 2 * 1024
    max_bundle_bytes: int = 600 * 1024

    def __post_init__(self) -> None:
        for name in ("max_sessions", "max_spans_per_session", "max_span_bytes", "max_bundle_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer")

    def to_json(self) -> dict[str, int]:
        return {
            "max_sessions": self.max_sessions,
            "max_spans_per_session": self.max_spans_per_session,
            "max_span_bytes": self.max_span_bytes,
            "max_bundle_bytes": self.max_bundle_bytes,
        }


# -- encoding ------------------------------------------------------------------------------------------------------
def _compact(value: Any) -> str:
    try:
        return _DUMPS(value)
    except ValueError:  # a non-finite float: a string rather than invalid JSON
        return _DUMPS(finite(value))


def encode_bundle(bundle: dict[str, Any]) -> bytes:
    """The bytes of the bundle file: compact JSON (UTF-8) and a newline. The size limit applies to these."""
    return (_compact(bundle) + "\n").encode("utf-8")


def _duration_ms(span: ReadableSpan) -> float | None:
    if span.end_time is None or span.start_time is None:
        return None
    return round((span.end_time - span.start_time) / 1_000_000, 3)


def span_to_json(span: ReadableSpan) -> dict[str, Any]:
    """A (redacted) span in the shape of ``agentdiag show --format json``, with its ``trace_id``."""
    ctx = span.context
    if ctx is None:
        raise ValueError("span without a context")
    attributes = dict(span.attributes or {})
    kind = attributes.get(sc.AGENTDIAG_KIND)
    return {
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_span_id": None if span.parent is None else f"{span.parent.span_id:016x}",
        "name": span.name,
        "kind": kind if isinstance(kind, str) and kind in _KINDS else sc.KIND_OTHER,
        "start_time": iso_utc(span.start_time),
        "end_time": iso_utc(span.end_time),
        "duration_ms": _duration_ms(span),
        "status": _STATUS.get(span.status.status_code, "unset"),
        "attributes": {k: list(v) if isinstance(v, tuple) else v for k, v in attributes.items()},
        "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in span.events],
    }


# -- building ------------------------------------------------------------------------------------------------------
def _versions() -> dict[str, str | None]:
    try:
        sdk: str | None = metadata.version("opentelemetry-sdk")
    except metadata.PackageNotFoundError:
        sdk = None
    return {"otel_agentdiag": __version__, "opentelemetry_sdk": sdk, "python": platform.python_version()}


def _newest_first(spans: Sequence[StoredSpan]) -> list[StoredSpan]:
    """Descending ``agentdiag.sequence``; ties and unnumbered spans (which count as the oldest) by start time."""
    return sorted(
        spans,
        key=lambda s: (s.sequence if s.sequence is not None else -1, s.start_ns, s.span_id),
        reverse=True,
    )


def _read_session(store: SpanStore, session: str | None) -> tuple[Any, list[StoredSpan]]:
    receipt = session_receipt(store, session)
    rows = store.session_spans(session)
    if len(rows) != receipt.counts["spans"]:  # a write between the two reads: once more (as ``status`` does)
        receipt = session_receipt(store, session)
        rows = store.session_spans(session)
    return receipt, rows


def _newest_session(store: SpanStore) -> str | None:
    """The session with the newest activity, observed sessions first (an imported one only when there is no
    observed one: a file someone handed us cannot become the default bundle by carrying newer times): the first
    session ``list_sessions`` lists, by the same rule as ``agentdiag status``, read through the activity index."""
    return store.latest_session()


@dataclass
class _Entry:
    doc: dict[str, Any]
    spans: list[tuple[int, str]]
    """(start time, compact JSON) of the spans that passed the per-span and per-session limits, newest first."""


def build_bundle(
    store: SpanStore,
    sessions: Sequence[str] | None,
    *,
    hasher: IdHasher | None,
    limits: BundleLimits = BundleLimits(),
    now_ns: int | None = None,
) -> dict[str, Any]:
    """The support bundle of ``sessions`` (stored digests; None: the session with the newest activity).

    ``hasher`` is the store's key (:func:`~otel_agentdiag.diagnostics.projection.load_store_hasher`). Raises
    ``ValueError`` for more than ``limits.max_sessions`` sessions. Reads only.
    """
    if sessions is None:
        selection = SELECTION_NEWEST
        chosen: list[str | None] = [_newest_session(store)]
    else:
        selection = SELECTION_GIVEN
        chosen = list(dict.fromkeys(sessions))
        if not chosen:
            raise ValueError("no session given")
    if len(chosen) > limits.max_sessions:
        raise ValueError(f"at most {limits.max_sessions} sessions per bundle")
    now = time.time_ns() if now_ns is None else now_ns
    # Without the store's key, one key for this bundle: labels and span digests are re-keyed alike.
    keyed = hasher if hasher is not None else IdHasher(ephemeral_key(), algorithm=STRICT.hash_function)

    def label(session: str | None) -> str | None:
        """A session as the bundle names it: its digest, the way the projection turns the span's id (an
        imported session as ``imported:`` and that)."""
        if session is None or keyed.is_digest(session):
            return session
        if is_imported(session):
            return imported_session(label(observed_digest(session)))
        return keyed.digest(sc.ID_KIND_CONVERSATION, session)

    entries: list[_Entry] = []
    omitted_total = 0
    for session in chosen:
        receipt, rows = _read_session(store, session)
        projection = strict_projection(_newest_first(rows), hasher=keyed, policy=STRICT)
        omitted_total += projection.omitted
        elsewhere = spans_elsewhere(store, session, rows)
        status = project(rows, receipt, session=label(session), as_of_ns=now, elsewhere=elsewhere).to_json()
        receipt_json = receipt.to_json()
        receipt_json["session"] = label(session)
        kept_tools = {s.attributes.get(sc.GEN_AI_TOOL_NAME) for s in projection.spans if s.attributes is not None}
        if status["repetition"]["tool"] is not None and status["repetition"]["tool"] not in kept_tools:
            status["repetition"]["tool"] = sc.OTHER_VALUE  # a name the strict policy would not keep
        dropped: dict[str, int] = {}
        spans: list[tuple[int, str]] = []
        for span in projection.spans:
            text = _compact(span_to_json(span))
            if len(text.encode("utf-8")) > limits.max_span_bytes:
                dropped[DROP_SPAN_TOO_LARGE] = dropped.get(DROP_SPAN_TOO_LARGE, 0) + 1
            elif len(spans) >= limits.max_spans_per_session:
                dropped[DROP_SESSION_SPAN_LIMIT] = dropped.get(DROP_SESSION_SPAN_LIMIT, 0) + 1
            else:
                spans.append((span.start_time or 0, text))
        doc = {
            "session": label(session),
            "provenance": receipt.provenance,
            "availability": {"spans_stored": len(rows), "spans_included": len(spans)},
            "omitted": projection.omitted,
            "omitted_reasons": dict(sorted(projection.omitted_reasons.items())),
            "dropped": dropped,
            "receipt": receipt_json,
            "status": status,
            "spans": [],
        }
        entries.append(_Entry(doc, spans))

    bundle: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": BUNDLE_KIND,
        "versions": _versions(),
        "exported_at": iso_utc(now),
        "policy": STRICT.name,
        "hash_key_id": hasher.key_id if hasher is not None else None,
        "scope": {"selection": selection, "sessions": [label(s) for s in chosen]},
        "limits": limits.to_json(),
        "pruned": store.pruned_spans_total(),
        "omitted": omitted_total,
        "sessions": [entry.doc for entry in entries],
    }
    _fit(bundle, entries, limits.max_bundle_bytes)
    return bundle


def _fit(bundle: dict[str, Any], entries: list[_Entry], budget: int) -> None:
    """Fill each session's ``spans`` newest first (across sessions by start time) within ``budget`` bytes."""
    keep = [0] * len(entries)
    # The document without spans, with room for every count to grow: each span costs its bytes and a comma.
    for entry in entries:
        entry.doc["dropped"].setdefault(DROP_BUNDLE_SIZE_LIMIT, 10**9)
        entry.doc["availability"]["spans_included"] = 10**9
    room = budget - len(encode_bundle(bundle))
    heap = [(-entry.spans[0][0], i, 0) for i, entry in enumerate(entries) if entry.spans]
    heapq.heapify(heap)
    while heap:
        _, i, j = heapq.heappop(heap)
        cost = len(entries[i].spans[j][1].encode("utf-8")) + (1 if j else 0)
        if cost > room:
            break  # this span and every older one go: the oldest spans are dropped first
        room -= cost
        keep[i] = j + 1
        if j + 1 < len(entries[i].spans):
            heapq.heappush(heap, (-entries[i].spans[j + 1][0], i, j + 1))
    for entry, n in zip(entries, keep, strict=True):
        over = len(entry.spans) - n
        if over:
            entry.doc["dropped"][DROP_BUNDLE_SIZE_LIMIT] = over
        else:
            del entry.doc["dropped"][DROP_BUNDLE_SIZE_LIMIT]
        entry.doc["availability"]["spans_included"] = n
        entry.doc["spans"] = [json.loads(text) for _, text in entry.spans[:n]]


# -- writing -------------------------------------------------------------------------------------------------------
def write_bundle(path: str | os.PathLike[str], bundle: dict[str, Any]) -> int:
    """Write ``bundle`` to ``path`` atomically, mode 0600 (a temporary file beside it, fsynced, then renamed).

    Returns the bytes written. Raises ``OSError`` when the file cannot be written; nothing is left behind then.
    """
    data = encode_bundle(bundle)
    return write_private_file(path, lambda stream: stream.write(data.decode("utf-8")))
