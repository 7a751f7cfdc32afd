"""Every command that opens a store or reads its key refuses one that is not ours, and a weak key: exit 2 and one
line naming the path (or the variable) and the reason, and the store is left exactly as it was.

Real stores made by ``agentdiag demo``; ``chown`` to another uid simulates another user (root only, else skipped).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from otel_agentdiag.cli import cli

OTHER_UID = 12345
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="simulating another user's file needs chown, which needs root")
WEAK_KEY = "agentdiag-support-bundle-key-2024-production"  # base64url-shaped, 33 bytes, and chosen
GENERATE = 'python -c "import secrets; print(secrets.token_hex(32))"'


def invoke(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)


def one_error_line(result: Result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentdiag: error: "), result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A demo store folder (database and key file), with a trace id and session digest in it."""
    folder = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith(("AGENTDIAG_", "OTEL_")):
                mp.delenv(name)
        assert invoke("demo", "--store", folder / "traces.db").exit_code == 0
        listed = json.loads(invoke("traces", "--store", folder / "traces.db", "--format", "json").stdout)
    return folder, listed[0]["trace_id"], listed[0]["session"]


@pytest.fixture
def store(tmp_path: Path, demo_store: tuple[Path, str, str]) -> Path:
    target = tmp_path / "work" / "store"
    target.mkdir(parents=True, mode=0o700)
    for item in demo_store[0].iterdir():
        shutil.copy2(item, target / item.name)
    return target / "traces.db"


def commands(store: Path, demo_store: tuple[Path, str, str], tmp_path: Path) -> list[tuple[str | Path, ...]]:
    _folder, trace_id, session = demo_store
    out = tmp_path / "out.json"
    found: list[tuple[str | Path, ...]] = [
        ("traces",),
        ("show", trace_id[:12]),
        ("sessions",),
        ("receipt",),
        ("receipt", "--session", session),
        ("status", "--with-receipt"),
        ("status", "--session", "a-raw-conversation-id"),
        ("export", "--out", out),
        ("export", "--out", out, "--format", "otlp-json"),
        ("prune", "--max-session-spans", "1"),
        ("clear", "--session", session, "--yes"),
        ("push", "--endpoint", "http://127.0.0.1:9"),
        ("ingest", _ingest_file(tmp_path)),
        ("demo",),
    ]
    return [(*c, "--store", store) for c in found]


def _ingest_file(tmp_path: Path) -> Path:
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": "chat",
        "kind": 3,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000100000000",
    }
    request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": [span]}]}]}
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(request) + "\n", encoding="utf-8")
    return path


def snapshot(folder: Path) -> dict[str, tuple[int, int, bytes | str]]:
    found: dict[str, tuple[int, int, bytes | str]] = {}
    for entry in sorted([folder, *folder.rglob("*")]):
        st = entry.lstat()
        content: bytes | str = (
            os.readlink(entry) if stat.S_ISLNK(st.st_mode) else entry.read_bytes() if stat.S_ISREG(st.st_mode) else ""
        )
        found[str(entry)] = (st.st_mode, st.st_uid, content)
    return found


def _foreign_folder(store: Path) -> tuple[Path, str]:
    os.chown(store.parent, OTHER_UID, -1)
    return store.parent, f"refusing store folder {store.parent}: owned by uid {OTHER_UID}, not 0 (you)"


def _foreign_database(store: Path) -> tuple[Path, str]:
    os.chown(store, OTHER_UID, -1)
    return store, f"refusing store database {store}: owned by uid {OTHER_UID}, not 0 (you)"


def _group_writable_folder(store: Path) -> tuple[Path, str]:
    store.parent.chmod(0o770)
    return store.parent, f"refusing store folder {store.parent}: writable by group or others (mode 0770)"


def _other_writable_wal(store: Path) -> tuple[Path, str]:
    wal = Path(f"{store}-wal")
    wal.touch()
    wal.chmod(0o606)
    return wal, f"refusing store WAL file {wal}: writable by group or others (mode 0606)"


def _symlinked_shm(store: Path) -> tuple[Path, str]:
    shm = Path(f"{store}-shm")
    shm.symlink_to(store.parent.parent / "attacker-shm")
    return shm, f"refusing store shared-memory file {shm}: is a symbolic link"


def _symlinked_database(store: Path) -> tuple[Path, str]:
    real = store.parent.parent / "real.db"
    store.rename(real)
    store.symlink_to(real)
    return store, f"refusing store database {store}: is a symbolic link"


def _foreign_key_file(store: Path) -> tuple[Path, str]:
    key = store.parent / "hash.key"
    os.chown(key, OTHER_UID, -1)
    return key, f"refusing hash key file {key}: owned by uid {OTHER_UID}, not 0 (you)"


def _symlinked_key_file(store: Path) -> tuple[Path, str]:
    key = store.parent / "hash.key"
    key.unlink()
    key.symlink_to(store.parent.parent / "a-key-someone-else-knows")
    return key, f"refusing hash key file {key}: is a symbolic link"


