"""Property tests of ``SpanRedactor``: spans built from strategies, under STRICT, LOCAL and a TOML policy.

Spans are plain ``ReadableSpan`` objects (no provider, no processor), so every surface can be filled with
anything OpenTelemetry accepts: attributes, events, links with a W3C ``tracestate``, status, resource and
instrumentation scope. A sentinel (``Zq9SENTINELx``, bare or hidden in e-mail addresses, API keys, URLs,
paths, JSON and prose) is planted wherever the policy must not let free text through.

Where free text is allowed *by design* the sentinel is planted only in forms the policy must still reject:

- a token rule (``gen_ai.request.model``, ``error.type``, ...) keeps any identifier-shaped string, so only
  non-token forms (spaces, quotes, ``@``, ``://``) go into token-ruled values;
- a scalar rule (allowed resource keys, scope name and version) keeps any printable, non-sensitive string
  that is not JSON, so only credential/e-mail/URL/path/JSON forms go there.

All runs are derandomised (the same examples every time) and bounded; see ``SETTINGS``.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NAME_PATTERN, NameRegistry
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.policy_file import policy_from_dict
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.processor import SpanRedactor
from otel_agentdiag.redaction.reasons import (
    EVENT_DROPPED,
    HASHED,
    INVALID_VALUE,
    PUBLIC_SAFETY_VIOLATION,
    REASONS,
    SPAN_NAME,
    STATUS_DESCRIPTION,
    TOO_LONG,
    UNKNOWN_KEY,
)
from otel_agentdiag.redaction.recognizers import is_sensitive
from otel_agentdiag.redaction.rules import (
    MAX_ID_LENGTH,
    Boolean,
    ClosedSet,
    Enum,
    FloatRange,
    HashedId,
    IntRange,
    RegisteredName,
    Rule,
    Scalar,
    StringArray,
    Token,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SETTINGS = settings(
    derandomize=True,  # the same examples on every run: a CI failure reproduces locally
    database=None,  # nothing written to .hypothesis/
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=False,
)
BIG = settings(SETTINGS, phases=(Phase.explicit, Phase.reuse, Phase.generate))
"""For the properties over whole random spans: no shrinking (it takes longer than the search on spans this
large). The derandomised first failing example is reported as found; the assertion messages name the
surface, key and text, which is the reproduction."""
LEAK_EXAMPLES = 60
"""Examples for the leak property (each span carries every key of the policy, so these are the slowest)."""
MANY = 80
"""Examples for the idempotence property."""
SOME = 50
"""Examples for the other properties."""

HASH_KEY = b"7a1306ff89762a2aba4724e8a5a05a95bdf0922143257fcff2246e711ec655f2"
HASHER = IdHasher(HASH_KEY)
DIGEST = re.compile(rf"hmac-sha256:{HASHER.key_id}:[0-9a-f]{{64}}")
PREFIX = sc.AGENTDIAG_REDACTION_PREFIX
COUNTER_KEYS = frozenset(PREFIX + reason for reason in REASONS)
REMOVAL_REASONS = (UNKNOWN_KEY, INVALID_VALUE, TOO_LONG, PUBLIC_SAFETY_VIOLATION)

# --- the policies under test ----------------------------------------------------------------------------
POLICY_TOML = """
name = "strict+app"
extends = "strict"
blocked_values = ["(?i)confidential"]

[allowed_keys]
"app.tier" = { type = "enum", values = ["free", "pro", "enterprise"] }
"app.region" = { type = "token", pattern = "[a-z]{2}-[a-z]+-[0-9]", max_length = 16 }
"app.retry.count" = { type = "int", min = 0, max = 20 }
"app.score" = { type = "float", min = 0.0, max = 1.0 }
"app.flags" = { type = "string_array", pattern = "[a-z_]+", max_length = 24, max_items = 8 }
"app.cached" = { type = "bool" }
"app.account.id" = { type = "hashed_id", id_kind = "account" }
"app.metric.*" = { type = "float", min = 0, max = 1e6 }
"gen_ai.request.model" = { type = "registered_name", name_kind = "model" }
"gen_ai.request.seed" = false

[allowed_events]
"app.retry" = ["app.retry.count", "error.type"]

[resource_keys]
"k8s.namespace.name" = { type = "scalar", max_length = 63 }
"service.instance.id" = false

