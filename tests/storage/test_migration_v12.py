"""Migration 12 (cost and budgets) on a store written with schema version 11: each trace's cost (the sum of its
LLM leaves' ``agentdiag.cost.usd``, never a roll-up) and budget mark are filled from its rows, exactly as the
writer keeps them; readers and the writer go on from there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storage_helpers import query, row

from otel_agentdiag.storage import LATEST_VERSION, RetentionLimits, SpanRow, SpanStore

COLUMNS = ("cost_nanos", "cost_usd", "budget_exceeded")


def _span(i: int, trace: str, kind: str, attributes: dict[str, Any], parent: int | None = 0) -> SpanRow:
    base = row(i, trace_id=trace * 32, attributes=attributes, name=f"{kind}-{i}")
    fields = {name: getattr(base, name) for name in SpanRow.__dataclass_fields__}
    fields.update(kind=kind, parent_span_id=None if parent is None else f"{parent:016x}")
    return SpanRow(**fields)


def rows() -> list[SpanRow]:
    return [
        # A run over budget, with a roll-up (never counted) and three priced leaves and one unpriced.
        _span(
            0,
            "a",
            "run",
            {
                "agentdiag.budget.exceeded": True,
                "agentdiag.budget.limits": ["cost_usd"],
                "agentdiag.usage.cost.usd": 9.0,
            },
            parent=None,
        ),
        _span(1, "a", "llm", {"agentdiag.cost.usd": 0.1}),
        _span(2, "a", "llm", {"agentdiag.cost.usd": 0.2}),
        _span(3, "a", "llm", {"agentdiag.cost.usd": 0.0042}),
        _span(4, "a", "llm", {"gen_ai.usage.input_tokens": 7}),
        _span(5, "a", "iteration", {"agentdiag.usage.cost.usd": 0.3042}),
        # A run without any priced leaf: no cost (None), not $0.
        _span(6, "b", "run", {}, parent=None),
        _span(7, "b", "llm", {"agentdiag.cost.usd": "0.5"}),
        # A leaf priced at zero (a free model): a known cost of 0.
        _span(8, "c", "run", {"agentdiag.budget.exceeded": False}, parent=None),
        _span(9, "c", "llm", {"agentdiag.cost.usd": 0}),
    ]


def _as_v11(path: Path) -> None:
    """Turn a current store into the version-11 store it was before migration 12 (same tables and rows)."""
    for column in COLUMNS:
        query(path, f"ALTER TABLE trace_summaries DROP COLUMN {column}")
    query(path, "DELETE FROM schema_migrations WHERE version = 12")


def test_a_version_11_store_gets_each_traces_cost_and_budget_from_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    with SpanStore(path) as store:
        store.write_batch(rows())
    written = query(path, "SELECT * FROM trace_summaries ORDER BY trace_id")
    _as_v11(path)
    assert query(path, "SELECT COUNT(*) FROM pragma_table_info('trace_summaries') WHERE name = 'cost_usd'") == [(0,)]
    with SpanStore(path, create=False) as store:
        assert query(path, "SELECT MAX(version) FROM schema_migrations") == [(LATEST_VERSION,)]
        assert query(path, "SELECT * FROM trace_summaries ORDER BY trace_id") == written
        costs = query(path, "SELECT trace_id, cost_nanos, cost_usd, budget_exceeded FROM trace_summaries ORDER BY 1")
        assert costs == [("a" * 32, 304_200_000, 0.3042, 1), ("b" * 32, None, None, 0), ("c" * 32, 0, 0.0, 0)]
        runs = {r.trace_id[0]: r for r in store.list_runs()}
        assert (runs["a"].cost_usd, runs["a"].budget_exceeded) == (0.3042, True)
        assert (runs["b"].cost_usd, runs["b"].budget_exceeded) == (None, False)
        assert (runs["c"].cost_usd, runs["c"].budget_exceeded) == (0.0, False)
        traces = {t.trace_id[0]: t for t in store.list_traces()}
        assert (traces["a"].cost_usd, traces["a"].budget_exceeded, traces["b"].cost_usd) == (0.3042, True, None)
        (conversation,) = store.list_conversations()
        assert (conversation.cost_usd, conversation.budget_exceeded_runs) == (0.3042, 1)
        # The writer goes on from the backfilled figures; retention recomputes a trace from what is left.
        store.write_batch([_span(10, "b", "llm", {"agentdiag.cost.usd": 0.25})])
        assert {r.trace_id[0]: r.cost_usd for r in store.list_runs()}["b"] == 0.25
    with SpanStore(path, create=False, retention=RetentionLimits(max_session_spans=9)) as store:
        assert store.prune().spans == 2  # the oldest two: trace a's run and its 0.1 leaf
        traces = {t.trace_id[0]: t for t in store.list_traces()}
        assert (traces["a"].cost_usd, traces["a"].budget_exceeded) == (0.2042, False)
