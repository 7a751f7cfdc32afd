"""``python -m benchmarks.redaction_vs_logfire [--quick] [--output PATH]``: our redaction against Logfire's scrubbing.

The per-span cost of ``RedactingSpanProcessor`` (strict policy, HMAC IDs) against Pydantic Logfire's span
scrubbing, on the same finished agent spans, as paired ratios measured in one run.

Corpus: ``--runs`` agent runs built once, up front, through a real SDK ``TracerProvider`` (seeded IDs, fixed
timestamps and strings) into an in-memory collecting processor: the ended ``ReadableSpan`` objects a span
processor receives. Each run has 9 spans: the ``invoke_agent`` run span, 3 iteration spans, 3 chat spans
(model, provider, usage, finish reasons, response id, ``gen_ai.input.messages``/``gen_ai.output.messages``
JSON holding an e-mail address, a ``password=...`` string and an ``sk-...`` key), 2 tool spans (name, call id,
arguments and result JSON), one of them failing (an ``exception`` event with message and stack trace, an
ERROR status description), plus keys no policy knows about.

Variants, each the cost of ``on_end(span)`` for every span of the corpus, in front of a sink that only counts:

- ``baseline``: the sink alone (loop and forwarding floor);
- ``agentdiag``: ``RedactingSpanProcessor(sink, policy=STRICT, hasher=IdHasher(key))`` (the headline);
- ``agentdiag_local``: the same with the ``LOCAL`` preset, if the package has one;
- ``logfire``: ``MainSpanProcessorWrapper(sink, Scrubber(None))``, the wrapper ``logfire.configure()`` puts in
  front of its processors with the scrubber default ``ScrubbingOptions()`` builds;
- ``logfire_root``: that wrapper inside ``CheckSuppressInstrumentationProcessorWrapper``, as ``configure()``
  adds it to the provider (secondary);
- ``logfire_scrub_only``: ``Scrubber.scrub_span`` alone on prebuilt span dicts (secondary: the scrubbing part
  of the wrapper, without ``span_to_dict``, the other span tweaks and the ``ReadableSpan`` rebuild).

Every round builds fresh processors (untimed), so a unique response or tool-call ID is hashed the first time
it is seen, as in a live process, then runs every variant once over the whole corpus in a rotating order.
Figures: the median over rounds of µs/span and of the per-round (paired) ratios, with their min-max.

Before timing, one untimed pass per variant checks the work is done: every variant forwards every span, our
output holds none of the sentinels (e-mail, password, API key, raw user and conversation IDs), and where each
sentinel survives Logfire's scrubbing is recorded (not asserted) as a finding.

Logfire's scrubbing is private API (``logfire._internal``): the import is guarded and fails with a clear message
if it moved.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

import otel_agentdiag as agentdiag
import otel_agentdiag.redaction as policies
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.processor import RedactingSpanProcessor

HASH_KEY = b"c5a771b228473597dc0eb38cbf15928313c9af12d231655f682d447eea39141c"
"""A fixed 32-byte HMAC key (the benchmark's digests are reproducible)."""

SEED = 20240917
RUN_SPANS = 9
"""Spans per agent run in the corpus."""
CHUNK_RUNS = 25
"""Within a round, the variants take turns on chunks of this many runs (225 spans)."""

# --- sentinels: what must not leave the process --------------------------------------------------------
EMAIL = "jane.doe@example.com"
PASSWORD = "hunter2-Tr0ub4dor"
API_KEY = "sk-proj-7Qf3ZkLmN9vXw2Rt8YbHcD4eGa1"
SENTINELS: dict[str, re.Pattern[str]] = {
    "email": re.compile(re.escape(EMAIL)),
    "password": re.compile(re.escape(PASSWORD)),
    "api_key": re.compile(re.escape(API_KEY)),
    "raw_user_id": re.compile(r"\buser-\d{4}\b"),
    "raw_conversation_id": re.compile(r"\bconv-\d{5}-[0-9a-f]{8}\b"),
}

REDACTOR_ERROR_KEY = "agentdiag.redaction.redactor_error"
"""The counter a span carries when the redactor failed on it and forwarded a tombstone instead."""

AGENT_NAME = "support-agent"
TOOL_LOOKUP = "lookup_order"
TOOL_UPDATE = "update_account"
MODEL = "gpt-4o-mini"
RESPONSE_MODEL = "gpt-4o-mini-2024-07-18"
SCOPE = "acme.support.agent"
SCOPE_VERSION = "1.4.2"
_EPOCH_NS = 1_726_560_000_000_000_000
_STEP_NS = 1_000_000


# --- logfire (private API) -----------------------------------------------------------------------------
@dataclass(frozen=True)
class LogfireApi:
    """The pieces of Logfire's span pipeline this benchmark drives, from ``logfire._internal``."""

    version: str
    main_wrapper: Callable[[SpanProcessor, Any], SpanProcessor]
    """``MainSpanProcessorWrapper(processor, scrubber)`` (logfire/_internal/exporters/processor_wrapper.py)."""
    root_wrapper: Callable[[SpanProcessor], SpanProcessor]
    """``CheckSuppressInstrumentationProcessorWrapper(processor)`` (same module)."""
    make_scrubber: Callable[[], Any]
    """``Scrubber(None)``: what ``logfire.configure()`` builds from the default ``ScrubbingOptions()``."""
    span_to_dict: Callable[[ReadableSpan], dict[str, Any]]
    scrubbed_key: str
    """The attribute listing what the scrubber removed (``logfire.scrubbed``)."""
    import_path: str


def load_logfire() -> LogfireApi:
    """Import Logfire's scrubbing pipeline, or exit with a message saying what to install or update."""
    try:
        version = metadata.version("logfire")
    except metadata.PackageNotFoundError:
        raise SystemExit(
            "logfire is not installed: pip install -e '.[bench]' (this benchmark compares against it)"
        ) from None
    try:
        from logfire._internal.constants import ATTRIBUTES_SCRUBBED_KEY
        from logfire._internal.exporters.processor_wrapper import (
            CheckSuppressInstrumentationProcessorWrapper,
            MainSpanProcessorWrapper,
        )
        from logfire._internal.scrubbing import Scrubber
        from logfire._internal.utils import span_to_dict
    except ImportError as exc:
        raise SystemExit(
            f"logfire {version}: its private scrubbing API moved ({exc}). This benchmark drives "
            "MainSpanProcessorWrapper from logfire/_internal/exporters/processor_wrapper.py and Scrubber from "
            "logfire/_internal/scrubbing.py (logfire 5.x); update load_logfire() in "
            "benchmarks/redaction_vs_logfire.py to the new location."
        ) from None

    def make_scrubber() -> Any:
        return Scrubber(None)  # positional: the parameter is ``patterns`` (the extra patterns) in 5.x

    return LogfireApi(
        version=version,
        main_wrapper=MainSpanProcessorWrapper,
        root_wrapper=CheckSuppressInstrumentationProcessorWrapper,
        make_scrubber=make_scrubber,
        span_to_dict=span_to_dict,  # type: ignore[arg-type]
        scrubbed_key=ATTRIBUTES_SCRUBBED_KEY,
        import_path="logfire._internal.exporters.processor_wrapper.MainSpanProcessorWrapper"
        " + logfire._internal.scrubbing.Scrubber",
    )


# --- sinks ---------------------------------------------------------------------------------------------
class CountingSink(SpanProcessor):
    """The wrapped processor of every variant: counts the spans it receives and does nothing else."""

    def __init__(self) -> None:
        self.count = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.count += 1


class CapturingSink(SpanProcessor):
    """Keeps what it receives (the untimed verification pass)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


# --- corpus --------------------------------------------------------------------------------------------
class SeededIdGenerator(IdGenerator):
    """Deterministic trace and span IDs."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._random.getrandbits(128) or 1


class _Clock:
    """Fixed, increasing span timestamps."""

    def __init__(self) -> None:
        self._now = _EPOCH_NS

    def __call__(self) -> int:
        self._now += _STEP_NS
        return self._now


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def _tool_call(call_id: str, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}]}


