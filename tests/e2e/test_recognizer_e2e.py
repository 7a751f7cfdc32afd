"""End to end: credentials and personal data in allowed keys never leave, whichever way they are disguised.

Through the real pipeline: ``configure()`` with a SQLite store and the strict OTLP branch to the loopback receiver
(``otlp_receiver``). Each secret is planted where a rule would keep a string of its shape (a model name, a provider
name, an error type, the service name and version, the instrumentation scope), plain where the old check missed
the format (Groq, Hugging Face, Stripe, database credentials, card and phone numbers) and disguised with
zero-width, bidi, tag or full-width characters elsewhere. The secret's core (its random body, as ASCII and as
full-width) must be absent from the store's bytes (database and ``-wal``), every OTLP request body, every export
format, and the CLI's output. Allowed values on the same spans are present, so each byte search means something.
"""

from __future__ import annotations

import json
import random
import secrets
import string
from pathlib import Path

import pytest
from click.testing import CliRunner
from otlp_receiver import OTLPReceiver

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli
from otel_agentdiag.storage import SpanStore

WAIT_S = 10.0
RNG = random.Random(3_2026)

pytestmark = pytest.mark.usefixtures("clean_env")


def core(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def luhn(prefix: str, length: int) -> str:
    body = prefix + core(string.digits, length - len(prefix) - 1)
    for check in string.digits:
        total = sum(
            (d - 9 if d > 9 else d)
            for d in (int(c) * (2 if i % 2 else 1) for i, c in enumerate(reversed(body + check)))
        )
        if total % 10 == 0:
            return body + check
    raise AssertionError("unreachable")


LOWER = string.ascii_lowercase + string.digits
CORES = {
    "groq": core(LOWER, 52),
    "hf": core(string.ascii_letters, 34),
    "stripe": core(string.ascii_letters + string.digits, 24),
    "db": core(string.ascii_letters, 14),
    "anthropic": core(string.ascii_letters + string.digits, 40),
    "gitlab": core(string.ascii_letters + string.digits, 22),
    "npm": core(string.ascii_letters + string.digits, 36),
    "card": luhn("4", 16),
    "phone": "7946" + core(string.digits, 4),
    "sendgrid": core(string.ascii_letters, 43),
}
CARD = " ".join(CORES["card"][i : i + 4] for i in range(0, 16, 4))
PLANTED = {
    # span attributes (each value has the shape its token rule keeps, but for the secret)
    sc.GEN_AI_PROVIDER_NAME: "gsk_" + CORES["groq"],  # Groq: lower-case letters and digits, like a provider
    sc.ERROR_TYPE: "hf_" + CORES["hf"],  # Hugging Face: an identifier, like an exception class
    sc.GEN_AI_REQUEST_MODEL: "admin:" + CORES["db"] + "@db.internal:5432",  # a database address with a password
    sc.GEN_AI_RESPONSE_MODEL: "my_sk-ant-api03-" + CORES["anthropic"],  # an Anthropic key inside a name
    "llm.model_name": "sk_live_" + CORES["stripe"],
    "embedding.model_name": "SG." + core(string.ascii_letters, 22) + "." + CORES["sendgrid"],
}
SERVICE_NAME = "vocab-agent-g\u200blpat-" + CORES["gitlab"]  # zero-width space inside the GitLab prefix
SCOPE_NAME = "npm_\u202e" + CORES["npm"]  # a bidi override
SCOPE_VERSION = fullwidth("sk_live_" + CORES["stripe"])  # full-width
RESOURCE = f"service.version={CARD},deployment.environment=+44 20 {CORES['phone'][:4]} {CORES['phone'][4:]}"
TAGGED = "gpt-4o-mini\U000e0041\U000e0042"  # tag characters after an allowed model name


def forms(value: str) -> list[bytes]:
    """The bytes that would betray ``value``: as written, full-width, and UTF-16 (a JSON ``\\u`` escape is ASCII)."""
    return [value.encode(), fullwidth(value).encode(), value.encode("utf-16-le")]


def assert_absent(blob: bytes, where: str) -> None:
    for name, secret in CORES.items():
        for form in forms(secret):
            assert form not in blob, f"the {name} secret leaked into {where}"
    for form in forms(CARD):
        assert form not in blob, f"the card number leaked into {where}"


def test_disguised_and_new_format_secrets_leave_through_no_destination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: OTLPReceiver
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", RESOURCE)
    store = tmp_path / "t.db"
    key = secrets.token_hex(32)
    handle = agentdiag.configure(
        store=store, hash_key=key, otlp_endpoint=receiver.endpoint, service_name=SERVICE_NAME, set_global=False
    )
    try:
        with agentdiag.agent_run("recogniser-agent", conversation_id="conv-e2e"):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.record_response(input_tokens=3, output_tokens=4, finish_reasons=["stop"])
            with agentdiag.llm_call(provider="openai", model="gpt-4o") as call:
                call.span.set_attributes(PLANTED)
            with agentdiag.llm_call(provider="openai", model=TAGGED):
                pass
            tracer = handle.tracer_provider.get_tracer(SCOPE_NAME, SCOPE_VERSION)
            with tracer.start_as_current_span("chat", attributes={sc.GEN_AI_OPERATION_NAME: "chat"}):
                pass
    finally:
        handle.shutdown()

    assert receiver.wait_for_spans(5, timeout=WAIT_S), f"only {receiver.span_count} spans arrived"
    # -- the OTLP payload --------------------------------------------------------------------------------------
    for index, (raw, decoded) in enumerate(zip(receiver.raw_bodies, receiver.decoded_bodies, strict=True)):
        assert_absent(raw, f"OTLP request body {index}")
        assert_absent(decoded, f"OTLP request body {index} decoded")
    assert any(b"gpt-4o-mini" in body for body in receiver.decoded_bodies)  # allowed values are there
    spans = receiver.spans()
    assert any(s.attributes.get(sc.GEN_AI_REQUEST_MODEL) == "gpt-4o-mini" for s in spans)
    violations = sc.AGENTDIAG_REDACTION_PREFIX + "public_safety_violation"
    # The resource's refused values (service.name, service.version, deployment.environment) count on every span.
    resource_refused = 3
    assert all(s.attributes.get(violations, 0) >= resource_refused for s in spans)
    planted = [s for s in spans if s.attributes.get(violations, 0) >= resource_refused + len(PLANTED)]
    assert len(planted) == 1, [dict(s.attributes) for s in spans]
    assert not set(PLANTED) & set(planted[0].attributes)
    tagged = [
        s
        for s in spans
        if s.attributes.get(violations) == resource_refused + 1 and sc.GEN_AI_REQUEST_MODEL not in s.attributes
    ]
    assert tagged, "the tag-character model name was not dropped"
    resource = spans[0].resource
    assert resource.get("service.name") != SERVICE_NAME and "service.version" not in resource
    assert "deployment.environment" not in resource
    assert {s.scope_name for s in spans} >= {"otel_agentdiag"}
    assert SCOPE_NAME not in {s.scope_name for s in spans} and SCOPE_VERSION not in {s.scope_version for s in spans}

    # -- the store's bytes (database and WAL) ------------------------------------------------------------------
    for suffix in ("", "-wal"):
        path = Path(f"{store}{suffix}")
        if path.exists():
            assert_absent(path.read_bytes(), path.name)
    wal = Path(f"{store}-wal")
    assert b"gpt-4o-mini" in store.read_bytes() + (wal.read_bytes() if wal.exists() else b"")

    # -- every export format, and the CLI's output --------------------------------------------------------------
    monkeypatch.setenv("AGENTDIAG_HASH_KEY", key)
    runner = CliRunner()
    for output_format in ("bundle", "otlp-json", "jaeger-json"):
        out = tmp_path / f"export.{output_format}"
        result = runner.invoke(cli, ["export", "--format", output_format, "--out", str(out), "--store", str(store)])
        assert result.exit_code == 0, result.output
        assert_absent(out.read_bytes(), f"export --format {output_format}")
        assert_absent(result.output.encode(), f"export {output_format} output")
    trace_id = runner.invoke(cli, ["traces", "--store", str(store), "--format", "json"]).output
    assert_absent(trace_id.encode(), "traces --format json")
    for args in (["traces"], ["sessions"], ["status"], ["receipt"]):
        result = runner.invoke(cli, [*args, "--store", str(store)])
        assert result.exit_code in (0, 1), result.output
        assert_absent(result.output.encode(), " ".join(args))
    for summary in json.loads(trace_id):
        for fmt in ("text", "json"):
            result = runner.invoke(cli, ["show", summary["trace_id"], "--format", fmt, "--store", str(store)])
            assert result.exit_code == 0, result.output
            assert_absent(result.output.encode(), f"show --format {fmt}")
            assert "gpt-4o-mini" in result.output or summary["name"] != "invoke_agent recogniser-agent"


def test_captured_content_loses_class_3_credentials_in_the_store(tmp_path: Path) -> None:
    """Local content capture keeps prompts, but not the credentials in them, whatever their disguise."""
    store = tmp_path / "content.db"
    cores = {name: core(string.ascii_letters + string.digits, 30) for name in ("gitlab", "env", "key", "db")}
    cores["groq"] = core(string.ascii_letters + string.digits, 52)  # Groq keys are gsk_ and 52 characters
    prompt = (
        f"my token is g\u200blpat-{cores['gitlab']}; use {fullwidth('gsk_' + cores['groq'])} for Groq; "
        f"GITLAB_TOKEN={cores['env']} and postgres user admin:{cores['db']}@db.internal:5432 please"
    )
    handle = agentdiag.configure(store=store, hash_key=secrets.token_hex(32), capture_content=True, set_global=False)
    try:
        with agentdiag.agent_run("content-agent"):
            with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                call.record_content(input_messages=[{"role": "user", "content": prompt}])
            with agentdiag.tool_call("get_weather", arguments={"city": "Lisbon", "X-Api-Key": cores["key"]}):
                pass
    finally:
        handle.shutdown()
    blob = store.read_bytes() + (Path(f"{store}-wal").read_bytes() if Path(f"{store}-wal").exists() else b"")
    assert b"please" in blob and b"Lisbon" in blob  # the content is there
    for name, secret in cores.items():
        for form in forms(secret):
            assert form not in blob, f"the {name} credential is in the stored content"
    with SpanStore(store, create=False) as opened:
        (summary,) = opened.list_traces()
    shown = CliRunner().invoke(cli, ["show", summary.trace_id, "--content", "--store", str(store)]).output
    assert "[redacted]" in shown and "please" in shown
    assert not any(secret in shown for secret in cores.values())
