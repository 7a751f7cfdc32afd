"""The goals ``benchmarks/pipeline.py`` reports from its ratios: ids, values, targets and verdicts."""

from __future__ import annotations

from typing import Any

from benchmarks import pipeline


def _results(all_vs_bare: dict[str, float], vs_logfire: dict[str, float] | None) -> dict[str, Any]:
    shapes: dict[str, Any] = {}
    for shape in pipeline.SHAPES:
        entry: dict[str, Any] = {"ratio_vs_bare": {"caller_cpu_us": 1.1, "all_cpu_us": all_vs_bare[shape]}}
        if vs_logfire is not None:
            entry["ratio_vs_logfire"] = {"all_cpu_us": vs_logfire[shape]}
        shapes[shape] = {"agentdiag": entry, "agentdiag_otlp": {"ratio_vs_bare": {"caller_cpu_us": 1.4}}}
    return {"shapes": shapes}


def test_all_thread_goals_against_bare_and_logfire() -> None:
    goals = {
        g["id"]: g
        for g in pipeline.goals(
            _results({"span": 1.5, "iteration": 1.7, "foreign": 1.2}, {"span": 0.5, "iteration": 0.65, "foreign": 0.9})
        )
    }
    assert goals["pipeline_local_span_all_cpu"]["value"] == 1.5 and goals["pipeline_local_span_all_cpu"]["met"]
    assert goals["pipeline_local_iteration_all_cpu"]["value"] == 1.7
    assert not goals["pipeline_local_iteration_all_cpu"]["met"]
    assert all(goals[f"pipeline_local_{shape}_all_cpu"]["target"] == 1.6 for shape in pipeline.SHAPES)
    logfire = goals["pipeline_local_vs_logfire_all_cpu"]
    assert (logfire["value"], logfire["target"], logfire["op"], logfire["met"]) == (0.65, 0.6, "<=", False)
    # the foreign shape (the convention adapters) has its own goals; the Logfire goal stays on its two shapes
    assert goals["pipeline_local_foreign_all_cpu"]["value"] == 1.2 and goals["pipeline_local_foreign_all_cpu"]["met"]
    assert "pipeline_otlp_foreign_caller_cpu" in goals
    # the caller-thread goals are still there
    assert goals["pipeline_local_span_caller_cpu"]["met"] and goals["pipeline_otlp_iteration_caller_cpu"]["met"]


def test_without_logfire_its_goal_is_left_out() -> None:
    ids = {g["id"] for g in pipeline.goals(_results({"span": 1.5, "iteration": 1.5, "foreign": 1.5}, None))}
    assert "pipeline_local_vs_logfire_all_cpu" not in ids
    assert {"pipeline_local_span_all_cpu", "pipeline_local_iteration_all_cpu"} <= ids
