"""Pricing a call: the bundled table (shipped as package data), dated entries, matching, overrides, absence."""

from __future__ import annotations

import logging
from datetime import date
from importlib import resources
from pathlib import Path

import pytest

from otel_agentdiag import semconv as sc
from otel_agentdiag.cost import PriceTableError, bundled_table, cost_usd, parse_price_table, resolve_table
from otel_agentdiag.cost.table import day_start_ns

NOW = day_start_ns(date(2025, 12, 1))


def _call(provider: str | None, model: str, **usage: int) -> dict[str, object]:
    attributes: dict[str, object] = {sc.GEN_AI_REQUEST_MODEL: model}
    if provider is not None:
        attributes[sc.GEN_AI_PROVIDER_NAME] = provider
    names = {
        "input": sc.GEN_AI_USAGE_INPUT_TOKENS,
        "output": sc.GEN_AI_USAGE_OUTPUT_TOKENS,
        "cache_read": sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        "cache_write": sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        "reasoning": sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
    }
    attributes.update({names[k]: v for k, v in usage.items()})
    return attributes


def test_the_bundled_table_is_package_data_with_a_date_and_sources() -> None:
    text = resources.files("otel_agentdiag.cost").joinpath("prices.toml").read_text(encoding="utf-8")
    assert "[[price]]" in text
    table = bundled_table()
    assert table.as_of is not None and table.sources
    assert all(e.source and e.source.startswith("https://") for e in table.entries)
    models = {e.model for e in table.entries}
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3", "o4-mini", "gpt-5", "text-embedding-3-small"):
        assert model in models
    for model in ("claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-5", "gemini-2.5-flash", "gemini-2.5-pro"):
        assert model in models


def test_a_known_model_is_priced_exactly_from_the_tables_numbers() -> None:
    # gpt-4o-mini: $0.15 in, $0.60 out per million (bundled table); the response's dated snapshot matches too.
    attributes = _call("openai", "gpt-4o-mini", input=1200, output=300)
    assert cost_usd(attributes, NOW) == (1200 * 0.15 + 300 * 0.6) / 1_000_000
    attributes[sc.GEN_AI_RESPONSE_MODEL] = "gpt-4o-mini-2024-07-18"
    assert cost_usd(attributes, NOW) == (1200 * 0.15 + 300 * 0.6) / 1_000_000


def test_cache_tokens_are_priced_at_cache_prices_and_reasoning_is_in_output() -> None:
    # claude-haiku-4-5: $1 in, $5 out, $0.10 cache read, $1.25 cache write; input counts the cache parts.
    attributes = _call("anthropic", "claude-haiku-4-5", input=1000, output=200, cache_read=600, cache_write=300)
    assert cost_usd(attributes, NOW) == (100 * 1.0 + 600 * 0.1 + 300 * 1.25 + 200 * 5.0) / 1_000_000
    # o4-mini: reasoning tokens are already in the output tokens: not priced twice.
    reasoning = _call("openai", "o4-mini", input=10, output=500, reasoning=400)
    assert cost_usd(reasoning, NOW) == (10 * 1.1 + 500 * 4.4) / 1_000_000
    # more cached than input (a bad report): the uncached part is never below 0.
    odd = _call("anthropic", "claude-haiku-4-5", input=10, output=0, cache_read=50)
    assert cost_usd(odd, NOW) == (50 * 0.1) / 1_000_000


def test_dated_entries_price_by_the_calls_start_date() -> None:
    o3 = _call("openai", "o3", input=1_000_000, output=0)
    assert cost_usd(o3, day_start_ns(date(2025, 5, 1))) == 10.0  # launch price
    assert cost_usd(o3, day_start_ns(date(2025, 6, 10))) == 2.0  # from the cut on
    assert cost_usd(o3, day_start_ns(date(2025, 1, 1))) is None  # before any entry: no price
    gpt4o = _call("openai", "gpt-4o-2024-05-13", input=1_000_000, output=0)
    assert cost_usd(gpt4o, NOW) == 5.0  # the exact snapshot entry beats the pattern


