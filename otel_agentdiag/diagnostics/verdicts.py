"""Stored strict-projection verdicts, reused by ``push`` and ``export`` where a keyed MAC proves them ours.

``push`` and ``export --format otlp-json`` need not re-validate rows that our own strict validation already
passed, byte for byte, under the same policy and key.

A verdict is the strict projection of one stored row (:func:`~otel_agentdiag.diagnostics.projection.
strict_projection`), already encoded: its ``Span`` protobuf bytes (:class:`~otel_agentdiag.interchange.encoded.
EncodedSpan`; ``export`` reads its OTLP-JSON back from them), with the tool and agent names the row
contributes to the batch's name registry (about 400 bytes for a typical agent span). It is written
by the first re-validation of the row by ``push`` (with its marks; ``export`` is a reader: it never writes the
store, so it reuses verdicts and makes none) and stored beside the row (:mod:`otel_agentdiag.storage.verdicts`)
under a MAC:

    HMAC-SHA256(K, tag || len(row) || row || verdict)

- ``K`` is derived from the store's hash key (:meth:`~otel_agentdiag.redaction.hashing.IdHasher.derived_key`,
  its own label: never a digest key), so only a process holding the key can make a verdict that verifies;
- ``tag`` names the format, the package and SDK versions, a digest of the policy (:func:`policy_digest`), the
  key id, and a digest of the source of the code the verdict depends on (redaction, projection, encoders,
  names), so a change of any of them is a miss, not a stale reuse;
- ``row`` is ``repr()`` of the row's stored columns exactly as SQLite returns them (ids, name, kinds, times,
  status, session, the JSON text of attributes, events, links, resource and scope, observer, sequence): a row
  edited in any column, or a verdict moved to another row, does not verify.

A row whose verdict is missing or does not verify is decoded and re-validated as before (and its verdict made
again). The projection of a row depends on the other rows of its batch only through the name registry rebuilt
from them (:func:`~otel_agentdiag.diagnostics.projection.stored_names`): a verdict is made only when every
registry lookup the row's validation made had an answer no batch can change (a name the row itself
contributes, or one no row can register), and a batch whose registry would overflow is re-validated whole.
So the output is the reference path's, byte for byte, whichever rows were reused (tests compare both).
Nothing here trusts a flag: the only thing reused is what the MAC proves this code made from these bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import re
import struct
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_agentdiag._internal.names import MAX_NAMES, NameRegistry
from otel_agentdiag.diagnostics.projection import (
    Projection,
    names_registry,
    project_row,
    registrable,
    resource_of,
    row_names,
    scope_of,
    strict_projection,
)
from otel_agentdiag.interchange.encoded import EncodedSpan
from otel_agentdiag.interchange.otlp_fast import WireEncoder
from otel_agentdiag.redaction.hashing import ALGORITHM, IdHasher
from otel_agentdiag.redaction.policy import STRICT, Policy
from otel_agentdiag.redaction.processor import SpanRedactor
from otel_agentdiag.storage.codec import decode_span
from otel_agentdiag.storage.verdicts import RawSpanRow

__all__ = ["ReusedProjection", "VerdictCodec", "policy_digest", "reuse_projection"]

_logger = logging.getLogger(__name__)

FORMAT = 1
"""The verdict blob's format (part of the MAC's tag)."""
PURPOSE = "strict-projection-verdict-mac"
"""The label of the MAC key derived from the store's hash key."""
_COLUMNS = 17
"""Stored columns covered by the MAC: :data:`~otel_agentdiag.storage.codec.SPAN_COLUMNS`."""
_HEADER = struct.Struct(">BH")
_PACKAGE = Path(__file__).resolve().parents[1]
_CODE = (
    "redaction",
    "_internal",
    "diagnostics/projection.py",
    "diagnostics/verdicts.py",
    "interchange/otlp_fast.py",
    "storage/codec.py",
    "semconv.py",
    "version.py",
)
"""The code a verdict depends on (relative to the package): its source is digested into the MAC's tag."""

