"""``agentdiag export``: the bundle through the CLI, session selection, one-line errors (exit 2).

Stores are written by real runs (``configure()`` with the manual wrappers, the key in ``hash.key`` beside the
store as by default); the bundle's contents are tested in ``tests/diagnostics/test_bundle.py``.
"""

from __future__ import annotations

import importlib.util
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import otel_agentdiag as agentdiag
from otel_agentdiag.cli import cli
from otel_agentdiag.storage import SpanStore

agentdiag.register_names(tools=["lookup"], agents=["export-agent"])


@pytest.fixture(autouse=True)
def _in_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def one_error_line(result: Result) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("agentdiag: error:"), result.stderr
    return lines[0]


def run_agent(store: Path, conversation_id: str) -> None:
    with agentdiag.configure(store=store, set_global=False):
        with agentdiag.agent_run("export-agent", conversation_id=conversation_id, user_id="SENTINEL-user"):
            with agentdiag.iteration(0):
                with agentdiag.llm_call(provider="fake", model="fake-1") as call:
                    call.record_response(finish_reasons=["tool_calls"], input_tokens=10, output_tokens=3)
                with agentdiag.tool_call("lookup", call_id="SENTINEL-call"):
                    pass


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Three sessions, oldest first: SENTINEL-one, SENTINEL-two, SENTINEL-three."""
    path = tmp_path / "agent" / "traces.db"
    for name in ("one", "two", "three"):
        run_agent(path, f"SENTINEL-{name}")
    assert (path.parent / "hash.key").exists()
    return path


def digests(path: Path) -> list[str]:
    """Session digests, newest activity first."""
    with SpanStore(path, create=False) as store:
        return [s.session for s in store.list_sessions() if s.session]


def exported(out: Path) -> dict[str, Any]:
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    data = out.read_bytes()
    assert b"SENTINEL" not in data
    value: dict[str, Any] = json.loads(data)
    return value


def test_export_writes_a_bundle_of_the_newest_session_by_default(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle.json"
    result = invoke("export", "--out", out, "--store", store)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    (line,) = result.stdout.splitlines()
    size = out.stat().st_size
    assert line == f"wrote bundle {out} ({size} bytes): 4 span(s) of 1 session(s); omitted 0, dropped by limits 0"
    bundle = exported(out)
    newest = digests(store)[0]
    assert bundle["scope"] == {"selection": "newest", "sessions": [newest]}
    assert bundle["sessions"][0]["receipt"]["status"] == "valid"


def test_sessions_are_named_like_receipt_names_them(store: Path, tmp_path: Path) -> None:
    three, two, one = digests(store)
    out = tmp_path / "two.json"
    # a raw id (hashed with the store's key) and a prefix of a digest's hex part
    result = invoke(
        "export", "--out", out, "--session", "SENTINEL-one", "--session", two.rsplit(":", 1)[1][:10], "--store", store
    )
    assert result.exit_code == 0, result.output
    bundle = exported(out)
    assert bundle["scope"] == {"selection": "given", "sessions": [one, two]}
    assert [len(s["spans"]) for s in bundle["sessions"]] == [4, 4]
    # the same session twice is one session
    assert invoke("export", "--out", out, "--session", three, "--session", three[:32], "--store", store).exit_code == 0
    assert exported(out)["scope"]["sessions"] == [three]
    # three texts naming two sessions are two sessions
    result = invoke("export", "--out", out, "--session", one, "--session", two, "--session", two[:32], "--store", store)
    assert result.exit_code == 0, result.output
    assert exported(out)["scope"]["sessions"] == [one, two]


def test_the_bundle_is_replaced_atomically_and_tightened(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle.json"
    out.write_text("stale")
    out.chmod(0o664)
    assert invoke("export", "--out", out, "--store", store).exit_code == 0
    exported(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent", "bundle.json"]


def test_an_unknown_session_exits_2(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle.json"
    line = one_error_line(invoke("export", "--out", out, "--session", "no-such-session", "--store", store))
    assert "matches the --session value (a value of 15 characters (printable characters))" in line
    assert "no-such-session" not in line
    assert not out.exists()


def test_three_sessions_exit_2(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle.json"
    args = [arg for d in digests(store) for arg in ("--session", d)]
    line = one_error_line(invoke("export", "--out", out, *args, "--store", store))
    assert line == "agentdiag: error: at most 2 sessions per bundle"
    assert not out.exists()


def test_no_store_exits_2_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nothing" / "traces.db"
    line = one_error_line(invoke("export", "--out", tmp_path / "b.json", "--store", missing))
    assert "no trace store at" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_file_that_is_not_a_store_exits_2(tmp_path: Path) -> None:
    other = tmp_path / "app.db"
    other.write_bytes(b"not sqlite at all" * 10)
    one_error_line(invoke("export", "--out", tmp_path / "b.json", "--store", other))
    assert not (tmp_path / "b.json").exists()


def test_an_unwritable_out_exits_2(store: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for out, expected in (
        (tmp_path / "missing" / "b.json", "does not exist"),
        (blocker / "b.json", "does not exist"),
        (tmp_path, "is a directory"),
        (tmp_path / ("x" * 300 + ".json"), "cannot write"),  # longer than a file name may be
    ):
        line = one_error_line(invoke("export", "--out", out, "--store", store))
        assert expected in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "agent"]


def test_an_unknown_format_exits_2(store: Path, tmp_path: Path) -> None:
    one_error_line(invoke("export", "--out", tmp_path / "b.json", "--format", "zip", "--store", store))


@pytest.mark.parametrize(
    ("output_format", "module"),
    [("otlp-json", "otel_agentdiag.interchange.otlp_json"), ("jaeger-json", "otel_agentdiag.interchange.jaeger_json")],
)
def test_interchange_formats_write_the_strict_projection_of_the_whole_store(
    output_format: str, module: str, store: Path, tmp_path: Path
) -> None:
    try:
        found = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        found = None
    if found is None:
        pytest.skip(f"{module} is not there yet")
    out = tmp_path / f"all.{output_format}"
    result = invoke("export", "--out", out, "--format", output_format, "--store", store)
    assert result.exit_code == 0, result.output
    size = out.stat().st_size
    assert result.stdout == f"wrote {output_format} {out} ({size} bytes): 12 span(s); omitted 0\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert b"SENTINEL" not in out.read_bytes()
    # with --session: only that session, and any number of sessions is fine
    three = digests(store)
    result = invoke(
        "export",
        "--out",
        out,
        "--format",
        output_format,
        *[a for d in three for a in ("--session", d)],
        "--store",
        store,
    )
    assert result.exit_code == 0, result.output
    result = invoke("export", "--out", out, "--format", output_format, "--session", three[0], "--store", store)
    assert result.stdout.endswith(": 4 span(s); omitted 0\n"), result.stdout


def test_export_is_registered_and_documented() -> None:
    assert "export" in cli.commands
    result = invoke("export", "--help")
    assert result.exit_code == 0
    for option in ("--out", "--session", "--format", "--store", "bundle", "otlp-json", "jaeger-json"):
        assert option in result.stdout