def test_no_cost_without_a_price_or_without_usage() -> None:
    assert cost_usd(_call("openai", "my-own-model", input=10, output=10), NOW) is None
    assert cost_usd(_call("openai", "gpt-4o-mini"), NOW) is None  # no usage reported
    assert cost_usd(_call("openai", "gpt-4o-mini", input=-5), NOW) is None  # not a count
    assert cost_usd(_call("anthropic", "gpt-4o-mini", input=10), NOW) is None  # another provider's model
    assert cost_usd({sc.GEN_AI_USAGE_INPUT_TOKENS: 10}, NOW) is None  # no model
    assert cost_usd(_call("openai", "gpt-4o-mini", input=10), NOW, None) is None  # cost off


def test_without_a_provider_a_model_only_one_provider_prices_is_priced() -> None:
    assert cost_usd(_call(None, "gemini-2.5-flash", input=1_000_000), NOW) == 0.3
    table = parse_price_table(
        "[[price]]\nprovider='a'\nmodel='m'\ninput_per_million=1\noutput_per_million=1\n"
        "[[price]]\nprovider='b'\nmodel='m'\ninput_per_million=2\noutput_per_million=2\n"
    )
    assert cost_usd(_call(None, "m", input=10), NOW, table) is None  # ambiguous
    assert cost_usd(_call("b", "m", input=1_000_000), NOW, table) == 2.0


def test_the_longest_matching_pattern_wins() -> None:
    table = parse_price_table(
        "[[price]]\nprovider='p'\nmodel_pattern='m-*'\ninput_per_million=1\noutput_per_million=1\n"
        "[[price]]\nprovider='p'\nmodel_pattern='m-mini-*'\ninput_per_million=3\noutput_per_million=3\n"
    )
    assert cost_usd(_call("p", "m-mini-2025", input=1_000_000), NOW, table) == 3.0
    assert cost_usd(_call("p", "m-2025", input=1_000_000), NOW, table) == 1.0


def test_a_users_table_overrides_the_same_model_and_adds_others(tmp_path: Path) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text(
        "[[price]]\nprovider='openai'\nmodel='gpt-4o-mini'\ninput_per_million=1\noutput_per_million=2\n"
        "[[price]]\nprovider='openai'\nmodel='ft:my-model'\ninput_per_million=3\noutput_per_million=4\n",
        encoding="utf-8",
    )
    table = resolve_table(mine, None)
    assert table is not None
    # Replaced: the user's entry (no date: always in effect), whatever the bundled dates said.
    assert cost_usd(_call("openai", "gpt-4o-mini", input=1_000_000), NOW, table) == 1.0
    assert cost_usd(_call("openai", "ft:my-model", output=1_000_000), NOW, table) == 4.0  # added
    assert cost_usd(_call("openai", "gpt-4.1", input=1_000_000), NOW, table) == 2.0  # the bundled rest stays
    # The variable names a file too; "off" turns cost off.
    assert resolve_table(None, "off") is None
    assert resolve_table(False, str(mine)) is None  # the argument wins over the variable
    via_variable = resolve_table(None, str(mine))
    assert via_variable is not None
    assert cost_usd(_call("openai", "gpt-4o-mini", input=1_000_000), NOW, via_variable) == 1.0


def test_a_bad_file_raises_as_an_argument_and_logs_one_line_as_a_variable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[price]]\nprovider='openai'\nmodel='m'\ninput_per_million=-1\noutput_per_million=1\n")
    with pytest.raises(PriceTableError, match=f"{bad}:4: "):
        resolve_table(bad, None)
    with pytest.raises(ValueError, match="prices must be a path"):
        resolve_table(3, None)  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="otel_agentdiag"):
        table = resolve_table(None, str(bad))
    assert table is bundled_table()
    (record,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert f"{bad}:4:" in record.getMessage() and "bundled" in record.getMessage()
