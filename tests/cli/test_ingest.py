"""``agentdiag ingest``: OTLP-JSON into a real store through the local policy; rejected lines leave durable
violation records that make later receipts ``invalid``; exit 0 / 1 / 2.

Fixtures (tests/interchange/fixtures/):

- ``faulty.otlp.jsonl``: spans numbered by an otel-agentdiag pipeline (observer ``0123456789abcdef``, one session)
  where number 2 never arrives (line 2 holds number 3), line 3 is cut off mid-JSON, line 4 repeats a span of
  line 1, line 5 holds a span id that is not hex, line 6 is blank and line 7 is fine;
- ``foreign_sentinels.otlp.json``: one pretty-printed request from "another SDK" (no agentdiag numbers) full of
  sentinels: raw ids, prompts in unknown attributes, URLs, a command line, a status message, trace state, a
  tool name the model made up.

Both date from November 2023, so they are ingested with ``--max-session-age none`` unless a test is about age.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli
from otel_agentdiag.diagnostics.receipt import session_receipts
from otel_agentdiag.interchange.ingest import imported_observer
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.storage import SpanStore, StoredSpan

FIXTURES = Path(__file__).parents[1] / "interchange" / "fixtures"
FAULTY = FIXTURES / "faulty.otlp.jsonl"
FOREIGN = FIXTURES / "foreign_sentinels.otlp.json"
FAULTY_CONVERSATION = "fixture-conversation-7"
FOREIGN_CONVERSATION = "SENTINEL-RAW-CONVERSATION-ID"
_ENV_PREFIXES = ("AGENTDIAG_", "OTEL_")


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def ingest(file: Path, store: Path, *extra: str) -> Result:
    return invoke("ingest", file, "--store", store, *extra)


def digest_of(store: Path, raw: str) -> str:
    """The session digest of a raw conversation id under the store's key file."""
    return IdHasher((store.parent / "hash.key").read_bytes()).digest(sc.ID_KIND_CONVERSATION, raw)


def imported_key(store: Path, raw: str) -> str:
    """The session key the store files imported spans of a raw conversation id under."""
    return "imported:" + digest_of(store, raw)


def rows(store: Path) -> dict[str, StoredSpan]:
    with SpanStore(store, create=False) as s:
        return {span.span_id: span for t in s.list_traces() for span in s.get_trace(t.trace_id)}


def receipt_json(store: Path, *session: str) -> dict[str, Any]:
    args = ["receipt", "--store", str(store), "--format", "json"]
    if session:
        args += ["--session", session[0]]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def store_bytes(store: Path) -> bytes:
    """Everything the store wrote to disk: the database, its WAL and shared memory, and the key file."""
    parts = []
    for path in sorted(store.parent.iterdir()):
        parts.append(path.read_bytes())
    return b"\n".join(parts)


def assert_one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("agentdiag: error:"), stderr
    return lines[0]


