"""``row_json`` writes what the standard encoder writes (orjson, where installed: the same JSON value, the same
text but for a float's), and falls back the same way."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_agentdiag.storage import codec
from otel_agentdiag.storage.codec import canonical_json, row_json


@pytest.fixture(params=["orjson", "standard"])
def road(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test runs on both roads: orjson's (when installed) and the standard library's alone (PyPy, a platform
    without orjson's wheel)."""
    if request.param == "orjson" and codec._fast_dumps is None:
        pytest.skip("orjson is not installed here (the standard road is the only one)")
    if request.param == "standard":
        monkeypatch.setattr(codec, "_fast_dumps", None)
    yield request.param


_STANDARD = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

VALUES: list[Any] = [
    {"gen_ai.request.model": "gpt-4o-mini", "n": 12, "f": 0.25, "ok": True, "none": None},
    {"tuple": ("stop", "length"), "nested": {"a": [1, 2.5, "é", "\u2028", '"q"\\']}, "big": 2**70},
    [{"name": "exception", "time_ns": 1, "attributes": {"exception.message": "boom\n\t\x00"}}],
    {"emoji": "\U0001f600", "ctrl": "\x1f", "int_key": {1: "one"}, "bool_key": {True: "yes"}},
    ["a", ["b", ["c", []]], {}],
]


@pytest.mark.parametrize("value", VALUES)
def test_row_json_writes_what_the_standard_encoder_writes(value: Any, road: str) -> None:
    assert row_json(value) == _STANDARD.encode(value)
    assert row_json(value) == row_json(value)  # the shared encoder keeps no state between calls


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_fall_back_to_canonical_json(bad: float, road: str) -> None:
    """orjson writes a non-finite float as null: such a value takes the standard road, which writes it as a
    string, as before."""
    value = {"b": bad, "a": [1, bad]}
    assert row_json(value) == canonical_json(value)
    assert json.loads(row_json(value)) == json.loads(canonical_json(value))


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(value=st.dictionaries(st.text(), _VALUES, max_size=8))
def test_any_attribute_value_reads_back_as_the_standard_encoder_writes_it(value: dict[str, Any]) -> None:
    """Whatever the road: the same JSON value as the standard encoder's, and the very same text when no float is
    in it (orjson may write a float's digits otherwise: ``0.00001`` for ``1e-05``)."""
    standard = _STANDARD.encode(value)
    written = row_json(value)
    assert isinstance(written, str)
    assert json.loads(written) == json.loads(standard)
    if not _has_float(value):
        assert written == standard


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_float(v) for v in value)
    return False


def test_floats_text_may_differ_but_never_the_number(road: str) -> None:
    value = {"agentdiag.cost.usd": 1e-05, "ratio": 0.25, "big": 1e16}
    assert json.loads(row_json(value)) == value
    if road == "standard":
        assert row_json(value) == '{"agentdiag.cost.usd":1e-05,"ratio":0.25,"big":1e+16}'


def test_what_orjson_declines_or_nulls_is_written_the_standard_way(road: str) -> None:
    """A str subclass, an int beyond 64 bits, a non-str key, None and the text "null" in a value are each
    written exactly as the standard encoder writes them; what it refuses, row_json refuses too."""

    class Name(str):
        pass

    for value in (
        {"name": Name("x")},
        {"n": 2**70},
        {1: "one"},
        {"none": None},
        {"s": "null or not"},
    ):
        assert row_json(value) == _STANDARD.encode(value)

    @dataclasses.dataclass
    class Point:
        x: int

    for refused in ({"p": Point(1)}, {"d": datetime.date(2026, 12, 7)}, {"o": object()}):
        with pytest.raises(TypeError):
            _STANDARD.encode(refused)
        with pytest.raises(TypeError):
            row_json(refused)


def test_empty_values_and_non_container_values() -> None:
    assert (row_json({}), row_json([]), row_json(())) == ("{}", "[]", "[]")
    assert row_json(("a", 1)) == '["a",1]'
    assert row_json("text") == '"text"'
