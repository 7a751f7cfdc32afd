"""``agentdiag sessions --limit N --since DURATION``: the newest sessions only, in the order of the full list."""

from __future__ import annotations

import json
import time
from pathlib import Path

from click.testing import CliRunner, Result

from otel_agentdiag.cli import cli
from otel_agentdiag.storage import Accounting, SpanRow, SpanStore

OBSERVER = "0123456789abcdef"
HOUR = 3600 * 10**9


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def session_row(n: int, start_ns: int) -> SpanRow:
    return SpanRow(
        trace_id=f"{n:032x}",
        span_id=f"{n:016x}",
        parent_span_id=None,
        name="invoke_agent",
        kind="run",
        span_kind="internal",
        start_ns=start_ns,
        end_ns=start_ns + 1000,
        status="ok",
        session=f"sess-{n}",
        attributes={},
        events=[],
        links=[],
        resource={"service.name": "t"},
        scope=None,
        observer=OBSERVER,
        sequence=0,
    )


def make_store(path: Path) -> list[str]:
    """Five sessions, one span each: sess-1 two days old, the others minutes apart within the last hour."""
    now = time.time_ns()
    starts = {1: now - 48 * HOUR, 2: now - HOUR // 2, 3: now - HOUR // 3, 4: now - HOUR // 4, 5: now - HOUR // 5}
    with SpanStore(path) as store:
        for n, start in starts.items():
            store.write_batch([session_row(n, start)], Accounting(observer=OBSERVER))
    return [f"sess-{n}" for n in (5, 4, 3, 2, 1)]


def listed(*args: str | Path) -> list[dict[str, object]]:
    result = invoke("sessions", "--format", "json", *args)
    assert result.exit_code == 0, result.output
    rows: list[dict[str, object]] = json.loads(result.stdout)
    return rows


def test_sessions_limit_and_since(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    newest_first = make_store(path)
    everything = listed("--store", path)
    assert [r["session"] for r in everything] == newest_first
    assert all(r["receipt_status"] == "valid" for r in everything)
    assert listed("--limit", "2", "--store", path) == everything[:2]
    assert listed("--since", "1h", "--store", path) == everything[:4]
    assert listed("--since", "1h", "--limit", "3", "--store", path) == everything[:3]
    assert listed("--since", "3d", "--store", path) == everything
    text = invoke("sessions", "--limit", "1", "--store", path)
    assert text.exit_code == 0 and "sess-5" in text.stdout and "sess-4" not in text.stdout


def test_sessions_limit_and_since_refuse_bad_values(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    make_store(path)
    for args in (("--limit", "0"), ("--limit", "x"), ("--since", "soon"), ("--since", "-1h")):
        result = invoke("sessions", *args, "--store", path)
        assert result.exit_code == 2, result.output
