"""``python -m benchmarks.instrumentation_overhead [--quick] [--out PATH]``: added cost per instrumented OpenAI call.

The cost our ``OpenAIInstrumentor`` adds to one ``client.chat.completions.create`` next to the other OpenAI
instrumentations, on the same fake server and the same client object, in one run.

Server: ``tests/fakes/openai_server.py`` ``FakeModelServer``, in this process on 127.0.0.1 (HTTP/1.0: one TCP
connection per request, so a call is dominated by loopback HTTP and the SDK's own work).

Shapes (one ``openai.OpenAI`` client for the whole run):

- ``chat``: ``create(model=..., messages=[system, user])``, not streamed;
- ``stream``: the same with ``stream=True, stream_options={"include_usage": True}``, iterated to the end (the
  text pieces joined, the usage chunk kept).

Variants, one instrumented at a time (instrument, time a chunk of calls, uninstrument; only the calls are timed):

- ``baseline``: no instrumentation;
- ``agentdiag``: ``otel_agentdiag.instrumentation.openai.OpenAIInstrumentor().instrument(tracer_provider=tp)``;
- ``openinference``: ``openinference.instrumentation.openai.OpenAIInstrumentor``;
- ``openllmetry``: ``opentelemetry.instrumentation.openai.OpenAIInstrumentor`` (Traceloop); its logger is
  silenced (records are counted, not printed);
- ``otel_genai``: ``opentelemetry.instrumentation.genai.openai.OpenAIInstrumentor`` (the official one);
- ``agentdiag_pipeline``: ours on the provider ``otel_agentdiag.configure(store=<tmp>/traces.db,
  set_global=False)`` builds (sequencer, redaction under the local policy, accounting batch processor, SQLite).

``tp``, shared by the middle four: an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` over a no-op exporter
that only counts spans by (scope, name), so export costs the same for all and little. Every library runs with
its defaults (``OTEL_*``, ``TRACELOOP_*``, ``OPENINFERENCE_*``, ``AGENTDIAG_*``, ``OPENAI_*`` and ``ANTHROPIC_*``
are removed from the environment first). No meter or logger provider is given; the global meter provider is set
to the API's ``NoOpMeterProvider`` (metrics off: the default proxy provider would keep every instrument a peer
creates on each ``instrument()``, and the growing heap would slow every GC pass as the run goes on). A peer that
fails to import or instrument is recorded as unavailable, and the run goes on.

Timing: every call is timed alone, as wall time (``perf_counter_ns``) and the calling thread's CPU
(``thread_time_ns``: the server's handler threads and the batch exporter's thread do not count). A batch is
``--calls`` calls (200) of one variant and shape in one repetition; its figure is the median per call. Within a
repetition the variants take turns on chunks of ``--chunk`` calls (20), in an order rotated by one per chunk and
per repetition, so drift on the machine (on this shared VM, load comes and goes over seconds) hits all of them
alike. Reported per variant: the *added* µs per call, the variant's batch median minus the baseline's batch
median of the same repetition, as the median (min..max) over repetitions, and the paired ratio variant/baseline.
Every variant is warmed up (untimed) per shape first. After the timed repetitions, one more batch per variant
and shape runs under ``cProfile`` for a figure free of timing noise: Python function calls per call in the
calling thread (``python_calls_per_call``; the added calls against the baseline).

Checks, per chunk (untimed): every answer is the fake's (text, and usage on streams); the server saw exactly one
request per call (no retries); ``baseline`` exported no span; ``agentdiag`` exported exactly one span per call
(the run fails otherwise), ``agentdiag_pipeline`` had one span accepted by its store per call and none failed
redaction; every peer's spans per call are recorded. After each uninstrument the classes and functions of
``openai``, ``httpx2`` and ``httpx`` are compared with a snapshot taken before any instrumentation: anything an
instrumentor left patched is recorded as a leak and put back, so the next chunk starts clean.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import json
import logging
import os
import pkgutil
import platform
import pstats
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import wrapt
from opentelemetry import metrics
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import otel_agentdiag as agentdiag

_TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(_TESTS) not in sys.path:
    sys.path.insert(0, str(_TESTS))  # the fake model server lives with the tests

from fakes import openai_server as fake  # noqa: E402
from fakes.openai_server import FakeModelServer  # noqa: E402

MODEL = "gpt-4o-mini"
MESSAGES: list[dict[str, str]] = [
    {"role": "system", "content": f"You are a travel assistant. Answer in one sentence. {fake.SENTINEL_SYSTEM}"},
    {"role": "user", "content": f"What is the weather in Paris today? {fake.SENTINEL_PROMPT}"},
]
SHAPES = ("chat", "stream")
BASELINE = "baseline"
OURS = "agentdiag"
PIPELINE = "agentdiag_pipeline"
ENV_PREFIXES = ("OTEL_", "TRACELOOP_", "OPENINFERENCE_", "AGENTDIAG_", "OPENAI_", "ANTHROPIC_")
VERSIONS_OF = (
    "openai",
    "httpx2",
    "httpx",
    "wrapt",
    "opentelemetry-api",
    "opentelemetry-sdk",
    "opentelemetry-instrumentation",
    "openinference-instrumentation-openai",
    "openinference-instrumentation",
    "openinference-semantic-conventions",
    "opentelemetry-instrumentation-openai",
    "opentelemetry-semantic-conventions-ai",
    "opentelemetry-instrumentation-genai-openai",
    "opentelemetry-util-genai",
    "otel-agentdiag",
)


# --- export side -----------------------------------------------------------------------------------------
class CountingExporter(SpanExporter):
    """Succeeds at once; counts spans by (instrumentation scope, span name) for the per-batch checks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[tuple[str, str]] = Counter()

    def export(self, spans: Any) -> SpanExportResult:
        batch = Counter(
            (span.instrumentation_scope.name if span.instrumentation_scope else "", span.name) for span in spans
        )
        with self._lock:
            self.counts.update(batch)
        return SpanExportResult.SUCCESS

    def snapshot(self) -> Counter[tuple[str, str]]:
        with self._lock:
            return Counter(self.counts)