# -- a faulty file ----------------------------------------------------------------------------------------------
def test_a_faulty_file_is_taken_except_its_bad_lines_and_every_later_receipt_says_invalid(tmp_path: Path) -> None:
    store = tmp_path / "s" / "traces.db"
    result = ingest(FAULTY, store, "--max-session-age", "none")
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines()[1:] == [
        "  4 new, 1 already stored; 0 numbered by this ingest (observer "
        + result.stdout.split("(observer ", 1)[1].split(")", 1)[0]
        + ")",
        "  filed as imported (sessions imported:<digest>): their receipts say imported, never valid",
        "rejected 2 document(s): invalid_id 1, malformed_json 1",
        "  line 3: malformed_json",
        "  line 5: invalid_id",
        "each is recorded in the store: its receipts now say invalid (ingest_violation)",
    ]
    assert result.stdout.startswith(f"ingested 5 span(s) from 4 of 6 document(s) of {FAULTY} into {store}")

    stored = rows(store)
    assert sorted(stored) == ["1000000000000001", "1000000000000002", "1000000000000004", "1000000000000005"]
    hasher = IdHasher((store.parent / "hash.key").read_bytes())
    # The claimed observer is re-keyed (never taken as one of this machine's); its numbers are kept.
    assert {s.observer for s in stored.values()} == {imported_observer(hasher, "0123456789abcdef")}
    with SpanStore(store, create=False) as opened:
        assert "0123456789abcdef" not in {o.observer for o in opened.observers()}
    assert sorted(s.sequence for s in stored.values() if s.sequence is not None) == [0, 1, 3, 4]
    assert stored["1000000000000004"].name == "execute_tool _OTHER"  # a file's names are data
    session = imported_key(store, FAULTY_CONVERSATION)
    assert {s.session for s in stored.values()} == {session}

    whole = receipt_json(store)
    assert whole["status"] == "invalid"
    assert whole["reasons"] == ["duplicate_sequence", "imported", "ingest_violation", "sequence_gap"]
    counts = whole["counts"]
    assert (counts["spans"], counts["sequence_gaps"], counts["duplicate_sequences"]) == (4, 1, 1)
    assert counts["ingest_violations"] == 2
    assert counts["observed"] == counts["accepted"] == 5 and counts["stored"] == 4

    by_raw_id = receipt_json(store, FAULTY_CONVERSATION)  # the line-5 violation named this session
    assert by_raw_id["session"] == session and by_raw_id["provenance"] == "imported"
    assert by_raw_id["status"] == "invalid"
    assert by_raw_id["reasons"] == ["duplicate_sequence", "imported", "ingest_violation", "sequence_gap"]
    assert by_raw_id["counts"]["ingest_violations"] == 1

    with SpanStore(store, create=False) as s:
        violations = [(v.source, v.session, v.reason, v.detail) for v in s.violations()]
        assert [v.session for v in s.violations(session=session)] == [session]
    assert violations == [
        ("ingest", None, "malformed_json", "line 3"),
        ("ingest", session, "invalid_id", "line 5"),
    ]
    on_disk = store_bytes(store)
    assert b"SENTINEL" not in on_disk  # the malformed line's content is never recorded
    assert b"not-a-span-id" not in on_disk


def test_the_violations_are_durable_across_later_writes_and_reopening(tmp_path: Path) -> None:
    store = tmp_path / "s" / "traces.db"
    assert ingest(FAULTY, store, "--max-session-age", "none").exit_code == 1
    clean = tmp_path / "clean.jsonl"
    clean.write_text(FAULTY.read_text().splitlines()[6] + "\n")  # line 7 again: a clean file (a duplicate)
    result = ingest(clean, store, "--max-session-age", "none")
    assert result.exit_code == 0, result.output
    assert "0 new, 1 already stored" in result.stdout
    assert receipt_json(store)["status"] == "invalid"  # nothing makes the earlier rejections vanish
    assert receipt_json(store)["counts"]["ingest_violations"] == 2


def test_a_session_known_only_from_a_rejected_line_has_an_invalid_receipt(tmp_path: Path) -> None:
    good, _bad_json, bad_id = (FAULTY.read_text().splitlines()[i] for i in (1, 2, 4))
    other = bad_id.replace(FAULTY_CONVERSATION, "only-in-a-rejected-line")
    path = tmp_path / "two.jsonl"
    path.write_text(f"{good}\n{other}\n")
    store = tmp_path / "s" / "traces.db"
    assert ingest(path, store, "--max-session-age", "none").exit_code == 1
    lost = imported_key(store, "only-in-a-rejected-line")
    with SpanStore(store, create=False) as s:
        receipts = {r.session: r for r in session_receipts(s)[0]}
    assert receipts[lost].status == "invalid"
    assert receipts[lost].reasons == ["imported", "ingest_violation"] and receipts[lost].counts["spans"] == 0
    kept = receipts[imported_key(store, FAULTY_CONVERSATION)]
    assert "ingest_violation" not in kept.reasons  # the rejected line named another session


def test_the_json_summary_lists_every_rejection(tmp_path: Path) -> None:
    store = tmp_path / "s" / "traces.db"
    result = ingest(FAULTY, store, "--max-session-age", "none", "--format", "json")
    assert result.exit_code == 1
    summary = json.loads(result.stdout)
    session = imported_key(store, FAULTY_CONVERSATION)
    assert summary["rejections"] == [
        {"location": "line 3", "reason": "malformed_json", "sessions": []},
        {"location": "line 5", "reason": "invalid_id", "sessions": [session]},
    ]
    assert summary["rejected_reasons"] == {"malformed_json": 1, "invalid_id": 1}
    assert {k: summary[k] for k in ("documents", "accepted", "rejected", "spans", "inserted", "duplicates")} == {
        "documents": 6,
        "accepted": 4,
        "rejected": 2,
        "spans": 5,
        "inserted": 4,
        "duplicates": 1,
    }
    assert summary["policy"] == "local" and summary["pruned"] == 0 and summary["numbered"] == 0
    assert summary["claimed_observers"] == 1


