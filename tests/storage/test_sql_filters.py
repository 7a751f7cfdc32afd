"""Optional SQL filters (``storage.codec.given_conditions``): a filter is left out only when its value is None."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from storage_helpers import T0, row

from otel_agentdiag.storage import SpanRow, SpanStore
from otel_agentdiag.storage.codec import given_conditions


def test_only_absent_filters_are_left_out_and_the_rest_keep_their_order() -> None:
    conditions = (("a = ?", 1), ("b = ?", None), ("c = ?", 0), ("d = ?", ""), ("e = ?", False))
    assert given_conditions(*conditions) == (["a = ?", "c = ?", "d = ?", "e = ?"], [1, 0, "", False])
    assert given_conditions() == ([], [])
    assert given_conditions(("a = ?", None)) == ([], [])


def _run(trace: int, start: int) -> SpanRow:
    """An agent run of one span, starting ``start`` ns after T0."""
    attributes = {"gen_ai.agent.name": "planner"}
    span = row(trace, session=None, trace_id=f"{trace:032x}", start=start, attributes=attributes, name="invoke_agent")
    return replace(span, kind="run")


def test_a_zero_bound_is_a_bound(tmp_path: Path) -> None:
    """``since_ns=0`` / ``until_ns=0`` filter (a falsy value is given), as ``None`` does not."""
    with SpanStore(tmp_path / "traces.db") as store:
        store.write_batch([_run(1, 0), _run(2, 100)])
        assert [r.trace_id for r in store.list_runs(until_ns=0)] == []
        assert [r.trace_id for r in store.list_runs(since_ns=0, agent="planner")] == [f"{2:032x}", f"{1:032x}"]
        assert [r.trace_id for r in store.list_runs(until_ns=T0 + 1, service="storage-test")] == [f"{1:032x}"]


def test_runs_are_read_through_the_index_of_the_first_filter_given(tmp_path: Path) -> None:
    """agent, then service, then session; none: the index of every run (the page's cost follows the page)."""
    cases = [
        ({}, "trace_summaries_runs"),
        ({"session": "s"}, "trace_summaries_session"),
        ({"service": "svc", "session": "s"}, "trace_summaries_service"),
        ({"agent": "a", "service": "svc", "session": "s"}, "trace_summaries_agent"),
        ({"agent": "", "session": "s"}, "trace_summaries_agent"),  # an empty name is a filter given
    ]
    with SpanStore(tmp_path / "traces.db") as store:
        store.write_batch([_run(1, 0)])
        for filters, index in cases:
            statements: list[str] = []
            store._conn.set_trace_callback(statements.append)
            store.list_runs(**filters)
            store._conn.set_trace_callback(None)
            pages = [s for s in statements if "ORDER BY start_ns DESC" in s]  # one per status, or one
            assert pages and all(f"INDEXED BY {index} " in s for s in pages), filters
