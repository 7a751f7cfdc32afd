"""``agentdiag serve`` as a user runs it: a real subprocess on a free port, its URL line, a GET, Ctrl-C (exit 0);
and its one-line errors (exit 2)."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import sysconfig
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from serve_helpers import demo_store, only_trace_id, served, url_token

from otel_agentdiag.cli import cli

DEADLINE_S = 20.0
NOBODY = 65534


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_store(tmp_path_factory.mktemp("demo"))


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    return env


def _first_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()  # blocks until the URL line (or the end of output): no sleep
    return line.strip()


def _get(port: int, path: str, token: str | None) -> tuple[int, dict[str, object]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE_S)
    try:
        connection.request("GET", path, headers={} if token is None else {"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _serve_then_ctrl_c(demo: Path, between: Callable[[int, str | None], None], *args: str) -> str:
    """Run ``agentdiag serve --port 0`` (and ``args``) on ``demo``, call ``between(port, token)`` once its URL line
    is out (the token from the URL, None without), then Ctrl-C; returns its stderr after checking it stopped with
    exit 0 and no traceback."""
    with subprocess.Popen(
        [sys.executable, "-m", "otel_agentdiag", "serve", "--store", str(demo), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_environment(),
    ) as process:
        try:
            line = _first_line(process)
            assert line.startswith("agentdiag serve: http://127.0.0.1:"), line
            port = int(line.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])
            between(port, url_token(line)[1] if "?token=" in line else None)
            process.send_signal(signal.SIGINT)
            _out, err = process.communicate(timeout=DEADLINE_S)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, err
    assert "Traceback" not in err
    return err


def test_serve_prints_its_url_answers_and_stops_on_ctrl_c(demo: Path) -> None:
    def answers(port: int, token: str | None) -> None:
        assert token is not None and len(token) >= 40  # 32 random bytes
        status, body = _get(port, "/api/services", token)
        assert status == 200 and body["data"] == ["agentdiag-demo"]
        status, body = _get(port, "/api/services", None)
        assert status == 401 and body["data"] is None

    _serve_then_ctrl_c(demo, answers)


REMOTE = "192.0.2.10"  # TEST-NET-1: not loopback (never bound: each check below comes before binding)


def test_a_ctrl_c_right_after_the_url_line_is_a_clean_stop(demo: Path) -> None:
    """Ctrl-C before Uvicorn has taken over SIGINT (just after the URL line) still exits 0, quietly: nothing on
    stderr (no "Aborted!", no ``RuntimeWarning: coroutine 'Server.serve' was never awaited``)."""
    assert _serve_then_ctrl_c(demo, lambda _port, _token: None) == ""


def test_a_ctrl_c_right_after_the_url_line_20_times_under_cpu_load(demo: Path) -> None:
    """The test above 20 times in a row while CPU-burning processes keep every core busy (the load under which
    it once hung, and under which the signal lands at every point of the server's start). Each run is bounded:
    the URL line is waited on, then the exit, each within :data:`DEADLINE_S`."""
    burners = [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        for attempt in range(20):
            err = _serve_then_ctrl_c(demo, lambda _port, _token: None)
            assert err == "", f"attempt {attempt}: {err}"
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of 10,001 spans, written in a process of its own (its Jaeger JSON is about 10 MB)."""
    path = tmp_path_factory.mktemp("big") / "traces.db"
    script = f"import serve_helpers; serve_helpers.big_trace_store(__import__('pathlib').Path({str(path)!r}))"
    env = {**_environment(), "OTEL_BSP_MAX_QUEUE_SIZE": "20000"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent), env["PYTHONPATH"]])
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return path


