"""Ingest OTLP-JSON into a store: untrusted input, re-checked through the local policy, filed as imported.

Nothing a file says is taken on trust: a file can claim any ``agentdiag.observer.id`` (one of this machine's
pipelines, say), carry digests made with the store's key (copied from a support bundle), forge sequence
numbers, error spans or span ids. So:

- **Everything is re-checked.** Every span goes through the store's local policy (``AGENTDIAG_LOCAL_POLICY``,
  else the ``local`` preset) with the store's hash key (``AGENTDIAG_HASH_KEY``, else ``hash.key`` beside the
  store, created if missing, as ``configure()`` does): name, attributes, events, links, status, resource and
  scope (schema URLs included), whatever observer it claims. A digest made with the store's key passes
  unchanged (it is what the raw id would hash to, and it can carry nothing else); raw ids and digests of
  other keys are hashed.
- **Names are data.** Tool and agent names in a file become ``_OTHER``: a file's claim that a pipeline
  checked them proves nothing. ``trust_names`` keeps the identifier-like names that also pass the
  public-safety check.
- **Imported, never observed.** Spans are written with ``imported=True`` (see
  :mod:`otel_agentdiag.storage.provenance`): filed under ``imported:<digest>`` session keys, so no span, ledger
  entry, violation or retention decision of an import touches a session this machine observed, and their
  receipts say ``imported``, never ``valid``. A claimed observer id is re-keyed with the store's key
  (``imported_observer`` digest kind, 16 hex digits) and recorded as imported; spans that claim one keep
  their ``agentdiag.sequence``, so the imported copy is judged against its own numbering (a missing number
  is a ``sequence_gap``, a span ingested twice a ``duplicate_sequence``). Other spans are numbered by the
  ingest itself, as one more (imported) observer: per session, in start order within each document.

Each document (a line, or the whole file when it is one pretty-printed document) is validated on its own
and taken whole or not at all. A document that is not JSON, not an ``ExportTraceServiceRequest``, or holds
a span that cannot be one (ids that are not hex or all zeros, no start time, an end before the start, an
undefined kind or status) is **rejected**: a violation record (source ``ingest``, the reason code, ``line
N``; never the content; the imported session key when its spans name a session) is appended to the store,
so every later receipt of the store, and of that imported session, is ``invalid`` (``ingest_violation``).
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NAME_KEYS, NAME_PATTERN, NameRegistry
from otel_agentdiag._internal.spans import with_attributes
from otel_agentdiag.exporters.sqlite import span_to_row
from otel_agentdiag.interchange.otlp_json import (
    InvalidRequest,
    MissingDependency,
    read_otlp_json,
    request_session_ids,
    request_to_spans,
)
from otel_agentdiag.pipeline.sequence import SessionSequencer, session_key
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.processor import RedactingSpanProcessor
from otel_agentdiag.redaction.recognizers import is_sensitive
from otel_agentdiag.storage import Accounting, RetentionLimits, SpanRow, SpanStore, StoreError
from otel_agentdiag.storage.codec import same_content
from otel_agentdiag.storage.provenance import imported_session

__all__ = ["INGEST_SOURCE", "IngestError", "IngestResult", "Rejection", "UnusableInput", "ingest_otlp_json"]

_logger = logging.getLogger(__name__)

INGEST_SOURCE = "ingest"
"""The ``source`` of the violation records ingest appends."""

_OBSERVER_ID = re.compile(r"[0-9a-f]{16}")
ID_KIND_IMPORTED_OBSERVER = "imported_observer"
"""The digest kind a claimed ``agentdiag.observer.id`` is re-keyed with (the first 16 hex digits are kept)."""
_STORE_ERRORS = (sqlite3.Error, StoreError, OSError, UnicodeDecodeError)
"""What a store that cannot be written raises. ``UnicodeDecodeError``: the ``sqlite3`` module's, for an error message
that is not UTF-8 (a damaged schema naming a table with a flipped byte)."""


class UnusableInput(Exception):
    """The input cannot be ingested at all (missing, unreadable, not JSON, not OTLP): nothing was written."""


class IngestError(Exception):
    """The store could not be written; what was ingested before stays (see :attr:`result`)."""

    def __init__(self, message: str, result: IngestResult) -> None:
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class Rejection:
    """A document that was not taken: where (``line N``) and why (a reason code), never what it held."""

    location: str
    reason: str
    sessions: tuple[str, ...] = ()
    """The imported session keys (``imported:<digest>``) of the sessions its spans named (empty: not known)."""


@dataclass
class IngestResult:
    """What :func:`ingest_otlp_json` did."""

    path: Path
    store: Path
    observer: str
    """``agentdiag.observer.id`` of this ingest (the observer of the spans it numbered)."""
    policy: str = ""
    key_source: str = ""
    documents: int = 0
    """Documents read (non-blank lines, or elements of a JSON array)."""
    accepted: int = 0
    """Documents taken."""
    rejected: list[Rejection] = field(default_factory=list)
    """Documents refused, in file order; each has a violation record in the store."""
    spans: int = 0
    """Spans in the accepted documents."""
    inserted: int = 0
    """Rows written."""
    duplicates: int = 0
    """Spans already in the store (same trace and span id): not written again, counted in the ledger unless
    :attr:`unchanged`."""
    unchanged: int = 0
    """Of the duplicates: spans an earlier ingest stored exactly so (the same file again). Not counted again: an
    ingest of the same file a second time changes nothing."""
    pruned: int = 0
    """Rows retention deleted during the ingest (spans older than the age limit go at once)."""
    numbered: int = 0
    """Spans that carried no ``agentdiag.observer.id`` and were numbered by this ingest."""
    claimed_observers: int = 0
    """Distinct ``agentdiag.observer.id`` values the file claimed (each re-keyed as an imported observer)."""
    redaction_failures: int = 0
    """Spans the redactor could not rebuild (stored as a tombstone, or dropped, per the policy's ``on_error``)."""

    @property
    def clean(self) -> bool:
        return not self.rejected

    def reason_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for rejection in self.rejected:
            counts[rejection.reason] = counts.get(rejection.reason, 0) + 1
        return counts


class _Collect(SpanProcessor):
    """Where the redacting processor hands its rebuilt spans (and reports spans it rejected)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []
        self.rejected: dict[str | None, dict[str, int]] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)

    def record_rejected(self, session: str | None, reason: str) -> None:
        counts = self.rejected.setdefault(session, {})
        counts[reason] = counts.get(reason, 0) + 1

    def take(self) -> tuple[list[ReadableSpan], dict[str | None, dict[str, int]]]:
        spans, rejected = self.spans, self.rejected
        self.spans, self.rejected = [], {}
        return spans, rejected

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _claimed_observer(span: ReadableSpan) -> str | None:
    """The ``agentdiag.observer.id`` a span claims (16 hex digits), or None. A claim, never a proof."""
    observer = (span.attributes or {}).get(sc.AGENTDIAG_OBSERVER_ID)
    return observer if isinstance(observer, str) and _OBSERVER_ID.fullmatch(observer) is not None else None


def imported_observer(hasher: IdHasher, claimed: str) -> str:
    """The observer id a claimed ``agentdiag.observer.id`` is filed under: 16 hex digits of its keyed digest,
    so a file cannot choose an id of this machine's pipelines (the store also refuses one it recorded)."""
    return hasher.digest(ID_KIND_IMPORTED_OBSERVER, claimed)[-64:][:16]


class _Ingest:
    def __init__(self, path: Path, store_path: Path, *, trust_names: bool, retention: RetentionLimits | None) -> None:
        self.path = path
        self.store_path = store_path
        self.trust_names = trust_names
        self.retention = retention
        self.sequencer = SessionSequencer()
        self.result = IngestResult(path=path, store=store_path, observer=self.sequencer.observer_id)
        self.started_ns = time.time_ns()
        self.names = NameRegistry()
        self._names_full = False
        self._pending: list[Rejection] = []
        self._store: SpanStore | None = None
        self._processor: RedactingSpanProcessor | None = None
        self._hasher: IdHasher | None = None
        self._written: set[tuple[str, str]] = set()
        """``(trace_id, span_id)`` of every row this ingest handed to the store."""
        self._observers: dict[str, str] = {}
        """Claimed observer id -> the imported observer id it is filed under."""
        self._collect = _Collect()

    # -- the store, opened at the first document that is OTLP ------------------------------------------------
    def _open(self) -> None:
        from otel_agentdiag.destinations import resolve_destinations
        from otel_agentdiag.options import AgentDiagOptions

        options = AgentDiagOptions(
            enabled=True,
            service_name=None,
            store_path=self.store_path.absolute(),
            otlp_endpoint=None,
            otlp_from_env=False,
        )
        # The key first: a store or key that is refused (not ours, weak) raises before anything is created.
        (local,) = resolve_destinations(options, create_key_file=True)
        try:
            self._store = SpanStore(self.store_path, retention=self.retention)
        except (StoreError, OSError) as exc:
            raise IngestError(f"cannot use the store {self.store_path}: {exc}", self.result) from None
        self.result.policy = local.policy.name
        self.result.key_source = local.key_source
        self._hasher = local.hasher
        self._processor = RedactingSpanProcessor(
            self._collect, policy=local.policy, hasher=local.hasher, names=self.names, propagate_conversation=False
        )
        pending, self._pending = self._pending, []
        self._record(pending)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    # -- violations ---------------------------------------------------------------------------------------------
    def _reject(self, location: str, reason: str, sessions: tuple[str, ...] = ()) -> None:
        rejection = Rejection(location, reason, sessions)
        self.result.rejected.append(rejection)
        if self._store is None:
            self._pending.append(rejection)  # recorded once the input proves to be OTLP at all
        else:
            self._record([rejection])

    def _record(self, rejections: Sequence[Rejection]) -> None:
        assert self._store is not None
        entries: list[tuple[str | None, str, str]] = []
        for rejection in rejections:
            for session in rejection.sessions or (None,):
                # Filed under the imported session key: a rejected line never counts against a session
                # this machine observed (the store's receipt counts it whatever its session).
                entries.append((session, rejection.reason, rejection.location))
        try:
            self._store.record_violations(INGEST_SOURCE, entries)
        except _STORE_ERRORS as exc:
            raise IngestError(f"could not record a rejected line in {self.store_path}: {exc}", self.result) from None

    def _session_digests(self, raw_ids: Iterable[str | int]) -> tuple[str, ...]:
        """The imported session keys (``imported:<digest>``) of raw session ids, under the store's policy and
        key."""
        assert self._processor is not None
        redactor = self._processor.redactor
        found: set[str] = set()
        for raw in raw_ids:
            kept = redactor.accounting_attributes(ReadableSpan(name="", attributes={sc.GEN_AI_CONVERSATION_ID: raw}))
            digest = kept.get(sc.GEN_AI_CONVERSATION_ID)
            if isinstance(digest, str):
                found.add(imported_session(digest))
        return tuple(sorted(found))

    # -- spans --------------------------------------------------------------------------------------------------
    def _observer_for(self, claimed: str) -> str:
        found = self._observers.get(claimed)
        if found is None:
            assert self._hasher is not None
            found = self._observers[claimed] = imported_observer(self._hasher, claimed)
            self.result.claimed_observers = len(self._observers)
        return found

    def _number(self, spans: list[ReadableSpan]) -> tuple[list[ReadableSpan], list[str | None]]:
        """Every span gets an imported observer id: a claimed one is re-keyed (its sequence number kept, so the
        copy is judged against its own numbering); a span that claims none gets this ingest's observer id and,
        for now, its place in start order as its number (as a live sequencer numbers spans at start). Returns
        the spans and each place's session key: :meth:`_renumber` turns places into numbers of the sessions."""
        out = list(spans)
        keys: list[str | None] = []
        unnumbered: list[int] = []
        for i, span in enumerate(spans):
            claimed = _claimed_observer(span)
            if claimed is None:
                unnumbered.append(i)
                continue
            attributes = dict(span.attributes or {})
            attributes[sc.AGENTDIAG_OBSERVER_ID] = self._observer_for(claimed)
            out[i] = with_attributes(span, attributes)
        unnumbered.sort(key=lambda i: (spans[i].start_time or 0, i))
        for i in unnumbered:
            span = spans[i]
            attributes = dict(span.attributes or {})
            if sc.GEN_AI_CONVERSATION_ID in attributes:
                raw = attributes[sc.GEN_AI_CONVERSATION_ID]
            else:
                raw = attributes.get(sc.SESSION_ID)
            attributes[sc.AGENTDIAG_OBSERVER_ID] = self.sequencer.observer_id
            attributes[sc.AGENTDIAG_SEQUENCE] = len(keys)
            keys.append(session_key(raw))
            out[i] = with_attributes(span, attributes)
        return out, keys

    def _unchanged(self, rows: Sequence[SpanRow]) -> set[int]:
        """Indexes of the rows an earlier ingest stored exactly as they are now (the same file again): neither
        written nor counted. A span this ingest wrote is no such row: a file that repeats a span has a
        duplicate. A span this ingest numbers is compared without its numbering (a new ingest numbers anew)."""
        assert self._store is not None
        stored = self._store.spans_by_id(
            key for key in ((r.trace_id, r.span_id) for r in rows) if key not in self._written
        )
        mine = self.sequencer.observer_id
        return {
            index
            for index, row in enumerate(rows)
            if (found := stored.get((row.trace_id, row.span_id))) is not None
            and (row.trace_id, row.span_id) not in self._written
            and same_content(row, found, session=imported_session(row.session), numbering=row.observer != mine)
        }

    def _renumber(self, rows: Sequence[SpanRow], keys: Sequence[str | None], unchanged: set[int]) -> list[SpanRow]:
        """The rows to write: the unchanged ones left out, and the spans this ingest numbers given the next
        numbers of their sessions in place order. A place whose span was left out takes no number; one whose span
        the redactor dropped still does (its loss is counted, and explains the missing number)."""
        mine = self.sequencer.observer_id
        skipped = {rows[i].sequence for i in unchanged if rows[i].observer == mine}
        final = {place: self.sequencer.next_sequence(key) for place, key in enumerate(keys) if place not in skipped}
        self.result.numbered += len(final)
        out: list[SpanRow] = []
        for index, row in enumerate(rows):
            if index in unchanged:
                continue
            if row.observer == mine and isinstance(row.sequence, int) and row.sequence in final:
                number = final[row.sequence]
                row = replace(row, attributes={**row.attributes, sc.AGENTDIAG_SEQUENCE: number}, sequence=number)
            out.append(row)
        return out

    def _register_names(self, spans: Sequence[ReadableSpan]) -> None:
        """With ``trust_names``: register the identifier-like tool and agent names of the spans that pass the
        public-safety check. Without it nothing is registered, whatever the spans claim: names become _OTHER."""
        if not self.trust_names or self._names_full:
            return
        found: dict[str, set[str]] = {kind: set() for kind in NameRegistry.KINDS}
        for span in spans:
            attributes = span.attributes or {}
            for key, kind in NAME_KEYS.items():
                value = attributes.get(key)
                if (
                    isinstance(value, str)
                    and value != sc.OTHER_VALUE
                    and NAME_PATTERN.fullmatch(value)
                    and not is_sensitive(value)
                ):
                    found[kind].add(value)
        try:
            self.names.register_found(found)
        except ValueError:
            self._names_full = True  # fail closed: further names become _OTHER
            _logger.warning("otel-agentdiag: too many distinct tool or agent names; the rest are stored as _OTHER")

    def _take(self, spans: list[ReadableSpan]) -> None:
        assert self._processor is not None and self._store is not None
        self._register_names(spans)
        processor = self._processor
        failed_before = processor.failed
        numbered, keys = self._number(spans)
        for span in numbered:
            processor.on_end(span)
        clean, rejected = self._collect.take()
        self.result.redaction_failures += processor.failed - failed_before
        try:
            rows = [span_to_row(span) for span in clean]
            unchanged = self._unchanged(rows)
            rows = self._renumber(rows, keys, unchanged)
            if rows or rejected or not unchanged:
                accounting = Accounting(
                    observer=self.sequencer.observer_id, rejected=rejected, started_ns=self.started_ns
                )
                written = self._store.write_batch(rows, accounting, imported=True)
                self._written.update((row.trace_id, row.span_id) for row in rows)
                self.result.inserted += written.inserted
                self.result.duplicates += written.duplicates
                self.result.pruned += written.pruned
        except _STORE_ERRORS as exc:
            raise IngestError(f"could not write to the store {self.store_path}: {exc}", self.result) from None
        self.result.unchanged += len(unchanged)
        self.result.duplicates += len(unchanged)
        self.result.spans += len(spans)
        self.result.accepted += 1

    # -- the file -----------------------------------------------------------------------------------------------
    def run(self) -> IngestResult:
        first_error: str | None = None
        try:
            for line in read_otlp_json(self.path):
                self.result.documents += 1
                if line.is_otlp and self._store is None:
                    self._open()
                if line.request is None:
                    reason = line.reason or "not_otlp"
                    first_error = first_error or f"{line.location}: {reason}"
                    sessions = self._session_digests(line.session_ids) if self._store is not None else ()
                    self._reject(line.location, reason, sessions)
                    continue
                try:
                    spans = request_to_spans(line.request)
                except InvalidRequest as exc:
                    self._reject(line.location, exc.reason, self._session_digests(request_session_ids(line.request)))
                    continue
                self._take(spans)
        except MissingDependency as exc:
            raise UnusableInput(str(exc)) from None
        except IsADirectoryError:
            raise UnusableInput(f"{self.path} is a directory, not an OTLP-JSON file") from None
        except OSError as exc:
            if self._store is None:
                raise UnusableInput(f"cannot read {self.path}: {exc.strerror or exc}") from None
            raise IngestError(f"reading {self.path} failed part way: {exc.strerror or exc}", self.result) from None
        if self._store is None:
            if first_error is None:
                raise UnusableInput(f"{self.path} holds no OTLP-JSON (it is empty)")
            raise UnusableInput(
                f"{self.path} is not OTLP-JSON: no line holds an ExportTraceServiceRequest (first: {first_error})"
            )
        return self.result


def ingest_otlp_json(
    path: Path, store_path: Path, *, trust_names: bool = False, retention: RetentionLimits | None = None
) -> IngestResult:
    """Ingest the OTLP-JSON file ``path`` into the store at ``store_path`` (created if missing); see the module
    docstring.

    ``retention`` applies as on any write (default: :class:`~otel_agentdiag.storage.RetentionLimits`): spans
    older than its age limit are pruned at once, and counted (:attr:`IngestResult.pruned`).

    Raises :class:`UnusableInput` when nothing in the file is OTLP-JSON (then nothing is written, not even the
    store or its key file), :class:`IngestError` when the store cannot be written (documents before it stay
    ingested). Rejected documents are not errors: see :attr:`IngestResult.rejected`.
    """
    path = Path(path)
    if not path.exists():
        raise UnusableInput(f"no such file: {path}")
    ingest = _Ingest(path, Path(store_path), trust_names=trust_names, retention=retention)
    try:
        return ingest.run()
    finally:
        ingest.close()
