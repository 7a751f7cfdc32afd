"""``_internal/sdk.py``: every SDK private field it reads is there and reads as the public API does, on the SDK
installed (one the project allows: run these under the oldest allowed SDK too, a field renamed in a release fails
here); and every reader gives the same answer through its public fallback."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from otel_agentdiag._internal.sdk import (
    active_span_processor,
    attribute_dict,
    attribute_items,
    child_processors,
    span_attributes,
    span_events,
    span_exporter_of,
    span_fields,
)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
FIELDS = (
    "name",
    "context",
    "parent",
    "kind",
    "start_time",
    "end_time",
    "status",
    "resource",
    "instrumentation_scope",
    "events",
    "links",
)
"""What :func:`span_fields` returns, in its order: each the name of a public property, and ``_`` + it the field."""


def _public(span: Any) -> tuple[Any, ...]:
    return tuple(getattr(span, name) for name in FIELDS)


def _same(fields: tuple[Any, ...], span: Any) -> bool:
    """``fields`` as the public properties give them (events and links as the tuples the properties copy)."""
    found = (*fields[:9], tuple(fields[9]), tuple(fields[10]))
    return found == _public(span)


def test_the_installed_sdk_is_one_the_project_allows() -> None:
    allowed = next(
        Requirement(line).specifier
        for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
        if Requirement(line).name == "opentelemetry-sdk"
    )
    assert allowed.contains(version("opentelemetry-sdk")), (version("opentelemetry-sdk"), str(allowed))


@pytest.fixture
def ended() -> Iterator[tuple[Any, ReadableSpan]]:
    """An SDK span, still open, with attributes, an event and a link; and the span its processor got at end."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=8))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    other = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    tracer = provider.get_tracer("scope", "1.0")
    with tracer.start_as_current_span("parent"):
        span = tracer.start_span("s", kind=SpanKind.CLIENT, attributes={"a": 1, "b": ("x", "y")}, links=[Link(other)])
    span.add_event("e", {"k": "v"})
    span.set_attribute("c", 2.5)
    yield span, _end(span, exporter)
    provider.shutdown()


def _end(span: Any, exporter: InMemorySpanExporter) -> ReadableSpan:
    span.set_status(Status(StatusCode.ERROR, "boom"))
    span.end()
    return next(done for done in exporter.get_finished_spans() if done.name == span.name)


def test_the_span_fields_read_are_there_and_read_as_the_properties(ended: tuple[Any, ReadableSpan]) -> None:
    live, done = ended
    assert type(done) is ReadableSpan  # what processors get at end: the spans the worker copies, redacts, stores
    for name in FIELDS:
        assert f"_{name}" in vars(done), name  # a field of the object itself: what span_fields() reads
    fields = span_fields(done)
    assert fields[9] is vars(done)["_events"] and fields[10] is vars(done)["_links"]  # read, not copied
    assert _same(fields, done)
    assert [event.name for event in fields[9]] == ["e"] and len(fields[10]) == 1
    assert _same(span_fields(live), live)  # the live span's class is the SDK's subclass: its properties
    # span_events: the object's own sequence for the SDK's classes, the live one included (what on_end gets)
    assert span_events(done) is vars(done)["_events"] and span_events(live) is vars(live)["_events"]
    assert list(span_events(live)) == list(live.events)


def test_the_attribute_fields_read_are_there_and_read_as_the_properties(ended: tuple[Any, ReadableSpan]) -> None:
    live, done = ended
    for span in (live, done):
        own = vars(span)["_attributes"]
        assert type(own) is BoundedAttributes
        assert span_attributes(span) is own  # no MappingProxyType around it
        backing = vars(own)["_dict"]
        assert type(backing) is dict
        assert attribute_dict(own) is backing  # the dict itself, not a copy
        assert backing == dict(span.attributes) == {"a": 1, "b": ("x", "y"), "c": 2.5}
        assert list(attribute_items(own)) == list(span.attributes.items())


