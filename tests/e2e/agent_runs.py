"""What the framework end-to-end tests share: the scripted model server their real clients talk to, and what they
read back after a run (the stored spans per trace, the receipts per session, the roll-ups the store keeps, and the
tree as ``agentdiag show`` prints it).

Shared by ``test_openai_agents_e2e`` and ``test_langgraph_e2e``: each runs its framework through ``configure()``
to a SQLite store and a real OTLP receiver, then hands the store here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fakes import openai_server as fake
from fakes.openai_server import FakeModelServer
from otlp_receiver import OTLPReceiver, ReceivedSpan

import otel_agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.diagnostics.receipt import session_receipt
from otel_agentdiag.storage import SpanStore, StoredSpan

USAGE_KEYS = ("input_tokens", "output_tokens")
SCRIPT = ("get_weather", "get_weather", "lookup_city")  # the model's tool call per turn; then it answers


class ScriptedServer(FakeModelServer):
    """The fake server answering the agent's loop from the request alone (so concurrent runs can share it): with
    ``n`` tool results in the conversation so far, the answer calls ``SCRIPT[n]``, and once every call has its
    result, the text answer."""

    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        done = sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool")
        if done >= len(SCRIPT):
            return super().chat_completion(body)  # the last message is a tool result: the text answer
        asking = super().chat_completion({**body, "messages": [{"role": "user", "content": "?"}]})
        (call,) = asking["choices"][0]["message"]["tool_calls"]  # its id carries the call-id sentinel
        call["function"] = {"name": SCRIPT[done], "arguments": fake.TOOL_ARGUMENTS}
        return asking


@dataclass
class Run:
    """One test's runs, as the store and the receiver hold them."""

    store: Path
    spans: list[StoredSpan]
    received: list[ReceivedSpan]
    raw_bodies: list[bytes]
    receipts: dict[str, str]
    """Each session's receipt status (``valid``, or the status with its reasons)."""
    summaries: list[tuple[Any, ...]]
    """``trace_summaries`` rows: (trace_id, kind, llm_calls, tool_calls, input_tokens, output_tokens)."""
    outcome: Any
    """What the framework returned."""

    def traces(self) -> list[list[StoredSpan]]:
        """The spans of each trace, oldest trace first."""
        out: dict[str, list[StoredSpan]] = {}
        for span in sorted(self.spans, key=lambda s: s.start_ns):
            out.setdefault(span.trace_id, []).append(span)
        return list(out.values())


@contextmanager
def pipeline(store: Path, hash_key: bytes, service: str) -> Iterator[tuple[Any, OTLPReceiver]]:
    """``configure()`` to ``store`` and to a real OTLP/HTTP receiver (strict policy); shut down on exit."""
    with OTLPReceiver() as receiver:
        diag = otel_agentdiag.configure(
            service_name=service, store=store, otlp_endpoint=receiver.endpoint, hash_key=hash_key, set_global=False
        )
        try:
            yield diag, receiver
        finally:
            diag.shutdown()
        assert receiver.errors == []


def read_back(store: Path, receiver: OTLPReceiver, outcome: Any) -> Run:
    """Everything a test asserts on, read from the closed store and the receiver."""
    with SpanStore(store, create=False) as reader:
        spans = [span for t in reader.list_traces() for span in reader.get_trace(t.trace_id)]
        receipts: dict[str, str] = {}
        for session in sorted({str(s.attributes.get(sc.GEN_AI_CONVERSATION_ID)) for s in spans if s.kind == "run"}):
            receipt = session_receipt(reader, session)
            receipts[session] = "valid" if receipt.status == "valid" else f"{receipt.status} {receipt.reasons}"
    summaries = trace_summaries(store, "trace_id, kind, llm_calls, tool_calls, input_tokens, output_tokens")
    return Run(store, spans, receiver.spans(), list(receiver.raw_bodies), receipts, summaries, outcome)


def trace_summaries(
    store: Path, columns: str = "kind, llm_calls, tool_calls, input_tokens, output_tokens"
) -> list[tuple[Any, ...]]:
    """The per-trace roll-ups ``agentdiag traces`` and ``sessions`` read (``trace_summaries`` rows, these
    columns), from the store opened read-only: the sums of each run's leaves, counted once."""
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return conn.execute(f"SELECT {columns} FROM trace_summaries").fetchall()
    finally:
        conn.close()


