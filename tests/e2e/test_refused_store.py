"""A store that is not ours never hurts the agent: configure() logs one error and turns the local branch off; the
agent's code runs and returns (and raises) as ever; the OTLP export to a real receiver on 127.0.0.1 still works
when it has a key of its own, and is off too when its key would have come from the refused folder.

"Another user's folder" is simulated with ``chown`` (root only, else skipped); a symlinked folder needs nothing.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path

import pytest
from otlp_receiver import OTLPReceiver

import otel_agentdiag as agentdiag

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
WAIT_S = 10.0

pytestmark = pytest.mark.usefixtures("clean_env")


def _planted_by_another_user(folder: Path) -> str:
    if not IS_ROOT:
        pytest.skip("simulating another user's folder needs chown, which needs root")
    folder.mkdir(mode=0o700)
    os.chown(folder, 12345, 12345)
    return f"refusing store folder {folder}: owned by uid 12345, not 0 (you)"


def _symlink_to_elsewhere(folder: Path) -> str:
    elsewhere = folder.parent / "somewhere-else"
    elsewhere.mkdir(mode=0o700)
    folder.symlink_to(elsewhere, target_is_directory=True)
    return f"refusing store folder {folder}: is a symbolic link"


def _world_writable(folder: Path) -> str:
    folder.mkdir(mode=0o700)
    folder.chmod(0o777)
    return f"refusing store folder {folder}: writable by group or others (mode 0777)"


HOSTILE: dict[str, Callable[[Path], str]] = {
    "another user's folder": _planted_by_another_user,
    "a symlinked folder": _symlink_to_elsewhere,
    "a world-writable folder": _world_writable,
}


def _agent() -> str:
    with agentdiag.agent_run("refusal-agent", conversation_id="conv-1"):
        with agentdiag.iteration(0):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.record_response(input_tokens=3, output_tokens=2, finish_reasons=["stop"])
            with pytest.raises(KeyError, match="the agent's own error"):
                with agentdiag.tool_call("lookup"):
                    raise KeyError("the agent's own error")
    return "the agent's answer"


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_refused_store_leaves_the_agent_and_its_otlp_export_running(
    case: str, tmp_path: Path, receiver: OTLPReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "project" / ".agentdiag"
    folder.parent.mkdir(mode=0o700)
    reason = HOSTILE[case](folder)
    before = sorted(p.name for p in folder.iterdir())
    with agentdiag.configure(
        store=folder / "traces.db",
        otlp_endpoint=receiver.endpoint,
        hash_key=secrets.token_hex(32),
        set_global=False,
    ) as diag:
        assert _agent() == "the agent's answer"
        assert [d.name for d in diag.destinations] == ["otlp"]
        assert diag.store_path is None
        assert diag.force_flush()
    assert receiver.wait_for_spans(4, timeout=WAIT_S), f"only {receiver.span_count} spans arrived"
    assert _errors(caplog) == [f"otel-agentdiag: {reason}; the local store is off"]
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing was written into it


@pytest.mark.parametrize("case", list(HOSTILE))
def test_without_a_key_of_its_own_the_otlp_export_is_off_too(
    case: str, tmp_path: Path, receiver: OTLPReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    """The key would have come from hash.key in the refused folder: whoever planted it would know it."""
    folder = tmp_path / "project" / ".agentdiag"
    folder.parent.mkdir(mode=0o700)
    reason = HOSTILE[case](folder)
    with agentdiag.configure(store=folder / "traces.db", otlp_endpoint=receiver.endpoint, set_global=False) as diag:
        assert _agent() == "the agent's answer"
        assert diag.destinations == ()
    assert _errors(caplog) == [f"otel-agentdiag: {reason}; the local store and the OTLP export are off"]
    assert receiver.span_count == 0
    assert not (folder / "hash.key").exists() and not (folder / "traces.db").exists()


def test_a_fresh_store_still_just_works(
    tmp_path: Path, receiver: OTLPReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "project" / ".agentdiag" / "traces.db"
    with agentdiag.configure(store=store, otlp_endpoint=receiver.endpoint, set_global=False) as diag:
        assert _agent() == "the agent's answer"
        assert [d.name for d in diag.destinations] == ["local", "otlp"]
        assert diag.store_path == store
    assert receiver.wait_for_spans(4, timeout=WAIT_S)
    assert _errors(caplog) == []
    with agentdiag.storage.SpanStore(store, create=False) as opened:
        assert opened.span_count() == 4
    assert len((store.parent / "hash.key").read_bytes()) == 32
