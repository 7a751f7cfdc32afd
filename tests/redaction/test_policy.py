"""The policy model by example: rules from policy-file tables, TOML policy files, presets, ``configure()``'s
choice of policy and key per destination, and what each part of the policy does to a span."""

from __future__ import annotations

import hashlib
import logging
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags, TraceState

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.redaction import keys as enumerated
from otel_agentdiag.redaction import processor as processor_module
from otel_agentdiag.redaction.allowlist import Policy, describe_keys
from otel_agentdiag.redaction.hashing import IdHasher, key_id_for
from otel_agentdiag.redaction.policy_file import (
    load_policy,
    policy_from_dict,
    policy_to_dict,
    resolve_policy,
    rule_from_spec,
)
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.processor import SpanRedactor
from otel_agentdiag.redaction.rules import (
    Boolean,
    Callback,
    Enum,
    FloatRange,
    HashedId,
    IntRange,
    PolicyError,
    RegisteredName,
    Rule,
    Scalar,
    StringArray,
    token,
)

HASH_KEY = b"98bf2a73ec2c733b84da4311558f6a8c5e5d3195c57ac07fa9ffabf85a396d61"
OTHER_KEY = b"10229736569eed9d4cedaf77d15bb9dacd29be428a15c62f28bff32c80fdda96"
HASHER = IdHasher(HASH_KEY)
DIGEST = re.compile(rf"hmac-sha256:{HASHER.key_id}:[0-9a-f]{{64}}")
PREFIX = sc.AGENTDIAG_REDACTION_PREFIX


def _span(
    attributes: dict[str, Any] | None = None,
    *,
    name: str = "agent.iteration",
    events: tuple[Event, ...] = (),
    links: tuple[Link, ...] = (),
    resource: Resource | None = None,
    scope: InstrumentationScope | None = None,
    status: Status | None = None,
) -> ReadableSpan:
    return ReadableSpan(
        name=name,
        context=SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED)),
        resource=resource if resource is not None else Resource({}),
        attributes=attributes or {},
        events=events,
        links=links,
        status=status or Status(StatusCode.UNSET),
        start_time=1,
        end_time=2,
        instrumentation_scope=scope,
    )


def _redact(policy: Policy, span: ReadableSpan, names: NameRegistry | None = None) -> ReadableSpan:
    return SpanRedactor(policy, HASHER, names or NameRegistry()).redact(span)


def _counters(span: ReadableSpan) -> dict[str, Any]:
    return {k[len(PREFIX) :]: v for k, v in span.attributes.items() if k.startswith(PREFIX)}


def _write(tmp_path: Path, text: str, name: str = "team.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- rules from policy-file tables ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"type": "enum", "values": ["free", "pro", True]}, Enum(frozenset({"free", "pro", True}))),
        ({"type": "bool"}, Boolean()),
        ({"type": "int", "min": -5, "max": 5}, IntRange(-5, 5)),
        ({"type": "float", "min": 0, "max": 2.5}, FloatRange(0.0, 2.5)),
        ({"type": "token", "pattern": "[a-z]+", "max_length": 8}, token("[a-z]+", 8)),
        (
            {"type": "string_array", "pattern": "[a-z]+", "max_length": 8, "max_items": 3},
            StringArray(token("[a-z]+", 8), 3),
        ),
        ({"type": "scalar"}, Scalar(256)),
        ({"type": "scalar", "max_length": 12}, Scalar(12)),
        ({"type": "hashed_id", "id_kind": "account"}, HashedId("account")),
        ({"type": "registered_name", "name_kind": "model"}, RegisteredName("model")),
    ],
)
def test_every_rule_type_from_its_table(spec: dict[str, Any], expected: Rule) -> None:
    rule = rule_from_spec(spec)
    assert rule == expected
    assert rule_from_spec(rule.to_spec()) == rule  # to_spec is the inverse
    assert rule.describe()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("int", "a rule is a table"),
        ({}, "'type' must be one of"),
        ({"type": "regex"}, "'type' must be one of"),
        ({"type": "bool", "values": [True]}, "unknown field(s) for a bool rule: values"),
        ({"type": "int", "min": 0, "max": 1, "step": 1}, "unknown field(s) for a int rule: step"),
        ({"type": "enum"}, "missing 'values'"),
        ({"type": "enum", "values": "free"}, "'values' has the wrong type (str)"),
        ({"type": "enum", "values": []}, "non-empty list of strings or booleans"),
        ({"type": "enum", "values": ["a", 1]}, "non-empty list of strings or booleans"),
        ({"type": "int", "max": 1}, "missing 'min'"),
        ({"type": "int", "min": 0}, "missing 'max'"),
        ({"type": "int", "min": True, "max": 3}, "'min' has the wrong type (bool)"),
        ({"type": "int", "min": 0.5, "max": 3}, "'min' has the wrong type (float)"),
        ({"type": "int", "min": 5, "max": 1}, "need finite min <= max"),
        ({"type": "float", "min": "0", "max": 1.0}, "'min' has the wrong type (str)"),
        ({"type": "float", "min": 0.0, "max": float("inf")}, "need finite min <= max"),
        ({"type": "float", "min": float("nan"), "max": 1.0}, "need finite min <= max"),
        ({"type": "float", "min": 2.0, "max": 1.0}, "need finite min <= max"),
        ({"type": "token", "max_length": 5}, "missing 'pattern'"),
        ({"type": "token", "pattern": "[a-z]+"}, "missing 'max_length'"),
        ({"type": "token", "pattern": "([a-z]", "max_length": 5}, "'pattern' is not a regular expression"),
        ({"type": "token", "pattern": "[a-z]+", "max_length": 0}, "'max_length' must be positive"),
        ({"type": "token", "pattern": "[a-z]+", "max_length": "8"}, "'max_length' has the wrong type (str)"),
        ({"type": "string_array", "pattern": "[a-z]+", "max_length": 8}, "missing 'max_items'"),
        ({"type": "string_array", "pattern": "[a-z]+", "max_length": 8, "max_items": 0}, "'max_items' must be"),
        ({"type": "scalar", "max_length": 0}, "'max_length' must be a positive integer"),
        ({"type": "scalar", "max_length": True}, "'max_length' must be a positive integer"),
        ({"type": "hashed_id"}, "missing 'id_kind'"),
        ({"type": "hashed_id", "id_kind": "Account Id"}, "'id_kind' must be a short lower-case identifier"),
        ({"type": "hashed_id", "id_kind": "a" * 33}, "'id_kind' must be a short lower-case identifier"),
        ({"type": "registered_name"}, "missing 'name_kind'"),
        ({"type": "registered_name", "name_kind": "person"}, "name_kind must be one of tool, agent, model"),
    ],
)
def test_every_invalid_rule_table_is_a_readable_error_naming_the_key(spec: Any, message: str) -> None:
    with pytest.raises(PolicyError) as direct:
        rule_from_spec(spec, "allowed_keys.'app.field'")
    assert message in str(direct.value)
    assert "app.field" in str(direct.value)
    # Through a policy file's table the message names the file, the table and the key.
    with pytest.raises(PolicyError) as in_file:
        policy_from_dict({"allowed_keys": {"app.field": spec}}, source="team.toml")
    text = str(in_file.value)
    assert text.startswith("team.toml: allowed_keys.'app.field'")
    assert message in text


