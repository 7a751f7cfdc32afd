"""``row_json``'s shared C encoder writes the same bytes as the standard encoder, and falls back the same way."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from otel_agentdiag.storage.codec import canonical_json, loads, row_json

_STANDARD = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

VALUES: list[Any] = [
    {"gen_ai.request.model": "gpt-4o-mini", "n": 12, "f": 0.25, "ok": True, "none": None},
    {"tuple": ("stop", "length"), "nested": {"a": [1, 2.5, "é", "\u2028", '"q"\\']}, "big": 2**70},
    [{"name": "exception", "time_ns": 1, "attributes": {"exception.message": "boom\n\t\x00"}}],
    {"emoji": "\U0001f600", "ctrl": "\x1f", "int_key": {1: "one"}, "bool_key": {True: "yes"}},
    ["a", ["b", ["c", []]], {}],
]


@pytest.mark.parametrize("value", VALUES)
def test_row_json_writes_what_the_standard_encoder_writes(value: Any) -> None:
    assert row_json(value) == _STANDARD.encode(value)
    assert row_json(value) == row_json(value)  # the shared encoder keeps no state between calls


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_fall_back_to_canonical_json(bad: float) -> None:
    value = {"b": bad, "a": [1, bad]}
    assert row_json(value) == canonical_json(value)
    assert json.loads(row_json(value)) == json.loads(canonical_json(value))


def test_empty_values_and_non_container_values() -> None:
    assert (row_json({}), row_json([]), row_json(())) == ("{}", "[]", "[]")
    assert row_json(("a", 1)) == '["a",1]'
    assert row_json("text") == '"text"'


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1,"b":[1,2.5,"x"],"c":{"d":null}}',
        "[]",
        "{}",
        ' {"lead":1}',
        '{"trail":1} ',
        '{"a":1}{"b":2}',
        '{"a":1} x',
        '{"a":',
        "",
        "   ",
        "NaN",
        '{"n":Infinity}',
        '"just a string"',
        "12",
        b'{"bytes":1}',
        '{"dup":1,"dup":2}',
        '{"s":"\\ud800"}',
    ],
)
def test_loads_is_json_loads(text: Any) -> None:
    try:
        expected: Any = ("value", json.loads(text))
    except ValueError as exc:
        expected = ("error", type(exc))
    try:
        got: Any = ("value", loads(text))
    except ValueError as exc:
        got = ("error", type(exc))
    assert repr(got) == repr(expected)  # repr: NaN is not equal to itself
