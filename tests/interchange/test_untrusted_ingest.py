"""Imported spans are untrusted: forged files cannot degrade or impersonate a session this machine observed,
nothing a file holds skips the policy, and push and export re-validate whatever the store holds.

The victim is a real store: ``agentdiag demo`` (the real pipeline). The attacker knows what a support bundle
of it shows (``agentdiag export``): the session digest made with the store's key, the observer ids, the
trace and span ids and the sequence numbers, and they may know the raw conversation id too. Their files are
OTLP-JSON (what ``agentdiag ingest`` reads) and Jaeger-JSON (which it refuses). Everything is checked
through the commands, on the SQLite file, its ``-wal`` and ``-shm``, and at a real OTLP receiver.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from e2e.otlp_receiver import OTLPReceiver

from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli
from otel_agentdiag.diagnostics.bundle import build_bundle
from otel_agentdiag.diagnostics.projection import load_store_hasher
from otel_agentdiag.interchange.ingest import imported_observer
from otel_agentdiag.storage import SpanStore

SENTINEL = "ZQXSENTINEL"
"""In every part of a forged span the policy must remove; never in the store, an output or a payload."""
_ENV_PREFIXES = ("AGENTDIAG_", "OTEL_")
AS_OF = "2031-01-01T00:00:00Z"


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def cli_json(*args: str | Path) -> Any:
    result = invoke(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    """A store a real pipeline wrote (the demo agent): one observed session."""
    store = tmp_path / "victim" / "traces.db"
    assert invoke("demo", "--store", store).exit_code == 0
    return store


@pytest.fixture()
def leaked(victim: Path, tmp_path: Path) -> dict[str, Any]:
    """What the attacker copied from a support bundle of the victim's session."""
    out = tmp_path / "bundle.json"
    assert invoke("export", "--out", out, "--store", victim).exit_code == 0
    bundle = json.loads(out.read_text())
    (entry,) = bundle["sessions"]
    spans = entry["spans"]
    return {
        "session": entry["session"],
        "observer": spans[0]["attributes"][sc.AGENTDIAG_OBSERVER_ID],
        "trace_id": spans[0]["trace_id"],
        "spans": spans,
        "sequences": sorted(s["attributes"][sc.AGENTDIAG_SEQUENCE] for s in spans),
    }


# -- forging -------------------------------------------------------------------------------------------------------
def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": value}


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in values.items()]


_counter = iter(range(1, 1 << 30))


def span_id() -> str:
    return f"{0xF00D000000000000 + next(_counter):016x}"


def forged_span(
    trace_id: str,
    attributes: dict[str, Any],
    *,
    sid: str | None = None,
    parent: str | None = None,
    name: str = f"chat {SENTINEL}-in-the-span-name",
    error: bool = True,
) -> dict[str, Any]:
    """A span with a sentinel wherever the policy must take it out: the span name, unknown keys, credential
    and URL values under allowed keys, an exception message, an event the policy does not know, a link's
    attributes and trace state, the span's trace state and its status message."""
    now = time.time_ns()
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": sid or span_id(),
        "name": name,
        "kind": 3,
        "startTimeUnixNano": str(now - 2_000_000),
        "endTimeUnixNano": str(now - 1_000_000),
        "traceState": f"vendor={SENTINEL}",
        "attributes": _attributes(
            {
                **attributes,
                "gen_ai.prompt": f"my card is 4111 1111 1111 1111 {SENTINEL}",
                f"llm.{SENTINEL.lower()}": 3,
                "gen_ai.request.model": f"sk-proj-{SENTINEL}0123456789abcdefghij",
                sc.SERVER_ADDRESS: f"https://{SENTINEL}.example/path",
                sc.ERROR_TYPE: f"/home/{SENTINEL}/secrets.txt",
                "user.email": f"{SENTINEL}@example.com",
            }
        ),
        "events": [
            {
                "timeUnixNano": str(now - 1_500_000),
                "name": "exception",
                "attributes": _attributes(
                    {"exception.type": "ValueError", "exception.message": f"password={SENTINEL}"}
                ),
            },
            {"timeUnixNano": str(now - 1_400_000), "name": f"{SENTINEL}-event", "attributes": []},
        ],
        "links": [
            {
                "traceId": "0af7651916cd43dd8448eb211c80319c",
                "spanId": "00f067aa0ba902b7",
                "traceState": f"k={SENTINEL}",
                "attributes": _attributes({"link.note": SENTINEL}),
            }
        ],
        "status": {"code": 2 if error else 1, "message": f"failed for {SENTINEL}"},
    }
    if parent is not None:
        span["parentSpanId"] = parent
    return span


