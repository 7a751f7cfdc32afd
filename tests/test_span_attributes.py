"""``_internal.spans.set_own_attributes``: our values onto an open span, within the SDK's limits, never an ended one."""

from __future__ import annotations

import logging
import sys
import threading

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agentdiag._internal.spans import set_own_attributes


def _tracer(limits: SpanLimits | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=limits or SpanLimits())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_values_land_on_an_open_span_as_set_attributes_would_put_them() -> None:
    provider, exporter = _tracer()
    with provider.get_tracer("t").start_as_current_span("s", attributes={"a": 1}) as span:
        set_own_attributes(span, {"agentdiag.cost.usd": 0.25, "gen_ai.agent.name": "x", "flags": ("p", "q")})
    (done,) = exporter.get_finished_spans()
    assert dict(done.attributes or {}) == {
        "a": 1,
        "agentdiag.cost.usd": 0.25,
        "gen_ai.agent.name": "x",
        "flags": ("p", "q"),
    }
    assert done.dropped_attributes == 0


def test_the_sdk_limits_still_hold() -> None:
    """Past the attribute count or a string's length limit, the SDK's own way: it cuts, or drops the oldest keys
    (and counts them)."""
    provider, exporter = _tracer(SpanLimits(max_span_attributes=2, max_span_attribute_length=4))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("s", attributes={"a": 1}) as span:
        set_own_attributes(span, {"name": "longer-than-four"})
        assert dict(span.attributes or {}) == {"a": 1, "name": "long"}  # cut as set_attributes cuts it
        set_own_attributes(span, {"b": 2, "c": 3})
    (done,) = exporter.get_finished_spans()
    assert dict(done.attributes or {}) == {"b": 2, "c": 3}
    assert done.dropped_attributes == 2


def test_an_ended_span_is_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    provider, exporter = _tracer()
    span = provider.get_tracer("t").start_span("s")
    span.end()
    set_own_attributes(span, {"late": True})
    (done,) = exporter.get_finished_spans()
    assert "late" not in (done.attributes or {})
    assert "Setting attribute on ended span" not in caplog.text  # silently: never a log line of ours


def test_a_tuple_of_strings_past_the_length_limit_is_cut_as_the_sdk_cuts_it() -> None:
    provider, exporter = _tracer(SpanLimits(max_span_attribute_length=3))
    with provider.get_tracer("t").start_as_current_span("s") as span:
        set_own_attributes(span, {"reasons": ("stop", "ok")})
    (done,) = exporter.get_finished_spans()
    assert dict(done.attributes or {}) == {"reasons": ("sto", "ok")}


def test_threads_never_pass_the_limit_and_every_drop_is_counted(caplog: pytest.LogCaptureFixture) -> None:
    """``set_own_attributes`` and ``set_attribute`` from several threads on the same spans, each span filled past
    its attribute limit: the limit holds on every span, and every key not on it was counted as dropped."""
    limit, threads, spans = 8, 4, 400
    provider, exporter = _tracer(SpanLimits(max_span_attributes=limit, max_span_attribute_length=64))
    tracer = provider.get_tracer("t")
    opened = [tracer.start_span(f"s{i}") for i in range(spans)]
    start = threading.Barrier(threads)
    caplog.set_level(logging.ERROR, logger="opentelemetry.attributes")  # its warning per key pushed out

    def work(n: int) -> None:
        start.wait()
        for i, span in enumerate(opened):
            if n % 2:
                set_own_attributes(span, {f"own.{n}.a": i, f"own.{n}.b": "x"})
                set_own_attributes(span, {f"own.{n}.c": i, f"own.{n}.d": "y"})
            else:
                for key in "abcd":
                    span.set_attribute(f"sdk.{n}.{key}", i)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can: a race shows up, if any
    try:
        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(switch)
    for span in opened:
        span.end()
    sent = 4 * threads  # distinct keys per span
    for done in exporter.get_finished_spans():
        kept = dict(done.attributes or {})
        assert len(kept) == limit, done.name
        assert done.dropped_attributes == sent - limit, done.name