def test_exit_codes_from_a_real_process(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}

    def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "otel_agentdiag", "ingest", *(str(a) for a in args)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    store = tmp_path / "p" / "traces.db"
    faulty = run(FAULTY, "--store", store, "--max-session-age", "none")
    assert faulty.returncode == 1, faulty.stderr
    assert "line 3: malformed_json" in faulty.stdout
    clean = run(FOREIGN, "--store", tmp_path / "q" / "traces.db", "--max-session-age", "none")
    assert clean.returncode == 0, clean.stderr
    missing = run(tmp_path / "nope.jsonl", "--store", store)
    assert missing.returncode == 2
    assert_one_error_line(missing.stderr)


# -- the local policy applies -----------------------------------------------------------------------------------
def test_sentinels_in_a_foreign_file_do_not_reach_the_store(tmp_path: Path) -> None:
    store = tmp_path / "s" / "traces.db"
    result = ingest(FOREIGN, store, "--max-session-age", "none")
    assert result.exit_code == 0, result.output
    assert "3 new, 0 already stored; 3 numbered by this ingest" in result.stdout
    assert "sentinel" not in result.output.replace(str(FOREIGN), "").replace(str(store), "").lower()
    on_disk = store_bytes(store).lower()
    assert b"sentinel" not in on_disk  # raw ids, prompts, URLs, command line, trace state, made-up names

    stored = rows(store)
    root, chat, tool = stored["a1a1a1a1a1a1a1a1"], stored["b2b2b2b2b2b2b2b2"], stored["c3c3c3c3c3c3c3c3"]
    session = imported_key(store, FOREIGN_CONVERSATION)
    assert {s.session for s in stored.values()} == {session}  # the raw id, hashed with the store's key
    assert root.name == "invoke_agent _OTHER" and root.attributes[sc.GEN_AI_AGENT_NAME] == "_OTHER"
    assert tool.name == "execute_tool _OTHER" and tool.attributes[sc.GEN_AI_TOOL_NAME] == "_OTHER"
    assert root.status == "error" and root.span_kind == "server"
    assert chat.name == "chat gpt-4o-mini" and chat.span_kind == "client" and chat.parent_span_id == root.span_id
    assert chat.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 12
    assert chat.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ["tool_calls"]
    assert [e["name"] for e in chat.events] == ["exception"]
    assert set(chat.events[0]["attributes"]) == {sc.EXCEPTION_TYPE, sc.AGENTDIAG_EXCEPTION_FINGERPRINT}
    assert chat.links == [
        {"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "00f067aa0ba902b7", "attributes": {}}
    ]
    for key in ("gen_ai.prompt", "gen_ai.input.messages", "url.full", sc.SERVER_ADDRESS, "llm.input", "blob"):
        assert key not in root.attributes
    assert root.resource == {"service.name": "foreign-app", "process.pid": 4242}
    assert root.scope == {"name": "_OTHER", "version": "1.0"}  # a scope "name" that is a URL is data
    assert (root.start_ns, root.end_ns) == (1_700_000_100_000_000_000, 1_700_000_100_090_000_000)
    assert [stored[i].sequence for i in ("a1a1a1a1a1a1a1a1", "b2b2b2b2b2b2b2b2", "c3c3c3c3c3c3c3c3")] == [0, 1, 2]

    receipt = receipt_json(store, FOREIGN_CONVERSATION)
    # The numbers the ingest gave are complete; a URL where a host name belongs was removed and says so.
    assert receipt["status"] == "quarantined" and receipt["reasons"] == ["imported", "public_safety_violation"]


def test_trust_names_keeps_the_names_of_a_file(tmp_path: Path) -> None:
    store = tmp_path / "s" / "traces.db"
    assert ingest(FOREIGN, store, "--max-session-age", "none", "--trust-names").exit_code == 0
    tool = rows(store)["c3c3c3c3c3c3c3c3"]
    assert tool.name == "execute_tool SENTINEL_TOOL_FROM_MODEL"  # the documented opt-in
    assert tool.attributes[sc.GEN_AI_TOOL_NAME] == "SENTINEL_TOOL_FROM_MODEL"


def test_spans_older_than_the_age_limit_are_pruned_at_once_and_the_summary_says_so(tmp_path: Path) -> None:
    store = tmp_path / "s" / "traces.db"
    result = ingest(FOREIGN, store, "--format", "json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["inserted"] == 3 and summary["pruned"] == 3
    assert rows(store) == {}
    text = ingest(FOREIGN, tmp_path / "t" / "traces.db")
    assert "3 span(s) pruned by retention at once" in text.stdout


# -- a clean round trip through the commands ----------------------------------------------------------------------
def test_export_then_ingest_is_clean_and_a_second_ingest_changes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "demo" / "traces.db"
    assert invoke("demo", "--store", source).exit_code == 0
    out = tmp_path / "demo.otlp.jsonl"
    exported = invoke("export", "--out", out, "--format", "otlp-json", "--store", source)
    assert exported.exit_code == 0, exported.output
    copy = tmp_path / "copy" / "traces.db"
    first = ingest(out, copy, "--trust-names")
    assert first.exit_code == 0, first.output
    before = rows(source)
    after = rows(copy)
    assert after.keys() == before.keys()
    for span_id, row in after.items():
        original = before[span_id]
        assert (row.trace_id, row.parent_span_id, row.name, row.start_ns, row.end_ns, row.status) == (
            original.trace_id,
            original.parent_span_id,
            original.name,
            original.start_ns,
            original.end_ns,
            original.status,
        )
    first_receipt = receipt_json(copy)
    assert first_receipt["status"] == "imported"  # complete by its own numbers, never "valid"

    second = ingest(out, copy, "--trust-names")
    assert second.exit_code == 0, second.output
    assert f"0 new, {len(before)} already stored" in second.stdout
    again = receipt_json(copy)
    # The same file again changes nothing (it used to count every span as a duplicate_sequence).
    assert again == first_receipt
    assert again["counts"]["ingest_violations"] == 0


# -- unusable input -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("directory", "is a directory"),
        (b"", "holds no OTLP-JSON"),
        (b"\n  \n", "holds no OTLP-JSON"),
        (b"hello, this is not JSON\nnor is this\n", "is not OTLP-JSON"),
        (b"\x89PNG\r\n\x1a\n\x00\x00binary", "is not OTLP-JSON"),
        (b'{"data": [{"traceID": "0af7651916cd43dd8448eb211c80319c", "spans": []}]}\n', "is not OTLP-JSON"),
        (b'{"resourceSpans": 3}\n', "is not OTLP-JSON"),
    ],
)
def test_unusable_input_exits_2_and_writes_nothing(tmp_path: Path, content: bytes | str | None, message: str) -> None:
    path = tmp_path / "input.json"
    if content == "directory":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    store = tmp_path / "never" / "traces.db"
    result = ingest(path, store)
    assert result.exit_code == 2
    assert message in assert_one_error_line(result.stderr)
    assert not store.parent.exists()  # neither the store nor a key file was created


