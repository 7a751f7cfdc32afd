"""After ``agentdiag clear``, ``sessions``, ``receipt --session`` and ``receipt`` tell one story about the session."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from otel_agentdiag.cli import cli


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("AGENTDIAG_", "OTEL_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def run(*args: str | Path) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def run_json(*args: str | Path) -> Any:
    return json.loads(run(*args, "--format", "json"))


def test_a_cleared_session_has_one_verdict_everywhere(tmp_path: Path) -> None:
    store = tmp_path / "s" / "traces.db"
    run("demo", "--store", store)
    run("demo", "--store", store)
    cleared, kept = (row["session"] for row in run_json("sessions", "--store", store))
    run("clear", "--session", cleared, "--yes", "--store", store)

    listed = {row["session"]: row["receipt_status"] for row in run_json("sessions", "--store", store)}
    for session, status in listed.items():  # every session: the list and its own receipt agree
        assert run_json("receipt", "--session", session, "--store", store)["status"] == status, session

    # The truth about a cleared session: nothing is left to vouch for, so its receipt is "invalid" for
    # no_observations alone, while its ledger accounts for every span it had (all stored, all cleared on request).
    own = run_json("receipt", "--session", cleared, "--store", store)
    assert (own["status"], own["reasons"]) == ("invalid", ["no_observations"])
    counts = own["counts"]
    assert counts["spans"] == 0 and counts["stored"] == counts["cleared_spans"] == 12
    assert counts["observed"] == counts["accepted"] == 12
    assert listed == {cleared: "invalid", kept: "valid"}
    # ... and every view says why, and that the store's verdict leaves it out (which is why the store is valid).
    assert "(nothing to judge: every span of it was cleared on request" in run(
        "receipt", "--session", cleared, "--store", store
    )
    store_text = run("receipt", "--store", store)
    assert store_text.startswith(f"receipt for the store {store}: valid")
    assert "not judged: 1 session(s) with nothing left to judge (cleared or pruned)" in store_text
    rows = run("sessions", "--store", store).splitlines()[1:]
    assert rows[0].endswith("  valid")
    assert rows[1].endswith("  invalid (nothing to judge: cleared)")
