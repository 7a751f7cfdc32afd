"""``python -m benchmarks.sdk_private [--quick] [--output FILE]``: each private read against its public form.

Why ``otel_agentdiag/_internal/sdk.py`` reads the SDK's private fields it reads, and what the private forms the
package dropped for public ones cost: each pair (``private``, ``public``) is timed per call, alternately, in every
round; a figure is the median over rounds of the *paired* difference and ratio. The same run then measures the
default local pipeline (``benchmarks/pipeline.py``'s ``agentdiag`` variant) on its three shapes: CPU of every
thread per span, and how often each pair's code runs per span (counted on an untimed pass), so that each
difference reads as the share of a span's pipeline cost the public form adds (``share_of_all_cpu``; a form that
runs on the agent's thread also as the share of its caller CPU per span, ``share_of_caller_cpu``).

Kept private (through ``_internal/sdk.py``): ``span_attributes`` (the mapping without its ``MappingProxyType``),
``attribute_lookups`` and ``attribute_pass`` (through the mapping's dict, not the ``Mapping`` ABC),
``span_fields`` (eleven fields, not eleven properties and two tuple copies).
Dropped for the public form: ``span_key`` (``_context`` for ``get_span_context()``), ``span_row`` (slot setters on
the frozen ``SpanRow`` for its constructor), ``row_json`` (one shared ``json.encoder.c_make_encoder``, which is not
public, for ``JSONEncoder.encode`` and its set-up per call), and on the agent's thread ``numbering`` (two values
written into the span mapping's dict in ``on_start``, for two ``set_attribute`` calls: a write into the SDK's
fields) and ``own_attributes`` (a dict update under the span's and the mapping's locks, for ``set_attributes``: a
write too).
The dropped private forms are copied here, for the measurement only.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchmarks import pipeline
from benchmarks._common import benchmark_main
from benchmarks._otlp_sink import OtlpSink
from otel_agentdiag._internal import ids, sdk, spans
from otel_agentdiag.storage import SpanRow
from otel_agentdiag.storage import codec as storage_codec

KEYS = ("gen_ai.request.model", "agentdiag.kind", "gen_ai.conversation.id", "user.id", "absent.key")


def _spans() -> tuple[ReadableSpan, Any]:
    """An ended span of the pipeline's ``span`` shape (as processors get it), and an open one."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    attributes: dict[str, Any] = {
        "agentdiag.kind": "llm",
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.conversation.id": "conversation-1",
        "user.id": "user-1@example.com",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 15,
        "agentdiag.observer.id": "0123456789abcdef",
        "agentdiag.sequence": 7,
    }
    with tracer.start_as_current_span("chat gpt-4o-mini", attributes=attributes):
        pass
    (ended,) = exporter.get_finished_spans()
    return ended, tracer.start_span("open", attributes=attributes)


_ROW_FIELDS = tuple(SpanRow.__dataclass_fields__)
_SETTERS = tuple(getattr(SpanRow, name).__set__ for name in _ROW_FIELDS)


def _slot_row(*values: Any) -> SpanRow:
    """The dropped form: a ``SpanRow`` made by setting its slots (it skipped the frozen ``__init__``)."""
    row: SpanRow = object.__new__(SpanRow)
    for setter, value in zip(_SETTERS, values, strict=True):
        setter(row, value)
    return row


_C_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODE = _C_MAKE_ENCODER(None, None, json.encoder.encode_basestring, None, ":", ",", False, False, False)


def _row_json_private(value: Any) -> str:
    """The dropped form of ``row_json`` for a dict: one C encoder made once, shared by every call."""
    return "".join(_C_ENCODE(value, 0))


def _own_private(span: Any, values: dict[str, Any]) -> None:
    """The dropped form of ``set_own_attributes`` (its fast path: the values fit)."""
    attributes = span._attributes
    with span._lock, attributes._lock:
        if span._end_time is None:
            attributes._dict.update(values)


