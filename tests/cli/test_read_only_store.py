"""Readers open the store read-only: a store in a folder the user cannot write is read, and left byte for byte.

Root ignores folder modes, so under root the store is handed to an unprivileged user (its folder and files
chowned, the folder 0555) and every command runs as that user in a subprocess; otherwise the folder is made
0555 and the commands run as the current user.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

import otel_agentdiag
from otel_agentdiag.cli import cli

NOBODY = 65534
REPO = Path(otel_agentdiag.__file__).resolve().parent.parent


@dataclass
class Runner:
    """How the commands run: as whom, with which interpreter."""

    python: str
    user: int | None
    env: dict[str, str]
    out: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.python, "-m", "otel_agentdiag", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.out,
            timeout=120,
            user=self.user,
            group=self.user,
        )


def _runs_as(python: str, uid: int) -> bool:
    try:
        done = subprocess.run([python, "-c", "import click, opentelemetry.sdk"], env=_env(), user=uid, group=uid)
    except OSError:
        return False
    return done.returncode == 0


def _env(home: Path | None = None) -> dict[str, str]:
    paths = dict.fromkeys([str(REPO), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.pathsep.join(paths), "LANG": "C.UTF-8"}
    if home is not None:
        env["HOME"] = str(home)
    return env


def _interpreter_for(uid: int) -> str | None:
    """An interpreter the unprivileged user can run with this environment's packages (the running one may sit
    in a folder only root can enter)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        if os.path.exists(python) and _runs_as(python, uid):
            return python
    return None


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def read_only_store() -> Iterator[tuple[Path, Runner]]:
    """A demo store in a 0555 folder owned by the user the commands run as."""
    base = Path(tempfile.mkdtemp(prefix="agentdiag-ro-"))
    folder = base / "store"
    path = folder / "traces.db"
    try:
        result = CliRunner().invoke(cli, ["demo", "--store", str(path)], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert not (folder / "traces.db-wal").exists()  # a clean close leaves the database alone
        out = base / "out"
        out.mkdir(mode=0o700)
        if os.geteuid() == 0:
            python = _interpreter_for(NOBODY)
            if python is None:
                pytest.skip("no interpreter the unprivileged user can run with these packages")
            os.chmod(base, 0o755)  # mkdtemp made it 0700: let the user reach the store
            for entry in (folder, out, *folder.iterdir()):
                os.chown(entry, NOBODY, NOBODY)
            runner = Runner(python, NOBODY, _env(out), out)
        else:
            runner = Runner(sys.executable, None, _env(out), out)
        os.chmod(folder, 0o555)
        yield path, runner
    finally:
        if folder.exists():
            os.chmod(folder, 0o700)
        shutil.rmtree(base, ignore_errors=True)


def test_every_reader_works_on_a_store_in_a_folder_it_cannot_write(read_only_store: tuple[Path, Runner]) -> None:
    path, runner = read_only_store
    folder = path.parent
    before = {entry.name: _digest(entry) for entry in folder.iterdir()}
    store = ["--store", str(path)]

    traces = runner.run("traces", "--format", "json", *store)
    assert traces.returncode == 0, traces.stderr
    (trace,) = json.loads(traces.stdout)
    trace_id = trace["trace_id"]

    shown = runner.run("show", trace_id, *store)
    assert shown.returncode == 0, shown.stderr
    assert trace_id in shown.stdout and "invoke_agent" in shown.stdout

    sessions = runner.run("sessions", "--format", "json", *store)
    assert sessions.returncode == 0, sessions.stderr
    (row,) = json.loads(sessions.stdout)
    assert row["trace_ids"] == [trace_id]
    assert row["receipt_status"] == "valid"

    for args in (["status"], ["receipt"], ["receipt", "--session", row["session"]]):
        done = runner.run(*args, "--format", "json", *store)
        assert done.returncode == 0, (args, done.stderr)
        assert json.loads(done.stdout)["session" if args == ["status"] else "status"], done.stdout

    exported = runner.out / "spans.json"
    done = runner.run("export", "--format", "otlp-json", "--out", str(exported), *store)
    assert done.returncode == 0, done.stderr
    assert trace_id in exported.read_text()
    done = runner.run("export", "--out", str(runner.out / "bundle.json"), *store)
    assert done.returncode == 0, done.stderr

    doctor = runner.run("doctor", "--format", "json", *store)
    assert doctor.returncode == 0, doctor.stderr

    # Nothing was written: the same files, byte for byte, and no -wal or -shm made.
    assert {entry.name: _digest(entry) for entry in folder.iterdir()} == before


def test_a_writer_still_cannot_write_there(read_only_store: tuple[Path, Runner]) -> None:
    path, runner = read_only_store
    sessions = runner.run("sessions", "--format", "json", "--store", str(path))
    (row,) = json.loads(sessions.stdout)
    before = _digest(path)
    done = runner.run("clear", "--session", row["session"], "--yes", "--store", str(path))
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1, done.stderr  # one line, no traceback
    assert _digest(path) == before