[scope_keys]
"library.component" = { type = "enum", values = ["http", "db"] }
"""
TOML_POLICY = policy_from_dict(tomllib.loads(POLICY_TOML), source="strict-app.toml")
POLICIES: dict[str, Policy] = {"strict": STRICT, "local": LOCAL, "toml": TOML_POLICY}
policies = pytest.mark.parametrize("policy_name", list(POLICIES))
"""Parametrised by name: a falsifying example then prints ``policy='strict'``, not the whole policy."""


def _redactor(policy: Policy, names: NameRegistry | None = None) -> SpanRedactor:
    return SpanRedactor(policy, HASHER, names if names is not None else NameRegistry())


def _exact_keys(table: Mapping[str, Rule]) -> list[str]:
    return sorted(k for k in table if "*" not in k)


def _pattern_prefixes(table: Mapping[str, Rule]) -> list[str]:
    return sorted(k[:-1] for k in table if k.endswith("*") and k.count("*") == 1)


# --- sentinels ------------------------------------------------------------------------------------------
SENTINEL = "Zq9SENTINELx"
NEEDLE = SENTINEL.lower()

BARE_FORMS = (SENTINEL, SENTINEL.lower(), SENTINEL.upper(), f"tool_{SENTINEL}", f"{SENTINEL}-42")
"""Identifier-shaped: a token rule may keep these by design, so they never go into token-ruled values."""
TEXT_FORMS = (
    f'{{"prompt": "{SENTINEL}"}}',
    f'{{"messages":[{{"role":"user","content":"{SENTINEL}"}}]}}',
    f"please summarise {SENTINEL} for me",
    f"{SENTINEL}\nsecond line",
    f"[{SENTINEL}]",
    f"{SENTINEL} ",
)
"""Free text that is not a credential: no token pattern should accept it."""
SENSITIVE_FORMS = (
    f"{NEEDLE}.alice@example.com",
    f"sk-{SENTINEL}abcdef0123456789",
    f"sk-proj-{SENTINEL}_0123456789abcdef",
    f"ghp_{SENTINEL}abcdefghijklmnopqrst",
    f"https://example.com/{SENTINEL}?token=1",
    f"postgres://app:{SENTINEL}@db.example.internal:5432/app",
    f"/home/alice/{SENTINEL}.txt",
    f"/tmp/{SENTINEL}/upload.bin",
    f"C:\\Users\\{SENTINEL}\\notes.txt",
    f"Bearer {SENTINEL}",
    f"~/{SENTINEL}/.ssh/id_rsa",
)
"""Forms every string rule must reject (the public-safety check), even where free text is allowed."""
ALL_FORMS = BARE_FORMS + TEXT_FORMS + SENSITIVE_FORMS

_printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20)


def _embedded(forms: tuple[str, ...]) -> st.SearchStrategy[str]:
    """A form inside longer text, separated by spaces (so a word boundary precedes it)."""
    return st.builds(lambda a, form, b: f"{a} {form} {b}", _printable, st.sampled_from(forms), _printable)


_long_sentinel = st.builds(
    lambda n, form, at_end: ("a" * n + " " + form) if at_end else (form + " " + "a" * n),
    st.integers(200, 5000),
    st.sampled_from(ALL_FORMS),
    st.booleans(),
)
any_sentinel = st.one_of(st.sampled_from(ALL_FORMS), _embedded(ALL_FORMS), _long_sentinel)
"""Any form: for places where nothing free-form may appear (unknown keys, IDs, names, status, ...)."""
non_token_sentinel = st.one_of(st.sampled_from(TEXT_FORMS + SENSITIVE_FORMS), _embedded(ALL_FORMS), _long_sentinel)
"""For token- and string-array-ruled values."""
JSON_FORMS = (f'{{"prompt": "{SENTINEL}"}}', f'["{SENTINEL}", 1]', f'[{{"content": "{SENTINEL}"}}]')
sensitive_sentinel = st.one_of(st.sampled_from(SENSITIVE_FORMS + JSON_FORMS), _embedded(SENSITIVE_FORMS))
"""For scalar-ruled values (resource keys, scope name and version): credentials, e-mail addresses, URLs,
paths and JSON text, which a scalar rule rejects; other prose is a scalar by design."""

# --- OpenTelemetry values -------------------------------------------------------------------------------
ints = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, -1, 2**63 - 1, -(2**63), 2**64, 10**12, 10**12 + 1, 10**9 + 1]),
)
"""Integers OpenTelemetry accepts, within float range (the huge ones have a test of their own)."""
floats = st.one_of(st.floats(), st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308]))
long_strings = st.integers(250, 6000).map(lambda n: "x" * n)
scalars = st.one_of(st.text(max_size=40), ints, floats, st.booleans(), long_strings)
homogeneous_lists = st.one_of(
    st.lists(st.text(max_size=12), max_size=5),
    st.lists(ints, max_size=5),
    st.lists(floats, max_size=5),
    st.lists(st.booleans(), max_size=5),
).map(tuple)
otel_values = st.one_of(scalars, homogeneous_lists)


def _leaky_category(rule: Rule | None) -> str:
    if isinstance(rule, StringArray):
        return "array"
    if isinstance(rule, Token):
        return "token"
    if isinstance(rule, Scalar):
        return "scalar"
    return "closed"  # unknown keys, ids, registered names, enums, numbers, booleans: no string form may pass


_PLANTED: dict[str, st.SearchStrategy[Any]] = {
    "array": st.lists(non_token_sentinel, min_size=1, max_size=4).map(tuple),
    "token": non_token_sentinel,
    "scalar": sensitive_sentinel,
    "closed": st.one_of(any_sentinel, st.lists(any_sentinel, min_size=1, max_size=3).map(tuple)),
}
_LEAKY_VALUES = {category: st.one_of(planted, planted, otel_values) for category, planted in _PLANTED.items()}
"""Per kind of rule: a random value, or (twice as likely) a sentinel in a form the rule must reject."""


def _sentinel_keys(lookup: Any) -> st.SearchStrategy[str]:
    """Keys that carry the sentinel and that the policy does not know (keys matching a pattern have a test of
    their own: test_no_sentinel_in_keys_matched_by_a_pattern)."""
    prefixes = st.sampled_from(["", "app.", "llm.input_messages.0.message.", "gen_ai.prompt.", "db.statement."])
    return st.builds(str.__add__, prefixes, st.one_of(st.sampled_from(ALL_FORMS), _embedded(ALL_FORMS))).filter(
        lambda key: lookup(key) is None
    )


_suffix = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)


def _keys(table: Mapping[str, Rule], lookup: Any) -> st.SearchStrategy[str]:
    """Known keys, keys matching a pattern, arbitrary keys and sentinel keys."""
    options = [st.text(min_size=1, max_size=30), _sentinel_keys(lookup)]
    if exact := _exact_keys(table):
        options += [st.sampled_from(exact)] * 3
    if prefixes := _pattern_prefixes(table):
        options.append(st.builds(str.__add__, st.sampled_from(prefixes), _suffix))
    return st.one_of(options)


_STRATEGIES: dict[tuple[str, int, int], tuple[Mapping[str, Rule], st.SearchStrategy[Any]]] = {}


def _cached(kind: str, table: Mapping[str, Rule], size: int, build: Any) -> st.SearchStrategy[Any]:
    """Strategies are built once per policy table (building them per example dominates the run time). The
    table is kept with its strategy, so its id cannot be reused by another table."""
    key = (kind, id(table), size)
    cached = _STRATEGIES.get(key)
    if cached is None or cached[0] is not table:
        cached = _STRATEGIES[key] = (table, build())
    return cached[1]


def _leaky_attributes(
    table: Mapping[str, Rule], lookup: Any, max_size: int = 10, every_key: bool = False
) -> st.SearchStrategy[dict]:
    """Up to ``max_size`` keys from ``_keys`` with leaky values; with ``every_key``, also every exact key of
    ``table``, so that each rule of the policy is exercised in every example."""

    def build() -> st.SearchStrategy[dict]:
        keys = _keys(table, lookup)
        known = st.fixed_dictionaries(
            {k: _LEAKY_VALUES[_leaky_category(lookup(k))] for k in _exact_keys(table) if every_key}
        )

        @st.composite
        def attributes(draw: st.DrawFn) -> dict[str, Any]:
            out = draw(known)
            for key in draw(st.lists(keys, max_size=max_size)):
                out[key] = draw(_LEAKY_VALUES[_leaky_category(lookup(key))])
            return out

        return attributes()

    return _cached(f"leaky:{every_key}", table, max_size, build)


def _trace_state(sentinel: bool) -> TraceState:
    if not sentinel:
        return TraceState()
    return TraceState([("vendor", f"{SENTINEL}-abc"), (NEEDLE, "1")])


def _context(trace_id: int, span_id: int, sentinel: bool, remote: bool = False) -> SpanContext:
    return SpanContext(trace_id, span_id, remote, TraceFlags(TraceFlags.SAMPLED), _trace_state(sentinel))


trace_ids = st.integers(1, 2**128 - 1)
span_ids = st.integers(1, 2**64 - 1)


_exception_attributes = st.fixed_dictionaries(
    {
        sc.EXCEPTION_MESSAGE: any_sentinel,
        sc.EXCEPTION_STACKTRACE: any_sentinel.map(
            lambda s: f'Traceback (most recent call last):\n  File "/home/alice/{SENTINEL}/agent.py"\n{s}'
        ),
    },
    optional={
        sc.EXCEPTION_TYPE: st.one_of(non_token_sentinel, st.just("ValueError")),
        sc.EXCEPTION_ESCAPED: st.one_of(st.booleans(), any_sentinel),
        sc.AGENTDIAG_EXCEPTION_FINGERPRINT: any_sentinel,
    },
)
_planted_ids_and_names = st.fixed_dictionaries(
    {},
    optional={
        key: any_sentinel for key in (*sc.CORRELATION_ID_KINDS, sc.GEN_AI_TOOL_NAME, sc.GEN_AI_AGENT_NAME, "tool.name")
    },
)
"""Correlation ids and tool/agent names, as raw strings carrying the sentinel."""
_resource_planted = st.fixed_dictionaries(
    {"service.name": sensitive_sentinel},
    optional={
        "host.name": any_sentinel,
        "process.command_line": any_sentinel.map(lambda s: f"python agent.py --api-key={s}"),
        "process.owner": any_sentinel,
    },
)
_statuses = st.one_of(
    st.just(Status(StatusCode.UNSET)),
    st.just(Status(StatusCode.OK)),
    any_sentinel.map(lambda d: Status(StatusCode.ERROR, d)),
)


def _make_event(name: str, own: dict[str, Any], exception: dict[str, Any], timestamp: int) -> Event:
    return Event(name, {**own, **exception} if name == sc.EXCEPTION_EVENT_NAME else own, timestamp)


def leaky_spans(policy: Policy, every_key: bool = False) -> st.SearchStrategy[ReadableSpan]:
    """Spans with sentinels planted on every surface, next to random and known keys and values. With
    ``every_key``, the span carries every exact key of the policy (slower, but each example then tries each
    rule); else a few keys drawn from known, pattern, arbitrary and sentinel keys."""
    return _cached(f"leaky-span:{every_key}", policy.allowed_keys, id(policy), lambda: _leaky_spans(policy, every_key))


def _leaky_spans(policy: Policy, every_key: bool) -> st.SearchStrategy[ReadableSpan]:
    attributes = _leaky_attributes(policy.allowed_keys, policy.rule_for, 6 if every_key else 10, every_key=every_key)
    small_attributes = _leaky_attributes(policy.allowed_keys, policy.rule_for, 4)
    event_names = st.one_of(
        st.sampled_from(sorted(policy.allowed_events)),
        st.just(sc.EXCEPTION_EVENT_NAME),
        any_sentinel,
        st.text(max_size=20),
    )
    events = st.lists(
        st.builds(_make_event, event_names, small_attributes, _exception_attributes, st.integers(1, 2**62)),
        max_size=3,
    )
    links = st.lists(
        st.builds(
            lambda t, s, remote, attrs: Link(_context(t, s, True, remote), attrs),
            trace_ids,
            span_ids,
            st.booleans(),
            small_attributes,
        ),
        max_size=2,
    )
    resource_attributes = _leaky_attributes(policy.resource_keys, policy.resource_rule_for, 4, every_key=True)
    scopes = st.builds(
        InstrumentationScope,
        st.one_of(sensitive_sentinel, st.just("third.party.instrumentation")),
        st.one_of(st.none(), sensitive_sentinel, st.just("1.2.3")),
        st.sampled_from([None, "https://opentelemetry.io/schemas/1.26.0"]),
        _leaky_attributes(policy.scope_keys, policy.scope_rule_for, 4),
    )
    parents = st.one_of(st.none(), st.builds(lambda t, s: _context(t, s, True, True), trace_ids, span_ids))
    names = st.one_of(any_sentinel, st.sampled_from(sorted(policy.allowed_span_names)), st.text(max_size=30))

    @st.composite
    def spans(draw: st.DrawFn) -> ReadableSpan:
        start = draw(st.integers(1, 2**62))
        return ReadableSpan(
            name=draw(names),
            context=_context(draw(trace_ids), draw(span_ids), True),
            parent=draw(parents),
            resource=Resource({**draw(resource_attributes), **draw(_resource_planted)}),
            attributes={**draw(attributes), **draw(_planted_ids_and_names)},
            events=draw(events),
            links=draw(links),
            kind=draw(st.sampled_from(list(SpanKind))),
            status=draw(_statuses),
            start_time=start,
            end_time=start + draw(st.integers(0, 10**12)),
            instrumentation_scope=draw(scopes),
        )

    return spans()


# --- well-formed values ---------------------------------------------------------------------------------
def _kept_string(policy: Policy, text: str) -> bool:
    return not is_sensitive(text) and not policy.is_blocked(text)


def _kept_scalar_string(policy: Policy, text: str) -> bool:
    return _kept_string(policy, text) and text[:1] not in ("{", "[")  # JSON text is not a scalar


def _token_values(rule: Token, policy: Policy) -> st.SearchStrategy[str]:
    return st.from_regex(rule.pattern, fullmatch=True).filter(
        lambda s: len(s) <= rule.max_length and _kept_string(policy, s)
    )


registrable_names = st.from_regex(NAME_PATTERN, fullmatch=True)


def _valid_value(rule: Rule, policy: Policy) -> st.SearchStrategy[Any]:
    """Values ``rule`` keeps unchanged (for a RegisteredName: once the name is registered)."""
    if isinstance(rule, Enum):
        return st.sampled_from(sorted(rule.values, key=str))
    if isinstance(rule, Boolean):
        return st.booleans()
    if isinstance(rule, IntRange):
        return st.integers(rule.minimum, rule.maximum)
    if isinstance(rule, FloatRange):
        return st.one_of(
            st.floats(rule.minimum, rule.maximum, allow_nan=False, allow_infinity=False),
            st.integers(math.ceil(rule.minimum), math.floor(rule.maximum)),
        )
    if isinstance(rule, StringArray):
        return st.lists(_token_values(rule.item, policy), max_size=min(rule.max_items, 5)).map(tuple)
    if isinstance(rule, ClosedSet):
        member = st.sampled_from(sorted(rule.values)).filter(lambda s: _kept_string(policy, s))
        return member if rule.max_items is None else st.lists(member, max_size=min(rule.max_items, 5)).map(tuple)
    if isinstance(rule, Token):
        return _token_values(rule, policy)
    if isinstance(rule, Scalar):
        text = st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=min(rule.max_length, 60))
        return st.one_of(
            text.filter(lambda s: _kept_scalar_string(policy, s)),
            st.integers(-(2**63), 2**63 - 1),
            st.floats(allow_nan=False, allow_infinity=False),
            st.booleans(),
        )
    if isinstance(rule, RegisteredName):
        return registrable_names.filter(lambda s: _kept_string(policy, s))
    raise AssertionError(f"no well-formed values for {rule!r}")


def _kept_keys(table: Mapping[str, Rule], lookup: Any) -> st.SearchStrategy[str]:
    """Keys whose rule keeps well-formed values unchanged (everything but hashed ids)."""
    options = []
    if exact := [k for k in _exact_keys(table) if not isinstance(table[k], HashedId)]:
        options.append(st.sampled_from(exact))
    if prefixes := _pattern_prefixes(table):
        options.append(st.builds(str.__add__, st.sampled_from(prefixes), _suffix))
    return st.one_of(options).filter(lambda k: not isinstance(lookup(k), HashedId))


def _valid_attributes(policy: Policy, table: Mapping[str, Rule], lookup: Any, max_size: int) -> st.SearchStrategy[dict]:
    if not table:
        return st.just({})

    def build() -> st.SearchStrategy[dict]:
        keys = _kept_keys(table, lookup)
        values: dict[int, st.SearchStrategy[Any]] = {}

        @st.composite
        def attributes(draw: st.DrawFn) -> dict[str, Any]:
            out = {}
            for key in draw(st.lists(keys, max_size=max_size, unique=True)):
                rule = lookup(key)
                if id(rule) not in values:
                    values[id(rule)] = _valid_value(rule, policy)
                out[key] = draw(values[id(rule)])
            return out

        return attributes()

    return _cached("valid:" + policy.name, table, max_size, build)


def _register_all(names: NameRegistry, policy: Policy, attributes: Mapping[str, Any]) -> None:
    for key, value in attributes.items():
        rule = policy.rule_for(key)
        if isinstance(rule, RegisteredName):
            names.register(**{rule.name_kind + "s": [value]})


def well_formed_spans(policy: Policy) -> st.SearchStrategy[tuple[ReadableSpan, NameRegistry]]:
    """Spans in which every key is allowed and every value satisfies its rule, with their names registered."""
    return _cached("well-formed-span", policy.allowed_keys, id(policy), lambda: _well_formed_spans(policy))


def _well_formed_spans(policy: Policy) -> st.SearchStrategy[tuple[ReadableSpan, NameRegistry]]:
    attributes = _valid_attributes(policy, policy.allowed_keys, policy.rule_for, 14)
    link_attributes = st.lists(_valid_attributes(policy, policy.allowed_keys, policy.rule_for, 4), max_size=2)
    event_attributes = {
        # Each allowed event keeps the allowed keys it lists (the fingerprint, a digest, is added below).
        name: _valid_attributes(policy, {k: policy.allowed_keys[k] for k in sorted(keys)}, policy.rule_for, 4)
        for name, keys in policy.allowed_events.items()
    }
    event_names = st.lists(st.sampled_from(sorted(policy.allowed_events)), max_size=3)
    resource_attributes = _valid_attributes(policy, policy.resource_keys, policy.resource_rule_for, 6)
    scope_attributes = _valid_attributes(policy, policy.scope_keys, policy.scope_rule_for, 2)
    scope_strings = st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=40).filter(
        lambda s: _kept_scalar_string(policy, s)
    )
    statuses = st.sampled_from([Status(StatusCode.UNSET), Status(StatusCode.OK), Status(StatusCode.ERROR)])

    @st.composite
    def spans(draw: st.DrawFn) -> tuple[ReadableSpan, NameRegistry]:
        names = NameRegistry()
        own = draw(attributes)
        events = []
        for name in draw(event_names):
            kept = draw(event_attributes[name])
            if sc.AGENTDIAG_EXCEPTION_FINGERPRINT in policy.allowed_events[name] and draw(st.booleans()):
                kept[sc.AGENTDIAG_EXCEPTION_FINGERPRINT] = HASHER.digest(sc.ID_KIND_EXCEPTION_MESSAGE, draw(st.text()))
            events.append(Event(name, kept, draw(st.integers(1, 2**62))))
        links = draw(link_attributes)
        for table in [own, *links, *(e.attributes for e in events)]:
            _register_all(names, policy, table)
        start = draw(st.integers(1, 2**62))
        span = ReadableSpan(
            name=draw(st.text(max_size=20)),
            context=_context(draw(trace_ids), draw(span_ids), False),
            resource=Resource(draw(resource_attributes)),
            attributes=own,
            events=events,
            links=[Link(_context(1, 2, False), table) for table in links],
            status=draw(statuses),
            start_time=start,
            end_time=start + 1,
            instrumentation_scope=InstrumentationScope(
                draw(scope_strings),
                draw(st.one_of(st.none(), scope_strings)),
                "https://opentelemetry.io/schemas/1.26.0",
                draw(scope_attributes) or None,
            ),
        )
        return span, names

    return spans()


# --- reading spans back ---------------------------------------------------------------------------------
def _attribute_texts(attributes: Mapping[str, Any] | None) -> Iterator[tuple[str, str]]:
    """``(key, text)`` for each key and each value (or item) of an attribute mapping."""
    for key, value in (attributes or {}).items():
        yield key, key
        for item in value if isinstance(value, (tuple, list)) else (value,):
            yield key, str(item)


def _context_texts(context: SpanContext | None) -> Iterator[str]:
    if context is not None:
        for key, value in context.trace_state.items():
            yield key
            yield value


def _surfaces(span: ReadableSpan) -> Iterator[tuple[str, str]]:
    """``(where, text)`` for every string a span carries, then its JSON form."""
    yield "name", span.name
    yield from ((f"attributes[{k!r}]", t) for k, t in _attribute_texts(span.attributes))
    for i, event in enumerate(span.events):
        yield f"events[{i}].name", event.name
        yield from ((f"events[{i}].attributes[{k!r}]", t) for k, t in _attribute_texts(event.attributes))
    for i, link in enumerate(span.links):
        yield from ((f"links[{i}].trace_state", t) for t in _context_texts(link.context))
        yield from ((f"links[{i}].attributes[{k!r}]", t) for k, t in _attribute_texts(link.attributes))
    yield from (("context.trace_state", t) for t in _context_texts(span.context))
    yield from (("parent.trace_state", t) for t in _context_texts(span.parent))
    yield "status.description", span.status.description or ""
    yield from ((f"resource.attributes[{k!r}]", t) for k, t in _attribute_texts(span.resource.attributes))
    yield "resource.schema_url", span.resource.schema_url or ""
    scope = span.instrumentation_scope
    if scope is not None:
        yield "scope.name", scope.name
        yield "scope.version", scope.version or ""
        yield "scope.schema_url", scope.schema_url or ""
        yield from ((f"scope.attributes[{k!r}]", t) for k, t in _attribute_texts(scope.attributes))
    yield "to_json()", span.to_json()


def _leaks(span: ReadableSpan) -> list[tuple[str, str]]:
    """Where the redacted ``span`` still carries the sentinel: ``(surface, text)``, the JSON form last."""
    return [(where, text[:160]) for where, text in _surfaces(span) if NEEDLE in text.lower()]


def _context_view(context: SpanContext | None) -> Any:
    if context is None:
        return None
    return (context.trace_id, context.span_id, context.is_remote, int(context.trace_flags), context.trace_state)


def _view(span: ReadableSpan) -> dict[str, Any]:
    """Every surface of a span, as comparable values."""
    scope = span.instrumentation_scope
    return {
        "name": span.name,
        "context": _context_view(span.context),
        "parent": _context_view(span.parent),
        "kind": span.kind,
        "times": (span.start_time, span.end_time),
        "attributes": dict(span.attributes),
        "events": [(e.name, dict(e.attributes or {}), e.timestamp) for e in span.events],
        "links": [(_context_view(link.context), dict(link.attributes or {})) for link in span.links],
        "status": (span.status.status_code, span.status.description),
        "resource": (dict(span.resource.attributes), span.resource.schema_url),
        "scope": None if scope is None else (scope.name, scope.version, scope.schema_url, dict(scope.attributes or {})),
    }


def _counters(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if k.startswith(PREFIX)}


# --- a. nothing planted comes out -----------------------------------------------------------------------
@policies
@settings(BIG, max_examples=LEAK_EXAMPLES)
@given(data=st.data())
def test_no_sentinel_survives_redaction(policy_name: str, data: st.DataObject) -> None:
    policy = POLICIES[policy_name]
    span = data.draw(leaky_spans(policy, every_key=True), label="span")
    out = _redactor(policy).redact(span)
    leaks = _leaks(out)
    assert not leaks, f"the sentinel is still in: {leaks}"


_pattern_key_forms = st.one_of(st.sampled_from(TEXT_FORMS + SENSITIVE_FORMS), _embedded(ALL_FORMS))
_all_patterns: dict[tuple[str, str], str] = {}
for _name, _policy in POLICIES.items():  # each pattern once, under the first policy that has it
    for _prefix in _pattern_prefixes(_policy.allowed_keys):
        _all_patterns.setdefault(("span", _prefix), _name)
    for _prefix in _pattern_prefixes(_policy.resource_keys):
        _all_patterns.setdefault(("resource", _prefix), _name)


@pytest.mark.parametrize(
    ("policy_name", "where", "prefix"), [(name, where, prefix) for (where, prefix), name in _all_patterns.items()]
)
@settings(SETTINGS, max_examples=25)
@given(suffix=_pattern_key_forms)
def test_no_sentinel_in_keys_matched_by_a_pattern(policy_name: str, where: str, prefix: str, suffix: str) -> None:
    """``gen_ai.usage.*``, ``llm.token_count.*``, ``agentdiag.redaction.*``, ``telemetry.sdk.*``: what the
    ``*`` matches becomes part of an exported key, so it must not carry an e-mail address, a URL, a path, a
    credential or prose (an identifier-shaped suffix may pass, as an identifier-shaped token value does)."""
    policy = POLICIES[policy_name]
    key = prefix + suffix
    if where == "span":
        rule = policy.rule_for(key)
        value: Any = rule.minimum if isinstance(rule, (IntRange, FloatRange)) else None
        attributes, resource = {key: value} if value is not None else {}, {}
    else:
        attributes, resource = {}, {key: "python"}
    span = ReadableSpan(
        name="agent.iteration",
        context=_context(1, 2, False),
        resource=Resource(resource),
        attributes=attributes,
        links=[Link(_context(1, 3, False), attributes)],
        start_time=1,
        end_time=2,
    )
    out = _redactor(policy).redact(span)
    leaks = _leaks(out)
    assert not leaks, f"the sentinel is still in: {leaks}"


# --- b. idempotence -------------------------------------------------------------------------------------
@policies
@settings(BIG, max_examples=MANY)
@given(data=st.data())
def test_redaction_is_idempotent(policy_name: str, data: st.DataObject) -> None:
    policy = POLICIES[policy_name]
    if data.draw(st.booleans(), label="well-formed"):
        span, names = data.draw(well_formed_spans(policy), label="span")
    else:
        span, names = data.draw(leaky_spans(policy), label="span"), NameRegistry()
    redactor = _redactor(policy, names)
    once = redactor.redact(span)
    twice = redactor.redact(once)
    first, second = _view(once), _view(twice)
    for surface in first:
        assert second[surface] == first[surface], surface


# --- c. well-formed values pass unchanged ---------------------------------------------------------------
@policies
@settings(SETTINGS, max_examples=SOME)
@given(data=st.data())
def test_well_formed_values_pass_unchanged(policy_name: str, data: st.DataObject) -> None:
    policy = POLICIES[policy_name]
    span, names = data.draw(well_formed_spans(policy), label="span")
    redactor = _redactor(policy, names)
    # The span name is rebuilt from the attributes: start from the name the policy builds for them.
    rebuilt = redactor.redact(span).name
    named = ReadableSpan(
        name=rebuilt,
        context=span.context,
        resource=span.resource,
        attributes=span.attributes,
        events=span.events,
        links=span.links,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
    out = redactor.redact(named)
    assert _counters(out.attributes) == _counters(span.attributes)  # no counter: nothing was redacted
    view = _view(out)
    if sc.OPENINFERENCE_SPAN_KIND not in span.attributes:
        # The one key the redactor adds: our kind in OpenInference's words (a closed value), nothing else.
        spoken = view["attributes"].pop(sc.OPENINFERENCE_SPAN_KIND, None)
        kind = span.attributes.get(sc.AGENTDIAG_KIND)
        embeddings = span.attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EMBEDDINGS
        expected = {"run": "AGENT", "iteration": "CHAIN", "llm": "EMBEDDING" if embeddings else "LLM", "tool": "TOOL"}
        assert spoken == expected.get(kind)  # type: ignore[arg-type]
    assert view == _view(named)


# --- d. hashed ids --------------------------------------------------------------------------------------
def _hashed_keys(policy: Policy) -> dict[str, str]:
    return {k: r.id_kind for k, r in policy.allowed_keys.items() if isinstance(r, HashedId) and "*" not in k}


id_values = st.one_of(
    any_sentinel,
    st.text(max_size=40),
    st.integers(-(2**63), 2**63 - 1),  # OTLP integers are int64; larger ones: see the robustness test
    st.sampled_from([-(2**63), 2**63 - 1, 0]),
    st.booleans(),
    floats,
    homogeneous_lists,
    st.integers(4090, 4100).map(lambda n: SENTINEL + "x" * (n - len(SENTINEL))),
    st.just(""),
)


def _expected_id(kind: str, value: Any) -> tuple[str | None, str | None]:
    """(digest or None, reason) for a raw id, from the documented contract."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None, INVALID_VALUE
    if isinstance(value, str) and value == "":
        return None, INVALID_VALUE
    if isinstance(value, str) and len(value) > MAX_ID_LENGTH:
        return None, TOO_LONG
    return HASHER.digest(kind, value), HASHED