def _tool_response(call_id: str, result: Any) -> dict[str, Any]:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": result}]}


def _failing_update(run: int) -> None:
    """Raise the error the failing tool span records (a real traceback for ``exception.stacktrace``)."""
    raise PermissionError(f"account update refused for {EMAIL} (run {run}): password={PASSWORD} was rejected")


def _build_run(tracer: trace.Tracer, run: int, rng: random.Random, clock: _Clock) -> None:
    """One agent run: run > 3 iterations > chat + tool (the second tool call fails)."""
    conversation = f"conv-{run:05d}-{rng.getrandbits(32):08x}"
    user = f"user-{run % 50:04d}"
    order = f"A-{10_000 + run}"
    call_ids = [f"call_{rng.getrandbits(96):024x}" for _ in range(2)]
    response_ids = [f"chatcmpl-{rng.getrandbits(120):030x}" for _ in range(3)]

    def child(parent: trace.Span, name: str, kind: SpanKind, attributes: dict[str, Any]) -> trace.Span:
        return tracer.start_span(
            name, context=trace.set_span_in_context(parent), kind=kind, attributes=attributes, start_time=clock()
        )

    root = tracer.start_span(
        f"invoke_agent {AGENT_NAME}",
        kind=SpanKind.INTERNAL,
        start_time=clock(),
        attributes={
            "agentdiag.kind": "run",
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT_NAME,
            "gen_ai.conversation.id": conversation,
            "user.id": user,
            "app.customer.email": EMAIL,  # unknown key
            "app.release": "2024.09.3",  # unknown key
        },
    )
    system = _text("system", "You are the support agent of Acme Shop. Answer briefly; use the tools to act.")
    question = _text(
        "user",
        f"Hi, this is {EMAIL}. Order {order} never arrived, and since yesterday my password={PASSWORD} is "
        f"refused. The integration still uses my key {API_KEY}; please rotate it too.",
    )
    lookup_args = {"order_id": order, "email": EMAIL}
    lookup_result = {"order_id": order, "status": "in_transit", "carrier": "DHL", "contact": EMAIL}
    update_args = {"email": EMAIL, "password": PASSWORD, "api_key": API_KEY}
    history: list[dict[str, Any]] = [system, question]
    steps = (
        (_tool_call(call_ids[0], TOOL_LOOKUP, lookup_args), "tool_calls", 412, 38),
        (_tool_call(call_ids[1], TOOL_UPDATE, update_args), "tool_calls", 506, 44),
        (
            _text(
                "assistant",
                f"Order {order} is in transit with DHL. I could not reset the password for {EMAIL}: "
                f"the account service refused it. Please revoke {API_KEY[:12]}... yourself in the dashboard.",
            ),
            "stop",
            598,
            61,
        ),
    )
    for index, (answer, finish, input_tokens, output_tokens) in enumerate(steps):
        iteration = child(
            root,
            "agent.iteration",
            SpanKind.INTERNAL,
            {"agentdiag.kind": "iteration", "agentdiag.iteration.index": index, "gen_ai.conversation.id": conversation},
        )
        chat = child(
            iteration,
            f"chat {MODEL}",
            SpanKind.CLIENT,
            {
                "agentdiag.kind": "llm",
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": MODEL,
                "gen_ai.request.temperature": 0.2,
                "gen_ai.request.max_tokens": 1024,
                "gen_ai.conversation.id": conversation,
                "server.address": "api.openai.com",
                "server.port": 443,
                "gen_ai.input.messages": _json(history),
            },
        )
        chat.set_attributes(
            {
                "gen_ai.response.model": RESPONSE_MODEL,
                "gen_ai.response.id": response_ids[index],
                "gen_ai.response.finish_reasons": (finish,),
                "gen_ai.usage.input_tokens": input_tokens,
                "gen_ai.usage.output_tokens": output_tokens,
                "gen_ai.output.messages": _json([{**answer, "finish_reason": finish}]),
                "http.request.header.authorization": (f"Bearer {API_KEY}",),  # unknown key (HTTP instrumentation)
                "app.debug.note": f"attempt 1 of 3; cached login password={PASSWORD}",  # unknown key
            }
        )
        chat.end(end_time=clock())
        history = [*history, answer]
        if index < len(call_ids):
            name, arguments, result = (
                (TOOL_LOOKUP, lookup_args, lookup_result) if index == 0 else (TOOL_UPDATE, update_args, None)
            )
            tool = child(
                iteration,
                f"execute_tool {name}",
                SpanKind.INTERNAL,
                {
                    "agentdiag.kind": "tool",
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.type": "function",
                    "gen_ai.tool.call.id": call_ids[index],
                    "gen_ai.conversation.id": conversation,
                    "gen_ai.tool.call.arguments": _json(arguments),
                },
            )
            if result is not None:
                tool.set_attribute("gen_ai.tool.call.result", _json(result))
                history = [*history, _tool_response(call_ids[index], result)]
            else:
                try:
                    _failing_update(run)
                except PermissionError as exc:
                    tool.record_exception(exc, timestamp=clock())
                    tool.set_status(Status(StatusCode.ERROR, f"PermissionError: {exc}"))
                    tool.set_attribute("error.type", "PermissionError")
                    history = [*history, _tool_response(call_ids[index], {"error": str(exc)})]
            tool.end(end_time=clock())
        iteration.end(end_time=clock())
    root.end(end_time=clock())


