"""Names are kept strings too: a tool, agent, model or guardrail name passes the same public-safety check as any
other value before it is registered or exported (issue 20, class 2).

The attacks are credentials shaped like names (``tests/fakes/secret_names.py``): each passes the registry's name
pattern, so only the check can stop it. Every registration path refuses them with a warning that names the kind
and the reason, never the name; the redactor checks a registered name again; the manual wrappers export
``_OTHER`` in the name's place, in the attribute and in the span name.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from fakes.secret_names import PENDING, RECOGNISED, WITH_SPACES, tail
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import DECLARED_NAME_PATTERN, NAME_PATTERN, NameRegistry, default_registry
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.processor import SpanRedactor
from otel_agentdiag.redaction.recognizers import is_sensitive
from otel_agentdiag.redaction.rules import RegisteredName
from otel_agentdiag.testing import capture_spans

HASHER = IdHasher(bytes.fromhex("504e9d9c07c96ced8ff20b0115abf2facfc56a5bd5da8041dd62d6cddf0d979d"))
KINDS = NameRegistry.KINDS
NAMES_LOGGER = "otel_agentdiag._internal.names"


def _shapes(*groups: dict[str, Callable[[], str]]) -> list[Any]:
    """One parameter per credential format; a format the check does not know yet is skipped (``PENDING``)."""
    out = []
    for group in groups:
        for label, make in group.items():
            marks = ()
            if group is PENDING and not is_sensitive(make()):
                marks = (pytest.mark.skip(reason=f"the public-safety check does not recognise {label} yet"),)
            out.append(pytest.param(make, id=label, marks=marks))
    return out


TOKEN_SHAPES = _shapes(RECOGNISED, PENDING)
DECLARED_SHAPES = _shapes(RECOGNISED, PENDING, WITH_SPACES)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="otel_agentdiag")
    return caplog


def refusals(logs: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in logs.records if r.name == NAMES_LOGGER]


def assert_never_logged(logs: pytest.LogCaptureFixture, secrets: Iterable[str]) -> None:
    for record in logs.records:
        text = record.getMessage() + repr(record.args)
        for secret in secrets:
            assert secret not in text, record.getMessage()


def dump(spans: Iterable[ReadableSpan]) -> str:
    """Everything a span exports besides ids: names, attributes, events, status."""
    return repr(
        [(s.name, dict(s.attributes or {}), [(e.name, dict(e.attributes or {})) for e in s.events]) for s in spans]
    )


# -- the attack is meaningful: the names pass the patterns ------------------------------------------------
@pytest.mark.parametrize(
    "make", [pytest.param(make, id=label) for label, make in {**RECOGNISED, **PENDING, **WITH_SPACES}.items()]
)
def test_every_credential_shape_passes_a_name_pattern(make: Callable[[], str]) -> None:
    name = make()
    assert DECLARED_NAME_PATTERN.fullmatch(name)
    assert bool(NAME_PATTERN.fullmatch(name)) == (" " not in name)


# -- registration ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("make", TOKEN_SHAPES)
def test_register_refuses_a_credential_with_a_warning_and_registers_the_rest(
    logs: pytest.LogCaptureFixture, kind: str, make: Callable[[], str]
) -> None:
    names = NameRegistry()
    secret, safe = make(), f"safe_{kind}_{tail(8)}"
    names.register(**{f"{kind}s": [safe, secret]})
    assert names.is_registered(kind, safe)
    assert not names.is_registered(kind, secret)
    assert secret not in getattr(names, f"{kind}s")
    (message,) = refusals(logs)
    assert f"1 {kind} name was not registered" in message
    assert "public-safety check" in message and "_OTHER" in message
    assert_never_logged(logs, [secret])


@pytest.mark.parametrize("kind", ["tool", "agent", "guardrail"])
@pytest.mark.parametrize("make", DECLARED_SHAPES)
def test_framework_definitions_are_refused_alike(
    logs: pytest.LogCaptureFixture, kind: str, make: Callable[[], str]
) -> None:
    """``register_valid`` (what the LangChain and Agents SDK integrations call) accepts names with spaces, and
    checks them like any other."""
    names = NameRegistry()
    secret, safe = make(), f"Safe {kind} {tail(4)}"
    names.register_valid(kind, [secret, safe, 42, None])
    assert names.is_registered(kind, safe)
    assert not names.is_registered(kind, secret)
    (message,) = refusals(logs)
    assert f"1 {kind} name was not registered" in message
    assert_never_logged(logs, [secret])


def test_readers_rebuilding_a_registry_from_rows_refuse_alike(logs: pytest.LogCaptureFixture) -> None:
    """``register_found`` is how the projection and ``ingest`` rebuild a registry from stored or imported rows."""
    secrets = [make() for make in RECOGNISED.values()]
    names = NameRegistry()
    names.register_found({"tool": {"lookup", *secrets[:6]}, "agent": {"helper", *secrets[6:]}})
    assert names.tools == {"lookup"} and names.agents == {"helper"}
    assert sorted(refusals(logs)) == sorted(
        [
            f"otel-agentdiag: 6 tool names were not registered: {_reason()}; spans carry _OTHER instead",
            f"otel-agentdiag: {len(secrets) - 6} agent names were not registered: {_reason()}; spans carry _OTHER"
            " instead",
        ]
    )
    assert_never_logged(logs, secrets)


def _reason() -> str:
    from otel_agentdiag._internal.names import SAFETY_REASON

    return SAFETY_REASON


def test_a_refused_name_is_checked_and_warned_about_once(logs: pytest.LogCaptureFixture) -> None:
    """A name declared on every run (``agent_run``, a framework's agent on every turn) warns once, not per run."""
    names = NameRegistry()
    secret = RECOGNISED["github_classic_token"]()
    for _ in range(3):
        names.register(agents=[secret])
        names.register_valid("agent", [secret])
    assert not names.is_agent(secret)
    assert len(refusals(logs)) == 1
    # The memory is per kind: the same string as a tool name is checked (and refused) on its own.
    names.register(tools=[secret])
    assert len(refusals(logs)) == 2 and not names.is_tool(secret)


def test_a_malformed_name_is_an_error_that_does_not_repeat_the_name() -> None:
    names = NameRegistry()
    for bad in (WITH_SPACES["bearer_header"](), f"key={RECOGNISED['openai_project_key']()}", "x" * 129):
        with pytest.raises(ValueError, match="not a registrable name") as raised:
            names.register(tools=["fine_tool", bad])
        assert bad not in str(raised.value) and "tool name #2" in str(raised.value)
    secret = RECOGNISED["aws_access_key_id"]()
    with pytest.raises(ValueError, match="not a string") as raised:
        names.register(agents=secret)
    assert secret not in str(raised.value)
    assert names.tools == frozenset()  # nothing was registered by a failed call


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.from_regex(NAME_PATTERN, fullmatch=True),
        st.sampled_from(sorted(RECOGNISED)).map(lambda label: RECOGNISED[label]()),
        st.sampled_from(sorted(PENDING)).map(lambda label: PENDING[label]()),
    )
)
def test_a_name_is_registered_exactly_when_it_passes_the_check_every_value_meets(name: str) -> None:
    names = NameRegistry()
    names.register(tools=[name])
    assert names.is_tool(name) is not is_sensitive(name)