def test_a_callback_rule_cannot_be_written_to_a_policy_file() -> None:
    policy = STRICT.derive("cb", allowed_keys={"app.tier": Callback(str.lower, "lower")})
    with pytest.raises(PolicyError, match=r"callback rule \(lower\) cannot be written"):
        policy_to_dict(policy)


# --- policy files ---------------------------------------------------------------------------------------
TEAM_POLICY = """
# extends defaults to "strict"
blocked_values = ["(?i)^internal-"]

[allowed_keys]
"app.tier" = { type = "enum", values = ["free", "pro"] }
"app.*" = { type = "int", min = 0, max = 10 }
"app.metrics.*" = { type = "float", min = 0.0, max = 1.0 }
"app.metrics.latency" = { type = "token", pattern = "[a-z]+", max_length = 8 }
"gen_ai.request.seed" = false
"gen_ai.usage.*" = false

[allowed_events]
"app.retry" = ["app.attempt", "error.type"]

[resource_keys]
"k8s.namespace.name" = { type = "scalar", max_length = 63 }
"service.version" = false

[scope_keys]
"library.component" = { type = "enum", values = ["http", "db"] }
"""


@pytest.fixture
def team_policy(tmp_path: Path) -> Policy:
    return load_policy(_write(tmp_path, TEAM_POLICY))


def test_a_policy_file_extends_strict_by_default(team_policy: Policy) -> None:
    assert team_policy.name == "strict+team"
    assert team_policy.summary == "info" and team_policy.hash_function == "hmac-sha256"
    removed = {"gen_ai.request.seed", *enumerated.GEN_AI_USAGE_KEYS}
    assert set(STRICT.allowed_keys) - removed <= set(team_policy.allowed_keys)
    assert team_policy.rule_for(sc.GEN_AI_REQUEST_MODEL) is STRICT.rule_for(sc.GEN_AI_REQUEST_MODEL)
    # `false` removes what a key stands for: an exact key, or a pattern and every key of the base it matches
    # (the presets name each usage key; "gen_ai.usage.*" = false still removes them all).
    assert team_policy.rule_for("gen_ai.request.seed") is None
    assert not [key for key in team_policy.allowed_keys if key.startswith("gen_ai.usage.")]
    assert team_policy.rule_for("gen_ai.usage.input_tokens") is None
    assert STRICT.rule_for("gen_ai.usage.input_tokens") is not None
    # The base policy is untouched.
    assert "app.tier" not in STRICT.allowed_keys


