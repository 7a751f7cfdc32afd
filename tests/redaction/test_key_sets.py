"""Policy keys: ``{a,b}`` sets are closed, ``*`` patterns are open (kept for old policy files, and warned about).

A policy file that names a family of keys can write ``"vendor.metrics.{latency,queue_depth}"``: exactly those
keys, stored spelled out, so ``agentdiag policy`` and ``policy_to_dict`` show each. A ``*`` still works as it
did, but it lets any key-shaped key under its prefix leave (data-shaped ones too), and the CLI says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hostile_vocabulary import DATA_SEGMENTS, SPELLING_SEGMENTS
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.cli import cli
from otel_agentdiag.redaction import keys as enumerated
from otel_agentdiag.redaction.allowlist import Policy, open_patterns
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.policy_file import load_policy, policy_from_dict, policy_to_dict
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.redaction.processor import SpanRedactor
from otel_agentdiag.redaction.reasons import UNKNOWN_KEY
from otel_agentdiag.redaction.rules import Enum, FloatRange, IntRange, PolicyError, Scalar

HASHER = IdHasher(bytes.fromhex("7197a9fb9c3ec6355e776858ae0c7127eab7f24a7f2a6d28cbc6f7147f251423"))
FLOAT = {"type": "float", "min": 0.0, "max": 1e9}


def _redact(policy: Policy, attributes: dict[str, Any], resource: Resource | None = None) -> ReadableSpan:
    span = ReadableSpan(
        name="agent.iteration",
        context=SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED)),
        resource=resource or Resource({}),
        attributes=attributes,
        status=Status(StatusCode.UNSET),
        start_time=1,
        end_time=2,
    )
    return SpanRedactor(policy, HASHER, NameRegistry()).redact(span)


def _file_policy(tmp_path: Path, text: str) -> Policy:
    path = tmp_path / "team.toml"
    path.write_text(text, encoding="utf-8")
    return load_policy(path)


# --- sets --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "spelled"),
    [
        ("vendor.metrics.{latency,queue_depth}", ("vendor.metrics.latency", "vendor.metrics.queue_depth")),
        ("gen_ai.usage.{input,output}_tokens", ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")),
        ("a.{b,c}.{d,e}", ("a.b.d", "a.b.e", "a.c.d", "a.c.e")),
        ("x.{cache_read.input_tokens, y}", ("x.cache_read.input_tokens", "x.y")),
        ("x.{y,y}", ("x.y",)),
        ("plain.key", ("plain.key",)),
    ],
)
def test_a_key_set_stands_for_exactly_the_keys_it_spells(key: str, spelled: tuple[str, ...]) -> None:
    assert enumerated.expand_key(key) == spelled
    policy = STRICT.derive("sets", allowed_keys={key: IntRange(0, 9)})
    for one in spelled:
        assert policy.rule_for(one) == IntRange(0, 9)
    assert not [k for k in policy.allowed_keys if "{" in k or "}" in k]  # stored spelled out


def test_a_key_set_is_closed(tmp_path: Path) -> None:
    policy = _file_policy(tmp_path, '[allowed_keys]\n"vendor.metrics.{latency,queue_depth}" = ' + _toml(FLOAT) + "\n")
    near = [f"vendor.metrics.{segment}" for segment in DATA_SEGMENTS + SPELLING_SEGMENTS]
    near += ["vendor.metrics.latency.jane_doe", "vendor.metrics.latency_4111111111111111", "vendor.metrics.{latency}"]
    for key in near:
        assert policy.rule_for(key) is None, key
    out = _redact(policy, {"vendor.metrics.latency": 1.5, **dict.fromkeys(near, 2.0)})
    assert out.attributes["vendor.metrics.latency"] == 1.5
    assert out.attributes[sc.AGENTDIAG_REDACTION_PREFIX + UNKNOWN_KEY] == len(near)
    assert not [key for key in out.attributes if key.startswith("vendor.") and key != "vendor.metrics.latency"]


def test_key_sets_work_for_resource_and_scope_keys(tmp_path: Path) -> None:
    policy = _file_policy(
        tmp_path,
        '[resource_keys]\n"cloud.{region,provider}" = { type = "scalar", max_length = 32 }\n'
        '[scope_keys]\n"library.{component,tier}" = { type = "enum", values = ["db"] }\n',
    )
    assert policy.resource_rule_for("cloud.region") == policy.resource_rule_for("cloud.provider") == Scalar(32)
    assert policy.resource_rule_for("cloud.region_jane") is None
    assert policy.scope_rule_for("library.tier") == Enum(frozenset({"db"}))
    resource = Resource({"cloud.region": "eu-west-1", "cloud.account.id": "4111111111111111"})
    assert dict(_redact(policy, {}, resource).resource.attributes) == {"cloud.region": "eu-west-1"}


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("vendor.{}", "non-empty key segment"),
        ("vendor.{a,,b}", "non-empty key segment"),
        ("vendor.{a b}", "non-empty key segment"),
        ("vendor.{a,*}", "non-empty key segment"),
        ("vendor.{a@b}", "non-empty key segment"),
        ("vendor.{a", "without its pair"),
        ("vendor.a}", "without its pair"),
        ("vendor.{a,{b}}", "set inside a set"),
        ("v.{a,b,c,d,e,f,g,h}.{a,b,c,d,e,f,g,h}.{a,b,c,d,e,f,g,h}", "at most 256"),
    ],
)
def test_a_malformed_key_set_is_an_error_naming_the_file_and_the_key(tmp_path: Path, key: str, message: str) -> None:
    with pytest.raises(PolicyError) as raised:
        _file_policy(tmp_path, f'[allowed_keys]\n"{key}" = {_toml(FLOAT)}\n')
    text = str(raised.value)
    assert text.startswith(str(tmp_path / "team.toml")), text
    assert "allowed_keys" in text and message in text, text


def test_a_policy_with_sets_round_trips_spelled_out(tmp_path: Path) -> None:
    policy = _file_policy(
        tmp_path,
        '[allowed_keys]\n"vendor.metrics.{latency,queue_depth}" = ' + _toml(FLOAT) + "\n"
        '"app.outcome" = { type = "closed_set", values = ["ok", "gave_up"] }\n',
    )
    table = policy_to_dict(policy)
    assert {"vendor.metrics.latency", "vendor.metrics.queue_depth"} <= set(table["allowed_keys"])
    assert not [key for key in table["allowed_keys"] if "{" in key]
    again = policy_from_dict(json.loads(json.dumps(table)))
    assert again.allowed_keys == policy.allowed_keys
    assert again.resource_keys == policy.resource_keys


# --- removing --------------------------------------------------------------------------------------------
def test_false_removes_what_a_key_stands_for(tmp_path: Path) -> None:
    policy = _file_policy(
        tmp_path,
        '[allowed_keys]\n"gen_ai.usage.{input_tokens,output_tokens}" = false\n"llm.token_count.*" = false\n'
        '"llm.token_count.total" = { type = "int", min = 0, max = 100 }\n',
    )
    assert policy.rule_for("gen_ai.usage.input_tokens") is None
    assert policy.rule_for("gen_ai.usage.output_tokens") is None
    assert policy.rule_for("gen_ai.usage.cache_read.input_tokens") is not None  # not in the set
    # A pattern removes every key it matches, before the file's own keys are added.
    assert [key for key in policy.allowed_keys if key.startswith("llm.token_count.")] == ["llm.token_count.total"]
    assert policy.rule_for("llm.token_count.total") == IntRange(0, 100)


# --- open patterns ---------------------------------------------------------------------------------------
def test_a_star_pattern_in_a_policy_file_still_works_and_is_open(tmp_path: Path) -> None:
    """Compatibility: an old file's pattern keeps matching key-shaped keys, data-shaped ones included; that is
    the documented risk (docs/policy.md), which is why the presets have none and the CLI warns."""
    policy = _file_policy(tmp_path, '[allowed_keys]\n"vendor.metrics.*" = ' + _toml(FLOAT) + "\n")
    assert open_patterns(policy) == ("vendor.metrics.*",)
    assert policy.rule_for("vendor.metrics.p99") == FloatRange(0.0, 1e9)
    assert policy.rule_for("vendor.metrics.jane_doe_example_com") is not None
    # Still held to the shape of a key and the public-safety check (a card number in a segment is caught).
    for key in (
        "vendor.metrics.jane@example.com",
        "vendor.metrics.a b",
        "vendor.metrics." + "x" * 200,
        "vendor.metrics.customer_4111111111111111",
    ):
        assert policy.rule_for(key) is None, key


def test_agentdiag_policy_warns_about_every_open_pattern(tmp_path: Path) -> None:
    path = tmp_path / "open.toml"
    path.write_text(
        '[allowed_keys]\n"vendor.metrics.*" = ' + _toml(FLOAT) + '\n"app.{tier,plan}" = { type = "bool" }\n'
        '[resource_keys]\n"cloud.*" = { type = "scalar" }\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli, ["policy", "--policy", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 2
    assert "'cloud.*'" in warnings[0] and "'vendor.metrics.*'" in warnings[1]
    assert all("carry data" in line for line in warnings)
    assert "app.tier" in json.loads(result.stdout)["allowed_keys"]
    clean = CliRunner().invoke(cli, ["policy"], catch_exceptions=False)
    assert clean.exit_code == 0 and clean.stderr == ""


def _toml(spec: dict[str, Any]) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in spec.items()) + " }"
