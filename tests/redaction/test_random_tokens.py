"""A random-looking token is not a name: the random-token step of the public-safety check, and the new shapes.

Free-text values the policy keeps as text (model names, versions, resource values) are checked for
high-entropy tokens (``redaction.entropy``) and for the shapes issue 33 found missing: Azure OpenAI keys (32 hex
digits), IBANs with their mod-97 check, e-mail addresses written with ``(at)``, ``[at]``, `` at `` and ``[dot]``.
False positives are measured on the published corpus ``data/free_text_corpus.txt`` plus the bundled price
table's model names: zero. Secrets are made up here from seeded generators, never real keys.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource

import otel_agentdiag as agentdiag
from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.redaction import entropy
from otel_agentdiag.redaction import recognizers as r
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import MODEL_NAME, PROVIDER_NAME, STRICT
from otel_agentdiag.redaction.rules import RedactionContext
from otel_agentdiag.testing import TEST_HASH_KEY, capture_spans

ROOT = Path(__file__).resolve().parents[2]
CORPUS_FILE = Path(__file__).with_name("data") / "free_text_corpus.txt"
RNG = random.Random(33_2026)
HEX = "0123456789abcdef"
BASE62 = string.ascii_letters + string.digits
BASE64 = BASE62 + "+/"
BASE64URL = BASE62 + "-_"
BASE36 = string.ascii_lowercase + string.digits
VIOLATION = sc.AGENTDIAG_REDACTION_PREFIX + "public_safety_violation"


def rand(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def ctx() -> RedactionContext:
    return RedactionContext(IdHasher(TEST_HASH_KEY), NameRegistry())


def price_table_models() -> list[str]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef,unused-ignore]

    table = tomllib.loads((ROOT / "otel_agentdiag" / "cost" / "prices.toml").read_text(encoding="utf-8"))
    return sorted({entry["model"] for entry in table["price"] if "model" in entry})


def corpus() -> list[str]:
    lines = CORPUS_FILE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def test_the_corpus_is_published_and_large_enough_to_mean_something() -> None:
    assert len(corpus()) >= 150 and len(price_table_models()) >= 30
    assert len(set(corpus())) == len(corpus()), "a value twice in the corpus"


@pytest.mark.parametrize("value", [*price_table_models(), *corpus()])
def test_no_false_positive_on_real_model_ids_versions_and_resource_values(value: str) -> None:
    assert r.recognise(value) is None, (value, r.recognise(value))
    assert not entropy.random_token(value)
    scalar = STRICT.resource_rule_for("service.version")
    assert scalar is not None and scalar.apply(value, ctx()) == (value, None)


@pytest.mark.parametrize("value", [*price_table_models(), *corpus()])
def test_model_ids_are_kept_by_the_model_rule(value: str) -> None:
    if MODEL_NAME.pattern.fullmatch(value) is None:
        pytest.skip("not model-shaped (a version or resource value)")
    assert MODEL_NAME.apply(value, ctx()) == (value, None)


# --- random tokens ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("alphabet", "length", "at_least"),
    [
        (HEX, 32, 1.0),  # an Azure OpenAI key, an MD5-shaped key
        (HEX.upper(), 40, 1.0),
        (HEX, 64, 1.0),
        (BASE62, 24, 0.95),
        (BASE62, 40, 0.99),
        (BASE36, 32, 0.7),  # one case and digits: their letter runs look like words (documented)
        (BASE64, 40, 0.98),
        (BASE64URL, 43, 0.98),  # 32 random bytes, base64url
        (BASE64, 88, 1.0),  # 64 random bytes, base64
        (HEX, 20, 0.95),
    ],
)
def test_random_tokens_of_each_alphabet_are_flagged(alphabet: str, length: int, at_least: float) -> None:
    tokens = [rand(alphabet, length) for _ in range(500)]
    flagged = [t for t in tokens if r.recognise(t) is not None]
    assert len(flagged) >= at_least * len(tokens), [t for t in tokens if t not in flagged][:5]


def test_below_the_minimum_lengths_nothing_is_judged() -> None:
    for _ in range(500):
        assert not entropy.random_token(rand(HEX, 16))  # our observer ids
        assert not entropy.random_token(rand(BASE62, 15))
        assert not entropy.random_token(rand(BASE64URL, 15))


def test_the_thresholds_follow_the_scanners_per_alphabet() -> None:
    """Hex is judged at detect-secrets' 3.0 bits, letters and digits at gitleaks' 3.5 and by the length of their
    words: a hex string of few distinct digits, an all-decimal one (a number), a word and a camel-case name are
    not random."""
    assert entropy.entropy("aaaa") == 0.0 and entropy.entropy("abcd") == 2.0
    assert not entropy.random_token("deadbeefdeadbeefdeadbeefdeadbeef")  # 6 distinct digits: 2.5 bits
    assert not entropy.random_token("17329000000000000000123")  # a number
    assert not entropy.random_token("internationalizationalism")  # a word: one class
    assert not entropy.random_token("InternationalBusinessMachinesCorporation")  # camel case: long words
    assert not entropy.random_token("Int64ArrayToFloat32BufferConverter")  # words and numbers
    assert entropy.random_token("x-" + rand(HEX, 32) + "-y")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("9c1185a5c5e9fc54612808977ee8f548b2258d31", "a full git commit id: 40 hex digits, as a key has"),
        ("1.4.0+9c1185a5c5e9fc54612808977ee8f548b2258d31", "the same as a version's build metadata"),
        ("sha256:" + rand(HEX, 64), "an image digest"),
        ("f47ac10b58cc4372a5670e02b2c3d479", "a dashless UUID: an Azure key's shape"),
    ],
)
def test_decided_on_purpose_long_hex_ids_are_refused(value: str, why: str) -> None:
    assert r.is_sensitive(value), why


def test_what_stays_a_name_next_to_the_refused_hex_ids() -> None:
    for value in ("1.4.0+g9c1185a", "1.4.0+g9c1185a5c5e9", "f47ac10b-58cc-4372-a567-0e02b2c3d479", rand(HEX, 16)):
        assert not r.is_sensitive(value), value


def test_a_word_and_a_short_random_suffix_is_a_name() -> None:
    """A word of eight or more letters splits a piece: ``cnrytool`` and 12 hex digits (doctor's canary names,
    generated tool names) hold 12 random characters, under the minimum; 24 after the word are a token."""
    for _ in range(500):
        for word in ("cnrytool", "cnryagent", "weathertool", "Summarizer"):
            assert not r.is_sensitive(word + rand(HEX, 12)), word
    assert sum(r.is_sensitive("weathertool" + rand(BASE62, 32)) for _ in range(500)) >= 490


# --- the new shapes ---------------------------------------------------------------------------------------------
def iban_with_check_digits(country: str, bban: str) -> str:
    """An IBAN of ``country`` and ``bban`` with the check digits computed (ISO 7064 mod 97-10)."""
    digits = "".join(str(int(char, 36)) for char in bban + country + "00")
    return f"{country}{98 - int(digits) % 97:02d}{bban}"


def test_iban_check_digits_are_verified() -> None:
    for country, bban in (
        ("DE", "370400440532013000"),
        ("ES", "21000418450200051332"),
        ("IT", "X0542811101000000123456"),
    ):
        good = iban_with_check_digits(country, bban)
        assert r.recognise(good) == "iban", good
        grouped = " ".join(good[i : i + 4] for i in range(0, len(good), 4))
        assert r.recognise(grouped) == "iban", grouped
        wrong = good[:2] + f"{(int(good[2:4]) + 1) % 100:02d}" + good[4:]
        assert r.recognise(wrong) is None, wrong
    assert r.recognise("ZZ89370400440532013000") is None  # not a registry country
    assert r.recognise("gpt-4o-2024-08-06") is None


@pytest.mark.parametrize(
    "value",
    ["jane.doe(at)example.com", "jane.doe (at) example (dot) com", "jane[at]example[dot]co[dot]uk",
     "jane.doe at example dot com", "jane.doe AT example DOT com", "jane{at}example.org", "jane <at> example.com",
     "ops @ example.com", "jane@example[dot]com"],
)  # fmt: skip
def test_munged_email_addresses_are_personal_data(value: str) -> None:
    assert r.recognise(value) in ("email_obfuscated", "email_address"), value


@pytest.mark.parametrize(
    "value", ["chat", "data-platform", "deployed at 12:00", "look at this", "claude-3-5-sonnet@20240620",
              "model at v1.2", "gpt-4o at eu", "user@localhost"],
)  # fmt: skip
def test_words_around_at_are_not_addresses(value: str) -> None:
    assert r.recognise(value) is None, (value, r.recognise(value))


# --- through the rules and the span path ------------------------------------------------------------------------
AZURE_KEY = rand(HEX, 32)
BASE64_BLOB = rand(BASE64, 44) + "=="
ATTACKS = {
    "azure_key": AZURE_KEY,
    "azure_key_upper": rand(HEX, 32).upper(),
    "base64_blob": BASE64_BLOB,
    "base64url": rand(BASE64URL, 43),
    "munged_email": "jane.doe(at)example.com",
    "iban": iban_with_check_digits("GB", "WEST12345698765432"),
    "sha_in_version": "1.0.0+" + rand(HEX, 40),
    "lower_token": rand(BASE36, 40),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_free_text_rules_refuse_the_attacks_with_a_reason(name: str) -> None:
    value = ATTACKS[name]
    for key in ("service.version", "service.namespace", "service.instance.id", "deployment.environment.name"):
        rule = STRICT.resource_rule_for(key)
        assert rule is not None and rule.apply(value, ctx()) == (None, "public_safety_violation"), key
    if MODEL_NAME.pattern.fullmatch(value):
        assert MODEL_NAME.apply(value, ctx()) == (None, "public_safety_violation")
    if PROVIDER_NAME.pattern.fullmatch(value):
        assert PROVIDER_NAME.apply(value, ctx()) == (None, "public_safety_violation")


def test_a_random_tool_name_is_refused_by_the_registry() -> None:
    names = NameRegistry()
    names.register(tools=[AZURE_KEY, "get_weather"])
    assert names.is_registered("tool", "get_weather") and not names.is_registered("tool", AZURE_KEY)


def test_a_refused_resource_value_leaves_a_counted_reason_on_every_span() -> None:
    """A value removed from the resource is counted on each span of it, as a value removed from the span is."""
    resource = Resource.create(
        {"service.name": "vocab-agent", "service.version": AZURE_KEY, "service.namespace": ATTACKS["iban"]}
    )
    with capture_spans(redact=True, resource=resource) as captured:
        with agentdiag.llm_call(provider="openai", model=BASE64_BLOB):
            pass
        with agentdiag.llm_call(provider="openai", model="gpt-4o-mini"):
            pass
    first, second = captured.spans()
    for span in (first, second):
        assert span.resource.attributes["service.name"] == "vocab-agent"
        assert "service.version" not in span.resource.attributes
        assert "service.namespace" not in span.resource.attributes
    assert first.attributes[VIOLATION] == 3  # two resource values, the model name
    assert sc.GEN_AI_REQUEST_MODEL not in first.attributes and first.name == "chat"
    assert second.attributes[VIOLATION] == 2 and second.attributes[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"


def test_the_check_runs_once_per_distinct_value_on_the_span_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memoised like the other value checks: a model name repeated on every span is judged once."""
    judged: list[str] = []
    real = r.random_token

    def counting(text: str) -> bool:
        judged.append(text)
        return real(text)

    monkeypatch.setattr(r, "random_token", counting)
    model = "meta-llama/Llama-3.1-8B-Instruct-" + rand(string.ascii_lowercase, 6)  # a value no earlier test saw
    with capture_spans(redact=True) as captured:
        for _ in range(50):
            with agentdiag.llm_call(provider="openai", model=model):
                pass
    assert len(captured.spans()) == 50
    assert all(span.attributes[sc.GEN_AI_REQUEST_MODEL] == model for span in captured.spans())
    assert judged.count(model) == 1, judged.count(model)
