"""Optional SQL filters (``storage.codec.given_conditions``): a filter is left out only when its value is None."""

from __future__ import annotations

from pathlib import Path

from storage_helpers import T0

from otel_agentdiag.storage import SpanRow, SpanStore
from otel_agentdiag.storage.codec import given_conditions


def test_only_absent_filters_are_left_out_and_the_rest_keep_their_order() -> None:
    conditions = (("a = ?", 1), ("b = ?", None), ("c = ?", 0), ("d = ?", ""), ("e = ?", False))
    assert given_conditions(*conditions) == (["a = ?", "c = ?", "d = ?", "e = ?"], [1, 0, "", False])
    assert given_conditions() == ([], [])
    assert given_conditions(("a = ?", None)) == ([], [])


def _run(trace: int, start: int) -> SpanRow:
    return SpanRow(
        trace_id=f"{trace:032x}",
        span_id=f"{trace:016x}",
        parent_span_id=None,
        name="invoke_agent planner",
        kind="run",
        span_kind="internal",
        start_ns=start,
        end_ns=start + 10,
        status="ok",
        session=None,
        attributes={"gen_ai.agent.name": "planner"},
        events=[],
        links=[],
        resource={"service.name": "svc"},
        scope=None,
    )


def test_a_zero_bound_is_a_bound(tmp_path: Path) -> None:
    """``since_ns=0`` / ``until_ns=0`` filter (a falsy value is given), as ``None`` does not."""
    with SpanStore(tmp_path / "traces.db") as store:
        store.write_batch([_run(1, T0), _run(2, T0 + 100)])
        assert [r.trace_id for r in store.list_runs(until_ns=0)] == []
        assert [r.trace_id for r in store.list_runs(since_ns=0, agent="planner")] == [f"{2:032x}", f"{1:032x}"]
        assert [r.trace_id for r in store.list_runs(until_ns=T0 + 1, service="svc")] == [f"{1:032x}"]