def build_corpus(runs: int) -> list[ReadableSpan]:
    """``runs`` agent runs of finished spans, deterministic, in the order they ended."""
    collector = CapturingSink()
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "support-bot", "deployment.environment.name": "bench", "host.name": "build-box-07"}
        ),
        id_generator=SeededIdGenerator(SEED),
        shutdown_on_exit=False,
    )
    provider.add_span_processor(collector)
    tracer = provider.get_tracer(SCOPE, SCOPE_VERSION)
    rng, clock = random.Random(SEED), _Clock()
    for run in range(runs):
        _build_run(tracer, run, rng, clock)
    provider.shutdown()
    if len(collector.spans) != runs * RUN_SPANS:
        raise AssertionError(f"corpus: expected {runs * RUN_SPANS} spans, built {len(collector.spans)}")
    return collector.spans


def span_kind_counts(spans: Iterable[ReadableSpan]) -> dict[str, int]:
    return dict(Counter(str((span.attributes or {}).get("agentdiag.kind", "other")) for span in spans))


# --- sentinel scan -------------------------------------------------------------------------------------
def _texts(span: ReadableSpan) -> Iterator[tuple[str, str]]:
    """``(location, text)`` for every string-bearing part of a span that could leave the process."""
    yield "name", span.name
    for key, value in (span.attributes or {}).items():
        yield f"attributes.{key}", str(value)
    for event in span.events:
        yield f"events[{event.name}]", event.name
        for key, value in (event.attributes or {}).items():
            yield f"events[{event.name}].{key}", str(value)
    for link in span.links:
        for key, value in (link.attributes or {}).items():
            yield f"links.{key}", str(value)
    if span.status.description:
        yield "status.description", span.status.description
    for key, value in span.resource.attributes.items():
        yield f"resource.{key}", str(value)
    if span.context is not None and span.context.trace_state:
        yield "trace_state", span.context.trace_state.to_header()