# -- the redactor checks registered names again ------------------------------------------------------------
class _TrustingRegistry(NameRegistry):
    """A registry that holds every name: models one filled by another path, or before the check knew a format."""

    def is_registered(self, kind: str, name: object) -> bool:
        return True


def _span(attributes: dict[str, Any], name: str) -> ReadableSpan:
    return ReadableSpan(
        name=name,
        context=SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED)),
        resource=Resource({}),
        attributes=attributes,
        status=Status(StatusCode.UNSET),
        start_time=1,
        end_time=2,
    )


@pytest.mark.parametrize("make", TOKEN_SHAPES)
@pytest.mark.parametrize("policy", [STRICT, LOCAL], ids=["strict", "local"])
def test_a_registered_name_that_fails_the_check_is_exported_as_the_placeholder(
    make: Callable[[], str], policy: Policy
) -> None:
    tool, agent, guardrail = make(), make(), make()
    redactor = SpanRedactor(policy, HASHER, _TrustingRegistry())
    tool_span = _span(
        {sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: tool}, f"{sc.OP_EXECUTE_TOOL} {tool}"
    )
    handoff = _span(
        {
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.GEN_AI_AGENT_NAME: agent,
            sc.AGENTDIAG_HANDOFF_SOURCE_AGENT: agent,
            sc.AGENTDIAG_HANDOFF_TARGET_AGENT: "billing",
            sc.AGENTDIAG_GUARDRAIL_NAME: guardrail,
        },
        f"{sc.OP_INVOKE_AGENT} {agent}",
    )
    for _ in range(2):  # the second pass takes the remembered verdict
        out = redactor.redact(tool_span)
        assert out.name == f"{sc.OP_EXECUTE_TOOL} {sc.OTHER_VALUE}"
        assert out.attributes[sc.GEN_AI_TOOL_NAME] == sc.OTHER_VALUE
        assert out.attributes["agentdiag.redaction.public_safety_violation"] == 1
        run = redactor.redact(handoff)
        assert run.name == f"{sc.OP_INVOKE_AGENT} {sc.OTHER_VALUE}"
        assert run.attributes[sc.GEN_AI_AGENT_NAME] == sc.OTHER_VALUE
        assert run.attributes[sc.AGENTDIAG_HANDOFF_SOURCE_AGENT] == sc.OTHER_VALUE
        assert run.attributes[sc.AGENTDIAG_HANDOFF_TARGET_AGENT] == "billing"  # a safe name is kept
        assert run.attributes[sc.AGENTDIAG_GUARDRAIL_NAME] == sc.OTHER_VALUE
        assert run.attributes["agentdiag.redaction.public_safety_violation"] == 3
        assert all(secret not in dump([out, run]) for secret in (tool, agent, guardrail))


