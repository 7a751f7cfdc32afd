"""Cost and budgets in ``agentdiag traces``, ``show`` and ``status``: text and JSON, from a store written by the
real pipeline (the viewer tests' ``make_store.py cost``: a run over its ``cost_usd`` budget whose LLM leaves cost
$0.25 and $0.0042 and one nothing, and a run without any cost)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from otel_agentdiag._internal.money import format_usd
from otel_agentdiag.cli import cli

ROOT = Path(__file__).resolve().parents[2]
MAKE_STORE = ROOT / "tests" / "serve" / "viewer" / "make_store.py"
RUN_COST = 0.2542


@pytest.fixture(scope="module")
def cost_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cost")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [sys.executable, str(MAKE_STORE), "cost", str(folder / "traces.db")],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return folder / "traces.db"


def invoke(*args: str | Path) -> Result:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def traces_json(store: Path) -> dict[str, dict[str, Any]]:
    items = json.loads(invoke("traces", "--store", store, "--format", "json").stdout)
    return {item["name"].removeprefix("invoke_agent "): item for item in items}


def test_traces_shows_each_traces_cost_and_budget(cost_store: Path) -> None:
    by_agent = traces_json(cost_store)
    assert (by_agent["budget-agent"]["cost_usd"], by_agent["budget-agent"]["budget_exceeded"]) == (RUN_COST, True)
    assert (by_agent["free-agent"]["cost_usd"], by_agent["free-agent"]["budget_exceeded"]) == (None, False)
    lines = invoke("traces", "--store", cost_store).stdout.splitlines()
    assert "COST" in lines[0]
    (over,) = [line for line in lines if "budget-agent" in line]
    (free,) = [line for line in lines if "free-agent" in line]
    assert "$0.2542" in over and "(budget exceeded)" in over
    assert "$" not in free and "budget" not in free  # unknown is a dash, never $0


def test_show_prints_the_run_iteration_and_leaf_costs_and_the_budget_mark(cost_store: Path) -> None:
    trace_id = traces_json(cost_store)["budget-agent"]["trace_id"]
    lines = invoke("show", trace_id, "--store", cost_store).stdout.splitlines()
    assert lines[0].endswith("$0.2542")  # the header: the leaves' sum
    (run,) = [line for line in lines if "invoke_agent budget-agent" in line]
    assert "total cost $0.2542" in run and "budget exceeded: cost_usd" in run
    (step,) = [line for line in lines if "agent.iteration" in line]
    assert "total cost $0.2542" in step and "budget" not in step
    leaves = {line.split("chat ")[1].split()[0]: line for line in lines if "chat unpriced-model-" in line}
    assert "cost $0.25" in leaves["unpriced-model-0"] and "cost $0.0042" in leaves["unpriced-model-1"]
    assert "cost" not in leaves["unpriced-model-2"]

    doc = json.loads(invoke("show", trace_id, "--store", cost_store, "--format", "json").stdout)
    assert (doc["cost_usd"], doc["budget_exceeded"], doc["budget_limits"]) == (RUN_COST, True, ["cost_usd"])
    free = traces_json(cost_store)["free-agent"]["trace_id"]
    doc = json.loads(invoke("show", free, "--store", cost_store, "--format", "json").stdout)
    assert (doc["cost_usd"], doc["budget_exceeded"], doc["budget_limits"]) == (None, False, [])


def test_status_gives_the_sessions_cost_and_the_budget_reason(cost_store: Path) -> None:
    # Without --session: the newest session, the budget run's.
    doc = json.loads(invoke("status", "--store", cost_store, "--format", "json").stdout)
    assert (doc["cost_usd"], doc["budget_exceeded"], doc["budget_limits"]) == (RUN_COST, True, ["cost_usd"])
    assert doc["budget_thresholds"] == {"cost_usd": 0.25}
    assert doc["signals"][-1] == "budget_exceeded"
    text = invoke("status", "--store", cost_store).stdout
    assert "cost $0.2542" in text
    assert "budget: EXCEEDED: cost_usd over $0.25" in text
    assert "signals: budget_exceeded" in text


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "-"),
        (True, "-"),
        ("0.1", "-"),
        (-0.5, "-"),
        (float("nan"), "-"),
        (0, "$0"),
        (0.00004, "<$0.0001"),
        (0.0042, "$0.0042"),
        (0.25, "$0.25"),
        (0.30421, "$0.3042"),
        (1, "$1.00"),
        (1234.567, "$1,234.57"),
    ],
)
def test_money_has_one_format(value: object, shown: str) -> None:
    assert format_usd(value) == shown