class CountingLogHandler(logging.Handler):
    """Counts records at WARNING and above and keeps the first few messages (never prints)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.samples: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if len(self.samples) < 3:
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001  (a record whose arguments do not format)
                message = str(record.msg)
            if message not in self.samples:
                self.samples.append(f"{record.name}: {message}"[:300])


# --- patch audit -----------------------------------------------------------------------------------------
_AUDITED_ROOTS = ("openai", "httpx2", "httpx")
_PROXY_TYPE = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)
"""What ``wrapt`` wrappers derive from (``BaseObjectProxy`` in wrapt 2, ``ObjectProxy`` before)."""
_Owner = Any
_Snapshot = dict[tuple[str, str | None], tuple[_Owner, dict[str, Any]]]


def _is_patchable(value: Any) -> bool:
    return callable(value) or isinstance(value, (classmethod, staticmethod, property))


def _audited() -> Iterator[tuple[tuple[str, str | None], _Owner]]:
    """Every audited module and every class defined in it, keyed (module, class name or None)."""
    for name, module in list(sys.modules.items()):
        if module is None or name.partition(".")[0] not in _AUDITED_ROOTS:
            continue
        yield (name, None), module
        for attr, value in list(vars(module).items()):
            if isinstance(value, type) and value.__module__ == name and value.__qualname__ == attr:
                yield (name, attr), value


def _members(owner: _Owner) -> dict[str, Any]:
    return {
        key: value
        for key, value in list(vars(owner).items())
        if not key.startswith("__pydantic") and _is_patchable(value)
    }


def take_snapshot() -> _Snapshot:
    """The functions, methods and descriptors of ``openai``/``httpx2``/``httpx`` as they are now (identity).

    Every ``openai.resources`` module is imported first: instrumentations patch APIs the benchmark never calls
    (OpenLLMetry wraps assistants, images, realtime, ...), and a module imported after the snapshot could not be
    audited (a wrapper left there would gain a layer with every instrument()).
    """
    import openai.resources

    for info in pkgutil.walk_packages(openai.resources.__path__, "openai.resources."):
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional dependency of some API
            continue
    return {key: (owner, _members(owner)) for key, owner in _audited()}


def _is_proxy(value: Any) -> bool:
    return isinstance(value, _PROXY_TYPE)


def _inherited(owner: _Owner, key: str) -> Any:
    """What ``owner.key`` resolved to through the base classes (None for a module or when nothing defines it)."""
    for base in getattr(owner, "__mro__", ())[1:]:
        if key in vars(base):
            return vars(base)[key]
    return None


def audit_and_restore(snapshot: _Snapshot) -> list[str]:
    """What an instrumentor left behind that changes behaviour (``module[.Class].name``), each put back as it was.

    A member that was replaced or removed, or added as a wrapper, is a leak and is restored. An added member that
    is not a wrapper is harmless and kept (and added to ``snapshot``): a module attribute loaded lazily on first
    access (``openai.resources.chat.completions.Completions``), or a subclass attribute set back to exactly what
    it inherited (OpenInference's uninstrument leaves ``OpenAI.request`` = ``SyncAPIClient.request``).
    """
    leaks: list[str] = []
    for (module_name, class_name), (owner, before) in snapshot.items():
        now = _members(owner)
        where = module_name if class_name is None else f"{module_name}.{class_name}"
        for key in before.keys() | now.keys():
            old, new = before.get(key), now.get(key)
            if old is new:
                continue
            if key not in before and not _is_proxy(new):
                if isinstance(owner, type) and new is not _inherited(owner, key):
                    leaks.append(f"{where}.{key}")
                    delattr(owner, key)
                else:
                    before[key] = new
                continue
            leaks.append(f"{where}.{key}")
            if key in before:
                setattr(owner, key, old)
            else:
                delattr(owner, key)
    return sorted(leaks)


# --- variants --------------------------------------------------------------------------------------------
@dataclass
class Variant:
    """One way of running the client; ``start``/``stop`` (un)instrument, ``spans`` counts what was exported."""

    name: str
    description: str
    instrumentor_path: str | None = None
    distribution: str | None = None
    available: bool = True
    error: str | None = None
    start: Callable[[], None] = lambda: None
    stop: Callable[[], None] = lambda: None
    flush: Callable[[], None] = lambda: None
    spans: Callable[[], Counter[tuple[str, str]]] = Counter
    """Cumulative spans exported so far, by (scope, name)."""
    leaks: Counter[str] = field(default_factory=Counter)
    """Attribute path -> number of batches after which it was still patched."""
    span_counts: dict[str, Counter[tuple[str, str]]] = field(default_factory=dict)
    """Shape -> spans exported over all its batches (warm-up included), by (scope, name)."""
    calls: Counter[str] = field(default_factory=Counter)
    """Shape -> calls made (warm-up included)."""


PEERS = {
    OURS: (
        "otel_agentdiag.instrumentation.openai",
        "otel-agentdiag",
        "ours: otel_agentdiag.instrumentation.openai.OpenAIInstrumentor().instrument(tracer_provider=tp)",
    ),
    "openinference": (
        "openinference.instrumentation.openai",
        "openinference-instrumentation-openai",
        "OpenInference (Arize): openinference.instrumentation.openai.OpenAIInstrumentor",
    ),
    "openllmetry": (
        "opentelemetry.instrumentation.openai",
        "opentelemetry-instrumentation-openai",
        "OpenLLMetry (Traceloop): opentelemetry.instrumentation.openai.OpenAIInstrumentor",
    ),
    "otel_genai": (
        "opentelemetry.instrumentation.genai.openai",
        "opentelemetry-instrumentation-genai-openai",
        "official OpenTelemetry: opentelemetry.instrumentation.genai.openai.OpenAIInstrumentor",
    ),
}
SILENCED_LOGGERS = ("opentelemetry.instrumentation.openai",)
"""Loggers whose records are counted and not printed (OpenLLMetry warns about ``openai.Omit`` values)."""
WATCHED_LOGGERS = (
    "otel_agentdiag",
    "openinference.instrumentation",
    "opentelemetry.instrumentation.openai",
    "opentelemetry.instrumentation.genai",
    "opentelemetry.util.genai",
    "opentelemetry.instrumentation.instrumentor",
)


def _instrumentor_variant(
    name: str, provider: TracerProvider, exporter: CountingExporter, snapshot: _Snapshot
) -> Variant:
    module_name, distribution, description = PEERS[name]
    path = f"{module_name}.OpenAIInstrumentor"
    variant = Variant(name, description, instrumentor_path=path, distribution=distribution)
    try:
        instrumentor = importlib.import_module(module_name).OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        if not instrumentor.is_instrumented_by_opentelemetry:
            raise RuntimeError("instrument() did not instrument (a failed dependency check is only logged)")
        instrumentor.uninstrument()
    except Exception as exc:  # noqa: BLE001  (a peer that cannot be used: recorded, the run goes on)
        variant.available = False
        variant.error = f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"[:500]
        leaks = audit_and_restore(snapshot)
        if leaks:
            variant.leaks.update(leaks)
        return variant
    leaks = audit_and_restore(snapshot)
    variant.leaks.update(leaks)

    def start() -> None:
        instrumentor.instrument(tracer_provider=provider)
        if not instrumentor.is_instrumented_by_opentelemetry:
            raise RuntimeError(f"{name}: instrument() did not instrument")

    variant.start = start
    variant.stop = instrumentor.uninstrument
    variant.flush = lambda: _must(provider.force_flush(), f"{name}: force_flush timed out")
    variant.spans = exporter.snapshot
    return variant


def _must(ok: bool, message: str) -> None:
    if not ok:
        raise AssertionError(message)


def _pipeline_variant(store: Path) -> tuple[Variant, Callable[[], None]]:
    """Ours on the full pipeline ``configure()`` builds; also returns its shutdown."""
    from otel_agentdiag.instrumentation.openai import OpenAIInstrumentor

    handle = agentdiag.configure(store=store, set_global=False)
    provider = handle.tracer_provider
    if provider is None or not handle.batch_processors:
        raise AssertionError(f"configure() installed no pipeline: {handle!r}")
    variant = Variant(
        PIPELINE,
        "ours on the provider otel_agentdiag.configure(store=<tmp>/traces.db, set_global=False) builds: "
        "SessionSequencer, RedactingSpanProcessor(local), AccountingBatchSpanProcessor, SQLiteSpanExporter",
        instrumentor_path=f"{PEERS[OURS][0]}.OpenAIInstrumentor + otel_agentdiag.configure()",
        distribution="otel-agentdiag",
    )

    def start() -> None:
        OpenAIInstrumentor().instrument(tracer_provider=provider)

    def flush() -> None:
        _must(handle.force_flush(), "agentdiag_pipeline: force_flush timed out")
        failed = sum(p.failed for p in handle.processors)
        if failed:
            raise AssertionError(f"agentdiag_pipeline: {failed} spans failed redaction")

    def spans() -> Counter[tuple[str, str]]:
        accepted = sum(p.stats().totals.accepted for p in handle.batch_processors)
        return Counter({("<stored by the pipeline>", "*"): accepted})

    variant.start, variant.stop, variant.flush, variant.spans = start, OpenAIInstrumentor().uninstrument, flush, spans
    return variant, handle.shutdown


# --- the calls -------------------------------------------------------------------------------------------
def call_chat(client: Any) -> Any:
    return client.chat.completions.create(model=MODEL, messages=MESSAGES)


def call_stream(client: Any) -> Any:
    stream = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    pieces: list[str] = []
    usage = None
    for chunk in stream:
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
        if chunk.usage is not None:
            usage = chunk.usage
    return "".join(pieces), usage


def check_chat(answer: Any) -> None:
    if answer.choices[0].message.content != fake.ANSWER_TEXT or answer.usage is None:
        raise AssertionError(f"chat: unexpected answer {answer!r}")


def check_stream(answer: Any) -> None:
    text, usage = answer
    if text != fake.STREAM_TEXT or usage is None or usage.prompt_tokens != fake.STREAM_USAGE.prompt_tokens:
        raise AssertionError(f"stream: unexpected answer {answer!r}")


CALLS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], None]]] = {
    "chat": (call_chat, check_chat),
    "stream": (call_stream, check_stream),
}


# --- one chunk -------------------------------------------------------------------------------------------
@dataclass
class Chunk:
    wall_ns: list[int]
    cpu_ns: list[int]
    spans: Counter[tuple[str, str]]
    leaks: list[str]


def run_chunk(
    variant: Variant,
    shape: str,
    client: Any,
    server: FakeModelServer,
    calls: int,
    snapshot: _Snapshot,
    profiler: cProfile.Profile | None = None,
) -> Chunk:
    """Instrument, time ``calls`` calls one by one, uninstrument, flush, check (all but the calls untimed).

    With ``profiler``, it is enabled around the calls (the timings are then meaningless; the call counts are not).
    """
    call, check = CALLS[shape]
    server.reset()
    before = variant.spans()
    variant.start()
    wall_ns: list[int] = []
    cpu_ns: list[int] = []
    perf, thread = time.perf_counter_ns, time.thread_time_ns
    gc.collect()
    if profiler is not None:
        profiler.enable()
    try:
        for _ in range(calls):
            c0 = thread()
            w0 = perf()
            answer = call(client)
            w1 = perf()
            c1 = thread()
            wall_ns.append(w1 - w0)
            cpu_ns.append(c1 - c0)
            check(answer)
    finally:
        if profiler is not None:
            profiler.disable()
        variant.stop()
        leaks = audit_and_restore(snapshot)
    variant.flush()
    spans = variant.spans() - before
    requests = len(server.requests_to("/v1/chat/completions"))
    if requests != calls:
        raise AssertionError(f"{variant.name}/{shape}: the server saw {requests} requests for {calls} calls")
    if server.errors:
        raise AssertionError(f"{variant.name}/{shape}: the fake server's handlers raised {server.errors!r}")
    total = sum(spans.values())
    if variant.name == BASELINE and total:
        raise AssertionError(f"baseline/{shape}: {total} spans exported without instrumentation: {dict(spans)}")
    if variant.name in (OURS, PIPELINE) and total != calls:
        raise AssertionError(
            f"{variant.name}/{shape}: {total} spans for {calls} calls (expected exactly one per call): {dict(spans)}"
        )
    if variant.name == OURS and len(spans) != 1:
        raise AssertionError(f"agentdiag/{shape}: spans of more than one scope or name: {dict(spans)}")
    variant.leaks.update(leaks)
    variant.span_counts.setdefault(shape, Counter()).update(spans)
    variant.calls[shape] += calls
    return Chunk(wall_ns, cpu_ns, spans, leaks)


# --- the run ---------------------------------------------------------------------------------------------
def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def clean_environment() -> list[str]:
    """Remove the variables that change what the libraries record; the names removed (never the values)."""
    removed = sorted(name for name in os.environ if name.startswith(ENV_PREFIXES))
    for name in removed:
        del os.environ[name]
    return removed


def run(*, calls: int, chunk: int, repetitions: int, warmup_calls: int, profile_calls: int) -> dict[str, Any]:
    import openai

    removed_env = clean_environment()
    handlers: dict[str, CountingLogHandler] = {}
    for logger_name in WATCHED_LOGGERS:
        handler = handlers[logger_name] = CountingLogHandler()
        logging.getLogger(logger_name).addHandler(handler)
    for logger_name in SILENCED_LOGGERS:
        logging.getLogger(logger_name).propagate = False

    # Metrics off, as in an app that configures none: the API's no-op provider, not the default proxy (which
    # keeps every instrument a peer creates on each instrument(), so the heap, and every GC pass, would grow).
    metrics.set_meter_provider(NoOpMeterProvider())
    exporter = CountingExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=65536))

    with tempfile.TemporaryDirectory() as tmp, FakeModelServer() as server:
        client = openai.OpenAI(api_key=fake.SENTINEL_API_KEY, base_url=server.base_url)
        for shape in SHAPES:  # load every module the calls use before the snapshot
            CALLS[shape][1](CALLS[shape][0](client))
        snapshot = take_snapshot()

        variants: dict[str, Variant] = {
            BASELINE: Variant(
                BASELINE,
                "no instrumentation",
                flush=lambda: _must(provider.force_flush(), "baseline: force_flush timed out"),
                spans=exporter.snapshot,
            )
        }
        for name in PEERS:
            variants[name] = _instrumentor_variant(name, provider, exporter, snapshot)
        pipeline, shutdown_pipeline = _pipeline_variant(Path(tmp) / "traces.db")
        variants[PIPELINE] = pipeline
        if not variants[OURS].available:
            raise AssertionError(f"our instrumentor is unusable: {variants[OURS].error}")
        names = [name for name, variant in variants.items() if variant.available]

        try:
            for shape in SHAPES:  # warm-up, untimed (also checks every variant once)
                for name in names:
                    run_chunk(variants[name], shape, client, server, warmup_calls, snapshot)
            gc.collect()
            gc.freeze()  # the long-lived heap (openai, pydantic, the instrumentations) out of per-chunk collections

            batch_medians: dict[str, dict[str, dict[str, list[float]]]] = {
                shape: {name: {"wall": [], "cpu": []} for name in names} for shape in SHAPES
            }
            batch_spans: dict[str, dict[str, list[int]]] = {shape: {name: [] for name in names} for shape in SHAPES}
            sizes = [min(chunk, calls - start) for start in range(0, calls, chunk)]
            started = time.perf_counter()
            for r in range(repetitions):
                for shape in SHAPES:
                    wall: dict[str, list[int]] = {name: [] for name in names}
                    cpu: dict[str, list[int]] = {name: [] for name in names}
                    spans: Counter[str] = Counter()
                    for index, size in enumerate(sizes):
                        shift = (r + index) % len(names)
                        for name in names[shift:] + names[:shift]:
                            part = run_chunk(variants[name], shape, client, server, size, snapshot)
                            wall[name] += part.wall_ns
                            cpu[name] += part.cpu_ns
                            spans[name] += sum(part.spans.values())
                    for name in names:
                        batch_medians[shape][name]["wall"].append(statistics.median(wall[name]) / 1000)
                        batch_medians[shape][name]["cpu"].append(statistics.median(cpu[name]) / 1000)
                        batch_spans[shape][name].append(spans[name])
                print(
                    f"repetition {r + 1}/{repetitions} done ({time.perf_counter() - started:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
            # Deterministic complement: Python function calls per call in the calling thread (cProfile).
            calls_per_call: dict[str, dict[str, float]] = {shape: {} for shape in SHAPES}
            for shape in SHAPES:
                for name in names:
                    profiler = cProfile.Profile()
                    run_chunk(variants[name], shape, client, server, profile_calls, snapshot, profiler)
                    total_calls = pstats.Stats(profiler).total_calls  # type: ignore[attr-defined]
                    calls_per_call[shape][name] = total_calls / profile_calls
        finally:
            gc.unfreeze()
            shutdown_pipeline()
            provider.shutdown()
            for logger_name, handler in handlers.items():
                logging.getLogger(logger_name).removeHandler(handler)
            for logger_name in SILENCED_LOGGERS:
                logging.getLogger(logger_name).propagate = True

    results: dict[str, Any] = {}
    for shape in SHAPES:
        base = batch_medians[shape][BASELINE]
        shape_results: dict[str, Any] = {}
        for name in names:
            figures = batch_medians[shape][name]
            entry: dict[str, Any] = {
                "wall_us_per_call": _summary(figures["wall"]),
                "cpu_us_per_call": _summary(figures["cpu"]),
                "spans_per_call": _summary([n / calls for n in batch_spans[shape][name]]),
            }
            profiled = calls_per_call[shape][name]
            entry["python_calls_per_call"] = profiled
            if name != BASELINE:
                base_calls = calls_per_call[shape][BASELINE]
                entry["added_python_calls"] = profiled - base_calls
                entry["ratio_python_calls"] = profiled / base_calls
                for metric in ("wall", "cpu"):
                    pairs = list(zip(figures[metric], base[metric], strict=True))
                    entry[f"added_{metric}_us"] = _summary([v - b for v, b in pairs])
                    entry[f"ratio_{metric}"] = _summary([v / b for v, b in pairs])
            shape_results[name] = entry
        results[shape] = shape_results

    variant_info: dict[str, Any] = {}
    for name, variant in variants.items():
        info: dict[str, Any] = {
            "description": variant.description,
            "instrumentor": variant.instrumentor_path,
            "distribution": variant.distribution,
            "version": _version(variant.distribution) if variant.distribution else None,
            "available": variant.available,
        }
        if variant.error:
            info["error"] = variant.error
        if variant.available:
            info["spans"] = {
                shape: {
                    "calls": variant.calls[shape],
                    "spans_per_call": sum(counts.values()) / variant.calls[shape] if variant.calls[shape] else None,
                    "by_scope_and_name": {f"{scope} / {span}": n for (scope, span), n in sorted(counts.items())},
                }
                for shape, counts in variant.span_counts.items()
            }
        info["uninstrument_leaks"] = dict(sorted(variant.leaks.items()))
        variant_info[name] = info

    return {
        "benchmark": "instrumentation_overhead",
        "versions": {"python": sys.version.split()[0], **{d: _version(d) for d in VERSIONS_OF}},
        "machine": {"platform": platform.platform(), "machine": platform.machine(), "cpus": os.cpu_count()},
        "parameters": {
            "calls_per_batch": calls,
            "calls_per_chunk": chunk,
            "repetitions": repetitions,
            "warmup_calls_per_variant_and_shape": warmup_calls,
            "profiled_calls_per_variant_and_shape": profile_calls,
            "shapes": {
                "chat": "client.chat.completions.create(model, messages=[system, user])",
                "stream": "the same with stream=True, stream_options={'include_usage': True}, iterated to the end",
            },
            "model": MODEL,
            "server": "tests/fakes/openai_server.py FakeModelServer in-process on 127.0.0.1 (HTTP/1.0)",
            "tracer_provider": "TracerProvider + BatchSpanProcessor(counting no-op exporter, max_queue_size=65536)",
            "environment_variables_removed": removed_env,
        },
        "metrics": {
            "wall": "time.perf_counter_ns around each call; a batch's figure is its median per call (a batch: a "
            "variant's calls in one repetition, made in chunks the variants take turns on)",
            "cpu": "time.thread_time_ns of the calling thread around each call (server and exporter threads excluded)",
            "added_*_us": "variant batch median minus the baseline batch median of the same repetition; "
            "median/min/max over repetitions",
            "ratio_*": "variant batch median / baseline batch median of the same repetition; median/min/max",
            "python_calls_per_call": "cProfile total_calls / calls in the calling thread (builtins included), one "
            "batch per variant and shape after the timed repetitions: deterministic, free of timing noise; "
            "includes about 10 calls per call of the harness itself (timers, list appends, the answer check)",
        },
        "variants": variant_info,
        "log_records": {
            name: {"warnings_or_worse": handler.count, "samples": handler.samples} for name, handler in handlers.items()
        },
        "results": results,
        "samples_us": {"batch_medians": batch_medians, "batch_spans": batch_spans},
    }


# --- goals -----------------------------------------------------------------------------------------------
def goals(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Issue 7's goals: our added CPU per call <= 0.25x OpenInference's and <= the official instrumentation's.

    Each value is the ratio of the two variants' median added thread-CPU µs per call over repetitions (the
    added Python calls, deterministic, are given next to it for the same pair).
    """
    out: list[dict[str, Any]] = []
    for shape, shape_results in results["results"].items():
        ours = shape_results.get("agentdiag")
        if ours is None:
            continue
        for peer, target in (("openinference", 0.25), ("otel_genai", 1.0)):
            theirs = shape_results.get(peer)
            if theirs is None or theirs["added_cpu_us"]["median"] <= 0:
                continue
            value = round(ours["added_cpu_us"]["median"] / theirs["added_cpu_us"]["median"], 3)
            out.append(
                {
                    "id": f"instrumentation_{shape}_vs_{peer}",
                    "what": f"added CPU per {shape} call: ours / {peer}'s (added Python calls: "
                    f"{ours['added_python_calls']:+.0f} / {theirs['added_python_calls']:+.0f})",
                    "value": value,
                    "target": target,
                    "op": "<=",
                    "met": value <= target,
                }
            )
    return out


# --- report ----------------------------------------------------------------------------------------------
def _fmt(figures: Mapping[str, float], digits: int = 0) -> str:
    return f"{figures['median']:.{digits}f} [{figures['min']:.{digits}f}..{figures['max']:.{digits}f}]"


def print_report(results: Mapping[str, Any]) -> None:
    p = results["parameters"]
    print(
        f"{p['repetitions']} repetitions x {p['calls_per_batch']} calls per variant and shape, variants taking turns "
        f"every {p['calls_per_chunk']} calls; "
        f"openai {results['versions']['openai']}, opentelemetry-sdk {results['versions']['opentelemetry-sdk']}"
    )
    for shape, shape_results in results["results"].items():
        base = shape_results[BASELINE]
        print()
        print(
            f"{shape}: baseline {_fmt(base['wall_us_per_call'])} µs wall, {_fmt(base['cpu_us_per_call'])} µs "
            f"thread CPU, {base['python_calls_per_call']:.0f} Python calls per call "
            "(median [min..max] of batch medians)"
        )
        print(
            f"{'variant':<20} {'added µs wall':>26} {'added µs thread CPU':>26} {'ratio wall':>11} "
            f"{'ratio CPU':>10} {'py calls':>9} {'spans/call':>11}"
        )
        for name, entry in shape_results.items():
            if name == BASELINE:
                continue
            print(
                f"{name:<20} {_fmt(entry['added_wall_us']):>26} {_fmt(entry['added_cpu_us']):>26} "
                f"{entry['ratio_wall']['median']:>10.2f}x {entry['ratio_cpu']['median']:>9.2f}x "
                f"{entry['added_python_calls']:>+9.0f} {entry['spans_per_call']['median']:>11.2f}"
            )
    print()
    for name, info in results["variants"].items():
        if not info["available"]:
            print(f"{name}: unavailable ({info['error']})")
        if info["uninstrument_leaks"]:
            leaks = list(info["uninstrument_leaks"])
            shown = [leak for leak in leaks if ".chat.completions." in leak] or leaks[:4]
            more = f" and {len(leaks) - len(shown)} more" if len(leaks) > len(shown) else ""
            print(
                f"{name}: uninstrument() left {len(leaks)} members patched (restored by the harness): "
                f"{', '.join(shown)}{more}"
            )
        for shape, spans in info.get("spans", {}).items():
            if name not in (BASELINE,) and spans["spans_per_call"] != 1:
                print(f"{name}/{shape}: {spans['spans_per_call']:.2f} spans per call: {spans['by_scope_and_name']}")
    for logger_name, records in results["log_records"].items():
        if records["warnings_or_worse"]:
            print(f"log {logger_name}: {records['warnings_or_worse']} warnings or worse, e.g. {records['samples']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.instrumentation_overhead",
        description="Added cost per instrumented OpenAI call: ours against OpenInference, OpenLLMetry and the "
        "official instrumentation, paired against the uninstrumented client in one run.",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run (3 repetitions of 30 calls)")
    parser.add_argument(
        "--calls", type=int, default=None, help="calls per variant, shape and repetition (default 200; --quick 30)"
    )
    parser.add_argument(
        "--chunk", type=int, default=None, help="calls per instrumented stretch (default 20; --quick 10)"
    )
    parser.add_argument("--repetitions", type=int, default=None, help="repetitions (default 15; --quick 3)")
    parser.add_argument(
        "--out", "--output", dest="out", type=Path, default=Path("benchmarks/results/instrumentation_overhead.json")
    )
    args = parser.parse_args(argv)
    calls, chunk, repetitions, warmup, profiled = (30, 10, 3, 10, 20) if args.quick else (200, 20, 15, 40, 100)
    results = run(
        calls=args.calls or calls,
        chunk=args.chunk or chunk,
        repetitions=args.repetitions or repetitions,
        warmup_calls=warmup,
        profile_calls=profiled,
    )
    results["quick"] = args.quick
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print_report(results)
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
