"""File modes and secrets: what otel-agentdiag writes is private, and the hash key never leaves its file.

Under ``umask 000`` (everything the process creates would be world-writable unless it says otherwise) and
``umask 077``: the store, its ``-wal``/``-shm``, ``hash.key``, every ``agentdiag export`` output and every store
the CLI creates (``demo``, ``ingest``) are mode 0600, and every folder created for them 0700.

The hash key (a distinctive ``hash_key=`` argument, or the generated key file: raw, hex and base64) never
appears in captured logs, in the output of the read commands, in exception messages of forced failures, or in
any byte of the store and its WAL. ``agentdiag doctor`` shows the key id (as in the digests), not the key.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from reliability_support import HASH_KEY, agent_loop, assert_identity_everywhere, spans_per_run

import otel_agentdiag as agentdiag
from otel_agentdiag.cli import cli
from otel_agentdiag.config import AgentDiag
from otel_agentdiag.redaction import IdHasher, PolicyError
from otel_agentdiag.redaction.hashing import KEY_FILE_NAME, key_id_for
from otel_agentdiag.storage import RetentionLimits

EXPORT_FORMATS = ("bundle", "otlp-json", "jaeger-json")
DIGEST = re.compile(r"hmac-sha256:([0-9a-f]{8}):[0-9a-f]{64}")


@pytest.fixture(params=[0o000, 0o077], ids=["umask000", "umask077"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def assert_private_tree(root: Path) -> list[Path]:
    """``root`` (a folder otel-agentdiag created) and everything below it: folders 0700, files 0600."""
    found = [root]
    assert mode(root) == 0o700, root
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            path = Path(folder, name)
            assert mode(path) == 0o700, path
            found.append(path)
        for name in files:
            path = Path(folder, name)
            assert mode(path) == 0o600, path
            found.append(path)
    return found


def invoke(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)


def _run_agent(path: Path, **options: object) -> tuple[AgentDiag, int]:
    """A pipeline writing a few sessions to ``path`` (a tool error in each); returns it, still open (flushed: the
    WAL and SHM exist), and the spans ended."""
    diag = agentdiag.configure(store=path, set_global=False, **options)  # type: ignore[arg-type]
    ended = sum(agent_loop(f"session-{i}", 3, fail_every=2) for i in range(3))
    assert diag.force_flush()
    for suffix in ("", "-wal", "-shm"):
        assert Path(f"{path}{suffix}").exists(), suffix
    return diag, ended


# -- file modes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["key file", "argument"])
def test_store_wal_shm_key_and_folders_are_private(tmp_path: Path, umask: int, key: str) -> None:
    # Two folders to create: by the key file (created first) or, with a key argument, by the store itself.
    root = tmp_path / "new"
    path = root / "nested" / "traces.db"
    diag = agentdiag.configure(store=path, set_global=False, hash_key=HASH_KEY if key == "argument" else None)
    try:
        ended = sum(agent_loop(f"s-{i}", 2) for i in range(3))
        assert diag.force_flush()
        files = {p.name for p in assert_private_tree(root) if p.is_file()}
        assert files == {"traces.db", "traces.db-wal", "traces.db-shm"} | (
            {KEY_FILE_NAME} if key == "key file" else set()
        )
    finally:
        diag.shutdown()
    assert_private_tree(root)
    assert_identity_everywhere(path, ended={diag.observer_id or "": ended})


def test_cli_outputs_and_stores_are_private(tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # demo: a new store (and its key) in folders the command creates
    demo = tmp_path / "demo" / "deep" / "traces.db"
    assert invoke("demo", "--store", demo).exit_code == 0
    assert {p.name for p in assert_private_tree(tmp_path / "demo") if p.is_file()} >= {"traces.db", KEY_FILE_NAME}

    # export: every format, 0600 in a folder the user made (its mode is theirs: it is not checked)
    out = tmp_path / "out"
    out.mkdir()
    for fmt in EXPORT_FORMATS:
        target = out / f"export.{fmt}.json"
        done = invoke("export", "--store", demo, "--format", fmt, "--out", target)
        assert done.exit_code == 0, done.output
        assert mode(target) == 0o600, fmt
        # replacing an existing, looser file leaves a private one
        target.chmod(0o644)
        assert invoke("export", "--store", demo, "--format", fmt, "--out", target).exit_code == 0
        assert mode(target) == 0o600, fmt
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "a temporary file was left behind"

    # ingest: a new store created for the ingested spans
    ingested = tmp_path / "ingested" / "deep" / "traces.db"
    done = invoke("ingest", "--store", ingested, out / "export.otlp-json.json")
    assert done.exit_code == 0, done.output
    assert {p.name for p in assert_private_tree(tmp_path / "ingested") if p.is_file()} >= {"traces.db"}


def test_a_loose_existing_store_is_tightened(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "traces.db"
    first, _ended = _run_agent(path, hash_key=HASH_KEY)
    first.shutdown()
    Path(f"{path}-wal").touch()  # closed cleanly, the WAL and SHM went: made again, loose, as another tool might
    Path(f"{path}-shm").touch()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").chmod(0o644)
    with agentdiag.configure(store=path, hash_key=HASH_KEY, set_global=False) as diag:
        agent_loop("again", 1)
        assert diag.force_flush()
        for suffix in ("", "-wal", "-shm"):
            assert mode(Path(f"{path}{suffix}")) == 0o600, suffix


# -- secrets ---------------------------------------------------------------------------------------------


def key_forms(key: bytes) -> list[bytes]:
    """Every way the key could be spelt in text or bytes."""
    forms = [
        key,
        key.hex().encode(),
        key.hex().upper().encode(),
        base64.b64encode(key),
        base64.urlsafe_b64encode(key),
        base64.b64encode(key).rstrip(b"="),
        base64.urlsafe_b64encode(key).rstrip(b"="),
    ]
    return list(dict.fromkeys(forms))


def assert_absent(key: bytes, haystack: bytes | str, where: str) -> None:
    data = haystack.encode("utf-8", "surrogateescape") if isinstance(haystack, str) else haystack
    for form in key_forms(key):
        assert form not in data, f"the hash key ({form[:6]!r}...) appears in {where}"
        if isinstance(haystack, str):
            assert form.decode("latin-1") not in haystack, f"the hash key appears in {where}"


def store_bytes(path: Path) -> dict[str, bytes]:
    return {
        suffix or "db": Path(f"{path}{suffix}").read_bytes()
        for suffix in ("", "-wal", "-shm")
        if Path(f"{path}{suffix}").exists()
    }


def read_commands(path: Path, out: Path) -> list[tuple[str, ...]]:
    commands: list[tuple[str, ...]] = [
        ("traces",),
        ("traces", "--format", "json"),
        ("sessions",),
        ("sessions", "--format", "json"),
        ("receipt",),
        ("receipt", "--format", "json"),
        ("receipt", "--session", "session-1", "--format", "json"),
        ("status", "--with-receipt"),
        ("status", "--session", "session-0", "--format", "json"),
        ("doctor",),
        ("doctor", "--format", "json"),
    ]
    commands += [("export", "--format", fmt, "--out", str(out / f"{fmt}.json")) for fmt in EXPORT_FORMATS]
    return [(*c, "--store", str(path)) for c in commands]


@pytest.mark.parametrize("source", ["argument", "key file"])
def test_the_hash_key_never_leaves_its_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="otel_agentdiag")
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "store" / "traces.db"
    limits = RetentionLimits(max_session_spans=5)  # retention runs too (its deletes go through the WAL)
    if source == "argument":
        diag, ended = _run_agent(path, hash_key=HASH_KEY, retention=limits)
        key = HASH_KEY
        env = {"AGENTDIAG_HASH_KEY": HASH_KEY.decode()}
        assert not (path.parent / KEY_FILE_NAME).exists()
    else:
        diag, ended = _run_agent(path, retention=limits)
        key = (path.parent / KEY_FILE_NAME).read_bytes()
        assert len(key) == 32
        env = {}
    key_id = key_id_for(key)

    # the store, its WAL and SHM while the pipeline is live, and again once it closed them
    for name, data in store_bytes(path).items():
        assert_absent(key, data, f"the live store ({name})")
    diag.shutdown()
    stored = assert_identity_everywhere(path, ended={diag.observer_id or "": ended})
    assert stored.pruned_spans > 0

    # the read commands: output never holds the key; the digests and doctor show its id
    out = tmp_path / "exports"
    out.mkdir()
    outputs: list[str] = []
    for command in read_commands(path, out):
        done = invoke(*command, env=env)
        assert done.exit_code == 0, (command, done.output)
        assert "Traceback" not in done.output
        for text in (done.stdout, done.stderr):
            assert_absent(key, text, f"`agentdiag {' '.join(command[:3])}`")
        outputs.append(done.stdout)
    trace_ids = [t["trace_id"] for t in json.loads(outputs[1])]
    assert trace_ids
    for fmt in ("text", "json"):
        done = invoke("show", trace_ids[0], "--format", fmt, "--store", path, env=env)
        assert done.exit_code == 0, done.output
        for text in (done.stdout, done.stderr):
            assert_absent(key, text, f"`agentdiag show --format {fmt}`")
    for written in out.iterdir():
        assert_absent(key, written.read_bytes(), f"the export {written.name}")
    sessions = json.loads(outputs[3])
    assert {DIGEST.fullmatch(s["session"]).group(1) for s in sessions if s["session"]} == {key_id}  # type: ignore[union-attr]
    doctor_text, doctor_json = outputs[9], json.loads(outputs[10])
    assert f"key id {key_id}" in doctor_text
    assert key_id in json.dumps(doctor_json)
    expected_source = "AGENTDIAG_HASH_KEY" if source == "argument" else "key file"
    assert expected_source in doctor_text

    for name, data in store_bytes(path).items():
        assert_absent(key, data, f"the store after the reads ({name})")
    for record in caplog.records:
        assert_absent(key, record.getMessage(), f"the log record {record.name}: {record.msg!r}")
        if record.exc_text:
            assert_absent(key, record.exc_text, f"the traceback logged by {record.name}")


def test_forced_failures_never_echo_the_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="otel_agentdiag")
    path = tmp_path / "traces.db"
    bad_policy = tmp_path / "bad.toml"
    bad_policy.write_text('extends = "local"\nallowed_keys = 7\n[[[broken\n', encoding="utf-8")
    short = b"sekrit-0123"  # too short for a bytes key: refused
    failures: list[BaseException] = []
    attempts: list[dict[str, object]] = [
        {"hash_key": HASH_KEY, "local_policy": bad_policy},
        {"hash_key": HASH_KEY, "local_policy": tmp_path / "missing.toml"},
        {"hash_key": HASH_KEY, "otlp_protocol": "carrier-pigeon"},
        {"hash_key": HASH_KEY, "retention": {"max_session_spans": 1}},
        {"hash_key": HASH_KEY, "capture_content": "yes"},
        {"hash_key": short},
        {"hash_key": list(HASH_KEY)},
    ]
    for options in attempts:
        with pytest.raises((ValueError, PolicyError)) as raised:
            agentdiag.configure(store=path, set_global=False, **options)  # type: ignore[arg-type]
        failures.append(raised.value)
    with pytest.raises(ValueError) as raised:
        IdHasher(HASH_KEY, algorithm="md5")
    failures.append(raised.value)
    for exc in failures:
        for key in (HASH_KEY, short):
            assert_absent(key, f"{exc}\n{exc!r}", f"the exception {type(exc).__name__}: {exc}")

    # A key file that is too short: refused (logged, never echoed), and nothing uses it: the local store is off.
    (tmp_path / KEY_FILE_NAME).write_bytes(short)
    with agentdiag.configure(store=path, set_global=False) as diag:
        agent_loop("refused", 1)
        assert diag.force_flush()
        assert diag.destinations == () and diag.store_path is None
        for value in (repr(diag), repr(diag.destinations), repr(diag.options), json.dumps(diag.stats())):
            assert_absent(short, value, "the handle's repr or stats")
    # An unusable policy variable: logged, strict used.
    monkeypatch.setenv("AGENTDIAG_LOCAL_POLICY", str(bad_policy))
    with agentdiag.configure(store=path, hash_key=HASH_KEY, set_global=False) as diag:
        agent_loop("failures", 1)
        assert diag.force_flush()
        assert diag.destinations[0].key_source == "argument"
        for value in (repr(diag), repr(diag.destinations), repr(diag.options), json.dumps(diag.stats())):
            assert_absent(short, value, "the handle's repr or stats")
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"key file {tmp_path / KEY_FILE_NAME}: it holds 11 bytes" in m for m in messages), messages
    assert any("AGENTDIAG_LOCAL_POLICY" in m for m in messages), messages
    for record in caplog.records:
        for key in (HASH_KEY, short):
            assert_absent(key, record.getMessage(), f"the log record {record.name}")
    assert_identity_everywhere(path, ended={diag.observer_id or "": spans_per_run(1)})