def test_key_patterns_exact_beats_longer_pattern_beats_shorter(team_policy: Policy) -> None:
    assert team_policy.rule_for("app.tier") == Enum(frozenset({"free", "pro"}))
    assert team_policy.rule_for("app.metrics.latency") == token("[a-z]+", 8)
    assert team_policy.rule_for("app.metrics.p50") == FloatRange(0.0, 1.0)
    assert team_policy.rule_for("app.retries") == IntRange(0, 10)
    assert team_policy.rule_for("application.x") is None  # "app.*" needs the dot
    out = _redact(
        team_policy,
        _span({"app.tier": "pro", "app.metrics.p50": 0.5, "app.metrics.latency": "fast", "app.retries": 3}),
    )
    assert {k: out.attributes[k] for k in ("app.tier", "app.metrics.p50", "app.metrics.latency", "app.retries")} == {
        "app.tier": "pro",
        "app.metrics.p50": 0.5,
        "app.metrics.latency": "fast",
        "app.retries": 3,
    }
    # The same values under the wrong pattern are dropped.
    out = _redact(team_policy, _span({"app.metrics.p99": 3, "app.retries": 0.5, "app.tier": 1}))
    assert not {"app.metrics.p99", "app.retries", "app.tier"} & set(out.attributes)
    assert _counters(out)["invalid_value"] == 3


def test_policy_file_events_resource_and_scope(team_policy: Policy) -> None:
    assert team_policy.allowed_events["app.retry"] == frozenset({"app.attempt", "error.type"})
    assert team_policy.allowed_events[sc.EXCEPTION_EVENT_NAME] == STRICT.allowed_events[sc.EXCEPTION_EVENT_NAME]
    span = _span(
        events=(
            Event("app.retry", {"app.attempt": 2, "error.type": "Timeout", "app.tier": "pro"}, 5),
            Event("app.debug", {"app.attempt": 1}, 6),
        ),
        resource=Resource({"service.name": "svc", "service.version": "1.0", "k8s.namespace.name": "prod"}),
        scope=InstrumentationScope("lib", "1.0", None, {"library.component": "http", "library.secret": "x"}),
    )
    out = _redact(team_policy, span)
    (event,) = out.events
    assert event.name == "app.retry"
    assert dict(event.attributes) == {"app.attempt": 2, "error.type": "Timeout"}  # app.tier: not listed here
    assert _counters(out)["event"] == 1 and _counters(out)["unknown_key"] == 1
    assert dict(out.resource.attributes) == {"service.name": "svc", "k8s.namespace.name": "prod"}
    assert dict(out.instrumentation_scope.attributes) == {"library.component": "http"}


def test_blocked_values_turn_a_kept_value_into_a_public_safety_violation(team_policy: Policy) -> None:
    assert _redact(STRICT, _span({sc.GEN_AI_REQUEST_MODEL: "internal-llm-7b"})).attributes[sc.GEN_AI_REQUEST_MODEL]
    out = _redact(team_policy, _span({sc.GEN_AI_REQUEST_MODEL: "internal-llm-7b", sc.GEN_AI_PROVIDER_NAME: "openai"}))
    assert sc.GEN_AI_REQUEST_MODEL not in out.attributes
    assert out.attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert _counters(out) == {"public_safety_violation": 1}
    # In arrays too: one blocked item drops the value (here a documented finish reason the policy blocks).
    blocks_length = team_policy.derive("team+length", blocked_values=(*team_policy.blocked_values, "^length$"))
    out = _redact(blocks_length, _span({sc.GEN_AI_RESPONSE_FINISH_REASONS: ("stop", "length")}))
    assert sc.GEN_AI_RESPONSE_FINISH_REASONS not in out.attributes
    assert _counters(out) == {"public_safety_violation": 1}
    # A finish reason outside the documented set never gets that far: it is `_OTHER` in its place.
    out = _redact(team_policy, _span({sc.GEN_AI_RESPONSE_FINISH_REASONS: ("stop", "internal-")}))
    assert out.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop", "_OTHER")
    assert _counters(out) == {"invalid_value": 1}


def test_extends_local_and_none(tmp_path: Path) -> None:
    local_based = load_policy(_write(tmp_path, 'extends = "local"\nname = "mine"\n'))
    assert local_based.name == "mine"
    assert local_based.allowed_keys == LOCAL.allowed_keys
    assert local_based.exception_fingerprint is True
    bare = load_policy(
        _write(
            tmp_path,
            'extends = "none"\n[allowed_keys]\n"gen_ai.usage.input_tokens" = { type = "int", min = 0, max = 9 }\n',
            "bare.toml",
        )
    )
    assert bare.name == "none+bare"
    assert set(bare.allowed_keys) == {"gen_ai.usage.input_tokens"}
    assert bare.resource_keys == {} and bare.allowed_events == {} and bare.allowed_span_names == frozenset()
    out = _redact(
        bare,
        _span(
            {"gen_ai.usage.input_tokens": 3, sc.GEN_AI_OPERATION_NAME: "chat"},
            events=(Event("exception", {"exception.type": "E"}, 1),),
            resource=Resource({"service.name": "svc"}),
        ),
    )
    assert out.name == sc.OTHER_VALUE
    assert dict(out.attributes) == {
        "gen_ai.usage.input_tokens": 3,
        PREFIX + "unknown_key": 1,
        PREFIX + "event": 1,
        PREFIX + "span_name": 1,
    }
    assert list(out.events) == [] and dict(out.resource.attributes) == {}