Verdict = tuple[str, str, bytes, bytes]
"""``(trace_id, span_id, verdict, mac)``: a row of ``span_verdicts`` to save."""


def _canonical(value: Any) -> Any:
    """A JSON-able, process-independent form of a policy (sets sorted, no object addresses)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            type(value).__qualname__,
            [[f.name, _canonical(getattr(value, f.name))] for f in dataclasses.fields(value) if f.compare],
        ]
    if isinstance(value, Mapping):
        items = [[_canonical(k), _canonical(v)] for k, v in value.items()]
        return ["map", sorted(items, key=lambda item: json.dumps(item, sort_keys=True))]
    if isinstance(value, (set, frozenset)):
        return ["set", sorted((_canonical(v) for v in value), key=lambda item: json.dumps(item, sort_keys=True))]
    if isinstance(value, (list, tuple)):
        return ["seq", [_canonical(v) for v in value]]
    if isinstance(value, re.Pattern):
        return ["re", _canonical(value.pattern), value.flags]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, bytes):
        return ["bytes", value.hex()]
    return ["repr", type(value).__qualname__, repr(value)]


_POLICY_DIGESTS: dict[int, tuple[Policy, str]] = {}


def policy_digest(policy: Policy) -> str:
    """SHA-256 of the policy's canonical form: every rule, table and setting (a set in sorted order, so the
    digest is the same in every process). Remembered per policy object (policies are frozen)."""
    found = _POLICY_DIGESTS.get(id(policy))
    if found is not None and found[0] is policy:
        return found[1]
    text = json.dumps(_canonical(policy), sort_keys=True, separators=(",", ":"), default=repr)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    if len(_POLICY_DIGESTS) > 16:
        _POLICY_DIGESTS.clear()
    _POLICY_DIGESTS[id(policy)] = (policy, digest)
    return digest


_CODE_DIGEST: list[str | None] = []


def _code_digest() -> str | None:
    """SHA-256 of the source of :data:`_CODE` (None when it cannot be read: then nothing is reused)."""
    if _CODE_DIGEST:
        return _CODE_DIGEST[0]
    digest: str | None
    try:
        files: list[Path] = []
        for name in _CODE:
            path = _PACKAGE / name
            files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
        mac = hashlib.sha256()
        for path in files:
            mac.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
        digest = mac.hexdigest()
    except OSError:
        digest = None
    _CODE_DIGEST.append(digest)
    return digest


class VerdictCodec:
    """Makes, signs and checks verdicts for one key and policy (see the module docstring)."""

    def __init__(self, hasher: IdHasher, policy: Policy, code: str) -> None:
        from opentelemetry.sdk.version import __version__ as sdk_version

        from otel_agentdiag.version import __version__

        self._key = hasher.derived_key(PURPOSE)
        tag = "\0".join(
            ("otel-agentdiag/verdict", str(FORMAT), __version__, sdk_version, policy_digest(policy), str(hasher.key_id))
        )
        self._tag = (tag + "\0" + code + "\0").encode()

    @classmethod
    def for_key(cls, hasher: IdHasher | None, policy: Policy) -> VerdictCodec | None:
        """The codec, or None when nothing can be reused: no key (or an unkeyed one), or unreadable code."""
        if hasher is None or hasher.algorithm != ALGORITHM or policy.hash_function != ALGORITHM:
            return None
        code = _code_digest()
        return None if code is None else cls(hasher, policy, code)

    def mac(self, row: RawSpanRow, verdict: bytes) -> bytes | None:
        """The MAC of ``verdict`` for the stored columns of ``row`` (None when they do not encode)."""
        try:
            body = repr(tuple(row[:_COLUMNS])).encode("utf-8")
        except UnicodeEncodeError:  # pragma: no cover - repr() escapes what UTF-8 cannot hold
            return None
        message = b"".join((self._tag, len(body).to_bytes(8, "big"), body, verdict))
        return hmac.digest(self._key, message, "sha256")

    def verified(self, row: RawSpanRow) -> tuple[list[tuple[str, str]], bytes] | None:
        """The stored verdict of ``row`` (``names, wire``) when its MAC verifies, else None."""
        verdict, mac = row[_COLUMNS], row[_COLUMNS + 1]
        if type(verdict) is not bytes or type(mac) is not bytes:
            return None
        expected = self.mac(row, verdict)
        if expected is None or not hmac.compare_digest(expected, mac):
            return None
        return _parse(verdict)

    @staticmethod
    def encode(names: set[tuple[str, str]], clean: ReadableSpan, wire: WireEncoder) -> tuple[bytes, EncodedSpan] | None:
        """The verdict blob for a clean span and the span as encoded (None when the encoder refuses it)."""
        context = clean.context
        try:
            encoded_wire = wire.span(clean)
        except Exception:  # noqa: BLE001 - Unsupported or a surprise: this row is re-validated every time
            return None
        if context is None:  # pragma: no cover - the fast encoders refuse a span without one
            return None
        names_json = json.dumps(sorted(names), separators=(",", ":")).encode("utf-8") if names else b""
        if len(names_json) > 0xFFFF:
            return None
        encoded = EncodedSpan(
            context.trace_id, context.span_id, clean.resource, clean.instrumentation_scope, encoded_wire
        )
        return _HEADER.pack(FORMAT, len(names_json)) + names_json + encoded_wire, encoded


def _parse(verdict: bytes) -> tuple[list[tuple[str, str]], bytes] | None:
    """The ``(names, wire)`` of a verdict whose MAC verified (so one this code made)."""
    try:
        version, names_size = _HEADER.unpack_from(verdict)
        start = _HEADER.size
        names = json.loads(verdict[start : start + names_size]) if names_size else []
        wire = verdict[start + names_size :]
    except (struct.error, ValueError):
        return None
    if version != FORMAT:
        return None
    return [(kind, name) for kind, name in names], wire


class _RecordingRegistry(NameRegistry):
    """A name registry that notes every lookup while ``log`` is a list."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, object]] | None = None

    def is_registered(self, kind: str, name: object) -> bool:
        if self.log is not None:
            self.log.append((kind, name))
        return super().is_registered(kind, name)


