"""``_internal.spans.set_own_attributes``: our values onto an open span, within the SDK's limits, never an ended one."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator, Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agentdiag._internal.spans import set_own_attributes

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


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
    assert "Setting attribute on ended span" in caplog.text


def test_a_tuple_of_strings_past_the_length_limit_is_cut_as_the_sdk_cuts_it() -> None:
    provider, exporter = _tracer(SpanLimits(max_span_attribute_length=3))
    with provider.get_tracer("t").start_as_current_span("s") as span:
        set_own_attributes(span, {"reasons": ("stop", "ok")})
    (done,) = exporter.get_finished_spans()
    assert dict(done.attributes or {}) == {"reasons": ("sto", "ok")}


def test_the_sdk_fields_it_relies_on_are_there() -> None:
    """The private fields ``set_own_attributes`` reads, pinned for the SDK installed, which must be one the project
    allows (pyproject). Run it under the oldest allowed SDK too: a field renamed in a release fails here."""
    allowed = next(
        Requirement(line).specifier
        for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
        if Requirement(line).name == "opentelemetry-sdk"
    )
    assert allowed.contains(version("opentelemetry-sdk")), (version("opentelemetry-sdk"), str(allowed))
    provider, _ = _tracer(SpanLimits(max_span_attributes=7, max_span_attribute_length=9))
    span = provider.get_tracer("t").start_span("s", attributes={"a": 1})
    attributes = span._attributes  # type: ignore[attr-defined]
    assert type(attributes) is BoundedAttributes
    assert isinstance(attributes._dict, dict) and attributes._dict == {"a": 1}
    assert (attributes.maxlen, attributes.max_value_len) == (7, 9)
    for lock in (span._lock, attributes._lock):  # type: ignore[attr-defined]
        assert lock.acquire(blocking=False)  # free while nobody writes
        lock.release()
    assert span._end_time is None  # type: ignore[attr-defined]
    span.end()
    assert span._end_time is not None  # type: ignore[attr-defined]


def _free_elsewhere(lock: Any) -> bool:
    """Whether another thread could take ``lock`` now (a try, never a wait)."""
    free: list[bool] = []

    def attempt() -> None:
        got = lock.acquire(blocking=False)
        if got:
            lock.release()
        free.append(got)

    other = threading.Thread(target=attempt)
    other.start()
    other.join()
    return free[0]


class _Witness(Mapping[str, Any]):
    """Values that, each time one is read, note whether another thread could take the span's lock and its
    attribute mapping's lock at that moment."""

    def __init__(self, span: Any, values: dict[str, Any]) -> None:
        self.span, self.values_, self.seen = span, values, []

    def __getitem__(self, key: str) -> Any:
        self.seen.append((_free_elsewhere(self.span._lock), _free_elsewhere(self.span._attributes._lock)))
        return self.values_[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values_)

    def __len__(self) -> int:
        return len(self.values_)


@pytest.mark.parametrize("length_limit", [None, 64])
def test_the_values_are_written_under_the_span_lock_and_the_mapping_lock(length_limit: int | None) -> None:
    provider, exporter = _tracer(SpanLimits(max_span_attribute_length=length_limit))
    with provider.get_tracer("t").start_as_current_span("s") as span:
        witness = _Witness(span, {"gen_ai.agent.name": "x", "agentdiag.cost.usd": 0.5})
        set_own_attributes(span, witness)
        assert witness.seen and set(witness.seen) == {(False, False)}  # neither lock free while it wrote
        assert (_free_elsewhere(span._lock), _free_elsewhere(span._attributes._lock)) == (True, True)  # type: ignore[attr-defined]
    (done,) = exporter.get_finished_spans()
    assert dict(done.attributes or {}) == {"gen_ai.agent.name": "x", "agentdiag.cost.usd": 0.5}


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