def find_sentinels(spans: Iterable[ReadableSpan]) -> dict[str, dict[str, int]]:
    """Sentinel name → location → number of spans where it was found there."""
    found: dict[str, Counter[str]] = {name: Counter() for name in SENTINELS}
    for span in spans:
        for location, text in _texts(span):
            for name, pattern in SENTINELS.items():
                if pattern.search(text):
                    found[name][location] += 1
    return {name: dict(sorted(locations.items())) for name, locations in found.items()}


def scrubbed_notes(spans: Iterable[ReadableSpan], key: str) -> dict[str, int]:
    """What Logfire says it scrubbed: ``path (matched substring)`` → number of spans."""
    notes: Counter[str] = Counter()
    for span in spans:
        raw = (span.attributes or {}).get(key)
        if isinstance(raw, str):
            for note in json.loads(raw):
                notes[f"{'.'.join(str(part) for part in note['path'])} ({note['matched_substring']!r})"] += 1
    return dict(sorted(notes.items()))


# --- variants ------------------------------------------------------------------------------------------
Prepared = tuple[Callable[[int, int], None], Callable[[], None]]
"""``(work, check)``: ``work(start, stop)`` processes ``corpus[start:stop]`` (timed); ``check``, once the whole
corpus went through, asserts the work was done (untimed)."""


