"""Ingesting the same file twice changes nothing; a different span under stored ids is still a duplicate."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from otel_agentdiag.cli import cli
from otel_agentdiag.storage import SpanStore

FIXTURES = Path(__file__).parent.parent / "interchange" / "fixtures"
FOREIGN = FIXTURES / "foreign_sentinels.otlp.json"  # spans that claim no observer: numbered by the ingest


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("AGENTDIAG_", "OTEL_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def views(store: Path) -> dict[str, str]:
    """What a user reads about the store: every reading command, text and JSON."""
    out: dict[str, str] = {}
    with SpanStore(store, create=False) as opened:
        out["spans"] = str(opened.span_count())
        sessions = [s.session for s in opened.list_sessions() if s.session]
    for command in (["sessions"], ["status"], ["receipt"], *(["receipt", "--session", s] for s in sessions)):
        for output in ("text", "json"):
            result = invoke(*command, "--format", output, "--store", store)
            assert result.exit_code == 0, result.output
            out[" ".join([*command, output])] = result.stdout
    return out


def exported_demo(tmp_path: Path) -> Path:
    source = tmp_path / "demo" / "traces.db"
    assert invoke("demo", "--store", source).exit_code == 0
    out = tmp_path / "demo.otlp.jsonl"
    exported = invoke("export", "--out", out, "--format", "otlp-json", "--store", source)
    assert exported.exit_code == 0, exported.output
    return out


@pytest.mark.parametrize("kind", ["exported", "foreign"])
def test_a_second_ingest_of_the_same_file_changes_nothing(tmp_path: Path, kind: str) -> None:
    file = exported_demo(tmp_path) if kind == "exported" else FOREIGN
    store = tmp_path / "copy" / "traces.db"
    first = invoke("ingest", file, "--store", store, "--max-session-age", "none", "--format", "json")
    assert first.exit_code == 0, first.output
    before = views(store)
    assert int(before["spans"]) == json.loads(first.stdout)["inserted"] > 0

    second = invoke("ingest", file, "--store", store, "--max-session-age", "none", "--format", "json")
    assert second.exit_code == 0, second.output
    summary = json.loads(second.stdout)
    assert (summary["inserted"], summary["duplicates"]) == (0, int(before["spans"]))  # all already stored
    assert views(store) == before  # byte for byte, every view
    assert summary["unchanged"] == summary["duplicates"]


def test_a_different_span_under_stored_ids_is_still_a_duplicate(tmp_path: Path) -> None:
    file = exported_demo(tmp_path)
    store = tmp_path / "copy" / "traces.db"
    assert invoke("ingest", file, "--store", store).exit_code == 0
    assert json.loads(invoke("receipt", "--format", "json", "--store", store).stdout)["status"] == "imported"
    # One span of the file changed (its end time), its ids kept: not the span the store holds.
    lines = file.read_text().splitlines()
    doc = json.loads(lines[0])
    resource_spans = doc["resourceSpans"][0]
    scope_spans = resource_spans["scopeSpans"][0]
    span = scope_spans["spans"][0]
    span["endTimeUnixNano"] = str(int(span["endTimeUnixNano"]) + 1)
    scope_spans["spans"] = [span]
    resource_spans["scopeSpans"] = [scope_spans]
    doc["resourceSpans"] = [resource_spans]
    changed = tmp_path / "changed.otlp.jsonl"
    changed.write_text(json.dumps(doc) + "\n")

    result = invoke("ingest", changed, "--store", store, "--format", "json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["inserted"], summary["duplicates"]) == (0, 1)
    receipt = json.loads(invoke("receipt", "--format", "json", "--store", store).stdout)
    assert receipt["status"] == "degraded" and receipt["reasons"] == ["duplicate_sequence", "imported"]
    assert receipt["counts"]["duplicate_sequences"] == 1
    assert summary["unchanged"] == 0
