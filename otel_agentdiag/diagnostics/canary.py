"""The redaction canary: prove, on this machine and with this configuration, that nothing leaks.

:func:`run_canary` sends spans carrying known sentinel strings in every surface of a span — name,
attributes, correlation IDs, tool/agent names, events, the exception, status, links and their trace state,
the resource, the instrumentation scope — through the redacting processors of the resolved destinations
(the same policies, hash keys and processor classes ``configure()`` installs), into an in-memory sink in
place of the SQLite store or the OTLP exporter. It then searches everything that came out for every
sentinel, wherever it went, and reports per surface.

Sentinels are random per run and only ever placed where the policy must remove them (unknown keys, keys that
carry data under an allowed family such as ``gen_ai.usage.<sentinel>``, values that break their rule, a finish
reason no provider documents, raw IDs, unregistered names, free text, schema URLs that are not OpenTelemetry's):
a sentinel that survives is a leak.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags, TraceState

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.destinations import Destination
from otel_agentdiag.redaction.processor import RedactingSpanProcessor

SURFACES = (
    "span_name",
    "attributes",
    "ids",
    "names",
    "events",
    "exception",
    "status",
    "links",
    "resource",
    "scope",
    "credentials",
)
"""The surfaces of a span the canary covers, in report order. ``credentials`` are credential and personal-data
formats (and disguised ones) in values that allowed keys and resource attributes would otherwise keep."""

_DIGEST_PREFIXES = ("hmac-sha256:", "sha256:")


def _sentinels() -> dict[str, dict[str, str]]:
    """Surface → label → sentinel. Every sentinel contains one random token, so matches cannot be accidental.

    A plain sentinel (``cnry{label}{token}``) must pass the public-safety check by itself, or an opened surface
    would keep it out for the wrong reason and the canary would miss the leak it is there to see: a token that
    makes one of them look random (about 1 run in 250: the random-token check) is drawn again."""
    from otel_agentdiag.redaction.recognizers import is_sensitive

    while True:
        token = secrets.token_hex(6)
        plain: list[str] = []
        sentinels = _sentinels_with(token, plain)
        if not any(is_sensitive(value) for value in plain):
            return sentinels


def _sentinels_with(token: str, plain: list[str]) -> dict[str, dict[str, str]]:
    """:func:`_sentinels` for one ``token``; every plain sentinel made is appended to ``plain``."""

    def s(label: str) -> str:
        value = f"cnry{label}{token}"
        plain.append(value)
        return value

    return {
        "span_name": {"name": f"Prompt was {s('spanname')}", "child_name": s("childname")},
        "attributes": {
            "unknown_key": s("unknownvalue"),
            "content": s("content"),
            "credential": f"sk-{s('credential')}",
            "email": f"{s('email')}@example.com",
            "url": f"https://user:{s('urlpassword')}@example.com/v1?key={s('urlquery')}",
            "path": f"/home/{s('pathuser')}/secrets.txt",
            "error_type": f"ValueError: {s('errortext')}",
            "unknown_key_name": s("keyname"),
            # a data-carrying key under an allowed family, and a finish reason no provider documents
            "usage_key_name": s("usagekey"),
            "finish_reason": s("finishreason"),
        },
        "ids": {
            "conversation": s("conversation"),
            "session": s("session"),
            "user": f"{s('user')}@example.com",
            "agent_id": s("agentid"),
            "tool_call": s("toolcall"),
            "response": s("response"),
        },
        "names": {
            "tool": s("tool"),
            "agent": s("agent"),
            # Declared in code, yet credential-shaped: the registration is refused, the name leaves as _OTHER.
            "registered_secret": f"sk_live_{s('registeredname')}",
        },
        "events": {"event_name": s("eventname"), "event_value": s("eventvalue")},
        "exception": {"message": s("exceptionmessage")},
        "status": {"description": s("status")},
        "links": {"link_value": s("linkvalue"), "trace_state": s("tracestate")},
        "resource": {
            "host": s("host"),
            "command_line": f"python agent.py --api-key {s('commandline')}",
            "namespace": f"{s('namespace')}@example.com",
            "sdk_key_name": s("sdkkey"),
            "schema_url": f"https://opentelemetry.io.{s('resourceschema')}.example/schemas/1.37.0",
        },
        "scope": {
            "scope_value": s("scopevalue"),
            "scope_name": f"/home/{s('scopename')}/lib",
            "schema_url": f"https://opentelemetry.io/schemas/1.37.0/{s('scopeschema')}",
        },
        "credentials": {
            "stripe": f"rk_live_{s('stripe')}",
            "huggingface": f"hf_{s('huggingface')}qx7lm2zp",  # 30+ letters and digits, as Hugging Face makes them
            "dsn": f"svc:{s('dsnpassword')}@db.internal:5432",
            # Disguised: full-width letters, a zero-width space, a bidi override (matched after normalising).
            "full_width": "\uff53\uff4b\uff0d\uff50\uff52\uff4f\uff4a\uff0d" + s("fullwidth"),
            "zero_width": "gh\u200bp_" + s("zerowidth"),
            "bidi": "\u202e" + s("bidi"),
            "card": _card_number(),
        },
    }


def _card_number() -> str:
    """A random 16-digit number that passes the Luhn check (a card number's shape), in groups of four."""
    digits = [4] + [secrets.randbelow(10) for _ in range(14)]
    total = 0
    for index, digit in enumerate(reversed(digits)):
        doubled = digit * 2 if index % 2 == 0 else digit
        total += doubled - 9 if doubled > 9 else doubled
    digits.append((10 - total % 10) % 10)
    text = "".join(map(str, digits))
    return " ".join(text[i : i + 4] for i in range(0, 16, 4))


@dataclass
class DestinationResult:
    """What came out of one destination's redacting processor."""

    destination: str
    policy: str
    spans_sent: int
    spans_received: int
    leaks: dict[str, list[str]] = field(default_factory=dict)
    """Origin surface → the output surfaces where one of its sentinels was found."""
    ids_hashed: bool = False
    """Every correlation ID that came out is a digest."""

    @property
    def ok(self) -> bool:
        return not self.leaks and self.spans_received == self.spans_sent and self.ids_hashed

    def surfaces(self) -> dict[str, str]:
        return {surface: ("LEAKED" if surface in self.leaks else "clean") for surface in SURFACES}

    def as_dict(self) -> dict[str, Any]:
        return {
            "destination": self.destination,
            "policy": self.policy,
            "spans_sent": self.spans_sent,
            "spans_received": self.spans_received,
            "ids_hashed": self.ids_hashed,
            "surfaces": self.surfaces(),
            "leaks": [{"surface": k, "found_in": v} for k, v in sorted(self.leaks.items())],
            "ok": self.ok,
        }


@dataclass
class CanaryReport:
    results: list[DestinationResult]

    @property
    def leaked(self) -> bool:
        return any(not r.ok for r in self.results)

    def as_dict(self) -> dict[str, Any]:
        return {"leaked": self.leaked, "results": [r.as_dict() for r in self.results]}


def _emit(provider: TracerProvider, sentinels: Mapping[str, Mapping[str, str]]) -> int:
    """Record the canary spans on ``provider``; returns how many were made."""
    attrs, ids, names = sentinels["attributes"], sentinels["ids"], sentinels["names"]
    credentials = sentinels["credentials"]
    scope = sentinels["scope"]
    tracer = provider.get_tracer(
        scope["scope_name"], "1.0", scope["schema_url"], attributes={"canary.scope": scope["scope_value"]}
    )
    remote = SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0x00F067AA0BA902B7,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", sentinels["links"]["trace_state"])]),
    )
    with tracer.start_as_current_span(
        sentinels["span_name"]["name"],
        attributes={
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.GEN_AI_AGENT_NAME: names["agent"],
            sc.GEN_AI_CONVERSATION_ID: ids["conversation"],
            sc.SESSION_ID: ids["session"],
            sc.USER_ID: ids["user"],
            sc.GEN_AI_AGENT_ID: ids["agent_id"],
            attrs["unknown_key_name"]: "x",
            "app.prompt": attrs["unknown_key"],
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": attrs["content"]}]),
            sc.GEN_AI_PROVIDER_NAME: attrs["email"],
            sc.SERVER_ADDRESS: attrs["url"],
        },
        links=[Link(remote, {"why": sentinels["links"]["link_value"], sc.GEN_AI_REQUEST_MODEL: attrs["path"]})],
        record_exception=False,
        set_status_on_exception=False,
    ) as run:
        run.add_event(sentinels["events"]["event_name"], {"detail": sentinels["events"]["event_value"]})
        run.add_event("gen_ai.content.prompt", {"gen_ai.prompt": attrs["content"]})
        with tracer.start_as_current_span(
            sentinels["span_name"]["child_name"],
            attributes={
                sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
                sc.GEN_AI_REQUEST_MODEL: attrs["credential"],
                sc.GEN_AI_RESPONSE_MODEL: credentials["stripe"],
                sc.GEN_AI_PROVIDER_NAME: credentials["huggingface"],
                "llm.model_name": credentials["dsn"],
                sc.GEN_AI_RESPONSE_ID: ids["response"],
                sc.ERROR_TYPE: attrs["error_type"],
                sc.GEN_AI_USAGE_PREFIX + attrs["usage_key_name"]: 7,
                sc.GEN_AI_RESPONSE_FINISH_REASONS: ("stop", attrs["finish_reason"]),
            },
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool",
            attributes={
                sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                sc.GEN_AI_TOOL_NAME: names["tool"],
                "tool.name": names["registered_secret"],
                sc.GEN_AI_TOOL_CALL_ID: ids["tool_call"],
                "gen_ai.tool.call.arguments": json.dumps({"query": attrs["content"]}),
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as tool:
            try:
                raise ValueError(sentinels["exception"]["message"])
            except ValueError as exc:
                tool.record_exception(exc, {"exception.escaped": True})
                tool.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        run.set_status(Status(StatusCode.ERROR, sentinels["status"]["description"]))
    return 3


def _output_surfaces(span: ReadableSpan) -> dict[str, str]:
    """Every surface of an exported span as text, for searching."""
    link_parts = []
    for link in span.links:
        link_parts.append(json.dumps(dict(link.attributes or {}), default=str))
        link_parts.append(link.context.trace_state.to_header() if link.context.trace_state else "")
    scope = span.instrumentation_scope
    scope_text = ""
    if scope is not None:
        scope_text = json.dumps(
            [scope.name, scope.version, scope.schema_url, dict(getattr(scope, "attributes", None) or {})], default=str
        )
    return {
        "span_name": span.name,
        "attributes": json.dumps(dict(span.attributes or {}), default=str),
        "events": json.dumps([[e.name, dict(e.attributes or {})] for e in span.events], default=str),
        "status": span.status.description or "",
        "links": " ".join(link_parts),
        "resource": json.dumps([dict(span.resource.attributes), span.resource.schema_url], default=str),
        "scope": scope_text,
        "trace_state": span.context.trace_state.to_header() if span.context.trace_state else "",
        "everything": span.to_json(),
    }


def _ids_hashed(spans: Sequence[ReadableSpan]) -> bool:
    seen = 0
    for span in spans:
        for key in sc.CORRELATION_ID_KINDS:
            value = (span.attributes or {}).get(key)
            if value is None:
                continue
            seen += 1
            if not isinstance(value, str) or not value.startswith(_DIGEST_PREFIXES):
                return False
    return seen > 0


def _search(spans: Sequence[ReadableSpan], sentinels: Mapping[str, Mapping[str, str]]) -> dict[str, list[str]]:
    leaks: dict[str, set[str]] = {}
    outputs = [_output_surfaces(span) for span in spans]
    for origin, labelled in sentinels.items():
        for sentinel in labelled.values():
            needle = _needle(sentinel)
            for output in outputs:
                for where, text in output.items():
                    if needle in text.lower() or needle in text.replace(" ", "").replace("-", ""):
                        leaks.setdefault(origin, set()).add(where)
    return {origin: sorted(found - {"everything"} or {"everything"}) for origin, found in leaks.items()}


def _needle(sentinel: str) -> str:
    """The random part of a sentinel (lower case): found even if a sentinel was cut, re-cased or escaped. A
    sentinel made of digits (the card number) is searched for as its digits, without separators."""
    if "cnry" not in sentinel:
        return "".join(c for c in sentinel if c.isdigit())
    start = sentinel.index("cnry")
    end = start + 4
    while end < len(sentinel) and (sentinel[end].isalnum()):
        end += 1
    return sentinel[start:end].lower()


def _registry(sentinels: Mapping[str, Mapping[str, str]]) -> NameRegistry:
    """A fresh registry holding what the canary declares in code, as a framework integration would: among it a
    credential-shaped name, which the registry must refuse (its warning is the canary's own, not shown)."""
    names = NameRegistry()
    quiet = logging.getLogger(NameRegistry.__module__)
    muted = logging.Filter("otel_agentdiag.diagnostics.canary")  # passes nothing the registry logs
    quiet.addFilter(muted)
    try:
        names.register_valid("tool", [sentinels["names"]["registered_secret"]])
    finally:
        quiet.removeFilter(muted)
    return names


def run_canary(destinations: Iterable[Destination], resource: Resource | None = None) -> CanaryReport:
    """Send the canary through each destination's redacting processor and report what survived."""
    results = []
    for destination in destinations:
        sentinels = _sentinels()
        res, credentials = sentinels["resource"], sentinels["credentials"]
        # Built whole rather than merged: Resource.merge() keeps the first schema URL when both have one.
        canary_resource = Resource(
            {
                **(resource or Resource.create({})).attributes,
                "host.name": res["host"],
                "process.command_line": res["command_line"],
                "service.namespace": res["namespace"],
                "telemetry.sdk." + res["sdk_key_name"]: "1.0",
                "service.version": credentials["full_width"],
                "deployment.environment.name": credentials["zero_width"],
                "deployment.environment": credentials["bidi"],
                "service.instance.id": credentials["card"],
            },
            res["schema_url"],
        )
        sink = InMemorySpanExporter()
        processor = RedactingSpanProcessor(
            SimpleSpanProcessor(sink), policy=destination.policy, hasher=destination.hasher, names=_registry(sentinels)
        )
        provider = TracerProvider(resource=canary_resource, shutdown_on_exit=False)
        provider.add_span_processor(processor)
        try:
            sent = _emit(provider, sentinels)
            provider.force_flush()
            spans = list(sink.get_finished_spans())
        finally:
            provider.shutdown()
        results.append(
            DestinationResult(
                destination=destination.name,
                policy=destination.policy.name,
                spans_sent=sent,
                spans_received=len(spans),
                leaks=_search(spans, sentinels),
                ids_hashed=_ids_hashed(spans),
            )
        )
    return CanaryReport(results)
