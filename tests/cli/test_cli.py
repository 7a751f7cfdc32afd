"""The ``agentdiag`` command, through click's CliRunner and through real subprocesses."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from otel_agentdiag.cli import cli
from otel_agentdiag.storage import SpanStore
from otel_agentdiag.version import __version__

_ENV_PREFIXES = ("AGENTDIAG_", "OTEL_")
TRACE_HEADER = re.compile(r"^trace ([0-9a-f]{32})\b", re.MULTILINE)
SUMMARY_KEYS = {
    "trace_id",
    "name",
    "start_time",
    "duration_ms",
    "status",
    "span_count",
    "session",
    "error_count",
    "cost_usd",
    "budget_exceeded",
}
SPAN_KEYS = {
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "start_time",
    "end_time",
    "duration_ms",
    "status",
    "attributes",
    "events",
}
KINDS = {"run", "iteration", "llm", "tool", "other"}
STATUSES = {"ok", "error", "unset"}


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def run_proc(cwd: Path, *args: str | Path, program: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    return subprocess.run(
        [*(program or [sys.executable, "-m", "otel_agentdiag"]), *(str(a) for a in args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=120,
        check=False,
    )


def parse_utc(text: str) -> datetime:
    assert text.endswith("Z"), text
    moment = datetime.fromisoformat(text)
    assert moment.tzinfo is not None
    assert moment.utcoffset() == timezone.utc.utcoffset(None)
    return moment


def demo_trace_id(output: str) -> str:
    ids = TRACE_HEADER.findall(output)
    assert len(ids) == 1, output
    return ids[0]


def assert_one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("agentdiag: error:"), stderr
    return lines[0]


def mark_before(line: str, name: str) -> str:
    """The status glyph printed just before ``name`` on a tree line."""
    return line.split(name, 1)[0].split()[-1]


@pytest.fixture
def demo_store(tmp_path: Path) -> tuple[Path, str]:
    """A store holding one demo trace; returns its path and the trace id."""
    path = tmp_path / "demo" / "traces.db"
    result = invoke("demo", "--store", path)
    assert result.exit_code == 0, result.output
    return path, demo_trace_id(result.stdout)


def check_demo_output(stdout: str, store: Path) -> None:
    for text in (
        "invoke_agent trip-planner",
        "agent.iteration",
        "chat demo-model-1",
        "execute_tool get_weather",
        "execute_tool convert_currency",
    ):
        assert text in stdout, text
    tool_lines = [line for line in stdout.splitlines() if "execute_tool " in line]
    assert len(tool_lines) >= 3
    marks = [mark_before(line, "execute_tool ") for line in tool_lines]
    assert sum(m in ("✗", "x") for m in marks) == 1, stdout
    assert all(m in ("✓", "+", "✗", "x") for m in marks), marks
    assert store.is_file()
    with SpanStore(store, create=False) as s:
        assert s.span_count() >= 8


# -- demo ---------------------------------------------------------------------------------------------------


def test_demo_prints_the_trace_tree_and_stores_it(tmp_path: Path) -> None:
    path = tmp_path / "out" / "traces.db"
    result = invoke("demo", "--store", path)
    assert result.exit_code == 0, result.output
    check_demo_output(result.stdout, path)
    # The receipt of the demo's session: complete, and its accounting identity spelled out.
    receipt = re.search(r"^receipt: (\w+) - (\d+) spans stored; observed (\d+) = accepted (\d+) ", result.stdout, re.M)
    assert receipt, result.stdout
    assert receipt.group(1) == "valid"
    assert int(receipt.group(2)) == int(receipt.group(3)) == int(receipt.group(4)) >= 9
    trace_id = demo_trace_id(result.stdout)
    with SpanStore(path, create=False) as store:
        assert [t.trace_id for t in store.list_traces()] == [trace_id]
    assert not (tmp_path / ".agentdiag").exists()  # --store was honoured


def test_demo_prices_its_model_calls_and_rolls_the_cost_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's fake model has an invented price (cost/demo_prices.toml): each call's cost is its tokens at that
    price, and the run's roll-up is their sum; with AGENTDIAG_PRICES=off nothing is priced."""
    import otel_agentdiag.cost
    from otel_agentdiag.cost.loader import load_price_table

    monkeypatch.delenv("AGENTDIAG_PRICES", raising=False)
    path = tmp_path / "traces.db"
    result = invoke("demo", "--store", path)
    assert result.exit_code == 0, result.output
    with SpanStore(path, create=False) as store:
        (summary,) = store.list_traces()
        spans = store.get_trace(summary.trace_id)
    table = load_price_table(Path(otel_agentdiag.cost.__file__).parent / "demo_prices.toml")
    price = table.price("demo", "demo-model-1", summary.start_ns)
    assert price is not None
    leaves = [s for s in spans if s.attributes.get("agentdiag.kind") == "llm"]
    expected = [
        (
            s.attributes["gen_ai.usage.input_tokens"] * price.input
            + s.attributes["gen_ai.usage.output_tokens"] * price.output
        )
        / 1e6
        for s in leaves
    ]
    assert [s.attributes["agentdiag.cost.usd"] for s in leaves] == pytest.approx(expected)
    (run,) = [s for s in spans if s.attributes.get("agentdiag.kind") == "run"]
    assert run.attributes["agentdiag.usage.cost.usd"] == pytest.approx(sum(expected))
    assert summary.cost_usd == pytest.approx(sum(expected))
    assert (
        sum(" cost $" in line for line in result.stdout.splitlines()) == len(leaves) + len(leaves) + 1
    )  # + iterations, run

    monkeypatch.setenv("AGENTDIAG_PRICES", "off")
    off = tmp_path / "off.db"
    result = invoke("demo", "--store", off)
    assert result.exit_code == 0, result.output
    with SpanStore(off, create=False) as store:
        (summary,) = store.list_traces()
        assert not any("agentdiag.cost.usd" in s.attributes for s in store.get_trace(summary.trace_id))
    assert summary.cost_usd is None and " cost $" not in result.stdout


