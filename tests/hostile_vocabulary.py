"""Attack cases for the closed vocabularies: data written into attribute keys, finish reasons and schema URLs.

Shared by the unit tests (``tests/redaction``) and the end-to-end ones (``tests/e2e/test_closed_vocabularies.py``).
Every data-carrying case contains a marker string that occurs nowhere else, so a byte search of a store file or
an OTLP body can tell whether it leaked.
"""

from __future__ import annotations

from otel_agentdiag import semconv as sc

# --- keys ---------------------------------------------------------------------------------------------------
DATA_SEGMENTS: tuple[str, ...] = (
    "customer_4111111111111111",  # a Luhn-valid card number
    "card5500005555555559",
    "amex_378282246310005_holder",
    "jane_doe_example_com",  # an e-mail address turned into a key segment
    "jane-doe-at-examplemail-org",
    "j.doe.mailhost.net",  # dots: several segments
    "user_884172",
    "u-000123-acct",
    "cust.99172.ledger",
    "123e4567-e89b-12d3-a456-426614174000",  # a UUID
    "f47ac10b_58cc_4372_a567_0e02b2c3d479",
    "ssn_123_45_6789",
    "iban_DE89370400440532013000",
    "phone_4915123456789",
    "diagnosis_hypertension",
    "zipcode_94107_home",
    "salary.98500.usd",
    "input_tokens_of_mallory",  # a near miss of a real key
    "input_tokens.mallory",  # a real key with a suffix
    "prompt.mallory_text",
    "mallory",
)
"""Key-shaped segments that carry data: each would have matched a ``*``."""

SPELLING_SEGMENTS: tuple[str, ...] = (
    "INPUT_TOKENS",
    "Input_Tokens",
    "input-tokens",
    "inputtokens",
    "input_tokens ",
    " input_tokens",
    "input_tokens\u200b",  # zero-width space
    "\u0456nput_tokens",  # Cyrillic i
    "input_t\u043ekens",  # Cyrillic o
    "input_tokens.",
    ".input_tokens",
    "",
    "*",
    "{input_tokens,output_tokens}",
)
"""Look-alikes of an enumerated suffix: none is the key itself."""

SPAN_FAMILIES: tuple[str, ...] = (
    sc.GEN_AI_USAGE_PREFIX,
    sc.GEN_AI_USAGE_PREFIX + "cache_read.",
    sc.GEN_AI_USAGE_PREFIX + "reasoning.",
    sc.AGENTDIAG_USAGE_PREFIX,
    sc.AGENTDIAG_REDACTION_PREFIX,
    "llm.token_count.",
    "llm.token_count.prompt_details.",
    "llm.token_count.completion_details.",
    "llm.usage.",
)
"""Prefixes of span attribute keys that the presets used to allow with a ``*`` (or whose members they list)."""

RESOURCE_FAMILIES: tuple[str, ...] = ("telemetry.sdk.", "telemetry.distro.")


def data_keys(families: tuple[str, ...]) -> list[str]:
    """Every family joined with every data-carrying segment."""
    return [family + segment for family in families for segment in DATA_SEGMENTS]


def spelling_keys(families: tuple[str, ...]) -> list[str]:
    return [family + segment for family in families for segment in SPELLING_SEGMENTS]


# --- finish reasons -----------------------------------------------------------------------------------------
DATA_FINISH_REASONS: tuple[str, ...] = (
    "jane_doe",
    "ssn_123_45_6789",
    "4111111111111111",
    "user_884172_quit",
    "jane.doe@example.com",
    "stopped_by_mallory",
    "end_turn_for_patient_77",
    "tool_calls,mallory",
    "length; mallory",
    "max_tokens_4111111111111111",
    "password=hunter2",
    "f47ac10b-58cc-4372-a567-0e02b2c3d479",
)
"""Finish reasons no provider documents, each carrying data."""

SPELLING_FINISH_REASONS: tuple[str, ...] = (
    "Stop",
    "stop ",
    " stop",
    "stop\u200b",
    "\u0455top",  # Cyrillic s
    "STOP_",
    "tool-calls",
    "EndTurn",
    "",
    "_OTHER_",
    "null",
)
"""Near misses of documented finish reasons."""

# --- schema URLs --------------------------------------------------------------------------------------------
OTEL_SCHEMA_URLS: tuple[str, ...] = (
    "https://opentelemetry.io/schemas/1.37.0",
    "https://opentelemetry.io/schemas/1.26.0",
    "https://opentelemetry.io/schemas/1.4.0",
    "https://opentelemetry.io/schemas/1.0.0",
    "https://opentelemetry.io/schemas/1.40.12",
)
"""OpenTelemetry schema URLs: kept."""

HOSTILE_SCHEMA_URLS: tuple[str, ...] = (
    "https://attacker.example/jane.doe/ssn-123-45-6789",
    "https://opentelemetry.io.evil.example/schemas/1.37.0",
    "https://opentelemetry.io@evil.example/schemas/1.37.0",
    "https://jane:hunter2@opentelemetry.io/schemas/1.37.0",
    "https://opentelemetry.io/schemas/1.37.0?user=jane.doe",
    "https://opentelemetry.io/schemas/1.37.0#jane.doe",
    "https://opentelemetry.io/schemas/1.37.0/jane.doe",
    "https://opentelemetry.io/schemas/1.37.0/",
    "https://opentelemetry.io/schemas/1.37.0-mallory",
    "https://opentelemetry.io/schemas/1.37",
    "https://opentelemetry.io/schemas/4111111111111111.0.0",
    "https://opentelemetry.io/schemas/1.4111.1111",
    "https://opentelemetry.io/schemas/01.37.0",
    "https://opentelemetry.io/mallory/schemas/1.37.0",
    "https://opentelemetry.io/schemas/../../mallory/1.37.0",
    "https://opentelemetry.io/schemas/1.37.0%2Fmallory",
    "http://opentelemetry.io/schemas/1.37.0",
    "HTTPS://opentelemetry.io/schemas/1.37.0",
    "https://OpenTelemetry.io/schemas/1.37.0",
    "https://opentelemetry.io:8443/schemas/1.37.0",
    "https://opentelemetry.io./schemas/1.37.0",
    "https://\u043epentelemetry.io/schemas/1.37.0",  # Cyrillic o
    "https://opentelemetry.io/schemas/\uff11.37.0",  # full-width digit one
    "https://opentelemetry.io/schemas/1.37.0\u200b",
    "https://xn--pentelemetry-mallory.io/schemas/1.37.0",
    "https://opentelemetry.io/schemas/1.37.0\n",
    "https://opentelemetry.io/schemas/1.37.0 mallory",
    "https://opentelemetry.io\\@evil.example/schemas/1.37.0",
    "//opentelemetry.io/schemas/1.37.0",
    "opentelemetry.io/schemas/1.37.0",
    "file:///home/jane/schema.json",
    "https://schemas.example.com/home/alice/1.0",
)
"""Schema URLs that are not OpenTelemetry's: other hosts, look-alike hosts, user-info, query, fragment, extra
path, other schemes, ports, case, Unicode look-alikes and control characters."""

SCHEMA_URL_MARKERS: tuple[str, ...] = ("jane", "mallory", "evil.example", "hunter2", "attacker", "4111111111111111")
"""What a leaked hostile schema URL would show in the bytes."""
