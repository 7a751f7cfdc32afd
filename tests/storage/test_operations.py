"""The ``operations`` summary (migration 11): kept by the writer, backfilled when an older store is upgraded."""

from __future__ import annotations

from pathlib import Path

import otel_agentdiag as agentdiag
from otel_agentdiag.storage import SpanStore
from otel_agentdiag.storage.operations import SERVICE_SQL

FROM_ROWS = (
    f"SELECT DISTINCT {SERVICE_SQL}, s.name, s.span_kind FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
)


def write(path: Path, service: str) -> None:
    agentdiag.register_names(tools=["lookup"], agents=["ops-agent"])
    with agentdiag.configure(store=path, service_name=service, set_global=False):
        with agentdiag.agent_run("ops-agent"):
            with agentdiag.llm_call(provider="fake", model="fake-1"):
                pass
            with agentdiag.tool_call("lookup"):
                pass


def table(store: SpanStore) -> set[tuple[str, str, str]]:
    return set(store._conn.execute("SELECT service, name, span_kind FROM operations").fetchall())


def test_the_writer_keeps_it_equal_to_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    write(path, "svc-a")
    write(path, "svc-b")
    with SpanStore(path) as store:
        found = table(store)
        assert found == set(store._conn.execute(FROM_ROWS).fetchall())
    assert ("svc-a", "chat fake-1", "client") in found
    assert {service for service, _name, _kind in found} == {"svc-a", "svc-b"}


def test_an_older_store_is_backfilled_on_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    write(path, "svc-old")
    with SpanStore(path) as store:  # as a store of schema 10 was: no table, no migration 11
        store._conn.execute("DROP TABLE operations")
        store._conn.execute("DELETE FROM schema_migrations WHERE version = 11")
    with SpanStore(path) as store:  # a writer upgrades it
        assert table(store) == set(store._conn.execute(FROM_ROWS).fetchall())
        assert len(table(store)) == 3