@policies
@settings(SETTINGS, max_examples=SOME)
@given(data=st.data())
def test_hashed_ids_become_digests_or_are_dropped(policy_name: str, data: st.DataObject) -> None:
    policy = POLICIES[policy_name]
    hashed = _hashed_keys(policy)
    attributes = data.draw(st.fixed_dictionaries({}, optional=dict.fromkeys(hashed, id_values)), label="ids")
    link_attributes = data.draw(st.fixed_dictionaries({}, optional=dict.fromkeys(hashed, id_values)), label="link")
    message = data.draw(any_sentinel, label="exception.message")
    span = ReadableSpan(
        name="agent.iteration",
        context=_context(1, 2, False),
        resource=Resource({}),
        attributes=attributes,
        events=[Event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_MESSAGE: message, sc.EXCEPTION_TYPE: "E"}, 5)],
        links=[Link(_context(1, 3, False), link_attributes)],
        start_time=1,
        end_time=2,
    )
    out = _redactor(policy).redact(span)
    expected_counts: dict[str, int] = {}
    for source, kept in ((attributes, out.attributes), (link_attributes, out.links[0].attributes)):
        for key, raw in source.items():
            digest, reason = _expected_id(hashed[key], raw)
            expected_counts[reason] = expected_counts.get(reason, 0) + 1
            if digest is None:
                assert key not in kept
            else:
                assert kept[key] == digest
                assert DIGEST.fullmatch(kept[key]) and kept[key] != raw
    (event,) = out.events
    if policy.exception_fingerprint:
        fingerprint = HASHER.digest(sc.ID_KIND_EXCEPTION_MESSAGE, message)
        assert event.attributes == {sc.EXCEPTION_TYPE: "E", sc.AGENTDIAG_EXCEPTION_FINGERPRINT: fingerprint}
        expected_counts[HASHED] = expected_counts.get(HASHED, 0) + 1
    else:
        assert event.attributes == {sc.EXCEPTION_TYPE: "E"}
    for reason in (HASHED, INVALID_VALUE, TOO_LONG):
        assert out.attributes.get(PREFIX + reason) == expected_counts.get(reason), reason
    assert _leaks(out) == []