def pairs() -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """Each pair's ``(private, public)`` forms, as zero-argument callables over the same inputs."""
    ended, live = _spans()
    fields = sdk.span_fields(ended)
    row_values: tuple[Any, ...] = (
        "0" * 32, "1" * 16, None, fields[0], "llm", "client", 1, 2, "ok", "s", {}, [], [], {}, None, None, 7,
    )  # fmt: skip
    row_keywords = dict(zip(_ROW_FIELDS, row_values, strict=True))
    plain = dict(sdk.attribute_items(sdk.span_attributes(ended)))
    backing = live._attributes._dict
    own = {"agentdiag.cost.usd": 0.25}

    def lookups(attributes: Any) -> None:
        for key in KEYS:
            attributes.get(key)

    def pass_over(attributes: Any) -> None:
        for _key, _value in attributes.items():
            pass

    out: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "span_attributes": (lambda: sdk.span_attributes(ended), lambda: ended.attributes),
        "attribute_lookups": (
            lambda: lookups(sdk.attribute_dict(sdk.span_attributes(ended))),
            lambda: lookups(ended.attributes),
        ),
        "attribute_pass": (
            lambda: pass_over(sdk.attribute_dict(sdk.span_attributes(ended))),
            lambda: pass_over(ended.attributes),
        ),
        "span_fields": (lambda: sdk.span_fields(ended), lambda: _properties(ended)),
        "span_key": (lambda: ended._context[:2], lambda: ended.get_span_context()[:2]),  # type: ignore[index]
        "span_row": (lambda: _slot_row(*row_values), lambda: SpanRow(**row_keywords)),
        "numbering": (
            lambda: backing.update({"agentdiag.observer.id": "0123456789abcdef", "agentdiag.sequence": 7}),
            lambda: (
                live.set_attribute("agentdiag.observer.id", "0123456789abcdef"),
                live.set_attribute("agentdiag.sequence", 7),
            ),
        ),
        "own_attributes": (lambda: _own_private(live, own), lambda: live.set_attributes(own)),
    }
    out["row_json"] = (lambda: _row_json_private(plain), lambda: storage_codec.row_json(plain))
    return out


def _properties(span: Any) -> tuple[Any, ...]:
    """What :func:`sdk.span_fields` returns, read through the public properties (its fallback)."""
    return (
        span.name,
        span.context,
        span.parent,
        span.kind,
        span.start_time,
        span.end_time,
        span.status,
        span.resource,
        span.instrumentation_scope,
        span.events,
        span.links,
    )


CALLER_THREAD = frozenset({"numbering", "own_attributes"})
"""Pairs whose code runs on the agent's thread (their share is also of the caller CPU per span)."""

COUNTED: dict[str, list[tuple[Any, str]]] = {
    "span_attributes": [(sdk, "span_attributes")],
    "attribute_lookups": [(sdk, "attribute_dict")],
    "attribute_pass": [(sdk, "attribute_items")],
    "span_fields": [(sdk, "span_fields")],
    "span_key": [(ids, "_key"), (ids.CorrelationIds, "record_conversation"), (ids.CorrelationIds, "pin")],
    "span_row": [(SpanRow, "__init__")],
    "row_json": [(storage_codec, "row_json")],
    "own_attributes": [(spans, "set_own_attributes")],
}
"""Where each pair's code runs, counted per span on one untimed pass: a function replaced by a counting wrapper
in every module that imported it, or a class's method; ``numbering``, the sequencer's ``set_attribute`` of a
span's sequence number (``on_start`` of a span numbered there, not later by the trace assembler). A pass over the
attributes is counted once per ``attribute_items`` call, lookups (by five) once per ``attribute_dict`` call."""


def _time(fn: Callable[[], Any], n: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - start) / n


def time_pairs(rounds: int, calls: int) -> dict[str, dict[str, Any]]:
    found = pairs()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in found}
    for r in range(rounds):
        for name, (private, public) in found.items():
            first, second = (private, public) if r % 2 == 0 else (public, private)
            a, b = _time(first, calls), _time(second, calls)
            samples[name].append((a, b) if r % 2 == 0 else (b, a))
    return {
        name: {
            "private_ns": round(statistics.median(p for p, _ in pairs_), 1),
            "public_ns": round(statistics.median(q for _, q in pairs_), 1),
            "extra_ns": round(statistics.median(q - p for p, q in pairs_), 1),
            "ratio_private_public": round(statistics.median(p / q for p, q in pairs_), 3),
        }
        for name, pairs_ in samples.items()
    }


