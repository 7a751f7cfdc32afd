"""Real child processes: a clean exit flushes, ``kill -9`` keeps what was flushed, a fork numbers afresh."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pipeline_support import assert_identity, digest, spans_of, total

from otel_agentdiag import semconv as sc
from otel_agentdiag.storage import SpanStore

HERE = str(Path(__file__).parent)
PRELUDE = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, sys.argv[2])
    import otel_agentdiag as agentdiag
    from pipeline_support import HASH_KEY, run_agent, lookup
    """
)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}


def _run(script: str, store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(script), str(store), HERE],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_clean_exit_flushes_spans_and_counts(tmp_path: Path) -> None:
    store_path = tmp_path / "exit.db"
    done = _run(
        """
        diag = agentdiag.configure(store=sys.argv[1], hash_key=HASH_KEY, set_global=False)
        run_agent(3)
        print(json.dumps({"pid": os.getpid(), "observer": diag.observer_id}))
        # no flush, no shutdown: the interpreter's exit must do both
        """,
        store_path,
    )
    assert done.returncode == 0, done.stderr
    child = json.loads(done.stdout)
    with SpanStore(store_path, create=False) as store:
        assert store.span_count() == spans_of(3)
        (row,) = store.session_stats()
        assert (row.observer, row.session) == (child["observer"], digest())
        assert row.observed == row.accepted == row.stored == spans_of(3)
        assert sorted(s.sequence for s in store.session_spans(digest())) == list(range(spans_of(3)))
        (observer,) = store.observers()
        assert (observer.observer, observer.pid) == (child["observer"], child["pid"])
        assert observer.flush_attempts >= 1 and observer.flush_failures == 0


def test_kill_9_keeps_the_flushed_spans_and_loses_the_open_run(tmp_path: Path) -> None:
    store_path = tmp_path / "killed.db"
    script = """
        diag = agentdiag.configure(store=sys.argv[1], hash_key=HASH_KEY, set_global=False)
        with agentdiag.agent_run("pipeline-agent", conversation_id="conversation-1"):
            for i in range(2):
                with agentdiag.iteration(i):
                    with agentdiag.llm_call(provider="openai", model="gpt-4o-mini"):
                        pass
                    lookup(i)
            assert diag.force_flush(60_000)
            with agentdiag.iteration(2):
                with agentdiag.tool_call("lookup"):
                    print("IN_TOOL_CALL", flush=True)
                    sys.stdin.readline()  # the parent kills us here
        """
    child = subprocess.Popen(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(script), str(store_path), HERE],
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "IN_TOOL_CALL", child.stderr.read() if child.stderr else ""
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(60) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(60)
        for stream in (child.stdin, child.stdout, child.stderr):
            if stream is not None:
                stream.close()

    with SpanStore(store_path, create=False) as store:
        spans = store.session_spans(digest())
        kinds = sorted(s.kind for s in spans)
        assert kinds == ["iteration", "iteration", "llm", "llm", "tool", "tool"]  # the two finished steps
        assert not any(s.kind == sc.KIND_RUN for s in spans)  # the run never ended: never stored
        run_span_ids = {s.parent_span_id for s in spans if s.kind == "iteration"}
        assert len(run_span_ids) == 1 and run_span_ids.isdisjoint({s.span_id for s in spans})
        # Sequence 0 is the run (started first); 1..6 the flushed steps; the open iteration and tool are lost.
        assert sorted(s.sequence for s in spans) == [1, 2, 3, 4, 5, 6]
        (row,) = store.session_stats()
        assert row.observed == row.accepted == row.stored == 6
        assert_identity(store)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_is_a_new_observer_numbering_from_zero(tmp_path: Path) -> None:
    store_path = tmp_path / "forked.db"
    done = _run(
        """
        diag = agentdiag.configure(store=sys.argv[1], hash_key=HASH_KEY, set_global=False)
        run_agent(1)
        pid = os.fork()
        if pid == 0:
            run_agent(2)
            diag.shutdown()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert status == 0, status
        run_agent(1)
        diag.shutdown()
        """,
        store_path,
    )
    assert done.returncode == 0, done.stderr
    with SpanStore(store_path, create=False) as store:
        rows = {row.observer: row for row in store.session_stats()}
        assert len(rows) == 2 and len(store.observers()) == 2
        assert sorted(row.stored for row in rows.values()) == [spans_of(2), spans_of(1) * 2]
        for observer in rows:
            sequences = sorted(s.sequence for s in store.session_spans(digest()) if s.observer == observer)
            assert sequences == list(range(len(sequences)))  # each stream complete, from 0, no duplicate
        assert total(store.session_stats())["dropped"] == {}
        assert_identity(store)
