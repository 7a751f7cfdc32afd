"""One contract for every integration (issue 32, item 7): each setup of ``contract_setups`` runs the scripted
agent run once, through ``configure()`` to a real SQLite store and a real OTLP/HTTP receiver (strict policy), and
every check of ``contract_checks`` is a test of its own. A check a setup is known to miss (``Setup.short``, with
its reason) is an expected failure, strictly: when it starts to pass, the test says so.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from contract_checks import CHECK_FUNCTIONS, CHECKS, Outcome, Truth
from contract_server import ContractServer
from contract_setups import SETUPS, Setup, Target
from e2e.otlp_receiver import OTLPReceiver

import otel_agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.storage import SpanStore

_OUTCOMES: dict[str, Outcome] = {}

# llama-index-workflows lists a pydantic model's members with inspect.getmembers, which reads pydantic 2's deprecated
# `__fields__`: LlamaIndex's warnings, not ours.
# LiteLLM imports its GitHub Copilot provider lazily at its first call, and pydantic warns about a TypedDict there.
pytestmark = [
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Item.* using the `ReadOnly` qualifier:UserWarning"),
]


def declared(setup: Setup) -> Truth:
    """The setup's truth with names of its own (the name registry is one per process: a name another setup
    declared must not make this one's look declared)."""
    tag = sorted(SETUPS).index(setup.name)
    truth = setup.truth
    return replace(
        truth,
        tools=(f"{truth.tools[0]}_{tag}", f"{truth.tools[1]}_{tag}"),
        agent=None if truth.agent is None else f"{truth.agent}_{tag}",
    )


def _cli(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def run_setup(setup: Setup, folder: Path) -> Outcome:
    """Run ``setup`` once and read back what it left: store, OTLP, receipt, status, exports."""
    store = folder / "traces.db"
    with setup.server() as server, OTLPReceiver() as receiver:
        truth = declared(setup)
        server.tools = truth.tools
        if setup.env is not None:
            _run_in_env(setup, truth, store, receiver.endpoint, server)
        else:
            assert setup.run is not None, setup.name
            diag = otel_agentdiag.configure(
                service_name="contract",
                store=store,
                otlp_endpoint=receiver.endpoint,
                hash_key=secrets.token_bytes(32),
                set_global=False,
            )
            try:
                setup.run(diag, Target(server.base_url, server.anthropic_base_url, truth))
            finally:
                diag.shutdown()
        assert receiver.errors == []
        received, bodies = receiver.spans(), list(receiver.raw_bodies)
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
        runs = [s for s in spans if s.kind == sc.KIND_RUN] or spans
        session = runs[0].attributes.get(sc.GEN_AI_CONVERSATION_ID) if runs else None
        receipt = session_receipt(reader, session)
    status_args = ["status", "--store", str(store), "--format", "json"]
    if session is not None:
        status_args += ["--session", str(session)]
    status = json.loads(_cli(*status_args))
    exports = []
    for fmt in ("bundle", "otlp-json", "jaeger-json"):
        out = folder / f"export.{fmt}"
        export_args = ["export", "--out", str(out), "--format", fmt, "--store", str(store)]
        if session is not None:
            export_args += ["--session", str(session)]
        _cli(*export_args)
        exports.append(out.read_bytes())
    return Outcome(store, spans, received, bodies, exports, (receipt.status, list(receipt.reasons)), status)


def _run_in_env(setup: Setup, truth: Truth, store: Path, endpoint: str, server: ContractServer) -> None:
    """Run the setup's app in its own environment (its framework's pins cannot share the dev venv)."""
    from isolated_envs import run_in

    assert setup.app is not None, setup.name
    names = json.dumps({"agent": truth.agent, "tools": list(truth.tools)})
    app = Path(__file__).with_name("apps") / setup.app
    args = [str(app), str(store), endpoint, server.base_url, server.anthropic_base_url, names]
    done = run_in(setup.env or "", args, env={"PYTHONPATH": str(Path(__file__).parent)}, timeout=600)
    assert done.returncode == 0, f"{setup.app} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def _cases() -> list[Any]:
    cases = []
    for name, setup in sorted(SETUPS.items()):
        for check in CHECKS:
            marks = []
            if check in setup.short:
                marks.append(pytest.mark.xfail(strict=True, reason=setup.short[check]))
            cases.append(pytest.param(name, check, id=f"{name} :: {check}", marks=marks))
    return cases


@pytest.mark.parametrize(("name", "check"), _cases())
def test_contract(name: str, check: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    setup = SETUPS[name]
    missing = [module for module in setup.requires if importlib.util.find_spec(module) is None]
    if setup.env is not None and shutil.which("pip") is None and not Path(sys.executable).with_name("pip").exists():
        missing.append("pip (to build the test environment)")
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")
    outcome = _OUTCOMES.get(name)
    if outcome is None:
        outcome = _OUTCOMES[name] = run_setup(setup, tmp_path_factory.mktemp("contract"))
    problems = CHECK_FUNCTIONS[check](outcome, declared(setup))
    assert problems == [], problems


def test_every_short_check_is_a_known_check_and_says_why() -> None:
    for setup in SETUPS.values():
        assert set(setup.short) <= set(CHECKS), setup.name
        assert all(reason.strip() for reason in setup.short.values()), setup.name


def test_the_docs_table_is_the_setups() -> None:
    from contract_table import current, render

    assert current() == render(), "docs/integrations.md is stale: run `python tests/contract/contract_table.py --write`"


def test_the_apps_sentinels_are_the_fakes() -> None:
    import contract_app
    from fakes import openai_server as fake

    for name in ("PROMPT", "SYSTEM", "TOOL_DESCRIPTION", "TOOL_RESULT", "CONVERSATION", "API_KEY"):
        assert getattr(contract_app, f"SENTINEL_{name}") == getattr(fake, f"SENTINEL_{name}"), name
