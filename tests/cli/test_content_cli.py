"""``agentdiag demo --capture-content``, ``agentdiag show --content`` and ``agentdiag clear`` with captured content."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli
from otel_agentdiag.cli._render import FOLD_STRING
from otel_agentdiag.storage import SpanStore

TRACE_HEADER = re.compile(r"^trace ([0-9a-f]{32})", re.MULTILINE)


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("OTEL_", "AGENTDIAG_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def captured(tmp_path: Path) -> tuple[Path, str, str]:
    """A demo run with content captured: store path, trace id, the demo's output."""
    path = tmp_path / "demo" / "traces.db"
    result = invoke("demo", "--capture-content", "--store", path)
    assert result.exit_code == 0, result.output
    (trace_id,) = TRACE_HEADER.findall(result.stdout)
    return path, trace_id, result.stdout


def content_count(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM span_content").fetchone()[0])
    finally:
        conn.close()


def test_demo_with_capture_shows_prompts_and_tool_arguments_under_the_spans(captured: tuple[Path, str, str]) -> None:
    path, _trace_id, out = captured
    lines = out.splitlines()
    llm = next(i for i, line in enumerate(lines) if "chat demo-model-1" in line)
    # Under the first model call: its system prompt and the user's prompt.
    below = "\n".join(lines[llm + 1 : llm + 30])
    assert "system_instructions:" in below and "You plan day trips" in below
    assert "Plan a day in Lisbon on a 120 USD budget" in below
    tool = next(i for i, line in enumerate(lines) if "execute_tool get_weather" in line)
    assert "tool.call.arguments:" in lines[tool + 1] and '"Lisbon"' in "\n".join(lines[tool + 1 : tool + 6])
    # The failing call's exception is the tool's result.
    assert '"$exception"' in out and "unknown currency code" in out
    assert "never leaves this file" in out
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert content_count(path) > 10


def test_demo_without_capture_keeps_no_content(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    result = invoke("demo", "--store", path)
    assert result.exit_code == 0
    assert "system_instructions:" not in result.stdout
    assert content_count(path) == 0


def test_show_content_json_is_the_whole_projection(captured: tuple[Path, str, str]) -> None:
    path, trace_id, _out = captured
    result = invoke("show", trace_id, "--content", "--format", "json", "--store", path)
    assert result.exit_code == 0, result.output
    spans = json.loads(result.stdout)["spans"]
    llm = [s for s in spans if s["kind"] == "llm"]
    first = llm[0]["content"]
    assert first[sc.CONTENT_INPUT_MESSAGES] == [
        {"role": "user", "content": "Plan a day in Lisbon on a 120 USD budget; what is that in euros?"}
    ]
    assert first[sc.CONTENT_OUTPUT_MESSAGES][0]["tool_calls"][0]["arguments"] == {"city": "Lisbon"}
    # Each model call saw the transcript as it was then: one message more per tool round.
    lengths = [len(s["content"][sc.CONTENT_INPUT_MESSAGES]) for s in llm]
    assert lengths == sorted(lengths) and lengths[0] == 1 and lengths[-1] > 3
    tools = [s for s in spans if s["kind"] == "tool"]
    assert all(sc.CONTENT_TOOL_ARGUMENTS in s["content"] for s in tools)
    # Without --content the JSON contract is unchanged.
    plain = json.loads(invoke("show", trace_id, "--format", "json", "--store", path).stdout)
    assert all("content" not in s for s in plain["spans"])


def test_show_folds_long_values_in_text_only(tmp_path: Path) -> None:
    import otel_agentdiag as agentdiag

    path = tmp_path / "long.db"
    long_text = "word " * 400
    with agentdiag.configure(store=path, set_global=False, capture_content=True):
        with agentdiag.llm_call(provider="openai", model="m") as call:
            call.record_content(input_messages=[long_text] + [f"message {i}" for i in range(29)])
    with SpanStore(path, create=False) as store:
        (trace,) = store.list_traces()
    text = invoke("show", trace.trace_id, "--content", "--store", path).stdout
    assert f"… (+{len(long_text) - FOLD_STRING} chars)" in text
    assert "… (+18 items)" in text
    assert long_text not in text
    whole = json.loads(invoke("show", trace.trace_id, "--content", "--format", "json", "--store", path).stdout)
    shown = whole["spans"][0]["content"][sc.CONTENT_INPUT_MESSAGES]
    assert shown[0] == long_text and shown[29] == "message 28"


def test_show_content_on_a_trace_without_content_says_so(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    result = invoke("demo", "--store", path)
    (trace_id,) = TRACE_HEADER.findall(result.stdout)
    shown = invoke("show", trace_id, "--content", "--store", path)
    assert shown.exit_code == 0
    assert "no content was captured for this trace" in shown.stderr


def test_an_undecodable_value_is_reported_and_the_rest_shown(captured: tuple[Path, str, str]) -> None:
    path, trace_id, _out = captured
    conn = sqlite3.connect(path)
    try:
        conn.execute("UPDATE span_content SET lossless = X'00FF' WHERE id = (SELECT min(id) FROM span_content)")
        conn.commit()
    finally:
        conn.close()
    result = invoke("show", trace_id, "--content", "--format", "json", "--store", path)
    assert result.exit_code == 0
    assert result.stderr.strip() == "agentdiag: 1 captured value(s) could not be decoded"
    values = [v for s in json.loads(result.stdout)["spans"] for v in s.get("content", {}).values()]
    assert values.count({"$unreadable": True}) == 1 and len(values) == content_count(path)


def test_clear_removes_the_sessions_content(captured: tuple[Path, str, str]) -> None:
    path, _trace_id, _out = captured
    with SpanStore(path, create=False) as store:
        session = store.latest_session()
    assert session is not None and content_count(path) > 0
    result = invoke("clear", "--session", session, "--yes", "--store", path)
    assert result.exit_code == 0, result.output
    assert content_count(path) == 0


def test_doctor_says_whether_content_is_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    assert json.loads(invoke("doctor", "--format", "json").stdout)["configuration"]["capture_content"] is False
    assert "content        not captured" in invoke("doctor").stdout
    monkeypatch.setenv("AGENTDIAG_CAPTURE_CONTENT", "true")
    assert json.loads(invoke("doctor", "--format", "json").stdout)["configuration"]["capture_content"] is True
    assert "captured into the local store only" in invoke("doctor").stdout
