"""Finish reasons are a closed set: the providers' documented values leave, anything else becomes ``_OTHER``.

``gen_ai.response.finish_reasons`` used to keep any lower-case token, so ``jane_doe`` or ``ssn_123_45_6789``
left as a "reason". Now each item outside the documented set becomes ``_OTHER`` in its place (the array keeps
its length, so reasons still line up with choices) and the value is counted once as ``invalid_value``.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest
from hostile_vocabulary import DATA_FINISH_REASONS, SPELLING_FINISH_REASONS
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.diagnostics.status import TOOL_FINISH_REASONS
from otel_agentdiag.instrumentation.openai import patch as openai_patch
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.finish_reasons import FINISH_REASONS
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.policy_file import load_policy, policy_from_dict, policy_to_dict, rule_from_spec
from otel_agentdiag.redaction.presets import FINISH_REASON, FINISH_REASON_ARRAY, LOCAL, STRICT
from otel_agentdiag.redaction.processor import SpanRedactor
from otel_agentdiag.redaction.reasons import INVALID_VALUE, TOO_LONG
from otel_agentdiag.redaction.recognizers import is_sensitive
from otel_agentdiag.redaction.rules import ClosedSet, PolicyError

HASHER = IdHasher(bytes.fromhex("955dc3e7030071dac7d3ff9012d8fd23631c1c1f3412f4b0d701f0096c342416"))
KEY = sc.GEN_AI_RESPONSE_FINISH_REASONS
HOSTILE = DATA_FINISH_REASONS + SPELLING_FINISH_REASONS
PRESETS = pytest.mark.parametrize("policy", [STRICT, LOCAL], ids=["strict", "local"])


def _redact(policy: Policy, attributes: dict[str, Any]) -> ReadableSpan:
    span = ReadableSpan(
        name="chat gpt-4o-mini",
        context=SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED)),
        resource=Resource({}),
        attributes={sc.GEN_AI_OPERATION_NAME: "chat", sc.GEN_AI_REQUEST_MODEL: "gpt-4o-mini", **attributes},
        status=Status(StatusCode.UNSET),
        start_time=1,
        end_time=2,
    )
    return SpanRedactor(policy, HASHER, NameRegistry()).redact(span)


def _counters(span: ReadableSpan) -> dict[str, Any]:
    prefix = sc.AGENTDIAG_REDACTION_PREFIX
    return {k[len(prefix) :]: v for k, v in (span.attributes or {}).items() if k.startswith(prefix)}


# --- the set ---------------------------------------------------------------------------------------------
def test_the_set_holds_the_providers_documented_values() -> None:
    for provider, values in {
        "OpenAI": ("stop", "length", "tool_calls", "content_filter", "function_call"),
        "Anthropic": ("end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"),
        "Bedrock": ("guardrail_intervened", "content_filtered"),
        "Gemini": ("STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "SPII", "MALFORMED_FUNCTION_CALL", "safety"),
        "Cohere": ("COMPLETE", "TOOL_CALL", "complete"),
        "GenAI semconv": ("stop", "length", "content_filter", "tool_call", "error"),
    }.items():
        assert set(values) <= FINISH_REASONS, provider
    assert not set(HOSTILE) & FINISH_REASONS
    assert sc.OTHER_VALUE not in FINISH_REASONS
    assert all(not is_sensitive(value) for value in FINISH_REASONS)


def test_the_installed_sdks_literal_types_are_in_the_set() -> None:
    """Checked against the provider SDKs as installed, not a copy of their documentation."""
    from anthropic.types import StopReason
    from openai.types.chat.chat_completion import Choice
    from openai.types.completion_choice import CompletionChoice
    from openai.types.responses.response import IncompleteDetails

    literals = [StopReason, Choice.model_fields["finish_reason"].annotation]
    literals.append(CompletionChoice.model_fields["finish_reason"].annotation)
    literals.append(IncompleteDetails.model_fields["reason"].annotation)
    values: set[str] = set()
    for annotation in literals:
        for arg in typing.get_args(annotation):
            values |= {v for v in (typing.get_args(arg) or (arg,)) if isinstance(v, str)}
    assert {"stop", "end_turn", "max_output_tokens"} <= values
    assert values <= FINISH_REASONS, sorted(values - FINISH_REASONS)


def test_what_our_code_emits_or_reads_is_in_the_set() -> None:
    assert TOOL_FINISH_REASONS <= FINISH_REASONS  # what `status` treats as "the model asked for a tool"
    for response in (
        {"object": "response", "status": "completed", "output": [{"type": "function_call"}]},
        {"object": "response", "status": "completed", "output": [{"type": "message"}]},
        {"object": "response", "status": "incomplete"},
        {"object": "response", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
        {"object": "response", "status": "failed"},
    ):
        (reason,) = openai_patch.responses_response(response)[KEY]
        assert reason in FINISH_REASONS, reason


# --- the rule --------------------------------------------------------------------------------------------
@PRESETS
def test_documented_reasons_pass_unchanged(policy: Policy) -> None:
    reasons = tuple(sorted(FINISH_REASONS))
    for start in range(0, len(reasons), 16):
        chunk = reasons[start : start + 16]
        out = _redact(policy, {KEY: chunk, "llm.finish_reason": chunk[0]})
        assert out.attributes[KEY] == chunk
        assert out.attributes["llm.finish_reason"] == chunk[0]
        assert _counters(out) == {}


@PRESETS
@pytest.mark.parametrize("hostile", HOSTILE)
def test_an_unknown_reason_becomes_other_in_its_place(policy: Policy, hostile: str) -> None:
    out = _redact(policy, {KEY: ("stop", hostile, "length"), "llm.finish_reason": hostile})
    assert out.attributes[KEY] == ("stop", sc.OTHER_VALUE, "length")
    assert out.attributes["llm.finish_reason"] == sc.OTHER_VALUE
    assert _counters(out) == {INVALID_VALUE: 2}
    if len(hostile) > 4:
        assert hostile not in out.to_json()


def test_every_unknown_item_is_replaced_and_the_value_counted_once() -> None:
    reasons = (*DATA_FINISH_REASONS[:6], "tool_calls", *DATA_FINISH_REASONS[6:12])
    out = _redact(STRICT, {KEY: list(reasons)})
    assert out.attributes[KEY] == tuple(sc.OTHER_VALUE if r != "tool_calls" else r for r in reasons)
    assert _counters(out) == {INVALID_VALUE: 1}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("stop", INVALID_VALUE),  # not an array
        ((1, 2), INVALID_VALUE),
        ((True,), INVALID_VALUE),
        (("stop",) * 17, TOO_LONG),
    ],
)
def test_a_value_that_is_not_a_short_array_of_strings_is_dropped(value: Any, reason: str) -> None:
    out = _redact(STRICT, {KEY: value})
    assert KEY not in out.attributes
    assert _counters(out) == {reason: 1}


def test_an_empty_array_stays_empty() -> None:
    out = _redact(STRICT, {KEY: ()})
    assert out.attributes.get(KEY, ()) == ()
    assert _counters(out) == {}


# --- in policy files ------------------------------------------------------------------------------------
def test_a_closed_set_in_a_policy_file(tmp_path: Path) -> None:
    path = tmp_path / "outcome.toml"
    path.write_text(
        '[allowed_keys]\n"app.outcome" = { type = "closed_set", values = ["ok", "gave_up"] }\n'
        '"app.outcomes" = { type = "closed_set", values = ["ok", "gave_up"], max_items = 3 }\n',
        encoding="utf-8",
    )
    policy = load_policy(path)
    assert policy.rule_for("app.outcome") == ClosedSet(frozenset({"ok", "gave_up"}))
    out = _redact(policy, {"app.outcome": "jane_doe", "app.outcomes": ["ok", "ssn_123_45_6789"]})
    assert out.attributes["app.outcome"] == sc.OTHER_VALUE
    assert out.attributes["app.outcomes"] == ("ok", sc.OTHER_VALUE)
    assert policy_from_dict(policy_to_dict(policy)).allowed_keys == policy.allowed_keys


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"type": "closed_set"}, "missing 'values'"),
        ({"type": "closed_set", "values": []}, "non-empty list"),
        ({"type": "closed_set", "values": ["ok", ""]}, "non-empty list"),
        ({"type": "closed_set", "values": ["ok", 1]}, "non-empty list"),
        ({"type": "closed_set", "values": ["ok"], "max_items": 0}, "'max_items' must be a positive integer"),
        ({"type": "closed_set", "values": ["ok"], "max_items": True}, "'max_items' must be a positive integer"),
        ({"type": "closed_set", "values": ["ok"], "pattern": "x"}, "unknown field"),
    ],
)
def test_a_bad_closed_set_is_an_error(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        rule_from_spec(spec)


@pytest.mark.parametrize("value", [("stop", "not_a_reason"), ("jane_doe",), "ssn_123_45_6789"])
def test_a_second_redaction_changes_nothing(value: object) -> None:
    """The placeholder an unknown reason became passes as it is: redacting a redacted span is a no-op."""
    rule = FINISH_REASON_ARRAY if isinstance(value, tuple) else FINISH_REASON
    once, reason = rule.apply(value, None)  # type: ignore[arg-type]
    assert reason == INVALID_VALUE and sc.OTHER_VALUE in (once if isinstance(once, tuple) else (once,))
    assert rule.apply(once, None) == (once, None)  # type: ignore[arg-type]
