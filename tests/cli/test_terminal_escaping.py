"""What the CLI prints of stored strings cannot act on the terminal: controls, bidi and format characters escaped.

Captured content is stored as the agent had it (hidden characters included: content is not a kept attribute), so
``agentdiag show --content`` is where a hostile prompt or tool result meets the terminal. The store is a real
one, written by ``configure()``; the CLI runs in-process with ``CliRunner``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

import otel_agentdiag as agentdiag
from otel_agentdiag.cli import cli
from otel_agentdiag.cli._common import json_text, printable
from otel_agentdiag.cli._render import render_traces_table, render_tree
from otel_agentdiag.storage import SpanStore

HOSTILE = {
    "C1 CSI": "\x9b31m",
    "NEL": "a\x85b",
    "ESC": "\x1b]0;title\x07",
    "RLO": "abc\u202edcba",
    "RLI": "x\u2067y\u2069",
    "LRM": "l\u200em",
    "ZWSP": "zero\u200bwidth",
    "BOM": "\ufeffbom",
    "tag": "tag\U000e0041\U000e0042",
    "line separator": "one\u2028two",
    "ALM": "a\u061cb",
    "DEL": "del\x7f",
}
DANGEROUS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\U000e0000-\U000e007f]"
)
"""What must never reach the terminal raw (tab and line feed are the output's own layout; ESC only from our colours,
and the runner below prints none)."""


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("OTEL_", "AGENTDIAG_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, color=False)


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "t.db"
    handle = agentdiag.configure(store=path, hash_key=secrets.token_hex(32), capture_content=True, set_global=False)
    try:
        with agentdiag.agent_run("escape-agent"):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.record_content(
                    input_messages=[{"role": "user", "content": text} for text in HOSTILE.values()],
                    output_messages=[{"role": "assistant", "content": "\u202eevil", "\x9bkey": "v"}],
                )
            with agentdiag.tool_call("get_weather", arguments={"city": "Lis\u202ebon", "\u2066": "\x85"}) as tool:
                tool.record_result("done\x1b[2J")
    finally:
        handle.shutdown()
    with SpanStore(path, create=False) as opened:
        (summary,) = opened.list_traces()
    return path, summary.trace_id


def test_show_content_escapes_c1_bidi_and_format_characters(store: tuple[Path, str]) -> None:
    path, trace_id = store
    result = invoke("show", trace_id, "--content", "--store", path)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "tool.call.arguments:" in out  # the content is really shown
    assert DANGEROUS.search(out) is None, repr(DANGEROUS.search(out))
    for escape in ("\\x9b", "\\x85", "\\u202e", "\\u2067", "\\u200b", "\\ufeff", "\\U000e0041", "\\u2028", "\\x7f"):
        assert escape in out, escape
    assert "abc\\u202edcba" in out  # the visible text around an escape stays as it was


def test_show_json_escapes_them_as_json_and_keeps_the_values(store: tuple[Path, str]) -> None:
    path, trace_id = store
    result = invoke("show", trace_id, "--content", "--format", "json", "--store", path)
    assert result.exit_code == 0
    raw = re.compile("[\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\U000e0000-\U000e007f]")
    assert raw.search(result.stdout) is None
    document = json.loads(result.stdout)
    texts = json.dumps(document, ensure_ascii=False)
    for text in HOSTILE.values():  # the same values, only written with escapes
        assert json.dumps(text, ensure_ascii=False)[1:-1] in texts


def test_printable_and_json_text() -> None:
    for text in HOSTILE.values():
        shown = printable(text)
        assert shown.isprintable(), repr(shown)
        assert json.loads(json_text(text)) == text
        assert DANGEROUS.search(json_text(text)) is None
    assert printable("gpt-4o-mini") == "gpt-4o-mini"
    assert printable("Zoë 日本") == "Zoë 日本"
    assert printable(42) == "42"


def test_tree_and_table_escape_stored_names(store: tuple[Path, str]) -> None:
    """Span names and attribute values in the tree and the table (a store written by another version, or a file
    ingested before this check, may hold them)."""
    path, trace_id = store
    with SpanStore(path, create=False) as opened:
        spans = opened.get_trace(trace_id)
        summaries = opened.list_traces()
    changed = {"error.type": "E\u2066"}
    hostile = [
        dataclasses.replace(span, name=span.name + "\u202e\x9b", attributes={**span.attributes, **changed})
        for span in spans
    ]
    summaries = [dataclasses.replace(summary, name=summary.name + "\u202e") for summary in summaries]
    lines = render_tree(trace_id, hostile) + render_traces_table(summaries)
    text = click.unstyle("\n".join(lines))  # our own colours are the only escapes: take them away first
    assert DANGEROUS.search(text) is None
    assert "\\u202e" in text and "\\u2066" in text
