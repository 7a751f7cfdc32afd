"""``agentdiag sessions``, ``receipt``, ``status``, ``prune`` and ``clear``: contracts, exit codes, one-line errors.

Stores are written by real runs (``agentdiag demo`` or ``configure()`` with the manual wrappers); the status and
receipt verdicts themselves are exercised scenario by scenario in ``tests/diagnostics/test_scenarios.py``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import otel_agentdiag as agentdiag
from otel_agentdiag.cli import cli
from otel_agentdiag.cli.health import parse_as_of
from otel_agentdiag.redaction.hashing import IdHasher, key_from_text
from otel_agentdiag.storage import SpanStore

COMMANDS = ["sessions", "receipt", "status", "prune", "clear"]
TEXT_KEY = "cd0fd710a6b6b0657c1d5614f0b63f3889431d2432a9145bd8c3135fe31fd929"
RECEIPT_KEYS = {"session", "status", "reasons", "counts", "observers", "provenance"}
STATUS_KEYS = {
    "session",
    "stage",
    "active",
    "counts",
    "last_event_time",
    "as_of",
    "as_of_source",
    "stall",
    "repetition",
    "recovery",
    "signals",
    "provenance",
    "cost_usd",
    "budget_exceeded",
    "budget_limits",
    "budget_thresholds",
}
SESSION_KEYS = {
    "session",
    "span_count",
    "bytes",
    "first_start_time",
    "last_activity_time",
    "trace_ids",
    "cleared_at",
    "generation",
    "pruned_spans",
    "receipt_status",
    "provenance",
}
COUNT_KEYS = {
    "spans",
    "sequence_gaps",
    "duplicate_sequences",
    "unfinished_spans",
    "dropped_queue_full",
    "dropped_export_failure",
    "dropped_shutdown",
    "dropped_cleared",
    "rejected_redactor_error",
    "public_safety_violations",
    "observed",
    "accepted",
    "rejected",
    "dropped",
    "stored",
    "malformed_rows",
    "pruned_spans",
    "cleared_spans",
    "ingest_violations",
}

agentdiag.register_names(tools=["lookup"], agents=["cli-agent"])


@pytest.fixture(autouse=True)
def _in_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def ok_json(*args: str | Path) -> Any:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    return json.loads(result.stdout)


def one_error_line(result: Result) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("agentdiag: error:"), result.stderr
    return lines[0]


def run_agent(store: Path, conversation_id: str, *, iterations: int = 2, hash_key: str | None = None) -> None:
    """A small agent through configure() and the wrappers: per iteration an LLM call and a tool call."""
    with agentdiag.configure(store=store, set_global=False, hash_key=hash_key):
        with agentdiag.agent_run("cli-agent", conversation_id=conversation_id):
            for index in range(iterations):
                with agentdiag.iteration(index):
                    with agentdiag.llm_call(provider="fake", model="fake-1") as call:
                        call.record_response(finish_reasons=["tool_calls"], input_tokens=10, output_tokens=3)
                    with agentdiag.tool_call("lookup"):
                        pass


@pytest.fixture
def demo_store(tmp_path: Path) -> Path:
    path = tmp_path / "demo" / "traces.db"
    assert invoke("demo", "--store", path).exit_code == 0
    return path


@pytest.fixture
def agent_store(tmp_path: Path) -> tuple[Path, str]:
    """A store with one session (hash key in ``hash.key`` beside it); returns the path and the raw id."""
    path = tmp_path / "agent" / "traces.db"
    run_agent(path, "conv-cli")
    assert (path.parent / "hash.key").exists()
    return path, "conv-cli"


def session_digest(path: Path) -> str:
    with SpanStore(path, create=False) as store:
        (summary,) = [s for s in store.list_sessions() if s.session]
    assert summary.session is not None
    return summary.session


# -- --as-of and --stall-threshold: checked before the store is opened ------------------------------------------
BAD_AS_OF = ["", "   ", "yesterday", "2025-01-31T12:00:00", "2025-01-31", "2025-13-01T00:00:00Z", "12:00+00:00"]


@pytest.mark.parametrize("value", BAD_AS_OF)
@pytest.mark.parametrize("store_exists", [False, True])
def test_a_bad_as_of_exits_2_whether_or_not_the_store_exists(
    value: str, store_exists: bool, tmp_path: Path, demo_store: Path
) -> None:
    store = demo_store if store_exists else tmp_path / "nowhere" / "traces.db"
    before = store.read_bytes() if store_exists else None
    line = one_error_line(invoke("status", "--as-of", value, "--store", store))
    assert "--as-of" in line
    assert "no trace store" not in line
    if store_exists:
        assert store.read_bytes() == before
    else:
        assert not store.parent.exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-01-31T12:00:00Z", "2025-01-31T12:00:00.000000Z"),
        ("2025-01-31T12:00:00z", "2025-01-31T12:00:00.000000Z"),
        ("2025-01-31T14:00:00+02:00", "2025-01-31T12:00:00.000000Z"),
        ("2025-01-31 12:00:00.123456+00:00", "2025-01-31T12:00:00.123456Z"),
    ],
)
def test_as_of_accepts_times_with_a_timezone(text: str, expected: str, agent_store: tuple[Path, str]) -> None:
    path, _ = agent_store
    doc = ok_json("status", "--as-of", text, "--format", "json", "--store", path)
    assert doc["as_of"] == expected
    assert doc["as_of_source"] == "argument"
    moment = datetime.fromisoformat(expected.replace("Z", "+00:00"))
    assert parse_as_of(text) == int(moment.timestamp()) * 10**9 + moment.microsecond * 1000


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_stall_threshold_exits_2_before_the_store_is_opened(value: str, tmp_path: Path) -> None:
    store = tmp_path / "nowhere" / "traces.db"
    line = one_error_line(invoke("status", "--stall-threshold", value, "--store", store))
    assert "--stall-threshold" in line
    assert not store.parent.exists()


def test_status_as_of_decides_a_stall_of_a_session_still_open(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with agentdiag.configure(store=path, set_global=False) as diag:
        with agentdiag.agent_run("cli-agent", conversation_id="conv-open"):
            with agentdiag.iteration(0):
                with agentdiag.llm_call(provider="fake", model="fake-1") as call:
                    call.record_response(finish_reasons=["tool_calls"])
            assert diag.force_flush()
            doc = ok_json("status", "--format", "json", "--store", path)
            assert (doc["active"], doc["stage"], doc["as_of_source"]) == (True, "llm_running", "last_event")
            last = datetime.fromisoformat(doc["last_event_time"].replace("Z", "+00:00"))
            later = datetime.fromtimestamp(last.timestamp() + 301, tz=timezone.utc).isoformat()
            stalled = ok_json("status", "--as-of", later, "--format", "json", "--store", path)
            assert stalled["stall"]["suspected"] is True
            assert stalled["stall"]["silent_seconds"] == pytest.approx(301, abs=0.01)
            assert stalled["signals"][0] == "stall_suspected"
            patient = ok_json(
                "status", "--as-of", later, "--stall-threshold", "3600", "--format", "json", "--store", path
            )
            assert patient["stall"]["suspected"] is False
            assert patient["stall"]["threshold_seconds"] == 3600.0
    done = ok_json("status", "--as-of", later, "--format", "json", "--store", path)
    assert (done["active"], done["stage"], done["stall"]["suspected"]) == (False, "finished", False)


# -- stores that cannot be read ---------------------------------------------------------------------------------
def _args(command: str, store: Path) -> list[str | Path]:
    extra: dict[str, list[str]] = {"clear": ["--session", "abcd1234", "--yes"]}
    return [command, *extra.get(command, []), "--store", store]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_store_exits_2_and_creates_nothing(command: str, tmp_path: Path) -> None:
    store = tmp_path / "nowhere" / "traces.db"
    line = one_error_line(invoke(*_args(command, store)))
    assert "no trace store" in line
    assert not store.parent.exists()


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", ["garbage", "foreign"])
def test_a_file_that_is_not_a_store_exits_2_and_is_left_alone(command: str, kind: str, tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    if kind == "garbage":
        path.write_bytes(b"\x00\x01 definitely not sqlite \xfe\xff" * 200)
    else:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT)")
        conn.commit()
        conn.close()
    os.chmod(path, 0o644)
    before = path.read_bytes()
    one_error_line(invoke(*_args(command, path)))
    assert path.read_bytes() == before
    assert (os.stat(path).st_mode & 0o777) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_subprocess_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    for args in (
        ["status", "--as-of", "2025-01-31T12:00:00", "--store", str(tmp_path / "x.db")],
        ["receipt", "--store", str(tmp_path / "x.db")],
        ["clear", "--session", "abcd", "--store", str(tmp_path / "x.db")],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "otel_agentdiag", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stdout == ""
        assert len(proc.stderr.splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith("agentdiag: error:")
    assert not (tmp_path / "x.db").exists()


# -- sessions, receipt, status: the JSON contracts --------------------------------------------------------------
def test_sessions_lists_the_demo_session_as_valid(demo_store: Path) -> None:
    (row,) = ok_json("sessions", "--format", "json", "--store", demo_store)
    assert set(row) == SESSION_KEYS
    assert row["session"].startswith("hmac-sha256:")
    assert row["span_count"] >= 8
    assert len(row["trace_ids"]) == 1
    assert row["receipt_status"] == "valid"
    assert row["last_activity_time"].endswith("Z")
    assert (row["cleared_at"], row["generation"], row["pruned_spans"]) == (None, 0, 0)
    text = invoke("sessions", "--store", demo_store)
    assert text.exit_code == 0
    assert row["session"][:30] in text.stdout
    assert "valid" in text.stdout


def test_sessions_on_an_empty_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    SpanStore(path).close()
    assert ok_json("sessions", "--format", "json", "--store", path) == []
    assert invoke("sessions", "--store", path).stdout.startswith("no sessions")


def test_receipt_json_contract_for_the_store_and_a_session(demo_store: Path) -> None:
    whole = ok_json("receipt", "--format", "json", "--store", demo_store)
    assert set(whole) == RECEIPT_KEYS
    assert whole["session"] is None
    assert set(whole["counts"]) == COUNT_KEYS
    assert all(isinstance(v, int) for v in whole["counts"].values())
    digest = session_digest(demo_store)
    one = ok_json("receipt", "--session", digest, "--format", "json", "--store", demo_store)
    assert one["session"] == digest
    assert (one["status"], one["reasons"]) == ("valid", [])
    assert len(one["observers"]) == 1
    assert one["counts"] == whole["counts"]
    text = invoke("receipt", "--session", digest, "--store", demo_store)
    assert text.exit_code == 0
    assert f"receipt for session {digest}: valid" in text.stdout


def test_status_json_contract(demo_store: Path) -> None:
    doc = ok_json("status", "--format", "json", "--store", demo_store)
    assert set(doc) == STATUS_KEYS
    assert set(doc["counts"]) == {
        "runs",
        "iterations",
        "llm_calls",
        "tool_calls",
        "errors",
        "input_tokens",
        "output_tokens",
    }
    assert set(doc["stall"]) == {"suspected", "silent_seconds", "threshold_seconds"}
    assert set(doc["repetition"]) == {"tool", "longest_run", "suspected"}
    assert set(doc["recovery"]) == {"errors", "recovered", "unrecovered"}
    assert doc["as_of"] == doc["last_event_time"]
    assert doc["as_of_source"] == "last_event"
    assert doc["counts"]["runs"] == 1
    assert doc["counts"]["input_tokens"] > 0
    with_receipt = ok_json("status", "--with-receipt", "--format", "json", "--store", demo_store)
    assert set(with_receipt) == STATUS_KEYS | {"receipt"}
    assert set(with_receipt["receipt"]) == RECEIPT_KEYS
    text = invoke("status", "--with-receipt", "--store", demo_store)
    assert text.exit_code == 0
    assert "stage: finished" in text.stdout
    assert "receipt: valid" in text.stdout


def test_status_of_an_empty_store_is_idle(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    SpanStore(path).close()
    doc = ok_json("status", "--format", "json", "--store", path)
    assert (doc["session"], doc["stage"], doc["active"], doc["last_event_time"]) == (None, "idle", False, None)


def test_status_without_session_is_the_newest_session(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    run_agent(path, "conv-first", iterations=1)
    run_agent(path, "conv-second", iterations=3)
    doc = ok_json("status", "--format", "json", "--store", path)
    assert doc["counts"]["iterations"] == 3
    first = ok_json("status", "--session", "conv-first", "--format", "json", "--store", path)
    assert first["counts"]["iterations"] == 1
    assert first["session"] != doc["session"]


# -- naming a session -------------------------------------------------------------------------------------------
def test_a_session_is_named_by_digest_prefix_hex_prefix_or_raw_id(agent_store: tuple[Path, str]) -> None:
    path, raw = agent_store
    digest = session_digest(path)
    hex_part = digest.rsplit(":", 1)[-1]
    for name in (digest, digest[:28], hex_part[:8], hex_part[:8].upper(), raw):
        doc = ok_json("receipt", "--session", name, "--format", "json", "--store", path)
        assert doc["session"] == digest, name


@pytest.mark.parametrize("name", ["conv-unknown", "ffffffffffff", "hmac-sha256:00000000:"])
def test_an_unknown_session_exits_2(name: str, agent_store: tuple[Path, str]) -> None:
    path, _ = agent_store
    for command in ("receipt", "status"):
        line = one_error_line(invoke(command, "--session", name, "--store", path))
        assert "no session" in line


def test_a_prefix_naming_two_sessions_is_an_error_not_a_guess(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    run_agent(path, "conv-one", iterations=1)
    run_agent(path, "conv-two", iterations=1)
    for command in (["receipt"], ["status"], ["clear", "--yes"]):
        line = one_error_line(invoke(*command, "--session", "hmac-sha256:", "--store", path))
        assert "ambiguous" in line
    with SpanStore(path, create=False) as store:
        assert store.span_count() == 8


def test_a_raw_id_needs_the_stores_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "traces.db"
    run_agent(path, "conv-keyed", hash_key=TEXT_KEY)
    assert not (tmp_path / "hash.key").exists()
    line = one_error_line(invoke("receipt", "--session", "conv-keyed", "--store", path))
    assert "hash key" in line
    assert "AGENTDIAG_HASH_KEY" in line
    assert not (tmp_path / "hash.key").exists()  # never created by a reader
    monkeypatch.setenv("AGENTDIAG_HASH_KEY", TEXT_KEY)
    doc = ok_json("receipt", "--session", "conv-keyed", "--format", "json", "--store", path)
    assert doc["session"] == IdHasher(key_from_text(TEXT_KEY)).digest("conversation", "conv-keyed")


# -- clear and prune --------------------------------------------------------------------------------------------
def test_clear_needs_a_session_and_runs_unprompted_in_scripts(agent_store: tuple[Path, str]) -> None:
    path, raw = agent_store
    before = path.read_bytes()
    one_error_line(invoke("clear", "--yes", "--store", path))  # no --session: a usage error, nothing touched
    assert path.read_bytes() == before
    with SpanStore(path, create=False) as store:
        assert store.span_count() == 7
    # The form, `agentdiag clear --session ID`, works as written when stdin is not a terminal.
    result = invoke("clear", "--session", raw, "--store", path)
    assert result.exit_code == 0, result.output
    assert "7 span(s) deleted" in result.stdout
    with SpanStore(path, create=False) as store:
        assert store.span_count() == 0


def test_clear_by_raw_id_deletes_the_session(agent_store: tuple[Path, str]) -> None:
    path, raw = agent_store
    digest = session_digest(path)
    doc = ok_json("clear", "--session", raw, "--yes", "--format", "json", "--store", path)
    assert doc == {"session": digest, "cleared_spans": 7}
    with SpanStore(path, create=False) as store:
        assert store.span_count() == 0
    (row,) = ok_json("sessions", "--format", "json", "--store", path)
    assert (row["session"], row["span_count"], row["generation"]) == (digest, 0, 1)
    assert row["cleared_at"] is not None
    assert row["receipt_status"] == "invalid"  # nothing left to judge
    receipt = ok_json("receipt", "--session", digest, "--format", "json", "--store", path)
    assert (receipt["status"], receipt["reasons"]) == ("invalid", ["no_observations"])
    assert receipt["counts"]["stored"] == 7
    text = invoke("clear", "--session", digest, "--yes", "--store", path)
    assert text.exit_code == 0
    assert "0 span(s) deleted" in text.stdout


def test_prune_applies_the_limits_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    run_agent(path, "conv-prune", iterations=4)  # 1 run + 4 x 3 = 13 spans
    assert ok_json("prune", "--format", "json", "--store", path) == {"pruned_spans": 0, "pruned_bytes": 0}
    doc = ok_json("prune", "--max-session-spans", "5", "--max-store-bytes", "none", "--format", "json", "--store", path)
    assert doc["pruned_spans"] == 8
    assert doc["pruned_bytes"] > 0
    receipt = ok_json("receipt", "--format", "json", "--store", path)
    assert receipt["status"] == "valid", receipt
    assert (receipt["counts"]["spans"], receipt["counts"]["pruned_spans"]) == (5, 8)
    text = invoke("prune", "--max-session-spans", "5", "--store", path)
    assert text.exit_code == 0
    assert text.stdout.startswith("pruned 0 span(s)")


@pytest.mark.parametrize("value", ["0", "-3", "many", "1.5"])
def test_prune_refuses_a_bad_limit(value: str, agent_store: tuple[Path, str]) -> None:
    path, _ = agent_store
    before = path.read_bytes()
    line = one_error_line(invoke("prune", "--max-session-spans", value, "--store", path))
    assert "--max-session-spans" in line
    assert path.read_bytes() == before


def test_every_command_is_registered() -> None:
    assert set(COMMANDS) <= set(cli.commands)


def test_an_empty_store_s_receipt_says_nothing_was_recorded_not_that_something_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    SpanStore(path).close()
    doc = ok_json("receipt", "--format", "json", "--store", path)
    assert (doc["status"], doc["reasons"]) == ("invalid", ["no_observations"])
    result = CliRunner().invoke(cli, ["receipt", "--store", str(path)])
    assert result.exit_code == 0, result.output
    assert "reasons: no_observations (nothing was recorded here: nothing is wrong" in result.output
    assert "reasons: none" not in result.output