def _counting(counts: dict[str, int], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        counts[name] += 1
        return fn(*args, **kwargs)

    return counted


def count_per_span(shape: Callable[[TracerProvider, int], int], variants: pipeline.Variants) -> dict[str, float]:
    """How often each pair's code runs per span of ``shape`` in the default local pipeline (one untimed pass)."""
    counts = dict.fromkeys(COUNTED, 0)
    undo: list[tuple[Any, str, Any]] = []
    for name, places in COUNTED.items():
        for owner, attribute in places:
            original = getattr(owner, attribute)
            wrapper = _counting(counts, name, original)
            targets = [owner] if isinstance(owner, type) else [owner, *sys.modules.values()]
            for target in targets:
                if target is owner or getattr(target, attribute, None) is original:
                    undo.append((target, attribute, vars(target)[attribute]))
                    setattr(target, attribute, wrapper)
    from opentelemetry.sdk.trace import Span

    set_attribute = Span.set_attribute
    counts["numbering"] = 0

    def numbering(span: Any, key: str, value: Any) -> None:  # the sequencer's two calls count as one
        counts["numbering"] += key == "agentdiag.sequence"
        set_attribute(span, key, value)

    undo.append((Span, "set_attribute", vars(Span)["set_attribute"]))
    Span.set_attribute = numbering  # type: ignore[method-assign]
    try:
        provider, close = variants.agentdiag()
        spans = shape(provider, 200)
        provider.force_flush()
        close(spans)
    finally:
        for module, attribute, value in reversed(undo):
            setattr(module, attribute, value)
    return {name: round(n / spans, 2) for name, n in counts.items()}


def pipeline_cost(rounds: int, per_round: int) -> dict[str, dict[str, Any]]:
    """CPU per span of the default local pipeline, every thread and the caller's, per shape; and the counts."""
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        variants = pipeline.Variants(Path(tmp), stack.enter_context(OtlpSink()))
        for shape_name, shape in pipeline.SHAPES.items():
            all_cpu: list[float] = []
            caller: list[float] = []
            for _ in range(rounds):
                provider, close = variants.agentdiag()
                t_all, t_thread = time.process_time_ns(), time.thread_time_ns()
                spans = shape(provider, per_round)
                d_thread = time.thread_time_ns() - t_thread
                provider.force_flush()
                d_all = time.process_time_ns() - t_all
                close(spans)
                all_cpu.append(d_all / spans)
                caller.append(d_thread / spans)
            out[shape_name] = {
                "all_cpu_ns": round(statistics.median(all_cpu)),
                "caller_cpu_ns": round(statistics.median(caller)),
                "calls_per_span": count_per_span(shape, variants),
            }
    return out


def run(quick: bool = False) -> dict[str, Any]:
    rounds, calls, pipeline_rounds, per_round = (7, 2000, 3, 400) if quick else (21, 20000, 7, 2000)
    timed = time_pairs(rounds, calls)
    costs = pipeline_cost(pipeline_rounds, per_round)
    for name, entry in timed.items():
        entry["share_of_all_cpu"] = {
            shape: round(entry["extra_ns"] * cost["calls_per_span"].get(name, 0) / cost["all_cpu_ns"], 4)
            for shape, cost in costs.items()
        }
        if name in CALLER_THREAD:
            entry["share_of_caller_cpu"] = {
                shape: round(entry["extra_ns"] * cost["calls_per_span"].get(name, 0) / cost["caller_cpu_ns"], 4)
                for shape, cost in costs.items()
            }
    return {"rounds": rounds, "calls_per_round": calls, "pairs": timed, "pipeline": costs}


def print_report(results: dict[str, Any]) -> None:
    shapes = list(results["pipeline"])
    print(f"{'pair':<18} {'private ns':>10} {'public ns':>10} {'ratio':>6}  share of all-thread CPU per span")
    for name, e in results["pairs"].items():
        shares = "  ".join(f"{s} {e['share_of_all_cpu'][s]:>7.2%}" for s in shapes)
        caller = e.get("share_of_caller_cpu")
        extra = ("   caller: " + "  ".join(f"{s} {caller[s]:.2%}" for s in shapes)) if caller else ""
        figures = f"{e['private_ns']:>10.0f} {e['public_ns']:>10.0f} {e['ratio_private_public']:>6.2f}"
        print(f"{name:<18} {figures}  {shares}{extra}")
    for shape, cost in results["pipeline"].items():
        all_us, caller_us = cost["all_cpu_ns"] / 1000, cost["caller_cpu_ns"] / 1000
        print(f"pipeline {shape}: all-thread {all_us:.1f} µs, caller {caller_us:.1f} µs per span")
        print(f"  calls per span: {cost['calls_per_span']}")


def main(argv: list[str] | None = None) -> int:
    return benchmark_main(
        argv,
        description=__doc__.splitlines()[0] if __doc__ else "",
        default_output="benchmarks/results/sdk_private.json",
        run=run,
        print_report=print_report,
    )


if __name__ == "__main__":
    raise SystemExit(main())
