"""Off is off (issue 34): with otel-agentdiag switched off, or every span sampled out, a new user's own agent
(``off_app.py``: a hand-written OpenAI function-calling loop, a decorated tool, the manual wrappers, the OpenAI
instrumentor on) prints nothing but its own output: no log line of ours or OpenTelemetry's at any level, no
warning; its answers are the same as with tracing on; switched off, no file is made."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.openai_server import FakeModelServer

APP = Path(__file__).with_name("off_app.py")

SWITCHES = {
    "AGENTDIAG_ENABLED=false": {"AGENTDIAG_ENABLED": "false"},
    "AGENTDIAG_ENABLED=0": {"AGENTDIAG_ENABLED": "0"},
    "OTEL_SDK_DISABLED=true": {"OTEL_SDK_DISABLED": "true"},
    "sampler always_off": {"OTEL_TRACES_SAMPLER": "always_off"},
    "sampler parentbased_always_off": {"OTEL_TRACES_SAMPLER": "parentbased_always_off"},
    "sampler traceidratio 0.1": {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"},
}
"""Every way a program turns tracing off or samples spans out."""

_CLEAN = ("AGENTDIAG_", "OTEL_")


def _run(folder: Path, server: FakeModelServer, switch: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_CLEAN)}
    env.update(switch)
    store = folder / "store" / "traces.db"
    return subprocess.run(
        [sys.executable, str(APP), str(store), server.base_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def server() -> FakeModelServer:
    with FakeModelServer() as running:
        yield running


@pytest.fixture(scope="module")
def traced(server: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    done = _run(tmp_path_factory.mktemp("on"), server, {})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert len(out["answers"]) == 3 and out["provider"] == "TracerProvider"
    answers: list[str] = out["answers"]
    return answers


@pytest.mark.parametrize("name", sorted(SWITCHES))
def test_switched_off_or_sampled_out_the_agent_prints_only_its_own_output(
    name: str, server: FakeModelServer, traced: list[str], tmp_path: Path
) -> None:
    done = _run(tmp_path, server, SWITCHES[name])
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    out = json.loads(done.stdout)
    assert out["answers"] == traced  # the agent's result, unchanged
    if name.startswith("AGENTDIAG_ENABLED"):
        assert out["provider"] == "ProxyTracerProvider"  # switched off: nothing set up, the global provider included
        assert not (tmp_path / "store").exists()  # and no file made