@policies
@settings(SETTINGS, max_examples=SOME)
@given(raw=st.one_of(st.text(min_size=1, max_size=64), st.integers(-(2**63), 2**63 - 1), st.sampled_from(ALL_FORMS)))
def test_one_raw_value_gets_one_digest_per_id_kind(policy_name: str, raw: str | int) -> None:
    policy = POLICIES[policy_name]
    hashed = _hashed_keys(policy)
    span = ReadableSpan(
        name="s", context=_context(1, 2, False), resource=Resource({}), attributes=dict.fromkeys(hashed, raw)
    )
    out = _redactor(policy).redact(span).attributes
    by_kind: dict[str, set[str]] = {}
    for key, kind in hashed.items():
        assert DIGEST.fullmatch(out[key])
        by_kind.setdefault(kind, set()).add(out[key])
    # session.id and gen_ai.conversation.id are one kind: one digest; different kinds never share one.
    assert all(len(digests) == 1 for digests in by_kind.values())
    assert len({next(iter(d)) for d in by_kind.values()}) == len(by_kind)
    assert {sc.ID_KIND_CONVERSATION, sc.ID_KIND_USER, sc.ID_KIND_TOOL_CALL, sc.ID_KIND_RESPONSE} <= set(by_kind)


# --- e. counters ----------------------------------------------------------------------------------------
def _without_counter_keys(span: ReadableSpan) -> bool:
    """Whether the input carries no ``agentdiag.redaction.<reason>`` key the redactor could overwrite."""
    surfaces = [span.attributes, *(e.attributes for e in span.events), *(link.attributes for link in span.links)]
    return not any(k in COUNTER_KEYS for own in surfaces for k in (own or {}))


