"""The ``operations`` summary (migration 11): kept by the writer, backfilled when an older store is upgraded."""

from __future__ import annotations

from pathlib import Path

import otel_agentdiag as agentdiag
from otel_agentdiag.storage import SpanStore
from otel_agentdiag.storage.operations import SERVICE_SQL

FROM_ROWS = (
    f"SELECT {SERVICE_SQL}, s.name, s.span_kind, COUNT(*) FROM spans s LEFT JOIN resources r ON r.id = s.resource_id"
    " GROUP BY 1, 2, 3"
)


def write(path: Path, service: str) -> None:
    agentdiag.register_names(tools=["lookup"], agents=["ops-agent"])
    with agentdiag.configure(store=path, service_name=service, set_global=False):
        with agentdiag.agent_run("ops-agent"):
            with agentdiag.llm_call(provider="fake", model="fake-1"):
                pass
            with agentdiag.tool_call("lookup"):
                pass


def table(store: SpanStore) -> set[tuple[str, str, str, int]]:
    return set(store._conn.execute("SELECT service, name, span_kind, span_count FROM operations").fetchall())


def test_the_writer_keeps_it_equal_to_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    write(path, "svc-a")
    write(path, "svc-b")
    with SpanStore(path) as store:
        found = table(store)
        assert found == set(store._conn.execute(FROM_ROWS).fetchall())
    assert ("svc-a", "chat fake-1", "client", 1) in found
    assert {service for service, _name, _kind, _n in found} == {"svc-a", "svc-b"}


def test_an_older_store_is_backfilled_on_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    write(path, "svc-old")
    with SpanStore(path) as store:  # as a store of schema 10 was: no table, no migration 11
        store._conn.execute("DROP TABLE operations")
        store._conn.execute("DROP TRIGGER spans_deleted_operations")
        store._conn.execute("DELETE FROM schema_migrations WHERE version = 11")
    with SpanStore(path) as store:  # a writer upgrades it
        assert table(store) == set(store._conn.execute(FROM_ROWS).fetchall())
        assert len(table(store)) == 3


def test_clearing_and_pruning_take_their_spans_off_and_forget_what_is_left_of_none(tmp_path: Path) -> None:
    """A cleared session's operations go with its spans (no byte of a cleared span's name stays behind); an
    operation other spans still have keeps their count."""
    path = tmp_path / "traces.db"
    for conversation in ("conv-keep", "conv-drop"):
        agentdiag.register_names(tools=["lookup", "only_in_drop"], agents=["ops-agent"])
        with agentdiag.configure(store=path, service_name="svc", set_global=False):
            with agentdiag.agent_run("ops-agent", conversation_id=conversation):
                with agentdiag.tool_call("lookup"):
                    pass
                if conversation == "conv-drop":
                    with agentdiag.tool_call("only_in_drop"):
                        pass
    with SpanStore(path) as store:
        before = {(name, n) for _service, name, _kind, n in table(store)}
        assert ("execute_tool lookup", 2) in before and ("execute_tool only_in_drop", 1) in before
        dropped = next(s.session for s in store.list_sessions() if s.span_count == 3)
        assert dropped is not None
        store.clear_session(dropped)
        after = {(name, n) for _service, name, _kind, n in table(store)}
        assert table(store) == set(store._conn.execute(FROM_ROWS).fetchall())
    assert ("execute_tool lookup", 1) in after
    assert not [name for name, _n in after if "only_in_drop" in name]
    assert b"only_in_drop" not in path.read_bytes()  # cleared and scrubbed: the name is nowhere in the file