def _batch_independent(lookups: list[tuple[str, object]], own: set[tuple[str, str]]) -> bool:
    """Whether every registry lookup has the same answer in any batch that holds the row (without overflow):
    a name the row contributes itself (registered), or one no row can contribute (never registered)."""
    try:
        return all((kind, name) in own or not registrable(name) for kind, name in lookups)
    except TypeError:  # an unhashable name: not a lookup the registry answers the same everywhere
        return False


@dataclass
class ReusedProjection:
    """:class:`~otel_agentdiag.diagnostics.projection.Projection` with reuse: ``spans`` holds rebuilt
    ``ReadableSpan`` objects and, for the rows whose verdict was reused, ``EncodedSpan`` items (only the fast
    encoders take those). ``verdicts`` are the new verdicts to save."""

    spans: list[ReadableSpan | EncodedSpan]
    omitted: int = 0
    omitted_reasons: dict[str, int] = field(default_factory=dict)
    reused: int = 0
    verdicts: list[Verdict] = field(default_factory=list)


def _plain(rows: Sequence[RawSpanRow], hasher: IdHasher | None, policy: Policy) -> ReusedProjection:
    projection = strict_projection([decode_span(row) for row in rows], hasher=hasher, policy=policy)
    return ReusedProjection(list(projection.spans), projection.omitted, projection.omitted_reasons)