@dataclass(frozen=True)
class Variant:
    """A way of processing the corpus; ``prepare`` builds fresh state (untimed) for one pass."""

    name: str
    description: str
    prepare: Callable[[], Prepared]
    processor: Callable[[SpanProcessor], SpanProcessor] | None = None
    """For processor variants: a fresh processor in front of ``sink`` (used by the verification pass)."""


def _processor_pass(
    corpus: list[ReadableSpan], make: Callable[[SpanProcessor], SpanProcessor], extra_check: Callable[[Any], None]
) -> Prepared:
    sink = CountingSink()
    processor = make(sink)
    on_end = processor.on_end

    def work(start: int, stop: int) -> None:
        for span in corpus[start:stop]:
            on_end(span)

    def check() -> None:
        if sink.count != len(corpus):
            raise AssertionError(f"the sink received {sink.count} spans, expected {len(corpus)}")
        extra_check(processor)

    return work, check


def _no_check(_: Any) -> None:
    return None


def _agentdiag_check(processor: Any) -> None:
    failed = getattr(processor, "failed", 0)
    if failed:
        raise AssertionError(f"agentdiag: {failed} spans could not be redacted")


class _ErrorCounter(logging.Handler):
    """Counts Logfire's internal errors: its wrapper logs them and forwards the span anyway."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def make_variants(corpus: list[ReadableSpan], lf: LogfireApi, errors: _ErrorCounter) -> dict[str, Variant]:
    """The variants, in their base rotation order."""

    def identity(sink: SpanProcessor) -> SpanProcessor:
        return sink

    def redacting(policy: policies.Policy) -> Callable[[SpanProcessor], SpanProcessor]:
        def make(sink: SpanProcessor) -> SpanProcessor:
            return RedactingSpanProcessor(sink, policy=policy, hasher=IdHasher(HASH_KEY))

        return make

    def logfire_main(sink: SpanProcessor) -> SpanProcessor:
        return lf.main_wrapper(sink, lf.make_scrubber())

    def logfire_root(sink: SpanProcessor) -> SpanProcessor:
        return lf.root_wrapper(logfire_main(sink))

    def logfire_check(_: Any) -> None:
        if errors.count:
            raise AssertionError(f"logfire logged {errors.count} internal errors (it forwards the raw span then)")

    span_dicts = [lf.span_to_dict(span) for span in corpus]

    def scrub_only() -> Prepared:
        scrub_span = lf.make_scrubber().scrub_span
        fresh = [dict(span) for span in span_dicts]  # scrub_span replaces top-level entries only

        def work(start: int, stop: int) -> None:
            for span in fresh[start:stop]:
                scrub_span(span)

        def check() -> None:
            logfire_check(None)

        return work, check

    variants = [
        Variant(
            "baseline",
            "the counting sink alone (loop + forwarding floor)",
            lambda: _processor_pass(corpus, identity, _no_check),
            identity,
        ),
        Variant(
            "agentdiag",
            "RedactingSpanProcessor(sink, policy=STRICT, hasher=IdHasher(key)), fresh per round",
            lambda: _processor_pass(corpus, redacting(policies.STRICT), _agentdiag_check),
            redacting(policies.STRICT),
        ),
    ]
    local = getattr(policies, "LOCAL", None)
    if isinstance(local, policies.Policy):
        variants.append(
            Variant(
                "agentdiag_local",
                "RedactingSpanProcessor(sink, policy=LOCAL, hasher=IdHasher(key)), fresh per round",
                lambda: _processor_pass(corpus, redacting(local), _agentdiag_check),
                redacting(local),
            )
        )
    variants += [
        Variant(
            "logfire",
            "MainSpanProcessorWrapper(sink, Scrubber(None)): span_to_dict, span tweaks, scrub_span, ReadableSpan",
            lambda: _processor_pass(corpus, logfire_main, logfire_check),
            logfire_main,
        ),
        Variant(
            "logfire_root",
            "CheckSuppressInstrumentationProcessorWrapper(MainSpanProcessorWrapper(...)), as configure() adds it",
            lambda: _processor_pass(corpus, logfire_root, logfire_check),
            logfire_root,
        ),
        Variant(
            "logfire_scrub_only",
            "Scrubber(None).scrub_span on prebuilt span dicts (no span_to_dict, tweaks or rebuild)",
            scrub_only,
        ),
    ]
    return {variant.name: variant for variant in variants}


def verify(corpus: list[ReadableSpan], variants: Mapping[str, Variant], lf: LogfireApi) -> dict[str, Any]:
    """One untimed pass per processor variant: check the work, and record where sentinels survive."""
    findings: dict[str, Any] = {"input": find_sentinels(corpus)}
    missing = [name for name, locations in findings["input"].items() if not locations]
    if missing:
        raise AssertionError(f"the corpus lacks sentinels {missing}: the leak checks would prove nothing")
    for name, variant in variants.items():
        if variant.processor is None or name == "baseline":
            continue
        sink = CapturingSink()
        processor = variant.processor(sink)
        for span in corpus:
            processor.on_end(span)
        if len(sink.spans) != len(corpus):
            raise AssertionError(f"{name}: forwarded {len(sink.spans)} of {len(corpus)} spans")
        survived = {sentinel: locations for sentinel, locations in find_sentinels(sink.spans).items() if locations}
        entry: dict[str, Any] = {"sentinels_surviving": survived}
        if name.startswith("agentdiag"):
            errors = sum(REDACTOR_ERROR_KEY in (span.attributes or {}) for span in sink.spans)
            if errors:
                raise AssertionError(f"{name}: {errors} spans came out as redactor-error tombstones")
        if name == "agentdiag" and survived:
            raise AssertionError(f"agentdiag (STRICT) let sentinels through: {survived}")
        if name.startswith("logfire"):
            entry["scrubbed_notes"] = scrubbed_notes(sink.spans, lf.scrubbed_key)
            entry["spans_marked_scrubbed"] = sum(lf.scrubbed_key in (span.attributes or {}) for span in sink.spans)
        findings[name] = entry
    return findings


# --- timing --------------------------------------------------------------------------------------------
METRICS = ("wall", "cpu")
"""``wall``: ``time.perf_counter_ns`` (the headline); ``cpu``: ``time.thread_time_ns``, this thread's CPU time,
which time slices lost to other processes on a shared machine do not inflate."""


def _round(variants: Mapping[str, Variant], names: list[str], spans: int, chunk: int) -> dict[str, dict[str, int]]:
    """One pass of every variant over the corpus: fresh state per variant (untimed), then chunk by chunk, every
    variant on the same chunk in turn (rotating order), so a burst of load on the machine hits all of them."""
    prepared = {name: variants[name].prepare() for name in names}
    totals = {name: dict.fromkeys(METRICS, 0) for name in names}
    for index, start in enumerate(range(0, spans, chunk)):
        stop = min(start + chunk, spans)
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            work = prepared[name][0]
            gc.collect()
            wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
            work(start, stop)
            cpu, wall = time.thread_time_ns() - cpu, time.perf_counter_ns() - wall
            totals[name]["wall"] += wall
            totals[name]["cpu"] += cpu
    for name in names:
        prepared[name][1]()
    return totals


def measure(
    variants: Mapping[str, Variant], spans: int, *, rounds: int, warmup: int, chunk: int
) -> dict[str, dict[str, list[int]]]:
    """``warmup`` untimed rounds, then ``rounds`` paired rounds; metric → variant → nanoseconds per round."""
    names = list(variants)
    for r in range(warmup):
        _round(variants, names[r % len(names) :] + names[: r % len(names)], spans, chunk)
    samples: dict[str, dict[str, list[int]]] = {metric: {name: [] for name in names} for metric in METRICS}
    for r in range(rounds):
        shift = r % len(names)
        totals = _round(variants, names[shift:] + names[:shift], spans, chunk)
        for name, figures in totals.items():
            for metric, value in figures.items():
                samples[metric][name].append(value)
    return samples


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


RATIOS = (
    ("agentdiag", "logfire"),
    ("agentdiag", "baseline"),
    ("logfire", "baseline"),
    ("agentdiag_local", "logfire"),
    ("agentdiag", "logfire_root"),
    ("logfire_scrub_only", "logfire"),
)


def summarise(samples: Mapping[str, Mapping[str, list[int]]], spans: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per metric: per-variant µs/span (and net of the baseline), and the paired ratios (median of per-round)."""
    variants: dict[str, Any] = {}
    ratios: dict[str, Any] = {}
    for metric, by_variant in samples.items():
        per_span = {name: [ns / spans / 1000 for ns in values] for name, values in by_variant.items()}
        base = per_span["baseline"]
        for name, values in per_span.items():
            figures = variants.setdefault(name, {})
            figures[f"{metric}_us_per_span"] = _summary(values)
            if name != "baseline":
                figures[f"{metric}_net_us_per_span"] = _summary([v - b for v, b in zip(values, base, strict=True)])
        for a, b in RATIOS:
            if a in per_span and b in per_span:
                ratio = _summary([x / y for x, y in zip(per_span[a], per_span[b], strict=True)])
                ratios.setdefault(f"{a}/{b}", {})[metric] = ratio
    return variants, ratios