def test_allowed_span_names_are_added_to_the_base(tmp_path: Path) -> None:
    policy = load_policy(_write(tmp_path, 'allowed_span_names = ["nightly-batch"]\n'))
    assert policy.allowed_span_names == STRICT.allowed_span_names | {"nightly-batch"}
    assert _redact(policy, _span(name="nightly-batch")).name == "nightly-batch"
    assert _redact(STRICT, _span(name="nightly-batch")).name == sc.OTHER_VALUE


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('colour = "red"\nsize = 1\n', "unknown setting(s): colour, size"),
        ('extends = "lenient"\n', "'extends' must be one of strict, local, none, not 'lenient'"),
        ('summary = "loud"\n', "summary must be one of info, silent, debug, not 'loud'"),
        ('hash_function = "md5"\n', "hash_function must be one of hmac-sha256, sha256, not 'md5'"),
        ('on_error = "ignore"\n', "on_error must be one of tombstone, drop, not 'ignore'"),
        ("exception_fingerprint = 1\n", "exception_fingerprint must be a bool"),
        ('name = ""\n', "name must be a non-empty string"),
        ('blocked_values = ["("]\n', "blocked_values: '(' is not a regular expression"),
        ('blocked_values = "secret"\n', "blocked_values must be a list of regular expressions"),
        ('allowed_span_names = "x"\n', "allowed_span_names must be a list of strings"),
        ('allowed_events = { "x" = "y" }\n', "allowed_events must be a table of event name = [attribute keys]"),
        ('allowed_keys = ["a"]\n', "allowed_keys must be a table of key = rule"),
        # An unquoted dotted key is a nested table in TOML, not a key with dots.
        ('[allowed_keys]\napp.tier = { type = "bool" }\n', "allowed_keys.'app': 'type' must be one of"),
        ("allowed_keys = {\n", "is not valid TOML"),
        ("name = 'unterminated\n", "is not valid TOML"),
    ],
)
def test_bad_policy_files_are_rejected_with_the_file_and_the_setting(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(PolicyError) as raised:
        load_policy(path)
    assert str(path) in str(raised.value)
    assert message in str(raised.value)


def test_a_missing_policy_file_is_rejected(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(PolicyError, match=r"cannot read policy file .*nope\.toml"):
        load_policy(missing)
    with pytest.raises(PolicyError, match="cannot read policy file"):
        resolve_policy(str(missing))


@pytest.mark.parametrize("preset", [STRICT, LOCAL], ids=["strict", "local"])
def test_presets_round_trip_through_a_policy_table(preset: Policy) -> None:
    table = policy_to_dict(preset)
    assert table["extends"] == "none"
    again = policy_from_dict(table)
    assert again.name == preset.name
    assert set(again.allowed_keys) == set(preset.allowed_keys)
    assert dict(describe_keys(again)) == dict(describe_keys(preset))
    assert again.allowed_keys == preset.allowed_keys  # rules compare by value
    for attribute in (
        "allowed_span_names",
        "allowed_events",
        "resource_keys",
        "scope_keys",
        "blocked_values",
        "hash_function",
        "summary",
        "exception_fingerprint",
        "on_error",
    ):
        assert getattr(again, attribute) == getattr(preset, attribute), attribute
    assert policy_to_dict(again) == table


def test_resolve_policy(tmp_path: Path) -> None:
    assert resolve_policy("strict") is STRICT
    assert resolve_policy("local") is LOCAL
    assert resolve_policy(LOCAL) is LOCAL
    path = _write(tmp_path, 'name = "from-file"\n')
    assert resolve_policy(path).name == "from-file"
    assert resolve_policy(str(path)).name == "from-file"
    with pytest.raises(PolicyError, match="not int"):
        resolve_policy(3)  # type: ignore[arg-type]


# --- configure(): a policy and a key per destination ----------------------------------------------------
def _unused_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _configure(tmp_path: Path, **kwargs: Any) -> agentdiag.AgentDiag:
    """Both branches: the store in tmp_path and OTLP to a port nothing listens on (no span is sent)."""
    kwargs.setdefault("hash_key", HASH_KEY)
    return agentdiag.configure(
        store=tmp_path / "t.db", otlp_endpoint=f"http://127.0.0.1:{_unused_port()}", set_global=False, **kwargs
    )


def _policies(handle: agentdiag.AgentDiag) -> dict[str, str]:
    assert [d.policy for d in handle.destinations] == [proc.policy for proc in handle.processors]
    return {d.name: proc.policy.name for d, proc in zip(handle.destinations, handle.processors, strict=True)}


def test_configure_defaults_local_for_the_store_and_strict_for_otlp(tmp_path: Path) -> None:
    with _configure(tmp_path) as handle:
        assert _policies(handle) == {"local": "local", "otlp": "strict"}
        assert [d.policy_source for d in handle.destinations] == ["default", "default"]
        assert handle.processors[0].policy is LOCAL and handle.processors[1].policy is STRICT


def test_configure_policy_arguments(tmp_path: Path) -> None:
    path = _write(tmp_path, 'name = "team"\n')
    with _configure(tmp_path, local_policy="strict", otlp_policy=path) as handle:
        assert _policies(handle) == {"local": "strict", "otlp": "team"}
        assert [d.policy_source for d in handle.destinations] == ["argument", "argument"]
    with _configure(tmp_path, local_policy=STRICT, otlp_policy="local") as handle:
        assert _policies(handle) == {"local": "strict", "otlp": "local"}


def test_configure_policy_environment_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, 'name = "from-env"\n')
    monkeypatch.setenv("AGENTDIAG_LOCAL_POLICY", "strict")
    monkeypatch.setenv("AGENTDIAG_OTLP_POLICY", str(path))
    with _configure(tmp_path) as handle:
        assert _policies(handle) == {"local": "strict", "otlp": "from-env"}
        assert [d.policy_source for d in handle.destinations] == ["AGENTDIAG_LOCAL_POLICY", "AGENTDIAG_OTLP_POLICY"]
    # An argument wins over the environment.
    with _configure(tmp_path, local_policy="local") as handle:
        assert _policies(handle)["local"] == "local"


@pytest.mark.parametrize("variable", ["AGENTDIAG_LOCAL_POLICY", "AGENTDIAG_OTLP_POLICY"])
def test_a_broken_policy_file_in_the_environment_logs_and_selects_strict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, variable: str
) -> None:
    broken = _write(tmp_path, "allowed_keys = {\n", "broken.toml")
    monkeypatch.setenv(variable, str(broken))
    branch = "local" if variable == "AGENTDIAG_LOCAL_POLICY" else "otlp"
    with caplog.at_level(logging.WARNING), _configure(tmp_path) as handle:
        assert _policies(handle) == {"local": "local", "otlp": "strict", branch: "strict"}
        source = {d.name: d.policy_source for d in handle.destinations}
        assert source[branch] == f"{variable} (unusable; strict used)"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert variable in errors[0].getMessage() and "not valid TOML" in errors[0].getMessage()
    # The same file as an argument is an error before anything is installed.
    argument = f"{branch}_policy"
    monkeypatch.delenv(variable)
    with pytest.raises(PolicyError, match="not valid TOML"):
        _configure(tmp_path, **{argument: broken})
    with pytest.raises(PolicyError, match="cannot read policy file"):
        _configure(tmp_path, **{argument: tmp_path / "missing.toml"})