def forged_document(spans: list[dict[str, Any]]) -> dict[str, Any]:
    """One request whose resource and scope carry sentinels too (command line, host, schema URLs)."""
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": _attributes(
                        {
                            "service.name": "agentdiag-demo",
                            "process.command_line": f"python agent.py --token {SENTINEL}",
                            "host.name": f"{SENTINEL}-laptop",
                            "service.instance.id": f"ghp_{SENTINEL}0123456789abcdefghijklmnopq",
                        }
                    )
                },
                "schemaUrl": f"https://user:{SENTINEL}@opentelemetry.io/schemas/1.21.0?t={SENTINEL}",
                "scopeSpans": [
                    {
                        "scope": {
                            "name": f"https://{SENTINEL}.example/scope",
                            "version": "1.0",
                            "attributes": _attributes({"scope.secret": SENTINEL}),
                        },
                        "schemaUrl": f"https://opentelemetry.io/schemas/{SENTINEL}?x=1",
                        "spans": spans,
                    }
                ],
            }
        ]
    }


def write_lines(path: Path, *documents: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in documents))
    return path


def impersonating_file(path: Path, leaked: dict[str, Any]) -> Path:
    """Spans that claim the victim's observer id, carry its session digest (made with the store's key, copied
    from the bundle), reuse its sequence numbers (duplicates), skip some (a gap), are errors, and one reuses
    the ids of a stored span."""
    claims = {sc.AGENTDIAG_OBSERVER_ID: leaked["observer"], sc.GEN_AI_CONVERSATION_ID: leaked["session"]}
    trace_id = leaked["trace_id"]
    victim_span = leaked["spans"][0]
    spans = [
        forged_span(trace_id, {**claims, sc.AGENTDIAG_SEQUENCE: seq, sc.AGENTDIAG_KIND: "llm"})
        for seq in [*leaked["sequences"][:3], leaked["sequences"][-1] + 40]
    ]
    spans.append(
        forged_span(
            trace_id,
            {**claims, sc.AGENTDIAG_SEQUENCE: victim_span["attributes"][sc.AGENTDIAG_SEQUENCE]},
            sid=victim_span["span_id"],
            parent=victim_span["parent_span_id"],
            name=f"invoke_agent {SENTINEL}",
        )
    )
    return write_lines(path, forged_document(spans[:2]), forged_document(spans[2:]))


def raw_id_file(path: Path, leaked: dict[str, Any], raw_id: str) -> Path:
    """Spans that name the victim's raw conversation id (hashed by the ingest into the very same digest),
    with tool names a model made up and tool errors, in the victim's trace."""
    spans = [
        forged_span(
            leaked["trace_id"],
            {
                sc.GEN_AI_CONVERSATION_ID: raw_id,
                sc.AGENTDIAG_KIND: "tool",
                sc.GEN_AI_OPERATION_NAME: "execute_tool",
                sc.GEN_AI_TOOL_NAME: f"ghp_{SENTINEL}0123456789abcdefghijklmnopq",
            },
            parent=leaked["spans"][-1]["span_id"],
        )
        for _ in range(4)
    ]
    return write_lines(path, forged_document(spans))


# -- reading what the victim sees -----------------------------------------------------------------------------------
def observed_view(store: Path, session: str, bundle_at: int) -> dict[str, Any]:
    """Everything the victim's commands say about the observed session."""
    with SpanStore(store, create=False) as opened:
        (trace_id,) = {s.trace_id for s in opened.session_spans(session)}
        bundle = build_bundle(opened, [session], hasher=load_store_hasher(store), now_ns=bundle_at)
    shown = cli_json("show", trace_id, "--store", store)
    return {
        "receipt": cli_json("receipt", "--session", session, "--store", store),
        "status": cli_json("status", "--session", session, "--as-of", AS_OF, "--with-receipt", "--store", store),
        "default_status": cli_json("status", "--as-of", AS_OF, "--store", store),
        "session_row": [r for r in cli_json("sessions", "--store", store) if r["session"] == session],
        "observed_spans_of_its_trace": [s for s in shown["spans"] if not s.get("imported")],
        "bundle": bundle,
    }


def store_files(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(store.parent.iterdir()) if p.name.startswith(store.name)}


@pytest.fixture()
def reader(victim: Path) -> Iterator[SpanStore]:
    """A connection held open during the ingest, so its writes stay in the -wal file to be read there."""
    with SpanStore(victim, create=False) as opened:
        opened.span_count()
        yield opened