def test_a_file_that_is_not_a_store_exits_2(tmp_path: Path) -> None:
    store = tmp_path / "notes.txt"
    store.write_text("my notes\n")
    result = ingest(FOREIGN, store, "--max-session-age", "none")
    assert result.exit_code == 2
    assert "cannot use the store" in assert_one_error_line(result.stderr)
    assert store.read_text() == "my notes\n"


def test_a_bad_age_is_a_usage_error(tmp_path: Path) -> None:
    result = ingest(FOREIGN, tmp_path / "s" / "traces.db", "--max-session-age", "-3")
    assert result.exit_code == 2
    assert "--max-session-age" in assert_one_error_line(result.stderr)


# -- the store keeps violations value-free ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "entry",
    [
        (None, "Malformed", "line 1"),
        (None, "malformed json", "line 1"),
        (None, "malformed_json", 'line 1: {"prompt": "secret"}'),
        (None, "malformed_json", "x" * 121),
        (None, "malformed_json", "https://example.com/a"),
        ("a\nb", "malformed_json", "line 1"),
    ],
)
def test_a_violation_that_could_hold_content_is_refused(tmp_path: Path, entry: tuple[str | None, str, str]) -> None:
    with SpanStore(tmp_path / "traces.db") as store:
        with pytest.raises(ValueError):
            store.record_violations("ingest", [(None, "malformed_json", "line 1"), entry])
        assert store.violations() == []  # nothing of the batch was written
        with pytest.raises(ValueError):
            store.record_violations("Ingest!", [(None, "malformed_json", "line 1")])
        assert store.record_violations("ingest", [(None, "malformed_json", "line 1 item 2")]) == 1
        assert store.violation_counts() == {None: 1}