# --- report --------------------------------------------------------------------------------------------
def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


NOTES = [
    "logfire = MainSpanProcessorWrapper.on_end: span_to_dict; ASGI/SQLAlchemy/HTTP/FastAPI/DB-statement/LangChain/"
    "Google-GenAI/LiteLLM tweaks (scope- or key-gated, mostly no-ops on these spans); error level attributes on "
    "ERROR spans; gen_ai.response.model defaulted from the request model; Scrubber.scrub_span; a new ReadableSpan.",
    "logfire.configure() also wraps it in CheckSuppressInstrumentationProcessorWrapper (measured as logfire_root) "
    "and, depending on options, pending-span, tail-sampling and baggage processors (not measured).",
    "logfire fails open: scrubbing runs inside handle_internal_errors and, if it raises, the original span is "
    "forwarded; agentdiag never forwards the original (a tombstone or nothing, per the policy's on_error).",
    "agentdiag: a fresh processor and IdHasher per round, so unique response and tool-call IDs are hashed (memo "
    "misses) while repeated values (model, conversation id) hit the memos, as in a live process.",
    "baseline is a floor (one Python call per span): ratios against it are large by construction; net_us_per_span "
    "is the cost above it.",
    "wall (perf_counter) is the headline; cpu (thread_time) is shown because on a shared machine other processes' "
    "time slices inflate wall time: when the two disagree, trust cpu.",
]


