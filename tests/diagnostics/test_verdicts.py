"""Stored verdicts: push and export with reuse send and write exactly what the reference path does.

A real store (the demo agent and agent runs through the public API, the key file beside the store) is pushed
once (which stores a verdict per row), then exported and pushed again (reusing them). Every output is compared,
byte for byte, with the reference path: every row decoded and re-validated under the strict policy
(``strict_projection``), encoded by the SDK's own encoder. Then a process without the key edits the store: a row
changed under its verdict (the trigger that would drop the verdict removed first), a verdict moved to another
row, a verdict made with another key for a row holding a raw value, a verdict whose bytes were changed. Each of
those rows is re-validated (and redacted exactly as the reference path does), none of the planted values leaves,
and every other row is still reused.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import names
from otel_agentdiag.cli import cli
from otel_agentdiag.demo import run_demo_agent
from otel_agentdiag.diagnostics import push as push_module
from otel_agentdiag.diagnostics import verdicts
from otel_agentdiag.diagnostics.projection import load_store_hasher, strict_projection
from otel_agentdiag.diagnostics.push import push_spans
from otel_agentdiag.diagnostics.verdicts import VerdictCodec, policy_digest, reuse_projection
from otel_agentdiag.interchange import encoded
from otel_agentdiag.interchange.otlp_json import _chunks
from otel_agentdiag.interchange.otlp_request import request_to_otlp_json, span_encoder
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.policy import STRICT
from otel_agentdiag.storage import SpanStore
from otel_agentdiag.storage.codec import SPAN_COLUMNS, decode_span
from otel_agentdiag.storage.verdicts import RawSpanRow

ENDPOINT = "sha256:" + "1" * 64
BATCH = 5
_tag = uuid.uuid4().hex[:10]
EMAIL = f"verdict.{_tag}@example.com"
FOREIGN = f"FOREIGN_SESSION_{_tag}"
TOOLS = ("lookup_fare", "book_seat")


class Recorder(SpanExporter):
    """Takes encoded batches (as the SDK exporters ``push_exporter`` builds do) and keeps each payload."""

    takes_encoded = True

    def __init__(self) -> None:
        self.payloads: list[bytes] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise AssertionError("a batch with reused verdicts must go out as bytes")

    def export_encoded(self, spans: Sequence[Any], payload: bytes) -> SpanExportResult:
        self.payloads.append(payload)
        return SpanExportResult.SUCCESS


@pytest.fixture()
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv("AGENTDIAG_HASH_KEY", raising=False)
    path = tmp_path / "traces.db"
    agentdiag.register_names(tools=list(TOOLS))
    with agentdiag.configure(service_name="verdicts", store=path, set_global=False) as diag:
        run_demo_agent()
        for n in range(4):
            with agentdiag.agent_run("fare_agent", conversation_id=f"conv-{_tag}-{n}", user_id=f"user-{n}"):
                with agentdiag.iteration(0):
                    with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                        call.record_response(response_model="gpt-4o-mini", finish_reasons=["tool_calls"])
                    with agentdiag.tool_call(TOOLS[n % 2], call_id=f"call-{n}"):
                        pass
        diag.force_flush()
    yield path


def _raw_rows(path: Path) -> list[RawSpanRow]:
    """Every row as export reads them (session by session), with verdict and MAC."""
    with SpanStore(path, create=False) as store:
        return [row for s in store.list_sessions() if s.span_count for row in store.session_span_rows(s.session)]


def _reference_lines(path: Path) -> list[str]:
    """What export wrote before any verdict existed: every row re-validated, the SDK encoder, protobuf's JSON."""
    rows = [decode_span(row) for row in _raw_rows(path)]
    spans = strict_projection(rows, hasher=load_store_hasher(path)).spans
    encode = span_encoder()
    return [
        json.dumps(request_to_otlp_json(encode(chunk)), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        for chunk in _chunks(spans)
    ]


def _reference_payloads(path: Path) -> list[bytes]:
    """What push sent before any verdict existed, page by page: the SDK encoder over the strict projection."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            f"SELECT {SPAN_COLUMNS} FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
            " ORDER BY s.start_ns, s.trace_id, s.span_id"
        ).fetchall()
    hasher = load_store_hasher(path)
    payloads = []
    for start in range(0, len(rows), BATCH):
        spans = strict_projection([decode_span(r) for r in rows[start : start + BATCH]], hasher=hasher).spans
        if spans:
            payloads.append(encode_spans(spans).SerializePartialToString())
    return payloads


def _export(path: Path, out: Path) -> list[str]:
    result = CliRunner().invoke(
        cli, ["export", "--format", "otlp-json", "--out", str(out), "--store", str(path)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8").splitlines()


def _push(path: Path) -> list[bytes]:
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM push_marks")
    recorder = Recorder()
    with SpanStore(path, create=False) as store:
        result = push_spans(store, recorder, endpoint=ENDPOINT, hasher=load_store_hasher(path), batch_size=BATCH)
    assert result.ok and result.batches == len(recorder.payloads)
    return recorder.payloads


def _reused(path: Path) -> int:
    return reuse_projection(_raw_rows(path), hasher=load_store_hasher(path), make=False).reused


def _verdict_count(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM span_verdicts").fetchone()[0])


def test_push_makes_verdicts_and_export_and_push_reuse_them_with_the_same_output(
    store_path: Path, tmp_path: Path
) -> None:
    reference_lines, reference_payloads = _reference_lines(store_path), _reference_payloads(store_path)
    rows = len(_raw_rows(store_path))
    assert rows >= 20 and _verdict_count(store_path) == 0 and _reused(store_path) == 0

    assert _export(store_path, tmp_path / "0.jsonl") == reference_lines
    assert _verdict_count(store_path) == 0  # export is a reader: it makes none
    assert _push(store_path) == reference_payloads
    assert _verdict_count(store_path) == rows  # every row of a store our pipeline wrote gets one

    assert _reused(store_path) == rows
    assert _export(store_path, tmp_path / "1.jsonl") == reference_lines
    assert _push(store_path) == reference_payloads


def test_a_verdict_is_reused_only_under_the_key_and_policy_it_was_made_with(
    store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _push(store_path)
    rows = _raw_rows(store_path)
    assert reuse_projection(rows, hasher=load_store_hasher(store_path), make=False).reused == len(rows)
    other = IdHasher(os.urandom(32))
    assert reuse_projection(rows, hasher=other, make=False).reused == 0
    assert reuse_projection(rows, hasher=None, make=False).reused == 0  # no key: nothing to verify with
    looser = STRICT.derive("stricter", allowed_span_names=frozenset({"one more"}))
    assert policy_digest(looser) != policy_digest(STRICT)
    assert reuse_projection(rows, hasher=load_store_hasher(store_path), policy=looser, make=False).reused == 0
    # A store opened with another key: the export is the reference path's under that key.
    monkeypatch.setenv("AGENTDIAG_HASH_KEY", os.urandom(32).hex())
    assert _export(store_path, tmp_path / "2.jsonl") == _reference_lines(store_path)


def _set_attributes(conn: sqlite3.Connection, rowid: int, change: Any) -> None:
    (text,) = conn.execute("SELECT attributes FROM spans WHERE rowid = ?", (rowid,)).fetchone()
    attributes = json.loads(text)
    change(attributes)
    conn.execute("UPDATE spans SET attributes = ? WHERE rowid = ?", (json.dumps(attributes), rowid))


def test_rows_and_verdicts_edited_without_the_key_are_re_validated(store_path: Path, tmp_path: Path) -> None:
    _push(store_path)
    rows = len(_raw_rows(store_path))
    with sqlite3.connect(store_path) as conn:
        conn.execute("DROP TRIGGER span_verdicts_follow_update")  # what a hostile writer would do first
        models = [r for (r,) in conn.execute("SELECT rowid FROM spans WHERE attributes LIKE '%gen_ai.request.model%'")]
        sessions = [
            r
            for (r,) in conn.execute("SELECT rowid FROM spans WHERE attributes LIKE '%conversation.id%'")
            if r not in models[:3]
        ]
        assert len(models) >= 3 and len(sessions) >= 2, "precondition: four distinct rows to edit"
        ids = {
            rowid: conn.execute("SELECT trace_id, span_id FROM spans WHERE rowid = ?", (rowid,)).fetchone()
            for rowid in (*models[:3], *sessions[:2])
        }
        # 1. A row changed under its (kept) verdict: a raw e-mail address where the model name was.
        _set_attributes(conn, models[0], lambda a: a.__setitem__(sc.GEN_AI_REQUEST_MODEL, EMAIL))
        # 2. A verdict moved to another row (both the blob and its MAC).
        moved = conn.execute(
            "SELECT verdict, mac FROM span_verdicts WHERE trace_id = ? AND span_id = ?", ids[models[1]]
        ).fetchone()
        conn.execute(
            "UPDATE span_verdicts SET verdict = ?, mac = ? WHERE trace_id = ? AND span_id = ?",
            (*moved, *ids[models[2]]),
        )
        # 3. A raw session id planted in a row, with a verdict for it made with another key (one that passes
        #    the planted value through, as a forger would write it).
        _set_attributes(conn, sessions[0], lambda a: a.__setitem__(sc.GEN_AI_CONVERSATION_ID, FOREIGN))
        (raw,) = [
            r
            for r in conn.execute(
                "SELECT " + SPAN_COLUMNS + ", NULL, NULL FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
                " WHERE s.rowid = ?",
                (sessions[0],),
            )
        ]
        forger = VerdictCodec(IdHasher(os.urandom(32)), STRICT, "forged")
        (blob, _) = conn.execute(
            "SELECT verdict, mac FROM span_verdicts WHERE trace_id = ? AND span_id = ?", ids[sessions[0]]
        ).fetchone()
        forged = blob.replace(b"\x00", b"\x00")  # any blob: the MAC is what a forger cannot make
        conn.execute(
            "UPDATE span_verdicts SET verdict = ?, mac = ? WHERE trace_id = ? AND span_id = ?",
            (forged, forger.mac(raw, forged), *ids[sessions[0]]),
        )
        # 4. A verdict's bytes changed, its MAC kept (stored as TEXT that is not UTF-8, too).
        conn.execute(
            "UPDATE span_verdicts SET verdict = verdict || x'00' WHERE trace_id = ? AND span_id = ?", ids[sessions[1]]
        )
    text = "".join(json.dumps(r) for r in sqlite3.connect(store_path).execute("SELECT attributes FROM spans"))
    assert EMAIL in text and FOREIGN in text, "precondition: the store holds the planted values"
    assert _verdict_count(store_path) == rows, "precondition: every verdict is still there"

    assert _reused(store_path) == rows - 4
    reference_lines, reference_payloads = _reference_lines(store_path), _reference_payloads(store_path)
    written = _export(store_path, tmp_path / "2.jsonl")
    assert written == reference_lines
    sent = _push(store_path)
    assert sent == reference_payloads
    for planted in (EMAIL, FOREIGN):
        assert planted not in "\n".join(written)
        assert all(planted.encode() not in payload for payload in sent)
    assert _reused(store_path) == rows  # push made them again, for these bytes, with the store's key
    assert _export(store_path, tmp_path / "3.jsonl") == reference_lines


def test_a_row_whose_validation_depends_on_other_rows_gets_no_verdict(store_path: Path, tmp_path: Path) -> None:
    """A tool name on a link is kept only when some row of the batch registers it: such a verdict would depend
    on the batch, so none is made and the row is re-validated every time."""
    with sqlite3.connect(store_path) as conn:
        rowid, trace_id, span_id = conn.execute(
            "SELECT rowid, trace_id, span_id FROM spans WHERE attributes LIKE '%invoke_agent%' LIMIT 1"
        ).fetchone()
        link = {"trace_id": trace_id, "span_id": span_id, "attributes": {sc.GEN_AI_TOOL_NAME: TOOLS[0]}}
        conn.execute("UPDATE spans SET links = ? WHERE rowid = ?", (json.dumps([link]), rowid))
    rows = len(_raw_rows(store_path))
    assert _push(store_path) == _reference_payloads(store_path)
    with sqlite3.connect(store_path) as conn:
        kept = {tuple(r) for r in conn.execute("SELECT trace_id, span_id FROM span_verdicts")}
    assert len(kept) == rows - 1 and (trace_id, span_id) not in kept
    assert _export(store_path, tmp_path / "1.jsonl") == _reference_lines(store_path)
    assert TOOLS[0] in (tmp_path / "1.jsonl").read_text()  # precondition: the link's name was kept (registered)
    assert _push(store_path) == _reference_payloads(store_path)


def test_clearing_a_session_deletes_its_verdicts(store_path: Path) -> None:
    _push(store_path)
    with SpanStore(store_path, create=False) as store:
        session = next(s.session for s in store.list_sessions() if s.session and s.span_count)
        count = len(store.session_spans(session))
        before = _verdict_count(store_path)
        store.clear_session(session)
    assert count > 0 and _verdict_count(store_path) == before - count


def test_the_policy_digest_is_the_same_in_every_process() -> None:
    code = "from otel_agentdiag.diagnostics.verdicts import policy_digest; from otel_agentdiag.redaction.policy "
    code += "import STRICT; print(policy_digest(STRICT))"
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }
    assert digests == {policy_digest(STRICT)}


def test_a_batch_whose_name_registry_overflows_is_re_validated_whole_and_gets_no_verdict(
    store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More distinct names than a registry holds: none is restored (every name is ``_OTHER``), which depends on
    the whole batch, so nothing is reused or made."""
    _push(store_path)  # verdicts made under the real limit
    monkeypatch.setattr(names, "MAX_NAMES", 1)  # the store holds two tool names
    monkeypatch.setattr(verdicts, "MAX_NAMES", 1)
    assert reuse_projection(_raw_rows(store_path), hasher=load_store_hasher(store_path)).verdicts == []
    assert _reused(store_path) == 0
    written = _export(store_path, tmp_path / "1.jsonl")
    assert written == _reference_lines(store_path)
    assert all(tool not in "\n".join(written) for tool in TOOLS) and sc.OTHER_VALUE in "\n".join(written)


def test_export_falls_back_to_re_validating_when_a_reused_verdict_cannot_be_written(
    store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes a verdict holds that the JSON reader refuses (they verified, so this is a reader's limit, not
    tampering): the export re-validates every row and writes the reference lines."""
    _push(store_path)
    reference = _reference_lines(store_path)

    def refuse(wire: bytes) -> dict[str, Any]:
        raise ValueError("not a span the encoder wrote")

    monkeypatch.setattr(encoded, "span_json", refuse)
    assert _reused(store_path) == len(_raw_rows(store_path))  # precondition: every row would be reused
    assert _export(store_path, tmp_path / "1.jsonl") == reference


def test_push_falls_back_to_the_sdk_encoder_when_a_batch_does_not_encode(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch the fast encoder refuses goes to the exporter as rebuilt spans (never as reused verdicts)."""
    _push(store_path)
    reference = _reference_payloads(store_path)

    def refuse(spans: Any, encoder: Any = None) -> bytes:
        raise ValueError("refused")

    class Spans(Recorder):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            assert all(isinstance(span, ReadableSpan) for span in spans)
            self.payloads.append(encode_spans(spans).SerializePartialToString())
            return SpanExportResult.SUCCESS

    monkeypatch.setattr(push_module, "request_bytes", refuse)
    with sqlite3.connect(store_path) as conn:
        conn.execute("DELETE FROM push_marks")
    recorder = Spans()
    with SpanStore(store_path, create=False) as store:
        result = push_spans(store, recorder, endpoint=ENDPOINT, hasher=load_store_hasher(store_path), batch_size=BATCH)
    assert result.ok and recorder.payloads == reference
