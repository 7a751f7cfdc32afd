"""Issue 33, class 2, end to end: secrets of unknown shape in free-text values leave through no destination.

Through the real pipeline: ``configure()`` with a SQLite store (local policy) and the strict OTLP branch to a
loopback receiver, then every export format and the CLI. The attacks are the issue's and more: a 32-hex
Azure-OpenAI-style key as ``gen_ai.request.model`` and as ``service.version``, a base64 blob and a munged e-mail
address (``(at)``) in resource values, an IBAN as ``service.namespace``, a base64url token as the response model,
a random hex token in the provider name, a random identifier as ``error.type``, a full commit id as
``service.instance.id``. Real model ids on the same spans are kept, so every byte search means something, and
each refusal is counted on the span (``agentdiag.redaction.public_safety_violation``).
"""

from __future__ import annotations

import random
import secrets
import string
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from e2e.otlp_receiver import OTLPReceiver

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag.cli import cli

WAIT_S = 10.0
RNG = random.Random(33_4026)
VIOLATION = sc.AGENTDIAG_REDACTION_PREFIX + "public_safety_violation"


def rand(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def iban(country: str, bban: str) -> str:
    digits = "".join(str(int(char, 36)) for char in bban + country + "00")
    return f"{country}{98 - int(digits) % 97:02d}{bban}"


HEX = "0123456789abcdef"
CORES = {
    "azure_model": rand(HEX, 32),
    "azure_version": rand(HEX, 32),
    "blob": rand(string.ascii_letters + string.digits + "+/", 40),
    "base64url": rand(string.ascii_letters + string.digits + "-_", 43),
    "provider": rand(HEX, 36),
    "error": "E" + rand(string.ascii_letters + string.digits, 31),
    "email": "jane.doe" + rand(string.digits, 4),
    "iban": iban("GB", "WEST" + rand(string.digits, 14)),
    "commit": rand(HEX, 40),
}
PLANTED = {
    sc.GEN_AI_REQUEST_MODEL: CORES["azure_model"],
    sc.GEN_AI_RESPONSE_MODEL: "gpt-4o-" + CORES["base64url"],
    sc.GEN_AI_PROVIDER_NAME: "azure." + CORES["provider"],
    sc.ERROR_TYPE: CORES["error"],
    "llm.model_name": CORES["blob"].replace("+", "").replace("/", ""),
}
RESOURCE = {
    "service.version": CORES["azure_version"],
    "service.namespace": CORES["iban"],
    "deployment.environment.name": CORES["email"] + "(at)example.com",
    "deployment.environment": "v" + CORES["blob"] + "==",
    "service.instance.id": CORES["commit"],
}
KEPT_MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "anthropic.claude-3-haiku-20240307-v1:0", "gpt-4o-2024-08-06")


def assert_absent(blob: bytes, where: str) -> None:
    for name, secret in CORES.items():
        for form in (secret.encode(), secret.encode("utf-16-le")):
            assert form not in blob, f"the {name} secret leaked into {where}"


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as running:
        yield running
        assert running.errors == []


def test_free_text_secrets_leave_through_no_destination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: OTLPReceiver
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", ",".join(f"{k}={v}" for k, v in RESOURCE.items()))
    store = tmp_path / "t.db"
    key = secrets.token_hex(32)
    handle = agentdiag.configure(
        store=store, hash_key=key, otlp_endpoint=receiver.endpoint, service_name="vocab-agent", set_global=False
    )
    try:
        with agentdiag.agent_run("free-text-agent", conversation_id="conv-33"):
            for model in KEPT_MODELS:
                with agentdiag.llm_call(provider="openai", model=model) as call:
                    call.record_response(input_tokens=3, output_tokens=4, finish_reasons=["stop"])
            with agentdiag.llm_call(provider="openai", model="gpt-4o") as call:
                call.span.set_attributes(PLANTED)
    finally:
        handle.shutdown()

    assert receiver.wait_for_spans(5, timeout=WAIT_S), f"only {receiver.span_count} spans arrived"
    # -- the OTLP payload (strict) --------------------------------------------------------------------------------
    for index, (raw, decoded) in enumerate(zip(receiver.raw_bodies, receiver.decoded_bodies, strict=True)):
        assert_absent(raw, f"OTLP request body {index}")
        assert_absent(decoded, f"OTLP request body {index} decoded")
    spans = receiver.spans()
    kept = {s.attributes.get(sc.GEN_AI_REQUEST_MODEL) for s in spans}
    assert set(KEPT_MODELS) <= kept, kept
    resource = spans[0].resource
    assert resource.get("service.name") == "vocab-agent" and not set(RESOURCE) & set(resource)
    # Every span carries the resource's refusals; the planted span its own too.
    assert all(s.attributes.get(VIOLATION, 0) >= len(RESOURCE) for s in spans), [dict(s.attributes) for s in spans]
    (planted,) = [s for s in spans if s.attributes.get(VIOLATION) == len(RESOURCE) + len(PLANTED)]
    assert not set(PLANTED) & set(planted.attributes)

    # -- the store's bytes (local policy) -------------------------------------------------------------------------
    blob = b"".join(path.read_bytes() for path in (store, Path(f"{store}-wal")) if path.exists())
    assert_absent(blob, "the store")
    assert b"meta-llama/Llama-3.1-8B-Instruct" in blob

    # -- every export format, and the CLI's output ----------------------------------------------------------------
    monkeypatch.setenv("AGENTDIAG_HASH_KEY", key)
    runner = CliRunner()
    for output_format in ("bundle", "otlp-json", "jaeger-json"):
        out = tmp_path / f"export.{output_format}"
        result = runner.invoke(cli, ["export", "--format", output_format, "--out", str(out), "--store", str(store)])
        assert result.exit_code == 0, result.output
        exported = out.read_bytes()
        assert_absent(exported, f"export --format {output_format}")
        assert b"anthropic.claude-3-haiku-20240307-v1:0" in exported, output_format
    for args in (["traces"], ["sessions"], ["status"], ["receipt"], ["traces", "--format", "json"]):
        result = runner.invoke(cli, [*args, "--store", str(store)])
        assert result.exit_code in (0, 1), result.output
        assert_absent(result.output.encode(), " ".join(args))