# -- the attacks -----------------------------------------------------------------------------------------------------
def test_a_forged_file_claiming_the_victims_observer_and_digest_changes_nothing_it_observed(
    victim: Path, leaked: dict[str, Any], tmp_path: Path, reader: SpanStore
) -> None:
    session = leaked["session"]
    at = time.time_ns()
    before = observed_view(victim, session, at)
    with SpanStore(victim, create=False) as opened:
        observers_before = {o.observer: o for o in opened.observers()}
        rows_before = {s.span_id: s for s in opened.session_spans(session)}

    result = invoke("ingest", impersonating_file(tmp_path / "forged.jsonl", leaked), "--store", victim)
    assert result.exit_code == 0, result.output
    assert SENTINEL not in result.output

    after = observed_view(victim, session, at)
    assert after == before  # receipt, status, the sessions row, the trace's observed spans, the bundle: as they were
    assert before["receipt"]["status"] == "valid" and before["receipt"]["provenance"] == "observed"
    assert after["default_status"]["session"] == session  # `status` without --session still shows the victim
    default_bundle = tmp_path / "default-bundle.json"
    assert invoke("export", "--out", default_bundle, "--store", victim).exit_code == 0
    assert json.loads(default_bundle.read_text())["scope"]["sessions"] == [session]  # though the forgery is newer

    with SpanStore(victim, create=False) as opened:
        assert {s.span_id: s for s in opened.session_spans(session)} == rows_before  # not overwritten, nothing added
        observers = {o.observer: o for o in opened.observers()}
        # The victim's observer row is untouched; the claimed id was re-keyed into an imported observer.
        assert observers[leaked["observer"]] == observers_before[leaked["observer"]]
        assert not observers[leaked["observer"]].imported
        rekeyed = imported_observer(load_store_hasher(victim), leaked["observer"])  # type: ignore[arg-type]
        assert rekeyed != leaked["observer"] and observers[rekeyed].imported
        forged = opened.session_spans(f"imported:{session}")
        assert {s.observer for s in forged} == {rekeyed}
        assert len(forged) == 4  # the span that reused the ids of a stored span was a duplicate, not a write

    imported = cli_json("receipt", "--session", f"imported:{session}", "--store", victim)
    # Judged on its own numbers and counts: doubled and missing numbers, and the credentials it carried.
    assert imported["provenance"] == "imported" and imported["status"] == "quarantined"
    assert {"imported", "duplicate_sequence", "sequence_gap", "public_safety_violation"} <= set(imported["reasons"])
    whole = cli_json("receipt", "--store", victim)
    assert whole["provenance"] == "mixed" and whole["status"] != "valid"
    listed = {r["session"]: r for r in cli_json("sessions", "--store", victim)}
    assert (listed[session]["provenance"], listed[session]["receipt_status"]) == ("observed", "valid")
    assert (listed[f"imported:{session}"]["provenance"], listed[f"imported:{session}"]["receipt_status"]) == (
        "imported",
        "quarantined",
    )
    shown = cli_json("show", leaked["trace_id"], "--store", victim)
    assert {s["span_id"] for s in shown["spans"] if s.get("imported")} == {s.span_id for s in forged}
    tree = invoke("show", leaked["trace_id"], "--store", victim)
    assert tree.stdout.count("IMPORTED") == len(forged)

    for name, data in store_files(victim).items():  # the database, its -wal (a reader held it open) and -shm
        assert SENTINEL.encode() not in data, name
        assert SENTINEL.lower().encode() not in data, name
    assert any(name.endswith("-wal") and data for name, data in store_files(victim).items())


