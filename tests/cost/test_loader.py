"""The price table's loader: a good file, and bad files refused with ``file:line: what is wrong``."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest

from otel_agentdiag.cost import PriceTableError, load_price_table

GOOD = """\
as_of = 2025-06-01
sources = ["https://example.test/prices"]

[[price]]
provider = ["openai", "azure.ai.openai"]
model = "m1"
input_per_million = 2.0
output_per_million = 8.0
cache_read_per_million = 0.5
effective = 2025-01-01
source = "https://example.test/m1"

[[price]]
provider = "anthropic"
model_pattern = "claude-x-*"
input_per_million = 1
output_per_million = 5
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_good_table_loads_with_its_dates_sources_and_defaults(tmp_path: Path) -> None:
    table = load_price_table(_write(tmp_path, GOOD))
    assert table.as_of == date(2025, 6, 1)
    assert table.sources == ("https://example.test/prices",)
    first, second = table.entries
    assert first.providers == ("openai", "azure.ai.openai")
    assert (first.price.input, first.price.output, first.price.cache_read) == (2.0, 8.0, 0.5)
    assert first.price.cache_write == 2.0  # absent: the input price
    assert first.line == 4 and first.effective == date(2025, 1, 1)
    assert second.model_pattern == "claude-x-*" and second.price.cache_read == 1.0  # absent: the input price
    assert second.effective == date.min  # no date: always in effect


ENTRY = """\
[[price]]
provider = "openai"
model = "m"
input_per_million = 1.0
output_per_million = 2.0
"""

# (the text, the line the message must name, a phrase it must hold)
BAD = [
    ("as_of = 2025-01-01\nbogus = 1\n", 2, "unknown key 'bogus'"),
    (ENTRY + "colour = 'red'\n", 6, "unknown key 'colour'"),
    (ENTRY.replace("input_per_million = 1.0", "input_per_million = -1.0"), 4, "zero or more"),
    (ENTRY.replace("output_per_million = 2.0", "output_per_million = nan"), 5, "finite"),
    (ENTRY.replace("output_per_million = 2.0", 'output_per_million = "2"'), 5, "must be a number"),
    (ENTRY + "effective = 2025-13-01\n", 6, "not valid TOML"),
    (ENTRY + 'effective = "yesterday"\n', 6, "must be a date"),
    (ENTRY + "effective = 2025-01-01T10:00:00\n", 6, "not a date and time"),
    (ENTRY.replace('model = "m"\n', ""), 1, "missing model"),
    (ENTRY + 'model_pattern = "m-*"\n', 6, "not both"),
    (ENTRY + 'currency = "EUR"\n', 6, "must be in USD"),
    ('currency = "GBP"\n' + ENTRY, 1, "must be in USD"),
    (ENTRY.replace('provider = "openai"\n', ""), 1, "missing provider"),
    (ENTRY.replace('provider = "openai"', "provider = []"), 2, "non-empty string"),
    (ENTRY.replace("output_per_million = 2.0\n", ""), 1, "missing output_per_million"),
    ("[[price]]\nprovider = 'openai'\nmodel = = 'x'\n", 3, "not valid TOML"),
    (ENTRY + ENTRY.replace("input_per_million = 1.0", "input_per_million = 5e9"), 9, "over"),
    ("sources = 'https://x.test'\n", 1, "array of URLs"),
]


@pytest.mark.parametrize(("text", "line", "phrase"), BAD, ids=[b[2] + f"@{b[1]}" for b in BAD])
def test_a_bad_file_names_the_file_and_the_line(tmp_path: Path, text: str, line: int, phrase: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(PriceTableError) as caught:
        load_price_table(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert phrase in message
    assert "Traceback" not in message and "\n" not in message
    assert isinstance(caught.value, ValueError)


def test_the_second_entry_is_named_by_its_number(tmp_path: Path) -> None:
    path = _write(tmp_path, ENTRY + "\n" + ENTRY.replace("input_per_million = 1.0", "input_per_million = -2"))
    with pytest.raises(PriceTableError, match=re.escape(f"{path}:10: price entry 2: ")):
        load_price_table(path)


def test_a_missing_or_non_utf8_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(PriceTableError, match=re.escape(f"{missing}: cannot read")):
        load_price_table(missing)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(PriceTableError, match=re.escape(f"{binary}: not UTF-8")):
        load_price_table(binary)
