"""``configure(capture_content=...)`` / ``AGENTDIAG_CAPTURE_CONTENT``, and the recorder between instrumentation and
the store: what switches capture on, what it never does to the agent, and what it bounds."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as seam
from otel_agentdiag.content import Elided, decode
from otel_agentdiag.content.recorder import ContentRecorder
from otel_agentdiag.storage import SpanStore


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith(("OTEL_", "AGENTDIAG_")):
            monkeypatch.delenv(name)
    yield
    assert not seam.enabled(), "a test left content capture on"


def stored_content(path: Path) -> list[tuple[str, str, Any]]:
    """``(span name, role, value)`` of every captured value in the store."""
    with SpanStore(path, create=False) as store:
        found = []
        for trace in store.list_traces():
            names = {s.span_id: s.name for s in store.get_trace(trace.trace_id)}
            found.extend((names[c.span_id], c.role, decode(c.lossless)) for c in store.trace_content(trace.trace_id))
        return found


agentdiag.register_names(tools=["lookup"])


def one_tool_call(value: str = "arguments") -> None:
    with agentdiag.tool_call("lookup", arguments={"q": value}) as tool:
        tool.record_result("result")


@pytest.mark.parametrize(
    ("value", "on", "warns"),
    [
        ("true", True, False),
        (" TRUE ", True, False),
        ("false", False, False),
        ("off", False, False),
        ("", False, False),
        ("1", False, True),
        ("yes", False, True),
        ("tru", False, True),
    ],
)
def test_only_true_turns_the_variable_on(
    value: str, on: bool, warns: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENTDIAG_CAPTURE_CONTENT", value)
    path = tmp_path / "t.db"
    with caplog.at_level(logging.WARNING), agentdiag.configure(store=path, set_global=False) as diag:
        assert diag.options.capture_content is on
        assert seam.enabled() is on
        one_tool_call()
    assert bool(stored_content(path)) is on
    warnings = [r.getMessage() for r in caplog.records if "AGENTDIAG_CAPTURE_CONTENT" in r.getMessage()]
    assert bool(warnings) is warns
    assert all(value.strip() not in w or not value.strip() for w in warnings if len(value.strip()) > 3)


@pytest.mark.parametrize(("variable", "argument"), [("true", False), ("false", True)])
def test_the_argument_wins_over_the_variable(
    variable: str, argument: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTDIAG_CAPTURE_CONTENT", variable)
    with agentdiag.configure(store=tmp_path / "t.db", set_global=False, capture_content=argument) as diag:
        assert diag.options.capture_content is argument


def test_a_non_boolean_argument_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="capture_content must be True or False"):
        agentdiag.configure(store=tmp_path / "t.db", set_global=False, capture_content="yes")  # type: ignore[arg-type]
    assert not (tmp_path / "t.db").exists()


def test_without_a_store_capture_stays_off(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING),
        agentdiag.configure(store=False, set_global=False, capture_content=True) as d,
    ):
        assert d.options.capture_content is False and d.content is None
        assert not seam.enabled()
    assert "content capture needs the local store" in caplog.text


def test_shutdown_stops_capture_and_keeps_what_was_captured(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    diag = agentdiag.configure(store=path, set_global=False, capture_content=True)
    assert seam.enabled()
    one_tool_call("before")
    diag.shutdown()
    assert not seam.enabled()
    one_tool_call("after")  # no pipeline, no capture: nothing raised
    assert stored_content(path) == [
        ("execute_tool lookup", sc.CONTENT_TOOL_ARGUMENTS, {"q": "before"}),
        ("execute_tool lookup", sc.CONTENT_TOOL_RESULT, "result"),
    ]


def test_the_decorators_capture_arguments_results_and_exceptions(tmp_path: Path) -> None:
    @agentdiag.tool
    def add(a: int, b: int = 2) -> int:
        return a + b

    @agentdiag.tool
    async def fail(reason: str) -> None:
        raise KeyError(reason)

    @agentdiag.agent
    def planner(self_like: object, goal: str) -> str:
        return f"plan for {goal}"

    import asyncio

    path = tmp_path / "t.db"
    with agentdiag.configure(store=path, set_global=False, capture_content=True):
        assert add(1) == 3
        with pytest.raises(KeyError):
            asyncio.run(fail("missing"))
        assert planner(None, "lisbon") == "plan for lisbon"
    found = stored_content(path)
    assert ("execute_tool add", sc.CONTENT_TOOL_ARGUMENTS, {"a": 1}) in found
    assert ("execute_tool add", sc.CONTENT_TOOL_RESULT, 3) in found
    (failure,) = [v for name, role, v in found if name == "execute_tool fail" and role == sc.CONTENT_TOOL_RESULT]
    assert (failure.type, failure.args) == ("KeyError", ("missing",))
    assert ("invoke_agent planner", sc.CONTENT_INPUT_MESSAGES, {"self_like": None, "goal": "lisbon"}) in found
    assert ("invoke_agent planner", sc.CONTENT_OUTPUT_MESSAGES, "plan for lisbon") in found


def test_a_failing_recorder_never_reaches_the_agent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def record(self, span: Any, role: str, value: Any) -> None:
            raise RuntimeError("recorder bug")

    broken = Broken()
    seam.install(broken)
    try:
        with agentdiag.configure(store=tmp_path / "t.db", set_global=False):
            seam.install(broken)
            one_tool_call()  # no exception
    finally:
        seam.uninstall(broken)
    assert "capturing content failed (RuntimeError)" in caplog.text
    assert "recorder bug" not in caplog.text


def test_spans_that_are_not_recorded_capture_nothing() -> None:
    recorder = ContentRecorder()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(recorder)
    span = provider.get_tracer("t").start_span("unsampled")
    recorder.record(span, sc.CONTENT_INPUT_MESSAGES, "hello")
    span.end()
    assert recorder.stats() == {"captured": 0, "evicted": 0, "not_recording": 1, "open_spans": 0}


def test_content_of_spans_that_never_end_is_bounded_and_counted() -> None:
    recorder = ContentRecorder(max_open_spans=2)
    provider = TracerProvider()
    provider.add_span_processor(recorder)
    tracer = provider.get_tracer("t")
    spans = [tracer.start_span(f"open {i}") for i in range(5)]
    for span in spans:
        recorder.record(span, sc.CONTENT_INPUT_MESSAGES, span.name)
    assert recorder.stats()["open_spans"] == 2 and recorder.stats()["evicted"] == 3
    for span in spans:
        span.end()
    assert recorder.stats()["open_spans"] == 0


def test_a_value_over_the_payload_limit_is_stored_as_a_marker(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with agentdiag.configure(store=path, set_global=False, capture_content=True) as diag:
        assert diag.content is not None
        diag.content.max_payload_bytes = 1000
        one_tool_call("x" * 5000)
    from otel_agentdiag.content import encode, snapshot

    (arguments,) = [v for _name, role, v in stored_content(path) if role == sc.CONTENT_TOOL_ARGUMENTS]
    expected = encode(snapshot({"q": "x" * 5000}))
    assert arguments == Elided("too_large", len(expected), hashlib.sha256(expected).hexdigest())


def test_content_goes_with_the_span_when_a_sibling_pipeline_would_export_it(tmp_path: Path) -> None:
    """The user's own processors on a shared provider never see content: it is not on the span."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    theirs = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(theirs))
    path = tmp_path / "t.db"
    with agentdiag.configure(store=path, tracer_provider=provider, set_global=False, capture_content=True):
        one_tool_call("SENTINEL_SIBLING")
    (span,) = theirs.get_finished_spans()
    assert "SENTINEL_SIBLING" not in repr(dict(span.attributes or {})) + repr(span.events)
    assert ("execute_tool lookup", sc.CONTENT_TOOL_ARGUMENTS, {"q": "SENTINEL_SIBLING"}) in stored_content(path)
    provider.shutdown()