def test_summary_debug_is_for_the_local_store_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    debug = _write(tmp_path, 'extends = "local"\nsummary = "debug"\nname = "dbg"\n', "debug.toml")
    with pytest.raises(PolicyError, match=r"summary='debug'.*local store only, not otlp"):
        _configure(tmp_path, otlp_policy=debug)
    with pytest.raises(PolicyError, match="summary='debug'"):
        _configure(tmp_path, otlp_policy=LOCAL.derive("dbg", summary="debug"))
    with _configure(tmp_path, local_policy=debug) as handle:
        assert _policies(handle) == {"local": "dbg", "otlp": "strict"}
    monkeypatch.setenv("AGENTDIAG_OTLP_POLICY", str(debug))
    with caplog.at_level(logging.WARNING), _configure(tmp_path) as handle:
        assert _policies(handle) == {"local": "local", "otlp": "strict"}
    assert any(
        r.levelno == logging.ERROR and "AGENTDIAG_OTLP_POLICY" in r.getMessage() and "debug" in r.getMessage()
        for r in caplog.records
    )


def test_otlp_hash_key_gives_the_export_its_own_key_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _configure(tmp_path) as handle:
        assert handle.key_ids == {"local": key_id_for(HASH_KEY), "otlp": key_id_for(HASH_KEY)}
    with _configure(tmp_path, otlp_hash_key=OTHER_KEY) as handle:
        assert handle.key_ids == {"local": key_id_for(HASH_KEY), "otlp": key_id_for(OTHER_KEY)}
        assert handle.key_id == key_id_for(HASH_KEY)
        assert [d.key_source for d in handle.destinations] == ["argument", "argument"]
    monkeypatch.setenv("AGENTDIAG_OTLP_HASH_KEY", OTHER_KEY.decode())
    with _configure(tmp_path) as handle:
        assert handle.key_ids["otlp"] == key_id_for(OTHER_KEY) != handle.key_ids["local"]
        assert handle.destinations[1].key_source == "AGENTDIAG_OTLP_HASH_KEY"
        # Same raw id, two keys: the export's digests do not join with the store's.
        local, otlp = (proc.redactor.redact(_span({sc.USER_ID: "alice"})) for proc in handle.processors)
        assert local.attributes[sc.USER_ID] != otlp.attributes[sc.USER_ID]
    with pytest.raises(ValueError, match="argument otlp_hash_key: it holds 5 bytes; at least 32"):
        _configure(tmp_path, otlp_hash_key=b"short")


