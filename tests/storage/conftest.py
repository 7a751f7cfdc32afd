"""Storage tests: after every test, the ledger of every store it left in ``tmp_path`` must hold."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_helpers import check_ledger

from otel_agentdiag.storage.migrations import APPLICATION_ID


def _is_v2_store(path: Path) -> bool:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        (app_id,) = conn.execute("PRAGMA application_id").fetchone()
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'session_stats'").fetchone()
        return app_id == APPLICATION_ID and found is not None
    except sqlite3.Error:
        return False
    finally:
        conn.close()


@pytest.fixture(autouse=True)
def _ledger_holds_after_each_test(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """``LEDGER_CHECK`` in a test module: "full" (default), "no-sizes" (rows were edited by hand) or "off"."""
    yield
    mode = getattr(request.module, "LEDGER_CHECK", "full")
    if mode == "off":
        return
    for path in sorted(tmp_path.rglob("*.db")):
        if _is_v2_store(path):
            check_ledger(path, sizes=mode == "full")