def _range(figures: Mapping[str, float]) -> str:
    return f"({figures['min']:.2f}-{figures['max']:.2f})"


def print_report(results: Mapping[str, Any]) -> None:
    """The readable summary: figures, ratios, what survived Logfire's scrubbing, and the caveats."""
    corpus = results["corpus"]
    print(
        f"corpus: {corpus['spans']} spans ({corpus['runs']} runs x {RUN_SPANS}: {corpus['spans_by_kind']}); "
        f"{results['rounds']} paired rounds after {results['warmup_rounds']} warm-up, variants interleaved per "
        f"{results['chunk_spans']}-span chunk; "
        f"logfire {results['versions']['logfire']}, opentelemetry-sdk {results['versions']['opentelemetry-sdk']}"
    )
    print()
    print(
        f"{'variant':<20} {'wall µs/span':>13} {'(min-max)':<17} {'net wall':>9} {'CPU µs/span':>12} {'(min-max)':<17}"
    )
    for name, figures in results["variants"].items():
        wall, cpu = figures["wall_us_per_span"], figures["cpu_us_per_span"]
        net = figures.get("wall_net_us_per_span", {"median": 0.0})
        print(
            f"{name:<20} {wall['median']:>13.2f} {_range(wall):<17} {net['median']:>9.2f}"
            f" {cpu['median']:>12.2f} {_range(cpu):<17}"
        )
    print()
    print(f"{'paired ratio':<34} {'wall':>9} {'(min-max)':<17} {'CPU':>9} {'(min-max)':<17}")
    for name, ratio in results["ratios"].items():
        wall, cpu = ratio["wall"], ratio["cpu"]
        print(f"{name:<34} {wall['median']:>8.2f}x {_range(wall):<17} {cpu['median']:>8.2f}x {_range(cpu):<17}")
    print()
    for name, finding in results["findings"].items():
        if name == "input":
            continue
        survived = finding["sentinels_surviving"]
        print(f"{name}: sentinels surviving: {', '.join(survived) if survived else 'none'}")
        for sentinel, locations in survived.items():
            print(f"    {sentinel:<20} " + ", ".join(f"{loc} ({n})" for loc, n in locations.items()))
        if finding.get("scrubbed_notes"):
            print(f"    scrubbed ({finding['spans_marked_scrubbed']} spans marked):")
            for note, n in finding["scrubbed_notes"].items():
                print(f"        {note} ({n})")
    print()
    for note in results["notes"]:
        print(f"note: {note}")