def test_sha256_hash_function_is_unkeyed_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plain = _write(tmp_path, 'hash_function = "sha256"\nname = "joinable"\n', "plain.toml")
    with caplog.at_level(logging.WARNING), _configure(tmp_path, otlp_policy=plain) as handle:
        assert handle.key_ids == {"local": key_id_for(HASH_KEY), "otlp": None}
        out = handle.processors[1].redactor.redact(_span({sc.USER_ID: "alice", sc.SESSION_ID: 42}))
    assert any(r.levelno == logging.WARNING and "unkeyed sha256" in r.getMessage() for r in caplog.records)
    # The documented contract: "sha256:" + hex(SHA-256(kind + "\x00" + NFC(value))).
    assert out.attributes[sc.USER_ID] == "sha256:" + hashlib.sha256(b"user\x00alice").hexdigest()
    assert out.attributes[sc.SESSION_ID] == "sha256:" + hashlib.sha256(b"conversation\x0042").hexdigest()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", out.attributes[sc.USER_ID])


def test_the_hasher_must_match_the_policy_hash_function() -> None:
    with pytest.raises(ValueError, match="asks for sha256 but the hasher uses hmac-sha256"):
        SpanRedactor(STRICT.derive("plain", hash_function="sha256"), HASHER)


# --- summary modes --------------------------------------------------------------------------------------
LEAKY = {"app.prompt": "hello", "http.url": "https://x.test/?q=1", sc.GEN_AI_REQUEST_MODEL: "/home/alice/m.gguf"}


def test_summary_debug_lists_removed_key_names_info_does_not() -> None:
    debug = LOCAL.derive("dbg", summary="debug")
    span = _span(LEAKY, events=(Event("exception", {"exception.message": "boom"}, 1),))
    out = _redact(debug, span)
    assert out.attributes[sc.AGENTDIAG_REDACTION_KEYS] == (
        "app.prompt",
        "exception.message",
        sc.GEN_AI_REQUEST_MODEL,
        "http.url",
    )
    assert _counters(out)["unknown_key"] == 3 and _counters(out)["public_safety_violation"] == 1
    info = _redact(LOCAL, span)
    assert sc.AGENTDIAG_REDACTION_KEYS not in info.attributes
    assert {k: v for k, v in _counters(info).items() if k != "keys"} == {
        k: v for k, v in _counters(out).items() if k != "keys"
    }
    assert "app.prompt" not in info.to_json()


@pytest.mark.parametrize(
    "debug",
    [
        pytest.param(LOCAL.derive("local+debug", summary="debug"), id="local"),
        # A policy file with just `summary = "debug"` extends strict.
        pytest.param(policy_from_dict({"summary": "debug"}), id="file-extending-strict"),
    ],
)
@pytest.mark.parametrize(
    "removed_key",
    ["app.prompt", "app." + "k" * 300, "app.line\nbreak", "alice@example.com"],
    ids=["plain", "long", "control", "e-mail"],
)
def test_summary_debug_is_idempotent(debug: Policy, removed_key: str) -> None:
    """A debug policy allows ``agentdiag.redaction.keys`` so that redacting twice changes nothing: whatever
    list the redactor writes must survive a second pass under the same policy, whatever the removed key was."""
    redactor = SpanRedactor(debug, HASHER, NameRegistry())
    once = redactor.redact(_span({removed_key: "x", sc.GEN_AI_OPERATION_NAME: "chat"}))
    if removed_key == "app.prompt":
        assert once.attributes[sc.AGENTDIAG_REDACTION_KEYS] == ("app.prompt",)
    # How an odd key name is listed (or not) is the redactor's choice; a second pass must not change it.
    twice = redactor.redact(once)
    assert dict(twice.attributes) == dict(once.attributes)


# --- drift report ---------------------------------------------------------------------------------------
def test_drift_report_counts_unknown_keys_as_digests() -> None:
    redactor = SpanRedactor(STRICT, HASHER, NameRegistry())
    for _ in range(2):
        redactor.redact(_span({"app.prompt": "x", "app.user_email": "a@b.c", sc.GEN_AI_OPERATION_NAME: "chat"}))
    redactor.redact(_span(events=(Event("exception", {"exception.message": "m"}, 1),)))
    report = redactor.drift_report()
    assert report["policy"] == "strict" and report["summary"] == "info"
    assert report["distinct_keys"] == 3 and report["overflow"] == 0
    digest = {k: HASHER.digest(sc.ID_KIND_ATTRIBUTE_KEY, k) for k in ("app.prompt", "app.user_email")}
    assert report["unknown_keys"] == {
        digest["app.prompt"]: 2,
        digest["app.user_email"]: 2,
        HASHER.digest(sc.ID_KIND_ATTRIBUTE_KEY, "exception.message"): 1,
    }
    assert all(DIGEST.fullmatch(label) for label in report["unknown_keys"])
    assert "app." not in repr(report)
    # Keys passed as candidates are shown by name; the others stay digests.
    named = redactor.drift_report(candidates=["app.prompt", "never.seen"])
    assert named["unknown_keys"]["app.prompt"] == 2
    assert digest["app.user_email"] in named["unknown_keys"] and "never.seen" not in named["unknown_keys"]