@pytest.mark.parametrize("make", TOKEN_SHAPES)
def test_a_registered_model_name_rule_checks_the_name_too(make: Callable[[], str]) -> None:
    policy = STRICT.derive("models", allowed_keys={sc.GEN_AI_REQUEST_MODEL: RegisteredName("model")})
    secret = make()
    out = SpanRedactor(policy, HASHER, _TrustingRegistry()).redact(
        _span({sc.GEN_AI_OPERATION_NAME: "chat", sc.GEN_AI_REQUEST_MODEL: secret}, f"chat {secret}")
    )
    assert out.attributes[sc.GEN_AI_REQUEST_MODEL] == sc.OTHER_VALUE
    assert out.name == "chat _OTHER"


@pytest.mark.parametrize("make", TOKEN_SHAPES)
def test_the_model_name_rule_drops_a_credential(make: Callable[[], str]) -> None:
    """Model names are a bounded-token rule, which runs the check: the value is dropped, the span is ``chat``."""
    secret = make()
    for policy in (STRICT, LOCAL):
        out = SpanRedactor(policy, HASHER, NameRegistry()).redact(
            _span(
                {sc.GEN_AI_OPERATION_NAME: "chat", sc.GEN_AI_REQUEST_MODEL: secret, sc.GEN_AI_RESPONSE_MODEL: secret},
                f"chat {secret}",
            )
        )
        assert out.name == "chat"
        assert sc.GEN_AI_REQUEST_MODEL not in out.attributes and sc.GEN_AI_RESPONSE_MODEL not in out.attributes
        assert out.attributes["agentdiag.redaction.public_safety_violation"] == 2
        assert secret not in dump([out])


# -- the manual entry points -------------------------------------------------------------------------------
def test_every_manual_entry_point_exports_the_placeholder_for_a_credential(logs: pytest.LogCaptureFixture) -> None:
    made = {label: make() for label, make in RECOGNISED.items()}
    s = iter(made.values())
    registered_tool, registered_agent, registered_model, registered_guardrail = next(s), next(s), next(s), next(s)
    decorated_tool, decorated_agent, run_name, runtime_tool = next(s), next(s), next(s), next(s)

    agentdiag.register_names(
        tools=["names_safe_tool", registered_tool],
        agents=[registered_agent],
        models=[registered_model],
        guardrails=[registered_guardrail],
    )

    @agentdiag.tool(decorated_tool)
    def fetch(x: int) -> int:
        return x + 1

    @agentdiag.agent(decorated_agent)
    async def helper(x: int) -> int:
        return x * 2

    with capture_spans(redact=True) as captured:
        for _ in range(2):  # the second run meets names refused already: no new warning
            with agentdiag.agent_run(run_name, conversation_id="conv-1"):
                with agentdiag.agent_run(registered_agent):
                    pass
                assert fetch(1) == 2
                assert asyncio.run(helper(2)) == 4
                with agentdiag.llm_call(provider="openai", model=registered_model):
                    pass
                with agentdiag.tool_call(registered_tool, call_id="c1"):
                    pass
                with agentdiag.tool_call(runtime_tool, call_id="c2"):
                    pass
                with agentdiag.tool_call("names_safe_tool", call_id="c3"):
                    pass
        spans = captured.spans()

    text = dump(spans)
    for label, secret in made.items():
        assert secret not in text, label
        for kind in KINDS:
            assert not default_registry.is_registered(kind, secret), (label, kind)
    assert sorted(s.name for s in spans) == sorted(
        2
        * [
            "invoke_agent _OTHER",
            "invoke_agent _OTHER",
            "execute_tool _OTHER",
            "invoke_agent _OTHER",
            "chat",
            "execute_tool _OTHER",
            "execute_tool _OTHER",
            "execute_tool names_safe_tool",
        ]
    )
    # One warning per refused declaration, none for the undeclared run-time tool name (it is simply _OTHER).
    assert sorted(refusals(logs)) == sorted(
        [
            f"otel-agentdiag: 1 {kind} name was not registered: {_reason()}; spans carry _OTHER instead"
            for kind in ("tool", "agent", "model", "guardrail", "tool", "agent", "agent")
        ]
    )
    assert_never_logged(logs, made.values())