def run(*, runs: int, rounds: int, warmup: int, chunk: int = CHUNK_RUNS * RUN_SPANS) -> dict[str, Any]:
    """Build the corpus, verify every variant, time them; the results as a JSON-ready dict."""
    lf = load_logfire()
    agentdiag.register_names(tools=[TOOL_LOOKUP, TOOL_UPDATE], agents=[AGENT_NAME])
    corpus = build_corpus(runs)
    errors = _ErrorCounter()
    logging.getLogger("logfire").addHandler(errors)
    try:
        variants = make_variants(corpus, lf, errors)
        findings = verify(corpus, variants, lf)
        gc.collect()
        gc.freeze()  # the corpus is long-lived: keep it out of the collections the variants trigger
        try:
            samples = measure(variants, len(corpus), rounds=rounds, warmup=warmup, chunk=chunk)
        finally:
            gc.unfreeze()
    finally:
        logging.getLogger("logfire").removeHandler(errors)
    summary, ratios = summarise(samples, len(corpus))
    for name, figures in summary.items():
        figures["description"] = variants[name].description
    return {
        "benchmark": "redaction_vs_logfire",
        "versions": {
            "python": sys.version.split()[0],
            "opentelemetry-sdk": _version("opentelemetry-sdk"),
            "opentelemetry-api": _version("opentelemetry-api"),
            "logfire": lf.version,
            "otel-agentdiag": agentdiag.__version__,
        },
        "machine": {"platform": platform.platform(), "machine": platform.machine(), "cpus": os.cpu_count()},
        "logfire_import_path": lf.import_path,
        "metrics": {
            "wall": "time.perf_counter_ns (headline)",
            "cpu": "time.thread_time_ns: this thread's CPU time (not inflated by other processes' time slices)",
        },
        "chunk_spans": chunk,
        "corpus": {"runs": runs, "spans": len(corpus), "spans_by_kind": span_kind_counts(corpus)},
        "rounds": rounds,
        "warmup_rounds": warmup,
        "variants": summary,
        "ratios": ratios,
        "findings": findings,
        "notes": NOTES,
        "samples_ns": samples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.redaction_vs_logfire",
        description="Per-span cost of RedactingSpanProcessor against Logfire's scrubbing, as paired ratios.",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run (40 agent runs, 5 rounds)")
    parser.add_argument("--runs", type=int, default=None, help="agent runs in the corpus (9 spans each)")
    parser.add_argument("--rounds", type=int, default=None, help="paired rounds")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/redaction_vs_logfire.json"))
    args = parser.parse_args(argv)
    runs, rounds, warmup = (40, 5, 1) if args.quick else (500, 31, 3)
    results = run(runs=args.runs or runs, rounds=args.rounds or rounds, warmup=warmup)
    results["quick"] = args.quick
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print_report(results)
    print(f"results: {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