def test_demo_when_disabled_is_an_error_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDIAG_ENABLED", "false")
    path = tmp_path / "off" / "traces.db"
    result = invoke("demo", "--store", path)
    assert result.exit_code == 2
    assert_one_error_line(result.stderr)
    assert not path.exists()


def _unusable_store(case: str, tmp_path: Path) -> Path:
    if case == "parent is a file":
        blocker = tmp_path / "blocker"
        blocker.write_text("a regular file")
        return blocker / "traces.db"
    path = tmp_path / "app.db"
    if case == "garbage file":
        path.write_bytes(b"\x00\x01 definitely not sqlite \xfe\xff" * 200)
    else:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT)")
        conn.commit()
        conn.close()
    os.chmod(path, 0o600)
    return path


UNUSABLE_STORES = ["parent is a file", "garbage file", "foreign database"]


@pytest.mark.parametrize("case", UNUSABLE_STORES)
def test_demo_with_unusable_store_is_a_one_line_error(case: str, tmp_path: Path) -> None:
    path = _unusable_store(case, tmp_path)
    before = path.read_bytes() if path.exists() else None
    result = invoke("demo", "--store", path)
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.stderr)
    if before is not None:
        assert path.read_bytes() == before


@pytest.mark.parametrize("case", UNUSABLE_STORES)
def test_subprocess_demo_with_unusable_store_exits_2_without_traceback(case: str, tmp_path: Path) -> None:
    path = _unusable_store(case, tmp_path)
    proc = run_proc(tmp_path, "demo", "--store", path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("agentdiag: error:"), proc.stderr


# -- traces -------------------------------------------------------------------------------------------------


def test_traces_json_lists_summaries(demo_store: tuple[Path, str]) -> None:
    path, trace_id = demo_store
    result = invoke("traces", "--store", path, "--format", "json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    items = json.loads(result.stdout)
    assert isinstance(items, list)
    assert len(items) == 1
    item = items[0]
    assert set(item) == SUMMARY_KEYS
    assert item["trace_id"] == trace_id
    assert item["name"] == "invoke_agent trip-planner"
    parse_utc(item["start_time"])
    assert isinstance(item["duration_ms"], (int, float))
    assert item["duration_ms"] >= 0
    assert item["status"] in STATUSES
    assert isinstance(item["span_count"], int)
    assert item["span_count"] >= 8
    assert isinstance(item["session"], str)
    assert item["session"]


def test_traces_newest_first_after_two_demos(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    first = invoke("demo", "--store", path)
    second = invoke("demo", "--store", path)
    assert first.exit_code == 0
    assert second.exit_code == 0
    first_id, second_id = demo_trace_id(first.stdout), demo_trace_id(second.stdout)
    assert first_id != second_id

    items = json.loads(invoke("traces", "--store", path, "--format", "json").stdout)
    assert [i["trace_id"] for i in items] == [second_id, first_id]
    assert parse_utc(items[0]["start_time"]) >= parse_utc(items[1]["start_time"])

    limited = json.loads(invoke("traces", "--store", path, "--format", "json", "--limit", "1").stdout)
    assert [i["trace_id"] for i in limited] == [second_id]

    text = invoke("traces", "--store", path)
    assert text.exit_code == 0
    assert text.stdout.index(second_id) < text.stdout.index(first_id)
    assert text.stdout.count("invoke_agent trip-planner") == 2


def test_traces_on_empty_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    SpanStore(path).close()
    result = invoke("traces", "--store", path)
    assert result.exit_code == 0
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("no traces")
    as_json = invoke("traces", "--store", path, "--format", "json")
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout) == []


def test_traces_uses_agentdiag_store_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "from-env.db"
    SpanStore(path).close()
    monkeypatch.setenv("AGENTDIAG_STORE", str(path))
    result = invoke("traces")
    assert result.exit_code == 0
    assert str(path) in result.stdout


# -- show ---------------------------------------------------------------------------------------------------


def test_show_json_matches_the_contract(demo_store: tuple[Path, str]) -> None:
    path, trace_id = demo_store
    result = invoke("show", trace_id, "--store", path, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == {"trace_id", "spans", "cost_usd", "budget_exceeded", "budget_limits"}
    assert doc["trace_id"] == trace_id
    spans = doc["spans"]
    assert len(spans) >= 8

    for span in spans:
        assert set(span) == SPAN_KEYS
        assert re.fullmatch(r"[0-9a-f]{16}", span["span_id"])
        assert span["kind"] in KINDS
        assert span["status"] in STATUSES
        start, end = parse_utc(span["start_time"]), parse_utc(span["end_time"])
        assert end >= start
        assert isinstance(span["duration_ms"], (int, float))
        assert span["duration_ms"] >= 0
        assert isinstance(span["attributes"], dict)
        assert isinstance(span["events"], list)
        for event in span["events"]:
            assert set(event) == {"name", "attributes"}
            assert isinstance(event["attributes"], dict)

    assert sum(s["kind"] == "iteration" for s in spans) >= 3
    tools = [s for s in spans if s["kind"] == "tool"]
    assert len({s["attributes"]["gen_ai.tool.name"] for s in tools}) >= 2
    failed = [s for s in tools if s["status"] == "error"]
    assert len(failed) == 1
    assert [e["name"] for e in failed[0]["events"]] == ["exception"]
    exception_attributes = failed[0]["events"][0]["attributes"]
    assert "exception.type" in exception_attributes
    # The local policy keeps a keyed fingerprint of the message, never the message.
    assert set(exception_attributes) <= {"exception.type", "exception.escaped", "agentdiag.exception.fingerprint"}
    assert exception_attributes["agentdiag.exception.fingerprint"].startswith("hmac-sha256:")
    assert all(s["events"] == [] for s in spans if s is not failed[0])


def test_show_json_spans_form_one_tree_rooted_at_the_run(demo_store: tuple[Path, str]) -> None:
    path, trace_id = demo_store
    spans = json.loads(invoke("show", trace_id, "--store", path, "--format", "json").stdout)["spans"]
    by_id = {s["span_id"]: s for s in spans}
    assert len(by_id) == len(spans)
    roots = [s for s in spans if s["parent_span_id"] is None]
    assert len(roots) == 1
    root = roots[0]
    assert root["kind"] == "run"
    assert root["name"] == "invoke_agent trip-planner"
    for span in spans:
        seen = set()
        current = span
        while current["parent_span_id"] is not None:
            assert current["span_id"] not in seen, "cycle"
            seen.add(current["span_id"])
            current = by_id[current["parent_span_id"]]  # KeyError: a parent outside the trace
        assert current is root
    iterations = [s for s in spans if s["kind"] == "iteration"]
    assert all(s["parent_span_id"] == root["span_id"] for s in iterations)
    iteration_ids = {s["span_id"] for s in iterations}
    assert all(s["parent_span_id"] in iteration_ids for s in spans if s["kind"] in ("llm", "tool"))


def test_show_accepts_a_unique_prefix(demo_store: tuple[Path, str]) -> None:
    path, trace_id = demo_store
    for prefix in (trace_id[:4], trace_id[:12], trace_id[:12].upper()):
        result = invoke("show", prefix, "--store", path, "--format", "json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["trace_id"] == trace_id


def test_show_text_prints_the_tree(demo_store: tuple[Path, str]) -> None:
    path, trace_id = demo_store
    result = invoke("show", trace_id[:8], "--store", path)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"trace {trace_id}")
    assert "1 error" in lines[0]
    assert "invoke_agent trip-planner" in lines[1]
    check_demo_output(result.stdout, path)
    for index in range(3):
        assert f"agent.iteration #{index}" in result.stdout
    error_lines = [line for line in lines if "error=" in line]
    assert len(error_lines) == 1
    assert "execute_tool convert_currency" in error_lines[0]


def test_show_text_prints_rollups_and_the_stop_reason(demo_store: tuple[Path, str]) -> None:
    path, trace_id = demo_store
    conn = sqlite3.connect(path)
    conn.execute(
        """UPDATE spans SET attributes = json_set(attributes, '$."agentdiag.usage.input_tokens"', 88,
        '$."agentdiag.usage.output_tokens"', 21, '$."agentdiag.stop_reason"', 'max_turns')
        WHERE trace_id = ? AND kind = 'run'""",
        (trace_id,),
    )
    conn.commit()
    conn.close()
    result = invoke("show", trace_id, "--store", path)
    assert result.exit_code == 0, result.output
    (run,) = [line for line in result.stdout.splitlines() if "invoke_agent trip-planner" in line]
    assert "total in 88/out 21" in run and "stop=max_turns" in run
    # Roll-ups on the run and its iterations only: never on a leaf.
    rolled = [line for line in result.stdout.splitlines() if "total in" in line and line != run]
    assert rolled and all("agent.iteration #" in line for line in rolled)


def test_show_text_flags_a_corrupt_row(demo_store: tuple[Path, str]) -> None:
    path, trace_id = demo_store
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE spans SET attributes = '{broken' WHERE trace_id = ? AND name = 'execute_tool get_weather'",
        (trace_id,),
    )
    conn.commit()
    conn.close()

    result = invoke("show", trace_id, "--store", path)
    assert result.exit_code == 0
    broken = [line for line in result.stdout.splitlines() if "execute_tool get_weather" in line]
    assert len(broken) == 1
    assert "CORRUPT ROW" in broken[0]
    assert result.stdout.count("CORRUPT ROW") == 1
    assert result.stderr.strip() == "agentdiag: 1 stored span(s) could not be fully decoded"

    as_json = invoke("show", trace_id, "--store", path, "--format", "json")
    assert as_json.exit_code == 0
    spans = json.loads(as_json.stdout)["spans"]
    (tool,) = [s for s in spans if s["name"] == "execute_tool get_weather"]
    assert tool["attributes"] == {}
    assert tool["corrupt"] is True
    assert all("corrupt" not in s for s in spans if s is not tool)


# -- errors -------------------------------------------------------------------------------------------------


def _other_id(trace_id: str) -> str:
    return ("1" if trace_id[0] == "0" else "0") + trace_id[1:]


def _error_args(case: str, tmp_path: Path, store: Path, trace_id: str) -> list[str | Path]:
    if case == "missing store":
        return ["traces", "--store", tmp_path / "nowhere" / "traces.db"]
    if case == "missing store (show)":
        return ["show", trace_id, "--store", tmp_path / "nowhere" / "traces.db"]
    if case == "unknown trace id":
        return ["show", _other_id(trace_id), "--store", store]
    if case == "unknown prefix":
        return ["show", _other_id(trace_id)[:6], "--store", store]
    if case == "non-hex id":
        return ["show", "not-a-trace", "--store", store]
    if case == "missing argument":
        return ["show", "--store", store]
    if case == "garbage store":
        garbage = tmp_path / "garbage.db"
        garbage.write_bytes(b"\x00\x01 definitely not sqlite \xfe\xff" * 200)
        os.chmod(garbage, 0o600)
        return ["traces", "--store", garbage]
    if case == "newer store":
        newer = tmp_path / "newer.db"
        SpanStore(newer).close()
        conn = sqlite3.connect(newer)
        conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 'x')")
        conn.commit()
        conn.close()
        return ["traces", "--store", newer]
    if case == "store is a folder":
        folder = tmp_path / "folder.db"
        folder.mkdir()
        return ["traces", "--store", folder]
    if case == "unknown option":
        return ["traces", "--store", store, "--bogus"]
    if case == "bad format":
        return ["traces", "--store", store, "--format", "xml"]
    raise AssertionError(case)


ERROR_CASES = [
    "missing store",
    "missing store (show)",
    "unknown trace id",
    "unknown prefix",
    "non-hex id",
    "missing argument",
    "garbage store",
    "newer store",
    "store is a folder",
    "unknown option",
    "bad format",
]


@pytest.mark.parametrize("case", ERROR_CASES)
def test_errors_are_one_line_and_exit_2(case: str, tmp_path: Path, demo_store: tuple[Path, str]) -> None:
    store, trace_id = demo_store
    result = invoke(*_error_args(case, tmp_path, store, trace_id))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    line = assert_one_error_line(result.stderr)
    if case.startswith("missing store"):
        assert "no trace store" in line
        assert not (tmp_path / "nowhere").exists()
    if case == "newer store":
        assert "newer" in line


# -- version ------------------------------------------------------------------------------------------------


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"agentdiag, version {__version__}"


# -- privacy ------------------------------------------------------------------------------------------------


def test_demo_stores_no_raw_user_id_prompt_or_tool_arguments(tmp_path: Path) -> None:
    path = tmp_path / "private" / "traces.db"
    result = invoke("demo", "--store", path)
    assert result.exit_code == 0
    files = [p for p in (path, Path(f"{path}-wal")) if p.exists()]
    assert path in files
    data = b"".join(p.read_bytes() for p in files)
    assert b"gen_ai.tool.name" in data  # the spans really are in these bytes
    for secret in (b"demo-user@example.com", b"Plan a day in Lisbon", b"EURO"):
        assert secret not in data, secret


# -- real processes -----------------------------------------------------------------------------------------


def test_subprocess_demo_uses_default_store_in_cwd(tmp_path: Path) -> None:
    proc = run_proc(tmp_path, "demo")
    assert proc.returncode == 0, proc.stderr
    default = tmp_path / ".agentdiag" / "traces.db"
    check_demo_output(proc.stdout, default)
    trace_id = demo_trace_id(proc.stdout)
    assert (os.stat(default.parent).st_mode & 0o777) == 0o700
    assert (os.stat(default).st_mode & 0o777) == 0o600

    listed = run_proc(tmp_path, "traces", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert [i["trace_id"] for i in json.loads(listed.stdout)] == [trace_id]

    shown = run_proc(tmp_path, "show", trace_id[:10], "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["trace_id"] == trace_id


@pytest.mark.parametrize("case", ERROR_CASES)
def test_subprocess_errors_are_one_line_and_exit_2(case: str, tmp_path: Path, demo_store: tuple[Path, str]) -> None:
    store, trace_id = demo_store
    proc = run_proc(tmp_path, *_error_args(case, tmp_path, store, trace_id))
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert_one_error_line(proc.stderr)


def test_subprocess_error_on_foreign_database_is_one_line_and_leaves_it_alone(tmp_path: Path) -> None:
    """``--store`` pointed at some other application's (world-readable) SQLite file."""
    app_db = tmp_path / "app.db"
    conn = sqlite3.connect(app_db)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT)")
    conn.commit()
    conn.close()
    os.chmod(app_db, 0o644)

    proc = run_proc(tmp_path, "traces", "--store", app_db)
    assert proc.returncode == 2
    line = assert_one_error_line(proc.stderr)
    assert "not an otel-agentdiag store" in line
    assert (os.stat(app_db).st_mode & 0o777) == 0o644


def test_subprocess_version() -> None:
    proc = run_proc(Path.cwd(), "--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"agentdiag, version {__version__}"
    assert proc.stderr == ""


def test_installed_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "agentdiag"
    if not script.exists():
        pytest.skip(f"no console script at {script}")
    version = run_proc(tmp_path, "--version", program=[str(script)])
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"agentdiag, version {__version__}"

    store = tmp_path / "script" / "traces.db"
    demo = run_proc(tmp_path, "demo", "--store", store, program=[str(script)])
    assert demo.returncode == 0, demo.stderr
    check_demo_output(demo.stdout, store)

    missing = run_proc(tmp_path, "traces", "--store", tmp_path / "missing.db", program=[str(script)])
    assert missing.returncode == 2
    assert_one_error_line(missing.stderr)


def test_a_store_damaged_after_opening_is_a_one_line_error(tmp_path: Path) -> None:
    """Schema and migrations intact, but the pages holding the spans table are overwritten."""
    path = tmp_path / "damaged.db"
    assert invoke("demo", "--store", path).exit_code == 0
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = [row[0] for row in conn.execute("SELECT pageno FROM dbstat WHERE name = 'spans'")]
    conn.close()
    assert pages
    data = bytearray(path.read_bytes())
    for page in pages:
        start = (page - 1) * page_size
        data[start : start + page_size] = b"\xa5" * page_size
    path.write_bytes(bytes(data))

    for args in (("traces",), ("traces", "--format", "json")):
        result = invoke(*args, "--store", path)
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("agentdiag: error: the trace store cannot be read")