def test_the_raw_id_of_an_observed_session_files_forged_spans_as_imported(
    victim: Path, leaked: dict[str, Any], tmp_path: Path
) -> None:
    """Knowing the raw conversation id gives the same digest as the store's key: still a separate, imported
    session, and the model-made tool names are _OTHER (a credential-shaped one never gets registered)."""
    session = leaked["session"]
    hasher = load_store_hasher(victim)
    assert hasher is not None
    raw = "conv-known-to-the-attacker"
    # Plant the observed session under that raw id's digest: a second real run, with a raw id we know.
    run = tmp_path / "run.py"
    run.write_text(
        "import sys, otel_agentdiag as a\n"
        "a.register_names(tools=['lookup_order'])\n"
        "with a.configure(service_name='victim', store=sys.argv[1], set_global=False) as d:\n"
        "    with a.agent_run('victim-agent', conversation_id=sys.argv[2]):\n"
        "        with a.iteration(0):\n"
        "            with a.tool_call('lookup_order', call_id='c1'):\n"
        "                pass\n"
        "    d.force_flush()\n"
    )
    done = subprocess.run([sys.executable, str(run), str(victim), raw], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    target = hasher.digest(sc.ID_KIND_CONVERSATION, raw)
    at = time.time_ns()
    before = observed_view(victim, target, at)
    assert before["receipt"]["status"] == "valid"

    forged = raw_id_file(tmp_path / "raw.jsonl", {**leaked, "trace_id": _trace_of(victim, target)}, raw)
    for extra in ((), ("--trust-names",)):
        result = invoke("ingest", forged, "--store", victim, *extra)
        assert result.exit_code == 0, result.output
        assert observed_view(victim, target, at) == before
    with SpanStore(victim, create=False) as opened:
        copies = opened.session_spans(f"imported:{target}")
    assert copies and all(s.status == "error" for s in copies)
    assert {s.attributes.get(sc.GEN_AI_TOOL_NAME) for s in copies} == {sc.OTHER_VALUE}
    # `--session <raw id>` means the observed session; its imported namesake is named in full.
    assert cli_json("receipt", "--session", raw, "--store", victim)["session"] == target
    prefix = target.rsplit(":", 1)[1][:20]  # a hex prefix both the session and its imported namesake have
    assert cli_json("receipt", "--session", prefix, "--store", victim)["session"] == target
    assert cli_json("receipt", "--session", f"imported:{target}", "--store", victim)["status"] != "valid"
    assert leaked["session"] == session  # the demo session was never touched either
    assert SENTINEL.encode() not in b"".join(store_files(victim).values())


def _trace_of(store: Path, session: str) -> str:
    with SpanStore(store, create=False) as opened:
        (trace_id,) = {s.trace_id for s in opened.session_spans(session)}
    return trace_id


def test_rejected_lines_that_name_an_observed_session_do_not_make_it_invalid(
    victim: Path, leaked: dict[str, Any], tmp_path: Path
) -> None:
    session = leaked["session"]
    at = time.time_ns()
    before = observed_view(victim, session, at)
    bad = forged_span(leaked["trace_id"], {sc.GEN_AI_CONVERSATION_ID: session})
    bad["spanId"] = f"not-hex-{SENTINEL}"
    path = write_lines(tmp_path / "bad.jsonl", forged_document([bad]))
    result = invoke("ingest", path, "--store", victim, "--format", "json")
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["rejections"] == [
        {"location": "line 1", "reason": "invalid_id", "sessions": [f"imported:{session}"]}
    ]
    assert observed_view(victim, session, at) == before
    whole = cli_json("receipt", "--store", victim)
    assert whole["status"] == "invalid" and "ingest_violation" in whole["reasons"]  # the store says so
    assert cli_json("receipt", "--session", f"imported:{session}", "--store", victim)["status"] == "invalid"


def test_a_jaeger_json_file_is_refused_and_a_jaeger_line_among_otlp_lines_is_rejected(
    victim: Path, leaked: dict[str, Any], tmp_path: Path
) -> None:
    session = leaked["session"]
    at = time.time_ns()
    before = observed_view(victim, session, at)
    jaeger = {
        "data": [
            {
                "traceID": leaked["trace_id"],
                "spans": [
                    {
                        "traceID": leaked["trace_id"],
                        "spanID": span_id(),
                        "operationName": f"invoke_agent {SENTINEL}",
                        "references": [],
                        "startTime": time.time_ns() // 1000,
                        "duration": 10,
                        "tags": [
                            {"key": sc.AGENTDIAG_OBSERVER_ID, "type": "string", "value": leaked["observer"]},
                            {"key": sc.GEN_AI_CONVERSATION_ID, "type": "string", "value": session},
                            {"key": "secret", "type": "string", "value": SENTINEL},
                        ],
                        "logs": [],
                        "processID": "p1",
                    }
                ],
                "processes": {"p1": {"serviceName": SENTINEL, "tags": []}},
            }
        ]
    }
    whole_file = tmp_path / "trace.jaeger.json"
    whole_file.write_text(json.dumps(jaeger, indent=2))
    files_before = store_files(victim)
    refused = invoke("ingest", whole_file, "--store", victim)
    assert refused.exit_code == 2
    assert SENTINEL not in refused.output
    assert store_files(victim) == files_before  # nothing written

    good = forged_document([forged_span(leaked["trace_id"], {sc.GEN_AI_CONVERSATION_ID: session})])
    mixed = write_lines(tmp_path / "mixed.jsonl", good, jaeger)
    result = invoke("ingest", mixed, "--store", victim)
    assert result.exit_code == 1 and "line 2: not_otlp" in result.stdout
    assert observed_view(victim, session, at) == before
    assert SENTINEL.encode() not in b"".join(store_files(victim).values())


# -- push and export re-validate whatever is stored ----------------------------------------------------------------
def plant_row(store: Path, session: str, trace_id: str) -> str:
    """An attacker with write access to the file inserts a row by hand, secrets in every column."""
    sid = span_id()
    attributes = {
        sc.GEN_AI_CONVERSATION_ID: session,
        sc.AGENTDIAG_KIND: "tool",
        sc.GEN_AI_OPERATION_NAME: "execute_tool",
        sc.GEN_AI_TOOL_NAME: f"ghp_{SENTINEL}0123456789abcdefghijklmnopq",
        "gen_ai.request.model": f"sk-proj-{SENTINEL}0123456789abcdefghij",
        sc.SERVER_ADDRESS: f"{SENTINEL}.internal",
        "db.statement": f"SELECT * FROM users WHERE token = '{SENTINEL}'",
        sc.USER_ID: f"raw-user-{SENTINEL}",
        "agentdiag.redaction.keys": [SENTINEL],
    }
    events = [{"name": "exception", "time_ns": time.time_ns(), "attributes": {"exception.message": SENTINEL}}]
    link = {
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "span_id": "00f067aa0ba902b7",
        "attributes": {"n": SENTINEL},
    }
    links = [link]
    conn = sqlite3.connect(store)
    try:
        with conn:
            conn.execute(
                "INSERT INTO resources (digest, attributes) VALUES (?, ?)",
                (f"planted-{SENTINEL}", json.dumps({"service.name": "agentdiag-demo", "host.name": SENTINEL})),
            )
            (rid,) = conn.execute("SELECT id FROM resources WHERE digest = ?", (f"planted-{SENTINEL}",)).fetchone()
            now = time.time_ns()
            conn.execute(
                "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, span_kind, start_ns, end_ns,"
                " status, session, attributes, events, links, resource_id, scope, observer, sequence, size)"
                " VALUES (?, ?, NULL, ?, 'tool', 'internal', ?, ?, 'error', ?, ?, ?, ?, ?, ?, NULL, NULL, 100)",
                (
                    trace_id,
                    sid,
                    f"execute_tool {SENTINEL}",
                    now - 1000,
                    now,
                    session,
                    json.dumps(attributes),
                    json.dumps(events),
                    json.dumps(links),
                    rid,
                    json.dumps({"name": f"https://{SENTINEL}.example", "version": f"{SENTINEL}@example.com"}),
                ),
            )
    finally:
        conn.close()
    return sid


def test_push_and_every_export_format_revalidate_a_planted_row_and_imported_spans(
    victim: Path, leaked: dict[str, Any], tmp_path: Path
) -> None:
    session = leaked["session"]
    assert invoke("ingest", impersonating_file(tmp_path / "forged.jsonl", leaked), "--store", victim).exit_code == 0
    planted = plant_row(victim, session, leaked["trace_id"])
    with OTLPReceiver() as receiver:
        result = invoke("push", "--endpoint", receiver.endpoint, "--store", victim, "--format", "json")
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["pushed"] >= len(leaked["spans"]) + 1 and receiver.wait_for_spans(report["pushed"], 10)
        received = {s.span_id: s for s in receiver.spans()}
        payload = b"".join(receiver.raw_bodies) + b"".join(receiver.decoded_bodies)
    assert planted in received  # re-validated and sent, not merely left out
    assert received[planted].attributes[sc.GEN_AI_TOOL_NAME] == sc.OTHER_VALUE
    assert received[planted].attributes[sc.USER_ID].startswith("hmac-sha256:")
    at = payload.find(SENTINEL.encode())
    assert at < 0, payload[max(at - 200, 0) : at + 40]
    assert SENTINEL.lower().encode() not in payload
    for fmt in ("bundle", "otlp-json", "jaeger-json"):
        out = tmp_path / f"out.{fmt}"
        args: list[str | Path] = ["export", "--out", out, "--format", fmt, "--store", victim]
        if fmt == "bundle":
            args += ["--session", session]
        exported = invoke(*args)
        assert exported.exit_code == 0, exported.output
        text = out.read_text()
        assert SENTINEL not in text and SENTINEL.lower() not in text, fmt
        if fmt != "bundle":
            assert planted in text, fmt  # the planted row went through the strict projection, and was kept
