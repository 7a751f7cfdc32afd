"""Stores written by the real pipeline for the viewer tests (each in its own process), and the app over them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the serve extra (Starlette, Uvicorn) is not installed")

HERE = Path(__file__).resolve().parent
BIG_RUN_TOOLS = 10_000
"""Tool calls in the big run (plus its run and 100 iteration spans)."""


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_", "OPENAI_", "ANTHROPIC_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE.parents[2]), env.get("PYTHONPATH", "")) if p)
    return env


def _run(args: list[str], cwd: Path) -> None:
    done = subprocess.run(args, cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``agentdiag demo --store``: one run with a failing tool call, no content."""
    folder = tmp_path_factory.mktemp("demo")
    _run([sys.executable, "-m", "otel_agentdiag", "demo", "--store", str(folder / "traces.db")], folder)
    return folder / "traces.db"


@pytest.fixture(scope="session")
def content_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo with content captured, and a run whose captured values are hostile markup."""
    folder = tmp_path_factory.mktemp("content")
    _run([sys.executable, str(HERE / "make_store.py"), "content", str(folder / "traces.db")], folder)
    return folder / "traces.db"


@pytest.fixture(scope="session")
def cost_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run over its cost budget whose LLM calls cost $0.25, $0.0042 and nothing known, and a run without a cost."""
    folder = tmp_path_factory.mktemp("cost")
    _run([sys.executable, str(HERE / "make_store.py"), "cost", str(folder / "traces.db")], folder)
    return folder / "traces.db"


@pytest.fixture(scope="session")
def noise_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose cost and request temperature carry float noise (``0.00009279999999999999``)."""
    folder = tmp_path_factory.mktemp("noise")
    _run([sys.executable, str(HERE / "make_store.py"), "noise", str(folder / "traces.db")], folder)
    return folder / "traces.db"


@pytest.fixture(scope="session")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of 10,101 spans (run, 100 iterations, 10,000 tool calls) through the manual wrappers."""
    folder = tmp_path_factory.mktemp("big")
    _run([sys.executable, str(HERE / "make_store.py"), "big", str(folder / "traces.db"), str(BIG_RUN_TOOLS)], folder)
    return folder / "traces.db"


@pytest.fixture(scope="session")
def imported_store(tmp_path_factory: pytest.TempPathFactory, demo_store: Path) -> Path:
    """The demo's trace exported as OTLP-JSON and ingested into a second store: an imported session, which only
    its rows can judge (no verdict settled at write time)."""
    folder = tmp_path_factory.mktemp("imported")
    exported = folder / "demo.otlp.json"
    agentdiag = [sys.executable, "-m", "otel_agentdiag"]
    _run([*agentdiag, "export", "--store", str(demo_store), "--format", "otlp-json", "--out", str(exported)], folder)
    _run([*agentdiag, "ingest", "--store", str(folder / "traces.db"), str(exported)], folder)
    return folder / "traces.db"
