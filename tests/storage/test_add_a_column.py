"""Adding a column to ``spans`` is a two-file change: a field on ``SpanRow`` and a migration.

The test makes that change for real, on a copy of the package (``storage/rows.py`` gets the field,
``storage/migrations.py`` the migration, nothing else), and checks in a fresh interpreter that the writer stores the
value, every reader decodes it, and a store of the current version is upgraded in place, its old rows reading the
column's default.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import otel_agentdiag
from otel_agentdiag.storage.migrations import LATEST_VERSION

PACKAGE = Path(otel_agentdiag.__file__).parent

FIELD = '''    sequence: int | None = None
    """``agentdiag.sequence``: the span's number within (observer, session), from 0 (None: not numbered)."""
'''
NEW_FIELD = (
    FIELD
    + '''    tenant: str | None = None
    """A column added by tests/storage/test_add_a_column.py."""
'''
)

SCRIPT = """
import sys, time
from otel_agentdiag.storage import SpanStore
from otel_agentdiag.storage.migrations import LATEST_VERSION
from otel_agentdiag.storage.rows import SpanRow

path, old_trace, expected_version = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = SpanStore(path)
row = SpanRow(
    trace_id="b" * 32, span_id="2" * 16, parent_span_id=None, name="run", kind="run", span_kind="internal",
    start_ns=time.time_ns(), end_ns=time.time_ns(), status="ok", session="s", attributes={"k": "v"},
    events=[], links=[],
    resource={"service.name": "t"}, scope=None, observer="o", sequence=0, tenant="acme",
)
store.write_batch([row])
(new,) = store.get_trace("b" * 32)
(old,) = store.get_trace(old_trace)
assert LATEST_VERSION == expected_version, LATEST_VERSION
assert new.tenant == "acme", new
assert old.tenant is None, old
assert not new.corrupt and new.attributes == {"k": "v"}
store.close()
print("ok")
"""


def _old_store(path: Path) -> str:
    """A store written by the package as it is (version LATEST_VERSION), holding one span."""
    from otel_agentdiag.storage import SpanStore
    from otel_agentdiag.storage.rows import SpanRow

    now = time.time_ns()  # retention keeps recent spans only

    trace = "a" * 32
    store = SpanStore(path)
    store.write_batch(
        [
            SpanRow(
                trace_id=trace,
                span_id="1" * 16,
                parent_span_id=None,
                name="run",
                kind="run",
                span_kind="internal",
                start_ns=now,
                end_ns=now + 1,
                status="ok",
                session="s",
                attributes={},
                events=[],
                links=[],
                resource={"service.name": "t"},
                scope=None,
                observer="o",
                sequence=0,
            )
        ]
    )
    store.close()
    return trace


def test_a_field_and_a_migration_are_the_whole_change(tmp_path: Path) -> None:
    copy = tmp_path / "pkg" / "otel_agentdiag"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))

    rows = copy / "storage" / "rows.py"
    text = rows.read_text(encoding="utf-8")
    assert text.count(FIELD) == 1
    rows.write_text(text.replace(FIELD, NEW_FIELD), encoding="utf-8")

    migrations = copy / "storage" / "migrations.py"
    text = migrations.read_text(encoding="utf-8")
    end = "\n)\n\nLATEST_VERSION = MIGRATIONS[-1].version"
    assert text.count(end) == 1
    step = f'    Migration({LATEST_VERSION + 1}, "tenant", ("ALTER TABLE spans ADD COLUMN tenant TEXT",)),'
    migrations.write_text(text.replace(end, f"\n{step}{end}"), encoding="utf-8")

    store = tmp_path / "traces.db"
    old_trace = _old_store(store)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(store), old_trace, str(LATEST_VERSION + 1)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={"PYTHONPATH": str(copy.parent), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
