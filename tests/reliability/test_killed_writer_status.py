"""``agentdiag status`` after a killed writer: a run whose children were stored but which never ended is never
``finished``, whether the numbering shows the open run (a real SIGKILL) or cannot (rows whose parent is absent
and whose numbers are complete), and no imported span can supply the missing parent."""

from __future__ import annotations

import json
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from process_support import HASH_KEY, call_main, child, digest

from otel_agentdiag.cli import cli
from otel_agentdiag.storage import Accounting, SpanRow, SpanStore

OBSERVER = "0123456789abcdef"
TRACE = "5b8efff798038103d269b633813fc60c"
SESSION = "hmac-sha256:00000000:" + "ab" * 32


def status_json(store: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        cli, ["status", "--store", str(store), "--format", "json", "--with-receipt", *args], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def status_text(store: Path) -> str:
    result = CliRunner().invoke(cli, ["status", "--store", str(store)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


# -- a real writer, killed mid-run ------------------------------------------------------------------------------
def _killed_mid_run(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    path = tmp_path / "traces.db"
    with child(call_main("crash_child"), str(path), "killed-run", "0", stderr_path=tmp_path / "stderr") as proc:
        start = proc.line()
        assert start is not None and start["event"] == "start", proc.stderr()
        for _ in range(3):  # three steps flushed: their spans are committed, the run span is still open
            flushed = proc.line()
            assert flushed is not None and flushed["ok"] is True, flushed
        assert proc.kill() == -signal.SIGKILL
    return path, start


def test_status_after_sigkill_mid_run_is_unfinished(tmp_path: Path) -> None:
    path, start = _killed_mid_run(tmp_path)
    with SpanStore(path, create=False) as store:
        spans = store.session_spans(digest("killed-run"))
    assert spans and start["run"] not in {s.span_id for s in spans}  # the run never ended: not stored
    assert start["run"] in {s.parent_span_id for s in spans}  # its children were
    doc = status_json(path)
    assert doc["session"] == digest("killed-run")
    assert doc["stage"] != "finished" and doc["active"] is True
    assert doc["receipt"]["counts"]["unfinished_spans"] >= 1
    assert "finished" not in status_text(path).splitlines()[1].replace("unfinished", "")


def test_a_forged_span_with_the_open_runs_ids_does_not_finish_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's span id is public (its children name it): an imported span with those ids, ended, in the same
    session and trace, is filed as imported and explains nothing away."""
    path, start = _killed_mid_run(tmp_path)
    session = digest("killed-run")
    before = status_json(path, "--session", session, "--as-of", "2031-01-01T00:00:00Z")
    with SpanStore(path, create=False) as store:
        trace_id = store.session_spans(session)[0].trace_id
    now = time.time_ns()
    forged = {
        "resourceSpans": [
            {
                "resource": {},
                "scopeSpans": [
                    {
                        "scope": {"name": "otel_agentdiag"},
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": start["run"],
                                "name": "invoke_agent process-agent",
                                "kind": 1,
                                "startTimeUnixNano": str(now - 10_000),
                                "endTimeUnixNano": str(now),
                                "attributes": [
                                    {"key": "agentdiag.kind", "value": {"stringValue": "run"}},
                                    {"key": "gen_ai.conversation.id", "value": {"stringValue": session}},
                                    {"key": "agentdiag.observer.id", "value": {"stringValue": start["observer"]}},
                                    {"key": "agentdiag.sequence", "value": {"intValue": "0"}},
                                ],
                                "status": {"code": 1},
                            }
                        ],
                    }
                ],
            }
        ]
    }
    file = tmp_path / "forged.jsonl"
    file.write_text(json.dumps(forged) + "\n")
    monkeypatch.setenv("AGENTDIAG_HASH_KEY", HASH_KEY.decode())
    ingested = CliRunner().invoke(cli, ["ingest", str(file), "--store", str(path)], catch_exceptions=False)
    assert ingested.exit_code == 0, ingested.output
    after = status_json(path, "--session", session, "--as-of", "2031-01-01T00:00:00Z")
    assert after == before and after["active"] is True
    with SpanStore(path, create=False) as store:
        assert [s.span_id for s in store.session_spans(f"imported:{session}")] == [start["run"]]


# -- rows whose parent is absent ----------------------------------------------------------------------------------
def _row(i: int, parent: int | None, kind: str, *, span_kind: str = "internal", session: str = SESSION) -> SpanRow:
    start = time.time_ns() - 10**9 + i * 1000
    return SpanRow(
        trace_id=TRACE,
        span_id=f"{i:016x}",
        parent_span_id=None if parent is None else f"{parent:016x}",
        name=f"{kind} {i}",
        kind=kind,
        span_kind=span_kind,
        start_ns=start,
        end_ns=start + 500,
        status="ok",
        session=session,
        attributes={"agentdiag.kind": kind},
        events=[],
        links=[],
        resource={"service.name": "t"},
        scope=None,
        observer=OBSERVER,
        sequence=i,
    )


def _store(tmp_path: Path, rows: list[SpanRow]) -> Path:
    """The rows numbered 0, 1, 2, ... in the order given (complete numbers), in one write."""
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch([replace(r, sequence=n) for n, r in enumerate(rows)], Accounting(observer=OBSERVER))
    return path


def test_children_of_an_absent_parent_with_complete_numbers_are_unfinished(tmp_path: Path) -> None:
    # An iteration, its LLM and tool calls, numbered 0..2 without a gap: the run they belong to (99) never
    # arrived, and nothing in the numbering shows it (it was numbered elsewhere, or not at all).
    path = _store(tmp_path, [_row(1, 99, "iteration"), _row(2, 1, "llm"), _row(3, 1, "tool")])
    doc = status_json(path)
    assert doc["receipt"]["status"] == "valid"  # nothing is missing from what the pipeline numbered
    assert (doc["stage"], doc["active"]) == ("unfinished", False)
    assert "stage: unfinished" in status_text(path)


def test_a_dropped_run_is_not_finished_either(tmp_path: Path) -> None:
    """The run's number was lost to a counted drop: it may have ended, or not; the status does not guess."""
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch(
            [_row(1, 0, "iteration"), _row(2, 1, "llm")],
            Accounting(observer=OBSERVER, dropped={SESSION: {"queue_full": 1}}),
        )
    doc = status_json(path)
    assert doc["receipt"]["reasons"] == ["backpressure_drop"]
    assert doc["stage"] == "unfinished"


@pytest.mark.parametrize(
    ("top", "stage"),
    [
        (_row(1, 99, "run"), "finished"),  # an agent run called from elsewhere (a remote parent)
        (_row(1, 99, "other", span_kind="server"), "finished"),  # a request that came in
        (_row(1, None, "run"), "finished"),
    ],
)
def test_work_whose_top_is_stored_and_ended_is_finished(tmp_path: Path, top: SpanRow, stage: str) -> None:
    path = _store(tmp_path, [top, _row(2, 1, "iteration"), _row(3, 2, "llm")])
    assert status_json(path)["stage"] == stage


def test_a_parent_stored_in_another_session_of_the_trace_is_not_missing(tmp_path: Path) -> None:
    outside = _row(0, None, "other", session="hmac-sha256:00000000:" + "cd" * 32)
    path = _store(tmp_path, [outside, _row(1, 0, "iteration"), _row(2, 1, "llm")])
    assert status_json(path, "--session", SESSION)["stage"] == "finished"
