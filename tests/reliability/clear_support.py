"""Helpers of the clear/prune byte tests: an agent child with content capture that takes commands on stdin, the
needles a session puts in the store's files, and a raw search of those files.

The child is a real interpreter (``python -c``) with the store open through ``configure(capture_content=True)``;
it answers every command with one JSON line (``process_support.emit``), and its writing thread reports each
flush, so the tests wait on lines, never on time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from process_support import AGENT, TOOL, Child, child_env, configure, emit

import otel_agentdiag as agentdiag
from otel_agentdiag.storage import RetentionLimits, SpanStore

STORE_FILES = ("", "-wal", "-shm", "-journal")
DIGEST_KEYS = ("gen_ai.conversation.id", "gen_ai.tool.call.id", "gen_ai.response.id")
"""Attributes whose digests are unique to one session (or one of its calls)."""


# -- the child --------------------------------------------------------------------------------------------------
def content_run(conversation: str, sentinel: str, steps: int) -> str:
    """A whole run whose every captured value carries ``sentinel`` (step ``i``: ``{sentinel}a{i}z`` in the prompt,
    ``b`` in the answer, ``c`` in the tool's arguments, ``d`` in its result; ``{sentinel}rz`` on the run span).
    Returns the trace id."""
    with agentdiag.agent_run(AGENT, conversation_id=conversation) as run:
        run.record_content(input_messages=[{"role": "user", "content": f"plan {sentinel}rz"}])
        for i in range(steps):
            content_step(sentinel, i)
    return f"{run.span.get_span_context().trace_id:032x}"


def content_step(sentinel: str, i: int) -> None:
    with agentdiag.iteration(i):
        with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
            call.record_content(
                input_messages=[{"role": "user", "content": f"ask {sentinel}a{i}z"}],
                output_messages=[{"role": "assistant", "content": f"answer {sentinel}b{i}z"}],
            )
            call.record_response(input_tokens=12, output_tokens=3, finish_reasons=["tool_calls"])
        with agentdiag.tool_call(TOOL, call_id=f"call-{sentinel}-{i}", arguments={"query": f"{sentinel}c{i}z"}) as tool:
            tool.record_result({"found": f"{sentinel}d{i}z"})


def content_agent(store: str, max_session_spans: str = "") -> None:
    """Commands on stdin, one JSON object a line; each answered by one line:

    - ``{"op": "run", "conversation", "sentinel", "steps"}``: :func:`content_run`, flushed -> ``ran`` (``ok``);
    - ``{"op": "open", "conversation", "sentinel"}``: a run that stays open, with content on its span
      (``{sentinel}rz``) and one flushed step -> ``opened``; ``{"op": "close"}`` ends it, flushed -> ``closed``;
    - ``{"op": "burst", "prefix"}``: a thread runs new conversations ``{prefix}-{n}`` (sentinel ``{prefix}q{n}q``)
      one after another, a line ``burst`` (``n``, ``ok``) after each flush, until ``{"op": "stop"}`` -> ``stopped``.

    End of stdin: the interpreter exits (and its exit flushes). ``max_session_spans``: a retention limit.
    """
    retention = RetentionLimits(max_session_spans=int(max_session_spans)) if max_session_spans else None
    diag = configure(store, capture_content=True, retention=retention)
    emit(event="start", observer=diag.observer_id, pid=os.getpid())
    stop = threading.Event()
    writer: threading.Thread | None = None
    opened: Any = None

    def burst(prefix: str) -> None:
        n = 0
        while not stop.is_set():
            content_run(f"{prefix}-{n}", f"{prefix}q{n}q", 1)
            emit(event="burst", n=n, ok=diag.force_flush(60_000))
            n += 1
            stop.wait(0.005)  # pacing (CPU for the other processes), not synchronisation

    for raw in sys.stdin:
        command = json.loads(raw)
        op = command["op"]
        if op == "run":
            trace_id = content_run(command["conversation"], command["sentinel"], int(command.get("steps", 2)))
            emit(event="ran", ok=diag.force_flush(60_000), trace_id=trace_id)
        elif op == "open":
            opened = agentdiag.agent_run(AGENT, conversation_id=command["conversation"])
            run = opened.__enter__()
            run.record_content(input_messages=[{"role": "user", "content": f"plan {command['sentinel']}rz"}])
            content_step(command["sentinel"], 0)
            emit(event="opened", ok=diag.force_flush(60_000))
        elif op == "close":
            opened.__exit__(None, None, None)
            emit(event="closed", ok=diag.force_flush(60_000))
        elif op == "burst":
            writer = threading.Thread(target=burst, args=(command["prefix"],), daemon=True)
            writer.start()
        elif op == "stop":
            stop.set()
            if writer is not None:
                writer.join(60)
            emit(event="stopped")


def send(agent: Child, **command: Any) -> None:
    agent.send(json.dumps(command))


def wait_for(agent: Child, event: str, timeout: float = 60.0) -> dict[str, Any]:
    """The next line of ``event`` (lines of other events before it are skipped); fails at the end of output."""
    while True:
        line = agent.line(timeout)
        assert line is not None, f"the agent ended before {event!r}; stderr: {agent.stderr()}"
        if line.get("event") == event:
            return line


# -- the CLI ----------------------------------------------------------------------------------------------------
def agentdiag_cli(*args: str | os.PathLike[str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``agentdiag ARGS`` as its own process (``python -m otel_agentdiag``)."""
    return subprocess.run(
        [sys.executable, "-m", "otel_agentdiag", *(os.fspath(a) for a in args)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- the files --------------------------------------------------------------------------------------------------
def session_needles(path: Path, session: str, texts: Iterable[str] = ()) -> dict[str, bytes]:
    """What the session's stored spans put in the file and no other session shares: trace and span ids, the
    digests of its ids as stored in the attributes JSON, its entries of the ``spans_session`` index (the digest,
    then the start time as a big-endian int64), and ``texts`` (sentinels of its captured content)."""
    with SpanStore(path, create=False) as store:
        spans = store.session_spans(session)
    assert spans, f"session {session} has no spans"
    needles: dict[str, bytes] = {f"content {text}": text.encode() for text in texts}
    for span in spans:
        needles[f"trace id {span.trace_id}"] = span.trace_id.encode()
        needles[f"span id {span.span_id}"] = span.span_id.encode()
        needles[f"session index {span.span_id}"] = session.encode() + span.start_ns.to_bytes(8, "big")
        for key in DIGEST_KEYS:
            value = span.attributes.get(key)
            if isinstance(value, str):
                needles[f"{key} {value}"] = json.dumps({key: value}, separators=(",", ":"))[1:-1].encode()
    return needles


def files_holding(path: Path, needles: dict[str, bytes]) -> dict[str, list[str]]:
    """Which of the store's files (database, ``-wal``, ``-shm``, ``-journal``) hold each needle byte for byte,
    read raw: ``{label: [file, ...]}`` for the needles found anywhere."""
    contents = {}
    for suffix in STORE_FILES:
        part = Path(f"{path}{suffix}")
        if part.is_file():
            contents[suffix or "db"] = part.read_bytes()
    found: dict[str, list[str]] = {}
    for label, needle in needles.items():
        where = [name for name, data in contents.items() if needle in data]
        if where:
            found[label] = where
    return found