def children(spans: list[StoredSpan], parent: StoredSpan) -> list[StoredSpan]:
    return sorted((s for s in spans if s.parent_span_id == parent.span_id), key=lambda s: s.start_ns)


def shape(spans: list[StoredSpan]) -> tuple[StoredSpan, list[list[str]]]:
    """The trace's one root (a run) and, per iteration under it in order, its children as ``kind:name`` (sorted:
    a tool may start before or after its sibling's end). Fails if any span sits outside run → iteration → leaf."""
    (root,) = [s for s in spans if s.parent_span_id is None]
    assert root.kind == "run", (root.kind, root.name)
    iterations = children(spans, root)
    assert {s.kind for s in iterations} == {"iteration"}, [(s.kind, s.name) for s in iterations]
    leaves = [sorted(f"{c.kind}:{c.name}" for c in children(spans, it)) for it in iterations]
    assert len(spans) == 1 + len(iterations) + sum(map(len, leaves)), "a span outside run → iteration → leaf"
    return root, leaves


def _under(by_id: dict[str, StoredSpan], ancestor: StoredSpan, span: StoredSpan) -> bool:
    while span.parent_span_id is not None:
        span = by_id[span.parent_span_id]
        if span is ancestor:
            return True
    return False


def assert_usage_on_leaves_and_roll_ups(run: Run) -> None:
    """Tokens sit on LLM spans only; each run's and each iteration's ``agentdiag.usage.*`` is the sum of the LLM
    leaves under it (absent when none is under it), and so are the store's per-trace summaries."""
    summaries = {row[0]: row for row in run.summaries}
    for spans in run.traces():
        for span in spans:
            if span.kind != "llm":
                assert not [k for k in span.attributes if k.startswith(sc.GEN_AI_USAGE_PREFIX)], span.name
        leaves = [s for s in spans if s.kind == "llm"]
        assert leaves and all(s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0 for s in leaves)
        by_id = {s.span_id: s for s in spans}
        for parent in (s for s in spans if s.kind in ("run", "iteration")):
            for key in USAGE_KEYS:
                mine = [s.attributes[sc.GEN_AI_USAGE_PREFIX + key] for s in leaves if _under(by_id, parent, s)]
                expected = sum(mine) if mine else None  # no leaf reported: no roll-up (docs/integrations.md)
                assert parent.attributes.get(sc.AGENTDIAG_USAGE_PREFIX + key) == expected, (parent.name, key)
        _, kind, llm_calls, tool_calls, tokens_in, tokens_out = summaries[spans[0].trace_id]
        assert (kind, llm_calls, tool_calls) == ("run", len(leaves), len([s for s in spans if s.kind == "tool"]))
        assert tokens_in == sum(s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] for s in leaves)
        assert tokens_out == sum(s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in leaves)


def assert_export_is_the_same_tree(run: Run) -> None:
    """The strict OTLP export holds every stored span (see :func:`assert_same_tree`)."""
    assert_same_tree(run.received, run.spans)


def assert_same_tree(received: Sequence[Any], stored: Sequence[StoredSpan]) -> None:
    """The strict OTLP export (``received``) holds every stored span, with the same kinds, names and parents, and
    speaks OpenInference's span kinds (so Phoenix draws our tree)."""
    assert sorted((str(r.attributes.get(sc.AGENTDIAG_KIND)), r.name) for r in received) == sorted(
        (s.kind, s.name) for s in stored
    )
    assert {(r.span_id, r.parent_span_id) for r in received} == {(s.span_id, s.parent_span_id) for s in stored}
    spoken = {
        r.attributes.get(sc.AGENTDIAG_KIND): r.attributes.get(sc.OPENINFERENCE_SPAN_KIND)
        for r in received
        if r.attributes.get(sc.AGENTDIAG_KIND) != sc.KIND_OTHER  # steps (a wrapper of a run) speak as they were
    }
    assert spoken == {"run": "AGENT", "iteration": "CHAIN", "llm": "LLM", "tool": "TOOL"}


def show(store: Path, trace_id: str) -> str:
    """``agentdiag show TRACE_ID --store STORE``, as printed."""
    from click.testing import CliRunner

    from otel_agentdiag.cli import cli

    result = CliRunner().invoke(cli, ["show", trace_id, "--store", str(store)])
    assert result.exit_code == 0, result.output
    return str(result.output)
