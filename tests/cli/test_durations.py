"""Durations on the command line (``30d``, ``12h``, ``90m``, ``45s``, ``500ms``, plain seconds, ``none``): the
parser, the help texts' defaults, the one-line usage errors, and a real ``agentdiag ingest --max-session-age 12h``
that prunes exactly what 43200 seconds prunes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from otel_agentdiag.cli import cli
from otel_agentdiag.cli._duration import UNITS, Duration, format_duration, parse_duration
from otel_agentdiag.storage import SpanStore

DURATION_OPTIONS = [
    # (command words, option, takes none, a valid value, the default shown in --help)
    (["ingest", "missing.otlp.json"], "--max-session-age", True, "30d", "[default: 30d]"),
    (["prune"], "--max-session-age", True, "30d", "[default: 30d]"),
    (["status"], "--stall-threshold", False, "10m", "[default: 5m]"),
    (["push", "--endpoint", "http://127.0.0.1:4318"], "--timeout", False, "30s", "10s]"),
]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30d", 2_592_000.0),
        ("12h", 43_200.0),
        ("90m", 5_400.0),
        ("45s", 45.0),
        ("500ms", 0.5),
        ("1.5h", 5_400.0),
        (" 12H ", 43_200.0),
        ("2592000", 2_592_000.0),
        ("2.592e+06", 2_592_000.0),
        ("0.25", 0.25),
        ("1e3ms", 1.0),
    ],
)
def test_durations_and_plain_seconds_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", " ", "abc", "12x", "h", "ms", "-5m", "0s", "0", "0ms", "nan", "inf", "-inf", "12 h", "1e999", "5mm"]
)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@given(st.integers(min_value=1, max_value=10**9), st.sampled_from(sorted(UNITS)))
def test_a_whole_number_of_a_unit_is_that_many_seconds(number: int, unit: str) -> None:
    assert parse_duration(f"{number}{unit}") == number * UNITS[unit]
    assert parse_duration(f"{number}ms") == number / 1000


@given(st.floats(min_value=1e-9, max_value=1e15, allow_nan=False, allow_infinity=False))
def test_plain_numbers_mean_seconds_as_before(seconds: float) -> None:
    assert parse_duration(repr(seconds)) == float(repr(seconds))


@given(
    st.one_of(
        st.floats(min_value=1e-9, max_value=1e300, allow_nan=False, allow_infinity=False),
        st.integers(min_value=1, max_value=2**60).map(float),
        st.integers(min_value=1, max_value=10**12).map(lambda ms: ms / 1000),
    )
)
def test_a_formatted_duration_reads_back_exactly(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(2_592_000, "30d"), (43_200, "12h"), (5_400, "90m"), (300, "5m"), (45, "45s"), (0.5, "500ms"), (None, "none")],
)
def test_defaults_are_written_the_short_way(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(("words", "option", "takes_none", "valid", "shown"), DURATION_OPTIONS)
def test_help_shows_the_default_as_a_duration(
    words: list[str], option: str, takes_none: bool, valid: str, shown: str
) -> None:
    result = CliRunner().invoke(cli, [words[0], "--help"], terminal_width=200)

    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"{option} DURATION" in text
    assert shown in text
    assert "2.592e+06" not in text and "300.0" not in text


@pytest.mark.parametrize("value", ["soon", "12x", "-3", "0", "nan", "1e999", "12 h"])
@pytest.mark.parametrize(("words", "option", "takes_none", "valid", "shown"), DURATION_OPTIONS)
def test_a_bad_duration_is_one_usage_error_line_naming_the_option_with_an_example(
    words: list[str], option: str, takes_none: bool, valid: str, shown: str, value: str, tmp_path: Path
) -> None:
    store = tmp_path / "nowhere" / "traces.db"
    result = CliRunner().invoke(cli, [*words, option, value, "--store", str(store)])

    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"agentdiag: error: {option} must be a positive number of seconds or a duration")
    assert f"e.g. {option} {valid}" in lines[0]
    assert "; a value of " in lines[0] and lines[0].endswith(f"is not one (see 'cli {words[0]} --help')")
    assert not store.parent.exists()


@pytest.mark.parametrize(("words", "option", "takes_none", "valid", "shown"), DURATION_OPTIONS)
def test_none_is_taken_exactly_where_it_was(
    words: list[str], option: str, takes_none: bool, valid: str, shown: str
) -> None:
    param = next(p for p in cli.commands[words[0]].params if option in p.opts)
    assert isinstance(param.type, Duration)
    if takes_none:
        assert param.type.convert("none", param, None) == math.inf
        assert param.type.convert("NONE", param, None) == math.inf
    else:
        with pytest.raises(click.UsageError):
            param.type.convert("none", param, None)
    assert param.type.convert("12h", param, None) == 43_200.0


# -- a real run: --max-session-age 12h prunes what 43200 seconds prunes -----------------------------------------


def _document(trace: str, span: str, start_ns: int) -> dict[str, object]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "duration-e2e"}}]},
                "scopeSpans": [
                    {
                        "scope": {"name": "duration-e2e"},
                        "spans": [
                            {
                                "traceId": trace * 16,
                                "spanId": span * 8,
                                "name": "invoke_agent",
                                "kind": 1,
                                "startTimeUnixNano": str(start_ns),
                                "endTimeUnixNano": str(start_ns + 1_000_000),
                            }
                        ],
                    }
                ],
            }
        ]
    }


def _ingest(tmp_path: Path, name: str, age: str, file: Path) -> tuple[dict[str, object], set[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
    store = tmp_path / name / "traces.db"
    args = ["ingest", str(file), "--store", str(store), "--max-session-age", age, "--format", "json"]
    done = subprocess.run(
        [sys.executable, "-m", "otel_agentdiag", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with SpanStore(store, create=False) as opened:
        kept = {span.span_id for summary in opened.list_traces() for span in opened.get_trace(summary.trace_id)}
    return json.loads(done.stdout), kept


def test_twelve_hours_on_the_command_line_is_43200_seconds(tmp_path: Path) -> None:
    now = time.time_ns()
    minute = 60 * 10**9
    young, old = now - (12 * 60 - 2) * minute, now - (12 * 60 + 2) * minute  # two minutes either side of 12 h
    file = tmp_path / "two.otlp.jsonl"
    file.write_text(json.dumps(_document("a1", "b1", young)) + "\n" + json.dumps(_document("a2", "b2", old)) + "\n")

    by_duration, kept_by_duration = _ingest(tmp_path, "duration", "12h", file)
    by_seconds, kept_by_seconds = _ingest(tmp_path, "seconds", "43200", file)
    by_default, kept_by_default = _ingest(tmp_path, "default", "30d", file)

    assert (by_duration["spans"], by_duration["pruned"]) == (2, 1)
    assert kept_by_duration == {"b1" * 8}
    assert (by_seconds["pruned"], kept_by_seconds) == (by_duration["pruned"], kept_by_duration)
    assert by_default["pruned"] == 0 and kept_by_default == {"b1" * 8, "b2" * 8}