STORE_CASES: dict[str, Callable[[Path], tuple[Path, str]]] = {
    "foreign folder": _foreign_folder,
    "foreign database": _foreign_database,
    "group-writable folder": _group_writable_folder,
    "other-writable wal": _other_writable_wal,
    "symlinked shm": _symlinked_shm,
    "symlinked database": _symlinked_database,
}
ROOT_ONLY = {"foreign folder", "foreign database"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=[needs_root] if c in ROOT_ONLY else []) for c in STORE_CASES])
def test_every_command_refuses_a_store_that_is_not_ours(
    case: str, store: Path, demo_store: tuple[Path, str, str], tmp_path: Path
) -> None:
    _path, expected = STORE_CASES[case](store)
    before = snapshot(store.parent)
    for command in commands(store, demo_store, tmp_path):
        line = one_error_line(invoke(*command))
        assert line == f"agentdiag: error: {expected}", command
        assert snapshot(store.parent) == before, command
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(
    "case", [pytest.param("foreign key file", marks=needs_root), pytest.param("symlinked key file")]
)
def test_commands_that_read_the_key_refuse_a_key_file_that_is_not_ours(case: str, store: Path, tmp_path: Path) -> None:
    expected = (_foreign_key_file if case == "foreign key file" else _symlinked_key_file)(store)[1]
    out = tmp_path / "out.json"
    for command in (
        ("export", "--out", out),
        ("push", "--endpoint", "http://127.0.0.1:9"),
        ("status", "--session", "a-raw-conversation-id"),
        ("receipt", "--session", "a-raw-conversation-id"),
        ("ingest", _ingest_file(tmp_path)),
        ("demo",),
    ):
        before = snapshot(store.parent)
        line = one_error_line(invoke(*command, "--store", store))
        assert line == f"agentdiag: error: {expected}", command
        assert snapshot(store.parent) == before, command
    assert not out.exists()
    # Commands that never touch the key still read the store (it is ours).
    assert invoke("traces", "--store", store).exit_code == 0


def test_commands_that_read_the_key_refuse_a_weak_key_variable(store: Path, tmp_path: Path) -> None:
    env = {"AGENTDIAG_HASH_KEY": WEAK_KEY}
    out = tmp_path / "out.json"
    for command in (
        ("export", "--out", out),
        ("push", "--endpoint", "http://127.0.0.1:9"),
        ("status", "--session", "a-raw-conversation-id"),
        ("ingest", _ingest_file(tmp_path)),
        ("demo",),
        ("doctor",),
    ):
        before = snapshot(store.parent)
        result = invoke(*command, "--store", store, env=env)
        line = one_error_line(result)
        assert line.startswith("agentdiag: error: refusing the hash key from AGENTDIAG_HASH_KEY: "), command
        assert GENERATE in line, command
        assert WEAK_KEY not in result.output, command  # the refusal never echoes the key
        assert snapshot(store.parent) == before, command
    assert not out.exists()


def test_a_weak_key_file_is_refused_in_one_line(store: Path, tmp_path: Path) -> None:
    key = store.parent / "hash.key"
    key.write_bytes(b"hunter2-hunter2-hunter2-hunter2-hunter2-hunter2")
    key.chmod(0o600)
    line = one_error_line(invoke("export", "--out", tmp_path / "o.json", "--store", store))
    assert line.startswith(f"agentdiag: error: refusing the hash key from key file {key}: ")
    assert "not random" in line and GENERATE in line
    assert "hunter2" not in line


@needs_root
def test_doctor_reports_a_refused_store_and_what_is_off(store: Path, tmp_path: Path) -> None:
    os.chown(store.parent, OTHER_UID, -1)
    text = invoke("doctor", "--store", store)
    line = one_error_line(text)
    reason = f"refusing store folder {store.parent}: owned by uid {OTHER_UID}, not 0 (you)"
    assert line == f"agentdiag: error: {reason}; the local store is off"
    assert f"refused: {reason}" in text.stdout  # the report still shows, with the refusal in it
    assert "canary: nothing is exported" in text.stdout
    as_json = invoke("doctor", "--store", store, "--format", "json")
    assert as_json.exit_code == 2
    report = json.loads(as_json.stdout)
    assert report["refused"] == [{"reason": reason, "destinations": ["local"]}]
    assert report["destinations"] == []


def test_doctor_shows_a_refused_otlp_key_and_still_checks_the_local_store(store: Path) -> None:
    env = {"AGENTDIAG_OTLP_HASH_KEY": "correct-horse-battery-staple-correct-horse"}
    result = invoke("doctor", "--store", store, "--otlp-endpoint", "http://127.0.0.1:4318", env=env)
    line = one_error_line(result)
    assert line.startswith("agentdiag: error: refusing the hash key from AGENTDIAG_OTLP_HASH_KEY: ")
    assert line.endswith("; the OTLP export is off")
    assert "canary local (local): PASS" in result.stdout
    assert "destination otlp" not in result.stdout