def _removed(policy: Policy, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> int:
    """What the policy removed from one set of attributes: the keys it dropped, and the values of a closed set
    it replaced by ``_OTHER`` in place (counted as ``invalid_value``, though the key stays)."""
    before, after = before or {}, after or {}
    replaced = sum(isinstance(policy.rule_for(k), ClosedSet) and before.get(k) != v for k, v in after.items())
    return len(set(before) - set(after)) + replaced


def _expected_counts(policy: Policy, span: ReadableSpan, out: ReadableSpan) -> dict[str, int]:
    """The counts that can be recomputed from the policy: unknown keys, events, status, name, removals."""
    unknown = removed = 0
    unknown += sum(policy.rule_for(k) is None for k in span.attributes)
    removed += _removed(policy, span.attributes, out.attributes)
    kept_events = [e for e in span.events if e.name in policy.allowed_events]
    for before, after in zip(kept_events, out.events, strict=True):
        only = policy.allowed_events[before.name]
        unknown += sum(k not in only or policy.rule_for(k) is None for k in before.attributes or {})
        removed += _removed(policy, before.attributes, after.attributes)
    for before, after in zip(span.links, out.links, strict=True):
        unknown += sum(policy.rule_for(k) is None for k in before.attributes or {})
        removed += _removed(policy, before.attributes, after.attributes)
    # A resource value a rule refused is counted on the span too (a key no rule names is left out uncounted).
    resource_after = out.resource.attributes
    removed += sum(
        policy.resource_rule_for(k) is not None and k not in resource_after for k in span.resource.attributes
    )
    return {
        UNKNOWN_KEY: unknown,
        EVENT_DROPPED: len(span.events) - len(kept_events),
        STATUS_DESCRIPTION: int(bool(span.status.description)),
        SPAN_NAME: int(out.name != span.name),
        "removed": removed,
    }


@policies
@settings(BIG, max_examples=SOME)
@given(data=st.data())
def test_counters_are_counts_of_what_was_removed(policy_name: str, data: st.DataObject) -> None:
    policy = POLICIES[policy_name]
    span = data.draw(leaky_spans(policy).filter(_without_counter_keys), label="span")
    out = _redactor(policy).redact(span)
    counters = _counters(out.attributes)
    for key, value in counters.items():
        assert type(value) is int and 0 <= value <= 10**9, key
        # Each counter is either one this redaction wrote or a well-formed count the input already had.
        assert key in COUNTER_KEYS or span.attributes.get(key) == value, key
    expected = _expected_counts(policy, span, out)
    for reason in (UNKNOWN_KEY, EVENT_DROPPED, STATUS_DESCRIPTION, SPAN_NAME):
        assert counters.get(PREFIX + reason, 0) == expected[reason], reason
    assert sum(counters.get(PREFIX + r, 0) for r in REMOVAL_REASONS) == expected["removed"]


@policies
@settings(BIG, max_examples=SOME)
@given(data=st.data())
def test_silent_summary_writes_no_counters(policy_name: str, data: st.DataObject) -> None:
    policy = POLICIES[policy_name]
    silent = policy.derive(policy.name + "+silent", summary="silent")
    span = data.draw(leaky_spans(policy), label="span")
    out = _redactor(silent).redact(span)
    # Only counts the input itself carried (from an earlier redaction) may remain, unchanged.
    assert {k: v for k, v in _counters(out.attributes).items() if span.attributes.get(k) != v} == {}
    assert sc.AGENTDIAG_REDACTION_KEYS not in out.attributes
    assert _leaks(out) == []


# --- f. robustness --------------------------------------------------------------------------------------
huge_ints = st.one_of(
    st.integers(2**1024, 2**1100),
    st.integers(-(2**1100), -(2**1024)),
    st.just(10**4400),
)
"""Integers the SDK accepts as attribute values that do not fit a float (or a default ``str()``)."""


@policies
@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_no_rule_raises_for_a_value_opentelemetry_accepts(policy_name: str, data: st.DataObject) -> None:
    """``Rule`` promises never to raise for a value OpenTelemetry accepts (a raise turns the whole span into
    a tombstone). Allowed span, link, resource and scope keys get huge integers, alone or in a list."""
    policy = POLICIES[policy_name]
    keys = data.draw(
        st.lists(st.sampled_from(_exact_keys(policy.allowed_keys)), min_size=1, max_size=8, unique=True), label="keys"
    )
    values = st.one_of(huge_ints, st.lists(huge_ints, max_size=3).map(tuple))
    attributes = {k: data.draw(values) for k in keys}
    resource = {k: data.draw(values) for k in _exact_keys(policy.resource_keys)}
    span = ReadableSpan(
        name="s",
        context=_context(1, 2, False),
        resource=Resource(resource),
        attributes=attributes,
        events=[Event(sc.EXCEPTION_EVENT_NAME, {sc.EXCEPTION_MESSAGE: 2**1100, sc.EXCEPTION_TYPE: 2**1100}, 1)],
        links=[Link(_context(1, 3, False), attributes)],
        instrumentation_scope=InstrumentationScope("lib", None, None, {"library.component": 2**1100}),
    )
    out = _redactor(policy).redact(span)
    assert all(type(v) is int for v in _counters(out.attributes).values())