def test_a_span_made_through_the_public_constructor_reads_the_same() -> None:
    context = SpanContext(1, 2, is_remote=False)
    span = ReadableSpan(
        name="made",
        context=context,
        parent=SpanContext(1, 3, is_remote=False),
        resource=Resource.create({"service.name": "svc"}),
        attributes={"k": "v"},
        events=(Event("e", {"x": 1}, timestamp=5),),
        links=(Link(context),),
        kind=SpanKind.SERVER,
        status=Status(StatusCode.OK),
        start_time=1,
        end_time=9,
        instrumentation_scope=InstrumentationScope("scope"),
    )
    assert _same(span_fields(span), span)
    assert span_attributes(span) == {"k": "v"} and attribute_dict(span_attributes(span)) == {"k": "v"}


class _Public:
    """A span with the public properties only (another SDK's, or a view): no private field to read."""

    def __init__(self, span: ReadableSpan) -> None:
        self._span = span

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._span, name)


class _Subclass(ReadableSpan):
    """A subclass may override a property: it is read through its properties, never its fields."""

    @property
    def name(self) -> str:
        return "renamed"


def test_the_fallbacks_give_the_public_answer(ended: tuple[Any, ReadableSpan]) -> None:
    _, done = ended
    view = _Public(done)
    assert span_fields(view) == _public(done)
    assert dict(span_attributes(view)) == dict(done.attributes or {})
    assert dict(attribute_items(span_attributes(view))) == dict(done.attributes or {})
    sub = _Subclass(name="s", context=done.context, attributes={"a": 1}, events=done.events)
    assert span_fields(sub)[0] == "renamed" and _same(span_fields(sub), sub)
    assert span_events(view) == done.events and span_events(sub) == sub.events  # others: the property
    assert span_attributes(trace.INVALID_SPAN) == {}  # a non-recording span has no attributes


class _OddMapping(Mapping[str, Any]):
    """A mapping whose ``_dict`` is not a dict (a release that changed it): read through the Mapping API."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values_ = values
        self._dict = tuple(values.items())

    def __getitem__(self, key: str) -> Any:
        return self.values_[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values_)

    def __len__(self) -> int:
        return len(self.values_)


def test_an_attribute_mapping_without_a_plain_dict_is_read_through_its_mapping_api() -> None:
    odd = _OddMapping({"a": 1, "b": 2})
    assert attribute_dict(odd) is odd and dict(attribute_items(odd)) == {"a": 1, "b": 2}
    plain = {"a": 1}
    assert attribute_dict(plain) is plain


def test_a_full_span_reads_the_same_whatever_its_mapping_holds() -> None:
    """Past its limit, an older SDK turns the mapping's dict into an ``OrderedDict``: read the public way."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=2))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("s", attributes={"a": 1, "b": 2}) as span:
        span.set_attribute("c", 3)
    (done,) = exporter.get_finished_spans()
    assert dict(attribute_items(span_attributes(done))) == dict(done.attributes or {}) == {"b": 2, "c": 3}


def test_the_provider_fields_read_are_there_and_name_its_processors() -> None:
    provider = TracerProvider()
    simple_exporter, batch_exporter = InMemorySpanExporter(), InMemorySpanExporter()
    simple, batch = SimpleSpanProcessor(simple_exporter), BatchSpanProcessor(batch_exporter)
    provider.add_span_processor(simple)
    provider.add_span_processor(batch)
    try:
        active = active_span_processor(provider)
        assert active is vars(provider)["_active_span_processor"]
        assert child_processors(active) == (simple, batch)
        assert span_exporter_of(simple) is simple_exporter
        assert span_exporter_of(batch) is batch_exporter
    finally:
        provider.shutdown()


def test_what_is_not_the_sdks_is_not_known() -> None:
    assert active_span_processor(trace.NoOpTracerProvider()) is None
    assert active_span_processor(object()) is None
    assert child_processors(SimpleSpanProcessor(InMemorySpanExporter())) is None
    assert span_exporter_of(object()) is None