def reuse_projection(
    rows: Sequence[RawSpanRow], *, hasher: IdHasher | None, policy: Policy = STRICT, make: bool = True
) -> ReusedProjection:
    """:func:`~otel_agentdiag.diagnostics.projection.strict_projection` of raw rows
    (:data:`~otel_agentdiag.storage.verdicts.VERDICT_COLUMNS`), reusing every verified verdict; the same spans
    in the same order, omissions counted alike. ``make``: also make verdicts for the rows re-validated now
    (returned in ``verdicts``, for the caller to save). Without a usable key nothing is reused or made."""
    codec = VerdictCodec.for_key(hasher, policy)
    if codec is None or hasher is None:
        return _plain(rows, hasher, policy)
    hits: dict[int, tuple[list[tuple[str, str]], bytes]] = {}
    decoded = {}
    found: set[tuple[str, str]] = set()
    own: dict[int, set[tuple[str, str]]] = {}
    for index, row in enumerate(rows):
        hit = codec.verified(row)
        if hit is not None:
            hits[index] = hit
            found.update(hit[0])
        else:
            span = decoded[index] = decode_span(row)
            names = own[index] = row_names(span)
            found |= names
    per_kind = Counter(kind for kind, _ in found)
    if any(count > MAX_NAMES for count in per_kind.values()):
        return _plain(rows, hasher, policy)  # the registry overflows (it says so): it depends on the whole batch
    registry = _RecordingRegistry()
    if names_registry(found, registry) is not registry:  # pragma: no cover - counted just above
        return _plain(rows, hasher, policy)
    redactor = SpanRedactor(policy, hasher, registry)
    out = ReusedProjection(spans=[])
    counts = Projection(spans=[])
    shared: dict[Any, Any] = {}
    placed: dict[tuple[Any, Any], tuple[Any, Any] | None] = {}
    wire = WireEncoder()
    for index, row in enumerate(rows):
        hit = hits.get(index)
        if hit is not None:
            encoded = _encoded(row, hit, redactor, shared, placed)
            if encoded is not None:
                out.spans.append(encoded)
                out.reused += 1
                continue
            span = decode_span(row)  # pragma: no cover - a verified row always places (its columns were valid)
            own[index] = row_names(span)
        else:
            span = decoded[index]
        registry.log = []
        clean = project_row(span, redactor, shared, counts)
        lookups, registry.log = registry.log, None
        if clean is None:
            continue
        made = codec.encode(own[index], clean, wire) if make and _batch_independent(lookups, own[index]) else None
        mac = None if made is None else codec.mac(row, made[0])
        if made is None or mac is None:
            out.spans.append(clean)
            continue
        verdict, encoded = made
        out.verdicts.append((row[0], row[1], verdict, mac))
        out.spans.append(encoded)  # encoded once: the caller writes these bytes too
    out.omitted, out.omitted_reasons = counts.omitted, counts.omitted_reasons
    return out


def _encoded(
    row: RawSpanRow,
    hit: tuple[list[tuple[str, str]], bytes],
    redactor: SpanRedactor,
    shared: dict[Any, Any],
    placed: dict[tuple[Any, Any], tuple[Any, Any] | None],
) -> EncodedSpan | None:
    """The reused span, placed under the clean resource and scope its stored columns give (the very objects
    the redactor gives a re-validated span of the batch), or None when they do not decode."""
    key = (row[13], row[14])
    if key in placed:
        place = placed[key]
    else:
        place = placed[key] = _place(row[13], row[14], redactor, shared)
    if place is None:
        return None
    try:
        trace_id, span_id = int(row[0], 16), int(row[1], 16)
    except (TypeError, ValueError):
        return None
    return EncodedSpan(trace_id, span_id, place[0], place[1], hit[1])


def _place(
    resource_text: Any, scope_text: Any, redactor: SpanRedactor, shared: dict[Any, Any]
) -> tuple[Any, Any] | None:
    try:
        attributes = {} if resource_text is None else json.loads(resource_text)
        stored_scope = None if scope_text is None else json.loads(scope_text)
        if type(attributes) is not dict or not (stored_scope is None or type(stored_scope) is dict):
            return None
        resource = resource_of(attributes, shared)
        scope = scope_of(stored_scope, shared)
        return redactor.clean_resource(resource), redactor.clean_scope(scope)
    except Exception:  # noqa: BLE001 - not placeable here: the row is re-validated instead
        return None