def test_drift_report_in_debug_mode_shows_names_and_overflow_is_counted() -> None:
    limit = processor_module._DRIFT_LIMIT
    redactor = SpanRedactor(LOCAL.derive("dbg", summary="debug"), HASHER, NameRegistry())
    redactor.redact(_span({f"app.k{i}": 1 for i in range(limit + 5)}))
    redactor.redact(_span({"app.k0": 1, "app.extra": 1}))
    report = redactor.drift_report()
    assert report["distinct_keys"] == limit
    assert report["overflow"] == 5 + 1  # five keys beyond the limit, then one more new key
    assert report["unknown_keys"]["app.k0"] == 2
    assert f"app.k{limit}" not in report["unknown_keys"]


def test_agentdiag_drift_report_per_destination(tmp_path: Path) -> None:
    with agentdiag.configure(store=tmp_path / "t.db", hash_key=HASH_KEY, set_global=False) as handle:
        tracer = handle.tracer_provider.get_tracer("t")
        tracer.start_span("s", attributes={"app.secret": "x"}).end()
        report = handle.drift_report(candidates=["app.secret"])
    assert set(report) == {"local"}
    assert report["local"]["unknown_keys"] == {"app.secret": 1}
    assert report["local"]["policy"] == "local"


# --- exception fingerprints -----------------------------------------------------------------------------
def _exception(message: str) -> ReadableSpan:
    attributes = {"exception.type": "ValueError", "exception.message": message, "exception.stacktrace": message}
    return _span(events=(Event("exception", attributes, 1),))


def test_exception_fingerprint_groups_messages_without_exporting_them() -> None:
    redactor = SpanRedactor(LOCAL, HASHER, NameRegistry())
    first, same, other = (
        redactor.redact(_exception(m)) for m in ("disk full: /home/alice", "disk full: /home/alice", "quota hit")
    )
    fingerprint = [s.events[0].attributes[sc.AGENTDIAG_EXCEPTION_FINGERPRINT] for s in (first, same, other)]
    assert fingerprint[0] == fingerprint[1] != fingerprint[2]
    assert fingerprint[0] == HASHER.digest(sc.ID_KIND_EXCEPTION_MESSAGE, "disk full: /home/alice")
    assert DIGEST.fullmatch(fingerprint[2])
    assert dict(first.events[0].attributes) == {
        "exception.type": "ValueError",
        sc.AGENTDIAG_EXCEPTION_FINGERPRINT: fingerprint[0],
    }
    assert "disk full" not in first.to_json() and "alice" not in first.to_json()
    assert _counters(first) == {"unknown_key": 2, "hashed": 1}
    # STRICT keeps no fingerprint.
    strict = _redact(STRICT, _exception("disk full"))
    assert dict(strict.events[0].attributes) == {"exception.type": "ValueError"}


# --- resource, scope, links, events ---------------------------------------------------------------------
def test_resource_rules() -> None:
    resource = Resource(
        {
            "service.name": "checkout",
            "host.name": "alice-laptop",
            "process.command_line": "python app.py --api-key=sk-abcdefghijklmnop",
            "process.pid": 4242,
            "telemetry.sdk.language": "python",
        }
    )
    strict = _redact(STRICT, _span(resource=resource)).resource
    assert dict(strict.attributes) == {"service.name": "checkout", "telemetry.sdk.language": "python"}
    local = _redact(LOCAL, _span(resource=resource)).resource
    assert dict(local.attributes) == {
        "service.name": "checkout",
        "telemetry.sdk.language": "python",
        "process.pid": 4242,
    }
    for service_name in ("alice@example.com", "https://svc.internal", "/srv/app", "a" * 257, "line\nbreak"):
        out = _redact(STRICT, _span(resource=Resource({"service.name": service_name})))
        assert "service.name" not in out.resource.attributes, service_name


def test_resource_schema_url_is_checked_like_the_scope_schema_url() -> None:
    """The scope's schema URL is dropped when it carries user-info or a user's path; the resource's is not
    checked at all, yet OTLP exports it (``ResourceSpans.schema_url``) and ``to_json()`` prints it."""
    url = "https://alice:hunter2@schemas.example.com/home/alice/1.0"
    out = _redact(STRICT, _span(resource=Resource({}, url), scope=InstrumentationScope("lib", "1", url)))
    assert not out.instrumentation_scope.schema_url
    assert "hunter2" not in (out.resource.schema_url or "")