def test_a_ctrl_c_during_a_request_is_a_clean_stop(big: Path) -> None:
    """Ctrl-C while the server is sending a 10 MB answer the client has not read (its head received, the rest
    held up by the full socket buffers): the server stops within its graceful timeout, exit 0, nothing on
    stderr."""
    trace_id = only_trace_id(big)

    def mid_answer(port: int, token: str | None) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE_S)
        connection.request("GET", f"/api/traces/{trace_id}", headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()  # the head is out: the answer is being sent
        assert response.status == 200
        assert response.read(1024)  # and its body is under way; the rest stays unread until after the Ctrl-C
        connections.append(connection)

    connections: list[http.client.HTTPConnection] = []
    try:
        assert _serve_then_ctrl_c(big, mid_answer) == ""
    finally:
        for connection in connections:
            connection.close()


def _one_error_line(*args: str) -> str:
    result = CliRunner().invoke(cli, ["serve", *args], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentdiag: error:"), result.stderr
    return lines[0]


def test_a_missing_store_is_one_line(tmp_path: Path) -> None:
    assert "no trace store" in _one_error_line("--store", str(tmp_path / "none.db"))


def test_a_remote_host_needs_the_flag_and_a_token(demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "--allow-remote" in _one_error_line("--store", str(demo), "--host", REMOTE)
    assert "AGENTDIAG_SERVE_TOKEN" in _one_error_line("--store", str(demo), "--host", REMOTE, "--allow-remote")
    monkeypatch.setenv("AGENTDIAG_SERVE_TOKEN", "short")
    assert "at least 16" in _one_error_line("--store", str(demo), "--host", REMOTE, "--allow-remote")
    token_file = tmp_path / "token"
    token_file.write_text("a-long-enough-token-0123456789\n")
    token_file.chmod(0o644)
    message = _one_error_line("--store", str(demo), "--host", REMOTE, "--allow-remote", "--token-file", str(token_file))
    assert "readable by group or others" in message


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::", "[::]"])
def test_a_wildcard_host_is_refused(demo: Path, wildcard: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every address at once cannot be matched against the Host header: refused even with the flag and a token."""
    monkeypatch.setenv("AGENTDIAG_SERVE_TOKEN", "a-long-enough-token-0123456789")
    assert "wildcard" in _one_error_line("--store", str(demo), "--host", wildcard, "--allow-remote")


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::"])
def test_a_wildcard_host_says_everything_in_the_first_error(demo: Path, wildcard: str) -> None:
    """``--host 0.0.0.0`` alone: the first error says it is never accepted and what is (one address, with
    --allow-remote and a token), so a second try is not needed to learn it."""
    message = _one_error_line("--store", str(demo), "--host", wildcard)
    assert "wildcard" in message and "never accepted" in message
    assert "--allow-remote" in message and "AGENTDIAG_SERVE_TOKEN" in message and "--token-file" in message


def test_a_missing_token_file_is_one_line_on_a_loopback_host_too(demo: Path, tmp_path: Path) -> None:
    """``--host 127.0.0.2 --allow-remote --token-file /nope``: a loopback host needs no token, but the file given
    must still be read; a missing one is an error naming it, never ignored for a random token."""
    missing = tmp_path / "nope"
    message = _one_error_line(
        "--store", str(demo), "--host", "127.0.0.2", "--allow-remote", "--token-file", str(missing), "--port", "0"
    )
    assert str(missing) in message and "No such file" in message


def test_a_port_in_use_is_one_line(demo: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert "in use" in _one_error_line("--store", str(demo), "--port", str(port))


def test_before_any_store_exists_one_line_names_the_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh machine: no ``--store``, no ``AGENTDIAG_STORE``, no store at the default path."""
    monkeypatch.delenv("AGENTDIAG_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    message = _one_error_line()
    assert "no trace store at" in message and "'agentdiag demo'" in message
    assert list(tmp_path.iterdir()) == []  # nothing made


def _downgrade(store: Path) -> None:
    """Make ``store`` a store of schema 10, as it was before migration 11 (the ``operations`` summary)."""
    from otel_agentdiag.storage import SpanStore

    with SpanStore(store) as writer:
        writer._conn.execute("DROP TABLE operations")
        writer._conn.execute("DROP TRIGGER spans_deleted_operations")
        writer._conn.execute("DELETE FROM schema_migrations WHERE version = 11")


def _schema_versions(store: Path) -> set[int]:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return {int(v) for (v,) in conn.execute("SELECT version FROM schema_migrations")}
    finally:
        conn.close()


def test_an_older_store_is_upgraded_once_and_served(tmp_path: Path) -> None:
    store = demo_store(tmp_path)
    _downgrade(store)
    assert 11 not in _schema_versions(store)
    with served(store) as server:
        request = urllib.request.Request(f"{server.url}/api/services", headers=server.headers)
        with urllib.request.urlopen(request, timeout=DEADLINE_S) as response:
            assert json.loads(response.read())["data"] == ["agentdiag-demo"]
    assert 11 in _schema_versions(store)


def _digests(folder: Path) -> dict[str, str]:
    return {entry.name: hashlib.sha256(entry.read_bytes()).hexdigest() for entry in folder.iterdir()}


def _site_packages() -> list[str]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def _interpreter_as(uid: int, env: dict[str, str]) -> str | None:
    """This Python (the running one, or the system's of the same version) if ``uid`` can run it with our packages:
    the running one may sit in a folder only root can enter."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in dict.fromkeys([sys.executable, f"/usr/bin/{version}", f"/usr/local/bin/{version}"]):
        try:
            done = subprocess.run(
                [python, "-c", "import starlette, uvicorn, otel_agentdiag.cli"],
                env=env,
                user=uid,
                group=uid,
                capture_output=True,
                timeout=120,
            )
        except OSError:
            continue
        if done.returncode == 0:
            return python
    return None


def test_an_older_store_it_cannot_upgrade_is_one_line(tmp_path: Path) -> None:
    """An older store in a 0555 folder (as root: one owned by, and served as, an unprivileged user, since root
    ignores folder modes): refused with one line saying why and what to do, exit 2, nothing written."""
    base = Path(tempfile.mkdtemp(prefix="agentdiag-serve-ro-"))
    try:
        store = demo_store(base)
        _downgrade(store)
        folder = store.parent
        for name in ("traces.db-wal", "traces.db-shm"):
            assert not (folder / name).exists()
        user: int | None = None
        python = sys.executable
        env = {**_environment(), "HOME": str(base)}
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], *_site_packages()])
        if os.geteuid() == 0:
            user = NOBODY
            python = _interpreter_as(NOBODY, env) or pytest.skip("no interpreter the unprivileged user can run")
            for entry in (base, folder.parent):
                os.chmod(entry, 0o755)
            for entry in (folder, *folder.iterdir()):
                os.chown(entry, NOBODY, NOBODY)
        os.chmod(folder, 0o555)
        before = _digests(folder)
        try:
            done = subprocess.run(
                [python, "-m", "otel_agentdiag", "serve", "--store", str(store), "--port", "0"],
                capture_output=True,
                text=True,
                env=env,
                cwd=base,
                timeout=120,
                user=user,
                group=user,
            )
        finally:
            os.chmod(folder, 0o700)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"agentdiag: error: cannot serve {store}: it is of an older schema"), line
        assert "agentdiag status --store" in line and "Traceback" not in done.stderr
        assert _digests(folder) == before  # nothing written, no -wal or -shm made
    finally:
        shutil.rmtree(base, ignore_errors=True)
