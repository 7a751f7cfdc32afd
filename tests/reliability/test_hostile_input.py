"""Hostile input (issue 11, item 5): fuzzed CLI arguments, policy files, ingest files and damaged stores.

Every case ends with an exit code its command documents (0 only when the input was acceptable; ingest's 1 when it
rejected and recorded lines; 2 otherwise), never a traceback, an error as one ``agentdiag: error:`` line, and the
store untouched unless the command writes and succeeded. Most cases run in-process through CliRunner; a handful
run ``python -m otel_agentdiag`` for real, with argv bytes that are not UTF-8.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_support import (
    READERS,
    ArgPool,
    StoreSnapshot,
    allowed_exit_codes,
    check_outcome,
    cli_argv,
    command_of,
    copy_store,
    identity_rows,
    ingest_file,
    integrity_ok,
    invoke,
    policy_file,
    request_json,
    span_json,
    store_damage,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_ENV_PREFIXES = ("AGENTDIAG_", "OTEL_")
FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """A demo store (database and key file), cleanly closed: its folder, trace id and session digest."""
    folder = tmp_path_factory.mktemp("pristine")
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith(_ENV_PREFIXES):
                mp.delenv(name)
        result = invoke(["demo", "--store", folder / "traces.db"])
        assert result.exit_code == 0, result.output
        listed = json.loads(invoke(["traces", "--store", folder / "traces.db", "--format", "json"]).stdout)
    assert sorted(p.name for p in folder.iterdir()) == ["hash.key", "traces.db"]
    yield folder, listed[0]["trace_id"], listed[0]["session"]


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's folder, also the working directory (the CLI's default store is ./.agentdiag/traces.db)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _fresh(work: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=work))


def _valid_ingest_file(path: Path) -> Path:
    path.write_text(json.dumps(request_json([span_json(0), span_json(1)])) + "\n", encoding="utf-8")
    return path


# -- CLI arguments --------------------------------------------------------------------------------------------------
@FUZZ
@given(data=st.data())
def test_fuzzed_arguments_end_in_a_documented_exit_and_leave_the_store_alone(
    data: st.DataObject, work: Path, pristine: tuple[Path, str, str]
) -> None:
    folder, trace_id, session = pristine
    case = _fresh(work)
    store = copy_store(folder, case / "store")
    (case / "out").mkdir()
    fifo = case / "fifo"
    os.mkfifo(fifo)
    policy = case / "policy.toml"
    policy.write_text('extends = "local"\nblocked_values = ["secret-[0-9]+"]\n', encoding="utf-8")
    pool = ArgPool(
        store, store.parent, trace_id, session, _valid_ingest_file(case / "in.jsonl"), policy, fifo, case / "out"
    )
    argv = data.draw(cli_argv(pool), label="argv")
    before = StoreSnapshot.of(store)
    result = invoke(argv)
    check_outcome(result, allowed_exit_codes(argv), argv)
    if command_of(argv) in READERS or result.exit_code == 2:
        assert before.differences(StoreSnapshot.of(store)) == [], argv
    assert integrity_ok(store), argv
    assert fifo.exists() and not fifo.is_file(), argv  # never replaced by an export


# -- policy files ---------------------------------------------------------------------------------------------------
@FUZZ
@given(raw=policy_file())
def test_fuzzed_policy_files_are_taken_or_refused_in_one_line(
    raw: bytes, work: Path, pristine: tuple[Path, str, str]
) -> None:
    case = _fresh(work)
    store = copy_store(pristine[0], case / "store")
    path = case / "policy.toml"
    path.write_bytes(raw)
    before = StoreSnapshot.of(store)
    outcomes = []
    for argv in (
        ["policy", "--policy", path],
        ["policy", "--policy", path, "--collector"],
        ["doctor", "--store", store, "--local-policy", path, "--format", "json"],
    ):
        result = invoke(argv)
        check_outcome(result, frozenset({0, 2}), (argv[0], raw[:200]))
        outcomes.append(result.exit_code)
    # The same file is judged the same by every command that reads it (doctor also checks the destination).
    assert outcomes[0] == outcomes[1], raw[:200]
    if outcomes[0] == 2:
        assert outcomes[2] == 2, raw[:200]
    assert before.differences(StoreSnapshot.of(store)) == []


# -- ingest files ---------------------------------------------------------------------------------------------------
def _ingest_summary(result_stdout: str) -> dict[str, object]:
    summary: dict[str, object] = json.loads(result_stdout)
    return summary


@FUZZ
@given(raw=ingest_file(), into_existing=st.booleans())
def test_fuzzed_ingest_files_are_taken_rejected_and_counted_or_refused(
    raw: bytes, into_existing: bool, work: Path, pristine: tuple[Path, str, str]
) -> None:
    case = _fresh(work)
    if into_existing:
        store = copy_store(pristine[0], case / "store")
    else:
        store = case / "new" / "traces.db"
    path = case / "in.jsonl"
    path.write_bytes(raw)
    before = StoreSnapshot.of(store)
    result = invoke(["ingest", path, "--store", store, "--max-session-age", "none", "--format", "json"])
    check_outcome(result, frozenset({0, 1, 2}), raw[:300])
    if result.exit_code == 2:
        # Unusable input: nothing written, not even the store or its folder.
        assert before.differences(StoreSnapshot.of(store)) == [], raw[:300]
        assert into_existing or not store.parent.exists(), raw[:300]
        return
    summary = _ingest_summary(result.stdout)
    rejected = summary["rejected"]
    assert summary["documents"] == summary["accepted"] + rejected  # type: ignore[operator]
    assert (result.exit_code == 1) == (rejected != 0), result.stdout
    assert integrity_ok(store)
    for observer, session, observed, accepted, rejected_n, dropped in identity_rows(store):
        assert observed == accepted + rejected_n + dropped, (observer, session)
    receipt = invoke(["receipt", "--store", store, "--format", "json"])
    check_outcome(receipt, frozenset({0}), "receipt after ingest")
    if rejected:
        assert json.loads(receipt.stdout)["status"] == "invalid"


# -- damaged stores -------------------------------------------------------------------------------------------------
DAMAGE_COMMANDS = (
    ("traces",),
    ("sessions", "--format", "json"),
    ("receipt",),
    ("status", "--with-receipt"),
    ("show", "TRACE"),
    ("export", "--out", "OUT"),
    ("export", "--out", "OUT", "--format", "otlp-json"),
    ("prune", "--max-session-spans", "1"),
    ("clear", "--session", "SESSION", "--yes"),
    ("ingest", "INGEST", "--max-session-age", "none"),
)


@FUZZ
@given(data=st.data(), command=st.sampled_from(DAMAGE_COMMANDS))
def test_damaged_stores_are_read_or_refused_in_one_line_and_never_modified_by_a_reader(
    data: st.DataObject, command: tuple[str, ...], work: Path, pristine: tuple[Path, str, str]
) -> None:
    folder, trace_id, session = pristine
    case = _fresh(work)
    store = copy_store(folder, case / "store")
    description, damage = data.draw(store_damage(store.stat().st_size), label="damage")
    damage(store)
    before = StoreSnapshot.of(store)
    replacements = {
        "TRACE": trace_id[:8],
        "SESSION": session,
        "OUT": str(case / "out.json"),
        "INGEST": str(_valid_ingest_file(case / "in.jsonl")),
    }
    argv = [replacements.get(a, a) for a in command] + ["--store", str(store)]
    result = invoke(argv)
    check_outcome(result, allowed_exit_codes(argv), (description, argv))
    if command[0] in READERS or result.exit_code == 2:
        changed = before.differences(StoreSnapshot.of(store))
        if description.startswith("garbage WAL"):
            # A WAL without one valid frame is no part of the database: SQLite discards it at the last close.
            changed = [c for c in changed if c != "-wal"]
        assert changed == [], (description, argv)


@pytest.mark.parametrize("command", DAMAGE_COMMANDS, ids=lambda c: c[0])
def test_a_damaged_schema_whose_error_message_is_not_utf8_is_one_line(
    command: tuple[str, ...], work: Path, pristine: tuple[Path, str, str]
) -> None:
    """Found by the fuzz test above: a flipped byte in a trigger's text names a table that is not UTF-8, and
    SQLite's error message about it then is not UTF-8 either; the ``sqlite3`` module raises ``UnicodeDecodeError``
    (not an ``sqlite3.Error``) from a write. Every command still ends in one line, or answers."""
    folder, trace_id, session = pristine
    case = _fresh(work)
    store = copy_store(folder, case / "store")
    conn = sqlite3.connect(store)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute(
        "UPDATE sqlite_master SET sql = replace(sql, 'INSERT INTO receipt_touched',"
        " 'INSERT INTO ' || CAST(X'F2' AS TEXT) || 'eceipt_touched') WHERE type = 'trigger'"
    )
    assert conn.total_changes > 0
    conn.commit()
    conn.close()
    replacements = {
        "TRACE": trace_id[:8],
        "SESSION": session,
        "OUT": str(case / "out.json"),
        "INGEST": str(_valid_ingest_file(case / "in.jsonl")),
    }
    argv = [replacements.get(a, a) for a in command] + ["--store", str(store)]
    check_outcome(invoke(argv), allowed_exit_codes(argv), ("non-UTF-8 table name in a trigger", argv))


# -- fixed cases: foreign, newer, special files ---------------------------------------------------------------------
def _newer(store: Path, journal_mode: str) -> None:
    conn = sqlite3.connect(store)
    conn.execute(f"PRAGMA journal_mode = {journal_mode}")
    conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 'x')")
    conn.commit()
    conn.close()


def _foreign(store: Path, journal_mode: str) -> None:
    store.unlink()
    conn = sqlite3.connect(store)
    conn.execute(f"PRAGMA journal_mode = {journal_mode}")
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT)")
    conn.execute("INSERT INTO customers (email) VALUES ('someone@example.com')")
    conn.commit()
    conn.close()
    os.chmod(store, 0o644)


STORE_CASES = {
    "newer schema (WAL)": lambda s: _newer(s, "WAL"),
    # Regression: the store used to be switched to WAL before the version was checked.
    "newer schema (rollback journal)": lambda s: _newer(s, "DELETE"),
    "foreign database": lambda s: _foreign(s, "DELETE"),
    "foreign database (WAL)": lambda s: _foreign(s, "WAL"),
    "the key file as the store": lambda s: shutil.copy(s.parent / "hash.key", s),
}
ALL_COMMANDS = (*DAMAGE_COMMANDS, ("doctor",))


@pytest.mark.parametrize("case", list(STORE_CASES))
def test_a_store_that_is_not_ours_is_refused_by_every_command_and_left_exactly_as_it_was(
    case: str, work: Path, pristine: tuple[Path, str, str]
) -> None:
    folder, trace_id, session = pristine
    store = copy_store(folder, work / "store")
    STORE_CASES[case](store)
    ingest = _valid_ingest_file(work / "in.jsonl")
    for command in ALL_COMMANDS:
        replacements = {"TRACE": trace_id[:8], "SESSION": session, "OUT": str(work / "out.json"), "INGEST": str(ingest)}
        argv = [replacements.get(a, a) for a in command] + ["--store", str(store)]
        before = StoreSnapshot.of(store)
        result = invoke(argv)
        if command[0] == "doctor":  # doctor never opens the store
            check_outcome(result, frozenset({0}), (case, argv))
        else:
            check_outcome(result, frozenset({2}), (case, argv))
            if case.startswith("newer"):
                assert "newer than this otel-agentdiag understands" in result.stderr
            if case.startswith("foreign"):
                assert "not an otel-agentdiag store" in result.stderr
        assert before.differences(StoreSnapshot.of(store)) == [], (case, argv)
    assert not (work / "out.json").exists()


@pytest.mark.parametrize("size", [0, 1])
def test_a_reader_leaves_an_empty_file_alone(size: int, work: Path) -> None:
    """A 0- or 1-byte file (SQLite reads it as an empty database) is refused, not made a store."""
    store = work / "traces.db"
    store.write_bytes(b"S"[:size])
    os.chmod(store, 0o600)
    before = StoreSnapshot.of(store)
    result = invoke(["traces", "--store", store])
    check_outcome(result, frozenset({2}), size)
    assert "not an otel-agentdiag store yet (the file is empty)" in result.stderr
    assert before.differences(StoreSnapshot.of(store)) == []


def test_export_never_replaces_a_special_file_the_store_or_its_key(work: Path, pristine: tuple[Path, str, str]) -> None:
    """Regression: ``--out`` is written by rename, so it used to replace a FIFO or device node (``/dev/null`` as
    root), the store itself, or its key file, with the export."""
    store = copy_store(pristine[0], work / "store")
    fifo = work / "fifo"
    os.mkfifo(fifo)
    link = work / "link-to-store"
    link.symlink_to(store)
    for target in (fifo, store, store.parent / "hash.key", Path(f"{store}-wal"), link):
        for output_format in ("bundle", "otlp-json"):
            before = StoreSnapshot.of(store)
            key = (store.parent / "hash.key").read_bytes()
            result = invoke(["export", "--out", target, "--format", output_format, "--store", store])
            check_outcome(result, frozenset({2}), target)
            assert before.differences(StoreSnapshot.of(store)) == []
            assert (store.parent / "hash.key").read_bytes() == key
    assert not fifo.is_file() and fifo.exists()
    assert not Path(f"{store}-wal").exists()


# -- real processes -------------------------------------------------------------------------------------------------
def _run(cwd: Path, *args: str | bytes | Path, strict_stdout: bool = False) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    if strict_stdout:
        env["PYTHONIOENCODING"] = "utf-8:strict"  # as under a UTF-8 locale other than C
    return subprocess.run(
        [sys.executable, "-m", "otel_agentdiag", *(os.fsencode(a) for a in args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )


def _one_error_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    stderr = proc.stderr.decode("utf-8", "replace")
    assert b"Traceback" not in proc.stdout + proc.stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentdiag: error:"), stderr
    return lines[0]


def test_subprocess_hostile_files_and_argv_bytes_end_without_a_traceback(
    work: Path, pristine: tuple[Path, str, str]
) -> None:
    store = copy_store(pristine[0], work / "store")
    before = StoreSnapshot.of(store)
    bad_policy = work / "bad.toml"
    bad_policy.write_bytes(b'name = "\xff\xfe"\n')
    deep_policy = work / "deep.toml"
    deep_policy.write_bytes(b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n")
    # Regression: invalid UTF-8 and deep nesting in a policy file used to end in a traceback.
    for policy in (bad_policy, deep_policy):
        proc = _run(work, "policy", "--policy", policy)
        assert proc.returncode == 2
        assert str(policy) in _one_error_line(proc)
        proc = _run(work, "doctor", "--store", store, "--local-policy", policy)
        assert proc.returncode == 2
        _one_error_line(proc)

    # Argument bytes that are not UTF-8, where a path or an id is expected.
    for args in (
        [b"show", b"\xff\xfe\x01", b"--store", os.fsencode(store)],
        [b"receipt", b"--session", b"\xc3(", b"--store", os.fsencode(store)],
        [b"traces", b"--store", os.fsencode(work) + b"/\xff.db"],
        [b"status", b"--as-of", b"\xff", b"--store", os.fsencode(store)],
        [b"ingest", os.fsencode(work) + b"/\xff.jsonl", b"--store", os.fsencode(store)],
    ):
        proc = _run(work, *args, strict_stdout=True)
        assert proc.returncode == 2, proc.stderr
        _one_error_line(proc)
    assert before.differences(StoreSnapshot.of(store)) == []


def test_subprocess_an_undecodable_file_name_is_echoed_not_a_traceback(
    work: Path, pristine: tuple[Path, str, str]
) -> None:
    """Regression: with a strict stdout (a UTF-8 locale other than C) the success line of ``export`` naming a file
    whose name is not UTF-8 ended in ``UnicodeEncodeError`` after the file was written."""
    store = copy_store(pristine[0], work / "store")
    out = os.fsencode(work) + b"/\xff\xfe.json"
    proc = _run(work, "export", b"--out", out, "--store", store, strict_stdout=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert proc.stdout.startswith(b"wrote bundle ") and b"\\udcff\\udcfe.json" in proc.stdout
    assert os.path.isfile(out)

    ingest = work / "in.jsonl"
    ingest.write_bytes(b'{"resourceSpans": [}\n' + json.dumps(request_json([span_json(0)])).encode() + b"\n")
    proc = _run(work, "ingest", ingest, b"--store", os.fsencode(work) + b"/\xff/traces.db", strict_stdout=True)
    assert proc.returncode == 1, proc.stderr  # line 1 rejected and recorded, line 2 taken
    assert b"Traceback" not in proc.stdout + proc.stderr
    assert b"rejected 1 document(s): malformed_json 1" in proc.stdout
