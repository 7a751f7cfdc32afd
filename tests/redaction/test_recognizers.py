"""The credential and personal-data recogniser (``redaction.recognizers`` over the table of ``redaction.formats``).

Every secret here is made up in the test from the documented shape (random bodies from a seeded generator), never
a real key. Per format: positives, alone and inside text; near misses that must stay kept. Then obfuscation
(zero-width, full-width, tag, bidi, look-alike and combining characters), card numbers (Luhn), phone numbers, IP
addresses, and a corpus of what agents really keep (model, tool, operation and error names, digests, versions)
that must not be flagged.
"""

from __future__ import annotations

import random
import re
import string
import unicodedata

import pytest

from otel_agentdiag.content.snapshot import REDACTED, normal_key, snapshot
from otel_agentdiag.content.values import CREDENTIAL, Elided
from otel_agentdiag.redaction import recognizers as r
from otel_agentdiag.redaction.collector import re2_incompatibility
from otel_agentdiag.redaction.formats import FORMATS, KINDS
from otel_agentdiag.redaction.recognizers import is_sensitive

RNG = random.Random(20_2026)
ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "_-"
HEX = "0123456789abcdef"


def rand(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def alnum(n: int) -> str:
    # Letters and digits both present, as in a real key.
    return rand(string.ascii_letters, n // 2) + rand(string.digits, 2) + rand(ALNUM, n - n // 2 - 2)


def b64(n: int) -> str:
    return rand(B64URL, n - 1) + RNG.choice(ALNUM)


def luhn_complete(prefix: str, length: int) -> str:
    """A card number of ``length`` digits starting with ``prefix`` whose Luhn check digit is right."""
    body = prefix + rand(string.digits, length - len(prefix) - 1)
    for check in string.digits:
        candidate = body + check
        total = 0
        for index, char in enumerate(reversed(candidate)):
            digit = int(char) * (2 if index % 2 else 1)
            total += digit - 9 if digit > 9 else digit
        if total % 10 == 0:
            return candidate
    raise AssertionError("unreachable")


def luhn_broken(number: str) -> str:
    last = int(number[-1])
    return number[:-1] + str((last + 1) % 10)


def group(number: str, sizes: tuple[int, ...], sep: str = " ") -> str:
    out, position = [], 0
    for size in sizes:
        out.append(number[position : position + size])
        position += size
    return sep.join(out)


# --- positives, per format ----------------------------------------------------------------------------------
POSITIVES: dict[str, list[str]] = {
    "openai_scoped_key": [
        "sk-proj-" + b64(40), "sk-svcacct-" + b64(60), "sk-admin-" + b64(30), "sk-or-v1-" + rand(HEX, 64)
    ],
    "anthropic_key": ["sk-ant-api03-" + b64(80), "sk-ant-admin01-" + b64(60)],
    "openai_key": ["sk-" + alnum(48), "xsk-" + alnum(24)],
    "dash_key": ["sk-my-test-key-1234", "pk-" + b64(20), "RK-" + b64(16)],
    "google_api_key": ["AIza" + b64(35)],
    "google_oauth_access_token": ["ya29." + b64(120)],
    "google_oauth_refresh_token": ["1//0" + b64(60)],
    "google_oauth_client_secret": ["GOCSPX-" + b64(28)],
    "huggingface_token": ["hf_" + rand(string.ascii_letters, 34), "api_org_" + rand(string.ascii_letters, 34)],
    "groq_key": ["gsk_" + alnum(52)],
    "xai_key": ["xai-" + alnum(80)],
    "perplexity_key": ["pplx-" + alnum(48)],
    "nvidia_key": ["nvapi-" + b64(64)],
    "replicate_token": ["r8_" + alnum(37)],
    "github_token": [prefix + alnum(36) for prefix in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")],
    "github_fine_grained_pat": ["github_pat_" + alnum(22) + "_" + alnum(59)],
    "gitlab_token": [f"{prefix}-" + b64(20) for prefix in ("glpat", "gloas", "gldt", "glrt", "glptt", "glft", "glcbt")],
    "gitlab_runner_registration_token": ["GR1348941" + b64(20)],
    "npm_token": ["npm_" + alnum(36)],
    "pypi_token": ["pypi-AgEIcHlwaS5vcmc" + b64(70), "pypi-AgENdGVzdC5weXBpLm9yZw" + b64(70)],
    "rubygems_token": ["rubygems_" + rand(HEX, 48)],
    "docker_hub_pat": ["dckr_pat_" + b64(27)],
    "slack_token": ["xoxb-" + rand(string.digits, 12) + "-" + alnum(24), "xoxp-1-2-3", "xapp-1-A0" + alnum(20)],
    "slack_webhook": ["hooks.slack.com/services/T" + alnum(8) + "/B" + alnum(8) + "/" + alnum(24)],
    "discord_bot_token": ["M" + b64(25) + "." + b64(6) + "." + b64(38)],
    "discord_webhook": ["discord.com/api/webhooks/" + rand(string.digits, 18) + "/" + b64(68)],
    "telegram_bot_token": [rand(string.digits, 10) + ":AA" + b64(33)],
    "sendgrid_key": ["SG." + b64(22) + "." + b64(43)],
    "twilio_api_key": ["SK" + rand(HEX, 32)],
    "mailgun_key": ["key-" + rand(HEX, 32), "pubkey-" + rand(HEX, 32)],
    "brevo_key": ["xkeysib-" + rand(HEX, 64) + "-" + alnum(16)],
    "aws_access_key_id": [
        "AKIA" + rand(string.ascii_uppercase + "234567", 16), "ASIA" + rand(string.ascii_uppercase, 16)
    ],
    "aws_secret_access_key": ["aws_secret_access_key = " + rand(ALNUM + "/+", 40)],
    "azure_storage_key": ["AccountKey=" + rand(ALNUM + "+/", 86) + "=="],
    "azure_sas_signature": ["sv=2022-11-02&ss=b&sig=" + rand(ALNUM + "%", 44)],
    "azure_ad_client_secret": ["abc8Q~" + rand(ALNUM + "_~.-", 34)],
    "azure_openai_key": [rand(HEX, 32), rand(HEX, 32).upper(), "key1=" + rand(HEX, 32)],
    "digitalocean_token": ["dop_v1_" + rand(HEX, 64), "dor_v1_" + rand(HEX, 64)],
    "shopify_token": ["shpat_" + rand(HEX, 32), "shpss_" + rand(HEX, 32)],
    "databricks_token": ["dapi" + rand(HEX, 32)],
    "stripe_key": ["sk_live_" + alnum(24), "rk_live_" + alnum(24), "sk_test_" + alnum(24), "pk_live_" + alnum(24)],
    "stripe_webhook_secret": ["whsec_" + alnum(32)],
    "vault_token": ["hvs." + b64(90)],
    "doppler_token": ["dp.pt." + alnum(43)],
    "pulumi_token": ["pul-" + rand(HEX, 40)],
    "planetscale_token": ["pscale_tkn_" + b64(43)],
    "sentry_token": ["sntrys_" + b64(60)],
    "grafana_token": ["glsa_" + alnum(32) + "_" + rand(HEX, 8)],
    "linear_key": ["lin_api_" + alnum(40)],
    "atlassian_token": ["ATATT3" + b64(180)],
    "onepassword_service_token": ["ops_eyJ" + b64(200)],
    "jwt": ["eyJhbGciOiJIUzI1NiJ9." + b64(40) + "." + b64(43)],
    "private_key": ["-----BEGIN OPENSSH PRIVATE KEY-----", "-----BEGIN PGP PRIVATE KEY BLOCK----- " + b64(40)],
    "age_or_putty_key": [
        "AGE-SECRET-KEY-1" + rand(string.ascii_uppercase + string.digits, 58), "PuTTY-User-Key-File-3:"
    ],
    "authorization_value": ["Bearer " + b64(30), "basic " + b64(16), "token " + alnum(20)],
    "credential_header": ["Authorization: " + alnum(20), "x-api-key=" + alnum(20), "Cookie: session=" + alnum(10)],
    "secret_assignment": [
        "password=" + alnum(10),
        "OPENAI_API_KEY=" + alnum(12),
        '"client_secret": "' + alnum(12) + '"',
        "db.passwd: " + alnum(8),
        "dsn=" + alnum(8),
    ],
    "token_assignment": ["GITLAB_TOKEN=" + alnum(20), "auth = '" + alnum(12) + "'"],
    "credential_variable": [
        "PGPASSWORD=" + alnum(12), "REDIS_PW=" + alnum(10), "DB_PASS=" + alnum(10), "STRIPE_KEY=" + alnum(16),
        "AzureOpenAIKey=" + rand(HEX, 32), "DEPLOY_TOKEN: " + alnum(20), "ssh_pw = " + alnum(9),
    ],
    "netrc_password": [
        "machine api.example.com login jane password " + alnum(12), "default login anon password " + alnum(8),
    ],
    "curl_user_password": ["curl -u jane:" + alnum(12) + " https", "curl --user=jane:" + alnum(10)],
    "session_cookie": [
        "sessionid=" + alnum(32), "PHPSESSID=" + alnum(26), "JSESSIONID=" + rand(HEX, 32).upper(),
        "connect.sid=s%3A" + b64(40), "_myapp_session=" + b64(40),
    ],
    "connection_credentials": ["admin:" + alnum(10) + "@db:5432", "app:" + alnum(8) + "@10.1.2.3:6379", "u:p@h/db"],
    "email_address": ["jane.doe@example.com", "a.b+tag@sub.example.co.uk"],
    "email_obfuscated": [
        "jane.doe(at)example.com", "jane.doe [at] example [dot] com", "jane.doe at example dot com",
        "jane{at}mail.example.org", "jane.doe AT example DOT com", "jane @ example.com", "jane@example(dot)com",
    ],
    "iban": [
        "DE89370400440532013000", "DE89 3704 0044 0532 0130 00", "GB82 WEST 1234 5698 7654 32",
        "FR14 2004 1010 0505 0001 3M02 606", "NL91ABNA0417164300",
    ],
    "card_number": [
        luhn_complete("4", 16),
        group(luhn_complete("5", 16), (4, 4, 4, 4)),
        group(luhn_complete("4", 16), (4, 4, 4, 4), "-"),
        group(luhn_complete("37", 15), (4, 6, 5)),
        luhn_complete("6011", 16),
        luhn_complete("35", 19),
    ],
    "phone_international": ["+44 20 7946 0958", "+1-202-555-0143", "+49 151 1234567", "+33 (1) 23 45 67 89"],
    "phone_nanp": ["(555) 123-4567", "555-123-4567", "555.123.4567", "1-555-123-4567"],
    "phone_national": ["020 7946 0958", "030 12345678", "06-12345678", "01 23 45 67 89", "(0151) 1234567"],
    "ipv4_address": ["10.0.0.1", "192.168.1.20", "8.8.8.8", "1.2.3.4"],
    "ipv6_address": ["2001:db8:85a3:0:0:8a2e:370:7334", "2001:db8::1", "fe80::1ff:fe23:4567:890a"],
    "url": ["https://example.com/a?b=c", "s3://bucket/key"],
    "absolute_path": ["/etc/passwd", "~/notes.txt", "C:\\Users\\me", "\\\\server\\share", "path=/srv/app"],
    "user_layout_path": ["x/home/alice/y", "data/Users/bob"],
}  # fmt: skip


def test_every_format_has_positive_cases() -> None:
    assert set(POSITIVES) == {fmt.id for fmt in FORMATS}


CASES = [(fid, text) for fid, texts in POSITIVES.items() for text in texts]


@pytest.mark.parametrize(("format_id", "text"), CASES, ids=[f"{fid}-{i}" for i, (fid, _) in enumerate(CASES)])
def test_each_format_recognises_its_shape(format_id: str, text: str) -> None:
    assert r.recognise(text) == format_id, text
    assert is_sensitive(text)
    # Inside a sentence too (the PEM armour takes the rest of the text, so only a prefix here).
    assert is_sensitive(f"value was {text} at the time")
    assert r.recognise(text, confirm=False) is not None


BOUNDARY_FREE = [
    "anthropic_key", "openai_key", "openai_scoped_key", "github_token", "gitlab_token", "slack_token",
    "google_api_key", "huggingface_token", "groq_key", "npm_token", "pypi_token", "stripe_webhook_secret",
]  # fmt: skip


@pytest.mark.parametrize("format_id", BOUNDARY_FREE)
def test_distinctive_prefixes_need_no_word_boundary(format_id: str) -> None:
    """``my_sk-ant-...`` or ``keyglpat-...``: an underscore or a letter before a distinctive prefix still leaks."""
    token = POSITIVES[format_id][0]
    for text in (f"my_{token}", f"x{token}", f"tool_{token}_name"):
        assert is_sensitive(text), text


NEAR_MISSES = [
    "sk-short",
    "task-management-system",
    "ask-the-user-for-confirmation",
    "deepseek-chat",
    "desk-reservation-service-v2",
    "ghp_" + alnum(10),
    "glpat-short",
    "hf_hub_download",
    "gsk_short",
    "npm_install",
    "pypi-upload",
    "AKIA" + rand(string.ascii_uppercase, 12),
    "task_live_updates",
    "sk_learn_model",
    "pk_user_id",
    "SG.mail",
    "key-value-store",
    "eyJ alone",
    "AIzaShort",
    "ya29.x",
    "1//comment",
    "dapi_client",
    "xai-grok",
    "Basic",
    "password",
    "password=",
    "api_key_header_name",
    "passwordless_login",
    "token: the next one",
    "max_tokens=512",
    "mailto:bob",
    "claude-3-5-sonnet@20240620",
    "python:3.11@sha256",
    "user@localhost",
    "hooks.slack.com",
    "r8_short",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_stay_kept(text: str) -> None:
    assert r.recognise(text) is None, (text, r.recognise(text))


# --- obfuscation ----------------------------------------------------------------------------------------------
SECRETS = {
    "gitlab_token": "glpat-" + b64(20),
    "anthropic_key": "sk-ant-api03-" + b64(40),
    "stripe_key": "sk_live_" + alnum(24),
    "groq_key": "gsk_" + alnum(52),
    "email_address": "jane.doe@example.com",
}
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e", "\u061c"]
BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f"]
TAGS = ["\U000e0001", "\U000e0041", "\U000e007f"]
CONTROLS = ["\x00", "\x1b", "\x7f", "\x85", "\x9b", "\u2028", "\ufe0f", "\U000e0100", "\udc80"]


def fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def insert(text: str, char: str, every: int = 3) -> str:
    return char.join(text[i : i + every] for i in range(0, len(text), every))


@pytest.mark.parametrize("char", INVISIBLE + BIDI + TAGS + CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
@pytest.mark.parametrize("format_id", sorted(SECRETS))
def test_a_hidden_character_anywhere_is_a_violation(format_id: str, char: str) -> None:
    secret = SECRETS[format_id]
    for text in (insert(secret, char), secret[:2] + char + secret[2:], char + "gpt-4o-mini", "gpt-4o" + char):
        assert r.recognise(text) == r.HIDDEN_CHARACTER, repr(text)
    # And the split secret is still found where hidden characters are legitimate: captured content.
    assert r.credential_spans(insert(secret, char)) or format_id == "email_address"


@pytest.mark.parametrize("format_id", sorted(SECRETS))
def test_full_width_and_look_alike_forms_are_folded(format_id: str) -> None:
    secret = SECRETS[format_id]
    assert r.recognise(fullwidth(secret)) == format_id
    assert r.fold(fullwidth(secret)) == secret
    mixed = "".join(fullwidth(c) if i % 2 else c for i, c in enumerate(secret))
    assert r.recognise(mixed) == format_id
    accented = "".join(c + "\u0301" if c.isalpha() and i % 3 == 0 else c for i, c in enumerate(secret))
    assert r.recognise(accented) == format_id, accented
    composed = unicodedata.normalize("NFC", accented)  # precomposed letters, no combining character left
    assert r.recognise(composed) == format_id, composed


def test_cyrillic_and_greek_look_alikes_and_dashes_are_folded() -> None:
    # Cyrillic dze (U+0455) and ka (U+043A) for "sk", a non-breaking hyphen (U+2011) for "-".
    assert r.recognise("\u0455\u043a\u2011ant-api03-" + b64(40)) == "anthropic_key"
    assert r.recognise("gl\u0440at\u2013" + b64(20)) == "gitlab_token"  # Cyrillic er for p, an en dash
    assert r.recognise("\u041e\u0420\u0415\u039d") is None  # capital letters alone are just letters


def test_the_hidden_set_covers_every_control_and_format_character() -> None:
    hidden = re.compile(r.HIDDEN_CHARACTERS)
    for code in range(0x110000):
        char = chr(code)
        if unicodedata.category(char) in ("Cc", "Cf") or 0xE0000 <= code <= 0xE007F:
            assert hidden.fullmatch(char), f"U+{code:04X} {unicodedata.category(char)}"
    for code in (0x2028, 0x2029, 0xFE0F, 0xE0100, 0x3164):
        assert hidden.fullmatch(chr(code))
    # Ordinary text is not hidden: letters of other scripts, emoji without a selector, punctuation, spaces.
    for text in ("Zoë", "日本語", "Привет", "\U0001f600", "a b", "é"):
        assert r.recognise(text) is None, text


# --- card numbers -----------------------------------------------------------------------------------------------
def test_cards_need_a_valid_luhn_digit() -> None:
    for prefix, length in (("4", 16), ("4", 13), ("51", 16), ("2221", 16), ("34", 15), ("6011", 16), ("62", 19)):
        number = luhn_complete(prefix, length)
        assert r.recognise(number) == "card_number", number
        assert r.recognise(luhn_broken(number)) is None, luhn_broken(number)
        assert r.recognise(f"card: {number}.") == "card_number"


def test_plain_numbers_are_not_cards() -> None:
    assert r.recognise(luhn_complete("1", 16)) is None  # no major network starts with 1 (timestamps do)
    assert r.recognise(luhn_complete("9", 16)) is None
    assert r.recognise(luhn_complete("4", 16) + "1234") is None  # 20 digits: longer than any card
    assert r.recognise("1732900000000000000") is None  # a nanosecond timestamp
    assert r.recognise("0." + luhn_complete("4", 16)) is None  # the digits of a decimal fraction
    # A card-length run of digits inside a hex digest is part of the digest, not a card.
    assert r.recognise("abc" + luhn_complete("4", 16) + "def") != "card_number"


# --- phone numbers ----------------------------------------------------------------------------------------------
PHONE_LOOKALIKES = [
    "2024-07-18",
    "2024-07-18T10:20:30Z",
    "01-02-2024",
    "01-02-2024 12:30",
    "1.2.3",
    "10.0.19041.1",
    "1.0.0+20130313144700",
    "+05:30",
    "12:30:45",
    "123-45-6789",
    "gpt-4o-2024-08-06",
    "claude-3-5-sonnet-20241022",
    "v20241022",
    "20241022",
    "1e+10",
    "build 1234",
    "+123",
]


@pytest.mark.parametrize("text", PHONE_LOOKALIKES)
def test_dates_versions_and_ids_are_not_phone_numbers(text: str) -> None:
    assert r.recognise(text) is None, (text, r.recognise(text))


# --- IP addresses -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    ["127.0.0.1", "0.0.0.0", "::1", "::", "1.37.0", "256.1.1.1", "1.2.3.4.5", "v1.2.3.4", "a:b", "std::vector",
     "bad::cafe", "Error::Bad", "01.02.03.04", "10.0.0"],
)  # fmt: skip
def test_loopback_versions_and_names_are_not_addresses(text: str) -> None:
    assert r.recognise(text) is None, (text, r.recognise(text))


def test_addresses_with_ports_and_in_sentences() -> None:
    assert r.recognise("10.0.0.1:8080") == "ipv4_address"
    assert r.recognise("from 203.0.113.7.") == "ipv4_address"
    assert r.recognise("[2001:db8::1]:443") == "ipv6_address"
    assert r.recognise("::ffff:198.51.100.1") is not None


# --- what agents keep: no false positives -----------------------------------------------------------------------
KEPT = [
    "gpt-4o-mini", "gpt-4o-mini-2024-07-18", "gpt-4o-2024-08-06", "gpt-4.1-nano", "o1-preview", "o3-mini",
    "claude-3-5-sonnet-20241022", "claude-sonnet-4-20250514", "claude-haiku-4-5", "claude-3-5-sonnet@20240620",
    "gemini-1.5-pro", "gemini-2.0-flash-001", "models/gemini-1.5-pro", "meta-llama/Llama-3.1-8B-Instruct",
    "mistral-large-latest", "deepseek-chat", "deepseek-reasoner", "llama3:8b", "qwen2.5:7b-instruct-q4_K_M",
    "text-embedding-3-small", "us.anthropic.claude-3-5-sonnet-20241022-v2:0", "openai/gpt-4o", "demo-model-1",
    "chat", "text_completion", "embeddings", "execute_tool", "invoke_agent", "create_agent",
    "openai", "anthropic", "aws.bedrock", "gcp.vertex_ai", "azure.ai.openai", "x_ai",
    "get_weather", "get_vocabulary", "save_progress", "convert_currency", "search_web", "ask_user", "task_manager",
    "ValueError", "openai.RateLimitError", "httpx.ConnectTimeout", "429", "500", "<lambda>", "KeyError",
    "stop", "length", "tool_calls", "content_filter", "end_turn", "max_tokens",
    "vocab-agent", "agentdiag-demo", "deployment-prod", "1.45.2", "0.9.0", "3.11.7", "1.37.0", "cpython",
    "opentelemetry", "python", "otel_agentdiag", "gen_ai.usage.input_tokens", "agentdiag.redaction.unknown_key",
    "fp_44709d6fcb", "default", "flex", "12345", "0", "a:b", "Triage agent", "token_count",
    "hmac-sha256:0123abcd:" + "0" * 64, "sha256:" + "f" * 64,
]  # fmt: skip


@pytest.mark.parametrize("text", KEPT)
def test_what_agents_keep_is_not_flagged(text: str) -> None:
    assert r.recognise(text) is None, (text, r.recognise(text))


def test_random_digests_and_ids_are_random_tokens_not_cards() -> None:
    """Hex digests hold digit runs (card-long ones too); they are bounded by letters, so never a card. A digest
    is random: as a kept string it is a random token (our digests leave under their ``hashed_id`` rule, which
    never asks), and a 32-digit trace id cannot be told from an Azure key."""
    for _ in range(2000):
        digest = f"hmac-sha256:{rand(HEX, 8)}:{rand(HEX, 64)}"
        assert r.recognise(digest) == r.RANDOM_TOKEN, digest
        assert r.recognise(rand(HEX, 32)) in ("azure_openai_key", None)  # None: a rare one of few distinct digits
        assert r.recognise(rand(HEX, 16)) is None  # an observer id
        assert r.recognise(str(RNG.randrange(10**12))) is None  # a sequence number as text


# --- the table itself -------------------------------------------------------------------------------------------
def test_the_table_is_well_formed() -> None:
    ids = [fmt.id for fmt in FORMATS]
    assert len(ids) == len(set(ids))
    for fmt in FORMATS:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", fmt.id), fmt.id
        assert fmt.kind in KINDS and fmt.description and fmt.source
        assert re2_incompatibility(fmt.pattern) is None, fmt.id
        for construct in (r"\b", r"\s", r"\d", r"\w", "(?=", "(?!", "(?<"):
            assert construct not in fmt.pattern, (fmt.id, construct)
        re.compile(fmt.pattern)
        assert fmt.anchors == fmt.anchors.lower(), fmt.id
        assert fmt.needs in r._GUARDS, fmt.id
    kinds = {fmt.id: fmt.kind for fmt in FORMATS}
    # Content keeps e-mail addresses, phone numbers, addresses, URLs and paths; it cuts every credential shape the
    # table knows, card numbers and IBANs.
    assert {fmt.id for fmt in FORMATS if fmt.content} == {i for i, k in kinds.items() if k == "credential"} | {
        "card_number",
        "iban",
    }


@pytest.mark.parametrize(("format_id", "text"), CASES, ids=[f"{fid}-{i}" for i, (fid, _) in enumerate(CASES)])
def test_anchors_and_guards_never_skip_a_match(format_id: str, text: str) -> None:
    """The speed-ups are exact: the anchors and guards let the format through wherever it matches."""
    assert any(entry.id == format_id for entry in r._ALL.candidates(text))
    assert any(entry.id == format_id for entry in r._ALL.candidates(f"value was {text} at the time"))


def test_the_first_format_in_table_order_is_reported() -> None:
    # sk-ant-... also has the sk- shape of the generic rule; the Anthropic entry comes first.
    assert r.recognise("sk-ant-api03-" + b64(40)) == "anthropic_key"
    # A credential beats the e-mail address or URL it sits in.
    assert r.recognise("https://example.com/?key=AIza" + b64(35)) == "google_api_key"


# --- captured content -------------------------------------------------------------------------------------------
def test_credential_spans_point_into_the_original_text() -> None:
    token = "glpat-" + b64(20)
    text = f"use {token} now"
    ((start, end),) = r.credential_spans(text)
    assert text[start:end] == token
    hidden = "use " + insert(token, "\u200b") + " now"
    ((start, end),) = r.credential_spans(hidden)
    assert hidden[start:end] == insert(token, "\u200b")  # the hiding characters go with it
    wide = "use " + fullwidth(token) + " now"
    ((start, end),) = r.credential_spans(wide)
    assert wide[start:end] == fullwidth(token)


@pytest.mark.parametrize(
    ("prompt", "secret"),
    [
        ("my token is {}, keep it safe", "glpat-" + b64(20)),
        ("HF: {}", "hf_" + rand(string.ascii_letters, 34)),
        ("charge {} today", "sk_live_" + alnum(24)),
        ("export GROQ_API_KEY={}", "gsk_" + alnum(52)),
        ("DATABASE=app:{}@db.internal:5432/prod", alnum(12)),
        ("card {} exp 12/29", group(luhn_complete("4", 16), (4, 4, 4, 4))),
        ("SendGrid {} ok", "SG." + b64(22) + "." + b64(43)),
        ("refresh with {}", "1//0" + b64(60)),
    ],
)
def test_the_content_scrubber_cuts_class_3_formats(prompt: str, secret: str) -> None:
    for variant in (secret, insert(secret, "\u200d"), fullwidth(secret)):
        taken = snapshot({"role": "user", "content": prompt.format(variant)})
        assert REDACTED in taken["content"], taken
        core = secret[-10:]
        assert core not in taken["content"] and fullwidth(core) not in taken["content"], taken


def test_content_keeps_ordinary_personal_data_and_prose() -> None:
    text = "Mail jane@example.com or call +44 20 7946 0958 from 10.0.0.1; see /home/jane/notes."
    assert snapshot(text) == text
    assert snapshot("the password is in the vault; Basic understanding helps") == (
        "the password is in the vault; Basic understanding helps"
    )


@pytest.mark.parametrize(
    "key",
    ["password", "Password", "PASSWORD", "passwd", "pwd", "db_password", "secret", "client_secret", "clientSecret",
     "api_key", "apiKey", "API-Key", "APIKey", "x_api_key", "X-API-KEY", "XApiKey", "x-apikey", "access_token",
     "accessToken", "refresh_token", "id_token", "auth", "authorization", "cookie", "Set-Cookie", "session_token",
     "sessionToken", "private_key", "privateKey", "aws_secret_access_key", "AWS_SECRET_ACCESS_KEY",
     "connection_string", "connectionString", "dsn", "sentry_dsn", "__password__", "db.password", "user password",
     "OPENAI_API_KEY", "csrftoken", "passphrase", "basic_auth"],
)  # fmt: skip
def test_credential_key_names_are_known_in_any_spelling(key: str) -> None:
    taken = snapshot({key: "hunter2", "role": "user"})
    assert isinstance(taken[key], Elided), (key, normal_key(key))
    assert taken[key].reason in (CREDENTIAL, "cookie"), key
    assert taken["role"] == "user"


@pytest.mark.parametrize(
    "key", ["max_tokens", "maxTokens", "input_tokens", "token_count", "role", "content", "keyboard", "author",
            "monkey", "passport_country", "tokens", "secretary", "pass", "session_id", "sessionId"],
)  # fmt: skip
def test_ordinary_key_names_are_kept(key: str) -> None:
    assert snapshot({key: "v"}) == {key: "v"}


def test_normal_key() -> None:
    assert normal_key("XApiKey") == "x_api_key"
    assert normal_key("API-Key") == "api_key"
    assert normal_key("__Session.Token__") == "session_token"
    assert normal_key("accessToken") == "access_token"


def test_a_large_prose_text_is_scrubbed_unchanged() -> None:
    """A long prompt without credentials comes back as it was (the same object: nothing was rebuilt)."""
    words = ["the", "model", "answered", "key", "token", "pass", "42", "2024-07-18,", "user@", "sk-", "Bearer"]
    prose = " ".join(RNG.choice(words) for _ in range(5000))
    assert snapshot(prose) is prose


def test_docs_list_the_formats_as_the_table_has_them() -> None:
    """docs/public-safety.md holds the generated table (``python -m otel_agentdiag.redaction.describe
    --write-formats docs/public-safety.md``)."""
    from pathlib import Path

    from otel_agentdiag.redaction.describe import FORMATS_BEGIN, FORMATS_END, formats_markdown

    text = (Path(__file__).resolve().parents[2] / "docs" / "public-safety.md").read_text(encoding="utf-8")
    block = text[text.index(FORMATS_BEGIN) : text.index(FORMATS_END) + len(FORMATS_END)]
    assert block == formats_markdown(), (
        "regenerate: python -m otel_agentdiag.redaction.describe --write-formats docs/public-safety.md"
    )


HOSTILE_RUNS = ["a_", "password", "a:", "a@", "a", "1.", "1:", "4111 ", "01 ", "+1 ", "sk-", "eyJ", "-----BEGIN ",
                "cookie ", "sk-a_b:c@d.e/f=g "]  # fmt: skip


@pytest.mark.parametrize("unit", HOSTILE_RUNS)
def test_long_hostile_text_is_scanned_in_linear_time(unit: str) -> None:
    """Captured content has no length limit, so no expression may backtrack over a long run from every position.
    With 200 000 characters a quadratic scan would run for hours: this test then never ends (no timing is
    asserted; CI's time limit is the judge)."""
    text = unit * (200_000 // len(unit)) + " x=1 pass @ :// 4"
    r.credential_spans(text)
    r.recognise(text)
    snapshot(text)


def test_strings_seen_before_are_scrubbed_the_same() -> None:
    """The scrubber remembers strings that held nothing to cut; one that held a credential is cut every time,
    also after the memory of clean strings filled up and was cleared."""
    import importlib

    snapshot_module = importlib.import_module("otel_agentdiag.content.snapshot")  # the package exports the function

    secret = "use glpat-" + b64(20) + " please"
    for _ in range(3):
        assert snapshot(secret) == "use [redacted] please"
    for index in range(snapshot_module._CLEAN_SIZE + 10):
        assert snapshot(f"ordinary text number {index:06d}") == f"ordinary text number {index:06d}"
    assert len(snapshot_module._CLEAN) <= snapshot_module._CLEAN_SIZE
    assert snapshot(secret) == "use [redacted] please"