def test_scope_attributes_are_dropped_unless_scope_keys_allow_them() -> None:
    scope = InstrumentationScope("my.lib", "2.0.1", None, {"library.component": "db", "owner": "alice@example.com"})
    assert _redact(STRICT, _span(scope=scope)).instrumentation_scope.attributes == {}
    allowed = STRICT.derive("scoped", scope_keys={"library.component": Enum(frozenset({"db"}))})
    out = _redact(allowed, _span(scope=scope)).instrumentation_scope
    assert (out.name, out.version, dict(out.attributes)) == ("my.lib", "2.0.1", {"library.component": "db"})
    odd = InstrumentationScope("/home/alice/lib.py", "sk-abcdefghijklmnopqrst")
    out = _redact(STRICT, _span(scope=odd)).instrumentation_scope
    assert (out.name, out.version) == (sc.OTHER_VALUE, None)


def test_link_attributes_go_through_allowed_keys_and_trace_state_is_stripped() -> None:
    upstream = SpanContext(0x1, 0x2, True, TraceFlags(TraceFlags.SAMPLED), TraceState([("vendor", "secret-ts")]))
    link = Link(upstream, {sc.GEN_AI_CONVERSATION_ID: "conv-1", "gen_ai.usage.input_tokens": 5, "why": "retry"})
    out = _redact(STRICT, _span(links=(link,)))
    (kept,) = out.links
    assert (kept.context.trace_id, kept.context.span_id, kept.context.is_remote) == (0x1, 0x2, True)
    assert not kept.context.trace_state
    assert dict(kept.attributes) == {
        sc.GEN_AI_CONVERSATION_ID: HASHER.digest(sc.ID_KIND_CONVERSATION, "conv-1"),
        "gen_ai.usage.input_tokens": 5,
    }
    assert _counters(out) == {"unknown_key": 1, "hashed": 1}
    assert "secret-ts" not in out.to_json()


def test_events_not_in_allowed_events_are_dropped_and_counted() -> None:
    span = _span(
        events=(
            Event("user.message", {"content": "hi"}, 1),
            Event("exception", {"exception.type": "KeyError", "exception.escaped": True}, 2),
            Event("gen_ai.choice", {"index": 0}, 3),
        ),
        status=Status(StatusCode.ERROR, "KeyError: 'alice'"),
    )
    out = _redact(STRICT, span)
    assert [(e.name, dict(e.attributes), e.timestamp) for e in out.events] == [
        ("exception", {"exception.type": "KeyError", "exception.escaped": True}, 2)
    ]
    assert out.status.status_code is StatusCode.ERROR and out.status.description is None
    assert _counters(out) == {"event": 2, "status_description": 1}


def test_registered_model_names() -> None:
    policy = STRICT.derive("models", allowed_keys={sc.GEN_AI_REQUEST_MODEL: RegisteredName("model")})
    names = NameRegistry()
    names.register(models=["gpt-4o-mini"])
    known = _redact(policy, _span({sc.GEN_AI_REQUEST_MODEL: "gpt-4o-mini", sc.GEN_AI_OPERATION_NAME: "chat"}), names)
    assert known.attributes[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert known.name == "chat gpt-4o-mini"
    assert _counters(known) == {"span_name": 1}
    unknown = _redact(policy, _span({sc.GEN_AI_REQUEST_MODEL: "ft:gpt-4o:acme:secret-project"}), names)
    assert unknown.attributes[sc.GEN_AI_REQUEST_MODEL] == sc.OTHER_VALUE
    assert _counters(unknown)["unregistered_name"] == 1
    # The same name is not a model name for a fresh registry, nor a tool name for this one.
    fresh = _redact(policy, _span({sc.GEN_AI_REQUEST_MODEL: "gpt-4o-mini"}), NameRegistry())
    assert fresh.attributes[sc.GEN_AI_REQUEST_MODEL] == sc.OTHER_VALUE
    assert names.is_registered("model", "gpt-4o-mini") and not names.is_tool("gpt-4o-mini")
    with pytest.raises(ValueError, match="not a registrable name"):
        names.register(models=["gpt 4o"])


# --- blocked_values and values a rule changed -----------------------------------------------------------
def test_blocked_values_and_digests_are_idempotent() -> None:
    """A realistic blocked_values entry for hex secrets also matches a digest. The first pass keeps the digest
    (a hashed value is never checked against blocked_values); a second pass must do the same."""
    policy = policy_from_dict({"blocked_values": ["[0-9a-f]{32,}"]})
    redactor = SpanRedactor(policy, HASHER, NameRegistry())
    once = redactor.redact(_span({sc.USER_ID: "alice"}))
    assert DIGEST.fullmatch(once.attributes[sc.USER_ID])
    twice = redactor.redact(once)
    assert dict(twice.attributes) == dict(once.attributes)


def test_blocked_values_apply_to_a_value_a_callback_changed() -> None:
    """``blocked_values``: "a kept string value in which one is found is dropped". A callback's changed value
    is kept, so it must be checked as well."""
    policy = STRICT.derive(
        "cb", allowed_keys={"app.note": Callback(str.strip, "strip")}, blocked_values=("(?i)confidential",)
    )
    unchanged = _redact(policy, _span({"app.note": "confidential"}))
    assert "app.note" not in unchanged.attributes
    changed = _redact(policy, _span({"app.note": "  confidential  "}))
    assert "app.note" not in changed.attributes
