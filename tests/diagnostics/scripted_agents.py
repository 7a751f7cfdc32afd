"""Scripted agents and pipelines for the receipt and status scenarios.

The agents use the public wrappers (``agent_run``, ``iteration``, ``llm_call``, ``tool_call``); the pipelines
are ``configure()`` itself or, where a scenario needs batching settings or an exporter ``configure()`` does not
take, the same parts wired the same way (:func:`hand_pipeline`). Also runnable as a child process
(``python scripted_agents.py STORE MODE ...``) for the scenarios that need a real, separate process.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

import otel_agentdiag as agentdiag
from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.pipeline import AccountingBatchSpanProcessor, SessionSequencer
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import LOCAL
from otel_agentdiag.redaction.processor import RedactingSpanProcessor
from otel_agentdiag.storage import Accounting

TEST_KEY = b"b1a749ddea6b499f4d367b0839499b8755e4e2496913f14707c33e9cfde22845"
"""The hash key of every scripted pipeline (so a test can compute a session's digest)."""
AGENT = "scripted-agent"
MODEL = "fake-model-1"
TOOLS = ("search", "fetch", "convert", "summarise")

agentdiag.register_names(tools=TOOLS, agents=[AGENT])


class ToolFailed(RuntimeError):
    """What a scripted tool raises when told to fail."""


def digest(conversation_id: str, key: bytes = TEST_KEY) -> str:
    """The session digest the store files a conversation under (the local policy's keyed HMAC)."""
    return IdHasher(key).digest("conversation", conversation_id)


def llm_step(finish: str = "tool_calls", tokens: tuple[int, int] = (100, 20), *, model: str = MODEL) -> None:
    """One model call that reports usage and a finish reason, like a real provider."""
    with agentdiag.llm_call(provider="fake", model=MODEL) as call:
        call.record_response(
            response_model=model, finish_reasons=[finish], input_tokens=tokens[0], output_tokens=tokens[1]
        )


def tool_step(name: str, *, fail: bool = False) -> bool:
    """One tool call; a failing tool raises inside the span and the agent catches it. True when it succeeded."""
    try:
        with agentdiag.tool_call(name):
            if fail:
                raise ToolFailed(name)
    except ToolFailed:
        return False
    return True


def react_agent(conversation_id: str, plan: list[list[str]]) -> None:
    """A ReAct loop: per iteration an LLM call, then the tools the plan names (``"!tool"`` fails), and a final
    LLM call that stops. Span count: 1 run + per iteration (1 + 1 + tools) + a last iteration with 1 LLM call."""
    with agentdiag.agent_run(AGENT, conversation_id=conversation_id):
        for index, tools in enumerate(plan):
            with agentdiag.iteration(index):
                llm_step("tool_calls", (100 + index, 20 + index))
                for tool in tools:
                    tool_step(tool.lstrip("!"), fail=tool.startswith("!"))
        with agentdiag.iteration(len(plan)):
            llm_step("stop", (200, 40))


def react_span_count(plan: list[list[str]]) -> int:
    return 1 + sum(2 + len(tools) for tools in plan) + 2


def configured(store: Path, **kw: Any) -> agentdiag.AgentDiag:
    """``configure()`` on ``store`` with the scenarios' key, never the global provider."""
    kw.setdefault("hash_key", TEST_KEY)
    return agentdiag.configure(service_name="scenario", store=store, set_global=False, **kw)


@dataclass
class HandPipeline:
    """``configure()``'s local branch wired by hand: sequencer, local-policy redaction, accounting batcher."""

    provider: TracerProvider
    sequencer: SessionSequencer
    batching: AccountingBatchSpanProcessor
    redacting: RedactingSpanProcessor

    @property
    def observer_id(self) -> str:
        return self.sequencer.observer_id

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.redacting.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.batching.shutdown()
        self.provider.shutdown()
        if manual._tracer_provider_in_use() is self.provider:
            manual.use_tracer_provider(None)


@contextmanager
def hand_pipeline(exporter: SpanExporter, *, policy: Policy = LOCAL, **batching: Any) -> Iterator[HandPipeline]:
    """The pipeline ``configure()`` builds (see ``config.py``), with ``batching`` settings and ``exporter``."""
    provider = TracerProvider(resource=Resource.create({"service.name": "scenario"}), shutdown_on_exit=False)
    sequencer = SessionSequencer()
    batch = AccountingBatchSpanProcessor(exporter, observer=sequencer, **batching)
    redacting = RedactingSpanProcessor(batch, policy=policy, hasher=IdHasher(TEST_KEY))
    provider.add_span_processor(sequencer)
    provider.add_span_processor(redacting)
    manual.use_tracer_provider(provider)
    pipeline = HandPipeline(provider, sequencer, batch, redacting)
    try:
        yield pipeline
    finally:
        pipeline.shutdown()


def _child(store: str, mode: str, conversation_id: str) -> None:
    """Run in a separate process: ``finish`` runs a whole agent; ``hang`` stops inside a tool call."""
    with configured(Path(store)) as diag:
        if mode == "finish":
            react_agent(conversation_id, [["search"], ["fetch"]])
            return
        with agentdiag.agent_run(AGENT, conversation_id=conversation_id):
            with agentdiag.iteration(0):
                llm_step("tool_calls", (100, 20))
                tool_step("search")
            with agentdiag.iteration(1):
                llm_step("tool_calls", (110, 21))
                diag.force_flush()
                with agentdiag.tool_call("fetch"):
                    print("READY", flush=True)
                    sys.stdin.read()  # until killed
                    os._exit(3)  # the parent went away without killing us: still end like a crash, no flush


if __name__ == "__main__":
    _child(*sys.argv[1:4])


class BlockingExporter(SQLiteSpanExporter):
    """A real SQLite exporter whose first write waits until the test lets it go (the queue fills meanwhile)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = threading.Event()
        self.release = threading.Event()

    def export_with_accounting(self, spans: Sequence[ReadableSpan], accounting: Accounting | None) -> bool:
        self.entered.set()
        assert self.release.wait(30)
        return super().export_with_accounting(spans, accounting)
